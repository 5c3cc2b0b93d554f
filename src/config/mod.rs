//! A model described by configuration — its provider chosen at run time — and
//! the stack built of it: what `lmstack serve` reads from each `[models.NAME]`
//! table of its TOML file (docs/serve.md), for any application to read from
//! its own.
//!
//! [`ModelConfig`] is that table, read with serde (any format: TOML, JSON,
//! YAML) or built in code; [`ModelConfig::provider`] gives its
//! [`AnyProvider`], [`ModelConfig::stack`] the whole stack as one
//! [`BoxChatService`]: ToolLoop → FunctionCall (the tools of its MCP servers,
//! feature `mcp`) → NaturalToolUse (when `natural_tools` is set) → Retry
//! (feature `retry`) → the provider.
//!
//! ```
//! use lmstack::config::ModelConfig;
//! use lmstack::provider::Kind;
//!
//! # async fn run() -> Result<(), lmstack::Error> {
//! // In code …
//! let config = ModelConfig::new(Kind::Anthropic).model("claude-sonnet-4-5");
//! // … or from a file (this is JSON; `lmstack serve` reads TOML).
//! let config: ModelConfig = serde_json::from_str(
//!     r#"{"provider": "openai", "base_url": "http://127.0.0.1:8080/v1", "natural_tools": "hermes"}"#,
//! )
//! .unwrap();
//! let (stack, secrets) = config.stack("qwen").await?;
//! # let _ = (stack, secrets);
//! # Ok(())
//! # }
//! ```

#[cfg(feature = "mcp")]
mod command_line;

use std::num::NonZeroU32;
use std::time::Duration;

use serde::Deserialize;
use tower::ServiceBuilder;

use crate::deploy::Deployments;
use crate::natural::{Dialect, NaturalToolUse};
use crate::provider::any::{Known, Lowering, WithKnownWire, dispatch};
use crate::provider::transport::HttpConfig;
use crate::provider::{AnyProvider, ApiKey, Kind, Provider, ProviderConfig, Secrets};
use crate::{BoxChatService, ChatRequest, Error};

#[cfg(feature = "mcp")]
pub use command_line::mcp_command;

/// One model: its provider, where it lives and how it is reached, and the
/// layers around it — the `[models.NAME]` table of `lmstack serve`'s
/// configuration. Unknown fields are refused.
///
/// ```
/// use std::time::Duration;
///
/// use lmstack::config::{ModelConfig, NaturalTools};
/// use lmstack::natural::Dialect;
/// use lmstack::provider::Kind;
///
/// let config = ModelConfig::new(Kind::OpenAiChat)
///     .base_url("http://127.0.0.1:8080/v1")
///     .model("qwen3-8b")
///     .natural_tools(NaturalTools::Dialect(Dialect::Hermes))
///     .read_timeout(Duration::from_secs(30));
/// assert_eq!(config.max_concurrent, 16);
/// ```
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ModelConfig {
    /// The upstream's wire format: `openai`, `anthropic` or `gemini` (for a
    /// model of several [`deployments`](Self::deployments), the default of
    /// those that name none; a model needs one or the other).
    #[serde(default)]
    pub provider: Option<Kind>,
    /// The upstream's API root (the provider's own API when left out).
    pub base_url: Option<String>,
    /// The model the upstream is asked for (for a stack, its name when left
    /// out).
    pub model: Option<String>,
    /// The environment variable that holds the upstream's key (the provider's
    /// usual one, such as `OPENAI_API_KEY`, when left out; none is needed by
    /// local servers).
    pub api_key_env: Option<String>,
    /// The key itself, set in code ([`api_key`](Self::api_key)); never read
    /// from a file. It wins over the environment.
    #[serde(skip)]
    pub api_key: Option<ApiKey>,
    /// For a model without native tool calling: the tools go in the system
    /// prompt and calls are read from its text, in a dialect the transformer
    /// writes (`tagged`, `hermes`, `mistral`, …) or `model`.
    pub natural_tools: Option<NaturalTools>,
    /// With `natural_tools`: whether a request's `response_format` is sent on
    /// to the upstream when no tools are described in the prompt (on by
    /// default: llama.cpp and vLLM constrain the output to it). Off, for a
    /// server that takes none, the format is only asked for in the prompt and
    /// the stack checks the answer
    /// ([`NaturalToolUse::native_response_format`]). Off without
    /// `natural_tools` is refused by [`stack`](Self::stack): the format is then
    /// always sent.
    #[serde(default = "yes")]
    pub native_response_format: bool,
    /// Requests answered at once, for a gateway serving the model (16 by
    /// default).
    #[serde(default = "default_concurrency")]
    pub max_concurrent: usize,
    /// Other names a gateway answers for this model: those a client insists
    /// on ([`Gateway::alias`](crate::server::Gateway::alias), feature
    /// `server`).
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Retry calls that fail before their first event (on by default; feature
    /// `retry`).
    #[cfg(feature = "retry")]
    #[serde(default = "yes")]
    pub retry: bool,
    /// The model's prices per million tokens, for the spend budgets of a
    /// gateway's keys (`[models.NAME.price]`; feature `server`).
    #[cfg(feature = "server")]
    pub price: Option<crate::limit::Price>,
    /// The longest wait for the upstream's next bytes, in seconds.
    pub read_timeout_secs: Option<Seconds>,
    /// The longest one attempt at a whole (non-streaming) reply may take, in
    /// seconds.
    pub request_timeout_secs: Option<Seconds>,
    /// MCP servers run by the stack, by command line (stdio), split into words
    /// as [`mcp_command`] does (feature `mcp`).
    #[cfg(feature = "mcp")]
    #[serde(default)]
    pub mcp: Vec<String>,
    /// MCP servers the stack reaches over streamable HTTP (feature `mcp`).
    #[cfg(feature = "mcp")]
    #[serde(default)]
    pub mcp_urls: Vec<String>,
    /// Several upstreams serving the model (keys, regions, providers), over
    /// [`Deployments`]: the upstream fields of this table are the defaults of
    /// theirs. None: the table itself is the one upstream.
    #[serde(default)]
    pub deployments: Vec<DeploymentConfig>,
    /// Other models (by name) that answer, in order, when every deployment
    /// failed before the first event with an error worth another attempt —
    /// for a gateway ([`Gateway::fallbacks`](crate::server::Gateway::fallbacks),
    /// feature `server`).
    #[serde(default)]
    pub fallbacks: Vec<String>,
    /// Whether a gateway may forward a request of the upstream's own wire as
    /// it came, its answer as it comes, where nothing in the stack would
    /// change them (the same-wire fast path, [`forward`](Self::forward); on
    /// by default). Off, every request takes the full path: decoded, lifted
    /// and encoded again.
    #[serde(default = "yes")]
    pub fast_path: bool,
    /// With several deployments: how long one that failed takes no call, in
    /// seconds (30 by default; [`Deployments::cool_down`]).
    pub cool_down_secs: Option<Seconds>,
    /// With several deployments: the failures in a row that cool one down (3
    /// by default; [`Deployments::failures_to_open`]).
    pub failures_to_open: Option<u32>,
}

/// One upstream of a model of several ([`ModelConfig::deployments`], a
/// `[[models.NAME.deployments]]` table): its fields, where set, win over the
/// model table's. Unknown fields are refused.
///
/// ```
/// use lmstack::config::ModelConfig;
///
/// let config: ModelConfig = toml::from_str(r#"
///     provider = "anthropic"
///     model = "claude-sonnet-4-5"
///     [[deployments]]
///     api_key_env = "ANTHROPIC_KEY_EU"
///     weight = 2
///     [[deployments]]
///     provider = "openai"
///     base_url = "http://127.0.0.1:8080/v1"
///     model = "qwen3-8b"
/// "#)
/// .unwrap();
/// assert_eq!(config.deployments.len(), 2);
/// assert_eq!(config.upstream_name(), "anthropic+openai");
/// ```
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct DeploymentConfig {
    /// Its wire format (the model's when left out).
    pub provider: Option<Kind>,
    /// Its API root.
    pub base_url: Option<String>,
    /// The model it is asked for.
    pub model: Option<String>,
    /// The environment variable that holds its key.
    pub api_key_env: Option<String>,
    /// Its key, set in code; never read from a file.
    #[serde(skip)]
    pub api_key: Option<ApiKey>,
    /// Its tools as text ([`ModelConfig::natural_tools`]).
    pub natural_tools: Option<NaturalTools>,
    /// [`ModelConfig::native_response_format`], for it.
    pub native_response_format: Option<bool>,
    /// The longest wait for its next bytes, in seconds.
    pub read_timeout_secs: Option<Seconds>,
    /// The longest one attempt at a whole reply may take, in seconds.
    pub request_timeout_secs: Option<Seconds>,
    /// Its share of the calls and sessions, against the others' (1 by
    /// default; 0 is refused).
    pub weight: Option<NonZeroU32>,
}

impl DeploymentConfig {
    /// A deployment with every field the model's.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets its wire format.
    pub fn provider(mut self, kind: Kind) -> Self {
        self.provider = Some(kind);
        self
    }

    /// Sets its API root.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }

    /// Sets the model it is asked for.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sets the environment variable its key is read from.
    pub fn api_key_env(mut self, var: impl Into<String>) -> Self {
        self.api_key_env = Some(var.into());
        self
    }

    /// Sets its key (it wins over the environment).
    pub fn api_key(mut self, key: ApiKey) -> Self {
        self.api_key = Some(key);
        self
    }

    /// Sets its weight.
    pub fn weight(mut self, weight: NonZeroU32) -> Self {
        self.weight = Some(weight);
        self
    }
}

/// How a model without native tool calling is given tools: as text, in a
/// dialect (`natural_tools = "hermes"`), or in the one its name calls for
/// (`"model"`).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(try_from = "String")]
pub enum NaturalTools {
    /// Written in this dialect, by its CLI name.
    Dialect(Dialect),
    /// Picked from the upstream model's name (`NaturalToolUse::for_model`).
    Model,
}

impl TryFrom<String> for NaturalTools {
    type Error = String;

    fn try_from(name: String) -> Result<Self, String> {
        match name.as_str() {
            "model" => Ok(NaturalTools::Model),
            _ => Dialect::parse_rendered(&name)
                .map(NaturalTools::Dialect)
                .map_err(|error| format!("{error}; or model")),
        }
    }
}

/// A number of seconds, whole or not (`0.5`), as a duration.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(try_from = "f64")]
pub struct Seconds(pub Duration);

impl TryFrom<f64> for Seconds {
    type Error = String;

    fn try_from(seconds: f64) -> Result<Self, String> {
        Duration::try_from_secs_f64(seconds)
            .map(Seconds)
            .map_err(|_| format!("{seconds} is not a number of seconds (0 or more)"))
    }
}

fn default_concurrency() -> usize {
    16
}

fn yes() -> bool {
    true
}

impl ModelConfig {
    /// A model of the provider `kind` at its own API, with the defaults of a
    /// table that names only its `provider`.
    pub fn new(kind: Kind) -> Self {
        ModelConfig {
            provider: Some(kind),
            base_url: None,
            model: None,
            api_key_env: None,
            api_key: None,
            natural_tools: None,
            native_response_format: yes(),
            max_concurrent: default_concurrency(),
            aliases: Vec::new(),
            #[cfg(feature = "retry")]
            retry: yes(),
            #[cfg(feature = "server")]
            price: None,
            read_timeout_secs: None,
            request_timeout_secs: None,
            #[cfg(feature = "mcp")]
            mcp: Vec::new(),
            #[cfg(feature = "mcp")]
            mcp_urls: Vec::new(),
            deployments: Vec::new(),
            fallbacks: Vec::new(),
            fast_path: yes(),
            cool_down_secs: None,
            failures_to_open: None,
        }
    }

    /// Adds a deployment: with two or more, the model is served by all of
    /// them ([`deployments`](Self::deployments)).
    ///
    /// ```
    /// use lmstack::config::{DeploymentConfig, ModelConfig};
    /// use lmstack::provider::Kind;
    ///
    /// let config = ModelConfig::new(Kind::Anthropic)
    ///     .deployment(DeploymentConfig::new().api_key_env("ANTHROPIC_KEY_EU"))
    ///     .deployment(DeploymentConfig::new().api_key_env("ANTHROPIC_KEY_US"))
    ///     .fallback("gpt");
    /// assert_eq!(config.upstream_name(), "anthropic");
    /// ```
    pub fn deployment(mut self, deployment: DeploymentConfig) -> Self {
        self.deployments.push(deployment);
        self
    }

    /// Adds a model that answers when this one's deployments all failed.
    pub fn fallback(mut self, model: impl Into<String>) -> Self {
        self.fallbacks.push(model.into());
        self
    }

    /// Each upstream of the model, as a table of its own (its deployment's
    /// fields over the model's), with its weight: the table itself when it
    /// lists no deployments. A model without a provider for one is refused.
    fn upstreams(&self) -> Result<Vec<(ModelConfig, u32)>, Error> {
        let no_provider = |place: String| {
            Error::InvalidRequest(format!(
                "{place}: no provider (set `provider`, in the model's table or the \
                 deployment's)"
            ))
        };
        if self.deployments.is_empty() {
            if self.provider.is_none() {
                return Err(no_provider("the model".to_owned()));
            }
            return Ok(vec![(self.clone(), 1)]);
        }
        let mut upstreams = Vec::with_capacity(self.deployments.len());
        for (index, deployment) in self.deployments.iter().enumerate() {
            let d = deployment.clone();
            let mut one = self.clone();
            one.deployments = Vec::new();
            one.provider = d.provider.or(self.provider);
            if one.provider.is_none() {
                return Err(no_provider(format!("deployment {}", index + 1)));
            }
            one.base_url = d.base_url.or(one.base_url);
            one.model = d.model.or(one.model);
            one.api_key_env = d.api_key_env.or(one.api_key_env);
            one.api_key = d.api_key.or(one.api_key);
            one.natural_tools = d.natural_tools.or(one.natural_tools);
            one.native_response_format = d
                .native_response_format
                .unwrap_or(one.native_response_format);
            one.read_timeout_secs = d.read_timeout_secs.or(one.read_timeout_secs);
            one.request_timeout_secs = d.request_timeout_secs.or(one.request_timeout_secs);
            upstreams.push((one, d.weight.map_or(1, NonZeroU32::get)));
        }
        Ok(upstreams)
    }

    /// What serves the model, for logs and metrics: its upstreams' wire
    /// (`anthropic`), or their wires joined (`anthropic+openai`) when they
    /// differ; empty for a model without a provider.
    pub fn upstream_name(&self) -> String {
        let mut kinds: Vec<&str> = Vec::new();
        let deployed = self
            .deployments
            .iter()
            .map(|d| d.provider.or(self.provider));
        let listed: Vec<Option<Kind>> = match self.deployments.is_empty() {
            true => vec![self.provider],
            false => deployed.collect(),
        };
        for kind in listed.into_iter().flatten() {
            if !kinds.contains(&kind.name()) {
                kinds.push(kind.name());
            }
        }
        kinds.join("+")
    }

    /// Sets the API root.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }

    /// Sets the model the upstream is asked for.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sets the environment variable the key is read from.
    pub fn api_key_env(mut self, var: impl Into<String>) -> Self {
        self.api_key_env = Some(var.into());
        self
    }

    /// Sets the key (it wins over the environment).
    pub fn api_key(mut self, key: ApiKey) -> Self {
        self.api_key = Some(key);
        self
    }

    /// Gives the model its tools as text.
    pub fn natural_tools(mut self, natural: NaturalTools) -> Self {
        self.natural_tools = Some(natural);
        self
    }

    /// With [`natural_tools`](Self::natural_tools): sends a request's
    /// `response_format` on to the upstream, or (`false`) only asks for it in
    /// the prompt and checks the answer in the stack.
    ///
    /// ```
    /// use lmstack::config::{ModelConfig, NaturalTools};
    /// use lmstack::provider::Kind;
    ///
    /// let config: ModelConfig = toml::from_str(
    ///     "provider = \"openai\"\nnatural_tools = \"hermes\"\nnative_response_format = false",
    /// )
    /// .unwrap();
    /// assert!(!config.native_response_format);
    /// let built = ModelConfig::new(Kind::OpenAiChat)
    ///     .natural_tools(NaturalTools::Model)
    ///     .native_response_format(false);
    /// assert!(!built.native_response_format);
    /// ```
    pub fn native_response_format(mut self, sent_on: bool) -> Self {
        self.native_response_format = sent_on;
        self
    }

    /// Sets the requests a gateway answers at once.
    pub fn max_concurrent(mut self, requests: usize) -> Self {
        self.max_concurrent = requests;
        self
    }

    /// Adds a name a gateway answers for this model too.
    pub fn alias(mut self, name: impl Into<String>) -> Self {
        self.aliases.push(name.into());
        self
    }

    /// Turns the retry layer on or off.
    #[cfg(feature = "retry")]
    pub fn retry(mut self, retry: bool) -> Self {
        self.retry = retry;
        self
    }

    /// Sets the longest wait for the upstream's next bytes.
    pub fn read_timeout(mut self, timeout: Duration) -> Self {
        self.read_timeout_secs = Some(Seconds(timeout));
        self
    }

    /// Sets the longest one attempt at a whole reply may take.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout_secs = Some(Seconds(timeout));
        self
    }

    /// Adds an MCP server run by the stack, by its command line.
    #[cfg(feature = "mcp")]
    pub fn mcp(mut self, command_line: impl Into<String>) -> Self {
        self.mcp.push(command_line.into());
        self
    }

    /// Adds an MCP server reached over streamable HTTP.
    #[cfg(feature = "mcp")]
    pub fn mcp_url(mut self, url: impl Into<String>) -> Self {
        self.mcp_urls.push(url.into());
        self
    }

    /// The model's provider — asked for [`model`](Self::model) when a request
    /// names none — and the credentials it sends (for a server to scrub from
    /// what it tells its clients); for a model of several deployments, the
    /// first one's. The key is [`api_key`](Self::api_key), else read from
    /// [`api_key_env`](Self::api_key_env) or the provider's usual variable
    /// when set; none otherwise.
    pub fn provider(&self) -> Result<(AnyProvider, Secrets), Error> {
        let first = self.upstreams()?.into_iter().next();
        let (first, _) = first.ok_or_else(|| Error::InvalidRequest("no upstream".into()))?;
        first.own_provider()
    }

    /// The provider of a table that is one upstream.
    fn own_provider(&self) -> Result<(AnyProvider, Secrets), Error> {
        let kind = self
            .provider
            .ok_or_else(|| Error::InvalidRequest("no provider".into()))?;
        dispatch(kind, Lowering::default(), Build(self))?
    }

    /// The model's stack, named `name` (the model the upstream is asked for
    /// when [`model`](Self::model) is not set), and the credentials its
    /// upstreams send: ToolLoop → FunctionCall (the MCP servers' tools; calls
    /// of the client's tools, and of tools nobody declared, go back to the
    /// caller) → the upstream. One upstream is NaturalToolUse → Retry → the
    /// provider; several [`deployments`](Self::deployments) are
    /// [`Deployments`] over one such stack each (without Retry: a call that
    /// fails goes to the next deployment instead), weighted and cooled down
    /// as configured. With the feature `server`, each upstream fits a
    /// gateway's request to its own wire first ([`FitLayer`](crate::server::FitLayer)).
    /// Each layer is there only when configured. Every request is sent for the
    /// upstream's model, whatever model it names: the stack is one model (a
    /// gateway's clients name it by `name`).
    pub async fn stack(&self, name: &str) -> Result<(BoxChatService, Secrets), Error> {
        let upstreams = self.upstreams()?;
        let mut secrets = Secrets::new();
        let upstream = match &upstreams[..] {
            [(one, _)] => {
                let (stack, sent) = one.upstream_stack(name, true)?;
                secrets.extend([sent]);
                stack
            }
            several => {
                let mut stacks = Vec::with_capacity(several.len());
                for (one, weight) in several {
                    let (stack, sent) = one.upstream_stack(name, false)?;
                    secrets.extend([sent]);
                    stacks.push((stack, *weight));
                }
                let mut deployments = Deployments::weighted(stacks);
                if let Some(Seconds(cool_down)) = self.cool_down_secs {
                    deployments = deployments.cool_down(cool_down);
                }
                if let Some(failures) = self.failures_to_open {
                    deployments = deployments.failures_to_open(failures);
                }
                BoxChatService::new(deployments)
            }
        };
        #[cfg(feature = "mcp")]
        if let Some(registry) = self.mcp_registry().await? {
            use crate::function::{FunctionCallLayer, ToolLoopLayer, UnknownTools};
            let stack = ServiceBuilder::new()
                .layer(ToolLoopLayer::new())
                .layer(FunctionCallLayer::new(registry).unknown_tools(UnknownTools::PassThrough))
                .service(upstream);
            return Ok((BoxChatService::new(stack), secrets));
        }
        Ok((upstream, secrets))
    }

    /// The stack of a table that is one upstream, for the model `name`:
    /// Fit → NaturalToolUse → Retry (when `retried` and configured) → the
    /// provider.
    fn upstream_stack(
        &self,
        name: &str,
        retried: bool,
    ) -> Result<(BoxChatService, Secrets), Error> {
        let (provider, secrets) = self.own_provider()?;
        let upstream_model = self.model.as_deref().unwrap_or(name).to_owned();
        if !self.native_response_format && self.natural_tools.is_none() {
            return Err(Error::InvalidRequest(format!(
                "model `{name}`: native_response_format = false needs natural_tools"
            )));
        }
        let natural = self.natural_tools.map(|natural| {
            let layer = match natural {
                NaturalTools::Dialect(dialect) => NaturalToolUse::new().dialect(dialect),
                NaturalTools::Model => NaturalToolUse::for_model(&upstream_model),
            };
            layer.native_response_format(self.native_response_format)
        });
        #[cfg(feature = "retry")]
        let retry = (retried && self.retry).then(crate::retry::RetryLayer::default);
        #[cfg(not(feature = "retry"))]
        let retry = {
            let _ = retried;
            None::<tower::layer::util::Identity>
        };
        #[cfg(feature = "server")]
        let fit = self
            .provider
            .map(|kind| crate::server::FitLayer::new(kind, name));
        #[cfg(not(feature = "server"))]
        let fit = None::<tower::layer::util::Identity>;
        let stack = ServiceBuilder::new()
            .option_layer(fit)
            .option_layer(natural)
            .map_request(move |mut request: ChatRequest| {
                request.options.model = Some(upstream_model.clone());
                request
            })
            .option_layer(retry)
            .service(provider);
        Ok((BoxChatService::new(stack), secrets))
    }

    /// The model's upstream for a gateway's same-wire fast path
    /// ([`Gateway::forward`](crate::server::Gateway::forward)), named `name`
    /// as in [`stack`](Self::stack): its provider (built afresh), asked for
    /// the upstream's model, retried as the stack retries; `None` when the
    /// stack would change a request or its reply — several deployments,
    /// natural tools, MCP servers (the tool loop) — or `fast_path` is off.
    ///
    /// ```
    /// use lmstack::config::{ModelConfig, NaturalTools};
    /// use lmstack::natural::Dialect;
    /// use lmstack::provider::Kind;
    ///
    /// let plain = ModelConfig::new(Kind::OpenAiChat).base_url("http://127.0.0.1:8080/v1");
    /// assert!(plain.forward("qwen")?.is_some());
    /// let natural = plain.natural_tools(NaturalTools::Dialect(Dialect::Hermes));
    /// assert!(natural.forward("qwen")?.is_none());
    /// let mut full = ModelConfig::new(Kind::OpenAiChat);
    /// full.fast_path = false;
    /// assert!(full.forward("qwen")?.is_none());
    /// # Ok::<(), lmstack::Error>(())
    /// ```
    #[cfg(feature = "server")]
    pub fn forward(&self, name: &str) -> Result<Option<crate::server::Forward>, Error> {
        if !self.fast_path {
            return Ok(None);
        }
        #[cfg(feature = "mcp")]
        if !self.mcp.is_empty() || !self.mcp_urls.is_empty() {
            return Ok(None);
        }
        let mut upstreams = self.upstreams()?;
        let (Some((one, _)), None) = (upstreams.pop(), upstreams.pop()) else {
            return Ok(None);
        };
        if one.natural_tools.is_some() {
            return Ok(None);
        }
        let (provider, _) = one.own_provider()?;
        let model = one.model.as_deref().unwrap_or(name);
        let forward = crate::server::Forward::new(provider, model);
        #[cfg(feature = "retry")]
        let forward = match one.retry {
            true => forward.retry(crate::retry::RetryLayer::default()),
            false => forward,
        };
        Ok(Some(forward))
    }

    /// The model's token counter, named `name` as in [`stack`](Self::stack):
    /// its provider, asked to count each request for the upstream's model
    /// (what a gateway answers `POST /v1/messages/count_tokens` with; an
    /// upstream whose wire counts none answers 501).
    ///
    /// ```
    /// use lmstack::config::ModelConfig;
    /// use lmstack::provider::Kind;
    /// use lmstack::server::Gateway;
    ///
    /// # async fn run() -> Result<(), lmstack::Error> {
    /// let config = ModelConfig::new(Kind::Anthropic).model("claude-sonnet-4-5");
    /// let (stack, _secrets) = config.stack("claude").await?;
    /// let gateway = Gateway::new()
    ///     .model("claude", "anthropic", stack, config.max_concurrent)
    ///     .token_counter("claude", config.token_counter("claude")?);
    /// # let _ = gateway;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "server")]
    pub fn token_counter(&self, name: &str) -> Result<impl crate::provider::TokenCounter, Error> {
        let first = self.upstreams()?.into_iter().next();
        let (first, _) = first.ok_or_else(|| Error::InvalidRequest("no upstream".into()))?;
        let (provider, _) = first.own_provider()?;
        let model = first.model.as_deref().unwrap_or(name).to_owned();
        Ok(UpstreamCounter { provider, model })
    }

    /// A registry of the tools of the model's MCP servers (commands, then
    /// URLs), started or reached; `None` when it has none.
    #[cfg(feature = "mcp")]
    async fn mcp_registry(&self) -> Result<Option<crate::function::ToolRegistry>, Error> {
        use crate::function::mcp::{McpConfig, McpServer};
        if self.mcp.is_empty() && self.mcp_urls.is_empty() {
            return Ok(None);
        }
        let stdio = self.mcp.iter().map(|line| mcp_command(line));
        let http = self.mcp_urls.iter().map(|url| Ok(McpConfig::http(url)));
        let configs = stdio.chain(http).collect::<Result<Vec<_>, Error>>()?;
        let mut registry = crate::function::ToolRegistry::builder();
        for config in configs {
            registry = registry.source(McpServer::connect(config).await?);
        }
        Ok(Some(registry.build()?))
    }
}

/// A provider counting requests for the upstream's model.
#[cfg(feature = "server")]
struct UpstreamCounter {
    provider: AnyProvider,
    model: String,
}

#[cfg(feature = "server")]
impl crate::provider::TokenCounter for UpstreamCounter {
    fn count_tokens(
        &self,
        mut request: ChatRequest,
    ) -> futures::future::BoxFuture<'static, Result<u64, Error>> {
        request.options.model = Some(self.model.clone());
        self.provider.count_tokens(request)
    }
}

/// Building a [`ModelConfig`]'s provider, over its wire.
struct Build<'a>(&'a ModelConfig);

impl WithKnownWire for Build<'_> {
    type Output = Result<(AnyProvider, Secrets), Error>;

    fn run<W: Known>(self, wire: W) -> Self::Output {
        let model = self.0;
        let base_url = model.base_url.as_deref().unwrap_or(W::DEFAULT_BASE_URL);
        let mut config = ProviderConfig::new(base_url).wire(wire);
        if let Some(name) = &model.model {
            config = config.model(name);
        }
        let key_env = model.api_key_env.as_deref().unwrap_or(W::KEY_ENV);
        if let Some(key) = model
            .api_key
            .clone()
            .or_else(|| ApiKey::from_env(key_env).ok())
        {
            config = config.api_key(key);
        }
        let mut http = HttpConfig::default();
        if let Some(Seconds(timeout)) = model.read_timeout_secs {
            http = http.read_timeout(timeout);
        }
        if let Some(Seconds(timeout)) = model.request_timeout_secs {
            http = http.request_timeout(timeout);
        }
        let config = config.http(http);
        let secrets = config.secrets();
        Ok((Provider::new(config)?.into(), secrets))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_tools_takes_every_written_dialect_or_model() {
        for dialect in Dialect::RENDERED {
            let read = NaturalTools::try_from(dialect.name().to_owned());
            assert_eq!(read, Ok(NaturalTools::Dialect(dialect)));
        }
        assert_eq!(
            NaturalTools::try_from("model".to_owned()),
            Ok(NaturalTools::Model)
        );
        let error = NaturalTools::try_from("auto".to_owned()).unwrap_err();
        assert!(error.contains("granite; or model"), "{error}");
    }

    #[test]
    fn seconds_are_zero_or_more() {
        assert_eq!(
            Seconds::try_from(0.5),
            Ok(Seconds(Duration::from_millis(500)))
        );
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            assert!(Seconds::try_from(bad).is_err(), "{bad}");
        }
    }
}

//! The configuration of `lmstack serve` (TOML; a complete commented example is
//! in docs/serve.md), and the one place a configured model becomes its stack.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use lmstack::function::{FunctionCallLayer, ToolLoopLayer, ToolRegistry, UnknownTools};
use lmstack::natural::{Dialect, NaturalToolUse};
use lmstack::provider::transport::HttpConfig;
use lmstack::provider::{ApiKey, Kind, Provider as HttpProvider, ProviderConfig, Secrets, Wire};
use lmstack::retry::RetryLayer;
use lmstack::server::Stack;
use lmstack::{ChatRequest, Error};
use serde::Deserialize;
use tower::ServiceBuilder;
use tower::util::BoxCloneSyncService;

use crate::mcp_arg;
use crate::provider_arg::{self, WithWire, Writing};

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// How the gateway listens.
    #[serde(default)]
    pub server: Server,
    /// The models, by the name clients ask for.
    #[serde(default)]
    pub models: BTreeMap<String, Model>,
}

/// The `[server]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Server {
    /// The address to listen on (`--listen` wins).
    pub listen: Option<SocketAddr>,
    /// The environment variable that holds the clients' token
    /// (`LMSTACK_SERVE_TOKEN` when left out).
    pub token_env: Option<String>,
    /// The most bytes of a request body.
    pub body_limit: Option<usize>,
    /// The most bytes of request bodies read and decoded at once.
    pub body_budget: Option<usize>,
    /// Seconds a stream may be silent before a keep-alive goes out (0: none).
    pub keep_alive_secs: Option<Seconds>,
    /// Seconds for a request's head to arrive.
    pub header_timeout_secs: Option<Seconds>,
    /// Seconds for a request's whole body to arrive.
    pub body_timeout_secs: Option<Seconds>,
    /// Seconds a connection may sit idle, or leave its response unread.
    pub idle_timeout_secs: Option<Seconds>,
    /// The most connections open at once.
    pub max_connections: Option<usize>,
    /// Host names a gateway without a token answers besides loopback ones.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Browser origins that may call the gateway.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
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

/// One `[models.NAME]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// The upstream's wire format: `openai`, `anthropic` or `gemini`.
    pub provider: Kind,
    /// The upstream's API root (the provider's own API when left out).
    pub base_url: Option<String>,
    /// The model the upstream is asked for (the table's name when left out).
    pub model: Option<String>,
    /// The environment variable that holds the upstream's key (the provider's
    /// usual one, such as `OPENAI_API_KEY`, when left out; none is needed by
    /// local servers).
    pub api_key_env: Option<String>,
    /// For a model without native tool calling: the tools go in the system
    /// prompt and calls are read from its text, in a dialect the transformer
    /// writes (`tagged`, `hermes`, `mistral`, …) or `model`.
    pub natural_tools: Option<NaturalTools>,
    /// Requests answered at once; one more is refused with 429.
    #[serde(default = "default_concurrency")]
    pub max_concurrent: usize,
    /// Retry calls that fail before their first event (on by default).
    #[serde(default = "yes")]
    pub retry: bool,
    /// The longest wait for the upstream's next bytes, in seconds.
    pub read_timeout_secs: Option<Seconds>,
    /// The longest one attempt at a whole (non-streaming) reply may take, in
    /// seconds.
    pub request_timeout_secs: Option<Seconds>,
    /// MCP servers the gateway runs itself, by command line (stdio).
    #[serde(default)]
    pub mcp: Vec<String>,
    /// MCP servers the gateway reaches over streamable HTTP.
    #[serde(default)]
    pub mcp_urls: Vec<String>,
}

/// The natural tool-use dialects the file names.
#[derive(Clone, Copy, Debug, Deserialize)]
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

fn default_concurrency() -> usize {
    16
}

fn yes() -> bool {
    true
}

impl Config {
    /// Reads the file at `path`; a mistake names the file and the place.
    pub fn read(path: &Path) -> Result<Config, Error> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            Error::InvalidRequest(format!("reading {}: {error}", path.display()))
        })?;
        toml::from_str(&text)
            .map_err(|error| Error::InvalidRequest(format!("{}: {error}", path.display())))
    }
}

impl Model {
    /// The model's stack, and the credentials its upstream sends: ToolLoop → FunctionCall (the MCP servers' tools; calls
    /// of the client's tools, and of tools nobody declared, go back to the
    /// client) → [NaturalToolUse] → [Retry] → the provider.
    pub async fn stack(&self, name: &str) -> Result<(Stack, Secrets), Error> {
        let (upstream, secrets) = provider_arg::run(
            self.provider,
            Writing::default(),
            Upstream { model: self, name },
        )?;
        let options = mcp_arg::Options::default();
        let mut sources = Vec::new();
        for command in &self.mcp {
            sources.push(mcp_arg::connect(options.stdio(command)?).await?);
        }
        for url in &self.mcp_urls {
            sources.push(mcp_arg::connect(options.http(url)?).await?);
        }
        let natural = self.natural_tools.map(|dialect| match dialect {
            NaturalTools::Dialect(dialect) => NaturalToolUse::new().dialect(dialect),
            NaturalTools::Model => NaturalToolUse::for_model(self.model.as_deref().unwrap_or(name)),
        });
        if sources.is_empty() {
            let stack = ServiceBuilder::new()
                .option_layer(natural)
                .service(upstream);
            return Ok((BoxCloneSyncService::new(stack), secrets));
        }
        let mut registry = ToolRegistry::builder();
        for source in sources {
            registry = registry.source(source);
        }
        let stack = ServiceBuilder::new()
            .layer(ToolLoopLayer::new())
            .layer(
                FunctionCallLayer::new(registry.build()?).unknown_tools(UnknownTools::PassThrough),
            )
            .option_layer(natural)
            .service(upstream);
        Ok((BoxCloneSyncService::new(stack), secrets))
    }
}

/// The upstream of a model, over the chosen wire: [Retry →] the provider; and
/// the credentials it sends.
struct Upstream<'a> {
    model: &'a Model,
    name: &'a str,
}

impl WithWire for Upstream<'_> {
    type Output = Result<(Stack, Secrets), Error>;

    fn run<W: Wire>(self, wire: W) -> Result<(Stack, Secrets), Error> {
        let model = self.model;
        let base_url = model.base_url.as_deref().unwrap_or(W::DEFAULT_BASE_URL);
        let upstream_model = model.model.as_deref().unwrap_or(self.name);
        let mut config = ProviderConfig::new(base_url)
            .wire(wire)
            .model(upstream_model);
        let key_env = model.api_key_env.as_deref().unwrap_or(W::KEY_ENV);
        if let Ok(key) = ApiKey::from_env(key_env) {
            config = config.api_key(key);
        }
        let mut http = HttpConfig::default();
        if let Some(Seconds(timeout)) = model.read_timeout_secs {
            http = http.read_timeout(timeout);
        }
        if let Some(Seconds(timeout)) = model.request_timeout_secs {
            http = http.request_timeout(timeout);
        }
        config = config.http(http);
        let secrets = config.secrets();
        let provider = HttpProvider::new(config)?;
        let retry = model.retry.then(RetryLayer::default);
        // Clients name the gateway's model; the upstream is asked for its own.
        let upstream_model = upstream_model.to_owned();
        let stack = ServiceBuilder::new()
            .map_request(move |mut request: ChatRequest| {
                request.options.model = Some(upstream_model.clone());
                request
            })
            .option_layer(retry)
            .service(provider);
        Ok((BoxCloneSyncService::new(stack), secrets))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_tools_takes_every_written_dialect_or_model() {
        for dialect in Dialect::RENDERED {
            let read = NaturalTools::try_from(dialect.name().to_owned());
            assert!(matches!(read, Ok(NaturalTools::Dialect(d)) if d == dialect));
        }
        assert!(matches!(
            NaturalTools::try_from("model".to_owned()),
            Ok(NaturalTools::Model)
        ));
        let error = NaturalTools::try_from("auto".to_owned()).unwrap_err();
        assert!(error.contains("granite; or model"), "{error}");
    }
}

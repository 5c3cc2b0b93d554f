//! The gateway: stacks by model name, served over HTTP in the OpenAI Chat
//! Completions and Anthropic Messages formats, as an axum [`Router`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method};
use axum::response::Response;
use axum::routing::{get, post};
use tokio::sync::Semaphore;
use tower::{Service, ServiceExt};
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};
use tracing::Instrument;

use super::admit::refused;
use super::admit::{Admitted, Named, admit_to, enter};
use super::answer::{Answer, Refusal, answer, json_response, record};
use super::fallback::Fallback;
use super::fit::fit_to_named;
use super::format::{ChatCompletions, Decode, Format, Messages, MessagesCount};
use super::forward::{self, Forward};
use super::guard::{Guard, Route};
use super::response_store::{MemoryResponseStore, ResponseStore};
#[cfg(feature = "openai-responses")]
use super::responses::responses;
use super::{BearerToken, Metrics};
use crate::ChatRequest;
use crate::provider::{Secrets, TokenCounter, anthropic, openai_chat};
use crate::service::{BoxChatService, ChatService};

/// Serves stacks by model name: `POST /v1/chat/completions` (OpenAI), `POST
/// /v1/responses` (OpenAI Responses, feature `openai-responses`), `POST
/// /v1/messages` and `POST /v1/messages/count_tokens` (Anthropic), `GET
/// /v1/models` and `GET /v1/models/{id}` (in the client's format), `GET
/// /health` and `GET /metrics`; with the feature `gemini`, Gemini's `POST
/// /v1beta/models/{model}:generateContent`, `:streamGenerateContent` and
/// `:countTokens` and `GET /v1beta/models`; as an axum [`Router`] to serve or to mount in an application's
/// own (with `Router::nest` or `merge`, whatever the application's state: the
/// gateway's is its own; see [`router`](Self::router)).
///
/// A request in either format is decoded into a
/// [`ChatRequest`](crate::ChatRequest), run by the stack of the model it
/// names, and its reply encoded in the request's format, streamed (SSE) or
/// whole. So a client of one format can use a model behind
/// another provider, and a stack's layers (tools run by the gateway, natural
/// tool use for a text-only model) serve every client.
///
/// - **Access**: with a [`token`](Self::token), every route but `/health`
///   requires it (`Authorization: Bearer`, `x-api-key`, or a Gemini client's
///   `x-goog-api-key` or `?key=`), else 401. Without
///   one — fit only for loopback — a request must not be one a web page could
///   send: its `Host` must be a loopback name (or one of
///   [`allowed_hosts`](Self::allowed_hosts)), a browser `Origin` one of
///   [`allowed_origins`](Self::allowed_origins) (else 403; those origins also
///   get CORS answers), and a chat body `Content-Type: application/json` (else
///   415).
/// - **Limits**: a request's body must come whole within
///   [`body_timeout`](Self::body_timeout) (408 past it) and be at most
///   [`body_limit`](Self::body_limit) bytes (413); the bodies being read and
///   decoded at once hold at most [`body_budget`](Self::body_budget) bytes
///   (429 past it). Each model answers at most its `max_concurrent` requests at
///   once — its place is taken before the body is decoded — and one more is
///   refused at once with 429 (with `Retry-After`, as is an upstream's 429 or
///   503 that gave one).
/// - **Errors** are the format's own error bodies, with the status of
///   [`Error::http_status`](crate::Error::http_status): 4xx only for what the
///   client can fix (a body that does not decode names the field at fault),
///   404 for a model not served.
/// - **Streams** start within one [`keep_alive`](Self::keep_alive) interval,
///   whether or not the model has said anything yet (an upstream that thinks
///   for minutes, a retry): an error that comes before then is answered with
///   its own status, one after it is the format's in-stream error.
/// - **Cancellation**: a client that goes away drops its reply, which cancels
///   the upstream request and the tools still running.
/// - **Anthropic clients**: the beta flags of their `anthropic-beta` headers
///   go on to an Anthropic upstream (beside the upstream configuration's own)
///   and are dropped, with a logged warning, for another; their token counts
///   are the upstream's own, through a model's
///   [`token_counter`](Self::token_counter) (501 where it has none); they are
///   told apart by `anthropic-version` or `x-api-key` (without
///   `Authorization`), and get the models listed in Anthropic's shape.
/// - **Responses clients** continue a conversation by `previous_response_id`
///   from the gateway's [`response_store`](Self::response_store); reasoning of
///   another wire reaches them sealed in a reasoning item's
///   `encrypted_content` and comes back whole.
/// - **Tool calls** go to the client with their metadata sealed in their ids
///   ([`sealed_ids`](super::sealed_ids)) and come back restored.
/// - **Secrets**: what [`secrets`](Self::secrets) names never reaches a
///   client or a log line, and error answers do not say where an upstream
///   lives.
/// - **Observability**: a `tracing` span per request, and under it one per
///   upstream attempt (made by the providers), with the attributes of the
///   OpenTelemetry GenAI conventions (model, provider, token counts, finish
///   reasons, `error.type`; the conversation's text only where
///   `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`), one `info`
///   event per request (target `lmstack::gateway`: model, upstream, format,
///   status, duration, tokens) and the [`Metrics`] at `/metrics` (the GenAI
///   histograms among them). See docs/serve.md, "Observability".
///
/// The limits on connections — how long a request's head may take, how long a
/// connection may sit idle, how many may be open — belong to the server that
/// runs the router: [`serve`](super::serve) sets them (`axum::serve` sets
/// none, so a client that sends half a request holds its connection for
/// ever). Mount the router in your own server with the same care.
///
/// ```no_run
/// use lmstack::server::{ConnectionLimits, Gateway, serve};
/// use lmstack::testing::ScriptedModel;
///
/// # async fn run() -> std::io::Result<()> {
/// let model = ScriptedModel::new().reply("Hello from the gateway.");
/// let router = Gateway::new().model("demo", "scripted", model, 8).router();
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// serve(listener, router, ConnectionLimits::default(), std::future::pending()).await
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Gateway {
    pub(super) models: BTreeMap<String, Served>,
    aliases: BTreeMap<String, String>,
    fallbacks: BTreeMap<String, Vec<String>>,
    default_model: Option<String>,
    pub(super) guard: Guard,
    pub(super) body_limit: usize,
    pub(super) body_timeout: Duration,
    body_budget: Option<usize>,
    pub(super) keep_alive: Option<Duration>,
    pub(super) metrics: Metrics,
    pub(super) secrets: Secrets,
    counters: Counters,
    pub(super) responses: Stored,
}

/// Where the conversations of Responses clients are kept (read by the
/// Responses route only: kept, unread, in a build without it).
#[derive(Clone)]
#[cfg_attr(not(feature = "openai-responses"), allow(dead_code))]
pub(super) struct Stored(pub(super) Arc<dyn ResponseStore>);

impl std::fmt::Debug for Stored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ResponseStore")
    }
}

/// The token counters of the models that have one, by model name.
#[derive(Clone, Default)]
struct Counters(BTreeMap<String, Arc<dyn TokenCounter>>);

impl std::fmt::Debug for Counters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// A model the gateway serves.
#[derive(Clone)]
pub(super) struct Served {
    pub(super) stack: BoxChatService,
    pub(super) provider: String,
    pub(super) limit: Arc<Semaphore>,
    pub(super) max_concurrent: usize,
    /// The models tried when this one fails before its first event, in order
    /// (resolved by [`Gateway::router`]).
    pub(super) fallbacks: Arc<[Fallback]>,
    /// Its upstream, for the requests of its wire that take the fast path.
    pub(super) forward: Option<Arc<Forward>>,
}

impl std::fmt::Debug for Served {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Served")
            .field("provider", &self.provider)
            .field("max_concurrent", &self.max_concurrent)
            .field("fallbacks", &self.fallbacks.len())
            .field("forward", &self.forward)
            .finish_non_exhaustive()
    }
}

impl Default for Gateway {
    fn default() -> Self {
        Self::new()
    }
}

impl Gateway {
    /// The default limit of a request body: 32 MiB (room for a few images).
    pub const DEFAULT_BODY_LIMIT: usize = 32 << 20;

    /// The default time for a request's whole body to arrive: 60 s.
    pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(60);

    /// How long a stream may be silent before a keep-alive goes out, by
    /// default: 15 s (proxies commonly close a connection idle for 30 or 60).
    pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(15);

    /// A gateway serving no model yet, open to anyone on loopback (set a
    /// [`token`](Self::token) to serve other machines).
    pub fn new() -> Self {
        Gateway {
            models: BTreeMap::new(),
            aliases: BTreeMap::new(),
            fallbacks: BTreeMap::new(),
            default_model: None,
            guard: Guard::default(),
            body_limit: Self::DEFAULT_BODY_LIMIT,
            body_timeout: Self::DEFAULT_BODY_TIMEOUT,
            body_budget: None,
            keep_alive: Some(Self::DEFAULT_KEEP_ALIVE),
            metrics: Metrics::default(),
            secrets: Secrets::new(),
            counters: Counters::default(),
            responses: Stored(Arc::new(MemoryResponseStore::default())),
        }
    }

    /// Serves `stack` as the model `name`; `provider` names what answers (for
    /// logs and metrics: `openai`, `anthropic`, `gemini`…); at most
    /// `max_concurrent` requests at once (at least 1).
    ///
    /// Any stack that is `Clone + Send` will do: one that is not `Sync` (a
    /// `tower::util::BoxCloneService`) is kept behind a lock, taken only to
    /// clone it for each request.
    ///
    /// ```
    /// use lmstack::server::Gateway;
    /// use lmstack::testing::ScriptedModel;
    /// use tower::util::BoxCloneService;
    ///
    /// let stack = BoxCloneService::new(ScriptedModel::new().reply("Hi"));
    /// let gateway = Gateway::new().model("demo", "scripted", stack, 8);
    /// assert_eq!(gateway.model_names().collect::<Vec<_>>(), ["demo"]);
    /// ```
    pub fn model<S>(
        mut self,
        name: impl Into<String>,
        provider: impl Into<String>,
        stack: S,
        max_concurrent: usize,
    ) -> Self
    where
        S: ChatService + Clone + Send + 'static,
        S::Future: Send + 'static,
    {
        let name = name.into();
        let max_concurrent = max_concurrent.max(1);
        let stack = BoxChatService::new(Shareable(Mutex::new(stack.map_err(Into::into))));
        self.metrics.register(&name);
        self.models.insert(
            name,
            Served {
                stack,
                provider: provider.into(),
                limit: Arc::new(Semaphore::new(max_concurrent)),
                max_concurrent,
                fallbacks: Arc::new([]),
                forward: None,
            },
        );
        self
    }

    /// Counts the input tokens of the model `name`'s requests with `counter`
    /// (its upstream provider, whose wire's own count endpoint answers:
    /// [`TokenCounter`]), for `POST /v1/messages/count_tokens`; a model
    /// without one answers it 501. Its requests are counted as they would be
    /// sent: give it the model the upstream is asked for, as the stack does.
    ///
    /// ```
    /// use lmstack::provider::anthropic::{Anthropic, AnthropicConfig};
    /// use lmstack::server::Gateway;
    /// use lmstack::testing::ScriptedModel;
    ///
    /// let config = AnthropicConfig::new("http://127.0.0.1:8081/v1").model("claude-sonnet-4-5");
    /// let upstream = Anthropic::new(config)?;
    /// let gateway = Gateway::new()
    ///     .model("claude", "anthropic", upstream.clone(), 8)
    ///     .token_counter("claude", upstream);
    /// # Ok::<(), lmstack::Error>(())
    /// ```
    pub fn token_counter(mut self, name: impl Into<String>, counter: impl TokenCounter) -> Self {
        self.counters.0.insert(name.into(), Arc::new(counter));
        self
    }

    /// Forwards the model `name`'s requests that take the same-wire fast path
    /// to `forward`'s upstream as they came, and its answer to the client as
    /// it comes (see docs/serve.md, "Same-wire fast path"): a request of
    /// `forward`'s wire (OpenAI Chat, Anthropic Messages or Gemini), for a
    /// model without fallbacks, whose body needs nothing of the stack (no ids
    /// the gateway sealed, no structured output it checks), while the spans
    /// do not capture content. Every other request is answered by the model's
    /// stack — so give a `Forward` only to a model whose stack would not
    /// change such a request or its reply (its one upstream, at most a retry
    /// and limits: [`ModelConfig::forward`](crate::config::ModelConfig::forward));
    /// a stack that limits keys gives its [`LimitLayer`](crate::limit::LimitLayer)
    /// to [`Forward::limits`] too.
    /// Call it after [`model`](Self::model); a name not served is ignored.
    ///
    /// ```
    /// use lmstack::provider::AnyProvider;
    /// use lmstack::provider::openai_chat::{OpenAi, OpenAiConfig};
    /// use lmstack::server::{Forward, Gateway};
    ///
    /// let upstream = OpenAi::new(OpenAiConfig::new("http://127.0.0.1:8080/v1").model("qwen3-8b"))?;
    /// let forward = Forward::new(AnyProvider::from(upstream.clone()), "qwen3-8b");
    /// let gateway = Gateway::new()
    ///     .model("qwen", "openai", upstream, 8)
    ///     .forward("qwen", forward);
    /// # let _ = gateway;
    /// # Ok::<(), lmstack::Error>(())
    /// ```
    pub fn forward(mut self, name: &str, forward: Forward) -> Self {
        if let Some(served) = self.models.get_mut(name) {
            served.forward = Some(Arc::new(forward));
        }
        self
    }

    /// Keeps the conversations of Responses API clients in `store`, so that a
    /// request naming a `previous_response_id` continues one (a
    /// [`MemoryResponseStore`] of the default bounds unless set: replicas that
    /// must share conversations plug in a shared one). A conversation is saved
    /// once its reply is complete, unless the request said `store: false`; a
    /// request naming an id the store does not have is answered 400
    /// (`previous_response_not_found`).
    ///
    /// ```
    /// use lmstack::server::{Gateway, MemoryResponseStore};
    ///
    /// let gateway = Gateway::new().response_store(MemoryResponseStore::new(1_000, 64 << 20));
    /// # let _ = gateway;
    /// ```
    pub fn response_store(mut self, store: impl ResponseStore) -> Self {
        self.responses = Stored(Arc::new(store));
        self
    }

    /// Requires clients to present `token` on every route but `/health`: the
    /// key named `default` (see [`key`](Self::key)).
    pub fn token(self, token: BearerToken) -> Self {
        self.key("default", token)
    }

    /// Admits clients that present `token`, as the caller `name`: every
    /// route but `/health` then requires one of the keys. A chat request
    /// carries its [`Caller`](crate::limit::Caller) in its extensions (for a
    /// [`LimitLayer`](crate::limit::LimitLayer)) and its log line names it
    /// (`key`).
    ///
    /// ```
    /// use lmstack::server::{BearerToken, Gateway};
    ///
    /// let gateway = Gateway::new()
    ///     .key("alice", BearerToken::new("alice's key"))
    ///     .key("bob", BearerToken::new("bob's key"));
    /// # let _ = gateway;
    /// ```
    pub fn key(mut self, name: impl AsRef<str>, token: BearerToken) -> Self {
        let caller = crate::limit::Caller::new(name);
        self.guard.keys.retain(|(named, _)| *named != caller);
        self.guard.keys.push((caller, token));
        self
    }

    /// Host names (without port) a gateway without a token answers besides
    /// the loopback ones — the machine's own name on a trusted network, say.
    pub fn allowed_hosts<I: IntoIterator<Item = S>, S: Into<String>>(mut self, hosts: I) -> Self {
        let hosts = hosts
            .into_iter()
            .map(|host| host.into().to_ascii_lowercase());
        self.guard.allowed_hosts.extend(hosts);
        self
    }

    /// Browser origins (`http://localhost:3000`) that may call the gateway:
    /// they get CORS answers, and a gateway without a token refuses every
    /// other origin.
    pub fn allowed_origins<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        origins: I,
    ) -> Self {
        let origins = origins.into_iter().map(|origin| {
            let origin: String = origin.into();
            origin.trim().trim_end_matches('/').to_ascii_lowercase()
        });
        self.guard.allowed_origins.extend(origins);
        self
    }

    /// Credentials that no answer or log line may show: the upstreams' keys
    /// (`ProviderConfig::secrets`), the clients' token. Every error the
    /// gateway answers or logs is scrubbed of them, whole or masked — beside
    /// each transport, which scrubs what its own requests carried.
    pub fn secrets(mut self, secrets: Secrets) -> Self {
        self.secrets.extend([secrets]);
        self
    }

    /// Sets the most bytes of a request body read.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
        self
    }

    /// Sets the longest a request's whole body may take to arrive, from the
    /// end of its head (60 s by default): a client that sends it slowly, or
    /// not at all, is answered 408.
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout;
        self
    }

    /// Sets the most bytes of request bodies read and decoded at once, across
    /// all requests not yet running (4 × the body limit by default, and never
    /// less than the body limit): past it, a
    /// request is refused with 429 and `Retry-After`, so that many large
    /// bodies at once cannot fill the memory before any model's
    /// `max_concurrent` applies.
    pub fn body_budget(mut self, bytes: usize) -> Self {
        self.body_budget = Some(bytes);
        self
    }

    /// Sends a keep-alive on a stream that has been silent for `every` (checked
    /// every `every`, so after between one and two of them) — while the
    /// upstream thinks, or the gateway's tools run — so that proxies and
    /// clients with idle timeouts keep the connection: an SSE comment
    /// (`: keep-alive`) in the OpenAI format, Anthropic's own `ping` event in
    /// the Anthropic format; clients skip both. A stream's headers go out
    /// after one `every` at the latest, before the model's first event if need
    /// be. `None` sends none, and waits for the first event.
    pub fn keep_alive(mut self, every: Option<Duration>) -> Self {
        self.keep_alive = every;
        self
    }

    /// The counters the gateway keeps (a handle on the same counters).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The names of the models served.
    pub fn model_names(&self) -> impl Iterator<Item = &str> {
        self.models.keys().map(String::as_str)
    }

    /// Serves the model `model` under a second name too, one a client insists
    /// on (Claude Code's side model, a Gemini CLI flash model): requests for
    /// `alias` are answered by `model`'s stack, counted and logged as
    /// `model`'s; `GET /v1/models` lists the alias beside the models. An alias
    /// of a model not served answers 404 as an unknown name does.
    ///
    /// ```
    /// use lmstack::server::Gateway;
    /// use lmstack::testing::ScriptedModel;
    ///
    /// let gateway = Gateway::new()
    ///     .model("local", "scripted", ScriptedModel::new(), 8)
    ///     .alias("claude-haiku-4-5", "local");
    /// assert_eq!(gateway.resolve("claude-haiku-4-5"), Some("local"));
    /// assert_eq!(gateway.resolve("gpt-5"), None);
    /// ```
    pub fn alias(mut self, alias: impl Into<String>, model: impl Into<String>) -> Self {
        self.aliases.insert(alias.into(), model.into());
        self
    }

    /// Has the model `model` fall back to the models `fallbacks`, in order:
    /// when its stack fails before the first event of its reply with an error
    /// worth another attempt (429, 5xx, a failed connection, a timeout), the
    /// first fallback is asked, with the client's request as it came, and so
    /// on. A fallback answers from its own stack, within its own
    /// `max_concurrent` (one with no place free is passed over), and is named
    /// in the request's log line (`fallback`); its own fallbacks are not
    /// tried. Names not served are left out.
    ///
    /// ```
    /// use lmstack::server::Gateway;
    /// use lmstack::testing::ScriptedModel;
    ///
    /// let gateway = Gateway::new()
    ///     .model("claude", "anthropic", ScriptedModel::new(), 8)
    ///     .model("local", "scripted", ScriptedModel::new().reply("Hi"), 8)
    ///     .fallbacks("claude", ["local"]);
    /// # let _ = gateway;
    /// ```
    pub fn fallbacks<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        model: impl Into<String>,
        fallbacks: I,
    ) -> Self {
        let fallbacks = fallbacks.into_iter().map(Into::into).collect();
        self.fallbacks.insert(model.into(), fallbacks);
        self
    }

    /// Resolves each model's fallbacks to the models served.
    fn resolve_fallbacks(&mut self) {
        for (model, names) in &self.fallbacks {
            let resolved: Arc<[Fallback]> = names
                .iter()
                .filter(|name| *name != model)
                .filter_map(|name| {
                    let served = self.models.get(name)?.clone();
                    let name = name.clone();
                    Some(Fallback { name, served })
                })
                .collect();
            if let Some(served) = self.models.get_mut(model) {
                served.fallbacks = resolved;
            }
        }
    }

    /// Answers requests for any name not served (nor an alias) with the model
    /// `model`, instead of a 404. Off by default: a client that names a model
    /// by mistake is then answered by another without a word, so set it only
    /// for clients that insist on names of their own.
    ///
    /// ```
    /// use lmstack::server::Gateway;
    /// use lmstack::testing::ScriptedModel;
    ///
    /// let gateway = Gateway::new()
    ///     .model("local", "scripted", ScriptedModel::new(), 8)
    ///     .default_model("local");
    /// assert_eq!(gateway.resolve("gemini-2.5-flash-lite"), Some("local"));
    /// ```
    pub fn default_model(mut self, model: impl Into<String>) -> Self {
        self.default_model = Some(model.into());
        self
    }

    /// The model served for a request that names `name`: itself, the model
    /// it is an alias of, or the default model; `None` when none is served.
    pub fn resolve(&self, name: &str) -> Option<&str> {
        self.served(name).map(|(name, _)| name)
    }

    /// [`resolve`](Self::resolve), with the model served.
    pub(super) fn served(&self, name: &str) -> Option<(&str, &Served)> {
        let aliased = self.aliases.get(name).map(String::as_str);
        [Some(name), aliased, self.default_model.as_deref()]
            .into_iter()
            .flatten()
            .find_map(|name| self.models.get_key_value(name))
            .map(|(name, served)| (name.as_str(), served))
    }

    /// The names clients may ask for by name: the models', then the aliases
    /// of those served.
    pub(super) fn listed_names(&self) -> impl Iterator<Item = &str> {
        let aliases = self.aliases.iter();
        let served_aliases = aliases
            .filter(|(_, model)| self.models.contains_key(*model))
            .map(|(alias, _)| alias.as_str());
        self.model_names().chain(served_aliases)
    }

    /// The router, for an application of any state `S`: serve it as it is
    /// (`Router<()>`), or nest it under a path of an application's own router
    /// (its state is the gateway's own, already given).
    ///
    /// ```
    /// use axum::Router;
    /// use axum::extract::{Path, State};
    /// use axum::routing::get;
    /// use lmstack::server::Gateway;
    /// use lmstack::testing::ScriptedModel;
    ///
    /// #[derive(Clone)]
    /// struct App {
    ///     greeting: &'static str,
    /// }
    ///
    /// let gateway = Gateway::new().model("demo", "scripted", ScriptedModel::new(), 8);
    /// let app: Router = Router::new()
    ///     .route("/hello", get(|State(app): State<App>| async move { app.greeting }))
    ///     .nest("/llm", gateway.router())
    ///     .with_state(App { greeting: "hi" });
    /// # let _ = app;
    /// ```
    pub fn router<S: Clone + Send + Sync + 'static>(mut self) -> Router<S> {
        self.resolve_fallbacks();
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        // Room for one body of the largest size, at least.
        let budget = self
            .body_budget
            .unwrap_or(self.body_limit.saturating_mul(4))
            .max(self.body_limit)
            .min(Semaphore::MAX_PERMITS);
        let cors = cors(&self.guard.allowed_origins);
        let shared = Arc::new(Shared {
            gateway: self,
            created,
            budget: Arc::new(Semaphore::new(budget)),
        });
        let router = Router::new()
            .route("/v1/chat/completions", post(chat::<ChatCompletions>))
            .route("/v1/messages", post(chat::<Messages>))
            .route("/v1/messages/count_tokens", post(count_tokens))
            .route("/v1/models", get(models))
            .route("/v1/models/{*id}", get(model))
            .route("/health", get(|| async { "ok" }))
            .route("/metrics", get(metrics));
        #[cfg(feature = "openai-responses")]
        let router = router.route("/v1/responses", post(responses));
        #[cfg(feature = "gemini")]
        let router = super::gemini_routes::route(router);
        let router = router.with_state(shared);
        match cors {
            Some(cors) => router.layer(cors),
            None => router,
        }
    }
}

/// A stack that is `Clone + Send` made `Sync`: kept behind a lock, taken only
/// to clone it (the gateway clones a model's stack for each request; the clone
/// is called without one).
struct Shareable<S>(Mutex<S>);

impl<S: Clone> Clone for Shareable<S> {
    fn clone(&self) -> Self {
        // A stack's `clone` that panicked left nothing half-changed to see.
        let stack = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        Shareable(Mutex::new(stack.clone()))
    }
}

impl<S: Service<R>, R> Service<R> for Shareable<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner().poll_ready(cx)
    }

    fn call(&mut self, request: R) -> S::Future {
        self.inner().call(request)
    }
}

impl<S> Shareable<S> {
    fn inner(&mut self) -> &mut S {
        self.0.get_mut().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The CORS answers for `origins`, if any are allowed.
fn cors(origins: &[String]) -> Option<CorsLayer> {
    let origins: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|origin| HeaderValue::from_str(origin).ok())
        .collect();
    (!origins.is_empty()).then(|| {
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins))
            .allow_methods([Method::GET, Method::POST])
            .allow_headers(AllowHeaders::mirror_request())
            .max_age(Duration::from_secs(600))
    })
}

/// What the handlers share.
pub(super) struct Shared {
    pub(super) gateway: Gateway,
    /// When the router was made: the `created` of the models listed.
    created: u64,
    /// Bytes of request bodies that may be held before their requests run.
    pub(super) budget: Arc<Semaphore>,
}

/// `POST` of a chat request in format `F`.
async fn chat<F: Format>(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    chat_named::<F>(shared, headers, body, None).await
}

/// A chat request in format `F`, whose model and mode its path may name
/// (`named`).
pub(super) async fn chat_named<F: Format>(
    shared: Arc<Shared>,
    headers: HeaderMap,
    body: Body,
    named: Option<Named>,
) -> Response {
    let started = std::time::Instant::now();
    let entered = match enter::<F>(&shared, &headers, body, named).await {
        Ok(entered) => entered,
        Err(refusal) => return refusal.respond::<F>(&shared.gateway, started),
    };
    if let Some(plan) = forward::plan::<F>(&entered, &headers) {
        return forward::answer::<F>(&shared.gateway, plan, entered, started).await;
    }
    let encoder = |request: &ChatRequest, name: &str| F::encoder(request, name, SystemTime::now());
    match entered.admit::<F, _>(&headers, encoder) {
        Ok(Admitted {
            request,
            name,
            served,
            permit,
            prepared: encoder,
        }) => {
            let answering = Answer::new::<F>(&shared.gateway, &name, &served, &request, started);
            let span = answering.span().clone();
            let keep_alive = shared.gateway.keep_alive;
            answer::<F>(request, encoder, served, permit, keep_alive, answering)
                .instrument(span)
                .await
        }
        Err(refusal) => refusal.respond::<F>(&shared.gateway, started),
    }
}

/// `POST /v1/messages/count_tokens`: the model's upstream counts the
/// request's input tokens (`{"input_tokens": N}`), or says why not.
async fn count_tokens(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let answer = |tokens| serde_json::json!({ "input_tokens": tokens });
    count::<MessagesCount, Messages>(&shared, &headers, body, None, answer).await
}

/// A token count read as `D` reads it (its model maybe `named` by its path),
/// counted by the model's upstream and answered in format `F` (`answer`
/// writes the count), or why not.
pub(super) async fn count<D: Decode, F: Format>(
    shared: &Shared,
    headers: &HeaderMap,
    body: Body,
    named: Option<Named>,
    answer: impl FnOnce(u64) -> serde_json::Value,
) -> Response {
    let started = std::time::Instant::now();
    let gateway = &shared.gateway;
    let admitted = match admit_to::<D, _>(shared, headers, body, named, |_, _| ()).await {
        Ok(admitted) => admitted,
        Err(refusal) => return refusal.respond::<F>(gateway, started),
    };
    let Admitted {
        mut request,
        name,
        served,
        permit,
        prepared: (),
    } = admitted;
    fit_to_named(&mut request, &served.provider, &name);
    let counted = match gateway.counters.0.get(&name) {
        Some(counter) => counter.count_tokens(request).await,
        None => Err(refused(
            501,
            format!("the model `{name}` has no token count here: its upstream counts none"),
        )),
    };
    drop(permit);
    match counted {
        Ok(tokens) => {
            let upstream = Some((name, served.provider.clone()));
            record::<F>(gateway, upstream, 200, started, None);
            let body = answer(tokens).to_string();
            json_response(200, body.into(), "application/json")
        }
        Err(error) => Refusal::for_model(&name, &served, error).respond::<F>(gateway, started),
    }
}

/// Whether a request comes from an Anthropic client: it names an
/// `anthropic-version`, or presents its key as `x-api-key` without an
/// `Authorization` (as Anthropic's SDKs do, and OpenAI's never).
fn from_anthropic_client(headers: &HeaderMap) -> bool {
    headers.contains_key("anthropic-version")
        || headers.contains_key("x-api-key")
            && !headers.contains_key(axum::http::header::AUTHORIZATION)
}

/// The refusal of a `GET` of what the gateway serves or counts, if it is
/// refused, in the client's format.
fn refuse_read(shared: &Shared, headers: &HeaderMap) -> Option<Response> {
    let error = shared.gateway.guard.check(headers, Route::Read).err()?;
    Some(refuse_in_format(shared, headers, error))
}

/// `error`'s answer to a `GET`, in the client's format.
fn refuse_in_format(shared: &Shared, headers: &HeaderMap, error: crate::Error) -> Response {
    let started = std::time::Instant::now();
    let refusal = Refusal::before_model(error);
    match from_anthropic_client(headers) {
        true => refusal.respond::<Messages>(&shared.gateway, started),
        false => refusal.respond::<ChatCompletions>(&shared.gateway, started),
    }
}

/// `GET /v1/models`, in Anthropic's shape for an Anthropic client, else
/// OpenAI's.
async fn models(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Some(refused) = refuse_read(&shared, &headers) {
        return refused;
    }
    let models: Vec<(&str, u64)> = shared
        .gateway
        .listed_names()
        .map(|name| (name, shared.created))
        .collect();
    let body = match from_anthropic_client(&headers) {
        true => anthropic::models_body(&models),
        false => openai_chat::models_body(&models),
    };
    json_response(200, body.to_string().into(), "application/json")
}

/// `GET /v1/models/{id}`: one model served, in the client's shape; 404 for
/// one that is not.
async fn model(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = refuse_read(&shared, &headers) {
        return refused;
    }
    if !shared.gateway.listed_names().any(|name| name == id) {
        let error = refused(
            404,
            "no such model is served here (GET /v1/models lists those that are)",
        );
        return refuse_in_format(&shared, &headers, error);
    }
    let body = match from_anthropic_client(&headers) {
        true => anthropic::model_body(&id, shared.created),
        false => openai_chat::model_body(&id, shared.created),
    };
    json_response(200, body.to_string().into(), "application/json")
}

/// `GET /metrics`.
async fn metrics(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Some(refused) = refuse_read(&shared, &headers) {
        return refused;
    }
    json_response(
        200,
        shared.gateway.metrics.render().into(),
        "text/plain; version=0.0.4",
    )
}

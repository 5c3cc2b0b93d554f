//! The gateway: stacks by model name, served over HTTP in the OpenAI Chat
//! Completions and Anthropic Messages formats, as an axum [`Router`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;
use tower::util::BoxCloneSyncService;
use tracing::Instrument;

use super::coalesce::Coalesce;
use super::extras::carry;
use super::format::{ChatCompletions, Format, Messages};
use super::sealed_ids::{SealCallIds, open_request};
use super::{BearerToken, InFlight, Metrics};
use crate::service::{ChatService, MachineStream};
use crate::{ChatRequest, Error, Event, Reply};

/// A stack as the gateway holds it.
pub type Stack = BoxCloneSyncService<ChatRequest, Reply, Error>;

/// Serves stacks by model name: `POST /v1/chat/completions` (OpenAI), `POST
/// /v1/messages` (Anthropic), `GET /v1/models`, `GET /health` and `GET
/// /metrics`, as an axum [`Router`] to serve or to mount in an application's
/// own.
///
/// A request in either format is decoded into a [`ChatRequest`], run by the
/// stack of the model it names, and its reply encoded in the request's format,
/// streamed (SSE) or whole. So a client of one format can use a model behind
/// another provider, and a stack's layers (tools run by the gateway, natural
/// tool use for a text-only model) serve every client.
///
/// - **Access**: with a [`token`](Self::token), a request must present it
///   (`Authorization: Bearer` or `x-api-key`), else 401.
/// - **Limits**: the body is read up to [`body_limit`](Self::body_limit)
///   (413 past it); each model answers at most its `max_concurrent` requests at
///   once, and one more is refused at once with 429.
/// - **Errors** are the format's own error bodies, with the status of
///   [`Error::http_status`]: 4xx only for what the client can fix (a body that
///   does not decode names the field at fault), 404 for a model not served.
/// - **Cancellation**: a client that goes away drops its reply, which cancels
///   the upstream request and the tools still running.
/// - **Tool calls** go to the client with their metadata sealed in their ids
///   ([`sealed_ids`](super::sealed_ids)) and come back restored.
/// - **Observability**: a `tracing` span per request (`gen_ai.*` attributes of
///   the OpenTelemetry GenAI conventions: model, provider, token counts, finish
///   reason) and the [`Metrics`] at `/metrics`.
///
/// Serve it on a listener whose connections set `TCP_NODELAY`, or each SSE
/// frame waits for the client's delayed ACK (Nagle's algorithm):
///
/// ```no_run
/// use lmstack::server::Gateway;
/// use lmstack::testing::ScriptedModel;
///
/// # async fn run() -> std::io::Result<()> {
/// let model = ScriptedModel::new().reply("Hello from the gateway.");
/// let router = Gateway::new().model("demo", "scripted", model, 8).router();
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
///     let _ = tcp.set_nodelay(true);
/// });
/// axum::serve(listener, router).await
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Gateway {
    models: BTreeMap<String, Served>,
    token: Option<BearerToken>,
    body_limit: usize,
    keep_alive: Option<Duration>,
    metrics: Metrics,
}

/// A model the gateway serves.
#[derive(Clone)]
struct Served {
    stack: Stack,
    provider: String,
    limit: Arc<Semaphore>,
    max_concurrent: usize,
}

impl std::fmt::Debug for Served {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Served")
            .field("provider", &self.provider)
            .field("max_concurrent", &self.max_concurrent)
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

    /// How long a stream may be silent before a keep-alive goes out, by
    /// default: 15 s (proxies commonly close a connection idle for 30 or 60).
    pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(15);

    /// A gateway serving no model yet, open to anyone (bind it to loopback, or
    /// set a [`token`](Self::token)).
    pub fn new() -> Self {
        Gateway {
            models: BTreeMap::new(),
            token: None,
            body_limit: Self::DEFAULT_BODY_LIMIT,
            keep_alive: Some(Self::DEFAULT_KEEP_ALIVE),
            metrics: Metrics::default(),
        }
    }

    /// Serves `stack` as the model `name`; `provider` names what answers (for
    /// logs and metrics: `openai`, `anthropic`, `gemini`…); at most
    /// `max_concurrent` requests at once (at least 1).
    pub fn model<S>(
        mut self,
        name: impl Into<String>,
        provider: impl Into<String>,
        stack: S,
        max_concurrent: usize,
    ) -> Self
    where
        S: ChatService + Clone + Send + Sync + 'static,
        S::Future: Send + 'static,
    {
        let max_concurrent = max_concurrent.max(1);
        let stack = BoxCloneSyncService::new(stack.map_err(Into::into));
        self.models.insert(
            name.into(),
            Served {
                stack,
                provider: provider.into(),
                limit: Arc::new(Semaphore::new(max_concurrent)),
                max_concurrent,
            },
        );
        self
    }

    /// Requires clients to present `token`.
    pub fn token(mut self, token: BearerToken) -> Self {
        self.token = Some(token);
        self
    }

    /// Sets the most bytes of a request body read.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
        self
    }

    /// Sends a keep-alive on a stream that has been silent for `every` (checked
    /// every `every`, so after between one and two of them) — while the
    /// upstream thinks, or the gateway's tools run — so that proxies and
    /// clients with idle timeouts keep the connection: an SSE comment
    /// (`: keep-alive`) in the OpenAI format, Anthropic's own `ping` event in
    /// the Anthropic format; clients skip both. `None` sends none.
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

    /// The router.
    pub fn router(self) -> Router {
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let shared = Arc::new(Shared {
            gateway: self,
            created,
        });
        Router::new()
            .route("/v1/chat/completions", post(chat::<ChatCompletions>))
            .route("/v1/messages", post(chat::<Messages>))
            .route("/v1/models", get(models))
            .route("/health", get(|| async { "ok" }))
            .route("/metrics", get(metrics))
            .with_state(shared)
    }
}

struct Shared {
    gateway: Gateway,
    /// When the router was made: the `created` of the models listed.
    created: u64,
}

/// `POST` of a chat request in format `F`.
async fn chat<F: Format>(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let gateway = &shared.gateway;
    let admitted = match admit::<F>(gateway, &headers, body).await {
        Ok(admitted) => admitted,
        Err((model, error)) => {
            let (status, body) = F::error(&error);
            gateway
                .metrics
                .answered(&model, F::NAME, status, started.elapsed());
            tracing::info!(format = F::NAME, model, status, "refused: {error}");
            return json_response(status, body.to_string().into(), "application/json");
        }
    };
    let Admitted {
        request,
        name,
        served,
        permit,
    } = admitted;
    let span = tracing::info_span!(
        "chat",
        otel.name = %format!("chat {name}"),
        gen_ai.operation.name = "chat",
        gen_ai.system = %served.provider,
        gen_ai.request.model = %name,
        lmstack.format = F::NAME,
        gen_ai.request.stream = request.options.stream,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        gen_ai.response.finish_reasons = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
    );
    let answer = Answer {
        metrics: gateway.metrics.clone(),
        model: name.clone(),
        format: F::NAME,
        started,
        span: span.clone(),
        in_flight: Some(gateway.metrics.start(&name)),
        permit: Some(permit),
        status: 200,
    };
    run::<F>(request, name, served, shared.gateway.keep_alive, answer)
        .instrument(span)
        .await
}

/// A request let in: decoded, its model found, a place taken.
struct Admitted {
    request: ChatRequest,
    name: String,
    served: Served,
    permit: OwnedSemaphorePermit,
}

/// Checks the token, reads and decodes the body, finds the model and takes one
/// of its places; else the error to answer (and the model it was for, if known).
async fn admit<F: Format>(
    gateway: &Gateway,
    headers: &HeaderMap,
    body: Body,
) -> Result<Admitted, (String, Error)> {
    let header = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(token) = &gateway.token
        && !token.accepts(
            header(header::AUTHORIZATION),
            headers.get("x-api-key").and_then(|v| v.to_str().ok()),
        )
    {
        return Err((
            String::new(),
            refused(401, "a valid bearer token is required"),
        ));
    }
    let limit = gateway.body_limit;
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|_| {
        let message = format!("the request body is larger than the limit of {limit} bytes");
        (String::new(), refused(413, message))
    })?;
    let mut request = F::decode(&bytes).map_err(|error| (String::new(), error))?;
    let Some(name) = request.options.model.clone() else {
        let error = Error::InvalidRequest("model: missing field `model`".into());
        return Err((String::new(), error));
    };
    let Some(served) = gateway.models.get(&name) else {
        let message =
            format!("the model `{name}` is not served here (GET /v1/models lists those that are)");
        return Err((name, refused(404, message)));
    };
    let dropped = carry(&mut request.options.extra, F::NAME, &served.provider);
    if !dropped.is_empty() {
        tracing::warn!(
            "options the `{}` upstream of `{name}` does not take were dropped: {}",
            served.provider,
            dropped.join(", ")
        );
    }
    let Ok(permit) = served.limit.clone().try_acquire_owned() else {
        let message = format!(
            "the model `{name}` is answering its limit of {} requests at once; try again shortly",
            served.max_concurrent
        );
        return Err((name, refused(429, message)));
    };
    open_request(&mut request);
    Ok(Admitted {
        request,
        name,
        served: served.clone(),
        permit,
    })
}

fn refused(status: u16, message: impl Into<String>) -> Error {
    Error::Refused {
        status,
        message: message.into(),
    }
}

/// Runs the request and answers: a stream is sent as it comes, a whole reply
/// once it is complete.
async fn run<F: Format>(
    request: ChatRequest,
    name: String,
    served: Served,
    keep_alive: Option<Duration>,
    mut answer: Answer,
) -> Response {
    let stream = request.options.stream;
    let encoder = F::encoder(&request, &name, SystemTime::now());
    let reply = match served.stack.oneshot(request).await {
        Ok(reply) => reply,
        Err(error) => {
            let (status, body) = F::error(&error);
            answer.status = status;
            tracing::warn!("failed before the reply: {error}");
            return json_response(status, body.to_string().into(), "application/json");
        }
    };
    let tap = answer.span.clone();
    let metrics = (answer.metrics.clone(), name);
    let items = reply.map(move |item| {
        if let Ok(event) = &item {
            observe(event, &tap, &metrics);
        }
        Ok(item)
    });
    let sealed = MachineStream::new(items, SealCallIds::new());
    let mut encoded = MachineStream::new(sealed, encoder);
    if stream {
        let content_type = F::content_type(encoded.machine());
        // The body ends where the encoder ends; it owns the answer's guards,
        // so a client that goes away drops the reply and frees the place.
        let body = async_stream::stream! {
            let _answer = answer;
            // One timer for the stream, not one per frame: a tick that finds
            // no frame since the one before sends a keep-alive.
            let mut ticks = keep_alive.map(|every| {
                let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                ticks
            });
            let mut framed = false;
            loop {
                // `next` loses nothing when a tick wins: it is asked again.
                let next = match ticks.as_mut() {
                    Some(ticks) => tokio::select! {
                        next = encoded.next() => next,
                        _ = ticks.tick() => {
                            if !std::mem::take(&mut framed) {
                                yield Ok(Bytes::from_static(F::KEEP_ALIVE));
                            }
                            continue;
                        }
                    },
                    None => encoded.next().await,
                };
                let Some(item) = next else { break };
                framed = true;
                match item {
                    Ok(bytes) => yield Ok::<Bytes, Error>(bytes),
                    Err(error) => {
                        tracing::warn!("the reply could not be written: {error}");
                        break;
                    }
                }
            }
        };
        // Frames ready together (a burst from the upstream) go out as one
        // chunk: one write and one chunk header instead of one per frame.
        let body = Coalesce::new(Box::pin(body), STREAM_CHUNK_BYTES);
        let mut response = Response::new(Body::from_stream(body));
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        return response;
    }
    let mut body = Vec::new();
    while let Some(item) = encoded.next().await {
        match item {
            Ok(bytes) => body.extend_from_slice(&bytes),
            Err(error) => {
                let (status, error_body) = F::error(&error);
                answer.status = status;
                return json_response(status, error_body.to_string().into(), "application/json");
            }
        }
    }
    answer.status = F::status(encoded.machine());
    json_response(
        answer.status,
        body.into(),
        F::content_type(encoded.machine()),
    )
}

/// The most bytes of ready SSE frames joined into one chunk of a streamed
/// body.
const STREAM_CHUNK_BYTES: usize = 32 << 10;

/// Records what an event says about the reply: tokens, the finish reason.
fn observe(event: &Event, span: &tracing::Span, (metrics, model): &(Metrics, String)) {
    match event {
        Event::Usage(usage) => {
            span.record("gen_ai.usage.input_tokens", usage.input_tokens);
            span.record("gen_ai.usage.output_tokens", usage.output_tokens);
            metrics.tokens(model, usage.input_tokens, usage.output_tokens);
        }
        Event::Finish { reason } => {
            span.record(
                "gen_ai.response.finish_reasons",
                tracing::field::debug(reason),
            );
        }
        _ => {}
    }
}

/// What is recorded when an answer ends (or its client goes away): the
/// request counted, its place freed.
struct Answer {
    metrics: Metrics,
    model: String,
    format: &'static str,
    started: Instant,
    span: tracing::Span,
    in_flight: Option<InFlight>,
    permit: Option<OwnedSemaphorePermit>,
    status: u16,
}

impl Drop for Answer {
    fn drop(&mut self) {
        self.in_flight.take();
        self.permit.take();
        self.span.record("http.response.status_code", self.status);
        self.metrics.answered(
            &self.model,
            self.format,
            self.status,
            self.started.elapsed(),
        );
    }
}

fn json_response(status: u16, body: Bytes, content_type: &'static str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body,
    )
        .into_response()
}

/// `GET /v1/models`, in the OpenAI format (which Anthropic's SDK does not ask).
async fn models(State(shared): State<Arc<Shared>>) -> Response {
    let models: Vec<(&str, u64)> = shared
        .gateway
        .model_names()
        .map(|name| (name, shared.created))
        .collect();
    let body = crate::provider::openai::models_body(&models).to_string();
    json_response(200, body.into(), "application/json")
}

/// `GET /metrics`.
async fn metrics(State(shared): State<Arc<Shared>>) -> Response {
    json_response(
        200,
        shared.gateway.metrics.render().into(),
        "text/plain; version=0.0.4",
    )
}

//! Answering a request let in — its stack run, its reply written in the
//! client's format, streamed or whole — or refused; and what each answer
//! leaves behind: a count in the metrics and one log line.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::OwnedSemaphorePermit;
use tracing::Instrument;

use super::coalesce::Coalesce;
use super::fallback::{self, Call};
use super::format::Format;
use super::gateway::{Gateway, Served};
use super::sealed_ids::SealCallIds;
use super::{GenAi, InFlight, Metrics};
use crate::gen_ai::{self, Observed, gen_ai_span};
use crate::limit::Caller;
use crate::provider::traced::AttemptSpan;
use crate::provider::transport::HttpResponse;
use crate::provider::{Kind, Secrets};
use crate::service::MachineStream;
use crate::{ChatRequest, Error, Event, Message, Reply};

/// A request refused before it ran.
pub(super) struct Refusal {
    /// The model it named and that model's upstream, when it is one served.
    model: Option<(String, String)>,
    error: Error,
}

impl Refusal {
    /// Refused before a model served was known.
    pub(super) fn before_model(error: Error) -> Self {
        Refusal { model: None, error }
    }

    /// Refused for the model `name`, served by `served`.
    pub(super) fn for_model(name: &str, served: &Served, error: Error) -> Self {
        Refusal {
            model: Some((name.to_owned(), served.provider.clone())),
            error,
        }
    }

    /// The answer in format `F`, counted and logged.
    pub(super) fn respond<F: Format>(self, gateway: &Gateway, started: Instant) -> Response {
        let (status, response) = error_response::<F>(&self.error, &gateway.secrets);
        record::<F>(gateway, self.model, status, started, Some(&self.error));
        response
    }
}

/// Counts and logs an answer given at once, without a reply (a refusal, a
/// token count): for the model `name` and its upstream, when one was found.
pub(super) fn record<F: Format>(
    gateway: &Gateway,
    model: Option<(String, String)>,
    status: u16,
    started: Instant,
    error: Option<&Error>,
) {
    let (model, upstream) = model.unwrap_or_default();
    let took = started.elapsed();
    gateway
        .metrics
        .answered(&model, F::KIND.name(), status, took);
    let error_type = error.map(gen_ai::error_type);
    let operation = GenAi {
        provider: provider_name(&upstream),
        error_type: error_type.as_deref(),
        duration: took,
        tokens: None,
        first_chunk: None,
    };
    gateway.metrics.gen_ai(&model, &operation);
    let log = Logged {
        model: &model,
        upstream: &upstream,
        format: F::KIND.name(),
        stream: None,
        path: None,
        status,
        took,
        tally: &Tally::default(),
        error,
        cancelled: false,
        key: None,
    };
    log.write(&gateway.secrets);
}

/// What a reply said that the span, the logs and the metrics keep.
#[derive(Debug, Default)]
struct Tally {
    observed: Observed,
    /// The error that ended the reply, if one did, as the log shows it.
    error: Option<String>,
    /// When a streamed reply's first event came, after the request.
    first_chunk: Option<Duration>,
    /// The fallback model that answered, if one did.
    fallback: Option<String>,
}

/// The conventions' name of the upstream `provider` (a wire's name), or the
/// name as configured.
fn provider_name(provider: &str) -> &str {
    match provider.parse::<Kind>() {
        Ok(kind) => kind.gen_ai_provider_name(),
        Err(_) => provider,
    }
}

/// What is recorded when an answer ends (or its client goes away): the
/// request counted and logged, its place freed, its span closed.
pub(super) struct Answer {
    metrics: Metrics,
    secrets: Secrets,
    model: String,
    upstream: String,
    format: &'static str,
    stream: bool,
    started: Instant,
    span: tracing::Span,
    tally: Arc<Mutex<Tally>>,
    in_flight: Option<InFlight>,
    pub(super) permit: Option<OwnedSemaphorePermit>,
    pub(super) status: u16,
    /// Whether the answer was written to its end (else its client went away).
    pub(super) ended: bool,
    /// The key the client presented, by name.
    caller: Option<Caller>,
    /// Which path answered: `full` (the stack), or `fast` (the upstream's
    /// bytes forwarded: [`forward`](super::forward)).
    path: &'static str,
    /// A forwarded answer's upstream attempt span, which records what the
    /// request's does.
    attempt: Option<tracing::Span>,
}

impl Answer {
    /// The answer to `request` for the model `name` in format `F`, begun at
    /// `started`.
    pub(super) fn new<F: Format>(
        gateway: &Gateway,
        name: &str,
        served: &Served,
        request: &ChatRequest,
        started: Instant,
    ) -> Self {
        let span = gen_ai_span!(
            "server",
            provider_name(&served.provider),
            name,
            gen_ai.response.model = %name,
            gen_ai.request.stream = request.options.stream,
            lmstack.format = F::KIND.name(),
            http.response.status_code = tracing::field::Empty,
        );
        let capture = gen_ai::capture_content() && !span.is_disabled();
        if capture {
            let input = gen_ai::messages_json(&request.messages);
            span.record("gen_ai.input.messages", input.as_str());
        }
        Answer {
            metrics: gateway.metrics.clone(),
            secrets: gateway.secrets.clone(),
            model: name.to_owned(),
            upstream: served.provider.clone(),
            format: F::KIND.name(),
            stream: request.options.stream,
            started,
            span,
            tally: Arc::new(Mutex::new(Tally {
                observed: Observed::new(capture),
                ..Tally::default()
            })),
            in_flight: Some(gateway.metrics.start(name)),
            permit: None,
            status: 200,
            ended: false,
            caller: request.extensions.get::<Caller>().cloned(),
            path: "full",
            attempt: None,
        }
    }

    /// A forwarded answer's `response`, its attempt span taken (the tap's
    /// findings are recorded there too when the answer ends).
    pub(super) fn attempted(&mut self, mut response: HttpResponse) -> HttpResponse {
        if let Some(AttemptSpan(span)) = response.extensions_mut().remove() {
            self.attempt = Some(span);
        }
        response
    }

    /// Marks the answer as one of the fast path, and counts it so.
    pub(super) fn forwarded(&mut self) {
        self.path = "fast";
        self.metrics.forwarded(&self.model);
    }

    /// The gateway's secrets, scrubbed from what it says.
    pub(super) fn secrets(&self) -> &Secrets {
        &self.secrets
    }

    /// Notes that a streamed answer's first bytes came now, unless some came
    /// before.
    pub(super) fn first_chunk(&self) {
        let mut tally = self.tally.lock().unwrap_or_else(PoisonError::into_inner);
        if tally.first_chunk.is_none() {
            tally.first_chunk = Some(self.started.elapsed());
        }
    }

    /// Counts what a reply said, as [`observer`](Self::observer) does.
    pub(super) fn observe(&self, items: &[Result<Event, Error>]) {
        let mut observe = self.observer();
        items.iter().for_each(&mut observe);
    }

    /// The request's span.
    pub(super) fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// A tap on a reply's items: the tokens, the finish reason and an error
    /// that ends it, for the span, the metrics and the log line.
    fn observer(&self) -> impl FnMut(&Result<Event, Error>) + Send + 'static {
        let metrics = self.metrics.clone();
        let model = self.model.clone();
        let tally = self.tally.clone();
        let secrets = self.secrets.clone();
        let (started, stream) = (self.started, self.stream);
        move |item| {
            let mut tally = tally.lock().unwrap_or_else(PoisonError::into_inner);
            if stream && tally.first_chunk.is_none() && item.is_ok() {
                tally.first_chunk = Some(started.elapsed());
            }
            tally.observed.observe(item);
            match item {
                Ok(
                    Event::Usage(usage)
                    | Event::Message {
                        message: Message::Usage(usage),
                    },
                ) => metrics.tokens(&model, usage.input_tokens, usage.output_tokens),
                Ok(_) => {}
                Err(error) => tally.error = Some(shown(&secrets, error)),
            }
        }
    }

    /// Marks the answer failed before its reply with `error`, answered with
    /// `status`.
    pub(super) fn failed(&mut self, error: &Error, status: u16) {
        self.status = status;
        self.ended = true;
        let mut tally = self.tally.lock().unwrap_or_else(PoisonError::into_inner);
        tally.observed.error_type = Some(gen_ai::error_type(error));
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        self.in_flight.take();
        self.permit.take();
        let took = self.started.elapsed();
        self.span
            .record("http.response.status_code", i64::from(self.status));
        self.metrics
            .answered(&self.model, self.format, self.status, took);
        let tally = self.tally.lock().unwrap_or_else(PoisonError::into_inner);
        let observed = &tally.observed;
        observed.record(&self.span);
        if let Some(attempt) = self.attempt.take() {
            observed.record(&attempt);
        }
        let operation = GenAi {
            provider: provider_name(&self.upstream),
            error_type: observed.error_type.as_deref(),
            duration: took,
            tokens: observed
                .usage
                .then_some((observed.input_tokens, observed.output_tokens)),
            first_chunk: tally.first_chunk,
        };
        self.metrics.gen_ai(&self.model, &operation);
        let _entered = self.span.enter();
        Logged {
            model: &self.model,
            upstream: &self.upstream,
            format: self.format,
            stream: Some(self.stream),
            path: Some(self.path),
            status: self.status,
            took,
            tally: &tally,
            error: None,
            cancelled: !self.ended,
            key: self.caller.as_ref().map(Caller::name),
        }
        .write(&self.secrets);
    }
}

/// The one log line of a request.
struct Logged<'a> {
    model: &'a str,
    upstream: &'a str,
    format: &'static str,
    stream: Option<bool>,
    /// Which path answered (none for an answer given at once).
    path: Option<&'static str>,
    status: u16,
    took: Duration,
    tally: &'a Tally,
    error: Option<&'a Error>,
    /// Whether the client went away before the answer's end.
    cancelled: bool,
    /// The name of the client's key.
    key: Option<&'a str>,
}

impl Logged<'_> {
    fn write(&self, secrets: &Secrets) {
        let error = self
            .error
            .map(|error| shown(secrets, error))
            .or_else(|| self.tally.error.clone());
        let finish = self.tally.observed.finish_reasons.last();
        let finish = finish.map(tracing::field::debug);
        tracing::info!(
            target: "lmstack::gateway",
            model = self.model,
            key = self.key,
            upstream = self.upstream,
            format = self.format,
            stream = self.stream,
            path = self.path,
            status = self.status,
            duration_ms = self.took.as_secs_f64() * 1e3,
            input_tokens = self.tally.observed.input_tokens,
            output_tokens = self.tally.observed.output_tokens,
            finish,
            error,
            cancelled = self.cancelled.then_some(true),
            fallback = self.tally.fallback.as_deref(),
            "request"
        );
    }
}

/// Runs the request and answers: a stream is sent as it comes, a whole reply
/// once it is complete. The answer holds the model's place until it ends. (Run
/// it in the answer's span: the stream's body, polled later, enters it where
/// it logs.)
pub(super) async fn answer<F: Format>(
    request: ChatRequest,
    encoder: F::Encoder,
    served: Served,
    permit: OwnedSemaphorePermit,
    keep_alive: Option<Duration>,
    mut answering: Answer,
) -> Response {
    answering.permit = Some(permit);
    let span = answering.span.clone();
    let stream = request.options.stream;
    let tally = answering.tally.clone();
    let answered = move |fallback: &str| {
        let mut tally = tally.lock().unwrap_or_else(PoisonError::into_inner);
        tally.fallback = Some(fallback.to_owned());
    };
    let name = answering.model.clone();
    let mut call = fallback::call(request, &name, &served, &answering.secrets, answered);
    // A whole reply is waited for; a stream's headers go out once its reply
    // has begun, or after one keep-alive interval, whichever comes first. An
    // error before then keeps its own status.
    let begun = match keep_alive.filter(|_| stream) {
        Some(every) => tokio::time::timeout(every, &mut call).await.ok(),
        None => Some((&mut call).await),
    };
    let begun = match begun {
        Some(Ok(reply)) => Ok(reply),
        Some(Err(error)) => {
            let secrets = &answering.secrets;
            let said = shown(secrets, &error);
            tracing::warn!(parent: &span, "failed before the reply: {said}");
            let (status, response) = error_response::<F>(&error, secrets);
            answering.failed(&error, status);
            return response;
        }
        None => Err(call),
    };
    match begun {
        Ok(reply) if !stream => whole::<F>(reply, encoder, answering).await,
        begun => {
            let content_type = F::content_type(&encoder);
            let body = streamed::<F>(begun, encoder, keep_alive, answering);
            // Frames ready together (a burst from the upstream) go out as one
            // chunk: one write and one chunk header instead of one per frame.
            let body = Coalesce::new(body, STREAM_CHUNK_BYTES);
            let mut response = Response::new(Body::from_stream(body));
            let headers = response.headers_mut();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            response
        }
    }
}

/// The most bytes of ready SSE frames joined into one chunk of a streamed
/// body.
pub(super) const STREAM_CHUNK_BYTES: usize = 32 << 10;

/// A reply's items, each passed on as an item (an `Err` too: the encoder
/// writes it as the format's error).
type Items = BoxStream<'static, Result<Result<Event, Error>, Error>>;

/// The answer's bytes: a reply's items through the gateway's tap, the call
/// ids' sealing and the format's encoder.
type Encoded<E> = MachineStream<MachineStream<Items, SealCallIds>, E>;

fn encode<F: Format>(reply: Reply, encoder: F::Encoder, answering: &Answer) -> Encoded<F::Encoder> {
    let mut observe = answering.observer();
    let secrets = answering.secrets.clone();
    // Polled in the request's span: a call the reply makes as it streams (a
    // tool loop's next round) is an attempt under the request.
    let reply = InSpan {
        stream: reply,
        span: answering.span.clone(),
    };
    let items: Items = Box::pin(reply.map(move |item| {
        observe(&item);
        Ok(item.map_err(|error| secrets.scrub_error(error)))
    }));
    MachineStream::new(MachineStream::new(items, SealCallIds::new()), encoder)
}

/// A stream polled in its span.
struct InSpan<S> {
    stream: S,
    span: tracing::Span,
}

impl<S: futures::Stream + Unpin> futures::Stream for InSpan<S> {
    type Item = S::Item;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<S::Item>> {
        let this = self.get_mut();
        let _entered = this.span.enter();
        this.stream.poll_next_unpin(cx)
    }
}

/// A whole reply, written once complete.
async fn whole<F: Format>(reply: Reply, encoder: F::Encoder, mut answering: Answer) -> Response {
    let mut encoded = encode::<F>(reply, encoder, &answering);
    let mut body = Vec::new();
    while let Some(item) = encoded.next().await {
        match item {
            Ok(bytes) => body.extend_from_slice(&bytes),
            Err(error) => {
                let (status, response) = error_response::<F>(&error, &answering.secrets);
                answering.failed(&error, status);
                return response;
            }
        }
    }
    let encoder = encoded.machine();
    answering.status = F::status(encoder);
    answering.ended = true;
    json_response(answering.status, body.into(), F::content_type(encoder))
}

/// A stream's body: keep-alives until the reply begins (if it had not), then
/// its frames, with a keep-alive whenever it is silent for an interval. The
/// body owns the answer, so a client that goes away drops the reply and frees
/// the place.
fn streamed<F: Format>(
    begun: Result<Reply, Call>,
    encoder: F::Encoder,
    keep_alive: Option<Duration>,
    answering: Answer,
) -> BoxStream<'static, Result<Bytes, Error>> {
    Box::pin(async_stream::stream! {
        let mut answering = answering;
        let span = answering.span.clone();
        let mut ticks = Ticks::new(keep_alive);
        let reply = match begun {
            Ok(reply) => reply,
            Err(mut call) => {
                // One keep-alive interval has passed without a word.
                yield Ok(Bytes::from_static(F::KEEP_ALIVE));
                let begun = loop {
                    tokio::select! {
                        begun = (&mut call).instrument(span.clone()) => break begun,
                        () = ticks.tick() => yield Ok(Bytes::from_static(F::KEEP_ALIVE)),
                    }
                };
                // The retry layer retries only before the first event, so
                // this is the reply's end: the format's in-stream error.
                begun.unwrap_or_else(|error| {
                    let said = shown(&answering.secrets, &error);
                    tracing::warn!(parent: &span, "failed before the reply: {said}");
                    Reply::from_error(error)
                })
            }
        };
        let mut encoded = encode::<F>(reply, encoder, &answering);
        let mut framed = false;
        loop {
            // `next` loses nothing when a tick wins: it is asked again.
            let next = tokio::select! {
                next = encoded.next() => next,
                () = ticks.tick() => {
                    if !std::mem::take(&mut framed) {
                        yield Ok(Bytes::from_static(F::KEEP_ALIVE));
                    }
                    continue;
                }
            };
            let Some(item) = next else { break };
            framed = true;
            match item {
                Ok(bytes) => yield Ok::<Bytes, Error>(bytes),
                Err(error) => {
                    let said = shown(&answering.secrets, &error);
                    tracing::warn!(parent: &span, "the reply could not be written: {said}");
                    break;
                }
            }
        }
        answering.ended = true;
    })
}

/// The keep-alive timer of a stream: one for the stream, not one per frame
/// (a tick that finds no frame since the one before sends a keep-alive); it
/// never ticks without an interval.
pub(super) struct Ticks(Option<tokio::time::Interval>);

impl Ticks {
    /// Ticks every `every`, from one interval on.
    pub(super) fn new(every: Option<Duration>) -> Self {
        Ticks(every.map(|every| {
            let start = tokio::time::Instant::now() + every;
            let mut ticks = tokio::time::interval_at(start, every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks
        }))
    }

    /// The next tick (never, without an interval).
    pub(super) async fn tick(&mut self) {
        match &mut self.0 {
            Some(ticks) => {
                ticks.tick().await;
            }
            None => std::future::pending().await,
        }
    }
}

/// An error as a log line shows it: scrubbed of `secrets`.
pub(super) fn shown(secrets: &Secrets, error: &Error) -> String {
    secrets.scrub(&error.to_string()).into_owned()
}

/// An error answer in format `F`, scrubbed of `secrets`: its status and the
/// response (with `Retry-After` where the error gives one).
pub(super) fn error_response<F: Format>(error: &Error, secrets: &Secrets) -> (u16, Response) {
    let (status, body) = F::error(error);
    let body = secrets.scrub(&body.to_string()).into_owned();
    let mut response = json_response(status, body.into(), "application/json");
    set_retry_after(response.headers_mut(), error);
    (status, response)
}

/// `headers`' `Retry-After`, from `error`: the upstream's wait, or a second for
/// the gateway's own 429.
fn set_retry_after(headers: &mut HeaderMap, error: &Error) {
    let seconds = match error {
        Error::Refused { status: 429, .. } => Some(1),
        _ => error
            .provider_error()
            .and_then(|upstream| upstream.retry_after)
            .map(|wait| wait.as_secs() + u64::from(wait.subsec_nanos() > 0)),
    };
    if let Some(seconds) = seconds {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
}

pub(super) fn json_response(status: u16, body: Bytes, content_type: &'static str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body,
    )
        .into_response()
}

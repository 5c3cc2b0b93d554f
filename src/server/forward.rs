//! The same-wire fast path: a request whose client speaks its model's
//! upstream wire, and that nothing in the model's stack would change, is sent
//! to the upstream as it came — the client's key replaced by the upstream's,
//! the model the client named by the upstream's — and the upstream's answer
//! goes back as it comes, streamed or whole, read on its way by a [`Tap`] for
//! the usage, the finish reason and errors (the metrics, the span, the log
//! line). Every other request takes the full path: decoded, run by the stack,
//! encoded.
//!
//! The choice is made per request, before its body is decoded
//! ([`plan`]), and shown in its log line (`path="fast"`) and in
//! `lmstack_forwarded_total`.

use std::ops::Range;
use std::sync::LazyLock;
use std::time::{Duration, Instant, SystemTime};

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use memchr::memmem::Finder;
use serde::Deserialize;
use serde_json::value::RawValue;
use tracing::Instrument;

use super::admit::Entered;
use super::answer::{Answer, STREAM_CHUNK_BYTES, Ticks, error_response, shown};
use super::coalesce::Coalesce;
use super::format::Format;
use super::gateway::Gateway;
use super::sealed_ids::{SEALED_PREFIX, SEALED_REASONING_PREFIX};
use super::tap::{Tap, span_of};
use crate::limit::{Admitted, Caller, LimitLayer};
use crate::provider::body::DEFAULT_MAX_BODY_BYTES;
use crate::provider::transport::HttpResponse;
use crate::provider::{AnyProvider, Kind};
use crate::service::{Machine, Output};
use crate::{ChatRequest, Error};

/// A model's one upstream, to which a gateway forwards the requests of
/// clients of its wire as they came (the same-wire fast path: see
/// docs/serve.md): a provider, the model it is asked for, and the retries of
/// a request that fails before its answer begins. Give it to
/// [`Gateway::forward`] beside the model's stack, whose layers must not
/// change a same-wire request or its reply but for the requests the gateway
/// sends down the full path anyway (a configuration's
/// [`ModelConfig::forward`](crate::config::ModelConfig::forward) says when
/// that holds), and the stack's limits ([`limits`](Self::limits)).
///
/// ```
/// use lmstack::limit::{KeyLimits, LimitLayer};
/// use lmstack::provider::AnyProvider;
/// use lmstack::provider::openai_chat::{OpenAi, OpenAiConfig};
/// use lmstack::server::Forward;
///
/// let provider = AnyProvider::from(OpenAi::new(OpenAiConfig::new("http://127.0.0.1:8080/v1"))?);
/// let limits = LimitLayer::new().key("metered", KeyLimits::new().requests_per_minute(60));
/// let forward = Forward::new(provider, "qwen3-8b").limits(limits);
/// # let _ = forward;
/// # Ok::<(), lmstack::Error>(())
/// ```
#[derive(Clone)]
pub struct Forward {
    provider: AnyProvider,
    model: String,
    #[cfg(feature = "retry")]
    retry: Option<crate::retry::RetryLayer>,
    limits: Option<LimitLayer>,
}

impl std::fmt::Debug for Forward {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forward")
            .field("kind", &self.provider.kind())
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl Forward {
    /// Forwards to `provider`, asking it for `model`; no retries.
    pub fn new(provider: AnyProvider, model: impl Into<String>) -> Self {
        Forward {
            provider,
            model: model.into(),
            #[cfg(feature = "retry")]
            retry: None,
            limits: None,
        }
    }

    /// Retries a request that fails before its answer begins (a 429, a 5xx,
    /// a failed connection) as `retry` retries a stack's calls.
    #[cfg(feature = "retry")]
    pub fn retry(mut self, retry: crate::retry::RetryLayer) -> Self {
        self.retry = Some(retry);
        self
    }

    /// Counts the requests of the keys `limits` limits as the model's stack
    /// counts them (its [`LimitLayer`], with the model's price): each let in
    /// by [`LimitLayer::admit`] before it is sent, or refused as the stack
    /// refuses it, and settled with the usage the tap read once its answer
    /// ends.
    pub fn limits(mut self, limits: LimitLayer) -> Self {
        self.limits = Some(limits);
        self
    }

    /// The upstream's wire.
    pub fn kind(&self) -> Kind {
        self.provider.kind()
    }

    /// The wait before retry number `retry + 1` after `error`, as the
    /// model's retry layer would wait; `None` when not retried.
    fn wait_before(&self, retry: u32, error: &Error) -> Option<BoxFuture<'static, ()>> {
        #[cfg(feature = "retry")]
        if let Some(layer) = &self.retry {
            return layer
                .next_wait(retry, error)
                .map(|wait| layer.wait_out(wait));
        }
        let _ = (retry, error);
        None
    }

    /// Sends `body` for `head`, retried as configured, until the upstream's
    /// answer begins or an attempt fails for good.
    fn send(
        &self,
        head: ChatRequest,
        body: Bytes,
    ) -> BoxFuture<'static, Result<HttpResponse, Error>> {
        let this = self.clone();
        // Each attempt's span is a child of the request's, even where the
        // answer's head comes after a keep-alive, polled outside it.
        let request_span = tracing::Span::current();
        Box::pin(tracing::Instrument::instrument(
            async move {
                let mut retry = 0;
                loop {
                    let error = match this.provider.forward(&head, body.clone()).await {
                        Ok(response) => return Ok(response),
                        Err(error) => error,
                    };
                    match this.wait_before(retry, &error) {
                        Some(wait) => {
                            tracing::debug!("retrying the forwarded request: {error}");
                            wait.await;
                            retry += 1;
                        }
                        None => return Err(error),
                    }
                }
            },
            request_span,
        ))
    }
}

/// A request the fast path takes: what the upstream is sent.
pub(super) struct Plan {
    /// The upstream's model and the mode (no messages).
    head: ChatRequest,
    body: Bytes,
    forward: Forward,
    /// Whether the upstream was asked for a usage chunk that the client did
    /// not ask for (left out of what it gets).
    without_usage: bool,
    /// The most output tokens the request asked for, for its key's limits.
    max_tokens: Option<u64>,
}

/// The request's model field, mode, stream options and most output tokens,
/// read without decoding the rest.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    model: Option<&'a RawValue>,
    stream: Option<bool>,
    /// Kept when `null` too.
    #[serde(borrow, default, deserialize_with = "present")]
    stream_options: Option<&'a RawValue>,
    max_tokens: Option<u64>,
    max_completion_tokens: Option<u64>,
    #[serde(rename = "generationConfig")]
    generation_config: Option<GenerationConfig>,
}

/// Gemini's most output tokens.
#[derive(Deserialize)]
struct GenerationConfig {
    #[serde(rename = "maxOutputTokens")]
    max_output_tokens: Option<u64>,
}

/// A field's raw value, `null` included.
fn present<'a, D: serde::Deserializer<'a>>(field: D) -> Result<Option<&'a RawValue>, D::Error> {
    <&RawValue>::deserialize(field).map(Some)
}

/// What in a request body only the full path serves: ids the gateway sealed
/// (which it opens), and structured output (which the stack checks).
const NEEDS_THE_STACK: [&str; 7] = [
    SEALED_PREFIX,
    SEALED_REASONING_PREFIX,
    "\"response_format\"",
    "\"output_format\"",
    "\"output_config\"",
    "\"responseSchema\"",
    "\"responseJsonSchema\"",
];

/// Whether the request `body` needs the stack: it holds one of
/// [`NEEDS_THE_STACK`].
fn needs_the_stack(body: &[u8]) -> bool {
    // Each searcher built once: building one costs more than a search of a
    // short body.
    static FINDERS: LazyLock<Vec<Finder<'static>>> = LazyLock::new(|| {
        NEEDS_THE_STACK
            .iter()
            .map(|needle| Finder::new(needle.as_bytes()))
            .collect()
    });
    FINDERS.iter().any(|finder| finder.find(body).is_some())
}

/// The fast path's plan for a request let in with format `F`, or `None` when
/// it takes the full path: its model must have a [`Forward`] of `F`'s wire
/// and no fallbacks, nothing in its body may need the stack
/// ([`NEEDS_THE_STACK`]), and the conversation's content must not be
/// captured in spans.
pub(super) fn plan<F: Format>(entered: &Entered, headers: &HeaderMap) -> Option<Plan> {
    let forward = entered.served.forward.as_deref()?;
    if !F::FORWARDS
        || forward.kind() != F::KIND
        || !entered.served.fallbacks.is_empty()
        || entered.decoded.is_some()
        || crate::gen_ai::capture_content()
        || needs_the_stack(&entered.bytes)
    {
        return None;
    }
    let bytes = &entered.bytes;
    let read: Head = serde_json::from_slice(bytes).ok()?;
    let mut head = ChatRequest::new(Vec::new());
    head.options.stream = match &entered.named {
        Some(named) => named.stream,
        None => read.stream.unwrap_or(false),
    };
    head.options.model = Some(forward.model.clone());
    F::decode_headers(headers, &mut head);
    let mut edits = Vec::with_capacity(2);
    if let Some(raw) = read.model {
        let at = span_of(bytes, raw.get().as_bytes());
        let named: String = serde_json::from_str(raw.get()).ok()?;
        if named != forward.model {
            edits.push((at, serde_json::to_string(&forward.model).ok()?));
        }
    }
    let mut without_usage = false;
    if F::KIND == Kind::OpenAiChat
        && head.options.stream
        && let Some(edit) = with_usage(bytes, read.stream_options)?
    {
        edits.push(edit);
        without_usage = true;
    }
    let body = edited(bytes, edits);
    Some(Plan {
        head,
        body,
        forward: forward.clone(),
        without_usage,
        max_tokens: read.max_tokens.or(read.max_completion_tokens).or(read
            .generation_config
            .and_then(|config| config.max_output_tokens)),
    })
}

/// The edit of an OpenAI Chat `body` that asks the upstream for its usage
/// chunk as the full path does (`stream_options.include_usage`), the
/// client's other stream options kept: `Some(None)` when the client asked
/// for it itself, `None` when its stream options are not an object.
fn with_usage(body: &[u8], options: Option<&RawValue>) -> Option<Option<(Range<usize>, String)>> {
    const ASKED: &str = r#"{"include_usage":true}"#;
    let Some(raw) = options else {
        // Written first in the body's object.
        let open = body.iter().position(|byte| *byte == b'{')? + 1;
        let empty = body[open..].trim_ascii_start().starts_with(b"}");
        let comma = if empty { "" } else { "," };
        return Some(Some((
            open..open,
            format!(r#""stream_options":{ASKED}{comma}"#),
        )));
    };
    if raw.get() == "null" {
        return Some(Some((span_of(body, raw.get().as_bytes()), ASKED.into())));
    }
    let mut options: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(raw.get()).ok()?;
    if options.get("include_usage") == Some(&serde_json::Value::Bool(true)) {
        return Some(None);
    }
    options.insert("include_usage".into(), true.into());
    let options = serde_json::to_string(&options).ok()?;
    Some(Some((span_of(body, raw.get().as_bytes()), options)))
}

/// `body` with each of `edits` (a range of it, ascending, and what replaces
/// it) made: itself when there are none.
fn edited(body: &Bytes, mut edits: Vec<(Range<usize>, String)>) -> Bytes {
    if edits.is_empty() {
        return body.clone();
    }
    edits.sort_by_key(|(at, _)| at.start);
    let added: usize = edits.iter().map(|(_, with)| with.len()).sum();
    let mut rewritten = Vec::with_capacity(body.len() + added);
    let mut copied = 0;
    for (at, with) in edits {
        rewritten.extend_from_slice(&body[copied..at.start]);
        rewritten.extend_from_slice(with.as_bytes());
        copied = at.end;
    }
    rewritten.extend_from_slice(&body[copied..]);
    Bytes::from(rewritten)
}

/// Answers a request on the fast path: sends it, and forwards the answer —
/// a stream's headers once it has begun or after one keep-alive interval, a
/// whole body once it is read — holding the model's place until the end.
pub(super) async fn answer<F: Format>(
    gateway: &Gateway,
    plan: Plan,
    entered: Entered,
    started: Instant,
) -> Response {
    let Plan {
        mut head,
        body,
        forward,
        without_usage,
        max_tokens,
    } = plan;
    if let Some(caller) = entered.caller {
        head.extensions.insert(caller);
    }
    let name = entered.name;
    let mut answering = Answer::new::<F>(gateway, &name, &entered.served, &head, started);
    answering.forwarded();
    answering.permit = Some(entered.permit);
    drop(entered.bytes);
    let span = answering.span().clone();
    let keep_alive = gateway.keep_alive;
    async move {
        let kind = forward.kind();
        let stream = head.options.stream;
        let mut admitted = None;
        let caller = head.extensions.get::<Caller>();
        if let (Some(limits), Some(caller)) = (&forward.limits, caller) {
            let tokens = limits.reservation(max_tokens, body.len() as u64);
            match limits.admit(caller, tokens).await {
                Ok(admission) => admitted = admission,
                Err(error) => return failed::<F>(&mut answering, &error),
            }
        }
        let mut sending = forward.send(head.clone(), body);
        let begun = match keep_alive.filter(|_| stream) {
            Some(every) => tokio::time::timeout(every, &mut sending).await.ok(),
            None => Some((&mut sending).await),
        };
        let begun = match begun {
            Some(Ok(response)) => Ok(answering.attempted(response)),
            Some(Err(error)) => {
                given_back(admitted).await;
                return failed::<F>(&mut answering, &error);
            }
            None => Err(sending),
        };
        match begun {
            Ok(response) if !stream => whole::<F>(kind, response, answering, admitted).await,
            begun => {
                let content_type = match &begun {
                    Ok(response) => content_type(response),
                    Err(_) => HeaderValue::from_static("text/event-stream"),
                };
                let error_encoder = F::encoder(&head, &name, SystemTime::now());
                let secrets = answering.secrets().clone();
                let tap = move |content_type: Option<&str>| {
                    let tap = Tap::new(kind, content_type, true).scrubbing(secrets);
                    match without_usage {
                        true => tap.without_usage_chunk(),
                        false => tap,
                    }
                };
                let answering = (answering, admitted);
                let body = streamed::<F>(tap, begun, error_encoder, keep_alive, answering);
                let body = Coalesce::new(body, STREAM_CHUNK_BYTES);
                let mut response = Response::new(Body::from_stream(body));
                let headers = response.headers_mut();
                headers.insert(header::CONTENT_TYPE, content_type);
                headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
                response
            }
        }
    }
    .instrument(span)
    .await
}

/// Gives back what `admitted` reserved: its request failed before its
/// answer began.
async fn given_back(admitted: Option<Admitted>) {
    if let Some(mut admitted) = admitted {
        admitted.nothing_used();
        admitted.settle().await;
    }
}

/// The answer to a request that failed before its answer began.
fn failed<F: Format>(answering: &mut Answer, error: &Error) -> Response {
    let said = shown(answering.secrets(), error);
    tracing::warn!("failed before the reply: {said}");
    let (status, response) = error_response::<F>(error, answering.secrets());
    answering.failed(error, status);
    response
}

/// The `Content-Type` the upstream's answer came with, passed on: the one
/// header of the upstream's that reaches the client (never its cookies, its
/// keys' limits, its framing).
fn content_type(response: &HttpResponse) -> HeaderValue {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .cloned()
        .unwrap_or(HeaderValue::from_static("application/json"))
}

/// A whole answer: read within the body limit, tapped, sent as it came.
async fn whole<F: Format>(
    kind: Kind,
    response: HttpResponse,
    mut answering: Answer,
    mut admitted: Option<Admitted>,
) -> Response {
    let status = response.status();
    let content_type = content_type(&response);
    let mut chunks = response.into_body();
    let mut body = Vec::new();
    while let Some(chunk) = chunks.next().await {
        let read = chunk.and_then(|chunk| {
            if body.len() + chunk.len() > DEFAULT_MAX_BODY_BYTES {
                return Err(Error::LimitExceeded {
                    stage: kind.name(),
                    what: "the response body",
                    limit: DEFAULT_MAX_BODY_BYTES,
                });
            }
            body.extend_from_slice(&chunk);
            Ok(())
        });
        if let Err(error) = read {
            given_back(admitted).await;
            return failed::<F>(&mut answering, &error);
        }
    }
    let body = Bytes::from(body);
    let streaming = false;
    let tapped = Tap::read(kind, content_type.to_str().ok(), streaming, body.clone());
    observed(&answering, &mut admitted, tapped.items);
    if let Some(admitted) = admitted {
        admitted.settle().await;
    }
    answering.status = status.as_u16();
    answering.ended = true;
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, content_type);
    response
}

/// A stream's body: keep-alives until the answer begins (if it had not),
/// then the upstream's bytes as they come, tapped, with a keep-alive in a
/// silence that falls between two events. An error once the headers are out
/// is written as the format's in-stream error (where it falls between two
/// events; elsewhere the stream is cut). The body owns the answer and its
/// admission by the key's limits (settled at the end), so a client that goes
/// away drops the upstream's answer and frees the place.
fn streamed<F: Format>(
    tap: impl FnOnce(Option<&str>) -> Tap + Send + 'static,
    begun: Result<HttpResponse, BoxFuture<'static, Result<HttpResponse, Error>>>,
    error_encoder: F::Encoder,
    keep_alive: Option<Duration>,
    (answering, admitted): (Answer, Option<Admitted>),
) -> BoxStream<'static, Result<Bytes, Error>> {
    Box::pin(async_stream::stream! {
        let mut answering = answering;
        let mut admitted = admitted;
        let mut ticks = Ticks::new(keep_alive);
        let response = match begun {
            Ok(response) => response,
            Err(mut sending) => {
                // One keep-alive interval has passed without a word.
                yield Ok(Bytes::from_static(F::KEEP_ALIVE));
                let begun = loop {
                    tokio::select! {
                        begun = &mut sending => break begun,
                        () = ticks.tick() => yield Ok(Bytes::from_static(F::KEEP_ALIVE)),
                    }
                };
                match begun {
                    Ok(response) => answering.attempted(response),
                    Err(error) => {
                        let said = shown(answering.secrets(), &error);
                        tracing::warn!("failed before the reply: {said}");
                        let error = answering.secrets().scrub_error(error);
                        let error = observed(&answering, &mut None, vec![Err(error)]);
                        given_back(admitted).await;
                        yield Ok(in_stream_error(error_encoder, error));
                        answering.ended = true;
                        return;
                    }
                }
            }
        };
        let content_type = content_type(&response);
        let mut tap = tap(content_type.to_str().ok());
        let mut chunks = response.into_body();
        let mut framed = false;
        let mut out = Vec::new();
        loop {
            // `next` loses nothing when a tick wins: it is asked again.
            let next = tokio::select! {
                next = chunks.next() => next,
                () = ticks.tick() => {
                    if !std::mem::take(&mut framed) && tap.between_events() {
                        yield Ok(Bytes::from_static(F::KEEP_ALIVE));
                    }
                    continue;
                }
            };
            let failed = match next {
                None => break,
                Some(Ok(chunk)) => {
                    answering.first_chunk();
                    framed = true;
                    let pushed = tap.push(chunk, &mut out);
                    for piece in out.drain(..) {
                        yield Ok(piece);
                    }
                    match pushed {
                        Ok(()) => continue,
                        Err(error) => error,
                    }
                }
                Some(Err(error)) => error,
            };
            let said = shown(answering.secrets(), &failed);
            tracing::warn!("the upstream's answer broke off: {said}");
            let between_events = tap.between_events();
            let mut items = tap.finish().items;
            // The tap's own word would be that the stream was cut.
            items.retain(Result::is_ok);
            items.push(Err(answering.secrets().scrub_error(failed)));
            let error = observed(&answering, &mut admitted, items);
            if let Some(admitted) = admitted {
                admitted.settle().await;
            }
            if between_events {
                yield Ok(in_stream_error(error_encoder, error));
            }
            answering.ended = true;
            return;
        }
        if let Some(rest) = tap.rest() {
            yield Ok(rest);
        }
        observed(&answering, &mut admitted, tap.finish().items);
        if let Some(admitted) = admitted {
            admitted.settle().await;
        }
        answering.ended = true;
    })
}

/// Counts `items` for the answer and for its key's limits; the error among
/// them, if any.
fn observed(
    answering: &Answer,
    admitted: &mut Option<Admitted>,
    items: Vec<Result<crate::Event, Error>>,
) -> Option<Error> {
    answering.observe(&items);
    if let Some(admitted) = admitted {
        items
            .iter()
            .flatten()
            .for_each(|event| admitted.observe(event));
    }
    items.into_iter().find_map(Result::err)
}

/// `error` as the client's format writes it inside a stream, by its encoder
/// (which wrote nothing yet); nothing without an error.
fn in_stream_error<E: Machine<In = Result<crate::Event, Error>, Out = Bytes>>(
    mut encoder: E,
    error: Option<Error>,
) -> Bytes {
    let Some(error) = error else {
        return Bytes::new();
    };
    let mut out = Output::new();
    let _ = encoder.push(Err(error), &mut out);
    let _ = encoder.finish(&mut out);
    let mut bytes = Vec::new();
    for piece in out.drain() {
        bytes.extend_from_slice(&piece);
    }
    Bytes::from(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `body` as the fast path sends it for the model `model`, and
    /// whether the client gets the usage chunk.
    fn planned(body: &'static [u8], model: &str) -> Option<(String, bool)> {
        let body = Bytes::from_static(body);
        let read: Head = serde_json::from_slice(&body).unwrap();
        let mut edits = Vec::new();
        let at = span_of(&body, read.model.unwrap().get().as_bytes());
        edits.push((at, serde_json::to_string(model).unwrap()));
        let usage = with_usage(&body, read.stream_options)?;
        let asked = usage.is_none();
        edits.extend(usage);
        Some((
            String::from_utf8(edited(&body, edits).to_vec()).unwrap(),
            asked,
        ))
    }

    #[test]
    fn only_the_model_and_the_stream_options_are_rewritten() {
        assert_eq!(
            planned(
                br#"{"messages":[{"role":"user","content":"model"}], "model" : "alias","stream":true}"#,
                "up\"stream"
            ),
            Some((
                r#"{"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"model"}], "model" : "up\"stream","stream":true}"#.into(),
                false
            ))
        );
        assert_eq!(
            planned(
                br#"{"model":"a","stream_options":{"continuous_usage_stats":true, "include_usage":false},"stream":true}"#,
                "b"
            ),
            Some((
                r#"{"model":"b","stream_options":{"continuous_usage_stats":true,"include_usage":true},"stream":true}"#.into(),
                false
            ))
        );
        let asked = br#"{"model":"a","stream_options":{"include_usage":true},"stream":true}"#;
        assert_eq!(
            planned(asked, "a"),
            Some((String::from_utf8(asked.to_vec()).unwrap(), true))
        );
        assert_eq!(
            planned(br#"{"model":"a","stream_options":null}"#, "a"),
            Some((
                r#"{"model":"a","stream_options":{"include_usage":true}}"#.into(),
                false
            ))
        );
        assert_eq!(planned(br#"{"model":"a","stream_options":[1]}"#, "a"), None);
        let body = Bytes::from_static(b"{}");
        assert_eq!(edited(&body, Vec::new()).as_ptr(), body.as_ptr());
    }

    #[test]
    fn sealed_ids_and_structured_output_need_the_stack() {
        assert!(!needs_the_stack(br#"{"model":"m","messages":[]}"#));
        assert!(needs_the_stack(
            br#"{"messages":[{"tool_call_id":"lmc_eyJpZCI6"}]}"#
        ));
        assert!(needs_the_stack(
            br#"{"response_format":{"type":"json_object"}}"#
        ));
        assert!(needs_the_stack(
            br#"{"generationConfig":{"responseJsonSchema":{}}}"#
        ));
    }
}

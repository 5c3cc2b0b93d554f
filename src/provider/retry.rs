//! Retries a model call that failed **before its first event was delivered**.
//!
//! [`RetryLayer`] wraps any `Service<ChatRequest, Response = Reply>` (a provider,
//! or a whole stack). A call is retried when it fails with an error that
//! [`is_retryable`] accepts — HTTP 408, 409, 429 and 5xx, an overloaded provider,
//! a failed connection, a timeout, a stream that broke or ended early — and only
//! while nothing has been delivered: the returned future resolves once the first
//! event is in hand, so a reply that breaks later ends with its error and is never
//! replayed (the caller may already have shown or acted on its start).
//!
//! The wait before a retry is the provider's `Retry-After` when it gave one (a
//! wait longer than [`RetryPolicy::max_retry_after`] is not waited out: the error
//! is returned), otherwise exponential backoff with jitter.
//!
//! ```
//! use lmstack::provider::retry::{RetryLayer, RetryPolicy};
//! use lmstack::testing::{ScriptedModel, Turn};
//! use lmstack::{ChatRequest, Message};
//! use std::time::Duration;
//! use tower::{Layer, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let model = ScriptedModel::new().reply("hello");
//! let policy = RetryPolicy::default().initial_backoff(Duration::from_millis(1));
//! let service = RetryLayer::new(policy).layer(model);
//! let request = ChatRequest::new(vec![Message::user("hi")]).streaming(true);
//! let reply = service.oneshot(request).await.unwrap();
//! assert_eq!(reply.collect().await.unwrap(), vec![Message::assistant("hello")]);
//! # }
//! ```

use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::StreamExt;
use tower::{Layer, Service, ServiceExt};

use super::{ProviderError, TransportErrorKind};
use crate::{ChatRequest, Error, Event, Reply};

/// How often and how long to retry.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The backoff before the first retry; it doubles for each further one.
    pub initial_backoff: Duration,
    /// The longest backoff.
    pub max_backoff: Duration,
    /// The longest `Retry-After` waited out; a provider that asks for more gets
    /// its error returned at once.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    /// Two retries; backoff from 500 ms up to 8 s; `Retry-After` up to 60 s.
    fn default() -> Self {
        RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// Sets the number of retries.
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }

    /// Sets the first backoff.
    pub fn initial_backoff(mut self, backoff: Duration) -> Self {
        self.initial_backoff = backoff;
        self
    }

    /// Sets the longest `Retry-After` waited out.
    pub fn max_retry_after(mut self, wait: Duration) -> Self {
        self.max_retry_after = wait;
        self
    }

    /// The wait before retry number `retry` (0 for the first) after `error`, or
    /// `None` when the call must not be retried.
    pub fn delay(&self, retry: u32, error: &Error) -> Option<Duration> {
        if retry >= self.max_retries || !is_retryable(error) {
            return None;
        }
        if let Some(wait) = error.provider_error().and_then(|error| error.retry_after) {
            return (wait <= self.max_retry_after).then_some(wait);
        }
        let backoff = self
            .initial_backoff
            .saturating_mul(1 << retry.min(16))
            .min(self.max_backoff);
        // "Equal jitter": between half the backoff and all of it.
        let half = backoff / 2;
        Some(half + half.mul_f64(fastrand::f64()))
    }
}

/// The error classifier: true for failures worth another attempt.
///
/// - provider errors: the provider's own `x-should-retry` when it sent one;
///   otherwise HTTP 408, 409, 429 and 5xx, an overloaded provider, and a
///   `server_error` sent inside a stream. An error sent inside a stream counts
///   as the HTTP status its numeric `code` names, if it has one (vLLM and Gemini
///   send `"code": 503`);
/// - transport errors: failed connections, timeouts, interrupted and truncated
///   responses (not malformed ones, nor requests that could not be built);
/// - anything else: no.
pub fn is_retryable(error: &Error) -> bool {
    if let Some(error) = error.provider_error() {
        return error.should_retry.unwrap_or_else(|| {
            matches!(status_of(error), 408 | 409 | 429 | 500..=599)
                || error.is_overloaded()
                || error.error_type.as_deref() == Some("server_error")
        });
    }
    error.transport_error().is_some_and(|error| {
        matches!(
            error.kind,
            TransportErrorKind::Connect
                | TransportErrorKind::Timeout
                | TransportErrorKind::Interrupted
                | TransportErrorKind::Truncated
        )
    })
}

/// The HTTP status `error` stands for: its response's, or for an error sent
/// inside a successful stream, the status its numeric `code` names.
fn status_of(error: &ProviderError) -> u16 {
    let named = || error.code.as_deref()?.parse::<u16>().ok();
    match error.status {
        200..=299 => named().unwrap_or(error.status),
        status => status,
    }
}

/// The [`Layer`] of [`Retry`].
#[derive(Clone, Debug, Default)]
pub struct RetryLayer {
    policy: RetryPolicy,
}

impl RetryLayer {
    /// A layer with this policy.
    pub fn new(policy: RetryPolicy) -> Self {
        RetryLayer { policy }
    }
}

impl<S> Layer<S> for RetryLayer {
    type Service = Retry<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Retry::new(inner, self.policy.clone())
    }
}

/// Retries calls of `S` that fail before their first event. See the
/// [module docs](self).
#[derive(Clone, Debug)]
pub struct Retry<S> {
    inner: S,
    policy: RetryPolicy,
}

impl<S> Retry<S> {
    /// Wraps `inner`.
    pub fn new(inner: S, policy: RetryPolicy) -> Self {
        Retry { inner, policy }
    }

    crate::service::inner_service_accessors!();
}

impl<S> Service<ChatRequest> for Retry<S>
where
    S: Service<ChatRequest, Response = Reply> + Clone + Send + 'static,
    S::Error: Into<Error>,
    S::Future: Send,
{
    type Response = Reply;
    type Error = Error;
    type Future = BoxFuture<'static, Result<Reply, Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: ChatRequest) -> Self::Future {
        // The service that was made ready takes this call; a clone stays behind.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let policy = self.policy.clone();
        Box::pin(async move {
            let mut retry = 0;
            loop {
                let attempt = inner.call(request.clone());
                let error = match first_event(attempt).await {
                    Ok(reply) => return Ok(reply),
                    Err(error) => error,
                };
                let Some(wait) = policy.delay(retry, &error) else {
                    return Err(error);
                };
                tracing::warn!(%error, retry = retry + 1, ?wait, "retrying the model call");
                tokio::time::sleep(wait).await;
                retry += 1;
                inner.ready().await.map_err(Into::into)?;
            }
        })
    }
}

/// Runs a call until its first event: an error before it fails the call.
async fn first_event<F, E>(call: F) -> Result<Reply, Error>
where
    F: std::future::Future<Output = Result<Reply, E>>,
    E: Into<Error>,
{
    let mut reply = call.await.map_err(Into::into)?;
    if reply.is_ready() {
        let mut items: Vec<Result<Event, Error>> = StreamExt::collect(reply).await;
        if let Some(Err(_)) = items.first() {
            return Err(items
                .swap_remove(0)
                .expect_err("the first item is an error"));
        }
        return Ok(Reply::from_results(items));
    }
    match reply.next().await {
        None => Ok(Reply::from_events([])),
        Some(Err(error)) => Err(error),
        Some(Ok(first)) => Ok(Reply::from_stream(
            futures::stream::once(async move { Ok(first) }).chain(reply),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::TransportError;

    fn answered(status: u16, headers: &[(&str, &str)], body: &str) -> Error {
        let now = std::time::SystemTime::UNIX_EPOCH;
        ProviderError::from_response("openai", status, headers, body.as_bytes(), now).into()
    }

    fn transport(kind: TransportErrorKind) -> Error {
        TransportError::new("openai", kind, "test").into()
    }

    #[test]
    fn the_classifier_retries_what_may_pass_and_nothing_else() {
        let rate_limited =
            r#"{"error":{"message":"Rate limit","type":"requests","code":"rate_limit_exceeded"}}"#;
        let overloaded =
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        let rows: Vec<(&str, Error, bool)> = vec![
            ("429", answered(429, &[], rate_limited), true),
            ("408", answered(408, &[], ""), true),
            ("409", answered(409, &[], ""), true),
            ("500", answered(500, &[], "oops"), true),
            (
                "502 html",
                answered(502, &[], "<html>bad gateway</html>"),
                true,
            ),
            ("503", answered(503, &[], ""), true),
            ("529 overloaded_error", answered(529, &[], overloaded), true),
            (
                "overloaded_error in a stream",
                answered(200, &[], overloaded),
                true,
            ),
            (
                "UNAVAILABLE (Gemini)",
                answered(
                    200,
                    &[],
                    r#"{"error":{"code":503,"message":"busy","status":"UNAVAILABLE"}}"#,
                ),
                true,
            ),
            (
                "server_error in a 200 stream",
                answered(
                    200,
                    &[],
                    r#"{"error":{"message":"The server had an error","type":"server_error"}}"#,
                ),
                true,
            ),
            (
                "numeric code 500 in a stream (vLLM)",
                answered(
                    200,
                    &[],
                    r#"{"error":{"message":"boom","type":"InternalServerError","code":500}}"#,
                ),
                true,
            ),
            (
                "numeric code 400 in a stream",
                answered(
                    200,
                    &[],
                    r#"{"error":{"message":"bad","type":"BadRequestError","code":400}}"#,
                ),
                false,
            ),
            (
                "invalid_request_error in a stream",
                answered(
                    200,
                    &[],
                    r#"{"error":{"message":"bad","type":"invalid_request_error"}}"#,
                ),
                false,
            ),
            (
                "429 with x-should-retry: false",
                answered(429, &[("x-should-retry", "false")], rate_limited),
                false,
            ),
            (
                "503 with x-should-retry: false",
                answered(503, &[("x-should-retry", "false")], ""),
                false,
            ),
            (
                "400 with x-should-retry: true",
                answered(400, &[("x-should-retry", "true")], ""),
                true,
            ),
            (
                "x-should-retry of another word",
                answered(429, &[("x-should-retry", "maybe")], ""),
                true,
            ),
            (
                "400",
                answered(
                    400,
                    &[],
                    r#"{"error":{"message":"bad","type":"invalid_request_error"}}"#,
                ),
                false,
            ),
            ("401", answered(401, &[], ""), false),
            ("403", answered(403, &[], ""), false),
            ("404", answered(404, &[], ""), false),
            ("422", answered(422, &[], ""), false),
            ("connect", transport(TransportErrorKind::Connect), true),
            ("timeout", transport(TransportErrorKind::Timeout), true),
            (
                "interrupted",
                transport(TransportErrorKind::Interrupted),
                true,
            ),
            ("truncated", transport(TransportErrorKind::Truncated), true),
            ("malformed", transport(TransportErrorKind::Malformed), false),
            ("request", transport(TransportErrorKind::Request), false),
            ("another stage", Error::stage("parser", "bad"), false),
        ];
        for (name, error, retryable) in rows {
            assert_eq!(is_retryable(&error), retryable, "{name}: {error}");
            let policy = RetryPolicy::default();
            assert_eq!(
                policy.delay(0, &error).is_some(),
                retryable,
                "{name}: delay"
            );
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_with_equal_jitter() {
        let mut policy = RetryPolicy::default()
            .max_retries(40)
            .initial_backoff(Duration::from_millis(100));
        policy.max_backoff = Duration::from_secs(1);
        let error = answered(503, &[], "");
        for (retry, full) in [
            (0, 100),
            (1, 200),
            (2, 400),
            (3, 800),
            (4, 1000),
            (39, 1000),
        ] {
            let full = Duration::from_millis(full);
            let waits: Vec<Duration> = (0..200)
                .map(|_| policy.delay(retry, &error).expect("retried"))
                .collect();
            for wait in &waits {
                assert!(
                    *wait >= full / 2 && *wait <= full,
                    "retry {retry}: {wait:?} outside [{:?}, {full:?}]",
                    full / 2
                );
            }
            assert!(
                waits.iter().any(|wait| *wait != waits[0]),
                "retry {retry}: the waits are jittered"
            );
        }
        assert_eq!(policy.delay(40, &error), None, "no retry past max_retries");
        assert_eq!(
            RetryPolicy::default().delay(2, &error),
            None,
            "two retries by default"
        );
    }

    #[test]
    fn retry_after_is_preferred_exactly_and_capped() {
        let policy = RetryPolicy::default().initial_backoff(Duration::from_millis(1));
        let asks = |wait: &str| answered(429, &[("retry-after", wait)], "");
        for retry in 0..2 {
            assert_eq!(
                policy.delay(retry, &asks("3")),
                Some(Duration::from_secs(3))
            );
        }
        assert_eq!(
            policy.delay(0, &answered(503, &[("retry-after-ms", "250")], "")),
            Some(Duration::from_millis(250))
        );
        assert_eq!(policy.delay(0, &asks("60")), Some(Duration::from_secs(60)));
        assert_eq!(policy.delay(0, &asks("61")), None, "over max_retry_after");
        assert_eq!(
            policy
                .clone()
                .max_retry_after(Duration::from_secs(120))
                .delay(0, &asks("61")),
            Some(Duration::from_secs(61))
        );
        assert_eq!(policy.delay(2, &asks("1")), None, "the retries are spent");
        let refused = answered(400, &[("retry-after", "1")], "");
        assert_eq!(policy.delay(0, &refused), None, "not retryable at all");
        let told_not_to = answered(
            429,
            &[("retry-after", "1"), ("x-should-retry", "false")],
            "",
        );
        assert_eq!(policy.delay(0, &told_not_to), None);
        // A Retry-After no duration holds is none: backoff applies.
        let wait = policy.delay(0, &asks("1e20")).unwrap();
        assert!(wait <= Duration::from_millis(1), "{wait:?}");
    }
}

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

use super::TransportErrorKind;
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
        if let Error::Provider(error) = error
            && let Some(wait) = error.retry_after
        {
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
///   `server_error` sent inside a stream;
/// - transport errors: failed connections, timeouts, interrupted and truncated
///   responses (not malformed ones, nor requests that could not be built);
/// - anything else: no.
pub fn is_retryable(error: &Error) -> bool {
    match error {
        Error::Provider(error) => error.should_retry.unwrap_or_else(|| {
            matches!(error.status, 408 | 409 | 429 | 500..=599)
                || error.is_overloaded()
                || error.error_type.as_deref() == Some("server_error")
        }),
        Error::Transport(error) => matches!(
            error.kind,
            TransportErrorKind::Connect
                | TransportErrorKind::Timeout
                | TransportErrorKind::Interrupted
                | TransportErrorKind::Truncated
        ),
        _ => false,
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

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
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

//! Retries a model call that failed **before it delivered anything or had any
//! effect**.
//!
//! [`RetryLayer`] wraps any `Service<ChatRequest, Response = Reply>`. A call is
//! retried when it fails with an error the classifier accepts — by default
//! [`is_retryable`]: HTTP 408, 409, 429 and 5xx, an overloaded provider, a
//! failed connection, a timeout, a stream that broke or ended early — and only
//! while making it again repeats nothing:
//!
//! - **streaming**: only before the first event. The returned future resolves
//!   once the first event is in hand, so a reply that breaks later ends with its
//!   error and is never replayed (the caller may already have shown or acted on
//!   its start);
//! - **non-streaming**: the reply is complete when it arrives. One that ended in
//!   an error is retried only if nothing in it had an effect: no message holds a
//!   tool result. A reply whose tools ran is handed back as it is — the messages
//!   made so far, then the error (see [`Reply::collect_partial`]) — since a new
//!   attempt would run its tools again.
//!
//! **Where it goes.** Around the provider, inside the tool loop, is the usual
//! place: each model call is retried on its own, and no tool runs twice. Around a
//! whole stack (a `ToolLoop` with its `FunctionCall`) it is safe too, but it
//! retries less: a failure after the first tool ran (a 503 in round 2) is
//! returned, with the rounds already run, never replayed.
//!
//! The wait before a retry is the provider's `Retry-After` when it gave one,
//! exactly (a wait longer than [`RetryLayer::max_retry_after`] is not waited out:
//! the error is returned at once), otherwise exponential backoff with equal
//! jitter: between half the backoff and all of it.
//!
//! Everything is set on the layer: the limits, the classifier ([`Classify`], or
//! any closure `Fn(&Error) -> bool`), the clock it sleeps on (tokio's timer by
//! default) and the source of jitter (an RNG seeded per layer by default).
//! [`RetryLayer::wait`] is the schedule as a pure function — no clock, no RNG —
//! which the layer feeds with jitter samples from its source. Injecting both makes
//! a test exact and instant:
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//!
//! use lmstack::retry::RetryLayer;
//! use lmstack::testing::ScriptedModel;
//! use lmstack::{ChatRequest, Error, Message};
//! use tower::{Layer, ServiceExt};
//!
//! # futures::executor::block_on(async {
//! // A model whose first call fails.
//! let model = ScriptedModel::new().fail("busy").reply("hello");
//! let waits = Arc::new(Mutex::new(Vec::new()));
//! let slept = waits.clone();
//! let service = RetryLayer::new()
//!     .initial_backoff(Duration::from_millis(100))
//!     // The scripted failure is a stage error, which `is_retryable` refuses.
//!     .classifier(|error: &Error| matches!(error, Error::Stage { .. }))
//!     .jitter(|| 0.5)
//!     // Records each wait and returns at once.
//!     .sleep(move |wait| {
//!         slept.lock().unwrap().push(wait);
//!         std::future::ready(())
//!     })
//!     .layer(model.clone());
//!
//! let request = ChatRequest::new(vec![Message::user("hi")]).streaming(true);
//! let reply = service.oneshot(request).await.unwrap();
//! assert_eq!(reply.collect().await.unwrap(), vec![Message::assistant("hello")]);
//! assert_eq!(model.requests().len(), 2);
//! // Half of the 100 ms backoff, plus the jitter sample (0.5) times the other half.
//! assert_eq!(*waits.lock().unwrap(), vec![Duration::from_millis(75)]);
//! # });
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use pin_project_lite::pin_project;
use tower::{Layer, Service};

use crate::attempt::{Attempt, Outcome};
pub use crate::attempt::{Classify, is_retryable};
use crate::service::ChatService;
use crate::{ChatRequest, Error, Reply};

/// The limits of a [`RetryLayer`]: plain data, read by the pure schedule.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Limits {
    max_retries: u32,
    initial_backoff: Duration,
    max_backoff: Duration,
    max_retry_after: Duration,
}

/// What to do after a failed attempt that may be retried.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Wait {
    /// Wait exactly this long (the provider's `Retry-After`).
    Exactly(Duration),
    /// Back off: this is the full backoff, before jitter.
    Backoff(Duration),
}

impl Limits {
    /// The plan after an attempt failed with `error`, `retry` retries having been
    /// made already; `None` when the call must not be retried.
    fn plan(&self, classifier: &dyn Classify, retry: u32, error: &Error) -> Option<Wait> {
        if retry >= self.max_retries || !classifier.is_retryable(error) {
            return None;
        }
        if let Some(wait) = error.provider_error().and_then(|error| error.retry_after) {
            return (wait <= self.max_retry_after).then_some(Wait::Exactly(wait));
        }
        let backoff = self
            .initial_backoff
            .saturating_mul(1 << retry.min(16))
            .min(self.max_backoff);
        Some(Wait::Backoff(backoff))
    }
}

/// "Equal jitter": half of `backoff`, plus `sample` (clamped to [0, 1]; not a
/// number counts as 0) times the other half, rounded down to the nanosecond.
fn jittered(backoff: Duration, sample: f64) -> Duration {
    let half = backoff / 2;
    let half_nanos = half.as_nanos();
    // The cast from f64 saturates (a negative product or NaN gives 0), and
    // `min` caps a sample above 1 (or a product rounded up) at the whole half.
    let extra_nanos = ((half_nanos as f64 * sample) as u128).min(half_nanos);
    let extra = Duration::new(
        (extra_nanos / 1_000_000_000) as u64,
        (extra_nanos % 1_000_000_000) as u32,
    );
    half.saturating_add(extra)
}

/// The future an injected sleep returns, boxed since the sleep is a `dyn Fn`.
type SleepFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Everything a [`RetryLayer`] holds; shared by the services it makes.
#[derive(Clone)]
struct Config {
    limits: Limits,
    classifier: Arc<dyn Classify>,
    sleep: Arc<dyn Fn(Duration) -> SleepFuture + Send + Sync>,
    jitter: Arc<Mutex<dyn FnMut() -> f64 + Send>>,
}

impl Config {
    /// The wait after an attempt failed with `error`, `retry` retries having been
    /// made already, drawing a jitter sample from the source only when backing
    /// off; `None` when not retried.
    fn next_wait(&self, retry: u32, error: &Error) -> Option<Duration> {
        match self.limits.plan(&*self.classifier, retry, error)? {
            Wait::Exactly(wait) => Some(wait),
            Wait::Backoff(backoff) => {
                // A source that panicked once is still a source of numbers.
                let mut source = self.jitter.lock().unwrap_or_else(|e| e.into_inner());
                Some(jittered(backoff, (*source)()))
            }
        }
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("max_retries", &self.limits.max_retries)
            .field("initial_backoff", &self.limits.initial_backoff)
            .field("max_backoff", &self.limits.max_backoff)
            .field("max_retry_after", &self.limits.max_retry_after)
            .finish_non_exhaustive()
    }
}

/// The [`Layer`] that retries calls failing before their first event; see the
/// [module docs](self). Built with [`RetryLayer::new`] and its setters; cheap to
/// clone (clones share the classifier, the sleep and the jitter source).
#[derive(Clone, Debug)]
pub struct RetryLayer {
    config: Arc<Config>,
}

impl Default for RetryLayer {
    /// The same as [`RetryLayer::new`].
    fn default() -> Self {
        Self::new()
    }
}

impl RetryLayer {
    /// Two retries; backoff from 500 ms, doubling up to 8 s; `Retry-After` waited
    /// out up to 60 s; the [`is_retryable`] classifier; `tokio::time::sleep`
    /// (so the calls need a tokio runtime with its timer); jitter from a
    /// `fastrand` RNG seeded for this layer.
    pub fn new() -> Self {
        let mut rng = fastrand::Rng::new();
        RetryLayer {
            config: Arc::new(Config {
                limits: Limits {
                    max_retries: 2,
                    initial_backoff: Duration::from_millis(500),
                    max_backoff: Duration::from_secs(8),
                    max_retry_after: Duration::from_secs(60),
                },
                classifier: Arc::new(is_retryable),
                sleep: Arc::new(|wait| -> SleepFuture { Box::pin(tokio::time::sleep(wait)) }),
                jitter: Arc::new(Mutex::new(move || rng.f64())),
            }),
        }
    }

    fn config(&mut self) -> &mut Config {
        Arc::make_mut(&mut self.config)
    }

    /// Sets how many times a call is retried after its first attempt.
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.config().limits.max_retries = retries;
        self
    }

    /// Sets the backoff before the first retry; it doubles for each further one.
    pub fn initial_backoff(mut self, backoff: Duration) -> Self {
        self.config().limits.initial_backoff = backoff;
        self
    }

    /// Sets the longest backoff.
    pub fn max_backoff(mut self, backoff: Duration) -> Self {
        self.config().limits.max_backoff = backoff;
        self
    }

    /// Sets the longest `Retry-After` waited out; a provider that asks for more
    /// gets its error returned at once.
    pub fn max_retry_after(mut self, wait: Duration) -> Self {
        self.config().limits.max_retry_after = wait;
        self
    }

    /// Sets the classifier: a [`Classify`], such as a closure
    /// `|error: &Error| -> bool`.
    pub fn classifier(mut self, classifier: impl Classify) -> Self {
        self.config().classifier = Arc::new(classifier);
        self
    }

    /// Sets how to wait: `sleep(wait)` returns a future that completes once
    /// `wait` has passed (the default is `tokio::time::sleep`). A test can record
    /// the waits and return at once.
    pub fn sleep<F, Fut>(mut self, sleep: F) -> Self
    where
        F: Fn(Duration) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.config().sleep = Arc::new(move |wait| -> SleepFuture { Box::pin(sleep(wait)) });
        self
    }

    /// Sets the source of jitter: each call gives a sample in [0, 1), drawn once
    /// per backoff (not for a `Retry-After` wait). Samples outside [0, 1] are
    /// clamped. Services made by this layer (and its clones) share the source.
    pub fn jitter<F>(mut self, source: F) -> Self
    where
        F: FnMut() -> f64 + Send + 'static,
    {
        self.config().jitter = Arc::new(Mutex::new(source));
        self
    }

    /// The wait before the next attempt after one failed with `error`, when
    /// `retry` retries were made already (0 after the first attempt), given the
    /// jitter sample `jitter` in [0, 1); `None` when the call is not retried: the
    /// retries are spent, the classifier refuses the error, or its `Retry-After`
    /// is above [`max_retry_after`](Self::max_retry_after).
    ///
    /// This is the whole schedule, as a pure function: it reads no clock and draws
    /// no random number.
    ///
    /// ```
    /// use lmstack::provider::{TransportError, TransportErrorKind};
    /// use lmstack::retry::RetryLayer;
    /// use std::time::Duration;
    ///
    /// let layer = RetryLayer::new().initial_backoff(Duration::from_millis(100));
    /// let error = TransportError::new("openai", TransportErrorKind::Connect, "refused").into();
    /// assert_eq!(layer.wait(0, &error, 0.0), Some(Duration::from_millis(50)));
    /// assert_eq!(layer.wait(1, &error, 0.5), Some(Duration::from_millis(150)));
    /// assert_eq!(layer.wait(2, &error, 0.5), None, "two retries by default");
    /// ```
    pub fn wait(&self, retry: u32, error: &Error, jitter: f64) -> Option<Duration> {
        let config = &self.config;
        match config.limits.plan(&*config.classifier, retry, error)? {
            Wait::Exactly(wait) => Some(wait),
            Wait::Backoff(backoff) => Some(jittered(backoff, jitter)),
        }
    }
}

impl RetryLayer {
    /// The wait before retry number `retry + 1` of a call that failed with
    /// `error`, drawn as the layer's own calls draw it (its jitter source);
    /// `None` when not retried. For a gateway that sends requests of its own.
    #[cfg(feature = "server")]
    pub(crate) fn next_wait(&self, retry: u32, error: &Error) -> Option<Duration> {
        self.config.next_wait(retry, error)
    }

    /// Waits `wait` as the layer's own calls wait (its sleep).
    #[cfg(feature = "server")]
    pub(crate) fn wait_out(&self, wait: Duration) -> SleepFuture {
        (self.config.sleep)(wait)
    }
}

impl<S> Layer<S> for RetryLayer {
    type Service = Retry<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Retry {
            inner,
            config: self.config.clone(),
        }
    }
}

/// Retries calls of `S` that fail before their first event; made by
/// [`RetryLayer`]. See the [module docs](self).
#[derive(Clone, Debug)]
pub struct Retry<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S> Retry<S> {
    crate::service::inner_service_accessors!(inner: S);
}

impl<S> Service<ChatRequest> for Retry<S>
where
    S: ChatService + Clone,
{
    type Response = Reply;
    type Error = Error;
    type Future = ResponseFuture<S>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: ChatRequest) -> Self::Future {
        // The service that was made ready takes this call; a clone stays behind.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let attempt = Attempt::new(inner.call(request.clone()), request.options.stream, "retry");
        ResponseFuture {
            inner,
            request,
            config: self.config.clone(),
            retry: 0,
            state: State::Attempting { attempt },
        }
    }
}

pin_project! {
    /// The future of [`Retry`]: resolves with the reply once its first event is
    /// in hand (or once it is complete, in non-streaming mode), or with the error
    /// that ended the last attempt.
    ///
    /// A state machine over one call: an attempt, waiting for its first event,
    /// the sleep before a retry, the inner service's readiness for the next
    /// attempt. It boxes nothing but the injected sleep's future, which is a
    /// `dyn Future` because the sleep is a `dyn Fn`. (A streaming reply it
    /// resolves with is a [`Reply`], a boxed stream as every streaming reply is,
    /// with its first event put back in front.)
    pub struct ResponseFuture<S>
    where
        S: Service<ChatRequest>,
    {
        inner: S,
        request: ChatRequest,
        config: Arc<Config>,
        retry: u32,
        #[pin]
        state: State<S::Future>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        // An attempt is under way, until its first event.
        Attempting { #[pin] attempt: Attempt<F> },
        // Waiting before the next attempt.
        Sleeping { sleep: SleepFuture },
        // Waiting for the inner service to be ready for the next attempt.
        Readying,
        // The future has resolved.
        Done,
    }
}

impl<S> Future for ResponseFuture<S>
where
    S: Service<ChatRequest, Response = Reply>,
    S::Error: Into<Error>,
{
    type Output = Result<Reply, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            let outcome = match this.state.as_mut().project() {
                StateProj::Attempting { attempt } => ready!(attempt.poll(cx)),
                StateProj::Sleeping { sleep } => {
                    ready!(sleep.as_mut().poll(cx));
                    this.state.set(State::Readying);
                    continue;
                }
                StateProj::Readying => {
                    if let Err(error) = ready!(this.inner.poll_ready(cx)) {
                        this.state.set(State::Done);
                        return Poll::Ready(Err(error.into()));
                    }
                    let call = this.inner.call(this.request.clone());
                    let attempt = Attempt::new(call, this.request.options.stream, "retry");
                    this.state.set(State::Attempting { attempt });
                    continue;
                }
                StateProj::Done => {
                    return Poll::Ready(Err(Error::stage(
                        "retry",
                        "the response future was polled after it completed",
                    )));
                }
            };
            let wait = match &outcome {
                // Failed before anything was delivered: made again if it may be.
                Outcome::Failed { error, .. } => this.config.next_wait(*this.retry, error),
                Outcome::Delivered(_) => None,
            };
            let Some(wait) = wait else {
                this.state.set(State::Done);
                return Poll::Ready(outcome.into_result());
            };
            *this.retry += 1;
            if let Outcome::Failed { error, .. } = &outcome {
                tracing::warn!(%error, retry = *this.retry, ?wait, "retrying the model call");
            }
            let sleep = (this.config.sleep)(wait);
            this.state.set(State::Sleeping { sleep });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::TransportError;
    use crate::provider::{ProviderError, TransportErrorKind};

    /// A fixed time for `Retry-After` dates (none of these tests sends one).
    fn now() -> std::time::SystemTime {
        std::time::SystemTime::UNIX_EPOCH
    }

    fn answered(status: u16, headers: &[(&str, &str)], body: &str) -> Error {
        ProviderError::from_response("openai", status, headers, body.as_bytes(), now()).into()
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
        let layer = RetryLayer::new();
        for (name, error, retryable) in rows {
            assert_eq!(is_retryable(&error), retryable, "{name}: {error}");
            assert_eq!(
                layer.wait(0, &error, 0.5).is_some(),
                retryable,
                "{name}: wait"
            );
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_with_equal_jitter_exactly() {
        let layer = RetryLayer::new()
            .max_retries(40)
            .initial_backoff(Duration::from_millis(100))
            .max_backoff(Duration::from_secs(1));
        let error = answered(503, &[], "");
        let ms = Duration::from_millis;
        for (retry, full) in [
            (0, 100),
            (1, 200),
            (2, 400),
            (3, 800),
            (4, 1000),
            (39, 1000),
        ] {
            let wait = |sample| layer.wait(retry, &error, sample);
            assert_eq!(wait(0.0), Some(ms(full / 2)), "retry {retry}, sample 0");
            assert_eq!(
                wait(0.5),
                Some(ms(full * 3 / 4)),
                "retry {retry}, sample 0.5"
            );
            assert_eq!(wait(1.0), Some(ms(full)), "retry {retry}, sample 1");
        }
        assert_eq!(
            layer.wait(40, &error, 0.5),
            None,
            "no retry past max_retries"
        );

        let defaults = RetryLayer::new();
        assert_eq!(defaults.wait(0, &error, 0.0), Some(ms(250)));
        assert_eq!(defaults.wait(1, &error, 1.0), Some(ms(1000)));
        assert_eq!(
            defaults.wait(2, &error, 0.5),
            None,
            "two retries by default"
        );
        let many = RetryLayer::new().max_retries(10);
        assert_eq!(many.wait(5, &error, 1.0), Some(ms(8000)), "8 s at most");
        assert_eq!(many.wait(9, &error, 1.0), Some(ms(8000)));
    }

    #[test]
    fn jitter_samples_and_durations_out_of_range_are_clamped_without_panicking() {
        let layer = RetryLayer::new().initial_backoff(Duration::from_millis(100));
        let error = transport(TransportErrorKind::Connect);
        let ms = Duration::from_millis;
        for (sample, wait) in [
            (-1.0, 50),
            (f64::NEG_INFINITY, 50),
            (f64::NAN, 50),
            (2.0, 100),
            (f64::INFINITY, 100),
        ] {
            assert_eq!(layer.wait(0, &error, sample), Some(ms(wait)), "{sample}");
        }
        let huge = RetryLayer::new()
            .max_retries(u32::MAX)
            .initial_backoff(Duration::MAX)
            .max_backoff(Duration::MAX);
        for retry in [0, 1, 16, 17, u32::MAX - 1] {
            for sample in [0.0, 0.5, 0.999_999, 1.0] {
                let wait = huge.wait(retry, &error, sample).expect("retried");
                assert!(wait >= Duration::MAX / 2, "{retry} {sample}: {wait:?}");
            }
        }
        assert_eq!(huge.wait(u32::MAX, &error, 0.5), None);
    }

    #[test]
    fn retry_after_is_preferred_exactly_and_capped() {
        let layer = RetryLayer::new().initial_backoff(Duration::from_millis(1));
        let asks = |wait: &str| answered(429, &[("retry-after", wait)], "");
        for retry in 0..2 {
            for sample in [0.0, 0.7] {
                assert_eq!(
                    layer.wait(retry, &asks("3"), sample),
                    Some(Duration::from_secs(3))
                );
            }
        }
        assert_eq!(
            layer.wait(0, &answered(503, &[("retry-after-ms", "250")], ""), 0.5),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            layer.wait(0, &asks("60"), 0.5),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            layer.wait(0, &asks("61"), 0.5),
            None,
            "over max_retry_after"
        );
        assert_eq!(
            layer
                .clone()
                .max_retry_after(Duration::from_secs(120))
                .wait(0, &asks("61"), 0.5),
            Some(Duration::from_secs(61))
        );
        assert_eq!(
            layer.wait(2, &asks("1"), 0.5),
            None,
            "the retries are spent"
        );
        let refused = answered(400, &[("retry-after", "1")], "");
        assert_eq!(layer.wait(0, &refused, 0.5), None, "not retryable at all");
        let told_not_to = answered(
            429,
            &[("retry-after", "1"), ("x-should-retry", "false")],
            "",
        );
        assert_eq!(layer.wait(0, &told_not_to, 0.5), None);
        // A Retry-After no duration holds is none: backoff applies.
        assert_eq!(
            layer.wait(0, &asks("1e20"), 1.0),
            Some(Duration::from_millis(1))
        );
    }
}

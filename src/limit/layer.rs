//! The layer: a request let in when its caller's key has room, its tokens
//! reserved, and what its reply used settled once it ends.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use futures::{FutureExt, Stream, StreamExt};
use tower::{Layer, Service, ServiceExt};

use super::price::micros;
use super::store::{Add, Counter, LimitStore, MemoryLimitStore, Take};
use super::window::{Period, Window};
use super::{Caller, Price};
use crate::provider::ProviderError;
use crate::service::ChatService;
use crate::{ChatRequest, Error, Event, Message, Reply, Usage};

/// What one key may use: requests and tokens per minute, and a spend per
/// [`Period`] (in the currency of the models' [`Price`]s). Each is unlimited
/// when left out; a limit of 0 refuses every request.
///
/// ```
/// use lmstack::limit::{KeyLimits, Period};
///
/// let alice = KeyLimits::new()
///     .requests_per_minute(60)
///     .tokens_per_minute(100_000)
///     .budget(5.0, Period::Day);
/// assert_eq!(alice.requests_per_minute, Some(60));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct KeyLimits {
    /// Requests let in per minute.
    pub requests_per_minute: Option<u64>,
    /// Tokens (input and output) per minute: each request reserves its
    /// `max_tokens` and an estimate of its input, settled with its usage.
    pub tokens_per_minute: Option<u64>,
    /// The spend per `budget_period`.
    pub budget: Option<f64>,
    /// The period the budget is counted over.
    pub budget_period: Period,
}

impl KeyLimits {
    /// No limit.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the requests per minute.
    pub fn requests_per_minute(mut self, requests: u64) -> Self {
        self.requests_per_minute = Some(requests);
        self
    }

    /// Sets the tokens per minute.
    pub fn tokens_per_minute(mut self, tokens: u64) -> Self {
        self.tokens_per_minute = Some(tokens);
        self
    }

    /// Sets the spend allowed per `period`.
    pub fn budget(mut self, budget: f64, period: Period) -> Self {
        self.budget = Some(budget);
        self.budget_period = period;
        self
    }
}

/// What the limits do while their store fails (unreachable, timed out):
/// let requests pass unlimited (`open`, the default) or refuse them with 503
/// (`closed`). Either way one warning is logged per outage, not per request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnStoreError {
    /// Requests pass.
    #[default]
    Open,
    /// Requests are refused.
    Closed,
}

/// The clock of the limits: Unix milliseconds.
type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// Applies [`Limits`] to a service: what each caller's key may use, counted
/// in a [`LimitStore`] ([`MemoryLimitStore`] unless set). Clones share the
/// store and the keys; give each model's clone its [`price`](Self::price).
///
/// A request's caller is the [`Caller`] in its
/// [`extensions`](crate::ChatRequest::extensions) (the gateway puts it there
/// from the key the client presented); a request without one, or whose key
/// has no limits, passes as it is. Otherwise it is let in when all of these
/// have room, in one atomic step of the store that takes from every counter
/// or from none (a refused request uses nothing), and the first without
/// room refuses it:
///
/// - **budget**: refused while the key's spend in the current period has
///   reached its budget (so the last request let in may pass it by its own
///   cost); `Retry-After` is the period's end (none for `total`);
/// - **requests per minute**: one taken from the key's current minute;
/// - **tokens per minute**: the request's `max_tokens` (else
///   [`default_max_tokens`](Self::default_max_tokens)) plus an estimate of its
///   input (its messages' JSON size / 4) reserved in the key's current minute
///   (at most the whole limit, so that no request is refused for ever), and
///   settled with the reply's reported usage once it ends (a reply without
///   usage keeps its reservation) in one more step, which also adds the
///   spend.
///
/// A refusal is a 429 [`ProviderError`] (`rate_limit_error`,
/// `rate_limit_exceeded`) whose `retry_after` is the time until the window
/// ends, marked not to be retried (`should_retry`): neither a retry layer nor
/// a gateway's fallback model calls again for a client over its limit; a
/// gateway answers it in the client's format with `Retry-After`.
/// Windows are fixed minutes, aligned on the clock, so a key may burst up to
/// twice its rate across a minute's turn. The spend (in millionths of the
/// currency) is each reply's usage at the model's [`Price`].
///
/// ```
/// use lmstack::limit::{Caller, KeyLimits, LimitLayer};
/// use lmstack::testing::ScriptedModel;
/// use lmstack::{ChatRequest, Message};
/// use tower::{Layer, ServiceExt};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let limits = LimitLayer::new().key("alice", KeyLimits::new().requests_per_minute(1));
/// let model = limits.layer(ScriptedModel::new().reply("one").reply("two"));
/// let mut request = ChatRequest::new(vec![Message::user("hi")]);
/// request.extensions.insert(Caller::new("alice"));
/// assert!(model.clone().oneshot(request.clone()).await.is_ok());
/// let refused = model.oneshot(request).await.unwrap_err();
/// assert_eq!(refused.http_status(), 429);
/// assert!(refused.provider_error().unwrap().retry_after.is_some());
/// # });
/// ```
#[derive(Clone)]
pub struct LimitLayer {
    store: Arc<dyn LimitStore>,
    keys: Arc<HashMap<String, KeyLimits>>,
    price: Option<Price>,
    default_max_tokens: u64,
    on_store_error: OnStoreError,
    clock: Clock,
    outage: Arc<Outage>,
}

impl std::fmt::Debug for LimitLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LimitLayer")
            .field("keys", &self.keys)
            .field("price", &self.price)
            .field("default_max_tokens", &self.default_max_tokens)
            .field("on_store_error", &self.on_store_error)
            .finish_non_exhaustive()
    }
}

impl Default for LimitLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl LimitLayer {
    /// The tokens reserved for the output of a request that names no
    /// `max_tokens`, by default.
    pub const DEFAULT_MAX_TOKENS: u64 = 4096;

    /// No key limited yet, counted in a fresh [`MemoryLimitStore`], failing
    /// open, on the system clock.
    pub fn new() -> Self {
        LimitLayer {
            store: Arc::new(MemoryLimitStore::new()),
            keys: Arc::default(),
            price: None,
            default_max_tokens: Self::DEFAULT_MAX_TOKENS,
            on_store_error: OnStoreError::default(),
            clock: Arc::new(system_millis),
            outage: Arc::default(),
        }
    }

    /// Counts in `store` (shared by replicas: a `RedisLimitStore`).
    pub fn store(mut self, store: impl LimitStore) -> Self {
        self.store = Arc::new(store);
        self
    }

    /// Limits the key `name`.
    pub fn key(mut self, name: impl Into<String>, limits: KeyLimits) -> Self {
        Arc::make_mut(&mut self.keys).insert(name.into(), limits);
        self
    }

    /// Whether `caller`'s key is limited here (its requests are counted).
    ///
    /// ```
    /// use lmstack::limit::{Caller, KeyLimits, LimitLayer};
    ///
    /// let layer = LimitLayer::new().key("alice", KeyLimits::new().requests_per_minute(10));
    /// assert!(layer.limits(&Caller::new("alice")));
    /// assert!(!layer.limits(&Caller::new("bob")));
    /// ```
    pub fn limits(&self, caller: &Caller) -> bool {
        self.keys.contains_key(caller.name())
    }

    /// The prices of the model served (its spend counts toward budgets; a
    /// model without one costs nothing).
    pub fn price(mut self, price: Option<Price>) -> Self {
        self.price = price;
        self
    }

    /// Sets the output tokens reserved for a request without `max_tokens`.
    pub fn default_max_tokens(mut self, tokens: u64) -> Self {
        self.default_max_tokens = tokens;
        self
    }

    /// Sets what happens while the store fails.
    pub fn on_store_error(mut self, policy: OnStoreError) -> Self {
        self.on_store_error = policy;
        self
    }

    /// Reads the time from `clock` (Unix milliseconds) instead of the system
    /// clock: for tests.
    pub fn clock(mut self, clock: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }
}

impl<S> Layer<S> for LimitLayer {
    type Service = Limits<S>;

    fn layer(&self, inner: S) -> Limits<S> {
        Limits {
            inner,
            layer: self.clone(),
        }
    }
}

/// A service whose requests are limited per caller's key: see
/// [`LimitLayer`].
#[derive(Clone, Debug)]
pub struct Limits<S> {
    inner: S,
    layer: LimitLayer,
}

impl<S> Service<ChatRequest> for Limits<S>
where
    S: ChatService + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Reply;
    type Error = Error;
    type Future = BoxFuture<'static, Result<Reply, Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: ChatRequest) -> Self::Future {
        // The service made ready is the one called; a clone stays behind.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let caller = request.extensions.get::<Caller>();
        let Some(caller) = caller.filter(|caller| self.layer.limits(caller)).cloned() else {
            return Box::pin(inner.oneshot(request).map(|done| done.map_err(Into::into)));
        };
        let layer = self.layer.clone();
        Box::pin(async move {
            let tokens = layer.reservation(request.options.max_tokens.map(u64::from), {
                let mut measured = Measured(0);
                let _ = serde_json::to_writer(&mut measured, &request.messages);
                measured.0
            });
            let Some(mut admitted) = layer.admit(&caller, tokens).await? else {
                return inner.oneshot(request).await.map_err(Into::into);
            };
            match inner.oneshot(request).await.map_err(Into::into) {
                Ok(reply) => Ok(Reply::from_stream(Settling {
                    reply,
                    admitted: Some(admitted),
                    pending: None,
                })),
                Err(error) => {
                    admitted.nothing_used();
                    admitted.settle().await;
                    Err(error)
                }
            }
        })
    }
}

/// A writer that only counts the bytes written to it.
struct Measured(u64);

impl std::io::Write for Measured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len() as u64;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Why a request was not let in: over a limit, or the store failed.
enum Refused {
    Over(Error),
    Store(Error),
}

impl LimitLayer {
    /// The tokens a request reserves in its key's tokens per minute: its
    /// `max_tokens` (else [`default_max_tokens`](Self::default_max_tokens))
    /// and an estimate of its input, a quarter of `input_bytes` (the size of
    /// its messages' JSON, or of its whole body).
    ///
    /// ```
    /// use lmstack::limit::LimitLayer;
    ///
    /// let layer = LimitLayer::new().default_max_tokens(100);
    /// assert_eq!(layer.reservation(Some(10), 400), 110);
    /// assert_eq!(layer.reservation(None, 400), 200);
    /// ```
    pub fn reservation(&self, max_tokens: Option<u64>, input_bytes: u64) -> u64 {
        let output = max_tokens.unwrap_or(self.default_max_tokens);
        output.saturating_add(input_bytes / 4)
    }

    /// Lets a request of `caller` in, reserving `tokens` (see
    /// [`reservation`](Self::reservation)), as the layer lets its requests
    /// in: what its answer used is settled through the [`Admitted`] once it
    /// ends. `None` when `caller`'s key has no limits here, or the store
    /// failed and the limits fail open; a refusal (429 past a limit, 503
    /// while a closed store fails) as the layer's. For a server that
    /// answers some requests without the layer (a gateway's fast path).
    ///
    /// ```
    /// use lmstack::limit::{Caller, KeyLimits, LimitLayer};
    /// use lmstack::{Event, Usage};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let limits = LimitLayer::new().key("alice", KeyLimits::new().requests_per_minute(1));
    /// let alice = Caller::new("alice");
    /// let mut admitted = limits.admit(&alice, 100).await?.expect("alice is limited");
    /// let usage = Usage { input_tokens: 10, output_tokens: 2, ..Usage::default() };
    /// admitted.observe(&Event::Usage(usage));
    /// admitted.settle().await;
    /// assert_eq!(limits.admit(&alice, 100).await.unwrap_err().http_status(), 429);
    /// assert!(limits.admit(&Caller::new("bob"), 100).await?.is_none());
    /// # Ok::<(), lmstack::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn admit(&self, caller: &Caller, tokens: u64) -> Result<Option<Admitted>, Error> {
        let Some(limits) = self.keys.get(caller.name()) else {
            return Ok(None);
        };
        match self.take(caller, limits, tokens).await {
            Ok(settle) => {
                self.outage.answered();
                Ok(Some(Admitted {
                    settle: Some(settle),
                }))
            }
            Err(Refused::Over(error)) => Err(error),
            Err(Refused::Store(error)) => {
                self.outage.failed(&error, self.on_store_error);
                match self.on_store_error {
                    OnStoreError::Open => Ok(None),
                    OnStoreError::Closed => Err(store_down()),
                }
            }
        }
    }

    /// Checks the budget, takes a request and reserves `reserve` tokens from
    /// `caller`'s windows, in one step of the store that takes all or
    /// nothing: what to settle once the reply ends.
    async fn take(
        &self,
        caller: &Caller,
        limits: &KeyLimits,
        reserve: u64,
    ) -> Result<Settle, Refused> {
        let now = (self.clock)();
        let name = caller.name();
        let minute = Window::fixed(now, MINUTE);
        let mut settle = Settle {
            layer: self.clone(),
            caller: caller.clone(),
            budget: limits.budget.map(|_| limits.budget_period),
            reserved: None,
            usage: None,
        };
        // Each take, with the limit it checks and its window.
        let mut takes = Vec::with_capacity(3);
        let mut checks = Vec::with_capacity(3);
        if let Some(budget) = limits.budget {
            let window = limits.budget_period.window(now);
            // A take of 0: room while the spend is under the budget.
            takes.push(Take {
                counter: counter("spend", name, window),
                amount: 0,
                limit: micros(budget),
            });
            checks.push((Limit::Budget(budget, limits.budget_period), window));
        }
        if let Some(limit) = limits.requests_per_minute {
            takes.push(Take {
                counter: counter("rpm", name, minute),
                amount: 1,
                limit,
            });
            checks.push((Limit::Requests(limit), minute));
        }
        if let Some(limit) = limits.tokens_per_minute {
            let tokens = counter("tpm", name, minute);
            let amount = reserve.min(limit);
            takes.push(Take {
                counter: tokens.clone(),
                amount,
                limit,
            });
            checks.push((Limit::Tokens(limit), minute));
            settle.reserved = Some((tokens, amount));
        }
        if takes.is_empty() {
            return Ok(settle);
        }
        let admission = self
            .store
            .take_all(&takes, now)
            .await
            .map_err(Refused::Store)?;
        match admission.refused.and_then(|index| checks.get(index)) {
            Some((limit, window)) => {
                Err(Refused::Over(over(limit.refusal(name), window.wait(now))))
            }
            None => Ok(settle),
        }
    }
}

/// The limit a take checks, for the words of its refusal.
enum Limit {
    Budget(f64, Period),
    Requests(u64),
    Tokens(u64),
}

impl Limit {
    /// Why the key `name` is refused by this limit.
    fn refusal(&self, name: &str) -> String {
        match self {
            Limit::Budget(budget, period) => format!(
                "the key `{name}` has spent its budget of {budget} for this {}",
                period.name()
            ),
            Limit::Requests(limit) => {
                format!("the key `{name}` is over its limit of {limit} requests per minute")
            }
            Limit::Tokens(limit) => {
                format!("the key `{name}` is over its limit of {limit} tokens per minute")
            }
        }
    }
}

/// A minute, in milliseconds.
const MINUTE: u64 = 60_000;

/// The counter of `what` (`rpm`, `tpm`, `spend`) for the key `name` in
/// `window`. The name is a hash tag (`{alice}`): a Redis Cluster keeps every
/// counter of one key in one slot, so that one script may take from them all.
fn counter(what: &str, name: &str, window: Window) -> Counter {
    Counter {
        key: format!("{what}:{{{name}}}:{}", window.start),
        expires_at: window.end,
    }
}

/// A refusal over a limit: 429, with the wait.
fn over(message: String, retry_after: Option<Duration>) -> Error {
    ProviderError {
        provider: "limits",
        status: 429,
        error_type: Some("rate_limit_error".into()),
        code: Some("rate_limit_exceeded".into()),
        param: None,
        message,
        request_id: None,
        retry_after,
        // The client is over its own limit: no other attempt may serve it.
        should_retry: Some(false),
    }
    .into()
}

/// The refusal while a closed store fails: 503.
fn store_down() -> Error {
    ProviderError {
        provider: "limits",
        status: 503,
        error_type: Some("overloaded_error".into()),
        code: None,
        param: None,
        message: "the limits cannot be checked now (their store is unreachable)".into(),
        request_id: None,
        retry_after: Some(Duration::from_secs(1)),
        should_retry: Some(false),
    }
    .into()
}

/// What is settled once a reply ends: the reserved tokens against the usage,
/// and the spend.
struct Settle {
    layer: LimitLayer,
    caller: Caller,
    /// The period of the key's budget, when it has one.
    budget: Option<Period>,
    /// The tokens counter and what was reserved in it.
    reserved: Option<(Counter, u64)>,
    /// The usage the reply reported (summed over its rounds).
    usage: Option<Usage>,
}

impl Settle {
    fn observe(&mut self, event: &Event) {
        if let Event::Usage(usage)
        | Event::Message {
            message: Message::Usage(usage),
        } = event
        {
            self.usage.get_or_insert_with(Usage::default).add(usage);
        }
    }

    /// Settles the reserved tokens with the usage, and adds the spend: one
    /// step of the store (none when there is nothing to add).
    async fn run(self) {
        let Some(usage) = &self.usage else {
            return;
        };
        let now = (self.layer.clock)();
        let mut adds = Vec::with_capacity(2);
        if let Some((tokens, reserved)) = &self.reserved {
            let used = usage.input_tokens.saturating_add(usage.output_tokens);
            let delta = i128::from(used) - i128::from(*reserved);
            adds.push(Add {
                counter: tokens.clone(),
                amount: i64::try_from(delta).unwrap_or(i64::MAX),
            });
        }
        let cost = self.layer.price.map_or(0, |price| price.cost_micros(usage));
        if let Some(period) = self.budget {
            adds.push(Add {
                counter: counter("spend", self.caller.name(), period.window(now)),
                amount: i64::try_from(cost).unwrap_or(i64::MAX),
            });
        }
        adds.retain(|add| add.amount != 0);
        if adds.is_empty() {
            return;
        }
        match self.layer.store.add_all(&adds, now).await {
            Ok(_) => self.layer.outage.answered(),
            Err(error) => self.layer.outage.failed(&error, self.layer.on_store_error),
        }
    }
}

/// A request let in by [`LimitLayer::admit`]: what its answer used, seen by
/// [`observe`](Self::observe), is settled by [`settle`](Self::settle) once
/// it ends — or, dropped unsettled (its client went away), in a task of its
/// own (on the tokio runtime, where there is one). An answer that reported no
/// usage keeps its reservation.
pub struct Admitted {
    settle: Option<Settle>,
}

impl std::fmt::Debug for Admitted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let usage = self
            .settle
            .as_ref()
            .and_then(|settle| settle.usage.as_ref());
        f.debug_struct("Admitted").field("usage", &usage).finish()
    }
}

impl Admitted {
    /// Counts `event`'s usage, if it is one (summed over the answer's
    /// rounds).
    pub fn observe(&mut self, event: &Event) {
        if let Some(settle) = &mut self.settle {
            settle.observe(event);
        }
    }

    /// Notes that the request used nothing (it failed before its answer):
    /// its reservation is given back when settled.
    pub fn nothing_used(&mut self) {
        if let Some(settle) = &mut self.settle {
            settle.usage = Some(Usage::default());
        }
    }

    /// Settles what the answer used: one step of the store (none when there
    /// is nothing to add).
    pub fn settle(mut self) -> BoxFuture<'static, ()> {
        match self.settle.take() {
            Some(settle) => Box::pin(settle.run()),
            None => Box::pin(std::future::ready(())),
        }
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Some(settle) = self.settle.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(settle.run());
        }
    }
}

/// A reply whose usage is settled when it ends (or, dropped, as its
/// [`Admitted`] is).
struct Settling {
    reply: Reply,
    admitted: Option<Admitted>,
    pending: Option<BoxFuture<'static, ()>>,
}

impl Stream for Settling {
    type Item = Result<Event, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(pending) = &mut this.pending {
                ready!(pending.poll_unpin(cx));
                this.pending = None;
                return Poll::Ready(None);
            }
            match ready!(this.reply.poll_next_unpin(cx)) {
                Some(item) => {
                    if let (Ok(event), Some(admitted)) = (&item, &mut this.admitted) {
                        admitted.observe(event);
                    }
                    return Poll::Ready(Some(item));
                }
                None => match this.admitted.take() {
                    Some(admitted) => this.pending = Some(admitted.settle()),
                    None => return Poll::Ready(None),
                },
            }
        }
    }
}

/// Whether the store is failing: one warning when an outage begins, one line
/// when it ends.
#[derive(Debug, Default)]
struct Outage {
    failing: AtomicBool,
}

impl Outage {
    fn failed(&self, error: &Error, policy: OnStoreError) {
        if !self.failing.swap(true, Ordering::Relaxed) {
            let then = match policy {
                OnStoreError::Open => "requests pass unlimited",
                OnStoreError::Closed => "requests are refused with 503",
            };
            tracing::warn!(
                target: "lmstack::limit",
                "the limit store failed ({error}); {then} until it answers again"
            );
        }
    }

    fn answered(&self) {
        if self.failing.swap(false, Ordering::Relaxed) {
            tracing::info!(target: "lmstack::limit", "the limit store answers again");
        }
    }
}

/// The system clock, in Unix milliseconds.
fn system_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}

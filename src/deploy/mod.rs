//! One model served by several **deployments** (keys, regions, providers):
//! the least loaded takes each call, a session stays on one deployment, a
//! failing deployment cools down, and a call that fails before its first event
//! falls back to the next.
//!
//! [`Deployments`] is a `Service<ChatRequest>` over several inner chat services.
//! For each call it
//!
//! - **chooses** the deployment with the fewest requests in flight relative to
//!   its weight ([`Deployments::weighted`]; a request is in flight until its
//!   reply ends or is dropped), the first listed on a tie — unless the request
//!   has a **session key**: then the deployment the key hashes to (weighted
//!   rendezvous hashing, no state: keys spread in proportion to the weights),
//!   so that a conversation keeps its prompt cache. A key stays on its
//!   deployment while that one takes calls, and moves only while it does not.
//!   The key is read by [`common_session_key`] by default (the request's
//!   [`SessionKey`](crate::SessionKey), `prompt_cache_key`,
//!   `metadata.user_id`, `user`), or by a function of your own
//!   ([`Deployments::session_key`]);
//! - **falls back** to the next deployment (by the same choice, among those not
//!   tried yet) when the call fails **before its first event** with an error the
//!   classifier accepts — by default the retry layer's [`is_retryable`]: 429,
//!   5xx, failed connections, timeouts. The returned future resolves once the
//!   first event is in hand (a non-streaming reply: once it is complete), so a
//!   call is never sent again after it delivered anything. Other errors (a 400)
//!   are the caller's and are returned as they are. When every deployment has
//!   been tried, the last error is returned;
//! - **cools down** a failing deployment with a circuit breaker per deployment:
//!   after [`failures_to_open`](Deployments::failures_to_open) failures in a row
//!   (before the first event) it takes no call for
//!   [`cool_down`](Deployments::cool_down), then one probe, whose outcome closes
//!   it or opens it again. A failure that says `Retry-After` cools its
//!   deployment for that long at once. A deployment that answered — its first
//!   event, or an error the classifier refuses — closes its breaker. When every
//!   deployment is cooling down, the call fails at once with a 503
//!   [`ProviderError`] whose `retry_after` is
//!   the time until the first one takes calls again.
//!
//! The breaker and the choice are pure functions of the time, which is read
//! from an injected clock ([`Deployments::clock`], `Instant::now` by default):
//! nothing here sleeps, and no tokio runtime is needed. The state (requests in
//! flight, breakers) is shared by the clones of a `Deployments`.
//! `poll_ready` is always ready: the chosen deployment's readiness is awaited
//! in the call's future.
//!
//! ```
//! use lmstack::deploy::Deployments;
//! use lmstack::provider::{TransportError, TransportErrorKind};
//! use lmstack::{ChatRequest, Error, Message, Reply};
//! use tower::{ServiceExt, service_fn};
//!
//! # futures::executor::block_on(async {
//! // Two deployments: the first refuses connections, the second answers.
//! let down = service_fn(|_: ChatRequest| async {
//!     Err::<Reply, Error>(TransportError::new("openai", TransportErrorKind::Connect, "refused").into())
//! })
//! .boxed_clone();
//! let up = service_fn(|_: ChatRequest| async { Ok::<_, Error>(Reply::from_events([lmstack::Event::text("hi")])) })
//!     .boxed_clone();
//! let deployments = Deployments::new([down, up]).failures_to_open(1);
//!
//! let request = ChatRequest::new(vec![Message::user("hello")]);
//! let reply = deployments.clone().oneshot(request).await.unwrap();
//! assert_eq!(reply.collect().await.unwrap(), vec![Message::assistant("hi")]);
//! // The first cools down after its failure.
//! assert_eq!(deployments.cooling_down(), vec![true, false]);
//! # });
//! ```

mod breaker;
mod choose;
mod session;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use pin_project_lite::pin_project;
use tower::Service;

use self::breaker::{Admission, Breaker, Policy};
use self::choose::{Load, choose, key_hash};
use crate::attempt::{Attempt, Outcome};
pub use crate::attempt::{Classify, is_retryable};
use crate::provider::ProviderError;
use crate::service::ChatService;
use crate::{ChatRequest, Error, Reply};
pub use session::common_session_key;

/// The clock the breakers read.
type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;
/// What reads a request's session key.
type SessionKey = Arc<dyn Fn(&ChatRequest) -> Option<String> + Send + Sync>;

/// Everything set on a [`Deployments`].
#[derive(Clone)]
struct Config {
    policy: Policy,
    classifier: Arc<dyn Classify>,
    session_key: SessionKey,
    clock: Clock,
}

/// What is known of one deployment, shared by the clones.
#[derive(Debug)]
struct Slot {
    in_flight: usize,
    breaker: Breaker,
}

type Slots = Arc<Mutex<Vec<Slot>>>;

/// The slots, locked; a lock poisoned by a panic elsewhere still holds counts.
fn lock(slots: &Slots) -> MutexGuard<'_, Vec<Slot>> {
    slots.lock().unwrap_or_else(|e| e.into_inner())
}

/// Several deployments of one model behind one chat service; see the
/// [module docs](self). Cheap to clone: clones share the deployments' state.
pub struct Deployments<S> {
    services: Arc<[S]>,
    weights: Arc<[u32]>,
    config: Arc<Config>,
    slots: Slots,
}

impl<S> Clone for Deployments<S> {
    fn clone(&self) -> Self {
        Deployments {
            services: self.services.clone(),
            weights: self.weights.clone(),
            config: self.config.clone(),
            slots: self.slots.clone(),
        }
    }
}

impl<S> fmt::Debug for Deployments<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Deployments")
            .field("deployments", &self.services.len())
            .field("weights", &self.weights)
            .field("policy", &self.config.policy)
            .field("slots", &*lock(&self.slots))
            .finish_non_exhaustive()
    }
}

impl<S> Deployments<S> {
    /// The deployments, in the order that breaks ties. Breakers open after 3
    /// failures in a row and cool down for 30 s; a `Retry-After` cools a
    /// deployment for up to 5 minutes; [`is_retryable`] decides what falls
    /// back; [`common_session_key`] reads the session key.
    pub fn new(services: impl IntoIterator<Item = S>) -> Self {
        Self::weighted(services.into_iter().map(|service| (service, 1)))
    }

    /// The deployments, each with its weight (0 counts as 1), in the order
    /// that breaks ties; otherwise as [`new`](Self::new). A deployment of
    /// weight 2 takes twice the calls in flight of one of weight 1, and twice
    /// the sessions.
    ///
    /// ```
    /// use lmstack::deploy::Deployments;
    /// use lmstack::testing::ScriptedModel;
    ///
    /// let eu = ScriptedModel::new().reply("from the EU");
    /// let us = ScriptedModel::new().reply("from the US");
    /// let deployments = Deployments::weighted([(eu, 2), (us, 1)]);
    /// assert_eq!(deployments.weights(), [2, 1]);
    /// ```
    pub fn weighted(services: impl IntoIterator<Item = (S, u32)>) -> Self {
        let (services, weights): (Vec<S>, Vec<u32>) = services
            .into_iter()
            .map(|(service, weight)| (service, weight.max(1)))
            .unzip();
        let services: Arc<[S]> = services.into();
        let slots = services
            .iter()
            .map(|_| Slot {
                in_flight: 0,
                breaker: Breaker::new(),
            })
            .collect();
        Deployments {
            services,
            weights: weights.into(),
            config: Arc::new(Config {
                policy: Policy {
                    failures_to_open: 3,
                    cool_down: Duration::from_secs(30),
                    max_retry_after: Duration::from_secs(300),
                },
                classifier: Arc::new(is_retryable),
                session_key: Arc::new(common_session_key),
                clock: Arc::new(Instant::now),
            }),
            slots: Arc::new(Mutex::new(slots)),
        }
    }

    fn config(&mut self) -> &mut Config {
        Arc::make_mut(&mut self.config)
    }

    /// Sets how many failures in a row (before the first event) open a
    /// deployment's breaker; 0 counts as 1.
    pub fn failures_to_open(mut self, failures: u32) -> Self {
        self.config().policy.failures_to_open = failures.max(1);
        self
    }

    /// Sets how long an opened breaker takes no call before its probe.
    pub fn cool_down(mut self, cool_down: Duration) -> Self {
        self.config().policy.cool_down = cool_down;
        self
    }

    /// Sets the longest cool-down a deployment's `Retry-After` may ask for.
    pub fn max_retry_after(mut self, wait: Duration) -> Self {
        self.config().policy.max_retry_after = wait;
        self
    }

    /// Sets the classifier of the failures that fall back to the next
    /// deployment and count against the breaker: a [`Classify`], such as a
    /// closure `|error: &Error| -> bool`.
    pub fn classifier(mut self, classifier: impl Classify) -> Self {
        self.config().classifier = Arc::new(classifier);
        self
    }

    /// Sets what reads a request's session key (`None`: no affinity, the least
    /// loaded deployment). `|_| None` turns affinity off.
    pub fn session_key<F>(mut self, key: F) -> Self
    where
        F: Fn(&ChatRequest) -> Option<String> + Send + Sync + 'static,
    {
        self.config().session_key = Arc::new(key);
        self
    }

    /// Sets the clock the breakers read (`Instant::now` by default); a test
    /// moves its own.
    pub fn clock<F>(mut self, clock: F) -> Self
    where
        F: Fn() -> Instant + Send + Sync + 'static,
    {
        self.config().clock = Arc::new(clock);
        self
    }

    /// The deployments.
    pub fn services(&self) -> &[S] {
        &self.services
    }

    /// Each deployment's weight.
    pub fn weights(&self) -> &[u32] {
        &self.weights
    }

    /// Each deployment's requests in flight.
    pub fn in_flight(&self) -> Vec<usize> {
        lock(&self.slots)
            .iter()
            .map(|slot| slot.in_flight)
            .collect()
    }

    /// For each deployment, whether its breaker takes no call now.
    pub fn cooling_down(&self) -> Vec<bool> {
        let now = (self.config.clock)();
        lock(&self.slots)
            .iter()
            .map(|slot| !slot.breaker.admits(now))
            .collect()
    }
}

impl<S> Service<ChatRequest> for Deployments<S>
where
    S: ChatService + Clone,
{
    type Response = Reply;
    type Error = Error;
    type Future = ResponseFuture<S>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: ChatRequest) -> Self::Future {
        let key = (self.config.session_key)(&request).map(|key| key_hash(&key));
        ResponseFuture {
            tried: vec![false; self.services.len()],
            deployments: self.clone(),
            request,
            key,
            last: None,
            state: State::Choosing,
        }
    }
}

/// A request in flight on one deployment: counted until dropped. A probe
/// dropped before its outcome was told lets another probe go.
struct InFlight {
    slots: Slots,
    index: usize,
    probe: bool,
}

impl InFlight {
    /// Tells the deployment's breaker how the call went: `failed` before its
    /// first event, at `now`, asking for `retry_after`; or it answered.
    fn settle(&mut self, config: &Config, failed: Option<Option<Duration>>) {
        let mut slots = lock(&self.slots);
        let breaker = &mut slots[self.index].breaker;
        match failed {
            Some(retry_after) => breaker.failed((config.clock)(), &config.policy, retry_after),
            None => breaker.succeeded(),
        }
        self.probe = false;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut slots = lock(&self.slots);
        let slot = &mut slots[self.index];
        slot.in_flight = slot.in_flight.saturating_sub(1);
        if self.probe {
            slot.breaker.probe_abandoned();
        }
    }
}

pin_project! {
    /// The future of [`Deployments`]: resolves with the reply once its first
    /// event is in hand (or once it is complete, in non-streaming mode), or with
    /// the error that ended the last attempt.
    pub struct ResponseFuture<S>
    where
        S: Service<ChatRequest>,
    {
        deployments: Deployments<S>,
        request: ChatRequest,
        key: Option<u64>,
        // The deployments this call was sent to.
        tried: Vec<bool>,
        // The last attempt's failure, returned if no deployment is left.
        last: Option<Outcome>,
        #[pin]
        state: State<S, S::Future>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, F> {
        // Choosing the next deployment.
        Choosing,
        // Waiting for the chosen deployment to be ready.
        Readying { service: S, in_flight: Option<InFlight> },
        // The call is under way, until its first event.
        Attempting { #[pin] attempt: Attempt<F>, in_flight: Option<InFlight> },
        // The future has resolved.
        Done,
    }
}

impl<S: Clone> Deployments<S> {
    /// Takes a deployment for a call with session `key` that was not sent to
    /// the deployments `tried` yet, counting it in flight; `None` when none is
    /// left that takes calls.
    fn take(&self, tried: &mut [bool], key: Option<u64>) -> Option<(S, InFlight)> {
        let deployments = self;
        let now = (deployments.config.clock)();
        let mut slots = lock(&deployments.slots);
        let loads: Vec<_> = slots
            .iter()
            .zip(tried.iter())
            .zip(self.weights.iter())
            .map(|((slot, tried), &weight)| {
                let load = Load {
                    in_flight: slot.in_flight,
                    weight,
                };
                (!tried && slot.breaker.admits(now)).then_some(load)
            })
            .collect();
        let index = choose(&loads, key)?;
        let slot = &mut slots[index];
        let admission = slot.breaker.admit(now)?;
        slot.in_flight += 1;
        tried[index] = true;
        let in_flight = InFlight {
            slots: deployments.slots.clone(),
            index,
            probe: admission == Admission::Probe,
        };
        Some((deployments.services[index].clone(), in_flight))
    }

    /// The error when no deployment takes calls and none was tried: a 503
    /// whose `retry_after` is the time until the first takes calls again.
    fn all_cooling_down(&self) -> Error {
        let now = (self.config.clock)();
        let retry_after = lock(&self.slots)
            .iter()
            .filter_map(|slot| slot.breaker.open_until())
            .min()
            .map(|until| until.saturating_duration_since(now));
        ProviderError {
            provider: "deployments",
            status: 503,
            error_type: Some("overloaded_error".into()),
            code: None,
            param: None,
            message: "every deployment is cooling down".into(),
            request_id: None,
            retry_after,
            should_retry: None,
        }
        .into()
    }
}

impl<S> Future for ResponseFuture<S>
where
    S: ChatService + Clone,
{
    type Output = Result<Reply, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            let (outcome, in_flight) = match this.state.as_mut().project() {
                StateProj::Choosing => {
                    let Some((service, in_flight)) = this.deployments.take(this.tried, *this.key)
                    else {
                        let result = match this.last.take() {
                            Some(outcome) => outcome.into_result(),
                            None => Err(this.deployments.all_cooling_down()),
                        };
                        this.state.set(State::Done);
                        return Poll::Ready(result);
                    };
                    this.state.set(State::Readying {
                        service,
                        in_flight: Some(in_flight),
                    });
                    continue;
                }
                StateProj::Readying { service, in_flight } => {
                    match ready!(service.poll_ready(cx)) {
                        Ok(()) => {
                            let call = service.call(this.request.clone());
                            let attempt =
                                Attempt::new(call, this.request.options.stream, "deployments");
                            let in_flight = in_flight.take();
                            this.state.set(State::Attempting { attempt, in_flight });
                            continue;
                        }
                        Err(error) => {
                            let failed = Outcome::Failed {
                                error: error.into(),
                                kept: Vec::new(),
                            };
                            (failed, in_flight.take())
                        }
                    }
                }
                StateProj::Attempting { attempt, in_flight } => {
                    (ready!(attempt.poll(cx)), in_flight.take())
                }
                StateProj::Done => {
                    return Poll::Ready(Err(Error::stage(
                        "deployments",
                        "the response future was polled after it completed",
                    )));
                }
            };
            let Some(mut in_flight) = in_flight else {
                this.state.set(State::Done);
                return Poll::Ready(outcome.into_result());
            };
            let config = &this.deployments.config;
            match outcome {
                Outcome::Delivered(reply) => {
                    in_flight.settle(config, None);
                    this.state.set(State::Done);
                    return Poll::Ready(Ok(reply.on_end(move |_| drop(in_flight))));
                }
                Outcome::Failed { ref error, .. } if !config.classifier.is_retryable(error) => {
                    in_flight.settle(config, None);
                    this.state.set(State::Done);
                    return Poll::Ready(outcome.into_result());
                }
                Outcome::Failed { ref error, .. } => {
                    let retry_after = error.provider_error().and_then(|e| e.retry_after);
                    in_flight.settle(config, Some(retry_after));
                    tracing::warn!(
                        %error,
                        deployment = in_flight.index,
                        "the call failed before its first event; trying the next deployment"
                    );
                    drop(in_flight);
                    *this.last = Some(outcome);
                    this.state.set(State::Choosing);
                }
            }
        }
    }
}

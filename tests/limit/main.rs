//! `lmstack::limit`: the limits layer over a scripted model with an injected
//! clock — requests and tokens per minute, budgets at a model's prices, the
//! waits it answers, the store's outages — and the Redis store against a real
//! `redis-server` (`LMSTACK_REDIS_URL`, started by `.ci/test`).

#![cfg(feature = "server")]

#[cfg(feature = "redis")]
mod redis;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lmstack::limit::{
    Add, Admission, Caller, Counter, KeyLimits, LimitFuture, LimitLayer, LimitStore,
    MemoryLimitStore, OnStoreError, Period, Price, Take,
};
use lmstack::testing::ScriptedModel;
use lmstack::{ChatRequest, Error, Event, Message, Reply, Usage};
use tower::{Layer, ServiceExt};

/// A clock the test moves: Unix milliseconds.
#[derive(Clone, Default)]
struct Clock(Arc<AtomicU64>);

impl Clock {
    fn at(millis: u64) -> Self {
        Clock(Arc::new(AtomicU64::new(millis)))
    }
    fn set(&self, millis: u64) {
        self.0.store(millis, Ordering::SeqCst);
    }
    fn reader(&self) -> impl Fn() -> u64 + Send + Sync + 'static {
        let now = self.0.clone();
        move || now.load(Ordering::SeqCst)
    }
}

fn request(caller: &str, max_tokens: u32) -> ChatRequest {
    let mut request = ChatRequest::new(vec![Message::user("hi")]);
    request.options.max_tokens = Some(max_tokens);
    request.extensions.insert(Caller::new(caller));
    request
}

/// A model whose every reply reports `input` and `output` tokens.
fn model(replies: usize, input: u64, output: u64) -> ScriptedModel {
    let usage = Usage {
        input_tokens: input,
        output_tokens: output,
        ..Usage::default()
    };
    (0..replies).fold(ScriptedModel::new(), |model, _| {
        model.reply_events(vec![Event::text("ok"), Event::Usage(usage.clone())])
    })
}

/// Runs `request` and reads its whole reply: the error of the call, if any.
async fn run<S>(service: &S, request: ChatRequest) -> Result<(), Error>
where
    S: tower::Service<ChatRequest, Response = Reply, Error = Error> + Clone,
{
    let reply = service.clone().oneshot(request).await?;
    reply.collect().await.map(drop)
}

fn wait(error: &Error) -> Option<Duration> {
    error.provider_error().and_then(|error| error.retry_after)
}

/// The count of `counter` in `store` at `now`, read as a take of nothing.
async fn read(store: &impl LimitStore, counter: &Counter, now: u64) -> Result<u64, Error> {
    let read = [Take {
        counter: counter.clone(),
        amount: 0,
        limit: u64::MAX,
    }];
    Ok(store.take_all(&read, now).await?.counts[0])
}

/// The count of `key` (in the minute from 0) in `store`.
async fn count(store: &impl LimitStore, key: &str) -> u64 {
    read(store, &minute(key), 1).await.unwrap()
}

/// The counter `key` of the minute from 0.
fn minute(key: &str) -> Counter {
    Counter {
        key: key.into(),
        expires_at: Some(60_000),
    }
}

#[tokio::test]
async fn requests_per_minute_are_counted_per_key_and_the_wait_is_the_minutes_end() {
    let clock = Clock::at(600_000 + 15_000);
    let layer = LimitLayer::new()
        .clock(clock.reader())
        .key("alice", KeyLimits::new().requests_per_minute(2));
    let service = layer.layer(model(5, 1, 1));
    run(&service, request("alice", 10)).await.unwrap();
    run(&service, request("alice", 10)).await.unwrap();
    let refused = run(&service, request("alice", 10)).await.unwrap_err();
    assert_eq!(refused.http_status(), 429);
    assert_eq!(wait(&refused), Some(Duration::from_secs(45)));
    // Not for a retry layer, another deployment or a fallback model to serve.
    assert!(!lmstack::deploy::is_retryable(&refused));
    let upstream = refused.provider_error().unwrap();
    assert_eq!(upstream.code.as_deref(), Some("rate_limit_exceeded"));
    assert!(
        upstream.message.contains("2 requests per minute"),
        "{upstream}"
    );
    // Another key, or none, is not limited by alice's.
    run(&service, request("bob", 10)).await.unwrap();
    // The next minute has room again.
    clock.set(660_000);
    run(&service, request("alice", 10)).await.unwrap();
}

#[tokio::test]
async fn tokens_are_reserved_on_admission_and_settled_with_the_usage() {
    let clock = Clock::at(0);
    let store = MemoryLimitStore::new();
    let layer = LimitLayer::new()
        .store(store.clone())
        .clock(clock.reader())
        .key("alice", KeyLimits::new().tokens_per_minute(1_000));
    // Each reply uses 100 tokens; each request reserves 400 (+ its input / 4).
    let service = layer.layer(model(10, 60, 40));
    run(&service, request("alice", 400)).await.unwrap();
    assert_eq!(count(&store, "tpm:{alice}:0").await, 100, "settled");
    // Two replies held open reserve 2 × ~400: a third does not fit in the 1000.
    let first = service
        .clone()
        .oneshot(request("alice", 400))
        .await
        .unwrap();
    let second = service
        .clone()
        .oneshot(request("alice", 400))
        .await
        .unwrap();
    let reserved = count(&store, "tpm:{alice}:0").await;
    assert!(reserved > 900, "{reserved} reserved");
    let refused = run(&service, request("alice", 400)).await.unwrap_err();
    assert_eq!(refused.http_status(), 429);
    assert!(
        refused.to_string().contains("1000 tokens per minute"),
        "{refused}"
    );
    first.collect().await.unwrap();
    second.collect().await.unwrap();
    assert_eq!(count(&store, "tpm:{alice}:0").await, 300, "all settled");
    run(&service, request("alice", 400)).await.unwrap();
    // A request larger than the whole limit passes alone in an empty minute.
    clock.set(60_000);
    run(&service, request("alice", 50_000)).await.unwrap();
}

#[tokio::test]
async fn a_failed_call_gives_its_reservation_back() {
    let store = MemoryLimitStore::new();
    let layer = LimitLayer::new()
        .store(store.clone())
        .clock(|| 0)
        .key("alice", KeyLimits::new().tokens_per_minute(1_000));
    let failing = tower::service_fn(|_: ChatRequest| async {
        Err::<Reply, Error>(Error::stage("upstream", "down"))
    });
    let service = layer.layer(failing);
    assert!(service.oneshot(request("alice", 500)).await.is_err());
    assert_eq!(count(&store, "tpm:{alice}:0").await, 0);
}

#[tokio::test]
async fn the_budget_is_spent_at_the_models_prices_until_the_periods_end() {
    // 2025-02-10T12:00:00Z; the day ends in 12 hours.
    let clock = Clock::at(1_739_188_800_000);
    let layer = LimitLayer::new()
        .clock(clock.reader())
        .key("alice", KeyLimits::new().budget(0.01, Period::Day));
    let price = Price {
        input: 3.0,
        cached_input: None,
        output: 15.0,
    };
    // Each reply: 1000 × 3 + 200 × 15 = 6000 millionths.
    let priced = layer.clone().price(Some(price)).layer(model(5, 1_000, 200));
    let free = layer.layer(model(5, 1_000, 200));
    run(&free, request("alice", 10)).await.unwrap();
    run(&priced, request("alice", 10)).await.unwrap();
    run(&priced, request("alice", 10)).await.unwrap();
    let refused = run(&free, request("alice", 10)).await.unwrap_err();
    assert_eq!(refused.http_status(), 429);
    assert_eq!(wait(&refused), Some(Duration::from_secs(12 * 3600)));
    assert!(refused.to_string().contains("budget of 0.01 for this day"));
    clock.set(1_739_188_800_000 + 12 * 3600 * 1000);
    run(&free, request("alice", 10)).await.unwrap();
}

/// A store that always fails.
struct Down;

impl LimitStore for Down {
    fn take_all<'a>(&'a self, _: &'a [Take], _: u64) -> LimitFuture<'a, Admission> {
        Box::pin(async { Err(Error::stage("store", "unreachable")) })
    }
    fn add_all<'a>(&'a self, _: &'a [Add], _: u64) -> LimitFuture<'a, Vec<u64>> {
        Box::pin(async { Err(Error::stage("store", "unreachable")) })
    }
}

#[tokio::test]
async fn a_failing_store_lets_requests_pass_or_refuses_them_as_configured() {
    let limits = KeyLimits::new().requests_per_minute(1);
    let open = LimitLayer::new().store(Down).key("alice", limits.clone());
    let service = open.layer(model(3, 1, 1));
    for _ in 0..3 {
        run(&service, request("alice", 10)).await.unwrap();
    }
    let closed = LimitLayer::new()
        .store(Down)
        .on_store_error(OnStoreError::Closed)
        .key("alice", limits);
    let refused = run(&closed.layer(model(1, 1, 1)), request("alice", 10))
        .await
        .unwrap_err();
    assert_eq!(refused.http_status(), 503);
    assert!(!lmstack::deploy::is_retryable(&refused));
}

#[tokio::test]
async fn a_request_refused_by_one_limit_takes_nothing_from_the_others() {
    let store = MemoryLimitStore::new();
    let layer = LimitLayer::new().store(store.clone()).clock(|| 0).key(
        "alice",
        KeyLimits::new()
            .requests_per_minute(3)
            .tokens_per_minute(1_000),
    );
    let service = layer.layer(model(3, 100, 100));
    // Held open, it keeps ~900 tokens reserved.
    let open = service
        .clone()
        .oneshot(request("alice", 900))
        .await
        .unwrap();
    for _ in 0..5 {
        let refused = run(&service, request("alice", 500)).await.unwrap_err();
        assert!(
            refused.to_string().contains("tokens per minute"),
            "{refused}"
        );
    }
    assert_eq!(
        count(&store, "rpm:{alice}:0").await,
        1,
        "no refusal took a request"
    );
    open.collect().await.unwrap();
    assert_eq!(count(&store, "tpm:{alice}:0").await, 200, "settled");
    // The two requests left in the minute are there to be had.
    run(&service, request("alice", 100)).await.unwrap();
    run(&service, request("alice", 100)).await.unwrap();
    let refused = run(&service, request("alice", 100)).await.unwrap_err();
    assert!(
        refused.to_string().contains("3 requests per minute"),
        "{refused}"
    );
}

/// A store that counts its steps (the round trips to a shared store).
#[derive(Clone, Default)]
struct Counting {
    store: MemoryLimitStore,
    takes: Arc<AtomicU64>,
    adds: Arc<AtomicU64>,
}

impl LimitStore for Counting {
    fn take_all<'a>(&'a self, takes: &'a [Take], now: u64) -> LimitFuture<'a, Admission> {
        self.takes.fetch_add(1, Ordering::SeqCst);
        self.store.take_all(takes, now)
    }
    fn add_all<'a>(&'a self, adds: &'a [Add], now: u64) -> LimitFuture<'a, Vec<u64>> {
        self.adds.fetch_add(1, Ordering::SeqCst);
        self.store.add_all(adds, now)
    }
}

#[tokio::test]
async fn a_request_under_all_three_limits_is_one_step_in_and_one_step_settled() {
    let store = Counting::default();
    let price = Price {
        input: 1.0,
        cached_input: None,
        output: 1.0,
    };
    let layer = LimitLayer::new()
        .store(store.clone())
        .clock(|| 0)
        .price(Some(price))
        .key(
            "alice",
            KeyLimits::new()
                .requests_per_minute(2)
                .tokens_per_minute(1_000)
                .budget(1.0, Period::Total),
        );
    let service = layer.layer(model(2, 10, 5));
    let steps = || {
        (
            store.takes.load(Ordering::SeqCst),
            store.adds.load(Ordering::SeqCst),
        )
    };
    run(&service, request("alice", 100)).await.unwrap();
    assert_eq!(steps(), (1, 1));
    assert_eq!(count(&store.store, "tpm:{alice}:0").await, 15);
    run(&service, request("alice", 100)).await.unwrap();
    assert_eq!(steps(), (2, 2));
    // A refusal is one step, with nothing to settle.
    run(&service, request("alice", 100)).await.unwrap_err();
    assert_eq!(steps(), (3, 2));
    // A caller without limits costs no step.
    run(&layer.layer(model(1, 1, 1)), request("bob", 10))
        .await
        .unwrap();
    assert_eq!(steps(), (3, 2));
}

#[tokio::test]
async fn a_limit_of_zero_refuses_every_request() {
    let zero = [
        KeyLimits::new().requests_per_minute(0),
        KeyLimits::new().tokens_per_minute(0),
        KeyLimits::new().budget(0.0, Period::Total),
    ];
    for limits in zero {
        let layer = LimitLayer::new().clock(|| 0).key("alice", limits.clone());
        let refused = run(&layer.layer(model(1, 1, 1)), request("alice", 0))
            .await
            .unwrap_err();
        assert_eq!(refused.http_status(), 429, "{limits:?}");
    }
}

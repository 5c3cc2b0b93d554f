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
    Caller, Counter, KeyLimits, LimitFuture, LimitLayer, LimitStore, MemoryLimitStore,
    OnStoreError, Period, Price, Taken,
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
    let tokens = Counter {
        key: "tpm:alice:0".into(),
        expires_at: Some(60_000),
    };
    run(&service, request("alice", 400)).await.unwrap();
    assert_eq!(store.read(&tokens, 1).await.unwrap(), 100, "settled");
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
    let reserved = store.read(&tokens, 1).await.unwrap();
    assert!(reserved > 900, "{reserved} reserved");
    let refused = run(&service, request("alice", 400)).await.unwrap_err();
    assert_eq!(refused.http_status(), 429);
    assert!(
        refused.to_string().contains("1000 tokens per minute"),
        "{refused}"
    );
    first.collect().await.unwrap();
    second.collect().await.unwrap();
    assert_eq!(store.read(&tokens, 1).await.unwrap(), 300, "all settled");
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
    let tokens = Counter {
        key: "tpm:alice:0".into(),
        expires_at: Some(60_000),
    };
    assert_eq!(store.read(&tokens, 1).await.unwrap(), 0);
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
    fn take<'a>(&'a self, _: &'a Counter, _: u64, _: u64, _: u64) -> LimitFuture<'a, Taken> {
        Box::pin(async { Err(Error::stage("store", "unreachable")) })
    }
    fn add<'a>(&'a self, _: &'a Counter, _: i64, _: u64) -> LimitFuture<'a, u64> {
        Box::pin(async { Err(Error::stage("store", "unreachable")) })
    }
    fn read<'a>(&'a self, _: &'a Counter, _: u64) -> LimitFuture<'a, u64> {
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

//! The Redis store against a real `redis-server` (`LMSTACK_REDIS_URL`):
//! atomic steps, expiry, a key prefix, and a store that cannot reach it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lmstack::limit::{Counter, LimitStore, RedisLimitStore};

fn url() -> String {
    std::env::var("LMSTACK_REDIS_URL").expect("LMSTACK_REDIS_URL: a redis-server (.ci/test)")
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A prefix no other run shares.
fn prefix() -> String {
    format!("lmstack-test:{}:{}:", std::process::id(), fastrand::u64(..))
}

#[tokio::test]
#[ignore = "needs a redis-server (LMSTACK_REDIS_URL)"]
async fn concurrent_takes_never_pass_the_limit_and_counters_expire() {
    let store = std::sync::Arc::new(RedisLimitStore::new(&url()).unwrap().prefix(prefix()));
    let counter = Counter {
        key: "rpm:alice:0".into(),
        expires_at: Some(now() + 1_500),
    };
    let takes = (0..40).map(|_| {
        let (store, counter) = (store.clone(), counter.clone());
        tokio::spawn(async move { store.take(&counter, 1, 25, now()).await.unwrap() })
    });
    let admitted = futures::future::join_all(takes)
        .await
        .into_iter()
        .filter(|taken| taken.as_ref().unwrap().admitted)
        .count();
    assert_eq!(admitted, 25);
    assert_eq!(store.read(&counter, now()).await.unwrap(), 25);
    assert_eq!(
        store.add(&counter, -30, now()).await.unwrap(),
        0,
        "never below 0"
    );
    assert_eq!(store.add(&counter, 7, now()).await.unwrap(), 7);
    tokio::time::sleep(Duration::from_millis(1_700)).await;
    assert_eq!(store.read(&counter, now()).await.unwrap(), 0, "expired");
    // A counter whose window has ended takes no settlement.
    assert_eq!(store.add(&counter, 5, now()).await.unwrap(), 0);
    assert_eq!(store.read(&counter, now()).await.unwrap(), 0);
}

#[tokio::test]
#[ignore = "needs a redis-server (LMSTACK_REDIS_URL)"]
async fn prefixes_keep_stores_apart_and_an_unreachable_one_fails_within_its_timeout() {
    let counter = Counter {
        key: "spend:alice:0".into(),
        expires_at: None,
    };
    let one = RedisLimitStore::new(&url()).unwrap().prefix(prefix());
    let other = RedisLimitStore::new(&url()).unwrap().prefix(prefix());
    one.add(&counter, 3, now()).await.unwrap();
    assert_eq!(other.read(&counter, now()).await.unwrap(), 0);
    assert_eq!(one.read(&counter, now()).await.unwrap(), 3);
    // Nothing listens there: port 1 of loopback.
    let down = RedisLimitStore::new("redis://127.0.0.1:1/")
        .unwrap()
        .timeout(Duration::from_millis(300));
    let started = std::time::Instant::now();
    assert!(down.read(&counter, now()).await.is_err());
    assert!(started.elapsed() < Duration::from_secs(2));
}

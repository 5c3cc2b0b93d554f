//! The Redis store against a real `redis-server` (`LMSTACK_REDIS_URL`):
//! atomic steps over several counters (all or nothing, under concurrency),
//! expiry, a key prefix, and a store that cannot reach it.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lmstack::limit::{Add, Counter, LimitStore, RedisLimitStore, Take};

use super::read;

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

fn store() -> RedisLimitStore {
    RedisLimitStore::new(&url()).unwrap().prefix(prefix())
}

fn counter(key: &str, expires_at: Option<u64>) -> Counter {
    Counter {
        key: key.into(),
        expires_at,
    }
}

#[tokio::test]
#[ignore = "needs a redis-server (LMSTACK_REDIS_URL)"]
async fn concurrent_admissions_never_pass_any_limit_and_counters_expire() {
    let store = Arc::new(store());
    let expires = Some(now() + 1_500);
    let (requests, tokens) = (
        counter("rpm:alice:0", expires),
        counter("tpm:alice:0", expires),
    );
    // Room for 40 requests, and for the tokens of 30.
    let admission = [
        Take {
            counter: requests.clone(),
            amount: 1,
            limit: 40,
        },
        Take {
            counter: tokens.clone(),
            amount: 30,
            limit: 900,
        },
    ];
    let admissions = (0..60).map(|_| {
        let (store, admission) = (store.clone(), admission.clone());
        tokio::spawn(async move { store.take_all(&admission, now()).await.unwrap() })
    });
    let admissions = futures::future::join_all(admissions).await;
    let admitted = admissions
        .iter()
        .filter(|admission| admission.as_ref().unwrap().admitted())
        .count();
    assert_eq!(admitted, 30);
    for admission in &admissions {
        let admission = admission.as_ref().unwrap();
        assert!(matches!(admission.refused, None | Some(1)), "{admission:?}");
        assert!(admission.counts[0] <= 40 && admission.counts[1] <= 900);
    }
    assert_eq!(
        read(&*store, &requests, now()).await.unwrap(),
        30,
        "no refusal took a request"
    );
    assert_eq!(read(&*store, &tokens, now()).await.unwrap(), 900);
    let settle = |amount| {
        [Add {
            counter: tokens.clone(),
            amount,
        }]
    };
    assert_eq!(
        store.add_all(&settle(-2_000), now()).await.unwrap(),
        [0],
        "never below 0"
    );
    assert_eq!(store.add_all(&settle(7), now()).await.unwrap(), [7]);
    tokio::time::sleep(Duration::from_millis(1_700)).await;
    assert_eq!(read(&*store, &tokens, now()).await.unwrap(), 0, "expired");
    // A counter whose window has ended takes no settlement.
    assert_eq!(store.add_all(&settle(5), now()).await.unwrap(), [0]);
    assert_eq!(read(&*store, &tokens, now()).await.unwrap(), 0);
}

#[tokio::test]
#[ignore = "needs a redis-server (LMSTACK_REDIS_URL)"]
async fn a_take_refused_by_one_counter_leaves_every_other_unchanged() {
    let store = store();
    let expires = Some(now() + 60_000);
    let (spend, requests, tokens) = (
        counter("spend:alice:0", None),
        counter("rpm:alice:0", expires),
        counter("tpm:alice:0", expires),
    );
    let take = |budget, tokens_left| {
        [
            Take {
                counter: spend.clone(),
                amount: 0,
                limit: budget,
            },
            Take {
                counter: requests.clone(),
                amount: 1,
                limit: 10,
            },
            Take {
                counter: tokens.clone(),
                amount: 100,
                limit: tokens_left,
            },
        ]
    };
    let admission = store.take_all(&take(50, 1_000), now()).await.unwrap();
    assert_eq!(
        (admission.refused, admission.counts),
        (None, vec![0, 1, 100])
    );
    // The tokens refuse: the request is not taken either.
    let admission = store.take_all(&take(50, 150), now()).await.unwrap();
    assert_eq!(
        (admission.refused, admission.counts),
        (Some(2), vec![0, 1, 100])
    );
    // A spend that reached its budget refuses first.
    let spent = [Add {
        counter: spend.clone(),
        amount: 50,
    }];
    store.add_all(&spent, now()).await.unwrap();
    let admission = store.take_all(&take(50, 1_000), now()).await.unwrap();
    assert_eq!(
        (admission.refused, admission.counts),
        (Some(0), vec![50, 1, 100])
    );
    // A counter named twice is taken in turn: the second take sees the first.
    let twice = [
        Take {
            counter: requests.clone(),
            amount: 5,
            limit: 10,
        },
        Take {
            counter: requests.clone(),
            amount: 5,
            limit: 10,
        },
    ];
    let admission = store.take_all(&twice, now()).await.unwrap();
    assert_eq!((admission.refused, admission.counts), (Some(1), vec![1, 1]));
    assert_eq!(read(&store, &requests, now()).await.unwrap(), 1);
}

#[tokio::test]
#[ignore = "needs a redis-server (LMSTACK_REDIS_URL)"]
async fn prefixes_keep_stores_apart_and_an_unreachable_one_fails_within_its_timeout() {
    let spend = counter("spend:alice:0", None);
    let (one, other) = (store(), store());
    let add = [Add {
        counter: spend.clone(),
        amount: 3,
    }];
    one.add_all(&add, now()).await.unwrap();
    assert_eq!(read(&other, &spend, now()).await.unwrap(), 0);
    assert_eq!(read(&one, &spend, now()).await.unwrap(), 3);
    // Nothing listens there: port 1 of loopback.
    let down = RedisLimitStore::new("redis://127.0.0.1:1/")
        .unwrap()
        .timeout(Duration::from_millis(300));
    let started = std::time::Instant::now();
    assert!(read(&down, &spend, now()).await.is_err());
    assert!(started.elapsed() < Duration::from_secs(2));
}

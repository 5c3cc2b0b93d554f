//! Where the counters live: the [`LimitStore`] trait, and the store in
//! memory.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use super::window::fits;
use crate::Error;

/// What a [`LimitStore`]'s methods return: a boxed future, so that the trait
/// can be used as `dyn LimitStore`.
pub type LimitFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'a>>;

/// One counter of a store: its key (the caller, what it counts and its
/// window, such as `rpm:{alice}:1739188800000`: the key's name a Redis
/// hash tag, so that a cluster keeps one key's counters in one slot) and when the store may forget
/// it (Unix milliseconds; never when `None`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counter {
    /// The counter's key.
    pub key: String,
    /// When it expires.
    pub expires_at: Option<u64>,
}

/// One counter's part in a [`LimitStore::take_all`]: add `amount` to
/// `counter` if it [`fits`] under `limit`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Take {
    /// The counter taken from.
    pub counter: Counter,
    /// What is added (0: a check that the counter is under its limit).
    pub amount: u64,
    /// The most the counter may hold.
    pub limit: u64,
}

/// One counter's part in a [`LimitStore::add_all`]: `amount` added to
/// `counter` (taken away when negative, never below zero).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Add {
    /// The counter added to.
    pub counter: Counter,
    /// What is added.
    pub amount: i64,
}

/// What a [`LimitStore::take_all`] did: everything taken, or nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admission {
    /// The first take that did not fit (its index), when nothing was taken.
    pub refused: Option<usize>,
    /// The count of each take's counter after the step, in the order of the
    /// takes (after each take in turn; as they were when refused).
    pub counts: Vec<u64>,
}

impl Admission {
    /// Whether every take was taken.
    pub fn admitted(&self) -> bool {
        self.refused.is_none()
    }
}

/// The counters of [`Limits`](super::Limits), shared by every gateway replica
/// that uses the same store.
///
/// Each method is one atomic step of the store, over several counters at
/// once (one round trip: a request's admission is one step, its settlement
/// another); `now` (Unix milliseconds) is the caller's clock, for a store that
/// expires counters itself. An `Err` is the store failing (unreachable, timed
/// out): the limits then follow their [`OnStoreError`](super::OnStoreError)
/// policy.
pub trait LimitStore: Send + Sync + 'static {
    /// Takes every one of `takes` if each [`fits`] when taken in turn, else
    /// none: all or nothing, atomically.
    fn take_all<'a>(&'a self, takes: &'a [Take], now: u64) -> LimitFuture<'a, Admission>;

    /// Adds each of `adds` in turn, atomically: the count of each after its
    /// step. A counter already expired (at `now`) is not kept and counts 0 (a
    /// reservation settled after its window ended changes nothing); nor is
    /// one taken from.
    fn add_all<'a>(&'a self, adds: &'a [Add], now: u64) -> LimitFuture<'a, Vec<u64>>;
}

impl<S: LimitStore + ?Sized> LimitStore for Arc<S> {
    fn take_all<'a>(&'a self, takes: &'a [Take], now: u64) -> LimitFuture<'a, Admission> {
        (**self).take_all(takes, now)
    }

    fn add_all<'a>(&'a self, adds: &'a [Add], now: u64) -> LimitFuture<'a, Vec<u64>> {
        (**self).add_all(adds, now)
    }
}

/// A [`LimitStore`] in this process's memory: the default, for one gateway.
/// Counters are forgotten once expired (swept as the store grows), so its
/// memory is bounded by the counters of the windows open at once. Clones
/// share one store; each step holds its lock once.
///
/// ```
/// use lmstack::limit::{Counter, LimitStore, MemoryLimitStore, Take};
///
/// # futures::executor::block_on(async {
/// let store = MemoryLimitStore::new();
/// let minute = Counter { key: "rpm:alice:0".into(), expires_at: Some(60_000) };
/// let tokens = Counter { key: "tpm:alice:0".into(), expires_at: Some(60_000) };
/// let request = [
///     Take { counter: minute.clone(), amount: 1, limit: 2 },
///     Take { counter: tokens.clone(), amount: 600, limit: 1_000 },
/// ];
/// assert!(store.take_all(&request, 10).await?.admitted());
/// let refused = store.take_all(&request, 20).await?;
/// assert_eq!(refused.refused, Some(1), "the tokens do not fit");
/// assert_eq!(refused.counts, [1, 600], "and the request was not taken either");
/// # Ok::<(), lmstack::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone, Debug, Default)]
pub struct MemoryLimitStore {
    counters: Arc<Mutex<Counters>>,
}

#[derive(Debug, Default)]
struct Counters {
    by_key: HashMap<String, Count>,
    /// The size at which the expired counters are swept next.
    sweep_at: usize,
}

#[derive(Clone, Copy, Debug)]
struct Count {
    value: u64,
    expires_at: Option<u64>,
}

impl Count {
    fn live(&self, now: u64) -> bool {
        self.expires_at.is_none_or(|at| now < at)
    }
}

impl Counters {
    /// The live count of `counter` (0 when it has none).
    fn count(&self, counter: &Counter, now: u64) -> u64 {
        self.by_key
            .get(&counter.key)
            .filter(|count| count.live(now))
            .map_or(0, |count| count.value)
    }

    /// Sets `counter` to `step` of its live count: the count after. A
    /// counter already expired is not kept (its count stays 0), nor one at 0.
    fn update(&mut self, counter: &Counter, now: u64, step: impl FnOnce(u64) -> u64) -> u64 {
        let fresh = Count {
            value: 0,
            expires_at: counter.expires_at,
        };
        if !fresh.live(now) {
            return 0;
        }
        let value = step(self.count(counter, now));
        if value == 0 {
            self.by_key.remove(&counter.key);
            return 0;
        }
        if self.by_key.len() >= self.sweep_at {
            self.by_key.retain(|_, count| count.live(now));
            self.sweep_at = (self.by_key.len() * 2).max(1024);
        }
        self.by_key
            .insert(counter.key.clone(), Count { value, ..fresh });
        value
    }
}

impl MemoryLimitStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counters> {
        self.counters.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl LimitStore for MemoryLimitStore {
    fn take_all<'a>(&'a self, takes: &'a [Take], now: u64) -> LimitFuture<'a, Admission> {
        let mut counters = self.lock();
        // A dry run in turn (a counter named twice holds the first take when
        // the second is checked), then the step itself.
        let mut after: HashMap<&str, u64> = HashMap::new();
        let refused = takes.iter().position(|take| {
            let count = *after
                .entry(&take.counter.key)
                .or_insert_with(|| counters.count(&take.counter, now));
            after.insert(&take.counter.key, count.saturating_add(take.amount));
            !fits(count, take.amount, take.limit)
        });
        let counts = takes
            .iter()
            .map(|take| match refused {
                Some(_) => counters.count(&take.counter, now),
                None => counters.update(&take.counter, now, |count| {
                    count.saturating_add(take.amount)
                }),
            })
            .collect();
        Box::pin(std::future::ready(Ok(Admission { refused, counts })))
    }

    fn add_all<'a>(&'a self, adds: &'a [Add], now: u64) -> LimitFuture<'a, Vec<u64>> {
        let mut counters = self.lock();
        let counts = adds
            .iter()
            .map(|add| {
                counters.update(&add.counter, now, |count| {
                    count.saturating_add_signed(add.amount)
                })
            })
            .collect();
        Box::pin(std::future::ready(Ok(counts)))
    }
}

#[cfg(test)]
mod tests {
    use futures::executor::block_on;
    use proptest::prelude::*;

    use super::*;

    fn counter(key: &str, expires_at: Option<u64>) -> Counter {
        Counter {
            key: key.into(),
            expires_at,
        }
    }

    /// The counts of `keys` in `store`.
    fn read(store: &MemoryLimitStore, keys: &[Counter], now: u64) -> Vec<u64> {
        let counters = store.lock();
        keys.iter().map(|key| counters.count(key, now)).collect()
    }

    proptest! {
        #[test]
        fn a_batch_is_taken_as_each_in_turn_when_all_fit_and_changes_nothing_else(
            batches in proptest::collection::vec(
                (
                    proptest::collection::vec((0usize..3, 0u64..40, 0u64..100), 0..4),
                    proptest::collection::vec((0usize..3, -50i64..50), 0..3),
                ),
                1..40,
            ),
        ) {
            let keys: Vec<Counter> =
                (0..3).map(|key| counter(&format!("k{key}"), Some(1_000))).collect();
            let store = MemoryLimitStore::new();
            // The model: the counts, each take checked and added in turn.
            let mut model = [0u64; 3];
            for (takes, adds) in batches {
                let mut in_turn = model;
                let mut expected = Vec::new();
                let mut first_refused = None;
                for (index, &(key, amount, limit)) in takes.iter().enumerate() {
                    if !fits(in_turn[key], amount, limit) {
                        first_refused = Some(index);
                        break;
                    }
                    in_turn[key] += amount;
                    expected.push(in_turn[key]);
                }
                let (at, takes): (Vec<usize>, Vec<Take>) = takes
                    .into_iter()
                    .map(|(key, amount, limit)| {
                        (key, Take { counter: keys[key].clone(), amount, limit })
                    })
                    .unzip();
                let admission = block_on(store.take_all(&takes, 5)).unwrap();
                prop_assert_eq!(admission.refused, first_refused);
                if first_refused.is_none() {
                    model = in_turn;
                } else {
                    expected = at.iter().map(|&key| model[key]).collect();
                }
                prop_assert_eq!(&admission.counts, &expected);
                prop_assert_eq!(read(&store, &keys, 5), model.to_vec(), "nothing else changed");
                let (at, adds): (Vec<(usize, i64)>, Vec<Add>) = adds
                    .into_iter()
                    .map(|(key, amount)| ((key, amount), Add { counter: keys[key].clone(), amount }))
                    .unzip();
                let counts = block_on(store.add_all(&adds, 5)).unwrap();
                for ((key, amount), count) in at.into_iter().zip(counts) {
                    model[key] = model[key].saturating_add_signed(amount);
                    prop_assert_eq!(count, model[key]);
                }
            }
            prop_assert_eq!(read(&store, &keys, 999), model.to_vec());
            prop_assert_eq!(read(&store, &keys, 1_000), vec![0; 3], "expired");
            let late = [Add { counter: keys[0].clone(), amount: 5 }];
            prop_assert_eq!(block_on(store.add_all(&late, 1_000)).unwrap(), vec![0]);
            prop_assert_eq!(read(&store, &keys, 1_000), vec![0; 3], "an expired counter is not kept");
        }
    }

    #[test]
    fn expired_counters_are_swept_as_the_store_grows() {
        let store = MemoryLimitStore::new();
        for minute in 0..5_000u64 {
            let key = format!("rpm:alice:{minute}");
            let add = Add {
                counter: counter(&key, Some((minute + 1) * 60_000)),
                amount: 1,
            };
            block_on(store.add_all(&[add], minute * 60_000)).unwrap();
        }
        let kept = store.lock().by_key.len();
        assert!(kept <= 1024, "{kept} counters kept");
        let total = counter("spend:alice:0", None);
        let add = Add {
            counter: total.clone(),
            amount: 7,
        };
        block_on(store.add_all(&[add], u64::MAX - 1)).unwrap();
        assert_eq!(read(&store, &[total], u64::MAX - 1), [7]);
    }
}

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
/// window, such as `rpm:alice:1739188800000`) and when the store may forget
/// it (Unix milliseconds; never when `None`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counter {
    /// The counter's key.
    pub key: String,
    /// When it expires.
    pub expires_at: Option<u64>,
}

/// The counters of [`Limits`](super::Limits), shared by every gateway replica
/// that uses the same store.
///
/// Each method is one atomic step of the store; `now` (Unix milliseconds) is
/// the caller's clock, for a store that expires counters itself. An `Err` is
/// the store failing (unreachable, timed out): the limits then follow their
/// [`OnStoreError`](super::OnStoreError) policy.
pub trait LimitStore: Send + Sync + 'static {
    /// Adds `amount` to `counter` if it then holds at most `limit` ([`fits`]),
    /// and says whether it did, with the count after the step.
    fn take<'a>(
        &'a self,
        counter: &'a Counter,
        amount: u64,
        limit: u64,
        now: u64,
    ) -> LimitFuture<'a, Taken>;

    /// Adds `amount` (taken away when negative, never below zero) to
    /// `counter`: the count after the step. A counter already expired is not
    /// kept (a reservation settled after its window ended changes nothing).
    fn add<'a>(&'a self, counter: &'a Counter, amount: i64, now: u64) -> LimitFuture<'a, u64>;

    /// The count of `counter` (0 when it has none).
    fn read<'a>(&'a self, counter: &'a Counter, now: u64) -> LimitFuture<'a, u64>;
}

impl<S: LimitStore + ?Sized> LimitStore for Arc<S> {
    fn take<'a>(
        &'a self,
        counter: &'a Counter,
        amount: u64,
        limit: u64,
        now: u64,
    ) -> LimitFuture<'a, Taken> {
        (**self).take(counter, amount, limit, now)
    }

    fn add<'a>(&'a self, counter: &'a Counter, amount: i64, now: u64) -> LimitFuture<'a, u64> {
        (**self).add(counter, amount, now)
    }

    fn read<'a>(&'a self, counter: &'a Counter, now: u64) -> LimitFuture<'a, u64> {
        (**self).read(counter, now)
    }
}

/// What [`LimitStore::take`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Taken {
    /// Whether the amount was added.
    pub admitted: bool,
    /// The count after the step.
    pub count: u64,
}

/// A [`LimitStore`] in this process's memory: the default, for one gateway.
/// Counters are forgotten once expired (swept as the store grows), so its
/// memory is bounded by the counters of the windows open at once. Clones
/// share one store.
///
/// ```
/// use lmstack::limit::{Counter, LimitStore, MemoryLimitStore};
///
/// # futures::executor::block_on(async {
/// let store = MemoryLimitStore::new();
/// let minute = Counter { key: "rpm:alice:0".into(), expires_at: Some(60_000) };
/// assert!(store.take(&minute, 1, 2, 10).await?.admitted);
/// assert!(store.take(&minute, 1, 2, 20).await?.admitted);
/// assert!(!store.take(&minute, 1, 2, 30).await?.admitted, "the limit is 2");
/// assert_eq!(store.read(&minute, 60_000).await?, 0, "expired");
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

impl MemoryLimitStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `step` on `counter`'s live count (a fresh one if it has none),
    /// under the lock; the count is kept unless expired.
    fn with<T>(&self, counter: &Counter, now: u64, step: impl FnOnce(&mut u64) -> T) -> T {
        let mut counters = self.counters.lock().unwrap_or_else(PoisonError::into_inner);
        let fresh = Count {
            value: 0,
            expires_at: counter.expires_at,
        };
        if !fresh.live(now) {
            return step(&mut 0);
        }
        if counters.by_key.len() >= counters.sweep_at {
            counters.by_key.retain(|_, count| count.live(now));
            counters.sweep_at = (counters.by_key.len() * 2).max(1024);
        }
        let count = counters.by_key.entry(counter.key.clone()).or_insert(fresh);
        if !count.live(now) {
            *count = fresh;
        }
        let done = step(&mut count.value);
        if count.value == 0 {
            counters.by_key.remove(&counter.key);
        }
        done
    }
}

impl LimitStore for MemoryLimitStore {
    fn take<'a>(
        &'a self,
        counter: &'a Counter,
        amount: u64,
        limit: u64,
        now: u64,
    ) -> LimitFuture<'a, Taken> {
        let taken = self.with(counter, now, |count| {
            let admitted = fits(*count, amount, limit);
            if admitted {
                *count += amount;
            }
            Taken {
                admitted,
                count: *count,
            }
        });
        Box::pin(std::future::ready(Ok(taken)))
    }

    fn add<'a>(&'a self, counter: &'a Counter, amount: i64, now: u64) -> LimitFuture<'a, u64> {
        let count = self.with(counter, now, |count| {
            *count = count.saturating_add_signed(amount);
            *count
        });
        Box::pin(std::future::ready(Ok(count)))
    }

    fn read<'a>(&'a self, counter: &'a Counter, now: u64) -> LimitFuture<'a, u64> {
        let count = self.with(counter, now, |count| *count);
        Box::pin(std::future::ready(Ok(count)))
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

    proptest! {
        #[test]
        fn a_counter_never_takes_past_its_limit_and_expires(
            steps in proptest::collection::vec((0u64..50, -40i64..40, any::<bool>()), 1..60),
            limit in 0u64..200,
        ) {
            let store = MemoryLimitStore::new();
            let counted = counter("k", Some(1_000));
            let mut expected = 0u64;
            for (amount, settle, take) in steps {
                if take {
                    let taken = block_on(store.take(&counted, amount, limit, 5)).unwrap();
                    prop_assert_eq!(taken.admitted, expected + amount <= limit);
                    if taken.admitted {
                        expected += amount;
                    }
                    prop_assert_eq!(taken.count, expected);
                } else {
                    expected = expected.saturating_add_signed(settle);
                    prop_assert_eq!(block_on(store.add(&counted, settle, 5)).unwrap(), expected);
                }
            }
            prop_assert_eq!(block_on(store.read(&counted, 999)).unwrap(), expected);
            prop_assert_eq!(block_on(store.read(&counted, 1_000)).unwrap(), 0);
            block_on(store.add(&counted, 5, 1_000)).unwrap();
            prop_assert_eq!(block_on(store.read(&counted, 1_000)).unwrap(), 0);
        }
    }

    #[test]
    fn expired_counters_are_swept_as_the_store_grows() {
        let store = MemoryLimitStore::new();
        for minute in 0..5_000u64 {
            let key = format!("rpm:alice:{minute}");
            let counted = counter(&key, Some((minute + 1) * 60_000));
            block_on(store.add(&counted, 1, minute * 60_000)).unwrap();
        }
        let kept = store.counters.lock().unwrap().by_key.len();
        assert!(kept <= 1024, "{kept} counters kept");
        let total = counter("spend:alice:0", None);
        block_on(store.add(&total, 7, u64::MAX - 1)).unwrap();
        assert_eq!(block_on(store.read(&total, u64::MAX - 1)).unwrap(), 7);
    }
}

//! The conversations a Responses API client continues by id
//! (`previous_response_id`).
//!
//! A client of `POST /v1/responses` may send only its new input and name the
//! response it follows; the gateway then needs that response's conversation:
//! its input and its reply, as canonical messages (the instructions and tools
//! are not carried over — a client sends them with every request, as OpenAI's
//! API wants). A [`ResponseStore`] keeps them under the response's id.
//! [`MemoryResponseStore`] is the default: bounded in entries and bytes, the
//! oldest forgotten first. Replicas that must share conversations plug in a
//! store of their own (a database, Redis).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use crate::{Error, Message};

/// What a [`ResponseStore`]'s methods return: a boxed future, so that the
/// trait can be used as `dyn ResponseStore`.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'a>>;

/// Where a Responses API gateway keeps conversations by response id.
///
/// `load` of an id never saved, or saved and since forgotten, is `Ok(None)`:
/// the client gets OpenAI's `previous_response_not_found` error. An `Err` is
/// the store failing (unreachable, corrupt), answered as a server error.
pub trait ResponseStore: Send + Sync + 'static {
    /// The conversation saved under `id`, if the store has it.
    fn load<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Vec<Message>>>;

    /// Saves `conversation` under `id`, replacing what was there.
    fn save<'a>(&'a self, id: &'a str, conversation: Vec<Message>) -> StoreFuture<'a, ()>;
}

impl<S: ResponseStore + ?Sized> ResponseStore for Arc<S> {
    fn load<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Vec<Message>>> {
        (**self).load(id)
    }

    fn save<'a>(&'a self, id: &'a str, conversation: Vec<Message>) -> StoreFuture<'a, ()> {
        (**self).save(id, conversation)
    }
}

/// A [`ResponseStore`] in memory, bounded: at most `max_entries`
/// conversations and `max_bytes` of them (measured as their canonical JSON),
/// the oldest saved forgotten first. A conversation larger than `max_bytes`
/// alone is not kept. Clones share one store.
///
/// ```
/// use lmstack::Message;
/// use lmstack::server::{MemoryResponseStore, ResponseStore};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = MemoryResponseStore::new(2, 1 << 20);
/// for id in ["resp_1", "resp_2", "resp_3"] {
///     store.save(id, vec![Message::user(id)]).await?;
/// }
/// assert!(store.load("resp_1").await?.is_none(), "the oldest was forgotten");
/// assert_eq!(store.load("resp_3").await?, Some(vec![Message::user("resp_3")]));
/// # Ok::<(), lmstack::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct MemoryResponseStore {
    shared: Arc<Mutex<Kept>>,
}

impl MemoryResponseStore {
    /// The default bounds: 10 000 conversations, 256 MiB.
    pub const DEFAULT_MAX_ENTRIES: usize = 10_000;
    /// See [`DEFAULT_MAX_ENTRIES`](Self::DEFAULT_MAX_ENTRIES).
    pub const DEFAULT_MAX_BYTES: usize = 256 << 20;

    /// A store that keeps at most `max_entries` conversations and `max_bytes`
    /// of them.
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        let kept = Kept {
            max_entries,
            max_bytes,
            ..Kept::default()
        };
        MemoryResponseStore {
            shared: Arc::new(Mutex::new(kept)),
        }
    }

    /// The number of conversations kept.
    pub fn len(&self) -> usize {
        self.lock().by_id.len()
    }

    /// True when none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        // Every change leaves the maps consistent before it can panic.
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Default for MemoryResponseStore {
    fn default() -> Self {
        Self::new(Self::DEFAULT_MAX_ENTRIES, Self::DEFAULT_MAX_BYTES)
    }
}

impl std::fmt::Debug for MemoryResponseStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.lock();
        f.debug_struct("MemoryResponseStore")
            .field("entries", &kept.by_id.len())
            .field("bytes", &kept.bytes)
            .finish()
    }
}

impl ResponseStore for MemoryResponseStore {
    fn load<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Vec<Message>>> {
        let found = self
            .lock()
            .by_id
            .get(id)
            .map(|(_, messages)| messages.clone());
        Box::pin(std::future::ready(Ok(found.map(|m| m.to_vec()))))
    }

    fn save<'a>(&'a self, id: &'a str, conversation: Vec<Message>) -> StoreFuture<'a, ()> {
        let size = serde_json::to_vec(&conversation).map_or(usize::MAX, |json| json.len());
        self.lock().insert(id, size, conversation.into());
        Box::pin(std::future::ready(Ok(())))
    }
}

/// The conversations, by id and in the order they were saved.
#[derive(Default)]
struct Kept {
    by_id: HashMap<String, (usize, Arc<[Message]>)>,
    order: VecDeque<String>,
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
}

impl Kept {
    fn insert(&mut self, id: &str, size: usize, messages: Arc<[Message]>) {
        self.remove(id);
        if size > self.max_bytes || self.max_entries == 0 {
            return;
        }
        while self.by_id.len() >= self.max_entries || self.bytes + size > self.max_bytes {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some((freed, _)) = self.by_id.remove(&oldest) {
                self.bytes -= freed;
            }
        }
        self.bytes += size;
        self.order.push_back(id.to_owned());
        self.by_id.insert(id.to_owned(), (size, messages));
    }

    fn remove(&mut self, id: &str) {
        if let Some((size, _)) = self.by_id.remove(id) {
            self.bytes -= size;
            self.order.retain(|kept| kept != id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<T>(future: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(future)
    }

    fn size(messages: &[Message]) -> usize {
        serde_json::to_vec(messages).unwrap().len()
    }

    #[test]
    fn the_oldest_are_forgotten_when_the_bytes_run_out() {
        let one = vec![Message::user("x".repeat(100))];
        let store = MemoryResponseStore::new(100, 2 * size(&one) + 10);
        block_on(async {
            for id in ["a", "b", "c"] {
                store.save(id, one.clone()).await.unwrap();
            }
            assert_eq!(store.len(), 2);
            assert!(store.load("a").await.unwrap().is_none());
            assert_eq!(store.load("c").await.unwrap(), Some(one.clone()));
        });
    }

    #[test]
    fn saving_an_id_again_replaces_it_and_frees_its_bytes() {
        let store = MemoryResponseStore::new(2, usize::MAX);
        block_on(async {
            store.save("a", vec![Message::user("1")]).await.unwrap();
            store.save("a", vec![Message::user("2")]).await.unwrap();
            store.save("b", vec![Message::user("3")]).await.unwrap();
            assert_eq!(store.len(), 2, "a is kept once");
            assert_eq!(
                store.load("a").await.unwrap(),
                Some(vec![Message::user("2")])
            );
            let kept = store.lock();
            assert_eq!(kept.order, ["a", "b"]);
            let sizes: usize = kept.by_id.values().map(|(size, _)| size).sum();
            assert_eq!(kept.bytes, sizes);
        });
    }

    #[test]
    fn a_conversation_larger_than_the_store_is_not_kept() {
        let store = MemoryResponseStore::new(10, 8);
        block_on(async {
            store
                .save("big", vec![Message::user("too long")])
                .await
                .unwrap();
            assert!(store.is_empty());
            assert!(store.load("big").await.unwrap().is_none());
        });
    }
}

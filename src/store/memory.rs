//! `MemoryStore`: media kept in a map in memory.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::{MediaRef, MediaStore, StoreError};

/// A [`MediaStore`] in memory, for tests and short-lived processes.
///
/// It keeps every blob put in it (once per distinct bytes) until it is
/// dropped, with no limit: the bytes were in memory already when they were put.
/// Clones share one map.
///
/// ```
/// use lmstack::store::{MediaStore, MemoryStore};
///
/// let store = MemoryStore::new();
/// let reference = store.put(b"\x89PNG", "image/png")?;
/// assert_eq!(store.put(b"\x89PNG", "image/png")?, reference);
/// assert_eq!(store.len(), 1);
/// assert_eq!(store.get(&reference)?, b"\x89PNG");
/// # Ok::<(), lmstack::store::StoreError>(())
/// ```
#[derive(Clone, Default)]
pub struct MemoryStore {
    blobs: Arc<Mutex<HashMap<MediaRef, Arc<[u8]>>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of blobs kept.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when no blob is kept.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<MediaRef, Arc<[u8]>>> {
        // The map is consistent after any panic: an insert is whole or not done.
        self.blobs.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl MediaStore for MemoryStore {
    fn put(&self, bytes: &[u8], _media_type: &str) -> Result<MediaRef, StoreError> {
        let reference = MediaRef::of(bytes);
        self.lock()
            .entry(reference)
            .or_insert_with(|| Arc::from(bytes));
        Ok(reference)
    }

    fn get(&self, reference: &MediaRef) -> Result<Vec<u8>, StoreError> {
        let blob = self.lock().get(reference).cloned();
        blob.map(|bytes| bytes.to_vec()).ok_or(StoreError::Missing {
            reference: *reference,
        })
    }
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("blobs", &self.len())
            .finish()
    }
}

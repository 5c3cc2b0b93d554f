//! `FileStore`: media kept as files in a directory.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use super::{MediaRef, MediaStore, StoreError};

/// The folder of the blobs under the root, named after the digest algorithm.
const ALGORITHM: &str = "sha256";

/// The prefix of the temporary file a blob is written to before it is renamed.
const TEMP_PREFIX: &str = ".put-";

/// A [`MediaStore`] in a directory: one file per blob, named by its digest.
///
/// The blob of `sha256:<hex>` is `<root>/sha256/<first two hex digits>/<hex>`.
/// A path is only ever made of a [`MediaRef`]'s validated hex digits, so the
/// store reads and writes inside its root and nowhere else.
///
/// - **Atomic writes**: a blob is written to a temporary file in its final
///   directory, synced, then renamed into place, so a reader (or a crash) never
///   sees half a blob, and a failed write leaves no file behind.
/// - **Deduplication**: the same bytes put twice are one file; a blob already
///   there with the right size is not written again.
/// - **Verified reads**: the bytes read are hashed again; a blob altered on disk
///   is a [`StoreError::Corrupt`], a blob not there a [`StoreError::Missing`],
///   both naming the reference.
/// - **A size limit** ([`max_bytes`](Self::max_bytes), 64 MiB by default) on the
///   bytes put and on the blobs read.
///
/// Its IO is blocking `std::fs`: use it where blocking is fine (the transcript
/// writer's own thread, a CLI) or through `spawn_blocking`.
///
/// ```
/// use lmstack::store::{FileStore, MediaStore};
///
/// let dir = tempfile::tempdir()?;
/// let store = FileStore::new(dir.path());
/// let reference = store.put(b"%PDF-1.7", "application/pdf")?;
/// assert_eq!(store.put(b"%PDF-1.7", "application/pdf")?, reference);
/// assert_eq!(store.get(&reference)?, b"%PDF-1.7");
/// assert!(store.path(&reference).starts_with(dir.path()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct FileStore {
    root: PathBuf,
    max_bytes: usize,
}

impl FileStore {
    /// The default size limit of a blob: 64 MiB.
    pub const DEFAULT_MAX_BYTES: usize = 64 * 1024 * 1024;

    /// A store in the directory `root`, created (with its subdirectories) when
    /// the first blob is put.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        FileStore {
            root: root.into(),
            max_bytes: Self::DEFAULT_MAX_BYTES,
        }
    }

    /// Sets the largest blob put or read, in bytes (64 MiB by default).
    pub fn max_bytes(mut self, bytes: usize) -> Self {
        self.max_bytes = bytes;
        self
    }

    /// The store's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file that holds, or would hold, the bytes of `reference`.
    pub fn path(&self, reference: &MediaRef) -> PathBuf {
        let hex = reference.hex();
        self.directory(&hex).join(hex)
    }

    fn directory(&self, hex: &str) -> PathBuf {
        self.root.join(ALGORITHM).join(&hex[..2])
    }

    fn too_large(&self, what: String, size: u64) -> StoreError {
        StoreError::TooLarge {
            what,
            size,
            limit: self.max_bytes,
        }
    }
}

/// An IO error while doing `action` to the blob of `reference`.
fn io_error(action: &'static str, reference: &MediaRef) -> impl FnOnce(io::Error) -> StoreError {
    let reference = *reference;
    move |source| StoreError::Io {
        action,
        what: reference.to_string(),
        source,
    }
}

impl MediaStore for FileStore {
    fn put(&self, bytes: &[u8], media_type: &str) -> Result<MediaRef, StoreError> {
        if bytes.len() > self.max_bytes {
            let what = format!("media of type {media_type}");
            return Err(self.too_large(what, bytes.len() as u64));
        }
        let reference = MediaRef::of(bytes);
        let hex = reference.hex();
        let directory = self.directory(&hex);
        let path = directory.join(&hex);
        let stored = fs::symlink_metadata(&path)
            .is_ok_and(|meta| meta.is_file() && meta.len() == bytes.len() as u64);
        if stored {
            return Ok(reference);
        }
        fs::create_dir_all(&directory).map_err(io_error("make the directory of", &reference))?;
        let mut temp = tempfile::Builder::new()
            .prefix(TEMP_PREFIX)
            .tempfile_in(&directory)
            .map_err(io_error("make a temporary file for", &reference))?;
        temp.write_all(bytes)
            .and_then(|()| temp.as_file().sync_all())
            .map_err(io_error("write", &reference))?;
        // A failed rename drops the temporary file, which removes it.
        temp.persist(&path)
            .map_err(|error| io_error("rename into place", &reference)(error.error))?;
        Ok(reference)
    }

    fn get(&self, reference: &MediaRef) -> Result<Vec<u8>, StoreError> {
        let file = match File::open(self.path(reference)) {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return Err(StoreError::Missing {
                    reference: *reference,
                });
            }
            Err(error) => return Err(io_error("open", reference)(error)),
        };
        let size = file.metadata().map_err(io_error("read", reference))?.len();
        if size > self.max_bytes as u64 {
            return Err(self.too_large(reference.to_string(), size));
        }
        // The file may grow while it is read: read one byte past the limit at most.
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        file.take(self.max_bytes as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(io_error("read", reference))?;
        if bytes.len() > self.max_bytes {
            return Err(self.too_large(reference.to_string(), bytes.len() as u64));
        }
        if MediaRef::of(&bytes) != *reference {
            return Err(StoreError::Corrupt {
                reference: *reference,
            });
        }
        Ok(bytes)
    }
}

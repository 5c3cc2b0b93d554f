//! Media stores: conversations kept with their images, documents and audio by
//! reference.
//!
//! A stored conversation should not hold the same image inline in every turn
//! that repeats it. A [`MediaStore`] keeps media bytes once, under their
//! content address — a [`MediaRef`], `sha256:` and the hex SHA-256 digest of
//! the bytes — and the canonical JSON names them with the reference form of a
//! media block:
//!
//! ```json
//! {"type":"image","media_type":"image/png","ref":"sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}
//! ```
//!
//! - [`dehydrate`] puts the inline (base64) media of messages in a store and
//!   leaves references in their place; [`rehydrate`] does the reverse, so a
//!   stored conversation can be continued with any provider. Both work in
//!   place, on a `[Message]` (a `ChatRequest`'s messages, a conversation read
//!   back from JSON lines).
//! - [`TranscriptLayer::media_store`](crate::transcript::TranscriptLayer::media_store)
//!   records transcripts with media by reference, and
//!   [`transcript::read_with_store`](crate::transcript::read_with_store) reads
//!   them back whole.
//! - A provider given a store (`ProviderConfig::media_store`, feature `http`)
//!   resolves references before lowering; without one, a request holding a
//!   reference fails with [`Error::InvalidRequest`](crate::Error::InvalidRequest)
//!   before anything is sent. No wire ever sees a reference.
//!
//! Two stores come with the crate: [`FileStore`], a directory of files (the
//! embedded default), and [`MemoryStore`], a map in memory (tests, short-lived
//! processes). A store hands back only the bytes a reference names: the file
//! store hashes what it reads again, and bytes whose digest is not their
//! reference are an error, never media.
//!
//! ```
//! use lmstack::store::{self, MemoryStore};
//! use lmstack::{ContentBlock, Message, Role};
//!
//! let store = MemoryStore::new();
//! let image = ContentBlock::image_bytes("image/png", b"\x89PNG\r\n\x1a\n");
//! let original = vec![
//!     Message::multimodal(Role::User, vec![ContentBlock::text("What is this?"), image]),
//! ];
//!
//! let mut stored = original.clone();
//! store::dehydrate(&mut stored, &store)?;
//! let line = serde_json::to_string(&stored[0]).unwrap();
//! assert!(line.contains(r#""ref":"sha256:"#) && !line.contains(r#""data""#));
//!
//! store::rehydrate(&mut stored, &store)?;
//! assert_eq!(stored, original);
//! # Ok::<(), lmstack::store::StoreError>(())
//! ```

mod file;
mod memory;

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

pub use file::FileStore;
pub use memory::MemoryStore;

pub use crate::message::{InvalidRef, MediaRef};
use crate::message::{Media, MediaSource, Message};

/// A content-addressed store of media bytes.
///
/// [`put`](Self::put) keeps bytes and returns their [`MediaRef`] (the SHA-256
/// digest, [`MediaRef::of`]); [`get`](Self::get) returns the bytes of a
/// reference, checked against it. Putting the same bytes twice keeps them once.
/// The trait is object-safe: the crate takes stores as `&dyn MediaStore` or
/// `Arc<dyn MediaStore>`.
///
/// Its methods block (a file store does file IO): call them off async tasks,
/// or where blocking is accepted — the transcript writer runs on a thread of
/// its own, and a provider resolves references while it builds the request.
///
/// ```
/// use std::sync::Arc;
/// use lmstack::store::{MediaRef, MediaStore, MemoryStore};
///
/// let store: Arc<dyn MediaStore> = Arc::new(MemoryStore::new());
/// let reference = store.put(b"RIFF....WAVE", "audio/wav")?;
/// assert_eq!(reference, MediaRef::of(b"RIFF....WAVE"));
/// assert_eq!(store.get(&reference)?, b"RIFF....WAVE");
/// # Ok::<(), lmstack::store::StoreError>(())
/// ```
pub trait MediaStore: Send + Sync {
    /// Keeps `bytes` (of the MIME type `media_type`, which a store may record
    /// or ignore) and returns their reference.
    fn put(&self, bytes: &[u8], media_type: &str) -> Result<MediaRef, StoreError>;

    /// The bytes of `reference`. Bytes whose digest is not `reference` are a
    /// [`StoreError::Corrupt`]; bytes the store does not have, a
    /// [`StoreError::Missing`].
    fn get(&self, reference: &MediaRef) -> Result<Vec<u8>, StoreError>;
}

impl<S: MediaStore + ?Sized> MediaStore for Arc<S> {
    fn put(&self, bytes: &[u8], media_type: &str) -> Result<MediaRef, StoreError> {
        (**self).put(bytes, media_type)
    }

    fn get(&self, reference: &MediaRef) -> Result<Vec<u8>, StoreError> {
        (**self).get(reference)
    }
}

/// What went wrong in a media store; every message names the reference at
/// fault when there is one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store does not have the bytes of the reference.
    #[error("media store: {reference} is not in the store")]
    Missing {
        /// The reference.
        reference: MediaRef,
    },
    /// The bytes kept under the reference are not the bytes it names (their
    /// digest differs): the blob was altered or damaged.
    #[error("media store: the bytes kept for {reference} do not match it (the blob is corrupt)")]
    Corrupt {
        /// The reference.
        reference: MediaRef,
    },
    /// Media too large for the store: bytes to put, or a blob to read.
    #[error("media store: {what} is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// What is too large: `media of type image/png`, or the reference.
        what: String,
        /// Its size, in bytes.
        size: u64,
        /// The store's limit, in bytes.
        limit: usize,
    },
    /// Inline media whose data is not valid base64 (standard alphabet, padded)
    /// cannot be put in a store.
    #[error("media store: inline {media_type} media is not valid base64: {message}")]
    InvalidBase64 {
        /// The media's MIME type.
        media_type: String,
        /// What is wrong with it.
        message: String,
    },
    /// Reading or writing the store failed.
    #[error("media store: cannot {action} {what}: {source}")]
    Io {
        /// What was being done: `read`, `write`.
        action: &'static str,
        /// The reference it was done for.
        what: String,
        /// The IO error.
        #[source]
        source: io::Error,
    },
    /// Any other failure of a store outside this crate.
    #[error("media store: {0}")]
    Other(crate::BoxError),
}

impl From<StoreError> for crate::Error {
    fn from(error: StoreError) -> Self {
        crate::Error::Other(Box::new(error))
    }
}

/// Puts the inline (base64) media of `messages` — their content blocks and
/// their tool results' — in `store`, and leaves references in their place
/// (media type and name kept). Media by URL or already by reference is left as
/// it is.
///
/// On an error the media before the failing block are references already (and
/// in the store); the others are unchanged.
pub fn dehydrate(messages: &mut [Message], store: &dyn MediaStore) -> Result<(), StoreError> {
    messages
        .iter_mut()
        .flat_map(Message::media_mut)
        .try_for_each(|media| dehydrate_media(media, store))
}

/// Turns the media by reference in `messages` back into inline base64 media,
/// with the bytes from `store` (checked against their reference). Each
/// reference is read once per call, and the media that share it share one
/// base64 text.
///
/// On an error the media before the failing block are inline already; the
/// others are unchanged.
pub fn rehydrate(messages: &mut [Message], store: &dyn MediaStore) -> Result<(), StoreError> {
    let mut inline: HashMap<MediaRef, Arc<str>> = HashMap::new();
    for media in messages.iter_mut().flat_map(Message::media_mut) {
        let MediaSource::Ref {
            media_type,
            reference,
        } = &mut media.source
        else {
            continue;
        };
        let data = match inline.get(reference) {
            Some(data) => data.clone(),
            None => {
                let data: Arc<str> = STANDARD.encode(store.get(reference)?).into();
                inline.insert(*reference, data.clone());
                data
            }
        };
        let media_type = std::mem::take(media_type);
        media.source = MediaSource::Base64 { media_type, data };
    }
    Ok(())
}

/// [`dehydrate`] for one media: inline media is put in `store` and becomes a
/// reference; other media is left as it is.
pub fn dehydrate_media(media: &mut Media, store: &dyn MediaStore) -> Result<(), StoreError> {
    let MediaSource::Base64 { media_type, data } = &media.source else {
        return Ok(());
    };
    let bytes = STANDARD
        .decode(data.as_bytes())
        .map_err(|error| StoreError::InvalidBase64 {
            media_type: media_type.clone(),
            message: error.to_string(),
        })?;
    let reference = store.put(&bytes, media_type)?;
    media.source = MediaSource::Ref {
        media_type: media_type.clone(),
        reference,
    };
    Ok(())
}

/// The first media by reference in `messages`, if any.
#[cfg(feature = "http")]
pub(crate) fn first_reference(messages: &mut [Message]) -> Option<MediaRef> {
    messages
        .iter_mut()
        .flat_map(Message::media_mut)
        .find_map(|media| match &media.source {
            MediaSource::Ref { reference, .. } => Some(*reference),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ContentBlock, Role, ToolCall, ToolResult};

    fn conversation() -> Vec<Message> {
        let png = ContentBlock::image_bytes("image/png", b"\x89PNG\r\n\x1a\n");
        let pdf = Media::from_bytes("application/pdf", b"%PDF-1.7").with_name("report.pdf");
        let result = ToolResult::new(
            "call_1",
            "snapshot",
            vec![
                ContentBlock::text("here"),
                png.clone(),
                ContentBlock::audio_bytes("audio/wav", b"RIFF"),
            ],
        );
        vec![
            Message::user("Hi"),
            Message::multimodal(
                Role::User,
                vec![
                    png.clone(),
                    ContentBlock::image_url("https://example.com/cat.png"),
                    ContentBlock::Document(pdf),
                ],
            ),
            Message::tool_aggregate(
                vec![ToolCall::new("call_1", "snapshot", serde_json::json!({}))],
                vec![result.clone()],
            ),
            Message::tool_results(vec![result]),
        ]
    }

    #[test]
    fn dehydrated_media_is_by_reference_and_rehydrates_to_the_original() {
        let store = MemoryStore::new();
        let original = conversation();
        let mut stored = original.clone();
        dehydrate(&mut stored, &store).unwrap();
        let text = serde_json::to_string(&stored).unwrap();
        assert!(!text.contains("\"data\""), "{text}");
        assert_eq!(text.matches("\"ref\":\"sha256:").count(), 6, "{text}");
        assert!(text.contains("\"url\":\"https://example.com/cat.png\""));
        assert!(text.contains("\"name\":\"report.pdf\""));
        // The PNG is there three times, kept once; with the PDF and the WAV: 3.
        assert_eq!(store.len(), 3);

        rehydrate(&mut stored, &store).unwrap();
        assert_eq!(stored, original);
    }

    #[test]
    fn rehydration_shares_one_text_per_reference() {
        let store = MemoryStore::new();
        let mut stored = conversation();
        dehydrate(&mut stored, &store).unwrap();
        rehydrate(&mut stored, &store).unwrap();
        let data = |message: &Message, index: usize| -> Arc<str> {
            let mut message = message.clone();
            match &message.media_mut().nth(index).unwrap().source {
                MediaSource::Base64 { data, .. } => data.clone(),
                other => panic!("not inline: {other:?}"),
            }
        };
        assert!(Arc::ptr_eq(&data(&stored[1], 0), &data(&stored[2], 0)));
    }

    #[test]
    fn a_missing_reference_fails_rehydration_naming_it() {
        let reference = MediaRef::of(b"never stored");
        let mut messages = vec![Message::multimodal(
            Role::User,
            vec![ContentBlock::Image(Media::reference(
                "image/png",
                reference,
            ))],
        )];
        let error = rehydrate(&mut messages, &MemoryStore::new()).unwrap_err();
        assert!(matches!(error, StoreError::Missing { .. }));
        assert!(
            error.to_string().contains(&reference.to_string()),
            "{error}"
        );
    }

    #[test]
    fn inline_media_that_is_not_base64_is_refused_by_name() {
        let mut messages = vec![Message::multimodal(
            Role::User,
            vec![ContentBlock::Image(Media::base64(
                "image/png",
                "not base64!",
            ))],
        )];
        let error = dehydrate(&mut messages, &MemoryStore::new()).unwrap_err();
        assert!(matches!(error, StoreError::InvalidBase64 { .. }), "{error}");
        assert!(error.to_string().contains("image/png"), "{error}");
    }
}

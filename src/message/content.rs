//! Content blocks: the parts of a multimodal message or a tool result.

use std::sync::Arc;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::cache::CacheControl;
use super::reference::MediaRef;

/// One block of content: text, an image, a document or an audio clip.
///
/// JSON form (internally tagged by `"type"`):
///
/// ```json
/// {"type":"text","text":"hello"}
/// {"type":"image","media_type":"image/png","data":"iVBORw0KGgo="}
/// {"type":"image","url":"https://example.com/cat.png"}
/// {"type":"document","media_type":"application/pdf","data":"JVBERi0=","name":"report.pdf"}
/// {"type":"audio","media_type":"audio/wav","data":"UklGRg=="}
/// {"type":"image","media_type":"image/png","ref":"sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}
/// {"type":"text","text":"the long context","cache_control":{"ttl":"1h"}}
/// ```
///
/// A block may carry a cache breakpoint ([`CacheControl`]): a text block in its
/// `cache_control` field, media in [`Media::cache_control`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
        /// A cache breakpoint after this block.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    /// An image, inline (base64), by URL or by reference to a media store.
    Image(Media),
    /// A document such as a PDF, inline (base64), by URL or by reference.
    Document(Media),
    /// An audio clip such as a WAV or MP3 file, inline (base64), by URL or by
    /// reference.
    Audio(Media),
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text {
            text: text.into(),
            cache_control: None,
        }
    }

    /// An inline image from raw bytes; the bytes are base64-encoded once here.
    ///
    /// ```
    /// use lmstack::ContentBlock;
    /// let block = ContentBlock::image_bytes("image/png", b"\x89PNG");
    /// assert_eq!(
    ///     serde_json::to_string(&block).unwrap(),
    ///     r#"{"type":"image","media_type":"image/png","data":"iVBORw=="}"#
    /// );
    /// ```
    pub fn image_bytes(media_type: impl Into<String>, bytes: &[u8]) -> Self {
        ContentBlock::Image(Media::from_bytes(media_type, bytes))
    }

    /// An image by URL.
    pub fn image_url(url: impl Into<String>) -> Self {
        ContentBlock::Image(Media::url(url))
    }

    /// An inline document (for example a PDF) from raw bytes.
    pub fn document_bytes(media_type: impl Into<String>, bytes: &[u8]) -> Self {
        ContentBlock::Document(Media::from_bytes(media_type, bytes))
    }

    /// An inline audio clip (for example `audio/wav`) from raw bytes.
    ///
    /// ```
    /// use lmstack::ContentBlock;
    /// let block = ContentBlock::audio_bytes("audio/wav", b"RIFF");
    /// assert_eq!(
    ///     serde_json::to_string(&block).unwrap(),
    ///     r#"{"type":"audio","media_type":"audio/wav","data":"UklGRg=="}"#
    /// );
    /// ```
    pub fn audio_bytes(media_type: impl Into<String>, bytes: &[u8]) -> Self {
        ContentBlock::Audio(Media::from_bytes(media_type, bytes))
    }

    /// The text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentBlock::Text { text, .. } => Some(text),
            _ => None,
        }
    }

    /// The block's cache breakpoint.
    ///
    /// ```
    /// use lmstack::{CacheControl, ContentBlock};
    /// let block = ContentBlock::text("context").with_cache_control(Some(CacheControl::default()));
    /// assert_eq!(block.cache_control(), Some(CacheControl::default()));
    /// assert_eq!(
    ///     serde_json::to_string(&block).unwrap(),
    ///     r#"{"type":"text","text":"context","cache_control":{}}"#
    /// );
    /// ```
    pub fn cache_control(&self) -> Option<CacheControl> {
        match self {
            ContentBlock::Text { cache_control, .. } => *cache_control,
            ContentBlock::Image(media)
            | ContentBlock::Document(media)
            | ContentBlock::Audio(media) => media.cache_control,
        }
    }

    /// Sets the block's cache breakpoint, or removes it (`None`).
    pub fn with_cache_control(mut self, cache: Option<CacheControl>) -> Self {
        match &mut self {
            ContentBlock::Text { cache_control, .. } => *cache_control = cache,
            ContentBlock::Image(media)
            | ContentBlock::Document(media)
            | ContentBlock::Audio(media) => media.cache_control = cache,
        }
        self
    }

    /// The block for `media` by its media type: an image for `image/*`, audio
    /// for `audio/*`, else a document.
    ///
    /// ```
    /// use lmstack::{ContentBlock, Media};
    /// let block = ContentBlock::of_media(Media::base64("audio/wav", "UklG"));
    /// assert!(matches!(block, ContentBlock::Audio(_)));
    /// ```
    pub fn of_media(media: Media) -> Self {
        match media.media_type() {
            Some(t) if t.starts_with("image/") => ContentBlock::Image(media),
            Some(t) if t.starts_with("audio/") => ContentBlock::Audio(media),
            _ => ContentBlock::Document(media),
        }
    }

    /// The media of an image, document or audio block.
    pub fn as_media(&self) -> Option<&Media> {
        match self {
            ContentBlock::Image(media)
            | ContentBlock::Document(media)
            | ContentBlock::Audio(media) => Some(media),
            ContentBlock::Text { .. } => None,
        }
    }

    /// The media of an image, document or audio block, to change.
    pub fn as_media_mut(&mut self) -> Option<&mut Media> {
        match self {
            ContentBlock::Image(media)
            | ContentBlock::Document(media)
            | ContentBlock::Audio(media) => Some(media),
            ContentBlock::Text { .. } => None,
        }
    }
}

/// Binary content (an image, a document or an audio clip), carried inline as
/// base64, by URL, or by reference to a media store.
///
/// The inline form is the canonical one: it maps 1:1 to an OpenAI-style
/// `data:<media_type>;base64,<data>` URI, an Anthropic `base64` source, a Gemini
/// `inlineData` part and an MCP `ImageContent` or `AudioContent`. The base64
/// text is shared (`Arc`), so cloning a message history that holds large
/// images is cheap.
///
/// The reference form ([`MediaSource::Ref`]) is for storing conversations: the
/// bytes sit once in a [`MediaStore`](crate::store::MediaStore) and every stored
/// turn names them by their SHA-256 digest. It never reaches a provider's wire:
/// [`store::rehydrate`](crate::store::rehydrate) turns it back into the inline
/// form, and so does a provider configured with a store.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawMedia", into = "RawMedia")]
pub struct Media {
    /// Where the bytes are.
    pub source: MediaSource,
    /// An optional file name or title (documents).
    pub name: Option<String>,
    /// A cache breakpoint after this block (JSON: `cache_control`).
    pub cache_control: Option<CacheControl>,
}

/// Where the bytes of a [`Media`] are.
#[derive(Clone, Debug, PartialEq)]
pub enum MediaSource {
    /// Inline bytes, base64-encoded (standard alphabet, padded).
    Base64 {
        /// The MIME type, such as `image/png`.
        media_type: String,
        /// The base64 text.
        data: Arc<str>,
    },
    /// A URL the provider fetches.
    Url {
        /// The URL.
        url: String,
        /// The MIME type, when known.
        media_type: Option<String>,
    },
    /// Bytes kept in a [`MediaStore`](crate::store::MediaStore), named by their
    /// content address (JSON: `"ref":"sha256:…"`).
    Ref {
        /// The MIME type, such as `image/png`.
        media_type: String,
        /// The SHA-256 address of the bytes.
        reference: MediaRef,
    },
}

impl Media {
    /// Inline media from raw bytes.
    pub fn from_bytes(media_type: impl Into<String>, bytes: &[u8]) -> Self {
        let data = base64::engine::general_purpose::STANDARD.encode(bytes);
        Self::base64(media_type, data)
    }

    /// Inline media from text that is already base64.
    pub fn base64(media_type: impl Into<String>, data: impl Into<Arc<str>>) -> Self {
        Media {
            source: MediaSource::Base64 {
                media_type: media_type.into(),
                data: data.into(),
            },
            name: None,
            cache_control: None,
        }
    }

    /// Media by URL.
    pub fn url(url: impl Into<String>) -> Self {
        Media {
            source: MediaSource::Url {
                url: url.into(),
                media_type: None,
            },
            name: None,
            cache_control: None,
        }
    }

    /// Media by reference to the bytes kept in a
    /// [`MediaStore`](crate::store::MediaStore).
    pub fn reference(media_type: impl Into<String>, reference: MediaRef) -> Self {
        Media {
            source: MediaSource::Ref {
                media_type: media_type.into(),
                reference,
            },
            name: None,
            cache_control: None,
        }
    }

    /// Sets the file name or title.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The MIME type, when known.
    pub fn media_type(&self) -> Option<&str> {
        match &self.source {
            MediaSource::Base64 { media_type, .. } | MediaSource::Ref { media_type, .. } => {
                Some(media_type)
            }
            MediaSource::Url { media_type, .. } => media_type.as_deref(),
        }
    }

    /// The `data:` URI of inline media (`None` for media by URL or reference).
    pub fn data_uri(&self) -> Option<String> {
        match &self.source {
            MediaSource::Base64 { media_type, data } => {
                Some(format!("data:{media_type};base64,{data}"))
            }
            MediaSource::Url { .. } | MediaSource::Ref { .. } => None,
        }
    }

    /// Decodes inline media to bytes (`None` for media by URL or reference).
    pub fn decode(&self) -> Option<Result<Vec<u8>, base64::DecodeError>> {
        match &self.source {
            MediaSource::Base64 { data, .. } => {
                Some(base64::engine::general_purpose::STANDARD.decode(data.as_bytes()))
            }
            MediaSource::Url { .. } | MediaSource::Ref { .. } => None,
        }
    }
}

/// The flat JSON form of [`Media`].
#[derive(Serialize, Deserialize)]
struct RawMedia {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    media_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    reference: Option<MediaRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

impl TryFrom<RawMedia> for Media {
    type Error = &'static str;

    fn try_from(raw: RawMedia) -> Result<Self, Self::Error> {
        let source = match (raw.data, raw.url, raw.reference) {
            (Some(data), None, None) => MediaSource::Base64 {
                media_type: raw
                    .media_type
                    .ok_or("inline media needs a `media_type` beside `data`")?,
                data,
            },
            (None, Some(url), None) => MediaSource::Url {
                url,
                media_type: raw.media_type,
            },
            (None, None, Some(reference)) => MediaSource::Ref {
                media_type: raw
                    .media_type
                    .ok_or("media by reference needs a `media_type` beside `ref`")?,
                reference,
            },
            (None, None, None) => return Err("media needs `data` (base64), `url` or `ref`"),
            (Some(_), Some(_), _) => return Err("media has both `data` and `url`; give one"),
            (_, _, Some(_)) => return Err("media has both `ref` and `data` or `url`; give one"),
        };
        Ok(Media {
            source,
            name: raw.name,
            cache_control: raw.cache_control,
        })
    }
}

impl From<Media> for RawMedia {
    fn from(media: Media) -> Self {
        let mut raw = RawMedia {
            media_type: None,
            data: None,
            url: None,
            reference: None,
            name: media.name,
            cache_control: media.cache_control,
        };
        match media.source {
            MediaSource::Base64 { media_type, data } => {
                raw.media_type = Some(media_type);
                raw.data = Some(data);
            }
            MediaSource::Url { url, media_type } => {
                raw.media_type = media_type;
                raw.url = Some(url);
            }
            MediaSource::Ref {
                media_type,
                reference,
            } => {
                raw.media_type = Some(media_type);
                raw.reference = Some(reference);
            }
        }
        raw
    }
}

/// The essence of a MIME type, as types are compared: lower case, without
/// parameters (`Image/PNG; q=1` → `image/png`).
#[cfg(any(feature = "function", feature = "openai"))]
pub(crate) fn mime_essence(media_type: &str) -> String {
    media_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

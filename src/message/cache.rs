//! Prompt-cache breakpoints: where a client asks the provider to cache the
//! prompt up to, and for how long.

use serde::{Deserialize, Serialize};

use super::metadata::Metadata;

/// A cache breakpoint: the provider may cache the prompt up to and including
/// the block, tool or message that carries it (Anthropic's `cache_control`).
///
/// It sits on a text block ([`ContentBlock::Text`](super::ContentBlock::Text)),
/// on media ([`Media::cache_control`](super::Media::cache_control)), on a
/// [`ToolSpec`](crate::ToolSpec), and — under the metadata key
/// [`CACHE_CONTROL_KEY`], read and written through
/// [`Metadata::cache_control`] — on a text message (a system block, an
/// assistant text block), a tool call and a tool result. Wires without
/// breakpoints (OpenAI Chat, which caches by itself; Gemini) leave it out.
///
/// JSON form: `{}` (the provider's default time to live) or `{"ttl":"1h"}`.
///
/// ```
/// use lmstack::{CacheControl, CacheTtl};
/// let hour = CacheControl::with_ttl(CacheTtl::OneHour);
/// assert_eq!(serde_json::to_string(&hour).unwrap(), r#"{"ttl":"1h"}"#);
/// assert_eq!(serde_json::to_string(&CacheControl::default()).unwrap(), "{}");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CacheControl {
    /// How long the cache entry lives; `None` is the provider's default
    /// (five minutes at Anthropic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<CacheTtl>,
}

impl CacheControl {
    /// A breakpoint with the given time to live.
    pub fn with_ttl(ttl: CacheTtl) -> Self {
        CacheControl { ttl: Some(ttl) }
    }
}

/// How long a cache entry lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CacheTtl {
    /// Five minutes (`"5m"`).
    #[serde(rename = "5m")]
    FiveMinutes,
    /// One hour (`"1h"`).
    #[serde(rename = "1h")]
    OneHour,
}

/// The metadata key of a message's, a tool call's or a tool result's
/// [`CacheControl`]; see [`Metadata::cache_control`].
pub const CACHE_CONTROL_KEY: &str = "cache_control";

impl Metadata {
    /// The cache breakpoint the metadata holds (under [`CACHE_CONTROL_KEY`]);
    /// a value of another form reads as none.
    ///
    /// ```
    /// use lmstack::{CacheControl, CacheTtl, Message};
    /// let mut message = Message::system("Be brief.");
    /// message.metadata_mut().set_cache_control(Some(CacheControl::with_ttl(CacheTtl::OneHour)));
    /// assert_eq!(
    ///     serde_json::to_string(&message).unwrap(),
    ///     r#"{"type":"text","role":"system","text":"Be brief.","metadata":{"cache_control":{"ttl":"1h"}}}"#
    /// );
    /// assert_eq!(message.metadata().cache_control(), Some(CacheControl::with_ttl(CacheTtl::OneHour)));
    /// ```
    pub fn cache_control(&self) -> Option<CacheControl> {
        serde_json::from_value(self.get(CACHE_CONTROL_KEY)?.clone()).ok()
    }

    /// Sets the cache breakpoint, or removes it (`None`).
    pub fn set_cache_control(&mut self, cache: Option<CacheControl>) -> &mut Self {
        match cache {
            Some(cache) => {
                // A struct of a string enum: writing it cannot fail.
                let value = serde_json::to_value(cache).unwrap_or_default();
                self.insert(CACHE_CONTROL_KEY, value);
            }
            None => {
                self.remove(CACHE_CONTROL_KEY);
            }
        }
        self
    }
}

//! Canonical data sealed into one opaque string that a client carries back
//! unchanged: `prefix` and the base64url (no padding) of its JSON. The
//! gateway seals call ids this way ([`server::sealed_ids`](crate::server::sealed_ids)),
//! and a wire whose client carries reasoning only as an opaque string (the
//! Responses API's `encrypted_content`) seals reasoning from another wire.
//! Pure; a seal longer than 256 KiB, or one that does not read back, does not
//! open.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;

use crate::message::ReasoningMessage;

/// The longest seal opened; a longer one is left as it is.
pub(crate) const MAX_SEALED: usize = 256 << 10;

/// The start of sealed reasoning.
pub const SEALED_REASONING_PREFIX: &str = "lmr_";

/// Reasoning sealed into one opaque string, for a client whose wire carries
/// reasoning between turns only as such a string (a Responses `reasoning`
/// item's `encrypted_content`): [`SEALED_REASONING_PREFIX`] and the base64url
/// of the canonical message — its text, its signature (Anthropic's, Gemini's),
/// whether it is redacted, its metadata —, which [`open_reasoning`] gives back
/// whole when the client sends it on its next turn.
///
/// ```
/// use lmstack::message::ReasoningMessage;
/// use lmstack::server::sealed_ids::{open_reasoning, seal_reasoning};
///
/// let thinking = ReasoningMessage {
///     text: "2 + 3 is 5.".into(),
///     signature: Some("EqQBCkYIBxgCKkD...".into()),
///     redacted: false,
///     metadata: Default::default(),
/// };
/// let sealed = seal_reasoning(&thinking);
/// assert!(sealed.starts_with("lmr_"));
/// assert_eq!(open_reasoning(&sealed), Some(thinking));
/// assert_eq!(open_reasoning("gAAAAABo..."), None, "another server's encrypted content");
/// ```
pub fn seal_reasoning(reasoning: &ReasoningMessage) -> String {
    seal(SEALED_REASONING_PREFIX, reasoning)
}

/// The reasoning a [`seal_reasoning`] string carries; `None` for a string that
/// is not sealed reasoning or does not open.
pub fn open_reasoning(sealed: &str) -> Option<ReasoningMessage> {
    open(SEALED_REASONING_PREFIX, sealed)
}

/// `prefix` and the base64url (no padding) of `value`'s JSON.
pub(crate) fn seal(prefix: &str, value: &impl Serialize) -> String {
    let json = serde_json::to_vec(value).expect("canonical messages are JSON");
    format!("{prefix}{}", URL_SAFE_NO_PAD.encode(json))
}

/// What [`seal`] sealed with `prefix` in `text`; `None` when `text` is not
/// such a seal, or is longer than [`MAX_SEALED`].
pub(crate) fn open<T: serde::de::DeserializeOwned>(prefix: &str, text: &str) -> Option<T> {
    let sealed = text.strip_prefix(prefix)?;
    if sealed.len() > MAX_SEALED {
        return None;
    }
    let json = URL_SAFE_NO_PAD.decode(sealed).ok()?;
    serde_json::from_slice(&json).ok()
}

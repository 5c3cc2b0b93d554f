//! The gateway's access check: bearer tokens, compared in constant time.

use std::fmt;

use sha2::{Digest, Sha256};

/// The token clients must present: `Authorization: Bearer TOKEN` (as the
/// OpenAI SDKs send their key) or `x-api-key: TOKEN` (as the Anthropic SDKs
/// do).
///
/// Both sides are hashed (SHA-256) before they are compared, byte by byte
/// without an early exit, so the time a check takes says nothing about the
/// token, not even its length. `Debug` never shows it.
///
/// ```
/// use lmstack::server::BearerToken;
///
/// let token = BearerToken::new("s3cret");
/// assert!(token.accepts(Some("Bearer s3cret"), None));
/// assert!(token.accepts(None, Some("s3cret")));
/// assert!(!token.accepts(Some("Bearer s3cre"), None));
/// assert!(!token.accepts(None, None));
/// assert_eq!(format!("{token:?}"), "BearerToken(<redacted>)");
/// ```
#[derive(Clone)]
pub struct BearerToken {
    digest: [u8; 32],
}

impl BearerToken {
    /// The token clients must present.
    pub fn new(token: impl AsRef<[u8]>) -> Self {
        BearerToken {
            digest: Sha256::digest(token.as_ref()).into(),
        }
    }

    /// Whether a request with these headers (the `Authorization` and
    /// `x-api-key` values) presents the token.
    pub fn accepts(&self, authorization: Option<&str>, api_key: Option<&str>) -> bool {
        self.accepts_presented(&Presented::new(authorization, api_key))
    }

    /// Whether `presented` holds the token.
    pub(crate) fn accepts_presented(&self, presented: &Presented) -> bool {
        // Both are checked, so that which header came does not change the time.
        let by_bearer = presented.bearer.is_some_and(|token| self.matches(&token));
        let by_key = presented.api_key.is_some_and(|token| self.matches(&token));
        by_bearer | by_key
    }

    fn matches(&self, presented: &[u8; 32]) -> bool {
        let difference = self
            .digest
            .iter()
            .zip(presented)
            .fold(0u8, |difference, (a, b)| difference | (a ^ b));
        std::hint::black_box(difference) == 0
    }
}

/// The tokens a request presents (`Authorization: Bearer`, `x-api-key`),
/// hashed once, to be compared with every key a gateway has.
pub(crate) struct Presented {
    bearer: Option<[u8; 32]>,
    api_key: Option<[u8; 32]>,
}

impl Presented {
    /// What the `Authorization` and `x-api-key` values present.
    pub(crate) fn new(authorization: Option<&str>, api_key: Option<&str>) -> Self {
        let digest = |token: &str| Sha256::digest(token.as_bytes()).into();
        let bearer = authorization.and_then(|value| {
            let (scheme, token) = value.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        });
        Presented {
            bearer: bearer.map(digest),
            api_key: api_key.map(|token| digest(token.trim())),
        }
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_token_in_either_header_is_accepted() {
        let token = BearerToken::new("abc");
        assert!(token.accepts(Some("bearer abc"), None));
        assert!(token.accepts(Some("  Bearer   abc "), None));
        assert!(token.accepts(Some("Bearer wrong"), Some("abc")));
        for wrong in ["Bearer abcd", "Bearer ab", "Basic abc", "abc", "Bearer", ""] {
            assert!(!token.accepts(Some(wrong), None), "{wrong:?}");
        }
        assert!(!token.accepts(None, Some("ABC")));
        assert!(!BearerToken::new("").accepts(Some("Bearer x"), None));
    }
}

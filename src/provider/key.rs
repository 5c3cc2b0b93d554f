//! API keys that never show up in logs.

use std::fmt;
use std::sync::Arc;

use crate::Error;

/// A secret API key. Its `Debug` form is redacted and it has no `Display`, so
/// neither logs nor error messages print it.
///
/// ```
/// use lmstack::provider::ApiKey;
/// let key = ApiKey::new("sk-secret");
/// assert_eq!(format!("{key:?}"), "ApiKey(<redacted>)");
/// assert_eq!(key.expose(), "sk-secret");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(Arc<str>);

impl ApiKey {
    /// A key from its text.
    pub fn new(key: impl Into<Arc<str>>) -> Self {
        ApiKey(key.into())
    }

    /// The key in the environment variable `name`; a clear error when it is
    /// missing or empty (the error names the variable, never the value).
    pub fn from_env(name: &str) -> Result<Self, Error> {
        match std::env::var(name) {
            Ok(key) if !key.trim().is_empty() => Ok(ApiKey::new(key.trim())),
            Ok(_) => Err(Error::InvalidRequest(format!(
                "the environment variable {name} is empty; set it to your API key"
            ))),
            Err(_) => Err(Error::InvalidRequest(format!(
                "the environment variable {name} is not set (or not UTF-8); set it to your API key"
            ))),
        }
    }

    /// The key's text, to put in a request header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

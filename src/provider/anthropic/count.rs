//! Counting a request's input tokens (`POST {base_url}/messages/count_tokens`):
//! the request lowered as a Messages body, less the fields only generation
//! takes, and the count read from `{"input_tokens": N}`. Pure.

use serde_json::Value;

use super::types::TokenCount;
use super::{LowerOptions, lower};
use crate::{ChatRequest, Error};

/// The body fields of a Messages request that the count endpoint refuses:
/// those that shape generation, not the input.
const GENERATION_ONLY: &[&str] = &[
    "max_tokens",
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "metadata",
    "service_tier",
];

/// Lowers `request` to the body of a token count: the Messages body
/// [`lower`] writes, without `max_tokens` and the other fields only
/// generation takes.
///
/// ```
/// use lmstack::provider::anthropic::{LowerOptions, lower_count};
/// use lmstack::{ChatRequest, Message};
/// use serde_json::json;
///
/// let request = ChatRequest::new(vec![Message::user("Hi")]).model("claude-sonnet-4-5");
/// let body = lower_count(&request, &LowerOptions::default()).unwrap();
/// assert_eq!(body, json!({"model": "claude-sonnet-4-5",
///                         "messages": [{"role": "user", "content": "Hi"}]}));
/// ```
pub fn lower_count(request: &ChatRequest, options: &LowerOptions) -> Result<Value, Error> {
    let mut body = lower(request, options)?;
    if let Value::Object(fields) = &mut body {
        for field in GENERATION_ONLY {
            fields.remove(*field);
        }
    }
    Ok(body)
}

/// The count in the count endpoint's answer (`{"input_tokens": N}`).
///
/// ```
/// assert_eq!(lmstack::provider::anthropic::lift_count(br#"{"input_tokens":14}"#).unwrap(), 14);
/// assert!(lmstack::provider::anthropic::lift_count(b"{}").is_err());
/// ```
pub fn lift_count(body: &[u8]) -> Result<u64, Error> {
    let count: TokenCount = serde_json::from_slice(body)
        .map_err(|error| Error::json("anthropic: the token count", error))?;
    Ok(count.input_tokens)
}

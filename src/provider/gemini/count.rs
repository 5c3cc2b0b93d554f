//! Counting a request's input tokens (`POST {base_url}/models/{model}:countTokens`):
//! the request lowered as a `generateContent` body, sent whole as the count's
//! `generateContentRequest` (so that the system instruction and the tools are
//! counted too), and the count read from `{"totalTokens": N}`. Pure.

use serde_json::{Value, json};

use super::types::TokenCount;
use super::{LowerOptions, lower};
use crate::{ChatRequest, Error};

/// Lowers `request` to the body of a token count: `{"generateContentRequest":
/// …}`, the `generateContent` body [`lower`] writes with the `model` it names
/// (`models/…`).
///
/// ```
/// use lmstack::provider::gemini::{LowerOptions, lower_count};
/// use lmstack::{ChatRequest, Message};
/// use serde_json::json;
///
/// let request = ChatRequest::new(vec![Message::user("Hi")]).model("gemini-2.5-flash");
/// let body = lower_count(&request, &LowerOptions::default()).unwrap();
/// assert_eq!(body, json!({"generateContentRequest": {
///     "contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
///     "model": "models/gemini-2.5-flash"}}));
/// ```
pub fn lower_count(request: &ChatRequest, options: &LowerOptions) -> Result<Value, Error> {
    let mut body = lower(request, options)?;
    let model = request.options.model.as_deref().unwrap_or_default();
    let model = match model.starts_with("models/") {
        true => model.to_owned(),
        false => format!("models/{model}"),
    };
    if let Value::Object(fields) = &mut body {
        fields.insert("model".into(), model.into());
    }
    Ok(json!({ "generateContentRequest": body }))
}

/// The count in the count endpoint's answer (`{"totalTokens": N, …}`).
///
/// ```
/// assert_eq!(lmstack::provider::gemini::lift_count(br#"{"totalTokens":31}"#).unwrap(), 31);
/// assert!(lmstack::provider::gemini::lift_count(b"[]").is_err());
/// ```
pub fn lift_count(body: &[u8]) -> Result<u64, Error> {
    let count: TokenCount = serde_json::from_slice(body)
        .map_err(|error| Error::json("gemini: the token count", error))?;
    Ok(count.total_tokens)
}

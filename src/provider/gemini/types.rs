//! The `generateContent` wire, typed: the response (`GenerateContentResponse`,
//! streamed or whole) as serde structs, read leniently as real servers write
//! it: every field optional, unknown fields ignored.
//!
//! The [`Lifter`](super::Lifter) reads it; the usage stays a JSON value, read
//! count by count (a usage of an odd shape never fails a response).
//!
//! ```
//! use lmstack::provider::gemini::types::GenerateContentResponse;
//!
//! let body = r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"Hi"}]},
//!     "finishReason":"STOP"}],"responseId":"r1","modelVersion":"gemini-2.5-flash"}"#;
//! let response: GenerateContentResponse = serde_json::from_str(body).unwrap();
//! let candidate = &response.candidates.unwrap()[0];
//! let parts = candidate.content.as_ref().and_then(|content| content.parts.as_ref());
//! assert_eq!(parts.unwrap()[0].text.as_deref(), Some("Hi"));
//! assert_eq!(candidate.finish_reason.as_deref(), Some("STOP"));
//! ```

use serde::Deserialize;
use serde_json::Value;

/// A `GenerateContentResponse`: a whole body, one streamed event, or one
/// element of the array `streamGenerateContent` answers without `alt=sse`;
/// or an error object (`{"error": {…}}`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerateContentResponse {
    /// The candidates (the lifter reads the first, `index` 0).
    #[serde(default)]
    pub candidates: Option<Vec<Candidate>>,
    /// Why the prompt was blocked, if it was.
    #[serde(default)]
    pub prompt_feedback: Option<PromptFeedback>,
    /// Token counts, cumulative over a stream (`promptTokenCount`,
    /// `candidatesTokenCount`, `thoughtsTokenCount`,
    /// `cachedContentTokenCount`), as they came.
    #[serde(default)]
    pub usage_metadata: Option<Value>,
    /// The response's id.
    #[serde(default)]
    pub response_id: Option<String>,
    /// An error, in place of a response.
    #[serde(default)]
    pub error: Option<Value>,
}

/// One candidate reply.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    /// What the model wrote (absent from a last, finishing event).
    #[serde(default)]
    pub content: Option<Content>,
    /// Why the model stopped: `STOP`, `MAX_TOKENS`, `SAFETY`, …
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// Its index (absent for the first).
    #[serde(default)]
    pub index: Option<u32>,
}

/// A candidate's content: its parts (its `role`, `model`, is not read).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct Content {
    /// The parts.
    #[serde(default)]
    pub parts: Option<Vec<Part>>,
}

/// One part of a content: text (or thought text) or a function call, maybe
/// with a thought signature. Other parts (`inlineData`, `executableCode`) read
/// as a part with none of these.
///
/// ```
/// use lmstack::provider::gemini::types::Part;
///
/// let part: Part = serde_json::from_str(
///     r#"{"functionCall":{"name":"add","args":{"a":2}},"thoughtSignature":"c2ln"}"#,
/// ).unwrap();
/// assert_eq!(part.function_call.unwrap().name.as_deref(), Some("add"));
/// assert_eq!(part.thought_signature.as_deref(), Some("c2ln"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    /// Text.
    #[serde(default)]
    pub text: Option<String>,
    /// The text is a thought summary.
    #[serde(default)]
    pub thought: Option<bool>,
    /// The opaque signature of the model's thinking, to send back on this part.
    #[serde(default)]
    pub thought_signature: Option<String>,
    /// A function call.
    #[serde(default)]
    pub function_call: Option<FunctionCall>,
}

/// A function call, whole; or, with Vertex's streamed arguments, its start
/// (`name`, `willContinue`), a piece (`partialArgs`), or its end (empty).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionCall {
    /// The function's name.
    #[serde(default)]
    pub name: Option<String>,
    /// The call's id (Gemini 3).
    #[serde(default)]
    pub id: Option<String>,
    /// The arguments, an object.
    #[serde(default)]
    pub args: Option<Value>,
    /// More of this call follows.
    #[serde(default)]
    pub will_continue: Option<bool>,
    /// Pieces of the arguments.
    #[serde(default)]
    pub partial_args: Option<Vec<PartialArg>>,
}

/// A piece of a streamed call's arguments: the value at `jsonPath` (`$.a.b[0]`),
/// one of `stringValue` (continued while `willContinue`), `numberValue`,
/// `boolValue`, or none (`nullValue`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PartialArg {
    /// Where the value goes (`$` when absent).
    #[serde(default)]
    pub json_path: Option<String>,
    /// Text, appended to what the path holds.
    #[serde(default)]
    pub string_value: Option<String>,
    /// A number.
    #[serde(default)]
    pub number_value: Option<Value>,
    /// A boolean.
    #[serde(default)]
    pub bool_value: Option<bool>,
}

/// `promptFeedback`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptFeedback {
    /// Why the prompt was blocked (`SAFETY`, `OTHER`, …).
    #[serde(default)]
    pub block_reason: Option<String>,
}

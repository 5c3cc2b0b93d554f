//! The `generateContent` wire, typed: the request ([`GenerateContentRequest`])
//! and the response ([`GenerateContentResponse`], streamed or whole), as serde
//! structs. [`Content`] and [`Part`] are one type each, as in the API, written
//! by [`lower`](super::lower) and read by the [`Lifter`](super::Lifter).
//!
//! Read leniently, as real servers and clients write them: every field
//! optional, and the request's objects and parts keep the fields they do not
//! name in a flattened `extra` map, so nothing is lost by reading them. The
//! response's usage stays a JSON value, read count by count (a usage of an odd
//! shape never fails a response).
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

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A `generateContent` request body (`POST …/models/{model}:generateContent`).
/// Fields not named here (`safetySettings`, `cachedContent`, `labels`, …) are
/// kept verbatim in `extra`.
///
/// ```
/// use lmstack::provider::gemini::types::{Content, GenerateContentRequest, Part};
///
/// let request = GenerateContentRequest {
///     contents: vec![Content::new("user", vec![Part::text("Hi")])],
///     ..GenerateContentRequest::default()
/// };
/// assert_eq!(
///     serde_json::to_string(&request).unwrap(),
///     r#"{"contents":[{"role":"user","parts":[{"text":"Hi"}]}]}"#
/// );
/// let read: GenerateContentRequest = serde_json::from_str(
///     r#"{"contents":[],"safetySettings":[],"generationConfig":{"topK":3}}"#,
/// ).unwrap();
/// assert_eq!(read.extra["safetySettings"], serde_json::json!([]));
/// assert_eq!(read.generation_config.unwrap().extra["topK"], 3);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerateContentRequest {
    /// The system instruction: text parts, no role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_instruction: Option<Content>,
    /// The conversation, of roles `user` and `model` (not written when empty:
    /// the API refuses a request without one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contents: Vec<Content>,
    /// The tools the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool>,
    /// How the model may call them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_config: Option<ToolConfig>,
    /// Sampling and output settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_config: Option<GenerationConfig>,
    /// Every other field, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A tool: its function declarations (and, in `extra`, anything else a tool
/// holds: `googleSearch`, `codeExecution`, …).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// The functions declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_declarations: Option<Vec<FunctionDeclaration>>,
    /// Every other field, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A function the model may call.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionDeclaration {
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its parameters, a JSON Schema taken as it is (unlike `parameters`,
    /// an OpenAPI subset, which stays in `extra` when a client sends it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters_json_schema: Option<Value>,
    /// Every other field, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `toolConfig`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolConfig {
    /// How functions may be called.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_calling_config: Option<FunctionCallingConfig>,
    /// Every other field, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `functionCallingConfig`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionCallingConfig {
    /// `AUTO`, `ANY`, `NONE` (or `VALIDATED`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Under `ANY`, the functions the model may call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_function_names: Option<Vec<String>>,
    /// Every other field, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `generationConfig`: the settings the canonical options carry, and the
/// rest (`stopSequences`, `thinkingConfig`, `topK`, …) in `extra`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerationConfig {
    /// The sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// The most tokens to generate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// Every other field, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The answer of `models/{model}:countTokens`.
///
/// ```
/// use lmstack::provider::gemini::types::TokenCount;
/// let count: TokenCount = serde_json::from_str(r#"{"totalTokens":31,"promptTokensDetails":[]}"#).unwrap();
/// assert_eq!(count.total_tokens, 31);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenCount {
    /// The tokens the request's input holds.
    pub total_tokens: u64,
}

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
    /// The sources of a grounded reply, unchecked (see
    /// [`grounding`](super::grounding)).
    #[serde(default)]
    pub grounding_metadata: Option<Value>,
}

/// A content, of a request or a response: who speaks (`user`, `model`; none
/// in a system instruction, and not read from a response) and its parts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Content {
    /// `user` or `model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<Vec<Part>>,
    /// Every other field, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Content {
    /// A content of `role` holding `parts`.
    pub fn new(role: impl Into<String>, parts: Vec<Part>) -> Self {
        Content {
            role: Some(role.into()),
            parts: Some(parts),
            extra: Map::new(),
        }
    }
}

/// One part of a content, of a request or a response: text (or thought
/// text), a file inline or by URI, a function call or a function's response,
/// maybe with a thought signature. Any other field (`executableCode`,
/// `videoMetadata`, …) is kept verbatim in `extra`.
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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    /// Text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The text is a thought summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought: Option<bool>,
    /// A file's bytes, inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline_data: Option<Blob>,
    /// A file by URI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_data: Option<FileData>,
    /// A function call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_call: Option<FunctionCall>,
    /// A function's response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_response: Option<FunctionResponse>,
    /// The opaque signature of the model's thinking, to send back on this part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<String>,
    /// Every other field, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Part {
            text: Some(text.into()),
            ..Part::default()
        }
    }
}

/// A file's bytes (`inlineData`), base64.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Blob {
    /// The media type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The bytes, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Arc<str>>,
    /// Every other field (`displayName`), verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A file by URI (`fileData`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileData {
    /// The media type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The URI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_uri: Option<String>,
    /// Every other field (`displayName`), verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A function call, whole; or, with Vertex's streamed arguments, its start
/// (`name`, `willContinue`), a piece (`partialArgs`), or its end (empty).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionCall {
    /// The function's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The arguments, an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    /// The call's id (Gemini 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// More of this call follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub will_continue: Option<bool>,
    /// Pieces of the arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_args: Option<Vec<PartialArg>>,
}

/// A function's response, sent back for a call: its name, the call's id
/// (Gemini 3), files (`parts`, Gemini 3) and the response, an object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionResponse {
    /// The function's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The call's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Files the function returned (`inlineData` parts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<Vec<Part>>,
    /// The response: `{"result": …}` or `{"error": …}` as lowering writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Value>,
    /// Every other field, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A piece of a streamed call's arguments: the value at `jsonPath` (`$.a.b[0]`),
/// one of `stringValue` (continued while `willContinue`), `numberValue`,
/// `boolValue`, or none (`nullValue`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PartialArg {
    /// Where the value goes (`$` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_path: Option<String>,
    /// Text, appended to what the path holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string_value: Option<String>,
    /// A number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number_value: Option<Value>,
    /// A boolean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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

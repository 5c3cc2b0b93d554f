//! Tool calls and tool results.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::content::ContentBlock;
use super::metadata::Metadata;

/// A call of a tool by the model.
///
/// ```json
/// {"id":"call_1","name":"get_weather","arguments":{"city":"Paris"}}
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id; a tool result names it in `call_id`.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, a JSON value (normally an object).
    pub arguments: Value,
    /// The provider already executed this call (a server-side tool such as a web
    /// search): function layers pass it through untouched.
    #[serde(default, skip_serializing_if = "is_false")]
    pub provider_executed: bool,
    /// Set when the call could not be read or checked (unknown tool, malformed or
    /// schema-violating arguments): the function layer answers it with an error
    /// result instead of running it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid: Option<InvalidCall>,
    /// Free metadata, such as a provider's signature for this call.
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
}

impl ToolCall {
    /// A call with an id, a tool name and arguments.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
            provider_executed: false,
            invalid: None,
            metadata: Metadata::default(),
        }
    }
}

/// Why a [`ToolCall`] is not valid, with the raw text it came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InvalidCall {
    /// The kind of fault.
    pub kind: InvalidCallKind,
    /// A human-readable explanation, suitable to show to the model.
    pub message: String,
    /// The raw text of the call or of its arguments, when there was any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

/// The kinds of [`InvalidCall`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InvalidCallKind {
    /// The tool name is not among the request's tools.
    UnknownTool,
    /// The arguments are not valid JSON (or not decodable in the dialect).
    MalformedArguments,
    /// The arguments do not satisfy the tool's JSON Schema.
    SchemaViolation,
    /// The call was cut off before it was complete.
    Truncated,
    /// The request's `tool_choice` did not allow the call (see
    /// [`ToolChoice::allows`](crate::ToolChoice::allows)).
    NotAllowed,
}

/// The result of a tool call; its content may be multimodal.
///
/// ```json
/// {"call_id":"call_1","name":"get_weather","content":[{"type":"text","text":"18°C"}],"is_error":false}
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The id of the call this answers.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// The result: text, images, documents.
    pub content: Vec<ContentBlock>,
    /// The tool failed; `content` says how.
    #[serde(default)]
    pub is_error: bool,
    /// Free metadata.
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
}

impl ToolResult {
    /// A successful result with the given content.
    pub fn new(
        call_id: impl Into<String>,
        name: impl Into<String>,
        content: Vec<ContentBlock>,
    ) -> Self {
        ToolResult {
            call_id: call_id.into(),
            name: name.into(),
            content,
            is_error: false,
            metadata: Metadata::default(),
        }
    }

    /// A successful text result.
    pub fn text(
        call_id: impl Into<String>,
        name: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        Self::new(call_id, name, vec![ContentBlock::text(text)])
    }

    /// An error result whose text explains the failure.
    pub fn error(
        call_id: impl Into<String>,
        name: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        ToolResult {
            is_error: true,
            ..Self::text(call_id, name, message)
        }
    }

    /// The text blocks of the result, joined by line breaks (blocks that media
    /// stood between stay apart: `"Here it is:"`, image, `"The logo."` reads
    /// `"Here it is:\nThe logo."`).
    pub fn text_content(&self) -> String {
        let texts: Vec<&str> = self
            .content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect();
        texts.join("\n")
    }
}

impl std::fmt::Display for InvalidCallKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            InvalidCallKind::UnknownTool => "unknown_tool",
            InvalidCallKind::MalformedArguments => "malformed_arguments",
            InvalidCallKind::SchemaViolation => "schema_violation",
            InvalidCallKind::Truncated => "truncated",
            InvalidCallKind::NotAllowed => "not_allowed",
        })
    }
}

fn is_false(value: &bool) -> bool {
    !*value
}

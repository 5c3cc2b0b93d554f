//! The Messages wire, typed: the request, the response, the stream events, the
//! usage and the error body, as serde structs.
//!
//! Written once for both directions: [`lower`](super::lower) builds a
//! [`Request`] and the server's [`decode_request`](super::decode_request) reads
//! one; the server's [`ReplyEncoder`](super::ReplyEncoder) writes [`StreamEvent`]s and
//! [`Response`]s, and the client's [`Lifter`](super::Lifter) reads them. What
//! the API sends is read leniently (unknown events and deltas are `Other`,
//! usage counts optional); what a client sends is read strictly. Every object keeps the fields it does not name in a
//! flattened `extra` map, so nothing a client or the API sends is lost by
//! reading it; a content block of a type not listed here is kept whole as
//! [`Block::Other`].
//!
//! Content blocks are read by their `type` with an error that names the field
//! at fault inside the block (`source.type: unknown variant …`), which serde's
//! internally tagged enums cannot do.
//!
//! ```
//! use lmstack::provider::anthropic::types::{Block, Content, Request, Role};
//!
//! let request: Request = serde_json::from_str(
//!     r#"{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[
//!         {"role":"user","content":"Hi"},
//!         {"role":"assistant","content":[{"type":"text","text":"Hello","cache_control":{"type":"ephemeral"}}]}]}"#,
//! ).unwrap();
//! assert_eq!(request.max_tokens, 64);
//! assert_eq!(request.messages[0].content, Content::Text("Hi".into()));
//! let Content::Blocks(blocks) = &request.messages[1].content else { panic!() };
//! let Block::Text(text) = &blocks[0] else { panic!() };
//! assert!(text.extra.contains_key("cache_control"));
//! assert_eq!(request.messages[1].role, Role::Assistant);
//! ```

use std::sync::Arc;

use serde::de::{self, DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::provider::body::token_count;
use crate::provider::text_or_list;

/// A Messages request body (`POST /v1/messages`).
///
/// ```
/// use lmstack::provider::anthropic::types::{Content, InputMessage, Request, Role};
/// let request = Request {
///     model: Some("claude-sonnet-4-5".into()),
///     max_tokens: 256,
///     messages: vec![InputMessage {
///         role: Role::User,
///         content: Content::Text("Hi".into()),
///         extra: Default::default(),
///     }],
///     ..Request::default()
/// };
/// assert_eq!(
///     serde_json::to_string(&request).unwrap(),
///     r#"{"model":"claude-sonnet-4-5","max_tokens":256,"messages":[{"role":"user","content":"Hi"}]}"#
/// );
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// The model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The most tokens to generate (required by the API).
    pub max_tokens: u32,
    /// The system prompt: a string, or text blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<Content<Block>>,
    /// The conversation.
    pub messages: Vec<InputMessage>,
    /// The tools the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool>,
    /// Whether and which tool the model must call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Top-k sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    /// Texts that stop generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequences: Option<Vec<String>>,
    /// Stream the reply as server-sent events.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stream: bool,
    /// Request metadata (`user_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<RequestMetadata>,
    /// Extended thinking (`{"type":"enabled","budget_tokens":N}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<ThinkingConfig>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A request's `metadata`.
///
/// ```
/// use lmstack::provider::anthropic::types::RequestMetadata;
/// let metadata: RequestMetadata = serde_json::from_str(r#"{"user_id":"u1"}"#).unwrap();
/// assert_eq!(metadata.user_id.as_deref(), Some("u1"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestMetadata {
    /// An opaque id of the end user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A request's `thinking` configuration.
///
/// ```
/// use lmstack::provider::anthropic::types::ThinkingConfig;
/// let thinking: ThinkingConfig =
///     serde_json::from_str(r#"{"type":"enabled","budget_tokens":1024}"#).unwrap();
/// assert_eq!((thinking.kind.as_str(), thinking.budget_tokens), ("enabled", Some(1024)));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThinkingConfig {
    /// `enabled` or `disabled` (others kept as they came).
    #[serde(rename = "type")]
    pub kind: String,
    /// The tokens thinking may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_tokens: Option<u32>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Who speaks a request message. `system` is an instruction in the middle of
/// the conversation, as Claude Code sends it; the prompt's start stays in the
/// request's `system` field.
///
/// ```
/// use lmstack::provider::anthropic::types::Role;
/// assert_eq!(serde_json::to_string(&Role::Assistant).unwrap(), r#""assistant""#);
/// assert_eq!(serde_json::from_str::<Role>(r#""system""#).unwrap(), Role::System);
/// assert!(serde_json::from_str::<Role>(r#""tool""#).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The user (tool results included).
    User,
    /// The model.
    Assistant,
    /// Instructions given mid-conversation (text blocks only).
    System,
}

/// One message of a request.
///
/// ```
/// use lmstack::provider::anthropic::types::{Content, InputMessage, Role};
/// let message: InputMessage = serde_json::from_str(r#"{"role":"user","content":"Hi"}"#).unwrap();
/// assert_eq!((message.role, message.content), (Role::User, Content::Text("Hi".into())));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputMessage {
    /// Who speaks.
    pub role: Role,
    /// A string, or content blocks.
    pub content: Content<Block>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Content given as a plain string or as blocks; the API reads a string as one
/// text block.
///
/// ```
/// use lmstack::provider::anthropic::types::{Block, Content};
/// let text: Content<Block> = serde_json::from_str(r#""Hi""#).unwrap();
/// assert_eq!(text, Content::Text("Hi".into()));
/// let blocks: Content<Block> = serde_json::from_str(r#"[{"type":"text","text":"Hi"}]"#).unwrap();
/// assert!(matches!(blocks, Content::Blocks(ref b) if b.len() == 1));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Content<B> {
    /// A plain string.
    Text(String),
    /// Content blocks.
    Blocks(Vec<B>),
}

impl<'de, B: Deserialize<'de>> Deserialize<'de> for Content<B> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let expecting = "a string or an array of content blocks";
        text_or_list::deserialize(deserializer, expecting, Self::Text, Self::Blocks)
    }
}

/// A content block, of a request message or of a response.
///
/// Blocks of other types (`server_tool_use`, `web_search_tool_result`,
/// `search_result`, types the API adds later) are kept whole in
/// [`Block::Other`], their `type` included.
///
/// ```
/// use lmstack::provider::anthropic::types::Block;
/// let search = r#"{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]}"#;
/// let block: Block = serde_json::from_str(search).unwrap();
/// assert!(matches!(&block, Block::Other(fields) if fields["type"] == "web_search_tool_result"));
/// assert_eq!(serde_json::to_string(&block).unwrap(), search);
/// let error = serde_json::from_str::<Block>(r#"{"type":"image","source":{"type":"url"}}"#)
///     .unwrap_err();
/// assert!(error.to_string().contains("source: missing field `url`"), "{error}");
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    /// Text.
    Text(TextBlock),
    /// An image.
    Image(MediaBlock),
    /// A document (a PDF, plain text).
    Document(MediaBlock),
    /// A call of a tool the client runs.
    ToolUse(ToolUseBlock),
    /// The result of a call, sent by the client.
    ToolResult(ToolResultBlock),
    /// The model's thinking, with its signature.
    Thinking(ThinkingBlock),
    /// Thinking the API encrypted: only its opaque data.
    RedactedThinking(RedactedThinkingBlock),
    /// Any other block, whole.
    #[serde(untagged)]
    Other(Map<String, Value>),
}

impl Block {
    /// The block's `type`.
    ///
    /// ```
    /// use lmstack::provider::anthropic::types::{Block, TextBlock};
    /// assert_eq!(Block::Text(TextBlock::new("Hi")).kind(), "text");
    /// let other: Block = serde_json::from_str(r#"{"type":"search_result","source":"s"}"#).unwrap();
    /// assert_eq!(other.kind(), "search_result");
    /// ```
    pub fn kind(&self) -> &str {
        match self {
            Block::Text(_) => "text",
            Block::Image(_) => "image",
            Block::Document(_) => "document",
            Block::ToolUse(_) => "tool_use",
            Block::ToolResult(_) => "tool_result",
            Block::Thinking(_) => "thinking",
            Block::RedactedThinking(_) => "redacted_thinking",
            Block::Other(fields) => fields.get("type").and_then(Value::as_str).unwrap_or(""),
        }
    }
}

impl<'de> Deserialize<'de> for Block {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut fields = Map::<String, Value>::deserialize(deserializer)?;
        let kind = match fields.get("type") {
            Some(Value::String(kind)) => kind.clone(),
            Some(other) => {
                return Err(de::Error::custom(format_args!(
                    "{NESTED}.type: expected a string, found {other}"
                )));
            }
            None => return Err(de::Error::missing_field("type")),
        };
        // Kept in place for `Other`, so a block goes back with its fields in order.
        if KNOWN.contains(&kind.as_str()) {
            fields.shift_remove("type");
        }
        Ok(match kind.as_str() {
            "text" => Block::Text(variant(fields)?),
            "image" => Block::Image(variant(fields)?),
            "document" => Block::Document(variant(fields)?),
            "tool_use" => Block::ToolUse(variant(fields)?),
            "tool_result" => Block::ToolResult(variant(fields)?),
            "thinking" => Block::Thinking(variant(fields)?),
            "redacted_thinking" => Block::RedactedThinking(variant(fields)?),
            _ => Block::Other(fields),
        })
    }
}

/// The block types [`Block`] reads into a variant of their own.
const KNOWN: [&str; 7] = [
    "text",
    "image",
    "document",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
];

/// Marks an error message that begins with a path inside a block, so that
/// [`describe`] joins it to the path of the block.
const NESTED: char = '\u{1}';

/// A block's fields (its `type` taken off) read as the variant's struct; an
/// error names the field at fault.
fn variant<T: DeserializeOwned, E: de::Error>(fields: Map<String, Value>) -> Result<T, E> {
    serde_path_to_error::deserialize(Value::Object(fields)).map_err(|error| {
        let path = error.path().to_string();
        let error = error.into_inner();
        let message = error.to_string();
        match message.strip_prefix(NESTED) {
            // An error deeper down: its path is relative to the field at fault.
            Some(rest) if path != "." => E::custom(format_args!("{NESTED}.{path}{rest}")),
            Some(rest) => E::custom(format_args!("{NESTED}{rest}")),
            None if path == "." => E::custom(format_args!("{NESTED}: {message}")),
            None => E::custom(format_args!("{NESTED}.{path}: {message}")),
        }
    })
}

/// A serde error at `path`, as one line naming the field at fault:
/// `messages[1].content[0].source.type: unknown variant …`.
pub(crate) fn describe(path: &serde_path_to_error::Path, message: &str) -> String {
    match message.strip_prefix(NESTED) {
        Some(rest) => format!("{path}{rest}"),
        None if path.to_string() == "." => message.to_owned(),
        None => format!("{path}: {message}"),
    }
}

/// A serde error message for a reader that tracks no path (the lifter): the
/// block at fault is named `content block` (`content block.source: missing
/// field `url``).
pub(crate) fn in_block(message: &str) -> String {
    message.replace(NESTED, "content block")
}

/// A text block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TextBlock {
    /// The text.
    pub text: String,
    /// Every other field (`cache_control`, `citations`), as it came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl TextBlock {
    /// A text block with no other field.
    ///
    /// ```
    /// use lmstack::provider::anthropic::types::{Block, TextBlock};
    /// let block = Block::Text(TextBlock::new("Hi"));
    /// assert_eq!(serde_json::to_string(&block).unwrap(), r#"{"type":"text","text":"Hi"}"#);
    /// ```
    pub fn new(text: impl Into<String>) -> Self {
        TextBlock {
            text: text.into(),
            extra: Map::new(),
        }
    }
}

/// An image or a document.
///
/// ```
/// use lmstack::provider::anthropic::types::{Block, Source};
/// let block: Block = serde_json::from_str(
///     r#"{"type":"document","title":"Q3","source":{"type":"url","url":"https://x/q3.pdf"}}"#,
/// ).unwrap();
/// let Block::Document(document) = block else { panic!() };
/// assert_eq!(document.title.as_deref(), Some("Q3"));
/// assert_eq!(document.source, Source::Url { url: "https://x/q3.pdf".into() });
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MediaBlock {
    /// Where the bytes are.
    pub source: Source,
    /// A document's title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Every other field (`cache_control`, `citations`, `context`), as it came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Where an image's or a document's bytes are.
///
/// ```
/// use lmstack::provider::anthropic::types::Source;
/// let source: Source =
///     serde_json::from_str(r#"{"type":"base64","media_type":"image/png","data":"iVBO"}"#).unwrap();
/// assert!(matches!(source, Source::Base64 { ref media_type, .. } if media_type == "image/png"));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Source {
    /// Inline bytes, in base64.
    Base64 {
        /// The media type (`image/png`, `application/pdf`).
        media_type: String,
        /// The bytes, in base64.
        data: Arc<str>,
    },
    /// A URL the API fetches.
    Url {
        /// The URL.
        url: String,
    },
    /// Plain text (a document).
    Text {
        /// The media type (`text/plain`).
        media_type: String,
        /// The text.
        data: String,
    },
}

/// A tool call (`tool_use`).
///
/// ```
/// use lmstack::provider::anthropic::types::Block;
/// let block: Block = serde_json::from_str(
///     r#"{"type":"tool_use","id":"toolu_1","name":"add","input":{"a":1},"caller":{"type":"direct"}}"#,
/// ).unwrap();
/// let Block::ToolUse(call) = block else { panic!() };
/// assert_eq!((call.id.as_str(), call.input["a"].as_i64()), ("toolu_1", Some(1)));
/// assert!(call.extra.contains_key("caller"));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolUseBlock {
    /// The call's id (`toolu_…`).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments (an object).
    pub input: Value,
    /// Every other field (`caller`, `cache_control`), as it came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A tool's result (`tool_result`).
///
/// ```
/// use lmstack::provider::anthropic::types::{Block, Content};
/// let block: Block = serde_json::from_str(
///     r#"{"type":"tool_result","tool_use_id":"toolu_1","content":"boom","is_error":true}"#,
/// ).unwrap();
/// let Block::ToolResult(result) = block else { panic!() };
/// assert_eq!(result.content, Some(Content::Text("boom".into())));
/// assert!(result.is_error);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResultBlock {
    /// The call it answers.
    pub tool_use_id: String,
    /// A string, or text, image and document blocks; absent is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content<Block>>,
    /// The tool failed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// Every other field (`cache_control`), as it came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The model's thinking.
///
/// ```
/// use lmstack::provider::anthropic::types::Block;
/// let block: Block =
///     serde_json::from_str(r#"{"type":"thinking","thinking":"Hmm","signature":"SIG"}"#).unwrap();
/// assert!(matches!(block, Block::Thinking(ref t) if t.signature == "SIG"));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThinkingBlock {
    /// The thinking text.
    pub thinking: String,
    /// Its signature, which the API checks when it comes back.
    #[serde(default)]
    pub signature: String,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Encrypted thinking.
///
/// ```
/// use lmstack::provider::anthropic::types::Block;
/// let block: Block = serde_json::from_str(r#"{"type":"redacted_thinking","data":"Zz"}"#).unwrap();
/// assert!(matches!(block, Block::RedactedThinking(ref r) if r.data == "Zz"));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RedactedThinkingBlock {
    /// The opaque data.
    pub data: String,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A tool the model may call. Server tools (`{"type":"web_search_20250305",
/// "name":"web_search"}`) have a `type` and no `input_schema`.
///
/// ```
/// use lmstack::provider::anthropic::types::Tool;
/// let tool: Tool = serde_json::from_str(
///     r#"{"name":"add","description":"Adds","input_schema":{"type":"object"}}"#,
/// ).unwrap();
/// assert_eq!((tool.kind, tool.name.as_str()), (None, "add"));
/// let search: Tool = serde_json::from_str(r#"{"type":"web_search_20250305","name":"web_search"}"#).unwrap();
/// assert_eq!(search.input_schema, None);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// The tool's type: absent or `custom` for a client tool.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The tool's name.
    pub name: String,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of its input (a client tool's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// Every other field (`cache_control`), as it came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Whether and which tool the model must call.
///
/// ```
/// use lmstack::provider::anthropic::types::ToolChoice;
/// let choice: ToolChoice = serde_json::from_str(r#"{"type":"tool","name":"add"}"#).unwrap();
/// assert_eq!(choice, ToolChoice::Tool { name: "add".into(), disable_parallel_tool_use: None });
/// assert_eq!(serde_json::to_string(&ToolChoice::None).unwrap(), r#"{"type":"none"}"#);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    Auto {
        /// At most one call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        disable_parallel_tool_use: Option<bool>,
    },
    /// The model must call some tool.
    Any {
        /// At most one call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        disable_parallel_tool_use: Option<bool>,
    },
    /// The model must call this tool.
    Tool {
        /// The tool.
        name: String,
        /// At most one call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        disable_parallel_tool_use: Option<bool>,
    },
    /// The model must not call tools.
    None,
}

/// A whole (non-streaming) response: `{"type":"message",…}`.
///
/// ```
/// use lmstack::provider::anthropic::types::{Block, Response};
/// let response: Response = serde_json::from_str(r#"{"id":"msg_1","type":"message","role":"assistant",
///     "model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn",
///     "stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}"#).unwrap();
/// assert!(matches!(&response.content[0], Block::Text(text) if text.text == "Hi"));
/// assert_eq!(response.stop_reason.as_deref(), Some("end_turn"));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// The message id (`msg_…`).
    #[serde(default)]
    pub id: String,
    /// Always `message`.
    #[serde(rename = "type", default = "message_type")]
    pub kind: String,
    /// Always `assistant`.
    #[serde(default = "assistant")]
    pub role: Role,
    /// The model that answered.
    #[serde(default)]
    pub model: String,
    /// The content blocks.
    #[serde(default)]
    pub content: Vec<Block>,
    /// Why the model stopped (`null` in `message_start`).
    #[serde(default)]
    pub stop_reason: Option<String>,
    /// The stop sequence met, if one was.
    #[serde(default)]
    pub stop_sequence: Option<String>,
    /// Token usage; `None` when the message has none (a reader tells absent
    /// usage from zero counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Every other field (`container`, `context_management`), as it came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn message_type() -> String {
    "message".into()
}

fn assistant() -> Role {
    Role::Assistant
}

impl Response {
    /// An empty message with this id and model, as `message_start` carries it.
    ///
    /// ```
    /// use lmstack::provider::anthropic::types::Response;
    /// let start = Response::new("msg_1", "claude-sonnet-4-5");
    /// assert_eq!(
    ///     serde_json::to_value(&start).unwrap(),
    ///     serde_json::json!({"id": "msg_1", "type": "message", "role": "assistant",
    ///         "model": "claude-sonnet-4-5", "content": [], "stop_reason": null,
    ///         "stop_sequence": null, "usage": {"input_tokens": 0, "output_tokens": 0}})
    /// );
    /// ```
    pub fn new(id: impl Into<String>, model: impl Into<String>) -> Self {
        Response {
            id: id.into(),
            kind: message_type(),
            role: Role::Assistant,
            model: model.into(),
            content: Vec::new(),
            stop_reason: None,
            stop_sequence: None,
            usage: Some(Usage::new(0, 0)),
            extra: Map::new(),
        }
    }
}

/// The answer of `POST /v1/messages/count_tokens`.
///
/// ```
/// use lmstack::provider::anthropic::types::TokenCount;
/// let count: TokenCount = serde_json::from_str(r#"{"input_tokens":14}"#).unwrap();
/// assert_eq!(count.input_tokens, 14);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenCount {
    /// The tokens the request's input holds.
    pub input_tokens: u64,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Token usage. `input_tokens` counts only the input read neither from nor
/// into the prompt cache.
///
/// Every count is optional, an absent one `None` (`message_delta` carries only
/// the counts that changed), and read leniently as servers write them: a
/// whole float is its integer, and what is not a count (`null`, a negative
/// number, a string) is absent. Absent counts are not written.
///
/// ```
/// use lmstack::provider::anthropic::types::Usage;
/// let usage: Usage = serde_json::from_str(
///     r#"{"output_tokens":9.0,"cache_read_input_tokens":100,"service_tier":"standard"}"#,
/// ).unwrap();
/// assert_eq!(usage.input_tokens, None);
/// assert_eq!((usage.output_tokens, usage.cache_read_input_tokens), (Some(9), Some(100)));
/// assert_eq!(usage.extra["service_tier"], "standard");
/// assert_eq!(
///     serde_json::to_string(&Usage::new(3, 1)).unwrap(),
///     r#"{"input_tokens":3,"output_tokens":1}"#
/// );
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Uncached input tokens.
    #[serde(
        default,
        deserialize_with = "count",
        skip_serializing_if = "Option::is_none"
    )]
    pub input_tokens: Option<u64>,
    /// Output tokens.
    #[serde(
        default,
        deserialize_with = "count",
        skip_serializing_if = "Option::is_none"
    )]
    pub output_tokens: Option<u64>,
    /// Input tokens written to the cache.
    #[serde(
        default,
        deserialize_with = "count",
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_creation_input_tokens: Option<u64>,
    /// Input tokens read from the cache.
    #[serde(
        default,
        deserialize_with = "count",
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_read_input_tokens: Option<u64>,
    /// Every other field (`service_tier`, `server_tool_use`), as it came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Usage {
    /// Usage with these two counts and no other field.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Usage {
            input_tokens: Some(input_tokens),
            output_tokens: Some(output_tokens),
            ..Usage::default()
        }
    }
}

/// A token count, read leniently (see [`Usage`]).
fn count<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    let value = Value::deserialize(deserializer)?;
    Ok(token_count(&value, ""))
}

/// One event of a streamed response (`event: NAME` + `data: JSON`).
///
/// Read leniently, as real servers write it: an event of a type not listed
/// here is [`StreamEvent::Other`], a missing `index` is 0.
///
/// ```
/// use lmstack::provider::anthropic::types::{Delta, StreamEvent};
/// let event: StreamEvent = serde_json::from_str(
///     r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi"}}"#,
/// ).unwrap();
/// assert_eq!(event.name(), "content_block_delta");
/// assert!(matches!(event, StreamEvent::ContentBlockDelta { index: 1, delta: Delta::TextDelta { .. } }));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    /// The message begins: its id, model and first usage.
    MessageStart {
        /// The message, empty.
        message: Response,
    },
    /// A content block begins.
    ContentBlockStart {
        /// Its place in the message's content.
        #[serde(default)]
        index: u32,
        /// The block, empty (or whole, for blocks without deltas).
        content_block: Block,
    },
    /// A piece of the open block.
    ContentBlockDelta {
        /// The block's index.
        #[serde(default)]
        index: u32,
        /// The piece.
        delta: Delta,
    },
    /// The open block ends.
    ContentBlockStop {
        /// The block's index.
        #[serde(default)]
        index: u32,
    },
    /// The message's stop reason and cumulative usage.
    MessageDelta {
        /// The stop reason.
        #[serde(default)]
        delta: MessageDelta,
        /// Cumulative usage: the counts it holds replace the ones before.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        /// Every other field (`context_management`), as it came.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    /// The message ends.
    MessageStop,
    /// Keep-alive.
    Ping,
    /// An error inside the stream.
    Error {
        /// What went wrong.
        error: ErrorObject,
    },
    /// An event of another type (read only; written as `{"type":"other"}`).
    #[serde(other)]
    Other,
}

impl StreamEvent {
    /// The SSE event name, the same as its `type`.
    ///
    /// ```
    /// use lmstack::provider::anthropic::types::StreamEvent;
    /// assert_eq!(StreamEvent::MessageStop.name(), "message_stop");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            StreamEvent::MessageStart { .. } => "message_start",
            StreamEvent::ContentBlockStart { .. } => "content_block_start",
            StreamEvent::ContentBlockDelta { .. } => "content_block_delta",
            StreamEvent::ContentBlockStop { .. } => "content_block_stop",
            StreamEvent::MessageDelta { .. } => "message_delta",
            StreamEvent::MessageStop => "message_stop",
            StreamEvent::Ping => "ping",
            StreamEvent::Error { .. } => "error",
            StreamEvent::Other => "other",
        }
    }
}

/// A piece of a content block. Read leniently: a delta of a type not listed
/// here is [`Delta::Other`], a missing text is empty.
///
/// ```
/// use lmstack::provider::anthropic::types::Delta;
/// let delta = Delta::InputJsonDelta { partial_json: "{\"a\":".into() };
/// assert_eq!(
///     serde_json::to_string(&delta).unwrap(),
///     r#"{"type":"input_json_delta","partial_json":"{\"a\":"}"#
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Delta {
    /// Text.
    TextDelta {
        /// The text.
        #[serde(default)]
        text: String,
    },
    /// A fragment of a tool call's input, as JSON text.
    InputJsonDelta {
        /// The fragment.
        #[serde(default)]
        partial_json: String,
    },
    /// Thinking text.
    ThinkingDelta {
        /// The text.
        #[serde(default)]
        thinking: String,
    },
    /// The thinking block's signature.
    SignatureDelta {
        /// The signature.
        #[serde(default)]
        signature: String,
    },
    /// A citation of the text block.
    CitationsDelta {
        /// The citation.
        #[serde(default)]
        citation: Value,
    },
    /// A delta of another type (read only; written as `{"type":"other"}`).
    #[serde(other)]
    Other,
}

/// The body of `message_delta`.
///
/// ```
/// use lmstack::provider::anthropic::types::MessageDelta;
/// let delta: MessageDelta = serde_json::from_str(r#"{"stop_reason":"tool_use","stop_sequence":null}"#).unwrap();
/// assert_eq!(delta.stop_reason.as_deref(), Some("tool_use"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageDelta {
    /// Why the model stopped.
    #[serde(default)]
    pub stop_reason: Option<String>,
    /// The stop sequence met, if one was.
    #[serde(default)]
    pub stop_sequence: Option<String>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An error body: `{"type":"error","error":{"type","message"}}`.
///
/// ```
/// use lmstack::provider::anthropic::types::ErrorBody;
/// let body: ErrorBody = serde_json::from_str(
///     r#"{"type":"error","error":{"type":"rate_limit_error","message":"Slow down"},"request_id":"req_1"}"#,
/// ).unwrap();
/// assert_eq!(body.error.kind, "rate_limit_error");
/// assert_eq!(body.extra["request_id"], "req_1");
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Always `error`.
    #[serde(rename = "type")]
    pub kind: String,
    /// What went wrong.
    pub error: ErrorObject,
    /// Every other field (`request_id`), as it came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// What went wrong: an error's type and message.
///
/// ```
/// use lmstack::provider::anthropic::types::ErrorObject;
/// let error: ErrorObject = serde_json::from_str(r#"{"type":"overloaded_error","message":"Overloaded"}"#).unwrap();
/// assert_eq!(error.kind, "overloaded_error");
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// `invalid_request_error`, `authentication_error`, `permission_error`,
    /// `not_found_error`, `request_too_large`, `rate_limit_error`, `api_error`,
    /// `overloaded_error`, `timeout_error`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The message.
    pub message: String,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

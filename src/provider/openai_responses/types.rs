//! The Responses wire, typed: the request body ([`ResponseRequest`]), its
//! items ([`Item`], the same objects as a response's `output`), the response
//! ([`Response`]) and the stream events ([`StreamEvent`]).
//!
//! Written once for both directions: the lowering builds a [`ResponseRequest`]
//! and a server reads one; a client reads [`Response`]s and [`StreamEvent`]s
//! and a server writes them. Lenient where real servers are: items, content
//! parts and tools of a type not known here are kept whole (`Other`), unknown
//! fields of known ones in `extra`, unknown events read as
//! [`StreamEvent::Other`], counts optional.
//!
//! ```
//! use lmstack::provider::openai_responses::types::{Item, MessageContent, ResponseRequest};
//!
//! let body = r#"{"model":"gpt-5","input":[{"role":"developer","content":"Be brief."},
//!     {"type":"web_search_call","id":"ws_1","status":"completed"}],"store":false}"#;
//! let request: ResponseRequest = serde_json::from_str(body).unwrap();
//! let items = request.input.items();
//! let Item::Message(message) = &items[0] else { panic!() };
//! assert_eq!(message.content, MessageContent::Text("Be brief.".into()));
//! assert!(matches!(&items[1], Item::Other(fields) if fields["id"] == "ws_1"));
//! assert_eq!(request.store, Some(false));
//! ```

use serde::de::{self, DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::provider::body::token_count;
use crate::provider::text_or_list;

pub use crate::provider::openai_shared::{
    CompletionTokensDetails, FunctionDefinition, PromptTokensDetails,
};

/// A Responses request body (`POST /responses`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResponseRequest {
    /// The model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Instructions, before the input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// The conversation: a string (one user message) or items.
    #[serde(default)]
    pub input: Input,
    /// The tools the model may call: functions, and built-in or custom tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    /// Whether and which tool the model must call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// The output token limit (reasoning included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// Whether the model may call several tools at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// Streaming mode (SSE events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// Whether the server keeps the response (`true` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<bool>,
    /// Extra output asked for (`reasoning.encrypted_content`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include: Option<Vec<String>>,
    /// Reasoning options (`effort`, `summary`), as they came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Value>,
    /// Text output options: `format` (structured output), `verbosity`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<TextConfig>,
    /// The response this one continues (the server's stored conversation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_response_id: Option<String>,
    /// Every other field, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `input`: a string (one user message) or a list of items.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Input {
    /// One user message's text.
    Text(String),
    /// Items, in order.
    Items(Vec<Item>),
}

impl Default for Input {
    fn default() -> Self {
        Input::Items(Vec::new())
    }
}

impl<'de> Deserialize<'de> for Input {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let expecting = "a string or an array of input items";
        text_or_list::deserialize(deserializer, expecting, Self::Text, Self::Items)
    }
}

impl Input {
    /// The items: a string is one user message.
    pub fn items(self) -> Vec<Item> {
        match self {
            Input::Text(text) => vec![Item::Message(MessageItem::new(
                MessageRole::User,
                MessageContent::Text(text),
            ))],
            Input::Items(items) => items,
        }
    }
}

/// `text`: the output's format and verbosity.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TextConfig {
    /// `{"type":"text"}`, `{"type":"json_object"}` or
    /// `{"type":"json_schema","name","schema","strict"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<Value>,
    /// Every other field (`verbosity`), verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A tool: a function, or any other (`web_search`, `custom`, …) kept whole.
///
/// ```
/// use lmstack::provider::openai_responses::types::Tool;
///
/// let tool: Tool = serde_json::from_str(r#"{"type":"function","name":"add","parameters":{}}"#).unwrap();
/// assert!(matches!(&tool, Tool::Function(function) if function.name == "add"));
/// let search = r#"{"type":"web_search"}"#;
/// let tool: Tool = serde_json::from_str(search).unwrap();
/// assert_eq!(serde_json::to_string(&tool).unwrap(), search);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Tool {
    /// A function the client runs.
    /// Flat: `{"type":"function","name","description","parameters","strict"}`.
    Function(FunctionDefinition),
    /// A built-in tool (`web_search`, `file_search`…) or a custom
    /// (free-form) one, whole.
    #[serde(untagged)]
    Other(Map<String, Value>),
}

impl<'de> Deserialize<'de> for Tool {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (kind, fields) = tagged(deserializer, &["function"])?;
        Ok(match kind.as_deref() {
            Some("function") => Tool::Function(variant(fields)?),
            _ => Tool::Other(fields),
        })
    }
}

/// `tool_choice`: a mode (`auto`, `none`, `required`), one function
/// (`{"type":"function","name"}`), or another choice kept whole.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolChoice {
    /// `auto`, `none` or `required`.
    Mode(String),
    /// A named tool: `{"type":"function","name":…}` (or `custom`).
    Named {
        /// `function`.
        #[serde(rename = "type")]
        kind: String,
        /// The tool's name.
        name: String,
    },
    /// Any other choice (`allowed_tools`, a built-in tool), whole.
    Other(Map<String, Value>),
}

/// An item of the input, or of a response's output: they are the same objects.
///
/// Read by `type`; a message may come without one (the short form
/// `{"role","content"}`). Items of other types — built-in tools' calls
/// (`web_search_call`), custom tool calls and their outputs, `item_reference`
/// — are kept whole, in [`Other`](Item::Other).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Item {
    /// A message: the user's, the system's, the developer's or the assistant's.
    Message(MessageItem),
    /// A call of a function the client runs.
    FunctionCall(FunctionCallItem),
    /// The output of such a call, sent by the client.
    FunctionCallOutput(FunctionCallOutputItem),
    /// The model's reasoning: a summary, and its encrypted content.
    Reasoning(ReasoningItem),
    /// An item of another type, whole.
    #[serde(untagged)]
    Other(Map<String, Value>),
}

impl<'de> Deserialize<'de> for Item {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let known = [
            "message",
            "function_call",
            "function_call_output",
            "reasoning",
        ];
        let (kind, fields) = tagged(deserializer, &known)?;
        Ok(match kind.as_deref() {
            Some("message") => Item::Message(variant(fields)?),
            None if fields.contains_key("role") => Item::Message(variant(fields)?),
            Some("function_call") => Item::FunctionCall(variant(fields)?),
            Some("function_call_output") => Item::FunctionCallOutput(variant(fields)?),
            Some("reasoning") => Item::Reasoning(variant(fields)?),
            _ => Item::Other(fields),
        })
    }
}

/// Who speaks a [`MessageItem`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageRole {
    /// The user.
    User,
    /// Instructions.
    System,
    /// Instructions, as OpenAI's newer models name them.
    Developer,
    /// The model.
    Assistant,
}

/// A `message` item.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MessageItem {
    /// Its id (`msg_…`), on the model's messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The speaker.
    pub role: MessageRole,
    /// Text, or content parts.
    pub content: MessageContent,
    /// `in_progress`, `completed` or `incomplete`, on the model's messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Every other field (`phase`), verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl MessageItem {
    /// A message from `role` with `content`, and no other field.
    pub fn new(role: MessageRole, content: MessageContent) -> Self {
        MessageItem {
            id: None,
            role,
            content,
            status: None,
            extra: Map::new(),
        }
    }
}

/// A message's `content`: a string, or content parts.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// Plain text.
    Text(String),
    /// Content parts.
    Parts(Vec<ContentPart>),
}

impl<'de> Deserialize<'de> for MessageContent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let expecting = "a string or an array of content parts";
        text_or_list::deserialize(deserializer, expecting, Self::Text, Self::Parts)
    }
}

/// One content part: of a message, or of a function call's output.
///
/// ```
/// use lmstack::provider::openai_responses::types::ContentPart;
///
/// let part: ContentPart = serde_json::from_str(
///     r#"{"type":"output_text","text":"Hi","annotations":[],"logprobs":[]}"#).unwrap();
/// assert!(matches!(&part, ContentPart::OutputText(text) if text.text == "Hi"));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    /// Input text.
    InputText(TextPart),
    /// An image, by URL, `data:` URI or file id.
    InputImage(InputImage),
    /// A file (a PDF, say), inline, by URL or by file id.
    InputFile(InputFile),
    /// The model's text, with its annotations.
    OutputText(OutputText),
    /// The model's refusal.
    Refusal(Refusal),
    /// A part of another type (`input_audio`), whole.
    #[serde(untagged)]
    Other(Map<String, Value>),
}

impl<'de> Deserialize<'de> for ContentPart {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let known = [
            "input_text",
            "input_image",
            "input_file",
            "output_text",
            "refusal",
        ];
        let (kind, fields) = tagged(deserializer, &known)?;
        Ok(match kind.as_deref() {
            Some("input_text") => ContentPart::InputText(variant(fields)?),
            Some("input_image") => ContentPart::InputImage(variant(fields)?),
            Some("input_file") => ContentPart::InputFile(variant(fields)?),
            Some("output_text") => ContentPart::OutputText(variant(fields)?),
            Some("refusal") => ContentPart::Refusal(variant(fields)?),
            _ => ContentPart::Other(fields),
        })
    }
}

/// A part that is text: `input_text`, and a reasoning item's `summary_text`
/// or `reasoning_text`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TextPart {
    /// The text.
    #[serde(default)]
    pub text: String,
    /// Every other field, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `input_image`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InputImage {
    /// A URL or a `data:` URI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_url: Option<String>,
    /// The id of an uploaded file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_id: Option<String>,
    /// `low`, `high`, `auto`, `original`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Every other field, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `input_file`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InputFile {
    /// The file inline, as a `data:` URI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_data: Option<String>,
    /// The file by URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_url: Option<String>,
    /// The id of an uploaded file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_id: Option<String>,
    /// The file's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// Every other field, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `output_text`: the model's text.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OutputText {
    /// The text.
    #[serde(default)]
    pub text: String,
    /// Its annotations (`url_citation`, `file_citation`…), unchecked.
    #[serde(default)]
    pub annotations: Vec<Value>,
    /// Every other field (`logprobs`), verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `refusal`: the model's refusal.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Refusal {
    /// Why it refused.
    #[serde(default)]
    pub refusal: String,
    /// Every other field, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A `function_call` item.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FunctionCallItem {
    /// The item's id (`fc_…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The call's id, which its output names.
    #[serde(default)]
    pub call_id: String,
    /// The function's name.
    #[serde(default)]
    pub name: String,
    /// The arguments' JSON text (empty when an item starts streaming).
    #[serde(default)]
    pub arguments: String,
    /// `in_progress`, `completed` or `incomplete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Every other field (`namespace`, `caller`), verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A `function_call_output` item.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionCallOutputItem {
    /// The item's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The call it answers.
    pub call_id: String,
    /// A string, or parts (`input_text`, `input_image`, `input_file`).
    pub output: MessageContent,
    /// `in_progress`, `completed` or `incomplete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Every other field, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A `reasoning` item.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReasoningItem {
    /// The item's id (`rs_…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The summary's parts (`summary_text`).
    #[serde(default)]
    pub summary: Vec<SummaryPart>,
    /// The reasoning text itself (`reasoning_text` parts), where a server
    /// shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<SummaryPart>>,
    /// The reasoning, encrypted: what carries it to the next turn when the
    /// server keeps nothing (`store: false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_content: Option<String>,
    /// `in_progress`, `completed` or `incomplete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Every other field, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A part of a reasoning item's `summary` (`summary_text`) or `content`
/// (`reasoning_text`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SummaryPart {
    /// `summary_text` or `reasoning_text`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The text.
    #[serde(default)]
    pub text: String,
}

/// A response: what a non-streaming request answers, and what the stream's
/// `response.*` lifecycle events carry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// Its id (`resp_…`).
    #[serde(default)]
    pub id: String,
    /// `completed`, `incomplete`, `failed`, `in_progress`, `queued`, `cancelled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The model's output items.
    #[serde(default)]
    pub output: Vec<Item>,
    /// Token usage (absent until it completes), read leniently.
    #[serde(
        default,
        deserialize_with = "lenient_usage",
        skip_serializing_if = "Option::is_none"
    )]
    pub usage: Option<ResponseUsage>,
    /// Why an `incomplete` response stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete_details: Option<IncompleteDetails>,
    /// What failed, for a `failed` response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    /// Every other field (`model`, `created_at`, the request's options), verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `incomplete_details`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IncompleteDetails {
    /// `max_output_tokens` or `content_filter`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Token usage: `input_tokens` counts the cached ones, `output_tokens` the
/// reasoning ones.
///
/// ```
/// use lmstack::provider::openai_responses::types::ResponseUsage;
/// use serde_json::json;
///
/// let usage = ResponseUsage::read_lenient(&json!({"input_tokens": 9, "output_tokens": "x",
///     "input_tokens_details": {"cached_tokens": 4}})).unwrap();
/// assert_eq!((usage.input_tokens, usage.output_tokens), (9, 0));
/// assert_eq!(usage.input_tokens_details.unwrap().cached_tokens, Some(4));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResponseUsage {
    /// Input tokens.
    pub input_tokens: u64,
    /// Input tokens read from and written to the cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens_details: Option<PromptTokensDetails>,
    /// Output tokens.
    pub output_tokens: u64,
    /// Output tokens spent reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_details: Option<CompletionTokensDetails>,
    /// Their sum.
    pub total_tokens: u64,
}

impl ResponseUsage {
    /// Reads a usage leniently, as a client reads a response's: `None` when
    /// `usage` is not an object; a count that is not a non-negative number
    /// counts as absent (0 for the three counts, no details for the others).
    pub fn read_lenient(usage: &Value) -> Option<Self> {
        usage.as_object()?;
        let count = |path: &str| token_count(usage, path);
        Some(ResponseUsage {
            input_tokens: count("/input_tokens").unwrap_or_default(),
            input_tokens_details: PromptTokensDetails::read_lenient(usage, "/input_tokens_details"),
            output_tokens: count("/output_tokens").unwrap_or_default(),
            output_tokens_details: count("/output_tokens_details/reasoning_tokens")
                .map(|reasoning_tokens| CompletionTokensDetails { reasoning_tokens }),
            total_tokens: count("/total_tokens").unwrap_or_default(),
        })
    }
}

fn lenient_usage<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<ResponseUsage>, D::Error> {
    let value = Option::<Value>::deserialize(deserializer)?;
    Ok(value.as_ref().and_then(ResponseUsage::read_lenient))
}

/// One event of a streamed response, by its `type` (the SSE event's name).
///
/// ```
/// use lmstack::provider::openai_responses::types::StreamEvent;
///
/// let event: StreamEvent = serde_json::from_str(r#"{"type":"response.output_text.delta",
///     "item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi","sequence_number":4}"#).unwrap();
/// assert!(matches!(&event, StreamEvent::OutputTextDelta(delta) if delta.delta == "Hi"));
/// let other: StreamEvent = serde_json::from_str(r#"{"type":"response.web_search_call.searching"}"#).unwrap();
/// assert_eq!(other, StreamEvent::Other);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum StreamEvent {
    /// The response was created.
    #[serde(rename = "response.created")]
    Created(ResponseEvent),
    /// It waits in a queue (background mode).
    #[serde(rename = "response.queued")]
    Queued(ResponseEvent),
    /// It is being generated.
    #[serde(rename = "response.in_progress")]
    InProgress(ResponseEvent),
    /// It completed: its output and usage.
    #[serde(rename = "response.completed")]
    Completed(ResponseEvent),
    /// It stopped before completing (`incomplete_details.reason`).
    #[serde(rename = "response.incomplete")]
    Incomplete(ResponseEvent),
    /// It failed (`error`).
    #[serde(rename = "response.failed")]
    Failed(ResponseEvent),
    /// An output item begins.
    #[serde(rename = "response.output_item.added")]
    OutputItemAdded(ItemEvent),
    /// An output item is complete.
    #[serde(rename = "response.output_item.done")]
    OutputItemDone(ItemEvent),
    /// A content part of a message begins.
    #[serde(rename = "response.content_part.added")]
    ContentPartAdded(ContentPartEvent),
    /// A content part of a message is complete.
    #[serde(rename = "response.content_part.done")]
    ContentPartDone(ContentPartEvent),
    /// A piece of a message's text.
    #[serde(rename = "response.output_text.delta")]
    OutputTextDelta(DeltaEvent),
    /// A message's text is complete.
    #[serde(rename = "response.output_text.done")]
    OutputTextDone(DoneEvent),
    /// An annotation of a message's text.
    #[serde(rename = "response.output_text.annotation.added")]
    AnnotationAdded(AnnotationEvent),
    /// A piece of a refusal.
    #[serde(rename = "response.refusal.delta")]
    RefusalDelta(DeltaEvent),
    /// A refusal is complete.
    #[serde(rename = "response.refusal.done")]
    RefusalDone(DoneEvent),
    /// A piece of a function call's arguments.
    #[serde(rename = "response.function_call_arguments.delta")]
    FunctionCallArgumentsDelta(DeltaEvent),
    /// A function call's arguments are complete.
    #[serde(rename = "response.function_call_arguments.done")]
    FunctionCallArgumentsDone(DoneEvent),
    /// A part of a reasoning summary begins.
    #[serde(rename = "response.reasoning_summary_part.added")]
    ReasoningSummaryPartAdded(SummaryPartEvent),
    /// A part of a reasoning summary is complete.
    #[serde(rename = "response.reasoning_summary_part.done")]
    ReasoningSummaryPartDone(SummaryPartEvent),
    /// A piece of a reasoning summary.
    #[serde(rename = "response.reasoning_summary_text.delta")]
    ReasoningSummaryTextDelta(DeltaEvent),
    /// A part of a reasoning summary's text is complete.
    #[serde(rename = "response.reasoning_summary_text.done")]
    ReasoningSummaryTextDone(DoneEvent),
    /// A piece of reasoning text (where a server shows it).
    #[serde(rename = "response.reasoning_text.delta")]
    ReasoningTextDelta(DeltaEvent),
    /// Reasoning text is complete.
    #[serde(rename = "response.reasoning_text.done")]
    ReasoningTextDone(DoneEvent),
    /// An error: the stream ends.
    #[serde(rename = "error")]
    Error(ErrorEvent),
    /// An event of another type (read only; written as `{"type":"Other"}`).
    #[serde(other)]
    Other,
}

/// A lifecycle event: the response as it stands.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResponseEvent {
    /// The response.
    #[serde(default)]
    pub response: Response,
    /// The event's place in the stream.
    #[serde(default)]
    pub sequence_number: u64,
}

/// `response.output_item.added` and `.done`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ItemEvent {
    /// The item's place in the output.
    #[serde(default)]
    pub output_index: u32,
    /// The item: empty when added, whole when done.
    pub item: Item,
    /// The event's place in the stream.
    #[serde(default)]
    pub sequence_number: u64,
}

/// `response.content_part.added` and `.done`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContentPartEvent {
    /// The message's item id.
    #[serde(default)]
    pub item_id: String,
    /// The message's place in the output.
    #[serde(default)]
    pub output_index: u32,
    /// The part's place in the message.
    #[serde(default)]
    pub content_index: u32,
    /// The part: empty when added, whole when done.
    pub part: ContentPart,
    /// The event's place in the stream.
    #[serde(default)]
    pub sequence_number: u64,
}

/// A piece of text: of a message, a refusal, a call's arguments, a reasoning
/// summary or reasoning text.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeltaEvent {
    /// The item's id.
    #[serde(default)]
    pub item_id: String,
    /// The item's place in the output.
    #[serde(default)]
    pub output_index: u32,
    /// The content part's place in a message (text, refusal, reasoning text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_index: Option<u32>,
    /// The summary part's place (a reasoning summary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_index: Option<u32>,
    /// The piece.
    #[serde(default)]
    pub delta: String,
    /// The log probabilities of a text piece.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<Vec<Value>>,
    /// The event's place in the stream.
    #[serde(default)]
    pub sequence_number: u64,
}

/// The end of a text: a message's (`text`), a refusal (`refusal`), a call's
/// arguments (`arguments`), a summary part or reasoning text (`text`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DoneEvent {
    /// The item's id.
    #[serde(default)]
    pub item_id: String,
    /// The item's place in the output.
    #[serde(default)]
    pub output_index: u32,
    /// The content part's place in a message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_index: Option<u32>,
    /// The summary part's place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_index: Option<u32>,
    /// The whole text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The whole refusal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// The whole arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
    /// The event's place in the stream.
    #[serde(default)]
    pub sequence_number: u64,
}

/// `response.output_text.annotation.added`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AnnotationEvent {
    /// The message's item id.
    #[serde(default)]
    pub item_id: String,
    /// The message's place in the output.
    #[serde(default)]
    pub output_index: u32,
    /// The text part's place in the message.
    #[serde(default)]
    pub content_index: u32,
    /// The annotation's place in the part's annotations.
    #[serde(default)]
    pub annotation_index: u32,
    /// The annotation.
    #[serde(default)]
    pub annotation: Value,
    /// The event's place in the stream.
    #[serde(default)]
    pub sequence_number: u64,
}

/// `response.reasoning_summary_part.added` and `.done`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SummaryPartEvent {
    /// The reasoning item's id.
    #[serde(default)]
    pub item_id: String,
    /// The item's place in the output.
    #[serde(default)]
    pub output_index: u32,
    /// The part's place in the summary.
    #[serde(default)]
    pub summary_index: u32,
    /// The part.
    #[serde(default)]
    pub part: SummaryPart,
    /// The event's place in the stream.
    #[serde(default)]
    pub sequence_number: u64,
}

/// `error`: flat (`code`, `message`, `param`), or, from some servers, with
/// the object under `error`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorEvent {
    /// A machine-readable code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// What went wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The request field at fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    /// The error object, where a server nests it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    /// The event's place in the stream.
    #[serde(default)]
    pub sequence_number: u64,
}

/// An object's `type`, if it has one, and its fields.
type Tagged = (Option<String>, Map<String, Value>);

/// An object's `type` and its fields, the `type` taken off when it is one of
/// `known` (kept in place otherwise, for an `Other` that goes back as it came).
fn tagged<'de, D: Deserializer<'de>>(deserializer: D, known: &[&str]) -> Result<Tagged, D::Error> {
    let mut fields = Map::<String, Value>::deserialize(deserializer)?;
    let kind = match fields.get("type") {
        Some(Value::String(kind)) => Some(kind.clone()),
        Some(other) => {
            return Err(de::Error::custom(format_args!(
                "type: expected a string, found {other}"
            )));
        }
        None => None,
    };
    if kind.as_deref().is_some_and(|kind| known.contains(&kind)) {
        fields.shift_remove("type");
    }
    Ok((kind, fields))
}

/// An object's fields (its `type` taken off) read as a variant's struct.
fn variant<T: DeserializeOwned, E: de::Error>(fields: Map<String, Value>) -> Result<T, E> {
    serde_json::from_value(Value::Object(fields)).map_err(E::custom)
}

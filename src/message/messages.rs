//! The kinds of message, and who speaks them.

use serde::{Deserialize, Serialize};

use super::content::{ContentBlock, Media};
use super::metadata::Metadata;
use super::tool::{ToolCall, ToolResult};

/// Who speaks a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions to the model.
    System,
    /// The user.
    User,
    /// The model.
    Assistant,
    /// A tool answering a call.
    Tool,
}

/// One message of a conversation.
///
/// ```
/// use lmstack::Message;
/// let message = Message::user("What is 2 + 2?");
/// assert_eq!(
///     serde_json::to_string(&message).unwrap(),
///     r#"{"type":"text","role":"user","text":"What is 2 + 2?"}"#
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    /// Plain text from any role.
    Text(TextMessage),
    /// Text mixed with images and documents.
    Multimodal(MultimodalMessage),
    /// The model's reasoning (thinking) text.
    Reasoning(ReasoningMessage),
    /// Tool calls made by the model.
    ToolCalls(ToolCallsMessage),
    /// Results of tool calls.
    ToolResults(ToolResultsMessage),
    /// Tool calls together with their results.
    ToolAggregate(ToolAggregateMessage),
    /// Token usage of a model reply.
    Usage(Usage),
}

/// Plain text from any role.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TextMessage {
    /// Who speaks.
    pub role: Role,
    /// The text.
    pub text: String,
    /// Free metadata.
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
}

/// Text mixed with images and documents.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MultimodalMessage {
    /// Who speaks.
    pub role: Role,
    /// The content blocks, in order.
    pub content: Vec<ContentBlock>,
    /// Free metadata.
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
}

/// The model's reasoning; always from the assistant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReasoningMessage {
    /// The reasoning text (empty when redacted).
    pub text: String,
    /// The provider's signature, to be sent back unchanged on the next request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// The provider sent the reasoning encrypted; `signature` holds the opaque data.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redacted: bool,
    /// Free metadata.
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
}

/// Tool calls made by the model in one turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCallsMessage {
    /// The calls, in the order the model made them.
    pub calls: Vec<ToolCall>,
    /// Free metadata.
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
}

/// Results of tool calls.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResultsMessage {
    /// The results, in call order.
    pub results: Vec<ToolResult>,
    /// Free metadata.
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
}

/// Tool calls together with their results, as emitted by the function layer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolAggregateMessage {
    /// The calls, in order.
    pub calls: Vec<ToolCall>,
    /// The results, in call order.
    pub results: Vec<ToolResult>,
    /// Free metadata.
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
}

/// Token usage of one model reply.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens read by the model, cached ones included.
    pub input_tokens: u64,
    /// Tokens written by the model, reasoning included.
    pub output_tokens: u64,
    /// Input tokens served from the provider's cache, when reported (counted
    /// in `input_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    /// Output tokens spent on reasoning, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Free metadata (provider-specific counters).
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
}

impl Usage {
    /// The key of [`metadata`](Usage::metadata) that holds the input tokens
    /// written to the provider's prompt cache (read and written by
    /// [`cache_write_input_tokens`](Usage::cache_write_input_tokens)). A
    /// metadata key, not a field: an `Event` stays within 64 bytes.
    pub const CACHE_WRITE_KEY: &'static str = "cache_creation_input_tokens";

    /// Input tokens written to the provider's prompt cache, when reported
    /// (counted in `input_tokens`, as the cache reads are).
    ///
    /// ```
    /// use lmstack::Usage;
    /// let mut usage = Usage { input_tokens: 120, ..Usage::default() };
    /// assert_eq!(usage.cache_write_input_tokens(), None);
    /// usage.set_cache_write_input_tokens(100);
    /// assert_eq!(usage.cache_write_input_tokens(), Some(100));
    /// assert_eq!(usage.metadata.get(Usage::CACHE_WRITE_KEY), Some(&100.into()));
    /// ```
    pub fn cache_write_input_tokens(&self) -> Option<u64> {
        self.metadata
            .get(Self::CACHE_WRITE_KEY)
            .and_then(serde_json::Value::as_u64)
    }

    /// Sets the input tokens written to the prompt cache.
    pub fn set_cache_write_input_tokens(&mut self, tokens: u64) {
        self.metadata.insert(Self::CACHE_WRITE_KEY, tokens.into());
    }

    /// Adds `other` to this usage, as the rounds of a tool loop add up: every
    /// count saturating; an optional count is reported when either side reports
    /// it; a counter in the metadata (a whole number, such as the cache
    /// writes) is summed, any other metadata field kept where set.
    ///
    /// ```
    /// use lmstack::Usage;
    ///
    /// let mut total = Usage { input_tokens: u64::MAX, output_tokens: 2, ..Usage::default() };
    /// let mut round = Usage { input_tokens: 5, output_tokens: 3, ..Usage::default() };
    /// round.cached_input_tokens = Some(4);
    /// round.set_cache_write_input_tokens(7);
    /// total.add(&round);
    /// total.add(&round);
    /// assert_eq!((total.input_tokens, total.output_tokens), (u64::MAX, 8));
    /// assert_eq!(total.cached_input_tokens, Some(8));
    /// assert_eq!(total.reasoning_tokens, None);
    /// assert_eq!(total.cache_write_input_tokens(), Some(14));
    /// ```
    pub fn add(&mut self, other: &Usage) {
        let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        };
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cached_input_tokens = add(self.cached_input_tokens, other.cached_input_tokens);
        self.reasoning_tokens = add(self.reasoning_tokens, other.reasoning_tokens);
        let counters: Vec<(String, u64)> = other
            .metadata
            .extra()
            .filter_map(|(key, value)| {
                let ours = self.metadata.get(key).and_then(serde_json::Value::as_u64);
                add(ours, value.as_u64())
                    .filter(|_| ours.is_some())
                    .map(|sum| (key.to_owned(), sum))
            })
            .collect();
        self.metadata.merge_missing(&other.metadata);
        for (key, sum) in counters {
            self.metadata.insert(key, sum.into());
        }
    }
}

impl Message {
    /// A text message with the given role.
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Message::Text(TextMessage {
            role,
            text: text.into(),
            metadata: Metadata::default(),
        })
    }

    /// A system text message.
    pub fn system(text: impl Into<String>) -> Self {
        Self::text(Role::System, text)
    }

    /// A user text message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::text(Role::User, text)
    }

    /// An assistant text message.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::text(Role::Assistant, text)
    }

    /// A multimodal message.
    ///
    /// ```
    /// use lmstack::{ContentBlock, Message, Role};
    /// let message = Message::multimodal(
    ///     Role::User,
    ///     vec![ContentBlock::text("What is this?"), ContentBlock::image_url("https://example.com/cat.png")],
    /// );
    /// assert_eq!(message.role(), Role::User);
    /// ```
    pub fn multimodal(role: Role, content: Vec<ContentBlock>) -> Self {
        Message::Multimodal(MultimodalMessage {
            role,
            content,
            metadata: Metadata::default(),
        })
    }

    /// A reasoning message without a signature.
    pub fn reasoning(text: impl Into<String>) -> Self {
        Message::Reasoning(ReasoningMessage {
            text: text.into(),
            signature: None,
            redacted: false,
            metadata: Metadata::default(),
        })
    }

    /// A tool-calls message.
    ///
    /// ```
    /// use lmstack::{Message, ToolCall};
    /// use serde_json::json;
    /// let message = Message::tool_calls(vec![ToolCall::new("call_1", "add", json!({"a": 1, "b": 2}))]);
    /// assert_eq!(message.calls().len(), 1);
    /// ```
    pub fn tool_calls(calls: Vec<ToolCall>) -> Self {
        Message::ToolCalls(ToolCallsMessage {
            calls,
            metadata: Metadata::default(),
        })
    }

    /// A tool-results message.
    pub fn tool_results(results: Vec<ToolResult>) -> Self {
        Message::ToolResults(ToolResultsMessage {
            results,
            metadata: Metadata::default(),
        })
    }

    /// A tool aggregate: calls with their results.
    pub fn tool_aggregate(calls: Vec<ToolCall>, results: Vec<ToolResult>) -> Self {
        Message::ToolAggregate(ToolAggregateMessage {
            calls,
            results,
            metadata: Metadata::default(),
        })
    }

    /// A usage message.
    pub fn usage(input_tokens: u64, output_tokens: u64) -> Self {
        Message::Usage(Usage {
            input_tokens,
            output_tokens,
            ..Usage::default()
        })
    }

    /// Replaces the message's metadata.
    ///
    /// ```
    /// use lmstack::{Message, Metadata};
    /// let message = Message::assistant("hi").with_metadata(Metadata::generation("gen-1"));
    /// assert_eq!(message.metadata().generation_id(), Some("gen-1"));
    /// ```
    pub fn with_metadata(mut self, metadata: Metadata) -> Self {
        *self.metadata_mut() = metadata;
        self
    }

    /// Who speaks the message. Reasoning, tool calls, aggregates and usage come from
    /// the assistant; tool results from the tool.
    pub fn role(&self) -> Role {
        match self {
            Message::Text(m) => m.role,
            Message::Multimodal(m) => m.role,
            Message::ToolResults(_) => Role::Tool,
            Message::Reasoning(_)
            | Message::ToolCalls(_)
            | Message::ToolAggregate(_)
            | Message::Usage(_) => Role::Assistant,
        }
    }

    /// The message's metadata.
    pub fn metadata(&self) -> &Metadata {
        match self {
            Message::Text(m) => &m.metadata,
            Message::Multimodal(m) => &m.metadata,
            Message::Reasoning(m) => &m.metadata,
            Message::ToolCalls(m) => &m.metadata,
            Message::ToolResults(m) => &m.metadata,
            Message::ToolAggregate(m) => &m.metadata,
            Message::Usage(m) => &m.metadata,
        }
    }

    /// The message's metadata, mutably.
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        match self {
            Message::Text(m) => &mut m.metadata,
            Message::Multimodal(m) => &mut m.metadata,
            Message::Reasoning(m) => &mut m.metadata,
            Message::ToolCalls(m) => &mut m.metadata,
            Message::ToolResults(m) => &mut m.metadata,
            Message::ToolAggregate(m) => &mut m.metadata,
            Message::Usage(m) => &mut m.metadata,
        }
    }

    /// The text of a text message.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Message::Text(m) => Some(&m.text),
            _ => None,
        }
    }

    /// The tool calls of a tool-calls or aggregate message (empty otherwise).
    pub fn calls(&self) -> &[ToolCall] {
        match self {
            Message::ToolCalls(m) => &m.calls,
            Message::ToolAggregate(m) => &m.calls,
            _ => &[],
        }
    }

    /// The tool results of a tool-results or aggregate message (empty otherwise).
    pub fn results(&self) -> &[ToolResult] {
        match self {
            Message::ToolResults(m) => &m.results,
            Message::ToolAggregate(m) => &m.results,
            _ => &[],
        }
    }

    /// The media of every image, document and audio block of the message (its
    /// content, or its tool results' content), in order, to change.
    pub(crate) fn media_mut(&mut self) -> impl Iterator<Item = &mut Media> {
        let (content, results) = match self {
            Message::Multimodal(m) => (Some(&mut m.content), None),
            Message::ToolResults(ToolResultsMessage { results, .. })
            | Message::ToolAggregate(ToolAggregateMessage { results, .. }) => (None, Some(results)),
            _ => (None, None),
        };
        let results = results
            .into_iter()
            .flatten()
            .flat_map(|result| &mut result.content);
        content
            .into_iter()
            .flatten()
            .chain(results)
            .filter_map(ContentBlock::as_media_mut)
    }
}

impl From<TextMessage> for Message {
    fn from(message: TextMessage) -> Self {
        Message::Text(message)
    }
}

impl From<Usage> for Message {
    fn from(usage: Usage) -> Self {
        Message::Usage(usage)
    }
}

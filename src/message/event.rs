//! Streaming events: the items of a [`Reply`](crate::Reply).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{InvalidCall, Message, Metadata, Usage};

/// One item of a reply stream.
///
/// Streaming replies carry deltas; non-streaming replies carry complete
/// [`Message`]s. Both may carry `usage` and `finish`. A [`Joiner`](super::Joiner)
/// folds any sequence of events into messages.
///
/// An event is moved several times per streamed piece (producer, queue,
/// consumer), so it is kept at 64 bytes at most: tool-call deltas, whose
/// fields are mostly absent, are boxed, and empty [`Metadata`] is one null
/// pointer.
///
/// ```json
/// {"type":"text_delta","text":"Hel"}
/// {"type":"reasoning_delta","text":"Let me think"}
/// {"type":"tool_call_delta","index":0,"id":"call_1","name":"add","arguments_delta":"{\"a\":"}
/// {"type":"message","message":{"type":"text","role":"assistant","text":"Hello"}}
/// {"type":"usage","input_tokens":12,"output_tokens":40}
/// {"type":"finish","reason":"stop"}
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A piece of assistant text.
    TextDelta(TextDelta),
    /// A piece of reasoning text, or its signature.
    ReasoningDelta(ReasoningDelta),
    /// A piece of a tool call.
    ToolCallDelta(Box<ToolCallDelta>),
    /// A complete message.
    Message {
        /// The message.
        message: Message,
    },
    /// Token usage of the reply.
    Usage(Usage),
    /// The end of a model reply, with the reason it ended.
    Finish {
        /// Why the model stopped.
        reason: FinishReason,
    },
}

impl Event {
    /// A text delta.
    pub fn text(text: impl Into<String>) -> Self {
        Event::TextDelta(TextDelta {
            text: text.into(),
            metadata: Metadata::new(),
        })
    }

    /// A reasoning delta.
    pub fn reasoning(text: impl Into<String>) -> Self {
        Event::ReasoningDelta(ReasoningDelta {
            text: text.into(),
            signature: None,
            metadata: Metadata::new(),
        })
    }

    /// The first delta of a tool call: its index, id and name.
    pub fn call_start(index: u32, id: impl Into<String>, name: impl Into<String>) -> Self {
        Event::from(ToolCallDelta {
            id: Some(id.into()),
            name: Some(name.into()),
            ..ToolCallDelta::new(index)
        })
    }

    /// A fragment of a tool call's arguments (JSON text).
    pub fn call_arguments(index: u32, arguments_delta: impl Into<String>) -> Self {
        Event::from(ToolCallDelta {
            arguments_delta: arguments_delta.into(),
            ..ToolCallDelta::new(index)
        })
    }

    /// A complete message.
    pub fn message(message: Message) -> Self {
        Event::Message { message }
    }

    /// The end of a reply.
    pub fn finish(reason: FinishReason) -> Self {
        Event::Finish { reason }
    }
}

impl From<Message> for Event {
    fn from(message: Message) -> Self {
        Event::Message { message }
    }
}

impl From<TextDelta> for Event {
    fn from(delta: TextDelta) -> Self {
        Event::TextDelta(delta)
    }
}

impl From<ReasoningDelta> for Event {
    fn from(delta: ReasoningDelta) -> Self {
        Event::ReasoningDelta(delta)
    }
}

impl From<ToolCallDelta> for Event {
    fn from(delta: ToolCallDelta) -> Self {
        Event::ToolCallDelta(Box::new(delta))
    }
}

/// A piece of assistant text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TextDelta {
    /// The text, appended to the current text message.
    pub text: String,
    /// Metadata merged into the message being built (first value wins).
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
}

/// A piece of reasoning text, or its signature.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReasoningDelta {
    /// The text, appended to the current reasoning message.
    pub text: String,
    /// A piece of the reasoning's signature. Once a reasoning message has a
    /// signature, the next delta with text starts a new reasoning message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Metadata merged into the message being built (first value wins).
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
}

/// A piece of a tool call, keyed by `index` within the current run of calls.
///
/// The first delta of a call normally carries its `id` and `name`; later ones
/// carry `arguments_delta` fragments whose concatenation is the arguments' JSON
/// text. The deltas of one call are contiguous: a delta with another `index`, or
/// with an `id` other than the current call's (some servers send every parallel
/// call with index 0), completes the current call and starts the next one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCallDelta {
    /// Which call of the current run this delta belongs to.
    pub index: u32,
    /// The call's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A fragment of the arguments' JSON text.
    #[serde(default)]
    pub arguments_delta: String,
    /// The provider executed this call itself.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub provider_executed: bool,
    /// Marks the call invalid (sent, at the latest, with the call's last delta).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid: Option<InvalidCall>,
    /// Metadata merged into the call (first value wins).
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
}

impl ToolCallDelta {
    /// An empty delta for the call at `index`.
    pub fn new(index: u32) -> Self {
        ToolCallDelta {
            index,
            id: None,
            name: None,
            arguments_delta: String::new(),
            provider_executed: false,
            invalid: None,
            metadata: Metadata::new(),
        }
    }
}

/// Why a model reply ended. Serialised as a snake_case string; reasons this crate
/// does not know are kept verbatim in [`FinishReason::Other`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum FinishReason {
    /// The model finished its answer.
    Stop,
    /// The output token limit was reached.
    Length,
    /// The model stopped to have tools called.
    ToolCalls,
    /// Output was withheld by a content filter.
    ContentFilter,
    /// The model refused to answer.
    Refusal,
    /// Any other reason, verbatim.
    Other(String),
}

impl FinishReason {
    /// The snake_case name.
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Refusal => "refusal",
            FinishReason::Other(other) => other,
        }
    }
}

impl From<String> for FinishReason {
    fn from(value: String) -> Self {
        match value.as_str() {
            "stop" => FinishReason::Stop,
            "length" => FinishReason::Length,
            "tool_calls" => FinishReason::ToolCalls,
            "content_filter" => FinishReason::ContentFilter,
            "refusal" => FinishReason::Refusal,
            _ => FinishReason::Other(value),
        }
    }
}

impl From<FinishReason> for String {
    fn from(reason: FinishReason) -> Self {
        match reason {
            FinishReason::Other(other) => other,
            known => known.as_str().to_owned(),
        }
    }
}

impl fmt::Display for FinishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every streamed piece moves an event several times: it must stay small.
    #[test]
    fn an_event_takes_at_most_64_bytes() {
        assert!(
            std::mem::size_of::<Event>() <= 64,
            "Event is {} bytes",
            std::mem::size_of::<Event>()
        );
        assert!(std::mem::size_of::<Message>() <= 64);
    }
}

//! Streaming events: the items of a [`Reply`](crate::Reply).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::messages::{Message, Usage};
use super::metadata::Metadata;
use super::tool::InvalidCall;

/// One item of a reply stream.
///
/// Streaming replies carry deltas; non-streaming replies carry complete
/// [`Message`]s where the stream had deltas. Both carry `usage` and `finish` the
/// same way, in the same places. A [`Joiner`](super::Joiner) folds any sequence of
/// events into messages, or into the events of the non-streaming form.
///
/// An event is moved several times per streamed piece (producer, queue,
/// consumer), so it is kept at 64 bytes at most: what a tool call says once is
/// boxed apart from its fragments, and empty [`Metadata`] is one null pointer.
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
    ToolCallDelta(ToolCallDelta),
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
        Event::ToolCallDelta(ToolCallDelta::start(index, id, name))
    }

    /// A fragment of a tool call's arguments (JSON text).
    pub fn call_arguments(index: u32, arguments_delta: impl Into<String>) -> Self {
        Event::ToolCallDelta(ToolCallDelta::arguments(index, arguments_delta))
    }

    /// A complete message.
    pub fn message(message: Message) -> Self {
        Event::Message { message }
    }

    /// The end of a reply.
    pub fn finish(reason: FinishReason) -> Self {
        Event::Finish { reason }
    }

    /// The event's metadata (its message's, for a `message`); a `finish`
    /// has none.
    ///
    /// ```
    /// use lmstack::{Event, FinishReason};
    /// assert!(Event::text("Hi").metadata().is_some_and(|m| m.is_empty()));
    /// assert!(Event::finish(FinishReason::Stop).metadata().is_none());
    /// ```
    pub fn metadata(&self) -> Option<&Metadata> {
        match self {
            Event::TextDelta(delta) => Some(&delta.metadata),
            Event::ReasoningDelta(delta) => Some(&delta.metadata),
            Event::ToolCallDelta(delta) => Some(&delta.metadata),
            Event::Message { message } => Some(message.metadata()),
            Event::Usage(usage) => Some(&usage.metadata),
            Event::Finish { .. } => None,
        }
    }

    /// The event's metadata, to change; a `finish` has none.
    pub fn metadata_mut(&mut self) -> Option<&mut Metadata> {
        match self {
            Event::TextDelta(delta) => Some(&mut delta.metadata),
            Event::ReasoningDelta(delta) => Some(&mut delta.metadata),
            Event::ToolCallDelta(delta) => Some(&mut delta.metadata),
            Event::Message { message } => Some(message.metadata_mut()),
            Event::Usage(usage) => Some(&mut usage.metadata),
            Event::Finish { .. } => None,
        }
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
        Event::ToolCallDelta(delta)
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
///
/// What a call says once — its id and name, whether the provider ran it,
/// whether it is invalid — lives in [`details`](Self::details), boxed: most
/// deltas are argument fragments, and they carry only their text. The JSON form
/// is flat:
///
/// ```
/// use lmstack::{Event, ToolCallDelta};
/// let start = ToolCallDelta::start(0, "call_1", "add");
/// assert_eq!((start.id(), start.name()), (Some("call_1"), Some("add")));
/// assert_eq!(
///     serde_json::to_string(&Event::from(start)).unwrap(),
///     r#"{"type":"tool_call_delta","index":0,"id":"call_1","name":"add","arguments_delta":""}"#
/// );
/// let fragment = ToolCallDelta::arguments(0, "{\"a\":");
/// assert!(fragment.details.is_none());
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "WireCallDelta", into = "WireCallDelta")]
pub struct ToolCallDelta {
    /// Which call of the current run this delta belongs to.
    pub index: u32,
    /// A fragment of the arguments' JSON text.
    pub arguments_delta: String,
    /// The call's id, name and marks, when this delta carries any.
    pub details: Option<Box<CallDetails>>,
    /// Metadata merged into the call (first value wins).
    pub metadata: Metadata,
}

/// The parts of a tool call that a [`ToolCallDelta`] carries once, rather than
/// with every fragment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallDetails {
    /// The call's id.
    pub id: Option<String>,
    /// The tool's name.
    pub name: Option<String>,
    /// The provider executed this call itself.
    pub provider_executed: bool,
    /// Marks the call invalid (sent, at the latest, with the call's last delta).
    pub invalid: Option<InvalidCall>,
}

impl ToolCallDelta {
    /// An empty delta for the call at `index`.
    pub fn new(index: u32) -> Self {
        ToolCallDelta {
            index,
            arguments_delta: String::new(),
            details: None,
            metadata: Metadata::new(),
        }
    }

    /// The first delta of a call: its index, id and name.
    pub fn start(index: u32, id: impl Into<String>, name: impl Into<String>) -> Self {
        let mut delta = Self::new(index);
        let details = delta.details_mut();
        details.id = Some(id.into());
        details.name = Some(name.into());
        delta
    }

    /// A fragment of the arguments' JSON text.
    pub fn arguments(index: u32, fragment: impl Into<String>) -> Self {
        ToolCallDelta {
            arguments_delta: fragment.into(),
            ..Self::new(index)
        }
    }

    /// The call's id, if this delta carries it.
    pub fn id(&self) -> Option<&str> {
        self.details.as_ref()?.id.as_deref()
    }

    /// The tool's name, if this delta carries it.
    pub fn name(&self) -> Option<&str> {
        self.details.as_ref()?.name.as_deref()
    }

    /// True when the provider executed the call.
    pub fn provider_executed(&self) -> bool {
        self.details
            .as_ref()
            .is_some_and(|details| details.provider_executed)
    }

    /// Why the call is invalid, if this delta says it is.
    pub fn invalid(&self) -> Option<&InvalidCall> {
        self.details.as_ref()?.invalid.as_ref()
    }

    /// The details, created empty when the delta had none.
    pub fn details_mut(&mut self) -> &mut CallDetails {
        self.details.get_or_insert_default()
    }
}

impl CallDetails {
    /// Takes in what a later delta of the same call says: each part this one
    /// lacks (first value wins), and `provider_executed` if either says so.
    pub(crate) fn absorb(&mut self, later: CallDetails) {
        if self.id.is_none() {
            self.id = later.id;
        }
        if self.name.is_none() {
            self.name = later.name;
        }
        self.provider_executed |= later.provider_executed;
        if self.invalid.is_none() {
            self.invalid = later.invalid;
        }
    }
}

/// The flat JSON form of [`ToolCallDelta`].
#[derive(Serialize, Deserialize)]
struct WireCallDelta {
    index: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default)]
    arguments_delta: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    provider_executed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    invalid: Option<InvalidCall>,
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    metadata: Metadata,
}

impl From<WireCallDelta> for ToolCallDelta {
    fn from(wire: WireCallDelta) -> Self {
        let details = CallDetails {
            id: wire.id,
            name: wire.name,
            provider_executed: wire.provider_executed,
            invalid: wire.invalid,
        };
        ToolCallDelta {
            index: wire.index,
            arguments_delta: wire.arguments_delta,
            details: (details != CallDetails::default()).then(|| Box::new(details)),
            metadata: wire.metadata,
        }
    }
}

impl From<ToolCallDelta> for WireCallDelta {
    fn from(delta: ToolCallDelta) -> Self {
        let details = delta.details.map(|details| *details).unwrap_or_default();
        WireCallDelta {
            index: delta.index,
            id: details.id,
            name: details.name,
            arguments_delta: delta.arguments_delta,
            provider_executed: details.provider_executed,
            invalid: details.invalid,
            metadata: delta.metadata,
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

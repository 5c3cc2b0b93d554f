//! The joiner: folds streaming events into complete messages.

use std::mem;

use serde_json::Value;

use super::citation::append_citations;
use super::event::{CallDetails, Event, FinishReason, ReasoningDelta, TextDelta, ToolCallDelta};
use super::messages::{Message, ReasoningMessage, Role, TextMessage, ToolCallsMessage};
use super::metadata::Metadata;
use super::tool::{InvalidCall, InvalidCallKind, ToolCall};

/// Folds events into messages. Pure: no IO, no clock, no allocation per event
/// beyond the text it keeps.
///
/// Rules:
/// - consecutive `text_delta`s form one assistant text message; likewise
///   `reasoning_delta`s form one reasoning message, until a delta with text follows
///   one that carried a signature; a text delta's metadata merges into the
///   message's (first value wins), except its [citations](super::Citation),
///   which are appended;
/// - consecutive `tool_call_delta`s form one `tool_calls` message. The deltas of one
///   call are contiguous: a delta with another `index`, or with an `id` other than
///   the current call's, completes the current call and starts the next. A call's
///   arguments' JSON text is parsed when it completes (empty text means `{}`; text
///   that is not JSON gives a call marked [`InvalidCall`] with the raw text kept),
///   and [`Joiner::completed_calls`] shows it from then on, before the run ends;
/// - any other event ends the run being built and stays in place: `message` and
///   `usage` events become messages ([`finish`](Joiner::finish)), and every event
///   is kept as it came in the events of a non-streaming reply
///   ([`finish_events`](Joiner::finish_events)); `finish` is also remembered
///   ([`Joiner::finish_reason`]);
/// - a delta with no content and no metadata changes nothing.
///
/// ```
/// use lmstack::{Event, Joiner, Message};
/// let mut joiner = Joiner::new();
/// for event in [Event::text("Hel"), Event::text("lo"), Event::call_start(0, "c1", "add"), Event::call_arguments(0, "{\"a\":1}")] {
///     joiner.push(event);
/// }
/// let messages = joiner.finish();
/// assert_eq!(messages[0], Message::assistant("Hello"));
/// assert_eq!(messages[1].calls()[0].arguments, serde_json::json!({"a": 1}));
/// ```
#[derive(Debug, Default)]
pub struct Joiner {
    /// What the runs joined so far became, with the events that ended them, in
    /// order: `message`, `usage` and `finish` events only.
    joined: Vec<Event>,
    pending: Pending,
    finish_reason: Option<FinishReason>,
}

#[derive(Debug, Default)]
enum Pending {
    #[default]
    Nothing,
    Text(TextMessage),
    Reasoning(ReasoningMessage),
    Calls {
        done: Vec<ToolCall>,
        current: PartialCall,
    },
}

#[derive(Debug)]
struct PartialCall {
    index: u32,
    details: CallDetails,
    arguments: String,
    metadata: Metadata,
}

impl Joiner {
    /// An empty joiner.
    pub fn new() -> Self {
        Self::default()
    }

    /// Joins a whole sequence of events.
    pub fn join(events: impl IntoIterator<Item = Event>) -> Vec<Message> {
        let mut joiner = Joiner::new();
        events.into_iter().for_each(|event| joiner.push(event));
        joiner.finish()
    }

    /// Joins a whole sequence of events into the events of a non-streaming reply:
    /// each run of deltas becomes one `message` event, every other event stays as
    /// it is, in its place (see [`finish_events`](Joiner::finish_events)).
    pub fn join_events(events: impl IntoIterator<Item = Event>) -> Vec<Event> {
        let mut joiner = Joiner::new();
        events.into_iter().for_each(|event| joiner.push(event));
        joiner.finish_events()
    }

    /// Folds one event in.
    pub fn push(&mut self, event: Event) {
        match event {
            Event::TextDelta(delta) => self.push_text(delta),
            Event::ReasoningDelta(delta) => self.push_reasoning(delta),
            Event::ToolCallDelta(delta) => self.push_call(delta),
            Event::Finish { reason } => {
                self.flush();
                self.finish_reason = Some(reason.clone());
                self.joined.push(Event::Finish { reason });
            }
            other @ (Event::Message { .. } | Event::Usage(_)) => {
                self.flush();
                self.joined.push(other);
            }
        }
    }

    /// The reason given by the last `finish` event, if any.
    pub fn finish_reason(&self) -> Option<&FinishReason> {
        self.finish_reason.as_ref()
    }

    /// The calls of the run being built that are complete already (all but the
    /// last one, which may still grow). A consumer can start executing them before
    /// the run ends; they stay part of the run's `tool_calls` message.
    pub fn completed_calls(&self) -> &[ToolCall] {
        match &self.pending {
            Pending::Calls { done, .. } => done,
            _ => &[],
        }
    }

    /// Says that the input broke off (an error ended it): the tool call being read,
    /// if one is, is marked [`InvalidCallKind::Truncated`] — its arguments may be
    /// incomplete — rather than taken for a complete call when the run ends. What
    /// came before the break is kept as it is.
    ///
    /// ```
    /// use lmstack::{Event, InvalidCallKind, Joiner};
    /// let mut joiner = Joiner::new();
    /// joiner.push(Event::call_start(0, "c1", "pay"));
    /// joiner.break_off();
    /// let messages = joiner.finish();
    /// assert_eq!(messages[0].calls()[0].invalid.as_ref().unwrap().kind, InvalidCallKind::Truncated);
    /// ```
    pub fn break_off(&mut self) {
        if let Pending::Calls { current, .. } = &mut self.pending {
            current.details.invalid.get_or_insert_with(|| InvalidCall {
                kind: InvalidCallKind::Truncated,
                message: "the reply broke off before the call was complete".into(),
                raw: None,
            });
        }
    }

    /// Takes the messages completed so far; the one being built stays.
    pub fn take_completed(&mut self) -> Vec<Message> {
        messages_of(mem::take(&mut self.joined))
    }

    /// Ends the input: completes the message being built and returns all messages
    /// not taken yet (a `usage` event as a usage message).
    pub fn finish(self) -> Vec<Message> {
        messages_of(self.finish_events())
    }

    /// Ends the input as the events of a non-streaming reply: the events not
    /// taken yet, each run of deltas joined into one `message` event, every other
    /// event (`message`, `usage`, `finish`) as it came, in its place. This is the
    /// one definition of the non-streaming form of a streamed reply.
    ///
    /// ```
    /// use lmstack::{Event, FinishReason, Joiner, Message};
    /// let streamed = [
    ///     Event::text("Hel"), Event::text("lo"), Event::Usage(Default::default()),
    ///     Event::finish(FinishReason::Stop),
    /// ];
    /// assert_eq!(Joiner::join_events(streamed), [
    ///     Event::message(Message::assistant("Hello")), Event::Usage(Default::default()),
    ///     Event::finish(FinishReason::Stop),
    /// ]);
    /// ```
    pub fn finish_events(mut self) -> Vec<Event> {
        self.flush();
        self.joined
    }

    fn push_text(&mut self, delta: TextDelta) {
        if delta.text.is_empty() && delta.metadata.is_empty() {
            return;
        }
        if let Pending::Text(text) = &mut self.pending {
            let mut metadata = delta.metadata;
            text.text.push_str(&delta.text);
            append_citations(&mut text.metadata, &mut metadata);
            text.metadata.merge_missing(&metadata);
            return;
        }
        self.flush();
        self.pending = Pending::Text(TextMessage {
            role: Role::Assistant,
            text: delta.text,
            metadata: delta.metadata,
        });
    }

    fn push_reasoning(&mut self, delta: ReasoningDelta) {
        if delta.text.is_empty() && delta.signature.is_none() && delta.metadata.is_empty() {
            return;
        }
        if let Pending::Reasoning(reasoning) = &mut self.pending
            && (reasoning.signature.is_none() || delta.text.is_empty())
        {
            reasoning.text.push_str(&delta.text);
            if let Some(piece) = delta.signature {
                reasoning.signature.get_or_insert_default().push_str(&piece);
            }
            reasoning.metadata.merge_missing(&delta.metadata);
            return;
        }
        self.flush();
        self.pending = Pending::Reasoning(ReasoningMessage {
            text: delta.text,
            signature: delta.signature,
            redacted: false,
            metadata: delta.metadata,
        });
    }

    fn push_call(&mut self, delta: ToolCallDelta) {
        if let Pending::Calls { done, current } = &mut self.pending {
            if current.index == delta.index && same_call(current.details.id.as_deref(), delta.id())
            {
                current.absorb(delta);
            } else {
                let next = PartialCall::start(delta);
                done.push(mem::replace(current, next).complete());
            }
            return;
        }
        self.flush();
        self.pending = Pending::Calls {
            done: Vec::new(),
            current: PartialCall::start(delta),
        };
    }

    fn flush(&mut self) {
        match mem::take(&mut self.pending) {
            Pending::Nothing => {}
            Pending::Text(text) => self.joined.push(Event::from(Message::Text(text))),
            Pending::Reasoning(reasoning) => {
                self.joined.push(Event::from(Message::Reasoning(reasoning)))
            }
            Pending::Calls { mut done, current } => {
                done.push(current.complete());
                self.joined
                    .push(Event::from(Message::ToolCalls(ToolCallsMessage {
                        calls: done,
                        metadata: Metadata::default(),
                    })));
            }
        }
    }
}

/// The messages of joined events: a `message` event's message, a `usage`
/// event's usage message; `finish` events are no messages.
fn messages_of(joined: Vec<Event>) -> Vec<Message> {
    joined
        .into_iter()
        .filter_map(|event| match event {
            Event::Message { message } => Some(message),
            Event::Usage(usage) => Some(Message::Usage(usage)),
            _ => None,
        })
        .collect()
}

/// A delta belongs to the call at its index unless both carry different ids.
fn same_call(known: Option<&str>, incoming: Option<&str>) -> bool {
    match (known, incoming) {
        (Some(known), Some(incoming)) => known == incoming,
        _ => true,
    }
}

impl PartialCall {
    fn start(delta: ToolCallDelta) -> Self {
        PartialCall {
            index: delta.index,
            details: delta.details.map(|details| *details).unwrap_or_default(),
            arguments: delta.arguments_delta,
            metadata: delta.metadata,
        }
    }

    fn absorb(&mut self, delta: ToolCallDelta) {
        if let Some(details) = delta.details {
            self.details.absorb(*details);
        }
        self.arguments.push_str(&delta.arguments_delta);
        self.metadata.merge_missing(&delta.metadata);
    }

    fn complete(self) -> ToolCall {
        let CallDetails {
            id,
            name,
            provider_executed,
            mut invalid,
        } = self.details;
        let arguments = if self.arguments.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            match serde_json::from_str(&self.arguments) {
                Ok(value) => value,
                Err(error) => {
                    let fault = invalid.get_or_insert_with(|| InvalidCall {
                        kind: InvalidCallKind::MalformedArguments,
                        message: format!("the arguments are not valid JSON: {error}"),
                        raw: None,
                    });
                    fault.raw.get_or_insert(self.arguments);
                    Value::Null
                }
            }
        };
        ToolCall {
            id: id.unwrap_or_else(|| format!("call_{}", self.index)),
            name: name.unwrap_or_default(),
            arguments,
            provider_executed,
            invalid,
            metadata: self.metadata,
        }
    }
}

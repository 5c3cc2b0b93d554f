//! `ScriptedModel`: a model service that plays scripted replies.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use futures::future::{Ready, ready};
use futures::stream::Stream;
use tower::Service;

use super::chunking::Chunking;
use super::modes::joined;
use crate::{
    ChatRequest, Error, Event, FinishReason, Message, ReasoningDelta, Reply, Role, TextDelta,
    ToolCallDelta,
};

/// One scripted turn: what the model answers to one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Turn {
    /// Assistant text. Streamed as text deltas cut by the model's [`Chunking`].
    Text(String),
    /// Complete messages (text, reasoning, tool calls, usage …). Streamed as the
    /// deltas a provider would send: text, reasoning and tool-call arguments cut by
    /// the model's [`Chunking`].
    Messages(Vec<Message>),
    /// Explicit events, streamed exactly as given; in non-streaming mode each run
    /// of deltas joined into one `message` event.
    Events(Vec<Event>),
    /// The call fails with this message.
    Fail(String),
    /// The reply streams these events, then breaks with this message (in
    /// non-streaming mode: the events joined, then the error).
    Break(Vec<Event>, String),
}

/// A `Service<ChatRequest>` that plays scripted replies turn by turn, in both
/// modes, and records every request it receives.
///
/// This is the way to unit-test your own middleware: put it under your layer, play
/// the model's side, then assert on the reply and on what reached the model. Clones
/// share the script and the recording, so a clone can go into a stack while you
/// keep one to inspect.
///
/// ```
/// use lmstack::testing::{Chunking, ScriptedModel};
/// use lmstack::{ChatRequest, Message};
/// use tower::ServiceExt;
///
/// # futures::executor::block_on(async {
/// let model = ScriptedModel::new()
///     .chunking(Chunking::Bytes(1))
///     .reply("Hello there");
/// let request = ChatRequest::new(vec![Message::user("hi")]).streaming(true);
/// let reply = model.clone().oneshot(request).await.unwrap();
/// // Streaming: eleven 1-byte deltas, which join into one message.
/// assert_eq!(reply.collect().await.unwrap(), vec![Message::assistant("Hello there")]);
/// assert_eq!(model.requests()[0].messages, vec![Message::user("hi")]);
/// # });
/// ```
#[derive(Clone, Debug)]
pub struct ScriptedModel {
    shared: Arc<Mutex<Shared>>,
    chunking: Chunking,
    yielding: bool,
}

#[derive(Debug, Default)]
struct Shared {
    turns: VecDeque<Turn>,
    played: usize,
    requests: Vec<ChatRequest>,
}

impl Default for ScriptedModel {
    fn default() -> Self {
        Self::new()
    }
}

impl ScriptedModel {
    /// A model with an empty script, 4-byte chunks, and streams that return
    /// `Pending` once before every event (as a network stream would).
    pub fn new() -> Self {
        ScriptedModel {
            shared: Arc::default(),
            chunking: Chunking::default(),
            yielding: true,
        }
    }

    /// Sets how text is cut into deltas in streaming mode.
    pub fn chunking(mut self, chunking: Chunking) -> Self {
        self.chunking = chunking;
        self
    }

    /// Whether streams return `Pending` (with an immediate wake-up) before every
    /// event; on by default.
    pub fn yielding(mut self, yielding: bool) -> Self {
        self.yielding = yielding;
        self
    }

    /// Adds a turn.
    pub fn turn(self, turn: Turn) -> Self {
        self.lock().turns.push_back(turn);
        self
    }

    /// Adds a turn that answers with assistant text.
    pub fn reply(self, text: impl Into<String>) -> Self {
        self.turn(Turn::Text(text.into()))
    }

    /// Adds a turn that answers with complete messages.
    pub fn reply_messages(self, messages: Vec<Message>) -> Self {
        self.turn(Turn::Messages(messages))
    }

    /// Adds a turn that answers with exactly these events.
    pub fn reply_events(self, events: Vec<Event>) -> Self {
        self.turn(Turn::Events(events))
    }

    /// Adds a turn whose call fails.
    pub fn fail(self, message: impl Into<String>) -> Self {
        self.turn(Turn::Fail(message.into()))
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.lock().requests.clone()
    }

    /// The number of turns not played yet.
    pub fn remaining(&self) -> usize {
        self.lock().turns.len()
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic elsewhere while holding the lock leaves the script usable.
        self.shared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The turn's reply: its events as given or streamed, and in non-streaming
    /// mode those events joined as [`Complete`](crate::service::Complete) joins
    /// them, so that both modes have the same shape by construction.
    fn play(&self, turn: Turn, stream: bool) -> Result<Reply, Error> {
        let (events, broken) = match turn {
            Turn::Fail(message) => return Err(Error::stage("scripted model", message)),
            Turn::Text(text) => (self.play_messages(vec![Message::assistant(text)]), None),
            Turn::Messages(messages) => (self.play_messages(messages), None),
            Turn::Events(events) => (events, None),
            Turn::Break(events, message) => (events, Some(message)),
        };
        let events = if stream {
            events
        } else {
            joined(events, broken.is_some())
        };
        let mut items: Vec<Result<Event, Error>> = events.into_iter().map(Ok).collect();
        items.extend(broken.map(|message| Err(Error::stage("scripted model", message))));
        if !stream {
            return Ok(Reply::from_results(items));
        }
        Ok(Reply::from_stream(ScriptStream {
            items: items.into(),
            yielding: self.yielding,
            yielded: false,
        }))
    }

    /// The messages streamed as a provider would, then a `finish`.
    fn play_messages(&self, messages: Vec<Message>) -> Vec<Event> {
        let reason = if messages.iter().any(|m| !m.calls().is_empty()) {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        };
        let mut events = stream_messages(messages, self.chunking);
        events.push(Event::finish(reason));
        events
    }
}

impl Service<ChatRequest> for ScriptedModel {
    type Response = Reply;
    type Error = Error;
    type Future = Ready<Result<Reply, Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: ChatRequest) -> Self::Future {
        let stream = request.options.stream;
        let turn = {
            let mut shared = self.lock();
            shared.requests.push(request);
            shared.played += 1;
            let played = shared.played;
            shared.turns.pop_front().ok_or_else(|| {
                Error::stage(
                    "scripted model",
                    format!(
                        "request {played} has no scripted reply (the script had {} turns)",
                        played - 1
                    ),
                )
            })
        };
        ready(turn.and_then(|turn| self.play(turn, stream)))
    }
}

/// The messages as the stream of deltas a provider would send: assistant text and
/// reasoning as deltas, tool calls as a first delta with id and name then argument
/// fragments, all cut by `chunking`. A message that deltas cannot express exactly
/// (another role, a redacted reasoning, message-level metadata on tool calls, an
/// empty text, or one that would merge with the message before it) is sent whole.
/// Joining the result gives the messages back.
///
/// ```
/// use lmstack::testing::{Chunking, stream_messages};
/// use lmstack::{Joiner, Message, ToolCall};
/// let messages = vec![
///     Message::assistant("Let me add."),
///     Message::tool_calls(vec![ToolCall::new("c1", "add", serde_json::json!({"a": 1}))]),
/// ];
/// let events = stream_messages(messages.clone(), Chunking::Bytes(1));
/// assert_eq!(Joiner::join(events), messages);
/// ```
pub fn stream_messages(messages: Vec<Message>, chunking: Chunking) -> Vec<Event> {
    let mut events = Vec::new();
    let mut previous: Option<std::mem::Discriminant<Message>> = None;
    for message in messages {
        let kind = std::mem::discriminant(&message);
        let follows_same_kind = previous == Some(kind);
        previous = Some(kind);
        match message {
            Message::Text(text)
                if text.role == Role::Assistant && !text.text.is_empty() && !follows_same_kind =>
            {
                let mut metadata = Some(text.metadata);
                events.extend(chunking.split(&text.text).into_iter().map(|piece| {
                    Event::TextDelta(TextDelta {
                        text: piece.to_owned(),
                        metadata: metadata.take().unwrap_or_default(),
                    })
                }));
            }
            Message::Reasoning(reasoning)
                if !reasoning.redacted && !reasoning.text.is_empty() && !follows_same_kind =>
            {
                let mut metadata = Some(reasoning.metadata);
                events.extend(chunking.split(&reasoning.text).into_iter().map(|piece| {
                    Event::ReasoningDelta(ReasoningDelta {
                        text: piece.to_owned(),
                        signature: None,
                        metadata: metadata.take().unwrap_or_default(),
                    })
                }));
                if let Some(signature) = reasoning.signature {
                    events.push(Event::ReasoningDelta(ReasoningDelta {
                        text: String::new(),
                        signature: Some(signature),
                        metadata: Default::default(),
                    }));
                }
            }
            Message::ToolCalls(calls) if calls.metadata.is_empty() && !follows_same_kind => {
                for (index, call) in (0u32..).zip(calls.calls) {
                    let arguments = call.arguments.to_string();
                    let mut start = ToolCallDelta::start(index, call.id, call.name);
                    let details = start.details_mut();
                    details.provider_executed = call.provider_executed;
                    details.invalid = call.invalid;
                    start.metadata = call.metadata;
                    events.push(Event::from(start));
                    events.extend(
                        chunking
                            .split(&arguments)
                            .into_iter()
                            .map(|piece| Event::call_arguments(index, piece)),
                    );
                }
            }
            Message::Usage(usage) => events.push(Event::Usage(usage)),
            other => events.push(Event::message(other)),
        }
    }
    events
}

/// Plays items, returning `Pending` (after waking the task) before each one when
/// `yielding`.
struct ScriptStream {
    items: VecDeque<Result<Event, Error>>,
    yielding: bool,
    yielded: bool,
}

impl Stream for ScriptStream {
    type Item = Result<Event, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.yielding && !this.yielded && !this.items.is_empty() {
            this.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        this.yielded = false;
        Poll::Ready(this.items.pop_front())
    }
}

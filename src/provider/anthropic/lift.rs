//! Lifting: Anthropic Messages responses → canonical events (see [`Lifter`]).

use serde::Deserialize;
use serde_json::{Map, Value};

use super::lower::{BLOCK_KEY, PROVIDER};

/// The key of [`Usage::metadata`] that holds the input tokens this request
/// wrote to Anthropic's prompt cache (`cache_creation_input_tokens`; counted in
/// `input_tokens` too). A metadata key, not a field: an `Event` stays within
/// 64 bytes.
pub const CACHE_CREATION_KEY: &str = "cache_creation_input_tokens";
use crate::Error;
use crate::message::{
    Event, FinishReason, Message, Metadata, ReasoningDelta, ReasoningMessage, Role, TextDelta,
    TextMessage, ToolCallDelta, Usage,
};
use crate::provider::body::{Lift, parse, token_count, truncated};
use crate::provider::error::ProviderError;
use crate::provider::sse::SseEvent;
use crate::service::Output;

/// Lifts Anthropic Messages responses — a streamed series of events, or a whole
/// `message` body — into canonical events.
///
/// One pure state machine serves both wire modes: a whole body's content
/// blocks go through the same code as streamed `content_block_start`s holding
/// everything, followed by their `content_block_stop`s. What it makes of the
/// wire:
///
/// - `message_start`: the message id becomes the `generation_id` of the
///   messages' metadata; its usage is the first reading;
/// - `text` blocks and `text_delta` → text; `citations_delta` is ignored (the
///   cited text is in the text already);
/// - `thinking` blocks, `thinking_delta` and `signature_delta` → reasoning with
///   its signature (each block one reasoning message);
/// - `redacted_thinking` (whole at block start) → a reasoning message marked
///   `redacted`, its opaque `data` in `signature`;
/// - `tool_use` → a tool call: `input_json_delta` fragments are its arguments'
///   JSON text (a tool without arguments sends one `""`, read as `{}`); a block
///   without deltas (a whole body) gives its `input`. Fields of the block other
///   than `type`, `id`, `name` and `input` (`caller`) are kept in the call's
///   metadata under [`BLOCK_KEY`], so lowering sends the block back as it came;
/// - server tools: `server_tool_use` and `mcp_tool_use` → a call marked
///   `provider_executed` (its block's type under [`BLOCK_KEY`]); their results
///   (`web_search_tool_result`, any other `*_tool_result` block) → an assistant
///   text message with empty text, the raw block under [`BLOCK_KEY`], sent
///   back unchanged by lowering;
/// - `message_delta`: the stop reason, and usage — cumulative, so each count it
///   holds replaces the one before;
/// - `error` events, and a body of type `error` →
///   [`Error::Provider`](crate::Error::Provider) (an `overloaded_error` is
///   retryable);
/// - `ping`, unknown events, unknown block and delta types, and deltas for a
///   block other than the one open are ignored;
/// - stop reasons: `end_turn`, `stop_sequence` → `stop`; `tool_use` →
///   `tool_calls`; `max_tokens`, `model_context_window_exceeded` → `length`;
///   `refusal` → `refusal`; others (`pause_turn`) are kept verbatim;
/// - usage: `input_tokens` is the sum of Anthropic's uncached, cache-read and
///   cache-creation input tokens; `cached_input_tokens` the cache reads; the
///   cache writes are in the usage's metadata under [`CACHE_CREATION_KEY`];
///   `reasoning_tokens`
///   `output_tokens_details.thinking_tokens` when sent;
/// - a stream that ends with neither `message_stop` nor a stop reason is
///   [`TransportErrorKind::Truncated`](crate::provider::TransportErrorKind::Truncated).
///
/// ```
/// use lmstack::provider::anthropic::Lifter;
/// use lmstack::provider::body::BodyDecoder;
/// use lmstack::service::{Machine, Output};
/// use lmstack::{Joiner, Message};
///
/// let body = concat!(
///     "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n",
///     "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
///     "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
///     "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n",
///     "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
/// );
/// let mut decoder = BodyDecoder::sse(Lifter::new());
/// let mut events = Output::new();
/// decoder.push(body.into(), &mut events).unwrap();
/// decoder.finish(&mut events).unwrap();
/// let messages = Joiner::join(events.drain());
/// assert_eq!(messages[0].as_text(), Some("Hi"));
/// assert_eq!(messages[0].metadata().generation_id(), Some("msg_1"));
/// let Message::Usage(usage) = &messages[1] else { panic!() };
/// assert_eq!((usage.input_tokens, usage.output_tokens), (3, 2));
/// ```
#[derive(Debug, Default)]
pub struct Lifter {
    generation_id: Option<String>,
    /// The content block being read: its wire index and kind.
    block: Option<(u64, Block)>,
    calls_started: u32,
    counts: Counts,
    stop_reason: Option<String>,
    done: bool,
    events: usize,
}

#[derive(Debug)]
enum Block {
    /// Text or thinking: the metadata the block's first delta carries.
    Text(Option<Metadata>),
    Thinking(Option<Metadata>),
    /// A tool call: its number, its `input` at start, and whether deltas came.
    Call {
        ordinal: u32,
        input: Option<Value>,
        streamed: bool,
    },
    /// A block this lifter does not lift.
    Ignored,
}

/// The last reading of each usage count (Anthropic's counts are cumulative).
#[derive(Debug, Default)]
struct Counts {
    seen: bool,
    input: Option<u64>,
    output: Option<u64>,
    cache_read: Option<u64>,
    cache_creation: Option<u64>,
    thinking: Option<u64>,
}

impl Counts {
    fn read(&mut self, usage: &Value) {
        if !usage.is_object() {
            return;
        }
        self.seen = true;
        let slots = [
            (&mut self.input, "/input_tokens"),
            (&mut self.output, "/output_tokens"),
            (&mut self.cache_read, "/cache_read_input_tokens"),
            (&mut self.cache_creation, "/cache_creation_input_tokens"),
            (&mut self.thinking, "/output_tokens_details/thinking_tokens"),
        ];
        for (slot, path) in slots {
            if let Some(count) = token_count(usage, path) {
                *slot = Some(count);
            }
        }
    }

    fn usage(&self, mut metadata: Metadata) -> Option<Usage> {
        if let Some(created) = self.cache_creation {
            metadata.insert(CACHE_CREATION_KEY, created.into());
        }
        self.seen.then(|| Usage {
            input_tokens: [self.input, self.cache_read, self.cache_creation]
                .into_iter()
                .flatten()
                .fold(0u64, u64::saturating_add),
            output_tokens: self.output.unwrap_or_default(),
            cached_input_tokens: self.cache_read,
            reasoning_tokens: self.thinking,
            metadata,
        })
    }
}

impl Lifter {
    /// A lifter for one response.
    pub fn new() -> Self {
        Self::default()
    }

    /// Lifts one streamed event (the JSON text of one SSE `data:` field).
    pub fn push_event(&mut self, data: &[u8], out: &mut Output) -> Result<(), Error> {
        self.events += 1;
        let what = format_args!("event {}", self.events);
        let event = parse(PROVIDER, data, what, "a JSON Messages stream event")?;
        match event {
            StreamEvent::MessageStart { message } => self.start_message(message),
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => self.start_block(index, content_block, out)?,
            StreamEvent::ContentBlockDelta { index, delta } => self.delta(index, delta, out),
            StreamEvent::ContentBlockStop { index } => self.stop_block(index, out),
            StreamEvent::MessageDelta { delta, usage } => {
                if let Some(Value::String(reason)) = delta.get("stop_reason") {
                    self.stop_reason = Some(reason.clone());
                }
                self.counts.read(&usage);
            }
            StreamEvent::MessageStop => self.done = true,
            StreamEvent::Error { error } => return Err(stream_error(&error)),
            StreamEvent::Other => {}
        }
        Ok(())
    }

    fn start_message(&mut self, message: MessageStart) {
        if self.generation_id.is_none() {
            self.generation_id = message.id.filter(|id| !id.is_empty());
        }
        self.counts.read(&message.usage);
    }

    fn metadata(&self) -> Metadata {
        self.generation_id
            .as_ref()
            .map(Metadata::generation)
            .unwrap_or_default()
    }

    fn start_block(&mut self, index: u64, block: Value, out: &mut Output) -> Result<(), Error> {
        if let Some((open, _)) = self.block.take() {
            // A block left open (no stop before the next start): close it.
            self.stop_block(open, out);
        }
        let Value::Object(mut block) = block else {
            self.block = Some((index, Block::Ignored));
            return Ok(());
        };
        let kind = match block.get("type") {
            Some(Value::String(kind)) => kind.clone(),
            _ => String::new(),
        };
        let text = |block: &Map<String, Value>, key: &str| {
            block
                .get(key)
                .and_then(Value::as_str)
                .filter(|text| !text.is_empty())
                .map(str::to_owned)
        };
        let state = match kind.as_str() {
            "text" => {
                let mut state = Block::Text(Some(self.metadata()));
                if let Some(text) = text(&block, "text") {
                    self.text(&mut state, text, out);
                }
                state
            }
            "thinking" => {
                let mut state = Block::Thinking(Some(self.metadata()));
                if let Some(text) = text(&block, "thinking") {
                    self.reasoning(&mut state, text, None, out);
                }
                if let Some(signature) = text(&block, "signature") {
                    self.reasoning(&mut state, String::new(), Some(signature), out);
                }
                state
            }
            "redacted_thinking" => {
                out.push(Event::message(Message::Reasoning(ReasoningMessage {
                    text: String::new(),
                    signature: text(&block, "data"),
                    redacted: true,
                    metadata: self.metadata(),
                })));
                Block::Ignored
            }
            "tool_use" | "server_tool_use" | "mcp_tool_use" => {
                self.start_call(&kind, &mut block, out)?
            }
            kind if kind.ends_with("_tool_result") => {
                let mut metadata = self.metadata();
                metadata.insert(BLOCK_KEY, Value::Object(block));
                out.push(Event::message(Message::Text(TextMessage {
                    role: Role::Assistant,
                    text: String::new(),
                    metadata,
                })));
                Block::Ignored
            }
            _ => Block::Ignored,
        };
        self.block = Some((index, state));
        Ok(())
    }

    fn start_call(
        &mut self,
        kind: &str,
        block: &mut Map<String, Value>,
        out: &mut Output,
    ) -> Result<Block, Error> {
        let ordinal = self.calls_started;
        self.calls_started += 1;
        let mut take = |key: &str| match block.remove(key) {
            Some(Value::String(text)) => text,
            _ => String::new(),
        };
        let id = take("id");
        let name = take("name");
        let input = block.remove("input");
        let mut delta = ToolCallDelta::start(ordinal, id, name);
        delta.details_mut().provider_executed = kind != "tool_use";
        if kind != "tool_use" || block.len() > 1 {
            delta
                .metadata
                .insert(BLOCK_KEY, Value::Object(std::mem::take(block)));
        }
        out.push(Event::from(delta));
        Ok(Block::Call {
            ordinal,
            input,
            streamed: false,
        })
    }

    fn delta(&mut self, index: u64, delta: Value, out: &mut Output) {
        let Some((open, mut state)) = self.block.take() else {
            return;
        };
        if open == index {
            let field = |key: &str| match delta.get(key) {
                Some(Value::String(text)) => Some(text.clone()),
                _ => None,
            };
            match (&mut state, delta.get("type").and_then(Value::as_str)) {
                (Block::Text(_), Some("text_delta")) => {
                    if let Some(text) = field("text").filter(|t| !t.is_empty()) {
                        self.text(&mut state, text, out);
                    }
                }
                (Block::Thinking(_), Some("thinking_delta")) => {
                    if let Some(text) = field("thinking").filter(|t| !t.is_empty()) {
                        self.reasoning(&mut state, text, None, out);
                    }
                }
                (Block::Thinking(_), Some("signature_delta")) => {
                    if let Some(signature) = field("signature").filter(|s| !s.is_empty()) {
                        self.reasoning(&mut state, String::new(), Some(signature), out);
                    }
                }
                (
                    Block::Call {
                        ordinal, streamed, ..
                    },
                    Some("input_json_delta"),
                ) => {
                    *streamed = true;
                    let fragment = field("partial_json").unwrap_or_default();
                    out.push(Event::from(ToolCallDelta::arguments(*ordinal, fragment)));
                }
                _ => {} // citations_delta, and deltas of other kinds
            }
        }
        self.block = Some((open, state));
    }

    fn text(&self, state: &mut Block, text: String, out: &mut Output) {
        if let Block::Text(metadata) = state {
            let metadata = metadata.take().unwrap_or_default();
            out.push(Event::TextDelta(TextDelta { text, metadata }));
        }
    }

    fn reasoning(
        &self,
        state: &mut Block,
        text: String,
        signature: Option<String>,
        out: &mut Output,
    ) {
        if let Block::Thinking(metadata) = state {
            let metadata = metadata.take().unwrap_or_default();
            out.push(Event::ReasoningDelta(ReasoningDelta {
                text,
                signature,
                metadata,
            }));
        }
    }

    fn stop_block(&mut self, index: u64, out: &mut Output) {
        match self.block.take() {
            Some((open, state)) if open == index => {
                if let Block::Call {
                    ordinal,
                    input: Some(input),
                    streamed: false,
                } = state
                {
                    out.push(Event::from(ToolCallDelta::arguments(
                        ordinal,
                        input.to_string(),
                    )));
                }
            }
            other => self.block = other,
        }
    }

    fn map_finish(reason: String) -> FinishReason {
        match reason.as_str() {
            "end_turn" | "stop_sequence" => FinishReason::Stop,
            "tool_use" => FinishReason::ToolCalls,
            "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
            _ => FinishReason::from(reason),
        }
    }
}

impl Lift for Lifter {
    const PROVIDER: &'static str = PROVIDER;

    fn event(&mut self, event: SseEvent, out: &mut Output) -> Result<(), Error> {
        self.push_event(event.data.as_bytes(), out)
    }

    /// Lifts a whole non-streaming body (a `message` object, or an `error`).
    fn body(&mut self, body: &[u8], out: &mut Output) -> Result<(), Error> {
        let message: Body = parse(PROVIDER, body, "the body", "a JSON Messages response")?;
        if let Some(error) = message.error {
            return Err(stream_error(&error));
        }
        self.start_message(MessageStart {
            id: message.id,
            usage: message.usage,
        });
        for (index, block) in (0u64..).zip(message.content) {
            self.start_block(index, block, out)?;
            self.stop_block(index, out);
        }
        self.stop_reason = message.stop_reason;
        self.done = true;
        Ok(())
    }

    /// Ends the response: emits the usage and the finish reason. A stream that
    /// ended with neither `message_stop` nor a stop reason is an error, and
    /// emits nothing: `message_start`'s usage alone must not pass for a first
    /// event (a retry layer replays only calls that gave none).
    fn finish(&mut self, out: &mut Output) -> Result<(), Error> {
        if self.stop_reason.is_none() && !self.done {
            return Err(truncated(
                PROVIDER,
                format!(
                    "the stream ended after {} events without `message_stop` or a stop reason",
                    self.events
                ),
            ));
        }
        if let Some(usage) = self.counts.usage(self.metadata()) {
            out.push(Event::Usage(usage));
        }
        if let Some(reason) = self.stop_reason.take() {
            out.push(Event::finish(Self::map_finish(reason)));
        }
        Ok(())
    }
}

fn stream_error(error: &Value) -> Error {
    ProviderError::in_stream(PROVIDER, error).into()
}

/// One event of a Messages stream; unknown types are [`StreamEvent::Other`].
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StreamEvent {
    MessageStart {
        message: MessageStart,
    },
    ContentBlockStart {
        #[serde(default)]
        index: u64,
        content_block: Value,
    },
    ContentBlockDelta {
        #[serde(default)]
        index: u64,
        delta: Value,
    },
    ContentBlockStop {
        #[serde(default)]
        index: u64,
    },
    MessageDelta {
        #[serde(default)]
        delta: Value,
        #[serde(default)]
        usage: Value,
    },
    MessageStop,
    Error {
        #[serde(default)]
        error: Value,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessageStart {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    usage: Value,
}

/// A whole response: a `message`, or an `error` object.
#[derive(Deserialize)]
struct Body {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    content: Vec<Value>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Value,
    #[serde(default)]
    error: Option<Value>,
}

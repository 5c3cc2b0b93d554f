//! Lifting: Anthropic Messages responses → canonical events (see [`Lifter`]).

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::citation;
use super::lower::{BLOCK_KEY, EXTRA_KEY, PROVIDER};
use super::types::{self, Delta, Response, StreamEvent};

/// The key of [`Usage::metadata`] that holds the input tokens this request
/// wrote to Anthropic's prompt cache: [`Usage::CACHE_WRITE_KEY`], which
/// [`Usage::cache_write_input_tokens`] reads.
pub const CACHE_CREATION_KEY: &str = Usage::CACHE_WRITE_KEY;

/// The metadata key of a reply's first event that holds the message's fields
/// no canonical field holds (`container`, `context_management`, a newer
/// field): `message_start.message`'s, a whole body's top-level ones. The
/// Anthropic encoder writes them in its `message_start`'s message.
pub const MESSAGE_START_KEY: &str = "anthropic_message_start";

/// The metadata key of a reply's usage that holds `message_delta`'s unknown
/// fields (`context_management`), and under `"delta"` its delta's
/// (`container`). The Anthropic encoder writes them in its `message_delta`.
pub const MESSAGE_DELTA_KEY: &str = "anthropic_message_delta";
use crate::Error;
use crate::message::{
    Citation, Event, FinishReason, Message, Metadata, ReasoningDelta, ReasoningMessage, Role,
    TextDelta, TextMessage, TextSpan, ToolCallDelta, Usage,
};
use crate::provider::body::{Lift, excerpt, malformed, token_count, truncated};
use crate::provider::call_order::CallOrder;
use crate::provider::error::ProviderError;
use crate::provider::sse::SseEvent;
use crate::provider::wire_extra;
use crate::service::Output;

/// Lifts Anthropic Messages responses — a streamed series of events, or a whole
/// `message` body — into canonical events.
///
/// It reads the typed wire of [`types`](super::types) ([`StreamEvent`],
/// [`Response`]), lenient where real servers are: unknown events, blocks and
/// deltas, missing indices and absent usage counts are read, not refused.
///
/// One pure state machine serves both wire modes: a whole body's content
/// blocks go through the same code as streamed `content_block_start`s holding
/// everything, followed by their `content_block_stop`s. What it makes of the
/// wire:
///
/// - `message_start`: the message id becomes the `generation_id` of the
///   messages' metadata; its usage is the first reading;
/// - `text` blocks and `text_delta` → text; a block's `citations` and its
///   `citations_delta`s → [`Citation`]s (see [`citation`](super::citation)),
///   sent when the block closes on an empty text delta, each spanning the
///   block's text in the message;
/// - `thinking` blocks, `thinking_delta` and `signature_delta` → reasoning with
///   its signature (each block one reasoning message);
/// - `redacted_thinking` (whole at block start) → a reasoning message marked
///   `redacted`, its opaque `data` in `signature`;
/// - `tool_use` → a tool call: `input_json_delta` fragments are its arguments'
///   JSON text (a tool without arguments sends one `""`, read as `{}`); a block
///   without deltas (a whole body) gives its `input`. Fields of the block other
///   than `type`, `id`, `name` and `input` (`caller`) are kept in the call's
///   metadata under [`BLOCK_KEY`], so lowering sends the block back as it came;
/// - a `text` block's fields other than `text` and `citations` are kept under
///   [`EXTRA_KEY`] on its first delta, for the Anthropic encoder to write back;
/// - server tools: `server_tool_use` and `mcp_tool_use` → a call marked
///   `provider_executed` (its block's type under [`BLOCK_KEY`]); their results
///   (`web_search_tool_result`, any other `*_tool_result` block) → an assistant
///   text message with empty text, the raw block under [`BLOCK_KEY`], sent
///   back unchanged by lowering;
/// - `message_delta`: the stop reason, and usage — cumulative, so each count it
///   holds replaces the one before;
/// - the message's unknown fields (`message_start.message`'s, a whole body's:
///   `container`, `context_management`) go on the reply's first event under
///   [`MESSAGE_START_KEY`] (on a call's, they travel sealed in its id through
///   a gateway, as its other metadata does); `message_delta`'s own
///   (`context_management`) and its delta's (`container`) on the usage under
///   [`MESSAGE_DELTA_KEY`] — for the Anthropic encoder to write back in place;
/// - `error` events, and a body of type `error` →
///   [`Error::Provider`](crate::Error::Provider) (an `overloaded_error` is
///   retryable);
/// - blocks are keyed by `index`: several may be open at once and their deltas
///   may interleave (a start at an index already open closes the block there
///   first). Tool calls come out whole and in start order, a call held while
///   the one before is still open (see the event model in `docs/design.md`); a
///   fragment of a call after text or thinking followed it is
///   [`TransportErrorKind::Malformed`](crate::provider::TransportErrorKind::Malformed);
/// - `ping`, unknown events, unknown block and delta types, and deltas for a
///   block not open are ignored;
/// - stop reasons: `end_turn`, `stop_sequence` → `stop`; `tool_use` →
///   `tool_calls`; `max_tokens`, `model_context_window_exceeded` → `length`;
///   `refusal` → `refusal`; others (`pause_turn`) are kept verbatim;
/// - usage: `input_tokens` is the sum of Anthropic's uncached, cache-read and
///   cache-creation input tokens; `cached_input_tokens` the cache reads;
///   [`Usage::cache_write_input_tokens`] the cache writes;
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
    /// The content blocks open, by wire index.
    blocks: BTreeMap<u32, Block>,
    /// The calls' deltas, each call's contiguous, in start order.
    order: CallOrder,
    counts: Counts,
    /// The message's unknown fields, until the first event takes them.
    start_fields: Map<String, Value>,
    /// `message_delta`'s unknown fields, its delta's under `"delta"`.
    delta_fields: Map<String, Value>,
    stop_reason: Option<String>,
    done: bool,
    events: usize,
    /// The characters of the text run being lifted (the text deltas since
    /// any other event, which the [`Joiner`](crate::Joiner) makes one
    /// message), and how many runs ended before it.
    run: usize,
    runs_ended: u32,
}

#[derive(Debug)]
enum Block {
    /// Text: the metadata its first delta carries, and its citations.
    Text(Option<Metadata>, Cited),
    /// Thinking: the metadata its first delta carries.
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

/// A text block's citations, and where its text lies: the run it began in
/// (counted by `runs_ended`), the run's length when it began and after its
/// last text.
#[derive(Debug, Default)]
struct Cited {
    citations: Vec<Citation>,
    start: Option<(u32, usize)>,
    end: usize,
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
    /// Takes a reading: each count it holds replaces the one before.
    fn read(&mut self, usage: Option<&types::Usage>) {
        let Some(usage) = usage else {
            return;
        };
        self.seen = true;
        let thinking = usage
            .extra
            .get("output_tokens_details")
            .and_then(|details| token_count(details, "/thinking_tokens"));
        let slots = [
            (&mut self.input, usage.input_tokens),
            (&mut self.output, usage.output_tokens),
            (&mut self.cache_read, usage.cache_read_input_tokens),
            (&mut self.cache_creation, usage.cache_creation_input_tokens),
            (&mut self.thinking, thinking),
        ];
        for (slot, count) in slots {
            if count.is_some() {
                *slot = count;
            }
        }
    }

    fn usage(&self, metadata: Metadata) -> Option<Usage> {
        let mut usage = self.seen.then(|| Usage {
            input_tokens: [self.input, self.cache_read, self.cache_creation]
                .into_iter()
                .flatten()
                .fold(0u64, u64::saturating_add),
            output_tokens: self.output.unwrap_or_default(),
            cached_input_tokens: self.cache_read,
            reasoning_tokens: self.thinking,
            metadata,
        });
        if let (Some(usage), Some(created)) = (&mut usage, self.cache_creation) {
            usage.set_cache_write_input_tokens(created);
        }
        usage
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
        let event = read(data, what, "a JSON Messages stream event")?;
        match event {
            StreamEvent::MessageStart { message } => {
                self.start_message(message.id, message.usage, message.extra)
            }
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => self.start_block(index, content_block, out)?,
            StreamEvent::ContentBlockDelta { index, delta } => self.delta(index, delta, out)?,
            StreamEvent::ContentBlockStop { index } => self.stop_block(index, out)?,
            StreamEvent::MessageDelta {
                delta,
                usage,
                extra,
            } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                self.counts.read(usage.as_ref());
                self.delta_fields.extend(extra);
                if !delta.extra.is_empty() {
                    let mut fields = match self.delta_fields.remove("delta") {
                        Some(Value::Object(fields)) => fields,
                        _ => Map::new(),
                    };
                    fields.extend(delta.extra);
                    self.delta_fields
                        .insert("delta".into(), Value::Object(fields));
                }
            }
            StreamEvent::MessageStop => self.done = true,
            StreamEvent::Error { error } => {
                let error = serde_json::to_value(error).unwrap_or_default();
                return Err(stream_error(&error));
            }
            StreamEvent::Ping | StreamEvent::Other => {}
        }
        Ok(())
    }

    fn start_message(
        &mut self,
        id: String,
        usage: Option<types::Usage>,
        fields: Map<String, Value>,
    ) {
        if self.generation_id.is_none() && !id.is_empty() {
            self.generation_id = Some(id);
        }
        self.counts.read(usage.as_ref());
        self.start_fields.extend(fields);
    }

    /// Puts the message's unknown fields, while no event took them, on the
    /// first of the events given from `from` on.
    fn give_start_fields(&mut self, from: usize, out: &mut Output) {
        if self.start_fields.is_empty() {
            return;
        }
        if let Some(metadata) = out.get_mut(from).and_then(Event::metadata_mut) {
            let fields = std::mem::take(&mut self.start_fields);
            wire_extra::keep(metadata, MESSAGE_START_KEY, fields);
        }
    }

    fn metadata(&self) -> Metadata {
        self.generation_id
            .as_ref()
            .map(Metadata::generation)
            .unwrap_or_default()
    }

    fn start_block(
        &mut self,
        index: u32,
        block: types::Block,
        out: &mut Output,
    ) -> Result<(), Error> {
        // A block left open at this index (no stop before the next start).
        self.stop_block(index, out)?;
        let state = match block {
            types::Block::Text(mut block) => {
                let citations = match block.extra.remove("citations") {
                    Some(Value::Array(items)) => items.iter().filter_map(citation::lift).collect(),
                    _ => Vec::new(),
                };
                let cited = Cited {
                    citations,
                    ..Cited::default()
                };
                // The block's fields past `text` and `citations`, for an
                // Anthropic client.
                let mut metadata = self.metadata();
                wire_extra::keep(&mut metadata, EXTRA_KEY, block.extra);
                let mut state = Block::Text(Some(metadata), cited);
                if !block.text.is_empty() {
                    self.text(&mut state, block.text, out);
                }
                state
            }
            types::Block::Thinking(block) => {
                let mut state = Block::Thinking(Some(self.metadata()));
                if !block.thinking.is_empty() {
                    self.reasoning(&mut state, block.thinking, None, out);
                }
                if !block.signature.is_empty() {
                    self.reasoning(&mut state, String::new(), Some(block.signature), out);
                }
                state
            }
            types::Block::RedactedThinking(block) => {
                self.end_run();
                self.order.flush(out);
                out.push(Event::message(Message::Reasoning(ReasoningMessage {
                    text: String::new(),
                    signature: Some(block.data).filter(|data| !data.is_empty()),
                    redacted: true,
                    metadata: self.metadata(),
                })));
                Block::Ignored
            }
            types::Block::ToolUse(call) => {
                // Fields past `id`, `name` and `input` (`caller`): the block
                // goes back as it came.
                let block = (!call.extra.is_empty()).then(|| {
                    let mut block = Map::with_capacity(call.extra.len() + 1);
                    block.insert("type".into(), "tool_use".into());
                    block.extend(call.extra);
                    block
                });
                self.start_call(call.id, call.name, Some(call.input), false, block, out)
            }
            types::Block::Other(mut block) => match block.get("type").and_then(Value::as_str) {
                Some("server_tool_use" | "mcp_tool_use") => {
                    let mut take = |key: &str| match block.remove(key) {
                        Some(Value::String(text)) => text,
                        _ => String::new(),
                    };
                    let (id, name) = (take("id"), take("name"));
                    let input = block.remove("input");
                    self.start_call(id, name, input, true, Some(block), out)
                }
                Some(kind) if kind.ends_with("_tool_result") => {
                    let mut metadata = self.metadata();
                    metadata.insert(BLOCK_KEY, Value::Object(block));
                    self.end_run();
                    self.order.flush(out);
                    out.push(Event::message(Message::Text(TextMessage {
                        role: Role::Assistant,
                        text: String::new(),
                        metadata,
                    })));
                    Block::Ignored
                }
                _ => Block::Ignored,
            },
            // Request-side blocks (`image`, `document`, `tool_result`).
            _ => Block::Ignored,
        };
        self.blocks.insert(index, state);
        Ok(())
    }

    /// Starts a tool call; `block` is what lowering sends back under
    /// [`BLOCK_KEY`] (the block's `type` and its other fields).
    fn start_call(
        &mut self,
        id: String,
        name: String,
        input: Option<Value>,
        provider_executed: bool,
        block: Option<Map<String, Value>>,
        out: &mut Output,
    ) -> Block {
        self.end_run();
        let ordinal = self.order.next();
        let mut delta = ToolCallDelta::start(ordinal, id, name);
        delta.details_mut().provider_executed = provider_executed;
        if let Some(block) = block {
            delta.metadata.insert(BLOCK_KEY, Value::Object(block));
        }
        self.order.start(delta, out);
        Block::Call {
            ordinal,
            input,
            streamed: false,
        }
    }

    fn delta(&mut self, index: u32, delta: Delta, out: &mut Output) -> Result<(), Error> {
        let Some(mut state) = self.blocks.remove(&index) else {
            return Ok(());
        };
        let lifted = match (&mut state, delta) {
            (Block::Text(..), Delta::TextDelta { text }) if !text.is_empty() => {
                self.text(&mut state, text, out);
                Ok(())
            }
            (Block::Text(_, cited), Delta::CitationsDelta { citation }) => {
                cited.citations.extend(citation::lift(&citation));
                Ok(())
            }
            (Block::Thinking(_), Delta::ThinkingDelta { thinking }) if !thinking.is_empty() => {
                self.reasoning(&mut state, thinking, None, out);
                Ok(())
            }
            (Block::Thinking(_), Delta::SignatureDelta { signature }) if !signature.is_empty() => {
                self.reasoning(&mut state, String::new(), Some(signature), out);
                Ok(())
            }
            (
                Block::Call {
                    ordinal, streamed, ..
                },
                Delta::InputJsonDelta { partial_json },
            ) => {
                *streamed = true;
                self.arguments(*ordinal, partial_json, out)
            }
            _ => Ok(()), // deltas of other kinds
        };
        self.blocks.insert(index, state);
        lifted
    }

    fn arguments(&mut self, ordinal: u32, text: String, out: &mut Output) -> Result<(), Error> {
        self.order
            .fragment(ToolCallDelta::arguments(ordinal, text), out)
            .map_err(|late| malformed(PROVIDER, late.to_string()))
    }

    fn text(&mut self, state: &mut Block, text: String, out: &mut Output) {
        if let Block::Text(metadata, cited) = state {
            let metadata = metadata.take().unwrap_or_default();
            let before = out.len();
            self.order.flush(out);
            if out.len() != before {
                self.end_run();
            }
            cited.start.get_or_insert((self.runs_ended, self.run));
            self.run = self.run.saturating_add(text.chars().count());
            cited.end = self.run;
            out.push(Event::TextDelta(TextDelta { text, metadata }));
        }
    }

    fn reasoning(
        &mut self,
        state: &mut Block,
        text: String,
        signature: Option<String>,
        out: &mut Output,
    ) {
        if let Block::Thinking(metadata) = state {
            self.end_run();
            let metadata = metadata.take().unwrap_or_default();
            self.order.flush(out);
            out.push(Event::ReasoningDelta(ReasoningDelta {
                text,
                signature,
                metadata,
            }));
        }
    }

    /// Closes the block open at `index`, if one is: a call's `input`, when no
    /// deltas came, is its arguments, and the call is complete.
    fn stop_block(&mut self, index: u32, out: &mut Output) -> Result<(), Error> {
        match self.blocks.remove(&index) {
            Some(Block::Call {
                ordinal,
                input,
                streamed,
            }) => {
                self.end_run();
                if let Some(input) = input.filter(|_| !streamed) {
                    self.arguments(ordinal, input.to_string(), out)?;
                }
                self.order.end(ordinal, out);
            }
            Some(Block::Text(_, cited)) => self.cite(cited, out),
            _ => {}
        }
        Ok(())
    }

    /// Ends the text run: an event other than text was sent.
    fn end_run(&mut self) {
        self.run = 0;
        self.runs_ended = self.runs_ended.wrapping_add(1);
    }

    /// Emits a closed text block's citations, each spanning the block's text
    /// (none when the run it lay in has ended since).
    fn cite(&mut self, cited: Cited, out: &mut Output) {
        if cited.citations.is_empty() {
            return;
        }
        let span = match cited.start {
            Some((run, start)) if run == self.runs_ended => Some(TextSpan {
                start,
                end: cited.end,
            }),
            Some(_) => None,
            None => Some(TextSpan {
                start: self.run,
                end: self.run,
            }),
        };
        let mut metadata = Metadata::new();
        metadata.add_citations(
            cited
                .citations
                .into_iter()
                .map(|citation| Citation { span, ..citation }),
        );
        out.push(Event::TextDelta(TextDelta {
            text: String::new(),
            metadata,
        }));
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

    fn event(&mut self, event: &SseEvent, out: &mut Output) -> Result<(), Error> {
        let from = out.len();
        let lifted = self.push_event(event.data.as_bytes(), out);
        let kept = self.order.keep_on_error(lifted, out);
        self.give_start_fields(from, out);
        kept
    }

    /// Lifts a whole non-streaming body (a `message` object, or an `error`).
    fn body(&mut self, body: &[u8], out: &mut Output) -> Result<(), Error> {
        let message: Response = read(body, format_args!("the body"), "a JSON Messages response")?;
        if let Some(error) = message.extra.get("error") {
            return Err(stream_error(error));
        }
        let from = out.len();
        self.start_message(message.id, message.usage, message.extra);
        for (index, block) in (0u32..).zip(message.content) {
            self.start_block(index, block, out)?;
            self.stop_block(index, out)?;
        }
        self.give_start_fields(from, out);
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
            self.order.flush(out);
            return Err(truncated(
                PROVIDER,
                format!(
                    "the stream ended after {} events without `message_stop` or a stop reason",
                    self.events
                ),
            ));
        }
        // Blocks left open (no stop before the end) are complete.
        let from = out.len();
        while let Some((&index, _)) = self.blocks.first_key_value() {
            self.stop_block(index, out)?;
        }
        self.order.flush(out);
        let mut metadata = self.metadata();
        if !self.delta_fields.is_empty() {
            let fields = std::mem::take(&mut self.delta_fields);
            metadata.insert(MESSAGE_DELTA_KEY, Value::Object(fields));
        }
        if let Some(usage) = self.counts.usage(metadata) {
            out.push(Event::Usage(usage));
        }
        self.give_start_fields(from, out);
        if let Some(reason) = self.stop_reason.take() {
            out.push(Event::finish(Self::map_finish(reason)));
        }
        Ok(())
    }
}

/// Reads `data` as `T` (as [`parse`](crate::provider::body::parse) does),
/// an error inside a content block named as such.
fn read<'a, T: Deserialize<'a>>(
    data: &'a [u8],
    what: fmt::Arguments,
    expected: &str,
) -> Result<T, Error> {
    serde_json::from_slice(data).map_err(|error| {
        let error = types::in_block(&error.to_string());
        malformed(
            PROVIDER,
            format!("{what} is not {expected} ({error}): {}", excerpt(data)),
        )
    })
}

fn stream_error(error: &Value) -> Error {
    ProviderError::in_stream(PROVIDER, error).into()
}

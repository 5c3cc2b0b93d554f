//! Lifting: Chat Completions responses → canonical events (see [`Lifter`]).

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::{Map, Value};

use super::annotation;
use super::lower::{EXTRA_KEY, MESSAGE_KEY, PROVIDER, REASONING_FIELD_KEY, REFUSAL_KEY};
use super::types::{CompletionUsage, ContentRead, MessageRead, ResponseRead, ToolCallRead};
use crate::Error;
use crate::message::{
    Event, FinishReason, Metadata, ReasoningDelta, TextDelta, ToolCallDelta, Usage,
};
use crate::provider::body::{Lift, malformed, parse, parse_text, truncated};
use crate::provider::call_order::CallOrder;
use crate::provider::error::ProviderError;
use crate::provider::openai_shared;
use crate::provider::sse::SseEvent;
use crate::provider::wire_extra;
use crate::service::Output;

/// The data of the event that ends a stream.
const DONE: &str = "[DONE]";

/// What a streamed chunk should be, for its error.
const CHUNK: &str = "a JSON chat completion chunk";

/// Lifts Chat Completions responses — streamed chunks, or a whole body — into
/// canonical events.
///
/// One pure state machine, [`Lifter`], serves both wire modes. A streamed
/// response is a series of `chat.completion.chunk`s whose `delta`s it lifts into
/// deltas; a non-streaming body is a `chat.completion` whose `message` has the
/// same shape as a delta holding everything, so it goes through the same code as
/// one big chunk. Joining the events of either gives the same messages.
///
/// What real servers do, and what the lifter makes of it:
///
/// - tool-call fragments keyed by `index`, the first one with `id` and
///   `function.name` (OpenAI); a whole call in one fragment (GLM, Groq); every
///   call at `index` 0 with a new `id` each (some proxies); calls without ids
///   (older Ollama); a first index of 1 (Anthropic models behind a compatible
///   endpoint). Calls are renumbered 0, 1, … in the order they start; a call
///   starts at a new `id`, a new `index`, or a second `function.name` at the same
///   index. A missing id becomes `call_<n>` (prefixed with the response id when
///   there is one), the same in both modes. A fragment goes to the last call
///   started at its `index` (without an index, to the last call started), so
///   parallel calls may interleave their fragments, as the SDKs that accumulate
///   by index allow: the events carry each call whole and in start order,
///   a call held while the one before is not yet whole JSON (see the event
///   model in `docs/design.md`). A fragment with more than whitespace for a call
///   already complete (whole JSON and another call begun, or text after it) is a
///   [`TransportErrorKind::Malformed`](crate::provider::TransportErrorKind::Malformed) error;
/// - tool calls whose `type` is not `function` (GLM's `web_search`, `mcp`) ran on
///   the server: they are passed through with `provider_executed`, named after
///   their type, with their payload object as arguments;
/// - `reasoning_content` (GLM, llama.cpp, DeepSeek) or `reasoning` (vLLM,
///   Ollama) becomes reasoning; the field's name is kept in the message's
///   metadata under [`REASONING_FIELD_KEY`] so that lowering can echo it back;
/// - `annotations` (`url_citation`s) become [`Citation`](crate::Citation)s of
///   the text, on an empty text delta after it (see
///   [`annotation`](super::annotation));
/// - `refusal` becomes assistant text marked `"refusal": true` in its metadata,
///   and turns a `stop` finish into `refusal`;
/// - usage on any chunk, on a final `choices: []` chunk, or in `x_groq.usage`;
///   the last one seen is emitted once, at the end, before `finish`. It is read
///   leniently: counts of any number type, odd fields and a usage that is not an
///   object are ignored, never failing the chunk;
/// - `finish_reason` is mapped (`tool_calls`, `function_call` → `tool_calls`;
///   `content_filter`, GLM's `sensitive` → `content_filter`; `stop` after
///   function calls → `tool_calls`, as Ollama and vLLM sometimes send `stop`);
/// - an `error` object in the body or in a chunk becomes
///   [`Error::Provider`](crate::Error::Provider);
/// - the unknown fields of a stream delta or a whole body's message (`audio`,
///   a vendor's) go with the first event it gives: under [`EXTRA_KEY`] on its
///   reasoning or text (a refusal's marked [`REFUSAL_KEY`] too), else under
///   [`MESSAGE_KEY`] on its first call fragment — so a message of calls only
///   becomes one `tool_calls` message, its fields on the first call, as the
///   OpenAI decoder keeps a request's. A delta that gives no event puts them
///   on an empty piece of the message being lifted, or holds them for the
///   message's first event (at the end, an empty text delta). A tool call's
///   unknown fields (but a server-side call's payload), of its first fragment
///   or a later one, go under [`EXTRA_KEY`] on that fragment's delta. The
///   joiner adds them up, so both modes keep them, and the OpenAI encoder
///   writes them back in place; a delta without unknown fields costs nothing
///   more. The body's and a chunk's own unknown fields are ignored; only the
///   first choice (`index` 0) is lifted;
/// - a stream that ends with neither `[DONE]` nor a finish reason is
///   [`TransportErrorKind::Truncated`](crate::provider::TransportErrorKind::Truncated).
///
/// Both are read as [`ResponseRead`](super::types::ResponseRead): the typed
/// response of [`types`](super::types), read as leniently as the list above
/// asks.
///
/// Each fragment costs the same whatever came before it: lifting is linear in
/// the response.
///
/// It is a [`Lift`]: [`BodyDecoder`](crate::provider::body::BodyDecoder) frames
/// a response body for it, and `data: [DONE]` ends a stream.
///
/// ```
/// use lmstack::provider::body::Lift;
/// use lmstack::provider::openai_chat::Lifter;
/// use lmstack::service::Output;
/// use lmstack::{Joiner, Message};
///
/// let mut lifter = Lifter::new();
/// let mut events = Output::new();
/// lifter.push_chunk(br#"{"id":"c1","choices":[{"index":0,"delta":{"content":"Hel"}}]}"#, &mut events).unwrap();
/// lifter.push_chunk(br#"{"id":"c1","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}"#, &mut events).unwrap();
/// lifter.finish(&mut events).unwrap();
/// let messages = Joiner::join(events.drain());
/// assert_eq!(messages[0].as_text(), Some("Hello"));
/// assert_eq!(messages[0].metadata().generation_id(), Some("c1"));
/// ```
#[derive(Debug, Default)]
pub struct Lifter {
    generation_id: Option<String>,
    /// What the last event emitted was, to know when a message starts.
    last: Last,
    /// The calls started, by number: what later fragments continue.
    calls: Vec<OpenCall>,
    /// The number of the last call started at each wire index: one look-up
    /// per fragment.
    by_index: HashMap<u32, u32>,
    /// The calls' deltas, each call's contiguous, in start order.
    order: CallOrder,
    /// Unknown fields of deltas that gave no event before the message's first.
    held: Map<String, Value>,
    function_calls: bool,
    refusal: bool,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    done: bool,
    chunks: usize,
}

#[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
enum Last {
    #[default]
    Nothing,
    Text,
    Refusal,
    Reasoning,
    Call,
}

#[derive(Debug)]
struct OpenCall {
    wire_id: Option<String>,
    named: bool,
}

impl Lifter {
    /// A lifter for one response.
    pub fn new() -> Self {
        Self::default()
    }

    /// Lifts one streamed chunk (the JSON text of one SSE `data:` field).
    pub fn push_chunk(&mut self, data: &[u8], out: &mut Output) -> Result<(), Error> {
        if !self.next_chunk() {
            return Ok(());
        }
        let what = format_args!("chunk {}", self.chunks);
        let chunk = parse(PROVIDER, data, what, CHUNK)?;
        self.lift(chunk, out)
    }

    /// [`push_chunk`](Self::push_chunk) for text, read without checking its
    /// UTF-8 again.
    fn push_text(&mut self, data: &str, out: &mut Output) -> Result<(), Error> {
        if !self.next_chunk() {
            return Ok(());
        }
        let what = format_args!("chunk {}", self.chunks);
        let chunk = parse_text(PROVIDER, data, what, CHUNK)?;
        self.lift(chunk, out)
    }

    /// Counts a chunk; whether it counts (nothing does after `[DONE]`).
    fn next_chunk(&mut self) -> bool {
        self.chunks += 1;
        !self.done
    }

    fn lift(&mut self, chunk: ResponseRead<'_>, out: &mut Output) -> Result<(), Error> {
        if let Some(error) = chunk.error {
            return Err(ProviderError::in_stream(PROVIDER, &error).into());
        }
        if self.generation_id.is_none() {
            self.generation_id = chunk.id.filter(|id| !id.is_empty()).map(Cow::into_owned);
        }
        for choice in chunk.choices.into_iter().filter(|choice| choice.index == 0) {
            // A whole body's message is a delta holding everything.
            if let Some(mut delta) = choice.message.or(choice.delta) {
                let mut fields = std::mem::take(&mut delta.rest);
                fields.remove("role");
                self.lift_delta(delta, fields, out)?;
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
        }
        if let Some(usage) = chunk
            .usage
            .or_else(|| chunk.x_groq.and_then(|groq| groq.usage))
        {
            self.usage = Some(lift_usage(usage, self.metadata()));
        }
        Ok(())
    }

    /// Lifts a delta (or a whole message), with `fields`, its fields with no
    /// canonical place: they go with its first event.
    fn lift_delta(
        &mut self,
        delta: MessageRead,
        fields: Map<String, Value>,
        out: &mut Output,
    ) -> Result<(), Error> {
        let mut fields = self.with_held(fields);
        let reasoning = [
            ("reasoning_content", delta.reasoning_content),
            ("reasoning", delta.reasoning),
        ]
        .into_iter()
        .find_map(|(field, text)| text.filter(|t| !t.is_empty()).map(|t| (field, t)));
        if let Some((field, text)) = reasoning {
            let mut metadata = self
                .starting(Last::Reasoning)
                .map(|mut metadata| {
                    metadata.insert(REASONING_FIELD_KEY, field.into());
                    metadata
                })
                .unwrap_or_default();
            wire_extra::keep(&mut metadata, EXTRA_KEY, std::mem::take(&mut fields));
            self.order.flush(out);
            out.push(Event::ReasoningDelta(ReasoningDelta {
                text,
                signature: None,
                metadata,
            }));
        }
        if let Some(text) = delta
            .content
            .map(ContentRead::into_text)
            .filter(|t| !t.is_empty())
        {
            let mut metadata = self.starting(Last::Text).unwrap_or_default();
            wire_extra::keep(&mut metadata, EXTRA_KEY, std::mem::take(&mut fields));
            self.order.flush(out);
            out.push(Event::TextDelta(TextDelta { text, metadata }));
        }
        if let Some(text) = delta.refusal.filter(|t| !t.is_empty()) {
            self.refusal = true;
            let mut metadata = self
                .starting(Last::Refusal)
                .map(|mut metadata| {
                    metadata.insert(REFUSAL_KEY, true.into());
                    metadata
                })
                .unwrap_or_default();
            refusal_fields(&mut metadata, std::mem::take(&mut fields));
            self.order.flush(out);
            out.push(Event::TextDelta(TextDelta { text, metadata }));
        }
        let citations = delta
            .annotations
            .iter()
            .flatten()
            .filter_map(annotation::lift);
        let mut metadata = Metadata::new();
        metadata.add_citations(citations);
        if !metadata.is_empty() {
            out.push(Event::TextDelta(TextDelta {
                text: String::new(),
                metadata,
            }));
        }
        for call in delta.tool_calls.into_iter().flatten() {
            self.lift_call(call, std::mem::take(&mut fields), out)?;
        }
        if fields.is_empty() {
            return Ok(());
        }
        self.place(fields, out)
    }

    /// `fields` after the fields held, if any.
    fn with_held(&mut self, fields: Map<String, Value>) -> Map<String, Value> {
        if self.held.is_empty() {
            return fields;
        }
        let mut held = std::mem::take(&mut self.held);
        held.extend(fields);
        held
    }

    /// Places the unknown fields of a delta that gave no event: on an empty
    /// piece of the message being lifted, or, before its first event, held
    /// for it.
    fn place(&mut self, fields: Map<String, Value>, out: &mut Output) -> Result<(), Error> {
        let mut metadata = Metadata::new();
        match (self.last, self.order.next().checked_sub(1)) {
            (Last::Text, _) => {
                wire_extra::keep(&mut metadata, EXTRA_KEY, fields);
                out.push(Event::TextDelta(TextDelta {
                    text: String::new(),
                    metadata,
                }));
            }
            (Last::Refusal, _) => {
                refusal_fields(&mut metadata, fields);
                out.push(Event::TextDelta(TextDelta {
                    text: String::new(),
                    metadata,
                }));
            }
            (Last::Reasoning, _) => {
                wire_extra::keep(&mut metadata, EXTRA_KEY, fields);
                out.push(Event::ReasoningDelta(ReasoningDelta {
                    text: String::new(),
                    signature: None,
                    metadata,
                }));
            }
            (Last::Call, Some(call)) => {
                let mut delta = ToolCallDelta::arguments(call, String::new());
                wire_extra::keep(&mut delta.metadata, MESSAGE_KEY, fields);
                self.order
                    .fragment(delta, out)
                    .map_err(|late| malformed(PROVIDER, late.to_string()))?;
            }
            (Last::Nothing | Last::Call, _) => self.held = fields,
        }
        Ok(())
    }

    /// The metadata for an event of kind `kind`: the response id when the event
    /// starts a new message (`Some`), nothing when it continues one (`None`).
    fn starting(&mut self, kind: Last) -> Option<Metadata> {
        (std::mem::replace(&mut self.last, kind) != kind).then(|| self.metadata())
    }

    fn metadata(&self) -> Metadata {
        self.generation_id
            .as_ref()
            .map(Metadata::generation)
            .unwrap_or_default()
    }

    /// Lifts a call fragment; `fields`, its message's unknown fields, go on
    /// its delta under [`MESSAGE_KEY`], the fragment's own under [`EXTRA_KEY`].
    fn lift_call(
        &mut self,
        call: ToolCallRead,
        fields: Map<String, Value>,
        out: &mut Output,
    ) -> Result<(), Error> {
        let function = call.function.unwrap_or_default();
        let name = function.name.filter(|name| !name.is_empty());
        let id = call.id.filter(|id| !id.is_empty());
        let kind = call.kind.as_deref().unwrap_or("function");
        let server_side = kind != "function";
        let mut rest = call.rest;
        let arguments = if server_side {
            // Its payload: the arguments.
            rest.remove(kind)
                .map(|payload| payload.to_string())
                .unwrap_or_default()
        } else {
            match function.arguments {
                Some(Value::String(text)) => text,
                Some(Value::Null) | None => String::new(),
                Some(value) => value.to_string(),
            }
        };
        self.last = Last::Call;
        let target = match call.index {
            Some(index) => self.by_index.get(&index).copied(),
            None => self.calls.len().checked_sub(1).map(|last| last as u32),
        };
        // A new id, or a name (a server-side call is named by its type) where
        // the call already has one, starts a call at the same index.
        let open = target.map(|ordinal| (ordinal, &mut self.calls[ordinal as usize]));
        let (ordinal, open) = match open {
            Some((ordinal, open))
                if match (&id, &open.wire_id) {
                    (Some(id), Some(open_id)) => id == open_id,
                    _ => !((name.is_some() || server_side) && open.named),
                } =>
            {
                (ordinal, open)
            }
            _ => {
                let mut delta = self.start_call(call.index, id, name, kind, server_side);
                delta.arguments_delta = arguments;
                wire_extra::keep(&mut delta.metadata, EXTRA_KEY, rest);
                wire_extra::keep(&mut delta.metadata, MESSAGE_KEY, fields);
                self.order.start(delta, out);
                return Ok(());
            }
        };
        if open.wire_id.is_none() {
            open.wire_id = id;
        }
        let mut delta = ToolCallDelta::arguments(ordinal, arguments);
        if let Some(name) = name.filter(|_| !open.named) {
            open.named = true;
            delta.details_mut().name = Some(name);
        }
        wire_extra::keep(&mut delta.metadata, EXTRA_KEY, rest);
        wire_extra::keep(&mut delta.metadata, MESSAGE_KEY, fields);
        self.order
            .fragment(delta, out)
            .map_err(|late| malformed(PROVIDER, late.to_string()))
    }

    /// Records a call that starts, and gives its first delta (no arguments).
    fn start_call(
        &mut self,
        wire_index: Option<u32>,
        id: Option<String>,
        name: Option<String>,
        kind: &str,
        server_side: bool,
    ) -> ToolCallDelta {
        let ordinal = self.order.next();
        let canonical_id = id.clone().unwrap_or_else(|| match &self.generation_id {
            Some(generation) => format!("{generation}_call_{ordinal}"),
            None => format!("call_{ordinal}"),
        });
        if let Some(index) = wire_index {
            self.by_index.insert(index, ordinal);
        }
        self.calls.push(OpenCall {
            wire_id: id,
            named: name.is_some() || server_side,
        });
        self.function_calls |= !server_side;
        let mut delta = ToolCallDelta::new(ordinal);
        let details = delta.details_mut();
        details.id = Some(canonical_id);
        details.name = if server_side {
            Some(kind.to_owned())
        } else {
            name
        };
        details.provider_executed = server_side;
        delta
    }

    fn map_finish(&self, reason: String) -> FinishReason {
        match reason.as_str() {
            "stop" if self.function_calls => FinishReason::ToolCalls,
            "stop" if self.refusal => FinishReason::Refusal,
            "function_call" => FinishReason::ToolCalls,
            "sensitive" => FinishReason::ContentFilter,
            _ => FinishReason::from(reason),
        }
    }
}

impl Lift for Lifter {
    const PROVIDER: &'static str = PROVIDER;

    fn event(&mut self, event: &SseEvent, out: &mut Output) -> Result<(), Error> {
        if event.data == DONE {
            self.done = true;
            return Ok(());
        }
        let lifted = self.push_text(&event.data, out);
        self.order.keep_on_error(lifted, out)
    }

    /// Lifts a whole non-streaming body (a `chat.completion` object).
    fn body(&mut self, body: &[u8], out: &mut Output) -> Result<(), Error> {
        let chunk = parse(PROVIDER, body, "the body", "a JSON chat completion")?;
        self.lift(chunk, out)?;
        self.done = true;
        Ok(())
    }

    /// Ends the response: emits the usage and the finish reason. A stream that
    /// ended with neither `[DONE]` nor a finish reason is an error.
    fn finish(&mut self, out: &mut Output) -> Result<(), Error> {
        self.order.flush(out); // the calls held, before usage and finish
        if !self.held.is_empty() {
            // Fields of a message that gave no event: an empty one holds them.
            let mut metadata = self.metadata();
            wire_extra::keep(&mut metadata, EXTRA_KEY, std::mem::take(&mut self.held));
            out.push(Event::TextDelta(TextDelta {
                text: String::new(),
                metadata,
            }));
        }
        if let Some(usage) = self.usage.take() {
            out.push(Event::Usage(usage));
        }
        match self.finish_reason.take() {
            Some(reason) => out.push(Event::finish(self.map_finish(reason))),
            None if !self.done => {
                return Err(truncated(
                    PROVIDER,
                    format!(
                        "the stream ended after {} chunks without `[DONE]` or a finish reason",
                        self.chunks
                    ),
                ));
            }
            None => {}
        }
        Ok(())
    }
}

/// Keeps a refusal's unknown fields, marking the piece that holds them a
/// refusal's (for the encoder, which reads a piece with metadata afresh).
fn refusal_fields(metadata: &mut Metadata, fields: Map<String, Value>) {
    if !fields.is_empty() {
        metadata.insert(REFUSAL_KEY, true.into());
        wire_extra::keep(metadata, EXTRA_KEY, fields);
    }
}

/// The canonical usage of a wire usage read by
/// [`CompletionUsage::read_lenient`]: the details absent stay absent.
fn lift_usage(usage: CompletionUsage, metadata: Metadata) -> Usage {
    openai_shared::lift_usage(
        usage.prompt_tokens,
        usage.completion_tokens,
        usage.prompt_tokens_details,
        usage.completion_tokens_details,
        metadata,
    )
}

//! The server half, outward: canonical events → the reply's SSE stream or JSON
//! body ([`ReplyEncoder`]), and an [`Error`] → its status and error body
//! ([`error_body`]). No IO, no clock: a gateway drives them.

use std::mem;

use bytes::Bytes;
use serde_json::{Map, Value};

use super::citation;
use super::lift::{MESSAGE_DELTA_KEY, MESSAGE_START_KEY};
use super::lower::{BLOCK_KEY, EXTRA_KEY, call_block, reasoning_block};
use super::types::{
    self, Block, Delta, ErrorBody, ErrorObject, MessageDelta, Response, StreamEvent, TextBlock,
    ThinkingBlock,
};
use crate::message::{Citation, Event, FinishReason, Joiner, Message, Role, ToolCallDelta, Usage};
use crate::provider::EncodeReply;
use crate::provider::sse::SseWriter;
use crate::provider::wire_extra;
use crate::service::Output;
use crate::{ContentBlock, Error};

/// The status and the Messages error body for `error`: the status is
/// [`Error::http_status`], the error type follows it (`invalid_request_error`
/// for 400 and 422, `authentication_error` 401, `permission_error` 403,
/// `not_found_error` 404, `request_too_large` 413, `rate_limit_error` 429,
/// `overloaded_error` 503 and 529, `timeout_error` 504, `api_error` for the
/// rest), the message is the error's
/// [`client_message`](Error::client_message): its text, without where the
/// upstream lives.
///
/// ```
/// use lmstack::Error;
/// use lmstack::provider::anthropic::error_body;
/// use serde_json::json;
///
/// let (status, body) = error_body(&Error::InvalidRequest("messages: missing field".into()));
/// assert_eq!(status, 400);
/// assert_eq!(body, json!({"type": "error", "error": {
///     "type": "invalid_request_error", "message": "invalid request: messages: missing field"}}));
/// ```
pub fn error_body(error: &Error) -> (u16, Value) {
    let status = error.http_status();
    (
        status,
        serde_json::to_value(error_object(status, error)).unwrap_or_default(),
    )
}

fn error_object(status: u16, error: &Error) -> ErrorBody {
    let kind = match status {
        400 | 408 | 415 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        504 => "timeout_error",
        _ => "api_error",
    };
    ErrorBody {
        kind: "error".into(),
        error: ErrorObject {
            kind: kind.into(),
            message: error.client_message(),
            extra: Map::new(),
        },
        extra: Map::new(),
    }
}

/// Encodes a reply's canonical events as a Messages response: the SSE stream
/// (`message_start`, then each content block's `content_block_start`, deltas
/// and `content_block_stop`, then `message_delta` and `message_stop`) in
/// streaming mode, or one `message` JSON body in non-streaming mode — from the
/// same code: the events become [`StreamEvent`]s, written as SSE frames or
/// folded into one [`Response`].
///
/// A pure [`Machine`](crate::service::Machine): a reply's items in — `Ok` events, or the `Err` that
/// ends a failed reply — bytes out (in streaming mode, the frames of each event
/// as they come; in non-streaming mode, the body at
/// [`finish`](crate::service::Machine::finish)). A gateway runs it with
/// [`MachineStream`](crate::service::MachineStream) over the reply's items,
/// each wrapped in `Ok` (`reply.map(Ok)`), so that the error is encoded rather
/// than ending the body. The message id and the model name are the caller's:
/// no clock and no randomness inside. Streaming mode holds at most the frames
/// of one item; non-streaming mode holds the message until the end, as large
/// as the reply (which the stack below bounds: a provider's body limit).
///
/// - text, reasoning and tool-call deltas open and close blocks in order, with
///   indexes from 0: a text block (`text_delta`), a thinking block
///   (`thinking_delta`, `signature_delta`; a delta with text after a signature
///   opens the next block, as the [`Joiner`](crate::Joiner) reads it), a
///   `tool_use` block per call (`server_tool_use` when the provider ran it;
///   the arguments streamed as `input_json_delta`);
/// - the [`Citation`]s of a text delta are `citations_delta`s of the text
///   block open (the block then closes: the text after them is another
///   block); an assistant text message with citations is cut into blocks at
///   the ends of their spans, each block with the citations that hold it (see
///   [`citation`](super::citation)). In non-streaming mode, text deltas are
///   joined first (as the [`Joiner`] joins them), so the blocks follow the
///   spans there too; a stream cannot cut text it has sent, and a cited block
///   holds the uncited text just before it;
/// - whole messages (from non-streaming stages) become whole blocks: assistant
///   text, reasoning (`redacted_thinking` when redacted), calls; an assistant
///   text holding a raw block under [`BLOCK_KEY`] is that block;
/// - the fields of a text delta or an assistant text kept under [`EXTRA_KEY`]
///   (an Anthropic upstream's unknown fields of a `text` block) start a text
///   block of their own holding them (a tool call's kept fields are its
///   block's, [`BLOCK_KEY`]); the message's kept under [`MESSAGE_START_KEY`]
///   on the reply's first event → `message_start`'s message, those kept
///   under [`MESSAGE_DELTA_KEY`] on usage → `message_delta` and its delta (a
///   body holds both at its top, as a client folds a stream). User and system messages, media of an assistant message, and the `tool_results`
///   and `tool_aggregate` messages of a gateway's own tool loop are not part
///   of a Messages response and are skipped: only the model's content reaches
///   the client;
/// - usage events add up (a tool loop's rounds) into `message_delta`'s usage
///   (`message_start` carries zeros: the counts come at the end); canonical
///   input tokens count the cache, so the wire's `input_tokens` is what is
///   left when the cache reads and writes are taken off;
/// - the last finish gives `stop_reason`: stop → `end_turn`, length →
///   `max_tokens`, tool calls → `tool_use`, refusal and content filter →
///   `refusal`, others verbatim (`pause_turn`, `stop_sequence`); without one,
///   `tool_use` when the reply called tools, else `end_turn`;
/// - an `Err` ends the reply: an `event: error` frame after what was sent in
///   streaming mode (no `message_stop`), the error body in place of the
///   message in non-streaming mode; nothing is written after it, and
///   [`status`](ReplyEncoder::status) gives the status to answer with.
///
/// ```
/// use lmstack::provider::anthropic::ReplyEncoder;
/// use lmstack::service::{Machine, Output};
/// use lmstack::{Event, FinishReason};
///
/// let mut encoder = ReplyEncoder::new("msg_1", "claude-sonnet-4-5", true);
/// let mut out = Output::new();
/// for event in [Event::text("Hi"), Event::finish(FinishReason::Stop)] {
///     encoder.push(Ok(event), &mut out).unwrap();
/// }
/// encoder.finish(&mut out).unwrap();
/// let sse: Vec<u8> = out.drain().flat_map(|bytes| bytes.to_vec()).collect();
/// let sse = String::from_utf8(sse).unwrap();
/// assert!(sse.starts_with("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\""));
/// assert!(sse.contains("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"));
/// assert!(sse.contains("\"stop_reason\":\"end_turn\""));
/// assert!(sse.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
///
/// let mut whole = ReplyEncoder::new("msg_1", "claude-sonnet-4-5", false);
/// whole.push(Ok(Event::text("Hi")), &mut out).unwrap();
/// whole.finish(&mut out).unwrap();
/// let body: serde_json::Value = serde_json::from_slice(&out.pop().unwrap()).unwrap();
/// assert_eq!(body["content"], serde_json::json!([{"type": "text", "text": "Hi"}]));
/// ```
#[derive(Debug)]
pub struct ReplyEncoder {
    sink: Sink,
    id: String,
    model: String,
    started: bool,
    done: bool,
    /// The index the next block takes.
    next_index: u32,
    open: Option<Open>,
    /// Whether a call was written (for the default stop reason).
    called: bool,
    usage: Option<Usage>,
    finish: Option<FinishReason>,
    status: u16,
    /// Non-streaming mode: the text deltas since any other event, joined
    /// into the text message they make, whose citations cut its blocks.
    text: Option<Joiner>,
}

#[derive(Debug)]
enum Sink {
    /// SSE frames, gathered for one push.
    Sse(SseWriter),
    /// The whole message, and the open call's input text.
    Whole(Box<Response>, String),
}

/// The block open, and what decides whether a delta continues it.
#[derive(Debug)]
enum Open {
    /// A block given whole at its start (redacted thinking, a server block).
    Whole,
    Text,
    Thinking {
        signed: bool,
    },
    Call {
        index: u32,
        id: Option<String>,
    },
}

impl ReplyEncoder {
    /// An encoder for the reply to one request: `stream` picks SSE (`true`)
    /// or one JSON body; `id` (`msg_…`) and `model` are written in the message.
    ///
    /// ```
    /// use lmstack::provider::anthropic::ReplyEncoder;
    /// use lmstack::service::{Machine, Output};
    ///
    /// let mut encoder = ReplyEncoder::new("msg_1", "claude-sonnet-4-5", false);
    /// let mut out = Output::new();
    /// encoder.finish(&mut out).unwrap();
    /// let body: serde_json::Value = serde_json::from_slice(&out.pop().unwrap()).unwrap();
    /// assert_eq!((body["id"].as_str(), body["stop_reason"].as_str()), (Some("msg_1"), Some("end_turn")));
    /// ```
    pub fn new(id: impl Into<String>, model: impl Into<String>, stream: bool) -> Self {
        let sink = if stream {
            Sink::Sse(SseWriter::new())
        } else {
            Sink::Whole(Box::new(Response::new("", "")), String::new())
        };
        ReplyEncoder {
            sink,
            id: id.into(),
            model: model.into(),
            started: false,
            done: false,
            next_index: 0,
            open: None,
            called: false,
            usage: None,
            finish: None,
            status: 200,
            text: None,
        }
    }

    /// The reply's `Content-Type`: `text/event-stream` or `application/json`.
    ///
    /// ```
    /// use lmstack::provider::anthropic::ReplyEncoder;
    /// assert_eq!(ReplyEncoder::new("msg_1", "m", true).content_type(), "text/event-stream");
    /// assert_eq!(ReplyEncoder::new("msg_1", "m", false).content_type(), "application/json");
    /// ```
    pub fn content_type(&self) -> &'static str {
        match self.sink {
            Sink::Sse(_) => "text/event-stream",
            Sink::Whole(..) => "application/json",
        }
    }

    /// The HTTP status for the reply: 200, or once an error was encoded,
    /// [`error_body`]'s status for it. A gateway that waits for the first
    /// bytes before it sends the headers answers an error that came first
    /// with its own status.
    ///
    /// ```
    /// use lmstack::provider::anthropic::ReplyEncoder;
    /// use lmstack::service::{Machine, Output};
    /// use lmstack::{Error, Event};
    ///
    /// let mut encoder = ReplyEncoder::new("msg_1", "m", true);
    /// let mut out = Output::new();
    /// encoder.push(Ok(Event::text("Hi")), &mut out).unwrap();
    /// assert_eq!(encoder.status(), 200);
    /// encoder.push(Err(Error::stage("upstream", "broke")), &mut out).unwrap();
    /// encoder.finish(&mut out).unwrap();
    /// assert_eq!(encoder.status(), 500);
    /// let sse: Vec<u8> = out.drain().flat_map(|bytes| bytes.to_vec()).collect();
    /// let sse = String::from_utf8(sse).unwrap();
    /// assert!(sse.ends_with("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"upstream: broke\"}}\n\n"));
    /// assert!(!sse.contains("message_stop"));
    /// ```
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Writes one wire event: an SSE frame, or a change to the whole message.
    fn emit(&mut self, event: StreamEvent) {
        match &mut self.sink {
            Sink::Sse(frames) => frames.json(Some(event.name()), &event),
            Sink::Whole(message, input) => fold(message, input, event),
        }
    }

    /// Hands out the frames gathered (streaming mode).
    fn flush(&mut self, out: &mut Output<Bytes>) {
        if let Sink::Sse(frames) = &mut self.sink
            && let Some(frames) = frames.take()
        {
            out.push(frames);
        }
    }

    /// Starts the message, before `first`, the reply's first event, if any:
    /// with the message's fields it keeps.
    fn start(&mut self, first: Option<&Event>) {
        if !self.started {
            self.started = true;
            let mut message = Response::new(self.id.clone(), self.model.clone());
            if let Some(metadata) = first.and_then(Event::metadata) {
                message.extra = wire_extra::kept(metadata, MESSAGE_START_KEY);
            }
            self.emit(StreamEvent::MessageStart { message });
        }
    }

    fn open_block(&mut self, block: Block, open: Open) {
        self.close();
        let index = self.next_index;
        self.next_index = self.next_index.saturating_add(1);
        self.emit(StreamEvent::ContentBlockStart {
            index,
            content_block: block,
        });
        self.open = Some(open);
    }

    fn close(&mut self) {
        if self.open.take().is_some() {
            let index = self.next_index - 1;
            self.emit(StreamEvent::ContentBlockStop { index });
        }
    }

    fn delta(&mut self, delta: Delta) {
        let index = self.next_index - 1;
        self.emit(StreamEvent::ContentBlockDelta { index, delta });
    }

    /// Adds text to the text block open, or to a new one; `fields` (kept
    /// under [`EXTRA_KEY`]) start a new block of their own, which holds them.
    fn text(&mut self, text: String, fields: Map<String, Value>) {
        if text.is_empty() {
            return;
        }
        if !fields.is_empty() || !matches!(self.open, Some(Open::Text)) {
            let block = TextBlock {
                text: String::new(),
                extra: fields,
            };
            self.open_block(Block::Text(block), Open::Text);
        }
        self.delta(Delta::TextDelta { text });
    }

    /// Writes the text message joined from the text deltas held (non-streaming
    /// mode).
    fn joined_text(&mut self) {
        for event in self
            .text
            .take()
            .map(Joiner::finish_events)
            .unwrap_or_default()
        {
            if let Event::Message { message } = event {
                self.message(message);
            }
        }
    }

    /// Adds citations to the text block open (a new, empty one if none is),
    /// and closes it: they cite its text, and the text after them is another
    /// block.
    fn cite<'a>(&mut self, citations: impl IntoIterator<Item = &'a Citation>) {
        let mut citations = citations.into_iter().peekable();
        if citations.peek().is_none() {
            return;
        }
        if !matches!(self.open, Some(Open::Text)) {
            self.open_block(Block::Text(TextBlock::new("")), Open::Text);
        }
        for cited in citations {
            let citation = citation::lower(cited);
            self.delta(Delta::CitationsDelta { citation });
        }
        self.close();
    }

    fn reasoning(&mut self, text: String, signature: Option<String>) {
        let signature = signature.filter(|signature| !signature.is_empty());
        if text.is_empty() && signature.is_none() {
            return;
        }
        let continues =
            matches!(self.open, Some(Open::Thinking { signed }) if !signed || text.is_empty());
        if !continues {
            let block = Block::Thinking(ThinkingBlock {
                thinking: String::new(),
                signature: String::new(),
                extra: Map::new(),
            });
            self.open_block(block, Open::Thinking { signed: false });
        }
        if !text.is_empty() {
            self.delta(Delta::ThinkingDelta { thinking: text });
        }
        if let Some(signature) = signature {
            self.delta(Delta::SignatureDelta { signature });
            self.open = Some(Open::Thinking { signed: true });
        }
    }

    fn call(&mut self, delta: ToolCallDelta) {
        let continues = matches!(&self.open, Some(Open::Call { index, id })
            if *index == delta.index && (delta.id().is_none() || delta.id() == id.as_deref()));
        if !continues {
            let id = delta.id().map(str::to_owned);
            let block = call_block(
                id.clone().unwrap_or_default(),
                delta.name().unwrap_or_default().to_owned(),
                delta.provider_executed(),
                &delta.metadata,
                Value::Object(Map::new()),
            );
            self.open_block(
                block,
                Open::Call {
                    index: delta.index,
                    id,
                },
            );
            self.called = true;
        }
        if !delta.arguments_delta.is_empty() {
            self.delta(Delta::InputJsonDelta {
                partial_json: delta.arguments_delta,
            });
        }
    }

    fn message(&mut self, message: Message) {
        self.close();
        match message {
            Message::Text(text) if text.role == Role::Assistant => {
                match text.metadata.get(BLOCK_KEY) {
                    Some(Value::Object(block)) => {
                        self.open_block(Block::Other(block.clone()), Open::Whole)
                    }
                    _ => {
                        let citations = text.metadata.citations();
                        let mut fields = wire_extra::kept(&text.metadata, EXTRA_KEY);
                        for (piece, cited) in citation::split(&text.text, &citations) {
                            self.text(piece.to_owned(), mem::take(&mut fields));
                            self.cite(cited);
                            self.close();
                        }
                    }
                }
            }
            Message::Multimodal(multimodal) if multimodal.role == Role::Assistant => {
                let text = multimodal.content.iter().filter_map(ContentBlock::as_text);
                self.text(text.collect(), Map::new());
            }
            Message::Reasoning(reasoning) if reasoning.redacted => {
                if let Some(block) = reasoning_block(&reasoning) {
                    self.open_block(block, Open::Whole);
                }
            }
            Message::Reasoning(reasoning) => self.reasoning(reasoning.text, reasoning.signature),
            Message::ToolCalls(calls) => {
                for call in calls.calls {
                    let mut start = ToolCallDelta::start(0, call.id, call.name);
                    start.details_mut().provider_executed = call.provider_executed;
                    start.metadata = call.metadata;
                    start.arguments_delta = call.arguments.to_string();
                    self.call(start);
                    self.close(); // each call is a block of its own
                }
            }
            Message::Usage(usage) => self.add_usage(usage),
            // Not part of a Messages response (see the type's docs).
            Message::Text(_)
            | Message::Multimodal(_)
            | Message::ToolResults(_)
            | Message::ToolAggregate(_) => {}
        }
        self.close();
    }

    fn add_usage(&mut self, usage: Usage) {
        match &mut self.usage {
            None => self.usage = Some(usage),
            Some(sum) => sum.add(&usage),
        }
    }

    fn stop_reason(&self) -> String {
        match &self.finish {
            Some(FinishReason::Stop) => "end_turn".into(),
            Some(FinishReason::Length) => "max_tokens".into(),
            Some(FinishReason::ToolCalls) => "tool_use".into(),
            Some(FinishReason::Refusal | FinishReason::ContentFilter) => "refusal".into(),
            Some(FinishReason::Other(reason)) => reason.clone(),
            None if self.called => "tool_use".into(),
            None => "end_turn".into(),
        }
    }
}

/// Canonical usage as the wire's, whose `input_tokens` leaves out the cache.
fn wire_usage(usage: Option<&Usage>) -> types::Usage {
    let Some(usage) = usage else {
        return types::Usage::new(0, 0);
    };
    let read = usage.cached_input_tokens;
    let created = usage.cache_write_input_tokens();
    let mut extra = Map::new();
    if let Some(thinking) = usage.reasoning_tokens {
        let details = serde_json::json!({ "thinking_tokens": thinking });
        extra.insert("output_tokens_details".into(), details);
    }
    types::Usage {
        input_tokens: Some(
            usage
                .input_tokens
                .saturating_sub(read.unwrap_or(0))
                .saturating_sub(created.unwrap_or(0)),
        ),
        output_tokens: Some(usage.output_tokens),
        cache_creation_input_tokens: created,
        cache_read_input_tokens: read,
        extra,
    }
}

fn json(value: &impl serde::Serialize) -> String {
    // Wire types: maps with string keys, which always serialise.
    serde_json::to_string(value).unwrap_or_default()
}

/// Folds one wire event into the whole message (non-streaming mode): the
/// reading of a stream every Messages client makes, here on our own events.
fn fold(message: &mut Response, input: &mut String, event: StreamEvent) {
    match event {
        StreamEvent::MessageStart { message: start } => *message = start,
        StreamEvent::ContentBlockStart { content_block, .. } => {
            input.clear();
            message.content.push(content_block);
        }
        StreamEvent::ContentBlockDelta { delta, .. } => match (message.content.last_mut(), delta) {
            (Some(Block::Text(block)), Delta::TextDelta { text }) => block.text.push_str(&text),
            (Some(Block::Text(block)), Delta::CitationsDelta { citation }) => {
                let citations = block
                    .extra
                    .entry("citations")
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(citations) = citations {
                    citations.push(citation);
                }
            }
            (Some(Block::Thinking(block)), Delta::ThinkingDelta { thinking }) => {
                block.thinking.push_str(&thinking)
            }
            (Some(Block::Thinking(block)), Delta::SignatureDelta { signature }) => {
                block.signature.push_str(&signature)
            }
            (_, Delta::InputJsonDelta { partial_json }) => input.push_str(&partial_json),
            _ => {}
        },
        StreamEvent::ContentBlockStop { .. } if !input.is_empty() => {
            // Arguments that are not JSON (a call the model wrote badly) are
            // kept as their text.
            let text = mem::take(input);
            let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
            match message.content.last_mut() {
                Some(Block::ToolUse(call)) => call.input = value,
                Some(Block::Other(fields)) => {
                    fields.insert("input".into(), value);
                }
                _ => {}
            }
        }
        StreamEvent::MessageDelta {
            delta,
            usage,
            extra,
        } => {
            message.stop_reason = delta.stop_reason;
            message.stop_sequence = delta.stop_sequence;
            message.usage = Some(usage.unwrap_or_else(|| types::Usage::new(0, 0)));
            message.extra.extend(delta.extra);
            message.extra.extend(extra);
        }
        _ => {}
    }
}

impl EncodeReply for ReplyEncoder {
    fn ended(&self) -> bool {
        self.done
    }

    fn event(&mut self, event: Event, out: &mut Output<Bytes>) -> Result<(), Error> {
        self.start(Some(&event));
        if let (Event::TextDelta(_), Sink::Whole(..)) = (&event, &self.sink) {
            self.text.get_or_insert_default().push(event);
            return Ok(());
        }
        self.joined_text();
        match event {
            Event::TextDelta(delta) => {
                self.text(delta.text, wire_extra::kept(&delta.metadata, EXTRA_KEY));
                self.cite(&delta.metadata.citations());
            }
            Event::ReasoningDelta(delta) => self.reasoning(delta.text, delta.signature),
            Event::ToolCallDelta(delta) => self.call(delta),
            Event::Message { message } => self.message(message),
            Event::Usage(usage) => self.add_usage(usage),
            // The last block stays open until the reply ends: a failure after
            // the finish (a reply that breaks its response format's schema)
            // ends the stream inside it, before a client reads the block as
            // whole (the SDKs parse a structured output at its block's stop).
            Event::Finish { reason } => self.finish = Some(reason),
        }
        self.flush(out);
        Ok(())
    }

    /// Ends a reply that failed with `error` (see the type's docs).
    fn fail(&mut self, error: &Error, out: &mut Output<Bytes>) {
        self.done = true;
        self.status = error.http_status();
        let body = error_object(self.status, error);
        match &mut self.sink {
            Sink::Sse(frames) => {
                let event = StreamEvent::Error { error: body.error };
                frames.json(Some(event.name()), &event);
            }
            Sink::Whole(..) => out.push(Bytes::from(json(&body))),
        }
        self.flush(out);
    }

    fn end(&mut self, out: &mut Output<Bytes>) -> Result<(), Error> {
        self.done = true;
        self.start(None);
        self.joined_text();
        self.close();
        let mut extra = self
            .usage
            .as_ref()
            .map(|usage| wire_extra::kept(&usage.metadata, MESSAGE_DELTA_KEY))
            .unwrap_or_default();
        let delta = MessageDelta {
            stop_reason: Some(self.stop_reason()),
            stop_sequence: None,
            extra: match extra.remove("delta") {
                Some(Value::Object(fields)) => fields,
                _ => Map::new(),
            },
        };
        let usage = Some(wire_usage(self.usage.as_ref()));
        self.emit(StreamEvent::MessageDelta {
            delta,
            usage,
            extra,
        });
        self.emit(StreamEvent::MessageStop);
        match &mut self.sink {
            Sink::Sse(_) => self.flush(out),
            Sink::Whole(message, _) => out.push(Bytes::from(json(message))),
        }
        Ok(())
    }
}

/// The body of `GET /v1/models` for an Anthropic client: each model's id and
/// creation time (seconds since the Unix epoch, written in RFC 3339), in one
/// page.
///
/// ```
/// use lmstack::provider::anthropic::models_body;
/// use serde_json::json;
///
/// assert_eq!(models_body(&[("claude", 1_715_367_049)]), json!({
///     "data": [{"type": "model", "id": "claude", "display_name": "claude",
///               "created_at": "2024-05-10T18:50:49Z"}],
///     "has_more": false, "first_id": "claude", "last_id": "claude",
/// }));
/// ```
pub fn models_body(models: &[(&str, u64)]) -> Value {
    let data: Vec<Value> = models
        .iter()
        .map(|(id, created)| model_body(id, *created))
        .collect();
    let first = models.first().map(|(id, _)| *id);
    let last = models.last().map(|(id, _)| *id);
    serde_json::json!({"data": data, "has_more": false, "first_id": first, "last_id": last})
}

/// The body of `GET /v1/models/{id}` for an Anthropic client: one model, as
/// [`models_body`] lists it (its name is its display name).
pub fn model_body(id: &str, created: u64) -> Value {
    let created = std::time::UNIX_EPOCH + std::time::Duration::from_secs(created);
    let created_at = humantime::format_rfc3339_seconds(created).to_string();
    serde_json::json!({"type": "model", "id": id, "display_name": id, "created_at": created_at})
}

//! The server half, outward: canonical events → the reply's SSE frames or JSON
//! body ([`ReplyEncoder`]), an [`Error`] → the error body ([`error_body`]), and
//! the model list ([`models_body`]).
//!
//! No IO, no clock, no randomness: the response id and `created` come from the
//! caller. Everything is written with the typed wire of [`types`](super::types),
//! the one the lowering writes.

use bytes::Bytes;
use serde::Serialize;
use serde_json::{Value, json};

use super::annotation;
use super::lower::{EXTRA_KEY, MESSAGE_KEY, REFUSAL_KEY, lower_call};
use super::types::{
    ChatCompletion, ChatMessage, ChatRole, Choice, ChunkChoice, CompletionTokensDetails,
    CompletionUsage, FunctionCall, MessageContent, PromptTokensDetails, ToolCall as WireToolCall,
};
use crate::message::{Metadata, Usage};
use crate::provider::EncodeReply;
use crate::provider::openai_shared;
use crate::provider::sse::SseWriter;
use crate::provider::wire_extra;
use crate::service::Output;
use crate::{ChatRequest, ContentBlock, Error, Event, FinishReason, Message, Role, ToolCallDelta};

/// frames (streaming) or as one `chat.completion` body (non-streaming), from
/// the same per-event mapping: each event becomes a delta, which the streaming
/// mode writes as a `chat.completion.chunk` and the non-streaming mode folds
/// into the one message of the body.
///
/// - citations of web pages in the metadata of text deltas and assistant text
///   messages → `annotations` (`url_citation`s, their ranges counted in
///   `content`); citations of other sources are left out;
/// - text deltas and assistant text messages → `content`; text marked
///   [`REFUSAL_KEY`] → `refusal`; reasoning → `reasoning_content` (redacted
///   reasoning is left out);
/// - the fields kept under [`EXTRA_KEY`] (the OpenAI lifter's or decoder's)
///   on text and reasoning (deltas or messages) → the message's (the
///   delta's) fields, under [`MESSAGE_KEY`] on a call → the message's too,
///   under [`EXTRA_KEY`] on a call or any fragment of it → the call's (the
///   fragment's): an OpenAI upstream's unknown fields reach the client as
///   they came;
/// - tool call deltas and `tool_calls` messages → `tool_calls`, numbered 0, 1, …
///   across the reply, each call's first fragment with its `id`, `type` and
///   `function.name`. Calls the provider ran itself are left out: the client
///   can do nothing with them;
/// - `tool_results` and `tool_aggregate` messages are left out: they are the
///   work of a tool loop in the server, and only the model's final text and
///   calls go to the client. So are user and system messages;
/// - usage (summed when the reply holds several, as a tool loop's rounds do) →
///   the body's `usage`, and in streaming mode a last chunk with
///   `choices: []` when the client asked for `stream_options.include_usage`;
/// - the finish reason → `finish_reason`: `stop`, `length`, `tool_calls`,
///   `content_filter` (`tool_calls` whenever calls were sent and the model
///   stopped; a refusal or an unknown reason is `stop`); a stream without one
///   is `stop` (`tool_calls` after calls);
/// - an assistant message with images, documents or audio is an error: Chat
///   Completions has no place for them.
///
/// The stream ends with `data: [DONE]`. It takes a reply's items,
/// `Result<Event, Error>`: an error in the middle of a stream is written as an
/// in-stream error frame, which ends it; in non-streaming mode, where nothing is
/// written before the end, the error becomes the reply ([`error_body`]'s body;
/// [`status`](ReplyEncoder::status) gives its status).
///
/// ```
/// use lmstack::provider::openai_chat::ReplyEncoder;
/// use lmstack::service::{Machine, Output};
/// use lmstack::{Event, FinishReason};
///
/// let mut encoder = ReplyEncoder::new("chatcmpl-1", 1_700_000_000, "gpt-4o").streaming(false);
/// let mut out = Output::new();
/// for event in [Event::text("Hel"), Event::text("lo"), Event::finish(FinishReason::Stop)] {
///     encoder.push(Ok(event), &mut out).unwrap();
/// }
/// encoder.finish(&mut out).unwrap();
/// let frames: Vec<_> = out.drain().collect();
/// let text: String = frames.iter().map(|f| String::from_utf8_lossy(f)).collect();
/// assert!(text.starts_with("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\""));
/// assert!(text.contains(r#""delta":{"content":"lo"}"#));
/// assert!(text.contains(r#""finish_reason":"stop""#));
/// assert!(text.ends_with("data: [DONE]\n\n"));
///
/// let mut encoder = ReplyEncoder::new("chatcmpl-1", 1_700_000_000, "gpt-4o");
/// encoder.push(Ok(Event::text("Hello")), &mut out).unwrap();
/// encoder.finish(&mut out).unwrap();
/// let body: serde_json::Value = serde_json::from_slice(&out.pop().unwrap()).unwrap();
/// assert_eq!(body["object"], "chat.completion");
/// assert_eq!(body["choices"][0]["message"]["content"], "Hello");
///
/// let mut failing = ReplyEncoder::new("chatcmpl-1", 0, "m").streaming(false);
/// failing.push(Ok(Event::text("Hi")), &mut out).unwrap();
/// failing.push(Err(lmstack::Error::stage("tool loop", "broke")), &mut out).unwrap();
/// failing.finish(&mut out).unwrap(); // writes nothing more
/// let last = out.drain().last().unwrap();
/// assert!(last.starts_with(b"data: {\"error\":{\"message\":\"tool loop: broke\""));
/// assert_eq!(failing.status(), 500);
/// ```
#[derive(Debug)]
pub struct ReplyEncoder {
    id: String,
    created: u64,
    model: String,
    stream: bool,
    include_usage: bool,
    /// Streaming: the first chunk (with `role`) is written.
    started: bool,
    /// Non-streaming: the message folded so far.
    message: ChatMessage,
    /// The current text is a refusal.
    refusal: bool,
    /// The characters of `content` written so far, and where the text run
    /// being written (text deltas since any other event) began in it: the
    /// offsets of its citations count from there.
    content_chars: usize,
    run_start: Option<usize>,
    call: Option<OpenCall>,
    /// Calls sent so far: the next call's wire index.
    calls: u32,
    usage: Option<Usage>,
    finish_reason: Option<FinishReason>,
    ended: bool,
    status: u16,
    /// Streaming: where the frames are written.
    frames: SseWriter,
}

/// The call whose fragments are arriving.
#[derive(Debug)]
struct OpenCall {
    index: u32,
    id: Option<String>,
    /// Its wire index, or `None` when it is left out (the provider ran it).
    wire: Option<u32>,
}

impl ReplyEncoder {
    /// An encoder of one reply, non-streaming, for response `id`, created at
    /// `created` (seconds since the Unix epoch), answered by `model`.
    pub fn new(id: impl Into<String>, created: u64, model: impl Into<String>) -> Self {
        ReplyEncoder {
            id: id.into(),
            created,
            model: model.into(),
            stream: false,
            include_usage: false,
            started: false,
            message: ChatMessage::default(),
            refusal: false,
            content_chars: 0,
            run_start: None,
            call: None,
            calls: 0,
            usage: None,
            finish_reason: None,
            ended: false,
            status: 200,
            frames: SseWriter::new(),
        }
    }

    /// Streaming mode (SSE chunks); `include_usage` is the client's
    /// `stream_options.include_usage` (see [`include_usage`]).
    pub fn streaming(mut self, include_usage: bool) -> Self {
        self.stream = true;
        self.include_usage = include_usage;
        self
    }

    /// The HTTP status for the reply: 200, or once an error was encoded,
    /// [`error_body`]'s status for it (a gateway that waits for the first bytes
    /// before it sends its headers answers an error that came first with it).
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The reply's `Content-Type`: `text/event-stream` or `application/json`.
    pub fn content_type(&self) -> &'static str {
        if self.stream {
            "text/event-stream"
        } else {
            "application/json"
        }
    }

    /// The delta an event adds, if any; usage and finish are kept for the end.
    fn delta(&mut self, event: Event) -> Result<Option<ChatMessage>, Error> {
        let mut delta = ChatMessage::default();
        let run_start = self.run_start.take();
        match event {
            Event::TextDelta(text) => {
                self.call = None;
                let start = *self
                    .run_start
                    .insert(run_start.unwrap_or(self.content_chars));
                if !text.metadata.is_empty() {
                    self.refusal = is_refusal(&text.metadata);
                    annotate(&mut delta, &text.metadata, start);
                    delta
                        .extra
                        .extend(wire_extra::kept(&text.metadata, EXTRA_KEY));
                }
                if self.refusal {
                    delta.refusal = Some(text.text).filter(|text| !text.is_empty());
                } else if !text.text.is_empty() {
                    self.content_chars += text.text.chars().count();
                    delta.content = Some(MessageContent::Text(text.text));
                }
                if delta == ChatMessage::default() {
                    return Ok(None);
                }
            }
            Event::ReasoningDelta(reasoning) => {
                self.call = None;
                self.refusal = false;
                delta.extra = wire_extra::kept(&reasoning.metadata, EXTRA_KEY);
                if reasoning.text.is_empty() && delta.extra.is_empty() {
                    return Ok(None);
                }
                delta.reasoning_content = Some(reasoning.text).filter(|text| !text.is_empty());
            }
            Event::ToolCallDelta(fragment) => {
                self.refusal = false;
                delta.extra = wire_extra::kept(&fragment.metadata, MESSAGE_KEY);
                delta.tool_calls = self.call_fragment(fragment).map(|call| vec![call]);
                if delta.tool_calls.is_none() && delta.extra.is_empty() {
                    return Ok(None);
                }
            }
            Event::Message { message } => return self.message_delta(message),
            Event::Usage(usage) => {
                self.add_usage(usage);
                return Ok(None);
            }
            Event::Finish { reason } => {
                self.finish_reason = Some(reason);
                return Ok(None);
            }
        }
        Ok(Some(delta))
    }

    /// A tool call fragment on the wire: the first of a call with its id, type
    /// and name; `None` for a call left out (the provider ran it), and for a
    /// later fragment that adds nothing.
    fn call_fragment(&mut self, fragment: ToolCallDelta) -> Option<WireToolCall> {
        let name = fragment.name().map(str::to_owned);
        let continued = self.call.as_ref().filter(|open| {
            open.index == fragment.index
                && !matches!((fragment.id(), &open.id), (Some(id), Some(open)) if id != open)
        });
        if let Some(open) = continued {
            let extra = wire_extra::kept(&fragment.metadata, EXTRA_KEY);
            if fragment.arguments_delta.is_empty() && name.is_none() && extra.is_empty() {
                return None;
            }
            return Some(WireToolCall {
                index: Some(open.wire?),
                function: FunctionCall {
                    name,
                    arguments: Some(fragment.arguments_delta),
                },
                extra,
                ..WireToolCall::default()
            });
        }
        let wire = (!fragment.provider_executed()).then(|| {
            self.calls += 1;
            self.calls - 1
        });
        let id = fragment.id().map(str::to_owned);
        self.call = Some(OpenCall {
            index: fragment.index,
            id: id.clone(),
            wire,
        });
        let index = wire?;
        Some(WireToolCall {
            index: Some(index),
            id: Some(id.unwrap_or_else(|| format!("{}_call_{index}", self.id))),
            kind: Some("function".into()),
            function: FunctionCall {
                name: Some(name.unwrap_or_default()),
                arguments: Some(fragment.arguments_delta),
            },
            extra: wire_extra::kept(&fragment.metadata, EXTRA_KEY),
        })
    }

    fn message_delta(&mut self, message: Message) -> Result<Option<ChatMessage>, Error> {
        self.call = None;
        self.refusal = false;
        let mut delta = ChatMessage::default();
        match message {
            Message::Text(text) if text.role == Role::Assistant => {
                if text.text.is_empty() && wire_extra::kept(&text.metadata, EXTRA_KEY).is_empty() {
                    return Ok(None);
                }
                delta.extra = wire_extra::kept(&text.metadata, EXTRA_KEY);
                if is_refusal(&text.metadata) {
                    delta.refusal = Some(text.text).filter(|text| !text.is_empty());
                } else {
                    annotate(&mut delta, &text.metadata, self.content_chars);
                    if !text.text.is_empty() {
                        self.content_chars += text.text.chars().count();
                        delta.content = Some(MessageContent::Text(text.text));
                    }
                }
            }
            Message::Multimodal(multimodal) if multimodal.role == Role::Assistant => {
                let mut text = String::new();
                for block in &multimodal.content {
                    match block {
                        ContentBlock::Text { text: piece, .. } => text.push_str(piece),
                        _ => {
                            return Err(Error::stage(
                                "openai server",
                                "Chat Completions has no place for images, documents or audio in an assistant reply",
                            ));
                        }
                    }
                }
                if text.is_empty() {
                    return Ok(None);
                }
                delta.content = Some(MessageContent::Text(text));
            }
            Message::Reasoning(reasoning) if !reasoning.redacted => {
                delta.extra = wire_extra::kept(&reasoning.metadata, EXTRA_KEY);
                if reasoning.text.is_empty() && delta.extra.is_empty() {
                    return Ok(None);
                }
                delta.reasoning_content = Some(reasoning.text).filter(|text| !text.is_empty());
            }
            Message::ToolCalls(message) => {
                for call in &message.calls {
                    delta
                        .extra
                        .extend(wire_extra::kept(&call.metadata, MESSAGE_KEY));
                }
                let calls: Vec<WireToolCall> = message
                    .calls
                    .iter()
                    .filter(|call| !call.provider_executed)
                    .map(|call| {
                        let mut wire = lower_call(call);
                        wire.index = Some(self.calls);
                        self.calls += 1;
                        wire
                    })
                    .collect();
                if calls.is_empty() && delta.extra.is_empty() {
                    return Ok(None);
                }
                delta.tool_calls = Some(calls).filter(|calls| !calls.is_empty());
            }
            Message::Usage(usage) => {
                self.add_usage(usage);
                return Ok(None);
            }
            // Tool results, a tool loop's aggregates, user and system messages
            // and redacted or empty reasoning are not part of the reply.
            _ => return Ok(None),
        }
        Ok(Some(delta))
    }

    fn add_usage(&mut self, usage: Usage) {
        match &mut self.usage {
            None => self.usage = Some(usage),
            Some(total) => total.add(&usage),
        }
    }

    /// Writes a delta: a chunk (streaming), or folded into the body's message.
    fn emit(&mut self, mut delta: ChatMessage, out: &mut Output<Bytes>) {
        if self.stream {
            if !std::mem::replace(&mut self.started, true) {
                delta.role = Some(ChatRole::Assistant);
            }
            self.chunk(&[chunk_choice(delta, None)], None, out);
        } else {
            fold(&mut self.message, delta);
        }
    }

    fn chunk(
        &mut self,
        choices: &[ChunkChoice],
        usage: Option<&CompletionUsage>,
        out: &mut Output<Bytes>,
    ) {
        let chunk = ChunkFrame {
            id: &self.id,
            object: "chat.completion.chunk",
            created: self.created,
            model: &self.model,
            choices,
            usage,
        };
        self.frames.json(None, &chunk);
        self.flush(out);
    }

    /// Hands out the frames written (streaming).
    fn flush(&mut self, out: &mut Output<Bytes>) {
        if let Some(frames) = self.frames.take() {
            out.push(frames);
        }
    }

    /// The wire's finish reason.
    fn finish_reason(&self) -> &'static str {
        let calls = self.calls > 0;
        match &self.finish_reason {
            Some(FinishReason::Length) => "length",
            Some(FinishReason::ContentFilter) => "content_filter",
            _ if calls => "tool_calls",
            _ => "stop",
        }
    }
}

/// Writes the web page citations of `metadata` as the delta's `annotations`,
/// their ranges moved to where their text begins in `content`.
fn annotate(delta: &mut ChatMessage, metadata: &Metadata, offset: usize) {
    let annotations: Vec<Value> = metadata
        .citations()
        .iter()
        .filter_map(|citation| annotation::lower(citation, offset))
        .collect();
    if !annotations.is_empty() {
        delta
            .extra
            .insert(ANNOTATIONS.into(), Value::Array(annotations));
    }
}

/// The field of a message that holds its annotations.
const ANNOTATIONS: &str = "annotations";

fn is_refusal(metadata: &Metadata) -> bool {
    metadata.get(REFUSAL_KEY) == Some(&Value::Bool(true))
}

/// A [`ChatCompletionChunk`](super::types::ChatCompletionChunk) as the encoder writes it: the same fields,
/// serialized the same way, borrowed from the encoder, so that a frame copies
/// no id or model name into a chunk of its own first.
#[derive(Serialize)]
struct ChunkFrame<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: &'a [ChunkChoice],
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<&'a CompletionUsage>,
}

fn chunk_choice(delta: ChatMessage, finish_reason: Option<String>) -> ChunkChoice {
    ChunkChoice {
        index: 0,
        delta,
        finish_reason,
        logprobs: None,
    }
}

/// Folds a delta into the message being built (non-streaming mode): text is
/// appended, a call with an id starts, one without continues the last.
fn fold(message: &mut ChatMessage, delta: ChatMessage) {
    fn append(slot: &mut Option<String>, piece: Option<String>) {
        if let Some(piece) = piece {
            match slot {
                Some(text) => text.push_str(&piece),
                None => *slot = Some(piece),
            }
        }
    }
    if let Some(MessageContent::Text(piece)) = delta.content {
        match &mut message.content {
            Some(MessageContent::Text(text)) => text.push_str(&piece),
            _ => message.content = Some(MessageContent::Text(piece)),
        }
    }
    append(&mut message.refusal, delta.refusal);
    append(&mut message.reasoning_content, delta.reasoning_content);
    for (field, value) in delta.extra {
        match (message.extra.get_mut(&field), value) {
            (Some(Value::Array(held)), Value::Array(annotations)) if field == ANNOTATIONS => {
                held.extend(annotations)
            }
            (_, value) => {
                message.extra.insert(field, value);
            }
        }
    }
    for mut call in delta.tool_calls.into_iter().flatten() {
        let calls = message.tool_calls.get_or_insert_default();
        match calls.last_mut() {
            Some(last) if call.id.is_none() => {
                append(&mut last.function.arguments, call.function.arguments);
                if last.function.name.is_none() {
                    last.function.name = call.function.name;
                }
                last.extra.extend(call.extra);
            }
            _ => {
                call.index = None;
                calls.push(call);
            }
        }
    }
}

impl EncodeReply for ReplyEncoder {
    fn ended(&self) -> bool {
        self.ended
    }

    fn event(&mut self, event: Event, out: &mut Output<Bytes>) -> Result<(), Error> {
        if let Some(delta) = self.delta(event)? {
            self.emit(delta, out);
        }
        Ok(())
    }

    /// Ends a reply that failed with `error`: a stream with `data: {"error":
    /// {…}}` (the body of [`error_body`]) and nothing after it; a whole reply
    /// becomes that error body.
    fn fail(&mut self, error: &Error, out: &mut Output<Bytes>) {
        self.ended = true;
        let (status, body) = error_body(error);
        self.status = status;
        if self.stream {
            self.frames.json(None, &body);
            self.flush(out);
        } else {
            out.push(body.to_string().into_bytes().into());
        }
    }

    /// Writes the end: the last chunk with the finish reason, the usage chunk
    /// and `[DONE]` (streaming), or the whole body (non-streaming).
    fn end(&mut self, out: &mut Output<Bytes>) -> Result<(), Error> {
        self.ended = true;
        let reason = self.finish_reason().to_owned();
        let usage = self.usage.take().map(wire_usage);
        if self.stream {
            let mut delta = ChatMessage::default();
            if !self.started {
                delta.role = Some(ChatRole::Assistant);
                delta.content = Some(MessageContent::Text(String::new()));
            }
            self.chunk(&[chunk_choice(delta, Some(reason))], None, out);
            if let Some(usage) = usage.filter(|_| self.include_usage) {
                self.chunk(&[], Some(&usage), out);
            }
            self.frames.event(None, "[DONE]");
            self.flush(out);
        } else {
            let mut message = std::mem::take(&mut self.message);
            message.role = Some(ChatRole::Assistant);
            if message.content.is_none()
                && message.tool_calls.is_none()
                && message.refusal.is_none()
            {
                message.content = Some(MessageContent::Text(String::new()));
            }
            let body = ChatCompletion {
                id: self.id.clone(),
                object: "chat.completion".into(),
                created: self.created,
                model: self.model.clone(),
                choices: vec![Choice {
                    index: 0,
                    message,
                    finish_reason: Some(reason),
                    logprobs: None,
                }],
                usage,
            };
            out.push(serde_json::to_vec(&body).unwrap_or_default().into());
        }
        Ok(())
    }
}

fn wire_usage(usage: Usage) -> CompletionUsage {
    CompletionUsage {
        prompt_tokens: usage.input_tokens,
        completion_tokens: usage.output_tokens,
        total_tokens: usage.input_tokens.saturating_add(usage.output_tokens),
        prompt_tokens_details: PromptTokensDetails::new(
            usage.cached_input_tokens,
            usage.cache_write_input_tokens(),
        ),
        completion_tokens_details: usage
            .reasoning_tokens
            .map(|reasoning_tokens| CompletionTokensDetails { reasoning_tokens }),
    }
}

/// Whether a decoded request asked for the usage chunk of a stream
/// (`stream_options.include_usage`, kept in `options.extra`).
///
/// ```
/// use lmstack::provider::openai_chat::{decode_request, include_usage};
///
/// let body = br#"{"messages":[{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"include_usage":true}}"#;
/// assert!(include_usage(&decode_request(body).unwrap()));
/// ```
pub fn include_usage(request: &ChatRequest) -> bool {
    request
        .options
        .extra
        .get("stream_options")
        .and_then(|options| options.get("include_usage"))
        == Some(&Value::Bool(true))
}

/// The HTTP status and the OpenAI error body for `error`:
/// `{"error": {"message", "type", "param", "code"}}`, the status from
/// [`Error::http_status`]. The type follows the status
/// (`invalid_request_error` for 400, 413 and 422, `rate_limit_error` for 429,
/// `server_error` for 5xx); an upstream provider's own `param` and `code` are
/// passed on. The message is the error's [`client_message`](Error::client_message):
/// it does not say where the upstream lives.
///
/// ```
/// use lmstack::Error;
/// use lmstack::provider::openai_chat::error_body;
/// use serde_json::json;
///
/// let (status, body) = error_body(&Error::InvalidRequest("messages: missing field `messages`".into()));
/// assert_eq!(status, 400);
/// assert_eq!(body, json!({"error": {
///     "message": "messages: missing field `messages`",
///     "type": "invalid_request_error", "param": null, "code": null,
/// }}));
/// ```
pub fn error_body(error: &Error) -> (u16, Value) {
    openai_shared::error_body(error)
}

/// The body of `GET /v1/models`: each model's id and creation time (seconds
/// since the Unix epoch), owned by `lmstack`.
///
/// ```
/// use lmstack::provider::openai_chat::models_body;
/// use serde_json::json;
///
/// assert_eq!(models_body(&[("gpt-4o", 1_715_367_049)]), json!({
///     "object": "list",
///     "data": [{"id": "gpt-4o", "object": "model", "created": 1_715_367_049, "owned_by": "lmstack"}],
/// }));
/// ```
pub fn models_body(models: &[(&str, u64)]) -> Value {
    let data: Vec<Value> = models
        .iter()
        .map(|(id, created)| model_body(id, *created))
        .collect();
    json!({"object": "list", "data": data})
}

/// The body of `GET /v1/models/{id}`: one model, as [`models_body`] lists it.
///
/// ```
/// use lmstack::provider::openai_chat::model_body;
/// assert_eq!(model_body("gpt-4o", 1)["object"], "model");
/// ```
pub fn model_body(id: &str, created: u64) -> Value {
    json!({"id": id, "object": "model", "created": created, "owned_by": "lmstack"})
}

#[cfg(test)]
mod tests {
    use super::super::types::ChatCompletionChunk;
    use super::*;

    /// The encoder's borrowed chunk, framed, is the public chunk type's JSON
    /// as `encode_event` frames it.
    #[test]
    fn a_frame_is_a_chat_completion_chunk_as_sse() {
        let delta = ChatMessage {
            content: Some(MessageContent::Text("a \"line\"\nand more".into())),
            ..ChatMessage::default()
        };
        let choice = chunk_choice(delta, Some("stop".into()));
        let usage = CompletionUsage {
            prompt_tokens: 3,
            completion_tokens: 5,
            total_tokens: 8,
            ..CompletionUsage::default()
        };
        for (choices, usage) in [(vec![choice], None), (Vec::new(), Some(usage))] {
            let borrowed = ChunkFrame {
                id: "chatcmpl-1",
                object: "chat.completion.chunk",
                created: 7,
                model: "m",
                choices: &choices,
                usage: usage.as_ref(),
            };
            let owned = ChatCompletionChunk {
                id: "chatcmpl-1".into(),
                object: "chat.completion.chunk".into(),
                created: 7,
                model: "m".into(),
                choices: choices.clone(),
                usage: usage.clone(),
            };
            let mut expected = Vec::new();
            let owned = serde_json::to_string(&owned).unwrap();
            crate::provider::sse::encode_event(&mut expected, None, &owned);
            let mut frames = SseWriter::new();
            frames.json(None, &borrowed);
            let written = frames.take().unwrap();
            assert_eq!(
                std::str::from_utf8(&written).unwrap(),
                std::str::from_utf8(&expected).unwrap()
            );
        }
    }
}

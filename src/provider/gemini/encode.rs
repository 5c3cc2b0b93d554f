//! The server half, outward: canonical events → `GenerateContentResponse`s
//! ([`ReplyEncoder`]: SSE events, the JSON array of `streamGenerateContent`
//! without `alt=sse`, or one body), an [`Error`] → Google's error body
//! ([`error_body`]), and the model list ([`models_body`]).
//!
//! No IO, no clock, no randomness: the response id comes from the caller.

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::lower::{THOUGHT_SIGNATURE_KEY, content_part};
use super::types::{FunctionCall, Part};
use crate::message::{CitationSource, Metadata, Usage};
use crate::provider::EncodeReply;
use crate::service::Output;
use crate::{ContentBlock, Error, Event, FinishReason, Message, Role, ToolCall, ToolCallDelta};

/// How a reply is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamMode {
    /// One `GenerateContentResponse` body (`:generateContent`).
    Whole,
    /// One `data:` event per response (`:streamGenerateContent?alt=sse`).
    Sse,
    /// A JSON array of responses, written as they come
    /// (`:streamGenerateContent` without `alt=sse`).
    JsonArray,
}

/// Encodes a reply's canonical events as `GenerateContentResponse`s: in
/// streaming modes one response per part as it comes — text, a thought, a
/// whole function call — and a last one with `finishReason`,
/// `usageMetadata` and the grounding; in [`StreamMode::Whole`] all of it in
/// one body, consecutive text joined. Every response names `modelVersion`
/// and `responseId`.
///
/// - text deltas and assistant text → `text` parts, with their
///   [`THOUGHT_SIGNATURE_KEY`] as `thoughtSignature`; reasoning → `thought:
///   true` parts with their signature (a signature without text as an empty
///   text part, as Gemini 3 ends a turn); redacted reasoning is left out;
/// - a call's fragments are gathered and sent whole, as one `functionCall`
///   (its arguments an object; not JSON: `{}`), with its `id` and its
///   signature; calls the provider ran itself are left out;
/// - assistant images, documents and audio → `inlineData` parts;
/// - citations of web pages on text → the last response's
///   `groundingMetadata` (`groundingChunks` of `web` `uri`/`title`,
///   `groundingSupports` whose segments count UTF-8 bytes from the start of
///   the text they came with, as the [`Lifter`](super::Lifter) reads them);
///   other citations are left out;
/// - usage (summed over a tool loop's rounds) → `usageMetadata`:
///   `promptTokenCount`, `candidatesTokenCount` (output without reasoning),
///   `thoughtsTokenCount`, `cachedContentTokenCount`, `totalTokenCount`;
/// - the finish reason → `STOP` (stop, tool calls, none), `MAX_TOKENS`,
///   `SAFETY` (content filter, refusal), another uppercased.
///
/// An error ends the reply: mid-stream as a last response holding it
/// (`{"error": {…}}`, [`error_body`]'s), or as the whole body (and
/// [`status`](ReplyEncoder::status)).
///
/// ```
/// use lmstack::provider::gemini::{ReplyEncoder, StreamMode};
/// use lmstack::service::{Machine, Output};
/// use lmstack::{Event, FinishReason};
///
/// let mut encoder = ReplyEncoder::new("r1", "gemini-2.5-flash", StreamMode::Sse);
/// let mut out = Output::new();
/// for event in [Event::text("Hel"), Event::text("lo"), Event::finish(FinishReason::Stop)] {
///     encoder.push(Ok(event), &mut out).unwrap();
/// }
/// encoder.finish(&mut out).unwrap();
/// let text: String = out.drain().map(|frame| String::from_utf8_lossy(&frame).into_owned()).collect();
/// assert!(text.starts_with(r#"data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Hel"}]}"#));
/// assert!(text.contains(r#""finishReason":"STOP""#));
///
/// let mut encoder = ReplyEncoder::new("r1", "gemini-2.5-flash", StreamMode::Whole);
/// for event in [Event::text("Hel"), Event::text("lo")] {
///     encoder.push(Ok(event), &mut out).unwrap();
/// }
/// encoder.finish(&mut out).unwrap();
/// let body: serde_json::Value = serde_json::from_slice(&out.pop().unwrap()).unwrap();
/// assert_eq!(body["candidates"][0]["content"]["parts"], serde_json::json!([{"text": "Hello"}]));
/// ```
#[derive(Debug)]
pub struct ReplyEncoder {
    id: String,
    model: String,
    mode: StreamMode,
    /// Responses written so far (streaming).
    written: usize,
    /// The parts so far ([`StreamMode::Whole`]).
    parts: Vec<Part>,
    call: Option<OpenCall>,
    /// The text run being written (text since any other part), for the
    /// offsets of its citations.
    run: String,
    grounding: Grounding,
    usage: Option<Usage>,
    finish_reason: Option<FinishReason>,
    ended: bool,
    status: u16,
}

/// A call whose fragments are arriving.
#[derive(Debug)]
struct OpenCall {
    index: u32,
    id: Option<String>,
    name: String,
    arguments: String,
    metadata: Metadata,
    /// The provider ran it: left out.
    skipped: bool,
}

/// The grounding of the reply's text: its web sources and what each supports.
#[derive(Debug, Default)]
struct Grounding {
    chunks: Vec<(String, Option<String>)>,
    supports: Vec<Value>,
}

impl ReplyEncoder {
    /// An encoder of one reply, for response `id`, answered by `model`,
    /// written in `mode`.
    pub fn new(id: impl Into<String>, model: impl Into<String>, mode: StreamMode) -> Self {
        ReplyEncoder {
            id: id.into(),
            model: model.into(),
            mode,
            written: 0,
            parts: Vec::new(),
            call: None,
            run: String::new(),
            grounding: Grounding::default(),
            usage: None,
            finish_reason: None,
            ended: false,
            status: 200,
        }
    }

    /// The HTTP status for the reply: 200, or once an error was encoded,
    /// [`error_body`]'s status for it.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The reply's `Content-Type`: `text/event-stream` for SSE, else
    /// `application/json`.
    pub fn content_type(&self) -> &'static str {
        match self.mode {
            StreamMode::Sse => "text/event-stream",
            StreamMode::Whole | StreamMode::JsonArray => "application/json",
        }
    }

    fn text(&mut self, text: String, metadata: &Metadata, out: &mut Output<Bytes>) {
        self.close_call(out);
        self.run.push_str(&text);
        self.cite(metadata);
        let signature = signature(metadata);
        if text.is_empty() && signature.is_none() {
            return;
        }
        let part = Part {
            thought_signature: signature,
            ..Part::text(text)
        };
        self.part(part, out);
    }

    fn reasoning(&mut self, text: String, signature: Option<String>, out: &mut Output<Bytes>) {
        self.close_call(out);
        self.run.clear();
        if text.is_empty() && signature.is_none() {
            return;
        }
        let part = Part {
            thought: (!text.is_empty()).then_some(true),
            thought_signature: signature,
            ..Part::text(text)
        };
        self.part(part, out);
    }

    fn fragment(&mut self, fragment: ToolCallDelta, out: &mut Output<Bytes>) {
        self.run.clear();
        let continued = self.call.as_ref().is_some_and(|open| {
            open.index == fragment.index
                && !matches!((fragment.id(), &open.id), (Some(id), Some(open)) if id != open)
        });
        if !continued {
            self.close_call(out);
            self.call = Some(OpenCall {
                index: fragment.index,
                id: fragment.id().map(str::to_owned),
                name: fragment.name().unwrap_or_default().to_owned(),
                arguments: String::new(),
                metadata: Metadata::new(),
                skipped: fragment.provider_executed(),
            });
        }
        if let Some(open) = &mut self.call {
            if open.name.is_empty()
                && let Some(name) = fragment.name()
            {
                open.name = name.to_owned();
            }
            open.arguments.push_str(&fragment.arguments_delta);
            open.metadata.merge_missing(&fragment.metadata);
        }
    }

    /// Sends the call being gathered, if any.
    fn close_call(&mut self, out: &mut Output<Bytes>) {
        let Some(open) = self.call.take() else {
            return;
        };
        if open.skipped {
            return;
        }
        let arguments = match serde_json::from_str::<Value>(&open.arguments) {
            Ok(arguments @ Value::Object(_)) => arguments,
            _ => Value::Object(Map::new()),
        };
        let part = call_part(open.id, open.name, arguments, &open.metadata);
        self.part(part, out);
    }

    fn message(&mut self, message: Message, out: &mut Output<Bytes>) {
        match message {
            Message::Text(text) if text.role == Role::Assistant => {
                self.run.clear();
                self.text(text.text, &text.metadata, out);
                self.run.clear();
            }
            Message::Multimodal(multimodal) if multimodal.role == Role::Assistant => {
                self.close_call(out);
                self.run.clear();
                for block in &multimodal.content {
                    let part = match block {
                        ContentBlock::Text { text, .. } => Ok(Part::text(text)),
                        block => content_part(block),
                    };
                    // Media by reference or a bare URL has no place in a reply.
                    if let Ok(part) = part {
                        self.part(part, out);
                    }
                }
            }
            Message::Reasoning(reasoning) if !reasoning.redacted => {
                self.reasoning(reasoning.text, reasoning.signature, out);
            }
            Message::ToolCalls(calls) => {
                self.close_call(out);
                self.run.clear();
                for call in calls
                    .calls
                    .into_iter()
                    .filter(|call| !call.provider_executed)
                {
                    let ToolCall {
                        id,
                        name,
                        arguments,
                        metadata,
                        ..
                    } = call;
                    let arguments = match arguments {
                        arguments @ Value::Object(_) => arguments,
                        _ => Value::Object(Map::new()),
                    };
                    let part = call_part(Some(id), name, arguments, &metadata);
                    self.part(part, out);
                }
            }
            Message::Usage(usage) => self.add_usage(usage),
            // Tool results, a tool loop's aggregates, user and system
            // messages are not part of the reply.
            _ => {}
        }
    }

    fn add_usage(&mut self, usage: Usage) {
        match &mut self.usage {
            None => self.usage = Some(usage),
            Some(total) => total.add(&usage),
        }
    }

    /// The web citations of `metadata`, whose spans count characters of the
    /// run from its start, as grounding supports in bytes.
    fn cite(&mut self, metadata: &Metadata) {
        for citation in metadata.citations() {
            let (CitationSource::Url { url, title, .. }, Some(span)) =
                (&citation.source, citation.span)
            else {
                continue;
            };
            let byte = |chars: usize| {
                self.run
                    .char_indices()
                    .nth(chars)
                    .map_or(self.run.len(), |(at, _)| at)
            };
            let (start, end) = (byte(span.start), byte(span.end));
            let chunks = &mut self.grounding.chunks;
            let index = match chunks.iter().position(|(uri, _)| uri == url) {
                Some(index) => index,
                None => {
                    chunks.push((url.clone(), title.clone()));
                    chunks.len() - 1
                }
            };
            self.grounding.supports.push(json!({
                "segment": {"startIndex": start, "endIndex": end},
                "groundingChunkIndices": [index],
            }));
        }
    }

    /// Writes a part: a response of its own (streaming), or joined to the
    /// body's parts.
    fn part(&mut self, part: Part, out: &mut Output<Bytes>) {
        if self.mode != StreamMode::Whole {
            let candidate = json!({"content": {"role": "model", "parts": [part]}, "index": 0});
            let response = self.response(candidate, None);
            self.write(&response, out);
            return;
        }
        if let Some(last) = self.parts.last_mut()
            && joinable(last, &part)
        {
            if let (Some(text), Some(more)) = (&mut last.text, part.text) {
                text.push_str(&more);
            }
            if last.thought_signature.is_none() {
                last.thought_signature = part.thought_signature;
            }
            return;
        }
        self.parts.push(part);
    }

    /// A response holding `candidate` (and `usage`).
    fn response(&self, candidate: Value, usage: Option<Value>) -> Value {
        let mut response = Map::new();
        response.insert("candidates".into(), Value::Array(vec![candidate]));
        if let Some(usage) = usage {
            response.insert("usageMetadata".into(), usage);
        }
        response.insert("modelVersion".into(), self.model.clone().into());
        response.insert("responseId".into(), self.id.clone().into());
        Value::Object(response)
    }

    /// Writes one response in the stream's framing.
    fn write(&mut self, response: &Value, out: &mut Output<Bytes>) {
        let json = response.to_string();
        let frame = match self.mode {
            StreamMode::Sse => format!("data: {json}\n\n"),
            StreamMode::JsonArray if self.written == 0 => format!("[{json}"),
            StreamMode::JsonArray => format!(",\r\n{json}"),
            StreamMode::Whole => json,
        };
        self.written += 1;
        out.push(frame.into_bytes().into());
    }

    /// The wire's finish reason.
    fn finish_reason(&self) -> String {
        match &self.finish_reason {
            None | Some(FinishReason::Stop | FinishReason::ToolCalls) => "STOP".into(),
            Some(FinishReason::Length) => "MAX_TOKENS".into(),
            Some(FinishReason::ContentFilter | FinishReason::Refusal) => "SAFETY".into(),
            Some(FinishReason::Other(other)) => other.to_ascii_uppercase(),
        }
    }

    fn grounding_metadata(&mut self) -> Option<Value> {
        let grounding = std::mem::take(&mut self.grounding);
        if grounding.supports.is_empty() {
            return None;
        }
        let chunks: Vec<Value> = grounding
            .chunks
            .into_iter()
            .map(|(uri, title)| {
                let mut web = Map::new();
                web.insert("uri".into(), uri.into());
                if let Some(title) = title {
                    web.insert("title".into(), title.into());
                }
                json!({ "web": web })
            })
            .collect();
        Some(json!({"groundingChunks": chunks, "groundingSupports": grounding.supports}))
    }
}

/// Whether `part` may be joined to `last` in a whole body: text to text or
/// thought to thought, at most one of them signed.
fn joinable(last: &Part, part: &Part) -> bool {
    let plain = |part: &Part| {
        part.text.is_some()
            && part.function_call.is_none()
            && part.inline_data.is_none()
            && part.extra.is_empty()
    };
    // An empty signed text marks the end of a turn: a part of its own.
    let marker = |part: &Part| part.text.as_deref() == Some("") && part.thought_signature.is_some();
    plain(last)
        && plain(part)
        && !marker(last)
        && !marker(part)
        && last.thought == part.thought
        && (last.thought_signature.is_none() || part.thought_signature.is_none())
}

/// The signature kept in `metadata`, if a string.
fn signature(metadata: &Metadata) -> Option<String> {
    metadata
        .get(THOUGHT_SIGNATURE_KEY)
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn call_part(id: Option<String>, name: String, arguments: Value, metadata: &Metadata) -> Part {
    Part {
        function_call: Some(FunctionCall {
            name: Some(name),
            args: Some(arguments),
            id,
            ..FunctionCall::default()
        }),
        thought_signature: signature(metadata),
        ..Part::default()
    }
}

fn wire_usage(usage: &Usage) -> Value {
    let reasoning = usage.reasoning_tokens.unwrap_or_default();
    let mut fields = Map::new();
    fields.insert("promptTokenCount".into(), usage.input_tokens.into());
    fields.insert(
        "candidatesTokenCount".into(),
        usage.output_tokens.saturating_sub(reasoning).into(),
    );
    if let Some(cached) = usage.cached_input_tokens {
        fields.insert("cachedContentTokenCount".into(), cached.into());
    }
    if let Some(reasoning) = usage.reasoning_tokens {
        fields.insert("thoughtsTokenCount".into(), reasoning.into());
    }
    let total = usage.input_tokens.saturating_add(usage.output_tokens);
    fields.insert("totalTokenCount".into(), total.into());
    Value::Object(fields)
}

impl EncodeReply for ReplyEncoder {
    fn ended(&self) -> bool {
        self.ended
    }

    fn event(&mut self, event: Event, out: &mut Output<Bytes>) -> Result<(), Error> {
        match event {
            Event::TextDelta(delta) => self.text(delta.text, &delta.metadata, out),
            Event::ReasoningDelta(delta) => {
                self.reasoning(delta.text, delta.signature, out);
            }
            Event::ToolCallDelta(fragment) => self.fragment(fragment, out),
            Event::Message { message } => self.message(message, out),
            Event::Usage(usage) => self.add_usage(usage),
            Event::Finish { reason } => {
                self.close_call(out);
                self.finish_reason = Some(reason);
            }
        }
        Ok(())
    }

    /// Ends a reply that failed with `error`: a stream with a last response
    /// `{"error": {…}}` ([`error_body`]'s) and nothing after it; a whole reply
    /// becomes that error body.
    fn fail(&mut self, error: &Error, out: &mut Output<Bytes>) {
        self.ended = true;
        let (status, body) = error_body(error);
        self.status = status;
        match self.mode {
            StreamMode::Whole => out.push(body.to_string().into_bytes().into()),
            mode => {
                self.write(&body, out);
                if mode == StreamMode::JsonArray {
                    out.push(Bytes::from_static(b"]"));
                }
            }
        }
    }

    /// Writes the end: the last response, with the finish reason, the usage
    /// and the grounding (streaming, then `]` for the array), or the whole
    /// body.
    fn end(&mut self, out: &mut Output<Bytes>) -> Result<(), Error> {
        self.close_call(out);
        self.ended = true;
        let mut candidate = Map::new();
        if self.mode == StreamMode::Whole {
            let parts = std::mem::take(&mut self.parts);
            candidate.insert("content".into(), json!({"role": "model", "parts": parts}));
        }
        candidate.insert("finishReason".into(), self.finish_reason().into());
        candidate.insert("index".into(), 0.into());
        if let Some(grounding) = self.grounding_metadata() {
            candidate.insert("groundingMetadata".into(), grounding);
        }
        let usage = self.usage.as_ref().map(wire_usage);
        let response = self.response(Value::Object(candidate), usage);
        self.write(&response, out);
        if self.mode == StreamMode::JsonArray {
            out.push(Bytes::from_static(b"]"));
        }
        Ok(())
    }
}

/// The HTTP status and Google's error body for `error`: `{"error": {"code",
/// "message", "status"}}`, the code from [`Error::http_status`] and the status
/// its name (`INVALID_ARGUMENT`, `UNAUTHENTICATED`, `PERMISSION_DENIED`,
/// `NOT_FOUND`, `RESOURCE_EXHAUSTED`, `UNIMPLEMENTED`, `INTERNAL`,
/// `UNAVAILABLE`, `DEADLINE_EXCEEDED`…; a Gemini upstream's own name is
/// passed on). The message is the error's
/// [`client_message`](Error::client_message).
///
/// ```
/// use lmstack::Error;
/// use lmstack::provider::gemini::error_body;
/// use serde_json::json;
///
/// let (status, body) = error_body(&Error::InvalidRequest("contents: missing".into()));
/// assert_eq!(status, 400);
/// assert_eq!(body, json!({"error": {"code": 400, "message": "contents: missing",
///     "status": "INVALID_ARGUMENT"}}));
/// ```
pub fn error_body(error: &Error) -> (u16, Value) {
    let status = error.http_status();
    let upstream = error
        .provider_error()
        .filter(|upstream| upstream.provider == super::lower::PROVIDER)
        .and_then(|upstream| upstream.error_type.clone())
        .filter(|name| {
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
        });
    let name = upstream.unwrap_or_else(|| status_name(status).to_owned());
    let message = match error {
        Error::InvalidRequest(message) | Error::Refused { message, .. } => message.clone(),
        other => other.client_message(),
    };
    let body = json!({"error": {"code": status, "message": message, "status": name}});
    (status, body)
}

/// The name Google's APIs give an HTTP status.
fn status_name(status: u16) -> &'static str {
    match status {
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        408 | 504 => "DEADLINE_EXCEEDED",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        501 => "UNIMPLEMENTED",
        502 | 503 | 529 => "UNAVAILABLE",
        400..=499 => "INVALID_ARGUMENT",
        _ => "INTERNAL",
    }
}

/// The body of `GET /v1beta/models`: each model served, as Google lists a
/// model (`name` `models/…`, the methods it answers).
///
/// ```
/// use lmstack::provider::gemini::models_body;
///
/// let body = models_body(&["flash"]);
/// assert_eq!(body["models"][0]["name"], "models/flash");
/// assert_eq!(body["models"][0]["supportedGenerationMethods"][0], "generateContent");
/// ```
pub fn models_body(models: &[&str]) -> Value {
    let models: Vec<Value> = models
        .iter()
        .map(|name| {
            json!({
                "name": format!("models/{name}"),
                "displayName": name,
                "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"],
            })
        })
        .collect();
    json!({ "models": models })
}

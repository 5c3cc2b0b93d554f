//! The server direction of Chat Completions, pure: a client's request body →
//! a canonical [`ChatRequest`] ([`decode_request`]), canonical events → the
//! reply's SSE frames or JSON body ([`Encoder`]), an [`Error`] → the status and
//! error body ([`error_body`]), and the model list ([`models_body`]).
//!
//! No IO, no clock, no randomness: the response id and `created` come from the
//! caller. Everything is written with the typed wire of [`types`](super::types),
//! the one the lowering writes.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::lower::{REASONING_FIELD_KEY, REFUSAL_KEY, lower_call};
use super::types::{
    ChatCompletion, ChatCompletionRequest, ChatMessage, ChatRole, Choice, ChunkChoice,
    CompletionTokensDetails, CompletionUsage, ContentPart, ErrorBody, ErrorObject, FileData,
    FunctionCall, MessageContent, PromptTokensDetails, ToolCall as WireToolCall,
    ToolChoice as WireToolChoice,
};
use crate::message::{InvalidCall, InvalidCallKind, Metadata, ReasoningMessage, Usage};
use crate::provider::sse::encode_event;
use crate::service::{Machine, Output};
use crate::{
    ChatOptions, ChatRequest, ContentBlock, Error, Event, FinishReason, Media, Message, Role,
    ToolCall, ToolCallDelta, ToolChoice, ToolResult, ToolSpec,
};

/// Reads a client's Chat Completions request body into a canonical request.
///
/// - `system` and `developer` messages become system text; `user` messages
///   text (a string) or multimodal (an array of parts: text, `image_url` — a
///   base64 `data:` URI becomes inline media, any other URL a URL —,
///   `input_audio`, `file` with `file_data`); an `assistant` message becomes its
///   reasoning (`reasoning_content` or `reasoning`, the field kept under
///   [`REASONING_FIELD_KEY`]), its text, its refusal (text marked
///   [`REFUSAL_KEY`]) and its `tool_calls`, in that order; a run of `tool`
///   messages becomes one `tool_results` message, each result named after the
///   call it answers;
/// - `tools`, `tool_choice`, `model`, `temperature`, `stream` and the token
///   limit (`max_completion_tokens`, else `max_tokens`) fill the options; every
///   other field — `top_p`, `stop`, `n`, `seed`, `response_format`, `user`,
///   `reasoning_effort`, `stream_options`, unknown ones — goes in
///   `options.extra`, checked first where its type is known.
///
/// Bad input is [`Error::InvalidRequest`] naming the field at fault; the work is
/// linear in the body, which the server bounds.
///
/// ```
/// use lmstack::provider::openai::decode_request;
/// use lmstack::{Error, Message};
///
/// let body = br#"{"model":"gpt-4o","stream":true,"seed":7,
///     "messages":[{"role":"developer","content":"Be brief."},{"role":"user","content":"Hi"}]}"#;
/// let request = decode_request(body).unwrap();
/// assert_eq!(request.messages, vec![Message::system("Be brief."), Message::user("Hi")]);
/// assert!(request.options.stream);
/// assert_eq!(request.options.extra["seed"], 7);
///
/// let bad = br#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}"#;
/// let Err(Error::InvalidRequest(message)) = decode_request(bad) else { panic!() };
/// assert_eq!(message, "messages[0].content[0].image_url: missing field `url`");
/// ```
pub fn decode_request(body: &[u8]) -> Result<ChatRequest, Error> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let wire: ChatCompletionRequest =
        serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
            let path = error.path().to_string();
            invalid(&path, &without_position(error.inner()))
        })?;
    deserializer
        .end()
        .map_err(|error| invalid(".", &without_position(&error)))?;
    request_from_wire(wire)
}

/// A serde_json error's message without its ` at line L column C` (the path
/// names the place).
fn without_position(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rfind(" at line ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

fn invalid(path: &str, message: &str) -> Error {
    if path == "." || path.is_empty() {
        Error::InvalidRequest(message.to_owned())
    } else {
        Error::InvalidRequest(format!("{path}: {message}"))
    }
}

fn request_from_wire(wire: ChatCompletionRequest) -> Result<ChatRequest, Error> {
    if let Some(n) = wire.n.filter(|&n| n != 1) {
        return Err(invalid(
            "n",
            &format!("{n} choices asked for; this server answers with one"),
        ));
    }
    if wire.messages.is_empty() {
        return Err(invalid("messages", "at least one message is needed"));
    }
    let mut options = ChatOptions {
        model: wire.model,
        temperature: wire.temperature,
        max_tokens: wire.max_completion_tokens.or(wire.max_tokens),
        stream: wire.stream.unwrap_or(false),
        ..ChatOptions::default()
    };
    for (i, tool) in wire.tools.into_iter().flatten().enumerate() {
        if tool.kind != "function" {
            return Err(invalid(
                &format!("tools[{i}].type"),
                &format!("only `function` tools are served, not `{}`", tool.kind),
            ));
        }
        let function = tool.function;
        options.tools.push(ToolSpec::new(
            function.name,
            function.description.unwrap_or_default(),
            function
                .parameters
                .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
        ));
    }
    options.tool_choice = match wire.tool_choice {
        None => None,
        Some(WireToolChoice::Mode(mode)) => Some(match mode.as_str() {
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            other => {
                return Err(invalid(
                    "tool_choice",
                    &format!("`{other}` is not auto, none or required"),
                ));
            }
        }),
        Some(WireToolChoice::Named(named)) if named.kind == "function" => {
            Some(ToolChoice::Tool(named.function.name))
        }
        Some(WireToolChoice::Named(named)) => {
            return Err(invalid(
                "tool_choice.type",
                &format!("only `function` is served, not `{}`", named.kind),
            ));
        }
    };
    let extra = &mut options.extra;
    keep(extra, "top_p", wire.top_p);
    keep(extra, "stream_options", wire.stream_options);
    keep(extra, "stop", wire.stop);
    keep(extra, "n", wire.n);
    keep(extra, "seed", wire.seed);
    keep(extra, "response_format", wire.response_format);
    keep(extra, "user", wire.user);
    keep(extra, "reasoning_effort", wire.reasoning_effort);
    extra.extend(wire.extra);
    let mut history = History::default();
    for (i, message) in wire.messages.into_iter().enumerate() {
        history.message(i, message)?;
    }
    Ok(ChatRequest {
        messages: history.finish(),
        options,
    })
}

/// Keeps a typed option in `extra`, as JSON.
fn keep<T: Serialize>(extra: &mut Map<String, Value>, key: &str, value: Option<T>) {
    if let Some(value) = value.and_then(|value| serde_json::to_value(value).ok()) {
        extra.insert(key.into(), value);
    }
}

/// The walk over a request's messages: canonical messages out, the run of tool
/// results being gathered, and the names of the calls seen (a `tool` message
/// names only its call's id).
#[derive(Default)]
struct History {
    out: Vec<Message>,
    results: Vec<ToolResult>,
    names: HashMap<String, String>,
}

impl History {
    fn message(&mut self, i: usize, message: ChatMessage) -> Result<(), Error> {
        let at = |field: &str| format!("messages[{i}].{field}");
        let role = message
            .role
            .ok_or_else(|| invalid(&format!("messages[{i}]"), "missing field `role`"))?;
        if role != ChatRole::Tool && !self.results.is_empty() {
            let results = std::mem::take(&mut self.results);
            self.out.push(Message::tool_results(results));
        }
        match role {
            ChatRole::System | ChatRole::Developer => {
                let text = text_only(message.content, &at("content"), "a system message")?;
                self.out.push(Message::system(text));
            }
            ChatRole::User => match message.content {
                Some(MessageContent::Text(text)) => self.out.push(Message::user(text)),
                Some(MessageContent::Parts(parts)) => {
                    let blocks = blocks(parts, &at("content"))?;
                    self.out.push(Message::multimodal(Role::User, blocks));
                }
                None => return Err(invalid(&at("content"), "a user message needs content")),
            },
            ChatRole::Assistant => self.assistant(i, message)?,
            ChatRole::Tool => {
                let call_id = message
                    .tool_call_id
                    .ok_or_else(|| invalid(&at("tool_call_id"), "a tool message needs it"))?;
                let content = match message.content {
                    Some(MessageContent::Text(text)) => vec![ContentBlock::text(text)],
                    Some(MessageContent::Parts(parts)) => blocks(parts, &at("content"))?,
                    None => Vec::new(),
                };
                let name = self
                    .names
                    .get(&call_id)
                    .cloned()
                    .or(message.name)
                    .unwrap_or_default();
                self.results.push(ToolResult::new(call_id, name, content));
            }
            ChatRole::Function => {
                return Err(invalid(
                    &at("role"),
                    "the legacy `function` role is not served; send `tool` messages",
                ));
            }
        }
        Ok(())
    }

    fn assistant(&mut self, i: usize, message: ChatMessage) -> Result<(), Error> {
        let reasoning = [
            ("reasoning_content", message.reasoning_content),
            ("reasoning", message.reasoning),
        ]
        .into_iter()
        .find_map(|(field, text)| text.map(|text| (field, text)));
        if let Some((field, text)) = reasoning {
            let mut metadata = Metadata::new();
            metadata.insert(REASONING_FIELD_KEY, field.into());
            self.out.push(Message::Reasoning(ReasoningMessage {
                text,
                signature: None,
                redacted: false,
                metadata,
            }));
        }
        let mut refusal = message.refusal;
        match message.content {
            Some(MessageContent::Text(text)) => self.out.push(Message::assistant(text)),
            Some(MessageContent::Parts(parts)) => {
                let mut text = String::new();
                for (j, part) in parts.into_iter().enumerate() {
                    match part {
                        ContentPart::Text { text: piece } => text.push_str(&piece),
                        ContentPart::Refusal { refusal: piece } => {
                            refusal.get_or_insert_default().push_str(&piece)
                        }
                        _ => {
                            return Err(invalid(
                                &format!("messages[{i}].content[{j}]"),
                                "an assistant message takes text and refusal parts only",
                            ));
                        }
                    }
                }
                self.out.push(Message::assistant(text));
            }
            None => {}
        }
        if let Some(refusal) = refusal {
            let mut metadata = Metadata::new();
            metadata.insert(REFUSAL_KEY, true.into());
            self.out
                .push(Message::assistant(refusal).with_metadata(metadata));
        }
        let mut calls = Vec::new();
        for (j, call) in message.tool_calls.into_iter().flatten().enumerate() {
            let at = |field: &str| format!("messages[{i}].tool_calls[{j}].{field}");
            if let Some(kind) = call.kind.as_deref().filter(|kind| *kind != "function") {
                return Err(invalid(
                    &at("type"),
                    &format!("only `function` calls are served, not `{kind}`"),
                ));
            }
            let id = call
                .id
                .ok_or_else(|| invalid(&at("id"), "a call needs an id"))?;
            let name = call
                .function
                .name
                .ok_or_else(|| invalid(&at("function.name"), "a call needs a name"))?;
            let call = read_call(id, name, call.function.arguments.unwrap_or_default());
            self.names.insert(call.id.clone(), call.name.clone());
            calls.push(call);
        }
        if !calls.is_empty() {
            self.out.push(Message::tool_calls(calls));
        }
        Ok(())
    }

    fn finish(mut self) -> Vec<Message> {
        if !self.results.is_empty() {
            self.out.push(Message::tool_results(self.results));
        }
        self.out
    }
}

/// A call whose arguments are JSON text: parsed, or kept raw and marked invalid
/// (as the joiner does with a model's malformed arguments), so that lowering
/// writes it back as it came.
fn read_call(id: String, name: String, arguments: String) -> ToolCall {
    if arguments.trim().is_empty() {
        return ToolCall::new(id, name, Value::Object(Map::new()));
    }
    match serde_json::from_str(&arguments) {
        Ok(value) => ToolCall::new(id, name, value),
        Err(error) => ToolCall {
            invalid: Some(InvalidCall {
                kind: InvalidCallKind::MalformedArguments,
                message: format!("the arguments are not valid JSON: {error}"),
                raw: Some(arguments),
            }),
            ..ToolCall::new(id, name, Value::Null)
        },
    }
}

/// The text of a message that takes text only (a string, or text parts).
fn text_only(content: Option<MessageContent>, at: &str, what: &str) -> Result<String, Error> {
    match content {
        Some(MessageContent::Text(text)) => Ok(text),
        Some(MessageContent::Parts(parts)) => {
            let mut text = String::new();
            for (j, part) in parts.into_iter().enumerate() {
                match part {
                    ContentPart::Text { text: piece } => text.push_str(&piece),
                    _ => {
                        return Err(invalid(
                            &format!("{at}[{j}]"),
                            &format!("{what} takes text only"),
                        ));
                    }
                }
            }
            Ok(text)
        }
        None => Err(invalid(at, &format!("{what} needs content"))),
    }
}

/// Content parts → content blocks.
fn blocks(parts: Vec<ContentPart>, at: &str) -> Result<Vec<ContentBlock>, Error> {
    parts
        .into_iter()
        .enumerate()
        .map(|(j, part)| block(part, &format!("{at}[{j}]")))
        .collect()
}

fn block(part: ContentPart, at: &str) -> Result<ContentBlock, Error> {
    Ok(match part {
        ContentPart::Text { text } => ContentBlock::Text { text },
        ContentPart::ImageUrl { image_url } => ContentBlock::Image(
            match data_uri(&image_url.url, &format!("{at}.image_url.url"))? {
                Some((media_type, data)) => Media::base64(media_type, Arc::<str>::from(data)),
                None => Media::url(image_url.url),
            },
        ),
        ContentPart::InputAudio { input_audio } => {
            let media_type = match input_audio.format.as_str() {
                "wav" => "audio/wav".to_owned(),
                "mp3" => "audio/mpeg".to_owned(),
                other => format!("audio/{other}"),
            };
            ContentBlock::Audio(Media::base64(media_type, input_audio.data))
        }
        ContentPart::File { file } => ContentBlock::Document(document(file, at)?),
        ContentPart::Refusal { .. } => {
            return Err(invalid(
                at,
                "a refusal part belongs to an assistant message",
            ));
        }
    })
}

fn document(file: FileData, at: &str) -> Result<Media, Error> {
    let at = format!("{at}.file");
    let Some(url) = file.file_data else {
        let message = match file.file_id {
            Some(_) => "uploaded files (`file_id`) are not served; send `file_data`",
            None => "a file part needs `file_data`",
        };
        return Err(invalid(&at, message));
    };
    let (media_type, data) = data_uri(&url, &format!("{at}.file_data"))?
        .ok_or_else(|| invalid(&format!("{at}.file_data"), "expected a base64 `data:` URI"))?;
    let media = Media::base64(media_type, Arc::<str>::from(data));
    Ok(match file.filename {
        Some(name) => media.with_name(name),
        None => media,
    })
}

/// A base64 `data:` URI's media type and data (copied once, into the media's
/// shared string); `None` when `url` is not a `data:` URI at all.
fn data_uri<'a>(url: &'a str, at: &str) -> Result<Option<(&'a str, &'a str)>, Error> {
    let Some(rest) = url
        .get(..5)
        .filter(|scheme| scheme.eq_ignore_ascii_case("data:"))
        .map(|_| &url[5..])
    else {
        return Ok(None);
    };
    let (header, data) = rest
        .split_once(',')
        .ok_or_else(|| invalid(at, "a `data:` URI needs a comma before its data"))?;
    let media_type = header
        .strip_suffix(";base64")
        .filter(|media_type| !media_type.is_empty())
        .ok_or_else(|| invalid(at, "only base64 `data:` URIs with a media type are read"))?;
    Ok(Some((media_type, data)))
}

/// The reply encoder: canonical events → a Chat Completions reply, as SSE
/// frames (streaming) or as one `chat.completion` body (non-streaming), from
/// the same per-event mapping: each event becomes a delta, which the streaming
/// mode writes as a `chat.completion.chunk` and the non-streaming mode folds
/// into the one message of the body.
///
/// - text deltas and assistant text messages → `content`; text marked
///   [`REFUSAL_KEY`] → `refusal`; reasoning → `reasoning_content` (redacted
///   reasoning is left out);
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
/// [`status`](Encoder::status) gives its status).
///
/// ```
/// use lmstack::provider::openai::Encoder;
/// use lmstack::service::{Machine, Output};
/// use lmstack::{Event, FinishReason};
///
/// let mut encoder = Encoder::new("chatcmpl-1", 1_700_000_000, "gpt-4o").streaming(false);
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
/// let mut encoder = Encoder::new("chatcmpl-1", 1_700_000_000, "gpt-4o");
/// encoder.push(Ok(Event::text("Hello")), &mut out).unwrap();
/// encoder.finish(&mut out).unwrap();
/// let body: serde_json::Value = serde_json::from_slice(&out.pop().unwrap()).unwrap();
/// assert_eq!(body["object"], "chat.completion");
/// assert_eq!(body["choices"][0]["message"]["content"], "Hello");
///
/// let mut failing = Encoder::new("chatcmpl-1", 0, "m").streaming(false);
/// failing.push(Ok(Event::text("Hi")), &mut out).unwrap();
/// failing.push(Err(lmstack::Error::stage("tool loop", "broke")), &mut out).unwrap();
/// failing.finish(&mut out).unwrap(); // writes nothing more
/// let last = out.drain().last().unwrap();
/// assert!(last.starts_with(b"data: {\"error\":{\"message\":\"tool loop: broke\""));
/// assert_eq!(failing.status(), 500);
/// ```
#[derive(Debug)]
pub struct Encoder {
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
    call: Option<OpenCall>,
    /// Calls sent so far: the next call's wire index.
    calls: u32,
    usage: Option<Usage>,
    finish_reason: Option<FinishReason>,
    ended: bool,
    status: u16,
}

/// The call whose fragments are arriving.
#[derive(Debug)]
struct OpenCall {
    index: u32,
    id: Option<String>,
    /// Its wire index, or `None` when it is left out (the provider ran it).
    wire: Option<u32>,
}

impl Encoder {
    /// An encoder of one reply, non-streaming, for response `id`, created at
    /// `created` (seconds since the Unix epoch), answered by `model`.
    pub fn new(id: impl Into<String>, created: u64, model: impl Into<String>) -> Self {
        Encoder {
            id: id.into(),
            created,
            model: model.into(),
            stream: false,
            include_usage: false,
            started: false,
            message: ChatMessage::default(),
            refusal: false,
            call: None,
            calls: 0,
            usage: None,
            finish_reason: None,
            ended: false,
            status: 200,
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

    /// Ends a reply that failed with `error`: a stream with `data: {"error":
    /// {…}}` (the body of [`error_body`]) and nothing after it; a whole reply
    /// becomes that error body.
    fn fail(&mut self, error: &Error, out: &mut Output<Bytes>) {
        if self.ended {
            return;
        }
        self.ended = true;
        let (status, body) = error_body(error);
        self.status = status;
        if self.stream {
            let mut frame = Vec::new();
            encode_event(&mut frame, None, &body.to_string());
            out.push(frame.into());
        } else {
            out.push(body.to_string().into_bytes().into());
        }
    }

    /// The delta an event adds, if any; usage and finish are kept for the end.
    fn delta(&mut self, event: Event) -> Result<Option<ChatMessage>, Error> {
        let mut delta = ChatMessage::default();
        match event {
            Event::TextDelta(text) => {
                self.call = None;
                if !text.metadata.is_empty() {
                    self.refusal = is_refusal(&text.metadata);
                }
                if text.text.is_empty() {
                    return Ok(None);
                }
                if self.refusal {
                    delta.refusal = Some(text.text);
                } else {
                    delta.content = Some(MessageContent::Text(text.text));
                }
            }
            Event::ReasoningDelta(reasoning) => {
                self.call = None;
                self.refusal = false;
                if reasoning.text.is_empty() {
                    return Ok(None);
                }
                delta.reasoning_content = Some(reasoning.text);
            }
            Event::ToolCallDelta(fragment) => {
                self.refusal = false;
                let Some(call) = self.call_fragment(fragment) else {
                    return Ok(None);
                };
                delta.tool_calls = Some(vec![call]);
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
    /// and name; `None` for a call left out (the provider ran it).
    fn call_fragment(&mut self, fragment: ToolCallDelta) -> Option<WireToolCall> {
        let name = fragment.name().map(str::to_owned);
        let continued = self.call.as_ref().filter(|open| {
            open.index == fragment.index
                && !matches!((fragment.id(), &open.id), (Some(id), Some(open)) if id != open)
        });
        if let Some(open) = continued {
            return Some(WireToolCall {
                index: Some(open.wire?),
                function: FunctionCall {
                    name,
                    arguments: Some(fragment.arguments_delta),
                },
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
        })
    }

    fn message_delta(&mut self, message: Message) -> Result<Option<ChatMessage>, Error> {
        self.call = None;
        self.refusal = false;
        let mut delta = ChatMessage::default();
        match message {
            Message::Text(text) if text.role == Role::Assistant => {
                if text.text.is_empty() {
                    return Ok(None);
                }
                if is_refusal(&text.metadata) {
                    delta.refusal = Some(text.text);
                } else {
                    delta.content = Some(MessageContent::Text(text.text));
                }
            }
            Message::Multimodal(multimodal) if multimodal.role == Role::Assistant => {
                let mut text = String::new();
                for block in &multimodal.content {
                    match block {
                        ContentBlock::Text { text: piece } => text.push_str(piece),
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
            Message::Reasoning(reasoning) if !reasoning.redacted && !reasoning.text.is_empty() => {
                delta.reasoning_content = Some(reasoning.text);
            }
            Message::ToolCalls(message) => {
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
                if calls.is_empty() {
                    return Ok(None);
                }
                delta.tool_calls = Some(calls);
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
            Some(total) => {
                total.input_tokens += usage.input_tokens;
                total.output_tokens += usage.output_tokens;
                let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
                    (None, None) => None,
                    (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
                };
                total.cached_input_tokens =
                    add(total.cached_input_tokens, usage.cached_input_tokens);
                total.reasoning_tokens = add(total.reasoning_tokens, usage.reasoning_tokens);
            }
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
        &self,
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
        frame(&chunk, out);
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

/// Writes `value` as one SSE frame.
fn frame(value: &impl Serialize, out: &mut Output<Bytes>) {
    // Written in place, in one buffer: compact JSON holds no line break (one in
    // a string is escaped), so it is one `data:` line, as `encode_event` would
    // write it. The wire structs hold strings, numbers and JSON values only:
    // writing them cannot fail (if it did, the frame would be empty).
    let mut frame = Vec::with_capacity(256);
    frame.extend_from_slice(b"data: ");
    if serde_json::to_writer(&mut frame, value).is_err() {
        frame.truncate(b"data: ".len());
    }
    frame.extend_from_slice(b"\n\n");
    out.push(frame.into());
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
    for mut call in delta.tool_calls.into_iter().flatten() {
        let calls = message.tool_calls.get_or_insert_default();
        match calls.last_mut() {
            Some(last) if call.id.is_none() => {
                append(&mut last.function.arguments, call.function.arguments);
                if last.function.name.is_none() {
                    last.function.name = call.function.name;
                }
            }
            _ => {
                call.index = None;
                calls.push(call);
            }
        }
    }
}

impl Machine for Encoder {
    type In = Result<Event, Error>;
    type Out = Bytes;

    /// Takes a reply's item: an event, or the error that ended the reply (which
    /// is written as the type's docs say; nothing is written after it).
    fn push(&mut self, item: Result<Event, Error>, out: &mut Output<Bytes>) -> Result<(), Error> {
        if self.ended {
            return Ok(());
        }
        let event = match item {
            Ok(event) => event,
            Err(error) => {
                self.fail(&error, out);
                return Ok(());
            }
        };
        if let Some(delta) = self.delta(event)? {
            self.emit(delta, out);
        }
        Ok(())
    }

    /// Writes the end: the last chunk with the finish reason, the usage chunk
    /// and `[DONE]` (streaming), or the whole body (non-streaming).
    fn finish(&mut self, out: &mut Output<Bytes>) -> Result<(), Error> {
        if std::mem::replace(&mut self.ended, true) {
            return Ok(());
        }
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
            let mut done = Vec::new();
            encode_event(&mut done, None, "[DONE]");
            out.push(done.into());
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
        total_tokens: usage.input_tokens + usage.output_tokens,
        prompt_tokens_details: usage
            .cached_input_tokens
            .map(|cached_tokens| PromptTokensDetails { cached_tokens }),
        completion_tokens_details: usage
            .reasoning_tokens
            .map(|reasoning_tokens| CompletionTokensDetails { reasoning_tokens }),
    }
}

/// Whether a decoded request asked for the usage chunk of a stream
/// (`stream_options.include_usage`, kept in `options.extra`).
///
/// ```
/// use lmstack::provider::openai::{decode_request, include_usage};
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
/// use lmstack::provider::openai::error_body;
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
    let status = error.http_status();
    let kind = match status {
        400..=404 | 408 | 413 | 415 | 422 => "invalid_request_error",
        429 => "rate_limit_error",
        _ => "server_error",
    };
    let upstream = error.provider_error();
    let message = match error {
        Error::InvalidRequest(message) | Error::Refused { message, .. } => message.clone(),
        other => other.client_message(),
    };
    let body = ErrorBody {
        error: ErrorObject {
            message,
            kind: kind.into(),
            param: upstream.and_then(|upstream| upstream.param.clone()),
            code: upstream
                .and_then(|upstream| upstream.code.clone())
                .or_else(|| (status == 429).then(|| "rate_limit_exceeded".into())),
        },
    };
    (status, serde_json::to_value(body).unwrap_or_default())
}

/// The body of `GET /v1/models`: each model's id and creation time (seconds
/// since the Unix epoch), owned by `lmstack`.
///
/// ```
/// use lmstack::provider::openai::models_body;
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
        .map(|(id, created)| {
            json!({"id": id, "object": "model", "created": created, "owned_by": "lmstack"})
        })
        .collect();
    json!({"object": "list", "data": data})
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
            encode_event(&mut expected, None, &serde_json::to_string(&owned).unwrap());
            let mut out = Output::new();
            frame(&borrowed, &mut out);
            let written = out.pop().unwrap();
            assert_eq!(
                std::str::from_utf8(&written).unwrap(),
                std::str::from_utf8(&expected).unwrap()
            );
        }
    }
}

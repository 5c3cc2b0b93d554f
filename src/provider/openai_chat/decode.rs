//! The server half, inward: a client's Chat Completions request body → a
//! canonical [`ChatRequest`] ([`decode_request`]). Pure, linear in the body,
//! written with the typed wire of [`types`](super::types).

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::lower::{
    DEVELOPER_KEY, EXTRA_KEY, MESSAGE_KEY, PARTS_KEY, REASONING_FIELD_KEY, REFUSAL_KEY,
};
use super::response_format;
use super::server_tool;
use super::types::{
    ChatCompletionRequest, ChatMessage, ChatRole, ContentPart, FileData, MessageContent,
    ToolChoice as WireToolChoice,
};
use crate::message::{Metadata, ReasoningMessage};
use crate::provider::openai_shared::{data_uri, invalid, read_body, read_call, tool_choice_mode};
use crate::provider::wire_extra;
use crate::{
    ChatOptions, ChatRequest, ContentBlock, Error, Media, Message, Role, ToolChoice, ToolResult,
    ToolSpec,
};

/// Reads a client's Chat Completions request body into a canonical request.
///
/// - `system` and `developer` messages become system text in their place (a
///   `developer` one marked [`DEVELOPER_KEY`]); `user` messages
///   text (a string) or multimodal (an array of parts: text, `image_url` — a
///   base64 `data:` URI becomes inline media, any other URL a URL —,
///   `input_audio`, `file` with `file_data`); an `assistant` message becomes its
///   reasoning (`reasoning_content` or `reasoning`, the field kept under
///   [`REASONING_FIELD_KEY`]), its text, its refusal (text marked
///   [`REFUSAL_KEY`]) and its `tool_calls`, in that order; a run of `tool`
///   messages becomes one `tool_results` message, each result named after the
///   call it answers;
/// - `tools`, `tool_choice`, `model`, `temperature`, `stream`, the token
///   limit (`max_completion_tokens`, else `max_tokens`) and `response_format`
///   (`json_object`, `json_schema`; `text` or another type stays in `extra`)
///   fill the options; every
///   other field — `top_p`, `stop`, `n`, `seed`, `user`,
///   `reasoning_effort`, `stream_options`, unknown ones — goes in
///   `options.extra`, checked first where its type is known;
/// - what a message, a content part, a call or a tool holds that the
///   canonical model has no place for — a message's `name`, an image's
///   `detail`, a function's `strict`, unknown fields — is kept in metadata for
///   the OpenAI lowering alone ([`EXTRA_KEY`], [`PARTS_KEY`], [`MESSAGE_KEY`]).
///
/// Bad input is [`Error::InvalidRequest`] naming the field at fault; the work is
/// linear in the body, which the server bounds.
///
/// ```
/// use lmstack::provider::openai_chat::{DEVELOPER_KEY, decode_request};
/// use lmstack::{Error, Message};
///
/// let body = br#"{"model":"gpt-4o","stream":true,"seed":7,
///     "messages":[{"role":"developer","content":"Be brief."},{"role":"user","content":"Hi"}]}"#;
/// let request = decode_request(body).unwrap();
/// let mut developer = Message::system("Be brief.");
/// developer.metadata_mut().insert(DEVELOPER_KEY, true.into());
/// assert_eq!(request.messages, vec![developer, Message::user("Hi")]);
/// assert!(request.options.stream);
/// assert_eq!(request.options.extra["seed"], 7);
///
/// let bad = br#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}"#;
/// let Err(Error::InvalidRequest(message)) = decode_request(bad) else { panic!() };
/// assert_eq!(message, "messages[0].content[0].image_url: missing field `url`");
/// ```
pub fn decode_request(body: &[u8]) -> Result<ChatRequest, Error> {
    request_from_wire(read_body(body)?)
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
        let mut function = tool.function;
        if let Some(strict) = function.strict {
            function.extra.insert("strict".into(), strict.into());
        }
        let mut spec = ToolSpec::new(
            function.name,
            function.description.unwrap_or_default(),
            function
                .parameters
                .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
        );
        let kept = [("tool", tool.extra), ("function", function.extra)]
            .into_iter()
            .filter(|(_, fields)| !fields.is_empty())
            .map(|(place, fields)| (place.to_owned(), Value::Object(fields)))
            .collect::<Map<_, _>>();
        if !kept.is_empty() {
            spec.extra.insert(EXTRA_KEY.into(), Value::Object(kept));
        }
        options.tools.push(spec);
    }
    options.tool_choice = match wire.tool_choice {
        None => None,
        Some(WireToolChoice::Mode(mode)) => Some(tool_choice_mode(&mode)?),
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
    let format = wire.response_format.map(response_format::decode);
    let (format, other_format) = match format.transpose()? {
        Some(Ok(format)) => (Some(format), None),
        Some(Err(other)) => (None, Some(other)),
        None => (None, None),
    };
    options.response_format = format;
    if let Some(search) = wire.web_search_options {
        options.server_tools.push(server_tool::decode(search)?);
    }
    let extra = &mut options.extra;
    keep(extra, "response_format", other_format);
    keep(extra, "top_p", wire.top_p);
    keep(extra, "stream_options", wire.stream_options);
    keep(extra, "stop", wire.stop);
    keep(extra, "n", wire.n);
    keep(extra, "seed", wire.seed);
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
        extensions: Default::default(),
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
    fn message(&mut self, i: usize, mut message: ChatMessage) -> Result<(), Error> {
        let at = |field: &str| format!("messages[{i}].{field}");
        let fields = message_fields(&mut message);
        let mut metadata = Metadata::new();
        wire_extra::keep(&mut metadata, EXTRA_KEY, fields);
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
                let mut system = Message::system(text).with_metadata(metadata);
                if role == ChatRole::Developer {
                    system.metadata_mut().insert(DEVELOPER_KEY, true.into());
                }
                self.out.push(system);
            }
            ChatRole::User => match message.content {
                Some(MessageContent::Text(text)) => {
                    self.out.push(Message::user(text).with_metadata(metadata))
                }
                Some(MessageContent::Parts(parts)) => {
                    let blocks = blocks(parts, &at("content"), &mut metadata)?;
                    self.out
                        .push(Message::multimodal(Role::User, blocks).with_metadata(metadata));
                }
                None => return Err(invalid(&at("content"), "a user message needs content")),
            },
            ChatRole::Assistant => self.assistant(i, message, metadata)?,
            ChatRole::Tool => {
                let call_id = message
                    .tool_call_id
                    .ok_or_else(|| invalid(&at("tool_call_id"), "a tool message needs it"))?;
                let content = match message.content {
                    Some(MessageContent::Text(text)) => vec![ContentBlock::text(text)],
                    Some(MessageContent::Parts(parts)) => {
                        blocks(parts, &at("content"), &mut metadata)?
                    }
                    None => Vec::new(),
                };
                let sent_name = wire_extra::kept(&metadata, EXTRA_KEY).get("name").cloned();
                let name = self
                    .names
                    .get(&call_id)
                    .cloned()
                    .or_else(|| sent_name.and_then(|name| name.as_str().map(str::to_owned)))
                    .unwrap_or_default();
                let mut result = ToolResult::new(call_id, name, content);
                result.metadata = metadata;
                self.results.push(result);
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

    /// An assistant message: its reasoning, text, refusal and calls, the
    /// first of them holding `metadata` (the message's fields).
    fn assistant(
        &mut self,
        i: usize,
        message: ChatMessage,
        metadata: Metadata,
    ) -> Result<(), Error> {
        let first = self.out.len();
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
                        ContentPart::Text { text: piece, .. } => text.push_str(&piece),
                        ContentPart::Refusal { refusal: piece, .. } => {
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
            let mut read = read_call(id, name, call.function.arguments.unwrap_or_default());
            wire_extra::keep(&mut read.metadata, EXTRA_KEY, call.extra);
            self.names.insert(read.id.clone(), read.name.clone());
            calls.push(read);
        }
        match self.out.get_mut(first) {
            Some(message) => message.metadata_mut().merge_missing(&metadata),
            None => {
                if let (Some(call), Some(Value::Object(fields))) =
                    (calls.first_mut(), metadata.get(EXTRA_KEY))
                {
                    wire_extra::keep(&mut call.metadata, MESSAGE_KEY, fields.clone());
                }
            }
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

/// The text of a message that takes text only (a string, or text parts).
fn text_only(content: Option<MessageContent>, at: &str, what: &str) -> Result<String, Error> {
    match content {
        Some(MessageContent::Text(text)) => Ok(text),
        Some(MessageContent::Parts(parts)) => {
            let mut text = String::new();
            for (j, part) in parts.into_iter().enumerate() {
                match part {
                    ContentPart::Text { text: piece, .. } => text.push_str(&piece),
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

/// The fields of a message the canonical one has no place for: `name`, and
/// those the wire types do not know.
fn message_fields(message: &mut ChatMessage) -> Map<String, Value> {
    let mut fields = std::mem::take(&mut message.extra);
    if let Some(name) = message.name.take() {
        fields.insert("name".into(), name.into());
    }
    fields
}

/// Content parts → content blocks; the parts' fields with no place in a block
/// go in `metadata` ([`PARTS_KEY`]).
fn blocks(
    parts: Vec<ContentPart>,
    at: &str,
    metadata: &mut Metadata,
) -> Result<Vec<ContentBlock>, Error> {
    let mut fields = Vec::with_capacity(parts.len());
    let blocks = parts
        .into_iter()
        .enumerate()
        .map(|(j, mut part)| {
            let mut kept = std::mem::take(part.extra_mut());
            if let ContentPart::ImageUrl { image_url, .. } = &mut part
                && let Some(detail) = image_url.detail.take()
            {
                kept.insert("image_url".into(), json!({ "detail": detail }));
            }
            fields.push(kept);
            block(part, &format!("{at}[{j}]"))
        })
        .collect::<Result<_, _>>()?;
    wire_extra::keep_blocks(metadata, PARTS_KEY, fields);
    Ok(blocks)
}

fn block(part: ContentPart, at: &str) -> Result<ContentBlock, Error> {
    Ok(match part {
        ContentPart::Text { text, .. } => ContentBlock::text(text),
        ContentPart::ImageUrl { image_url, .. } => ContentBlock::Image(
            match data_uri(&image_url.url, &format!("{at}.image_url.url"))? {
                Some((media_type, data)) => Media::base64(media_type, Arc::<str>::from(data)),
                None => Media::url(image_url.url),
            },
        ),
        ContentPart::InputAudio { input_audio, .. } => {
            let media_type = match input_audio.format.as_str() {
                "wav" => "audio/wav".to_owned(),
                "mp3" => "audio/mpeg".to_owned(),
                other => format!("audio/{other}"),
            };
            ContentBlock::Audio(Media::base64(media_type, input_audio.data))
        }
        ContentPart::File { file, .. } => ContentBlock::Document(document(file, at)?),
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

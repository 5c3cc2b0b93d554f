//! The server half, inward: a client's Responses request body → a canonical
//! [`ChatRequest`] ([`decode_request`]). Pure, linear in the body, written with
//! the typed wire of [`types`](super::types) — the inverse of the lowering,
//! which writes back what this reads (see [`decode_request`]).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::keys::{ARGUMENTS, CLIENT_ID, EXTRA_KEY, INSTRUCTIONS_KEY, ITEM_KEY, PARTS_KEY};
use super::server_tool;
use super::tools::{self, CUSTOM_CALL, CUSTOM_CALL_OUTPUT};
use super::types::{
    ContentPart, FunctionCallItem, FunctionCallOutputItem, InputFile, InputImage, Item,
    MessageContent, MessageItem, MessageRole, ReasoningItem, ResponseRequest, Tool,
    ToolChoice as WireToolChoice,
};
use crate::message::{Metadata, ReasoningMessage};
use crate::provider::openai_shared::{
    DEVELOPER_KEY, REFUSAL_KEY, data_uri, invalid, lift_url_citation, read_body, read_call,
    read_json_format, tool_choice_mode,
};
use crate::provider::sealed::open_reasoning;
use crate::provider::wire_extra;
use crate::{
    ChatOptions, ChatRequest, ContentBlock, Error, Media, Message, Role, ToolCall, ToolChoice,
    ToolResult,
};

/// What separates the parts of a reasoning summary in the reasoning's text
/// (as the lifter joins them).
const PART_BREAK: &str = "\n\n";

/// Reads a client's Responses request body into a canonical request.
///
/// - `instructions` → system text first, marked [`INSTRUCTIONS_KEY`]; `input`
///   (a string: one user message) → the history, item by item:
///   - `message` items: `system` and `developer` (marked [`DEVELOPER_KEY`])
///     → system text (parts: text blocks), `user` → text or multimodal
///     (`input_text`, `input_image` — a `data:` URI inline, another URL by
///     URL —, `input_file`), `assistant` → text per `output_text` part (its
///     `url_citation`s as citations), a `refusal` part as text marked
///     [`REFUSAL_KEY`];
///   - `function_call` → a tool call whose id is its `call_id`;
///     `function_call_output` (a string, or parts with images and files) → a
///     tool result; a run of them → one `tool_calls` or `tool_results` message;
///   - `custom_tool_call` and its output → a call with one argument, `input`,
///     and its result;
///   - `reasoning` → reasoning: its summary as text, its `encrypted_content`
///     as the signature — unless the gateway sealed it (another wire's
///     reasoning, [`open_reasoning`]): then the reasoning it carries, whole;
///   - any other item (`item_reference`, a built-in tool's call) → an empty
///     assistant text holding it whole ([`ITEM_KEY`]), for this wire alone;
/// - each item's and part's fields with no canonical place — `id`, `status`,
///   an image's `detail`, unknown ones — are kept for this wire's lowering
///   ([`EXTRA_KEY`], [`PARTS_KEY`]);
/// - `tools`: functions → tool specs (`strict` kept); `custom` tools and the
///   functions of a `namespace` → tool specs too, marked so that the lowering
///   writes them back as they came; built-in tools
///   → server tools;
/// - `model`, `temperature`, `max_output_tokens`, `stream`, `tool_choice`
///   and `text.format` (`json_object`, `json_schema`) fill the options; every
///   other field — `top_p`, `parallel_tool_calls`, `reasoning`, `store`,
///   `include`, `previous_response_id`, `text.verbosity`, unknown ones — goes
///   in `options.extra`.
///
/// Bad input is [`Error::InvalidRequest`] naming the field at fault.
///
/// ```
/// use lmstack::provider::openai_responses::{INSTRUCTIONS_KEY, decode_request};
/// use lmstack::{Error, Message};
///
/// let body = br#"{"model":"gpt-5","instructions":"Be brief.","input":"Hi","store":false}"#;
/// let request = decode_request(body).unwrap();
/// let mut instructions = Message::system("Be brief.");
/// instructions.metadata_mut().insert(INSTRUCTIONS_KEY, true.into());
/// assert_eq!(request.messages, vec![instructions, Message::user("Hi")]);
/// assert_eq!(request.options.extra["store"], false);
///
/// let bad = br#"{"input":[{"type":"function_call_output","output":"4"}]}"#;
/// let Err(Error::InvalidRequest(message)) = decode_request(bad) else { panic!() };
/// assert_eq!(message, "input[0]: missing field `call_id`");
/// ```
pub fn decode_request(body: &[u8]) -> Result<ChatRequest, Error> {
    request_from_wire(read_body(body)?)
}

/// [`decode_request`] of a typed request.
pub fn request_from_wire(wire: ResponseRequest) -> Result<ChatRequest, Error> {
    let mut options = ChatOptions {
        model: wire.model,
        temperature: wire.temperature,
        max_tokens: wire.max_output_tokens,
        stream: wire.stream.unwrap_or(false),
        ..ChatOptions::default()
    };
    for (i, tool) in wire.tools.into_iter().flatten().enumerate() {
        match tool {
            Tool::Function(function) => options.tools.push(tools::function_spec(function, None)),
            Tool::Other(fields) => match fields.get("type").and_then(Value::as_str) {
                Some("custom" | "namespace") => {
                    let specs = tools::decode(fields).map_err(|e| at_tool(i, e))?;
                    options.tools.extend(specs);
                }
                _ => options.server_tools.push(server_tool::decode(fields)),
            },
        }
    }
    let extra = &mut options.extra;
    options.tool_choice = match wire.tool_choice {
        None => None,
        Some(WireToolChoice::Mode(mode)) => Some(tool_choice_mode(&mode)?),
        Some(WireToolChoice::Named { kind, name }) if kind == "function" => {
            Some(ToolChoice::Tool(name))
        }
        Some(other) => {
            extra.insert("tool_choice".into(), to_value(&other));
            None
        }
    };
    if let Some(mut text) = wire.text {
        if let Some(format) = text.format.take() {
            let kind = format.get("type").and_then(Value::as_str);
            match read_json_format(kind, Some(&format), "text.format")? {
                Some(read) => options.response_format = Some(read),
                None => text.format = Some(format),
            }
        }
        if text.format.is_some() || !text.extra.is_empty() {
            extra.insert("text".into(), to_value(&text));
        }
    }
    let typed = [
        ("top_p", wire.top_p.map(Value::from)),
        (
            "parallel_tool_calls",
            wire.parallel_tool_calls.map(Value::from),
        ),
        ("store", wire.store.map(Value::from)),
        ("include", wire.include.map(Value::from)),
        ("reasoning", wire.reasoning),
        (
            "previous_response_id",
            wire.previous_response_id.map(Value::from),
        ),
    ];
    for (key, value) in typed {
        if let Some(value) = value {
            extra.insert(key.into(), value);
        }
    }
    extra.extend(wire.extra);

    let mut history = History::default();
    if let Some(instructions) = wire.instructions {
        let mut system = Message::system(instructions);
        system.metadata_mut().insert(INSTRUCTIONS_KEY, true.into());
        history.out.push(system);
    }
    for (i, item) in wire.input.items().into_iter().enumerate() {
        history.item(i, item)?;
    }
    Ok(ChatRequest {
        messages: history.finish(),
        options,
        extensions: Default::default(),
    })
}

fn at_tool(i: usize, error: Error) -> Error {
    match error {
        Error::InvalidRequest(message) => Error::InvalidRequest(format!("tools[{i}].{message}")),
        other => other,
    }
}

fn to_value(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or_default()
}

/// The walk over the input's items: canonical messages out, the run of calls
/// or of results being gathered, and the names of the calls seen (an output
/// names only its call's id).
#[derive(Default)]
struct History {
    out: Vec<Message>,
    calls: Vec<ToolCall>,
    results: Vec<ToolResult>,
    names: HashMap<String, String>,
}

impl History {
    fn item(&mut self, i: usize, item: Item) -> Result<(), Error> {
        let at = format!("input[{i}]");
        match item {
            Item::FunctionCall(call) => self.call(function_call(call, &at)?),
            Item::FunctionCallOutput(output) => {
                let result = self.output(output, &at)?;
                self.result(result);
            }
            Item::Message(message) => {
                self.flush();
                self.message(message, &at)?;
            }
            Item::Reasoning(reasoning) => {
                self.flush();
                self.out
                    .push(Message::Reasoning(reasoning_message(reasoning)));
            }
            Item::Other(fields) => match fields.get("type").and_then(Value::as_str) {
                Some(CUSTOM_CALL) => self.call(tools::decode_call(fields, &at)?),
                Some(CUSTOM_CALL_OUTPUT) => {
                    let (call_id, output, kept) = tools::decode_output(fields, &at)?;
                    let mut result = self.result_of(call_id, output, &at)?;
                    wire_extra::keep(&mut result.metadata, EXTRA_KEY, kept);
                    self.result(result);
                }
                _ => {
                    self.flush();
                    let mut metadata = Metadata::new();
                    metadata.insert(ITEM_KEY, Value::Object(fields));
                    self.out
                        .push(Message::assistant("").with_metadata(metadata));
                }
            },
        }
        Ok(())
    }

    fn call(&mut self, call: ToolCall) {
        if !self.results.is_empty() {
            self.flush();
        }
        self.names.insert(call.id.clone(), call.name.clone());
        self.calls.push(call);
    }

    fn result(&mut self, result: ToolResult) {
        if !self.calls.is_empty() {
            self.flush();
        }
        self.results.push(result);
    }

    /// Ends the run of calls or results being gathered.
    fn flush(&mut self) {
        if !self.calls.is_empty() {
            self.out
                .push(Message::tool_calls(std::mem::take(&mut self.calls)));
        }
        if !self.results.is_empty() {
            self.out
                .push(Message::tool_results(std::mem::take(&mut self.results)));
        }
    }

    fn output(&mut self, output: FunctionCallOutputItem, at: &str) -> Result<ToolResult, Error> {
        let FunctionCallOutputItem {
            id,
            call_id,
            output,
            status,
            extra,
        } = output;
        let mut result = self.result_of(call_id, output, at)?;
        wire_extra::keep(&mut result.metadata, EXTRA_KEY, kept(id, status, extra));
        Ok(result)
    }

    /// The result of call `call_id`: `output`'s text or parts.
    fn result_of(
        &self,
        call_id: String,
        output: MessageContent,
        at: &str,
    ) -> Result<ToolResult, Error> {
        let mut metadata = Metadata::new();
        let content = match output {
            MessageContent::Text(text) => vec![ContentBlock::text(text)],
            MessageContent::Parts(parts) => blocks(parts, &format!("{at}.output"), &mut metadata)?,
        };
        let name = self.names.get(&call_id).cloned().unwrap_or_default();
        let mut result = ToolResult::new(call_id, name, content);
        result.metadata = metadata;
        Ok(result)
    }

    fn message(&mut self, message: MessageItem, at: &str) -> Result<(), Error> {
        let MessageItem {
            id,
            role,
            content,
            status,
            extra,
        } = message;
        let mut metadata = Metadata::new();
        wire_extra::keep(&mut metadata, EXTRA_KEY, kept(id, status, extra));
        let at = format!("{at}.content");
        match role {
            MessageRole::System | MessageRole::Developer => {
                if role == MessageRole::Developer {
                    metadata.insert(DEVELOPER_KEY, true.into());
                }
                let system = match content {
                    MessageContent::Text(text) => Message::system(text),
                    MessageContent::Parts(parts) => {
                        if let Some(j) = parts
                            .iter()
                            .position(|part| !matches!(part, ContentPart::InputText(_)))
                        {
                            let message = "a system or developer message takes text only";
                            return Err(invalid(&format!("{at}[{j}]"), message));
                        }
                        let blocks = blocks(parts, &at, &mut metadata)?;
                        Message::multimodal(Role::System, blocks)
                    }
                };
                self.out.push(system.with_metadata(metadata));
            }
            MessageRole::User => {
                let user = match content {
                    MessageContent::Text(text) => Message::user(text),
                    MessageContent::Parts(parts) => {
                        Message::multimodal(Role::User, blocks(parts, &at, &mut metadata)?)
                    }
                };
                self.out.push(user.with_metadata(metadata));
            }
            MessageRole::Assistant => self.assistant(content, metadata, &at)?,
        }
        Ok(())
    }

    /// An assistant message: a text message per part, the first holding
    /// `metadata` (the item's fields).
    fn assistant(
        &mut self,
        content: MessageContent,
        metadata: Metadata,
        at: &str,
    ) -> Result<(), Error> {
        let parts = match content {
            MessageContent::Text(text) => {
                self.out
                    .push(Message::assistant(text).with_metadata(metadata));
                return Ok(());
            }
            MessageContent::Parts(parts) => parts,
        };
        let mut metadata = Some(metadata);
        for (j, part) in parts.into_iter().enumerate() {
            let mut message_metadata = metadata.take().unwrap_or_default();
            let text = match part {
                ContentPart::OutputText(text) => {
                    let citations = text
                        .annotations
                        .iter()
                        .filter(|a| a.get("type").and_then(Value::as_str) == Some("url_citation"))
                        .filter_map(|a| lift_url_citation(a, 0));
                    message_metadata.add_citations(citations.collect::<Vec<_>>());
                    text.text
                }
                ContentPart::InputText(text) => text.text,
                ContentPart::Refusal(refusal) => {
                    message_metadata.insert(REFUSAL_KEY, true.into());
                    refusal.refusal
                }
                _ => {
                    let message = "an assistant message takes text and refusal parts only";
                    return Err(invalid(&format!("{at}[{j}]"), message));
                }
            };
            self.out
                .push(Message::assistant(text).with_metadata(message_metadata));
        }
        if let Some(metadata) = metadata {
            self.out
                .push(Message::assistant("").with_metadata(metadata));
        }
        Ok(())
    }

    fn finish(mut self) -> Vec<Message> {
        self.flush();
        self.out
    }
}

/// The fields of an item the canonical model has no place for: its `id` (as
/// the client's), its `status`, the others.
fn kept(
    id: Option<String>,
    status: Option<String>,
    extra: Map<String, Value>,
) -> Map<String, Value> {
    let mut fields = Map::new();
    if let Some(id) = id {
        fields.insert(CLIENT_ID.into(), id.into());
    }
    if let Some(status) = status {
        fields.insert("status".into(), status.into());
    }
    fields.extend(extra);
    fields
}

fn function_call(call: FunctionCallItem, at: &str) -> Result<ToolCall, Error> {
    let FunctionCallItem {
        id,
        call_id,
        name,
        arguments,
        status,
        extra,
    } = call;
    if call_id.is_empty() {
        return Err(invalid(
            &format!("{at}.call_id"),
            "a function call needs one",
        ));
    }
    if name.is_empty() {
        return Err(invalid(&format!("{at}.name"), "a function call needs one"));
    }
    let mut fields = kept(id, status, extra);
    let mut call = read_call(call_id, name, arguments.clone());
    let compact = serde_json::to_string(&call.arguments).ok();
    if call.invalid.is_none() && compact.as_deref() != Some(arguments.as_str()) {
        // Written otherwise than compact (spaces): sent back as it came.
        fields.insert(ARGUMENTS.into(), arguments.into());
    }
    wire_extra::keep(&mut call.metadata, EXTRA_KEY, fields);
    Ok(call)
}

/// A reasoning item → reasoning: sealed by the gateway (another wire's), the
/// reasoning it carries; else this wire's, its summary as text and its
/// encrypted content as the signature (its fields kept, at least an empty
/// object: what marks it as this wire's).
fn reasoning_message(item: ReasoningItem) -> ReasoningMessage {
    if let Some(opened) = item.encrypted_content.as_deref().and_then(open_reasoning) {
        return opened;
    }
    let ReasoningItem {
        id,
        summary,
        content,
        encrypted_content,
        status,
        mut extra,
    } = item;
    if let Some(content) = content {
        extra.insert("content".into(), to_value(&content));
    }
    let texts: Vec<String> = summary.into_iter().map(|part| part.text).collect();
    let mut metadata = Metadata::new();
    metadata.insert(EXTRA_KEY, Value::Object(kept(id, status, extra)));
    ReasoningMessage {
        text: texts.join(PART_BREAK),
        signature: encrypted_content,
        redacted: false,
        metadata,
    }
}

/// Content parts → content blocks; the parts' fields with no place in a block
/// go in `metadata` ([`PARTS_KEY`]).
fn blocks(
    parts: Vec<ContentPart>,
    at: &str,
    metadata: &mut Metadata,
) -> Result<Vec<ContentBlock>, Error> {
    let mut fields = Vec::with_capacity(parts.len());
    let mut blocks = Vec::with_capacity(parts.len());
    for (j, part) in parts.into_iter().enumerate() {
        let at = format!("{at}[{j}]");
        let (block, kept) = match part {
            ContentPart::InputText(text) => (ContentBlock::text(text.text), text.extra),
            ContentPart::InputImage(image) => image_block(image, &at)?,
            ContentPart::InputFile(file) => file_block(file, &at)?,
            ContentPart::OutputText(_) | ContentPart::Refusal(_) => {
                return Err(invalid(
                    &at,
                    "the model's text belongs to an assistant message",
                ));
            }
            ContentPart::Other(part) => {
                let kind = part.get("type").and_then(Value::as_str).unwrap_or("?");
                return Err(invalid(&at, &format!("a `{kind}` part is not served")));
            }
        };
        blocks.push(block);
        fields.push(kept);
    }
    wire_extra::keep_blocks(metadata, PARTS_KEY, fields);
    Ok(blocks)
}

const NO_FILE_IDS: &str = "uploaded files (`file_id`) are not served; send the file inline";

fn image_block(image: InputImage, at: &str) -> Result<(ContentBlock, Map<String, Value>), Error> {
    let InputImage {
        image_url,
        file_id,
        detail,
        mut extra,
    } = image;
    let Some(url) = image_url else {
        let message = if file_id.is_some() {
            NO_FILE_IDS
        } else {
            "an image needs `image_url`"
        };
        return Err(invalid(at, message));
    };
    if let Some(detail) = detail {
        extra.insert("detail".into(), detail.into());
    }
    let media = media(url, &format!("{at}.image_url"))?;
    Ok((ContentBlock::Image(media), extra))
}

fn file_block(file: InputFile, at: &str) -> Result<(ContentBlock, Map<String, Value>), Error> {
    let InputFile {
        file_data,
        file_url,
        file_id,
        filename,
        extra,
    } = file;
    let media = match (file_data, file_url) {
        (Some(data), _) => {
            let at = format!("{at}.file_data");
            let (media_type, data) = data_uri(&data, &at)?
                .ok_or_else(|| invalid(&at, "expected a base64 `data:` URI"))?;
            Media::base64(media_type, Arc::<str>::from(data))
        }
        (None, Some(url)) => Media::url(url),
        (None, None) if file_id.is_some() => return Err(invalid(at, NO_FILE_IDS)),
        (None, None) => return Err(invalid(at, "a file needs `file_data` or `file_url`")),
    };
    let media = match filename {
        Some(name) => media.with_name(name),
        None => media,
    };
    Ok((ContentBlock::Document(media), extra))
}

/// A URL or a base64 `data:` URI as media.
fn media(url: String, at: &str) -> Result<Media, Error> {
    Ok(match data_uri(&url, at)? {
        Some((media_type, data)) => Media::base64(media_type, Arc::<str>::from(data)),
        None => Media::url(url),
    })
}

//! The server half, inward: a client's Messages request body → a canonical
//! [`ChatRequest`] ([`decode_request`]). Pure, linear in the body.

use std::collections::HashMap;
use std::mem;

use serde_json::{Map, Value};

use super::lower::{BLOCK_KEY, BLOCKS_KEY, EXTRA_KEY, MESSAGE_KEY, TOOL_CHOICE_KEY};
use super::output_format;
use super::server_tool;
use super::types::{
    self, Block, Content, MediaBlock, Request, Role as WireRole, Source, ToolChoice as WireChoice,
};
use super::{cache, citation};
use crate::message::{
    CacheControl, Message, Metadata, ReasoningMessage, Role, ToolCall, ToolResult,
};
use crate::provider::wire_extra;
use crate::{ChatRequest, ContentBlock, Error, Media, ToolChoice, ToolSpec};

/// Reads a client's Messages request body into a canonical request: the
/// inverse of [`lower`](super::lower).
///
/// - `system` (a string or text blocks) → system messages, first, one per
///   block; a `system` message inside `messages` (Claude Code sends them) →
///   system messages in its place, the same way;
/// - a user message's string → user text; its blocks → a `multimodal` user
///   message (text, images, documents: `base64` and `url` sources; a `text`
///   source becomes the document's bytes), and each run of `tool_result`
///   blocks → one `tool_results` message (text, image and document content,
///   `is_error`; the tool's name taken from the call it answers, empty when no
///   earlier `tool_use` has that id);
/// - an assistant message's string → assistant text; its blocks in order:
///   `text` → assistant text (empty text left out) with its `citations` typed
///   ([`Citation`](crate::Citation)s spanning the block's text, when each is
///   one [`lower`](super::lower) writes back as it came; else kept raw with
///   the block's other fields), `thinking` → reasoning
///   with its signature, `redacted_thinking` → reasoning marked `redacted`
///   (its `data` as the signature), each run of `tool_use` blocks → one
///   `tool_calls` message, `server_tool_use`/`mcp_tool_use` → calls marked
///   `provider_executed`, any other block (`web_search_tool_result`…) → an
///   empty assistant text holding the raw block under [`BLOCK_KEY`] — the
///   forms [`Lifter`](super::Lifter) gives, so [`lower`](super::lower) sends
///   every block back as it came (a block's fields other than `type`, `id`,
///   `name` and `input`, such as `caller`, are kept the same way);
/// - `tools` → [`ToolSpec`]s, `tool_choice` (`any` → required), `max_tokens`,
///   `temperature`, `stream`, `model`; `stop_sequences` → `options.extra`'s
///   `stop`; `output_config.format` (or the beta's `output_format`) →
///   `options.response_format`; `top_p`, `top_k`, `metadata`, `thinking`, the
///   rest of `output_config` and every field this
///   function does not know → `options.extra`, as they came.
///
/// Every `cache_control` becomes a typed [`CacheControl`] in its place: on a
/// text, image or document block (its field), on a system block, an assistant
/// text block, a `tool_use` and a `tool_result` (their metadata's
/// [`CACHE_CONTROL_KEY`](crate::message::CACHE_CONTROL_KEY)), on a tool
/// ([`ToolSpec::cache_control`]); a tool's other fields (`defer_loading`…)
/// go in [`ToolSpec::extra`].
///
/// What the canonical model has no place for travels in metadata for the
/// Anthropic lowering alone: a system, assistant text, thinking or
/// `tool_result` block's other fields under [`EXTRA_KEY`], a user or tool
/// result content block's under [`BLOCKS_KEY`] (by position), a message's
/// other than `role` and `content` under [`MESSAGE_KEY`];
/// `tool_choice.disable_parallel_tool_use` in `options.extra`'s
/// [`TOOL_CHOICE_KEY`]. `tool_choice`'s unknown fields are dropped.
///
/// A tool with a `type` other than `custom` is a server tool
/// (`options.server_tools`): `web_search_*` → [`ServerTool::WebSearch`]
/// (`max_uses`, `allowed_domains`, `blocked_domains`, `user_location`),
/// `code_execution_*` → [`ServerTool::CodeExecution`], any other →
/// [`ServerTool::Native`]; each keeps the tool object as it came, which the
/// Anthropic lowering sends back as it came.
///
/// [`ServerTool::WebSearch`]: crate::ServerTool::WebSearch
/// [`ServerTool::CodeExecution`]: crate::ServerTool::CodeExecution
/// [`ServerTool::Native`]: crate::ServerTool::Native
///
/// Bad input — not JSON, a wrong type, a missing `max_tokens` or `messages`,
/// no message (a `system` alone included: the API refuses it too), an unknown
/// source type, a block the role cannot hold — is
/// [`Error::InvalidRequest`] naming the field at fault
/// (`messages[1].content[0].source.type: unknown variant …`). Linear in the body.
///
/// ```
/// use lmstack::provider::anthropic::decode_request;
/// use lmstack::{Error, Message};
///
/// let request = decode_request(br#"{"model":"claude-sonnet-4-5","max_tokens":256,
///     "system":"Be brief.","messages":[{"role":"user","content":"Hi"}],"stream":true}"#).unwrap();
/// assert_eq!(request.messages, vec![Message::system("Be brief."), Message::user("Hi")]);
/// assert_eq!(request.options.max_tokens, Some(256));
/// assert!(request.options.stream);
///
/// let error = decode_request(br#"{"max_tokens":1,"messages":[{"role":"user","content":[
///     {"type":"image","source":{"type":"file","file_id":"f"}}]}]}"#).unwrap_err();
/// assert!(matches!(error, Error::InvalidRequest(_)));
/// assert!(error.to_string().contains("messages[0].content[0].source.type: unknown variant `file`"), "{error}");
/// ```
pub fn decode_request(body: &[u8]) -> Result<ChatRequest, Error> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let request: Request =
        serde_path_to_error::deserialize(&mut deserializer).map_err(described)?;
    deserializer
        .end()
        .map_err(|error| Error::InvalidRequest(error.to_string()))?;
    Decoder::default().request(request)
}

/// Reads a client's token count request body (`POST /v1/messages/count_tokens`:
/// a Messages request without `max_tokens`) into a canonical request, as
/// [`decode_request`] reads a Messages request; `max_tokens`, if sent, is
/// left out.
///
/// ```
/// use lmstack::provider::anthropic::decode_count_request;
///
/// let request = decode_count_request(br#"{"model":"claude-sonnet-4-5",
///     "messages":[{"role":"user","content":"Hi"}]}"#).unwrap();
/// assert_eq!(request.options.max_tokens, None);
/// assert!(decode_count_request(br#"{"model":"m"}"#).is_err());
/// ```
pub fn decode_count_request(body: &[u8]) -> Result<ChatRequest, Error> {
    let mut fields: Map<String, Value> =
        serde_json::from_slice(body).map_err(|error| Error::InvalidRequest(error.to_string()))?;
    // The one field a Messages request needs that a count has not.
    fields.insert("max_tokens".into(), 0.into());
    let request: Request =
        serde_path_to_error::deserialize(Value::Object(fields)).map_err(described)?;
    let mut request = Decoder::default().request(request)?;
    request.options.max_tokens = None;
    Ok(request)
}

/// A body's mistake, named by the path of the field at fault.
fn described<E: std::fmt::Display>(error: serde_path_to_error::Error<E>) -> Error {
    Error::InvalidRequest(types::describe(error.path(), &error.inner().to_string()))
}

fn invalid(message: String) -> Error {
    Error::InvalidRequest(message)
}

/// A server tool's object as the client wrote it (`type` and `name` first,
/// as clients write them).
fn raw_tool(kind: String, tool: types::Tool) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("type".into(), kind.into());
    fields.insert("name".into(), tool.name.into());
    if let Some(description) = tool.description {
        fields.insert("description".into(), description.into());
    }
    if let Some(schema) = tool.input_schema {
        fields.insert("input_schema".into(), schema);
    }
    fields.extend(tool.extra);
    fields
}

/// The walk over a decoded request.
#[derive(Default)]
struct Decoder {
    messages: Vec<Message>,
    /// The name of each call seen so far, by id, for the results.
    names: HashMap<String, String>,
    /// The run of calls being gathered.
    calls: Vec<ToolCall>,
    /// The run of results being gathered.
    results: Vec<ToolResult>,
    /// The user blocks being gathered.
    content: Vec<ContentBlock>,
    /// Their fields with no place in a content block, in order.
    content_fields: Vec<Map<String, Value>>,
}

impl Decoder {
    fn request(mut self, request: Request) -> Result<ChatRequest, Error> {
        if request.messages.is_empty() {
            return Err(invalid("messages: at least one message is required".into()));
        }
        if let Some(system) = request.system {
            self.system(system, "system")?;
        }
        for (at, message) in request.messages.into_iter().enumerate() {
            let first = self.messages.len();
            match (message.role, message.content) {
                (WireRole::User, Content::Text(text)) => self.messages.push(Message::user(text)),
                (WireRole::Assistant, Content::Text(text)) => {
                    self.messages.push(Message::assistant(text))
                }
                (WireRole::User, Content::Blocks(blocks)) => self.user(at, blocks)?,
                (WireRole::Assistant, Content::Blocks(blocks)) => self.assistant(at, blocks)?,
                (WireRole::System, content) => {
                    self.system(content, &format!("messages[{at}].content"))?
                }
            }
            if let Some(decoded) = self.messages.get_mut(first) {
                keep_message_fields(decoded, message.extra);
            }
        }
        let mut chat = ChatRequest::new(self.messages);
        let options = &mut chat.options;
        options.model = request.model;
        options.max_tokens = Some(request.max_tokens);
        options.temperature = request.temperature;
        options.stream = request.stream;
        for (index, mut tool) in request.tools.into_iter().enumerate() {
            if let Some(kind) = tool.kind.take().filter(|kind| kind != "custom") {
                options
                    .server_tools
                    .push(server_tool::decode(raw_tool(kind, tool)));
                continue;
            }
            let Some(schema) = tool.input_schema else {
                return Err(invalid(format!(
                    "tools[{index}]: missing field `input_schema`"
                )));
            };
            let description = tool.description.unwrap_or_default();
            let mut spec = ToolSpec::new(tool.name, description, schema);
            spec.cache_control = take_cache(&mut tool.extra, || format!("tools[{index}]"))?;
            spec.extra = tool.extra;
            options.tools.push(spec);
        }
        let mut disable_parallel = None;
        options.tool_choice = request.tool_choice.map(|choice| match choice {
            WireChoice::Auto {
                disable_parallel_tool_use,
            } => {
                disable_parallel = disable_parallel_tool_use;
                ToolChoice::Auto
            }
            WireChoice::Any {
                disable_parallel_tool_use,
            } => {
                disable_parallel = disable_parallel_tool_use;
                ToolChoice::Required
            }
            WireChoice::None => ToolChoice::None,
            WireChoice::Tool {
                name,
                disable_parallel_tool_use,
            } => {
                disable_parallel = disable_parallel_tool_use;
                ToolChoice::Tool(name)
            }
        });
        if let Some(disable) = disable_parallel {
            let fields = serde_json::json!({ "disable_parallel_tool_use": disable });
            options.extra.insert(TOOL_CHOICE_KEY.into(), fields);
        }
        let typed = [
            ("stop", request.stop_sequences.map(Value::from)),
            ("top_p", request.top_p.map(Value::from)),
            ("top_k", request.top_k.map(Value::from)),
            ("metadata", request.metadata.map(to_value)),
            ("thinking", request.thinking.map(to_value)),
        ];
        for (key, value) in typed {
            if let Some(value) = value {
                options.extra.insert(key.into(), value);
            }
        }
        options.extra.extend(request.extra);
        options.response_format = output_format::decode(&mut options.extra)?;
        Ok(chat)
    }

    /// System text, a string or text blocks (`path` names it for errors):
    /// one system message per block, each with its cache breakpoint.
    fn system(&mut self, content: Content<Block>, path: &str) -> Result<(), Error> {
        let blocks = match content {
            Content::Text(text) => {
                self.messages.push(Message::system(text));
                return Ok(());
            }
            Content::Blocks(blocks) => blocks,
        };
        for (index, block) in blocks.into_iter().enumerate() {
            let Block::Text(mut block) = block else {
                return Err(invalid(format!(
                    "{path}[{index}]: system text takes only text blocks, not `{}`",
                    block.kind()
                )));
            };
            let cache = take_cache(&mut block.extra, || format!("{path}[{index}]"))?;
            let mut metadata = cached(cache);
            wire_extra::keep(&mut metadata, EXTRA_KEY, block.extra);
            self.messages
                .push(Message::system(block.text).with_metadata(metadata));
        }
        Ok(())
    }

    /// A user message's blocks: content, and runs of tool results.
    fn user(&mut self, at: usize, blocks: Vec<Block>) -> Result<(), Error> {
        for (index, block) in blocks.into_iter().enumerate() {
            match block {
                Block::ToolResult(mut result) => {
                    self.flush_content();
                    let cache = take_cache(&mut result.extra, || {
                        format!("messages[{at}].content[{index}]")
                    })?;
                    let path = || format!("messages[{at}].content[{index}].content");
                    let mut metadata = cached(cache);
                    let content = match result.content {
                        None => Vec::new(),
                        Some(Content::Text(text)) => vec![ContentBlock::text(text)],
                        Some(Content::Blocks(blocks)) => {
                            let mut fields = Vec::with_capacity(blocks.len());
                            let content = blocks
                                .into_iter()
                                .enumerate()
                                .map(|(inner, block)| {
                                    let path = || format!("{}[{inner}]", path());
                                    let (block, kept) = content_block(block, path)?;
                                    fields.push(kept);
                                    Ok(block)
                                })
                                .collect::<Result<_, Error>>()?;
                            wire_extra::keep_blocks(&mut metadata, BLOCKS_KEY, fields);
                            content
                        }
                    };
                    wire_extra::keep(&mut metadata, EXTRA_KEY, result.extra);
                    let name = self.names.get(&result.tool_use_id).cloned();
                    let mut decoded =
                        ToolResult::new(result.tool_use_id, name.unwrap_or_default(), content);
                    decoded.is_error = result.is_error;
                    decoded.metadata = metadata;
                    self.results.push(decoded);
                }
                block => {
                    self.flush_results();
                    let (block, fields) =
                        content_block(block, || format!("messages[{at}].content[{index}]"))?;
                    self.content.push(block);
                    self.content_fields.push(fields);
                }
            }
        }
        self.flush_results();
        self.flush_content();
        Ok(())
    }

    /// An assistant message's blocks, in order.
    fn assistant(&mut self, at: usize, blocks: Vec<Block>) -> Result<(), Error> {
        for (index, block) in blocks.into_iter().enumerate() {
            let message = match block {
                Block::ToolUse(mut call) => {
                    let cache = take_cache(&mut call.extra, || {
                        format!("messages[{at}].content[{index}]")
                    })?;
                    let mut metadata = cached(cache);
                    if !call.extra.is_empty() {
                        let mut fields = call.extra;
                        fields.insert("type".into(), "tool_use".into());
                        metadata.insert(BLOCK_KEY, Value::Object(fields));
                    }
                    self.call(call.id, call.name, call.input, false, metadata);
                    continue;
                }
                Block::Other(mut fields)
                    if matches!(
                        fields.get("type").and_then(Value::as_str),
                        Some("server_tool_use" | "mcp_tool_use")
                    ) =>
                {
                    let mut take = |key: &str| match fields.remove(key) {
                        Some(Value::String(text)) => text,
                        _ => String::new(),
                    };
                    let (id, name) = (take("id"), take("name"));
                    let input = fields.remove("input").unwrap_or(Value::Object(Map::new()));
                    let mut metadata = Metadata::new();
                    metadata.insert(BLOCK_KEY, Value::Object(fields));
                    self.call(id, name, input, true, metadata);
                    continue;
                }
                Block::Other(fields) => {
                    let mut metadata = Metadata::new();
                    metadata.insert(BLOCK_KEY, Value::Object(fields));
                    Message::assistant("").with_metadata(metadata)
                }
                Block::Text(text) if text.text.is_empty() => continue,
                Block::Text(mut text) => {
                    let cache = take_cache(&mut text.extra, || {
                        format!("messages[{at}].content[{index}]")
                    })?;
                    let mut metadata = cached(cache);
                    metadata.add_citations(citation::take(&mut text.extra, &text.text));
                    wire_extra::keep(&mut metadata, EXTRA_KEY, text.extra);
                    Message::assistant(text.text).with_metadata(metadata)
                }
                Block::Thinking(thinking) => Message::Reasoning(ReasoningMessage {
                    text: thinking.thinking,
                    signature: Some(thinking.signature).filter(|s| !s.is_empty()),
                    redacted: false,
                    metadata: kept(thinking.extra),
                }),
                Block::RedactedThinking(redacted) => Message::Reasoning(ReasoningMessage {
                    text: String::new(),
                    signature: Some(redacted.data),
                    redacted: true,
                    metadata: kept(redacted.extra),
                }),
                other => {
                    return Err(invalid(format!(
                        "messages[{at}].content[{index}]: an assistant message cannot hold a `{}` block",
                        other.kind()
                    )));
                }
            };
            self.flush_calls();
            self.messages.push(message);
        }
        self.flush_calls();
        Ok(())
    }

    fn call(&mut self, id: String, name: String, input: Value, server: bool, metadata: Metadata) {
        self.names.insert(id.clone(), name.clone());
        let mut call = ToolCall::new(id, name, input);
        call.provider_executed = server;
        call.metadata = metadata;
        self.calls.push(call);
    }

    fn flush_calls(&mut self) {
        if !self.calls.is_empty() {
            let calls = mem::take(&mut self.calls);
            self.messages.push(Message::tool_calls(calls));
        }
    }

    fn flush_results(&mut self) {
        if !self.results.is_empty() {
            let results = mem::take(&mut self.results);
            self.messages.push(Message::tool_results(results));
        }
    }

    fn flush_content(&mut self) {
        if !self.content.is_empty() {
            let content = mem::take(&mut self.content);
            let mut metadata = Metadata::new();
            let fields = mem::take(&mut self.content_fields);
            wire_extra::keep_blocks(&mut metadata, BLOCKS_KEY, fields);
            let message = Message::multimodal(Role::User, content).with_metadata(metadata);
            self.messages.push(message);
        }
    }
}

/// Keeps a request message's fields other than `role` and `content` with the
/// first thing it was decoded into ([`MESSAGE_KEY`]): the first call of a
/// `tool_calls` message, the first result of a `tool_results` one, else the
/// message.
fn keep_message_fields(decoded: &mut Message, fields: Map<String, Value>) {
    let metadata = match decoded {
        Message::ToolCalls(calls) => match calls.calls.first_mut() {
            Some(call) => &mut call.metadata,
            None => return,
        },
        Message::ToolResults(results) => match results.results.first_mut() {
            Some(result) => &mut result.metadata,
            None => return,
        },
        message => message.metadata_mut(),
    };
    wire_extra::keep(metadata, MESSAGE_KEY, fields);
}

/// Metadata holding a block's `fields` under [`EXTRA_KEY`], if any.
fn kept(fields: Map<String, Value>) -> Metadata {
    let mut metadata = Metadata::new();
    wire_extra::keep(&mut metadata, EXTRA_KEY, fields);
    metadata
}

fn to_value(value: impl serde::Serialize) -> Value {
    // These types are maps with string keys: writing them cannot fail.
    serde_json::to_value(value).unwrap_or_default()
}

/// Takes a block's or a tool's `cache_control` out of its `fields`; `path`
/// names it for the error when the value is not one.
fn take_cache(
    fields: &mut Map<String, Value>,
    path: impl FnOnce() -> String,
) -> Result<Option<CacheControl>, Error> {
    cache::take(fields).map_err(|message| invalid(format!("{}.{message}", path())))
}

/// Metadata holding only `cache`, if any.
fn cached(cache: Option<CacheControl>) -> Metadata {
    let mut metadata = Metadata::new();
    metadata.set_cache_control(cache);
    metadata
}

/// A user content block (text, image, document) as the canonical one, with
/// its cache breakpoint, and its fields the canonical block has no place for;
/// `path` names it for the error when it is another kind.
fn content_block(
    block: Block,
    path: impl Fn() -> String,
) -> Result<(ContentBlock, Map<String, Value>), Error> {
    let media = |mut block: MediaBlock| {
        let cache = take_cache(&mut block.extra, &path)?;
        let mut media = match block.source {
            Source::Base64 { media_type, data } => Media::base64(media_type, data),
            Source::Url { url } => Media::url(url),
            Source::Text { media_type, data } => Media::from_bytes(media_type, data.as_bytes()),
        };
        media.name = block.title;
        media.cache_control = cache;
        Ok::<_, Error>((media, block.extra))
    };
    Ok(match block {
        Block::Text(mut text) => {
            let cache = take_cache(&mut text.extra, &path)?;
            let block = ContentBlock::text(text.text).with_cache_control(cache);
            (block, text.extra)
        }
        Block::Image(image) => {
            let (media, fields) = media(image)?;
            (ContentBlock::Image(media), fields)
        }
        Block::Document(document) => {
            let (media, fields) = media(document)?;
            (ContentBlock::Document(media), fields)
        }
        other => {
            return Err(invalid(format!(
                "{}: a `{}` block cannot stand here (only text, image and document)",
                path(),
                other.kind()
            )));
        }
    })
}

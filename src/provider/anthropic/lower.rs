//! Lowering: a canonical [`ChatRequest`] → the Anthropic Messages request body.
//!
//! Pure: no IO. The history is walked once. System messages, wherever they
//! are, become the top-level `system`. The assistant's side of a turn —
//! reasoning, text, tool calls, server tool blocks — becomes one `assistant`
//! message of content blocks in their order; a run of tool results becomes one
//! `user` message of `tool_result` blocks. Under the `Inject` media policy,
//! the files follow in a user message of their own right after it (the API
//! joins consecutive user turns).

use serde_json::{Map, Value, json};

use crate::message::{MultimodalMessage, ReasoningMessage, TextMessage};
use crate::provider::history::{self, LowerHistory};
use crate::provider::media::{self, ToolResultMedia};
use crate::{
    ChatRequest, ContentBlock, Error, Media, MediaSource, Message, Role, ToolCall, ToolChoice,
    ToolResult, ToolSpec,
};

/// The name errors from this provider carry.
pub const PROVIDER: &str = "anthropic";

/// The metadata key under which lifting keeps what lowering must send back as
/// it came: a tool call's block fields other than `id`, `name` and `input`
/// (its `type` when a server ran it, `caller`), or the whole raw block of a
/// server tool's result (on an assistant text message with empty text).
pub const BLOCK_KEY: &str = "anthropic_block";

/// The `max_tokens` sent when a request sets none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// How the lowering writes requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LowerOptions {
    /// What to do with images and documents in tool results: `Native` by
    /// default, as `tool_result` blocks take them. Audio cannot be sent under
    /// any policy: the Messages API takes no audio input, so a tool result
    /// holding audio is an error naming the call and the type.
    pub tool_result_media: ToolResultMedia,
    /// The `max_tokens` sent when the request sets none
    /// ([`DEFAULT_MAX_TOKENS`]).
    pub max_tokens: u32,
}

impl Default for LowerOptions {
    fn default() -> Self {
        LowerOptions {
            tool_result_media: ToolResultMedia::Native,
            max_tokens: DEFAULT_MAX_TOKENS,
        }
    }
}

/// Lowers a request to the Messages body.
///
/// `options.extra` is merged into the body last (`thinking`, `metadata`,
/// `cache_control`, `top_k`…); an extra `stop` (a string or a list) is sent
/// as `stop_sequences`.
///
/// ```
/// use lmstack::provider::anthropic::{LowerOptions, lower};
/// use lmstack::{ChatRequest, Message};
/// use serde_json::json;
///
/// let request = ChatRequest::new(vec![Message::system("Be brief."), Message::user("Hi")])
///     .model("claude-sonnet-4-5");
/// let body = lower(&request, &LowerOptions::default()).unwrap();
/// assert_eq!(body, json!({
///     "model": "claude-sonnet-4-5",
///     "max_tokens": 4096,
///     "system": "Be brief.",
///     "messages": [{"role": "user", "content": "Hi"}],
/// }));
/// ```
pub fn lower(request: &ChatRequest, options: &LowerOptions) -> Result<Value, Error> {
    let mut body = Map::new();
    let chat = &request.options;
    if let Some(model) = &chat.model {
        body.insert("model".into(), model.clone().into());
    }
    body.insert(
        "max_tokens".into(),
        chat.max_tokens.unwrap_or(options.max_tokens).into(),
    );
    let mut history = History::new(options);
    history.lower(&request.messages)?;
    match history.system.len() {
        0 => {}
        1 => {
            body.insert("system".into(), history.system.remove(0).into());
        }
        _ => {
            let blocks = history.system.into_iter().map(text_block);
            body.insert("system".into(), blocks.collect::<Vec<_>>().into());
        }
    }
    body.insert("messages".into(), history.out.into());
    if !chat.tools.is_empty() {
        let tools = chat.tools.iter().map(lower_tool);
        body.insert("tools".into(), tools.collect::<Vec<_>>().into());
    }
    if let Some(choice) = &chat.tool_choice {
        body.insert("tool_choice".into(), lower_tool_choice(choice));
    }
    if let Some(temperature) = chat.temperature {
        body.insert("temperature".into(), temperature.into());
    }
    if chat.stream {
        body.insert("stream".into(), true.into());
    }
    for (key, value) in &chat.extra {
        match (key.as_str(), value) {
            ("stop", Value::String(stop)) => {
                body.insert("stop_sequences".into(), json!([stop]));
            }
            ("stop", stops) => {
                body.insert("stop_sequences".into(), stops.clone());
            }
            _ => {
                body.insert(key.clone(), value.clone());
            }
        }
    }
    Ok(Value::Object(body))
}

fn lower_tool(tool: &ToolSpec) -> Value {
    let mut out = Map::new();
    out.insert("name".into(), tool.name.clone().into());
    if !tool.description.is_empty() {
        out.insert("description".into(), tool.description.clone().into());
    }
    out.insert("input_schema".into(), tool.parameters.clone());
    Value::Object(out)
}

fn lower_tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!({"type": "auto"}),
        ToolChoice::None => json!({"type": "none"}),
        ToolChoice::Required => json!({"type": "any"}),
        ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
    }
}

fn text_block(text: impl Into<String>) -> Value {
    json!({"type": "text", "text": text.into()})
}

/// The walk over the history.
struct History<'a> {
    options: &'a LowerOptions,
    system: Vec<String>,
    out: Vec<Value>,
    /// The message whose content blocks are being gathered: an assistant
    /// turn, or a run of tool results (role `user`).
    open: Option<(Role, Vec<Value>)>,
    /// Files of the current run of tool results, for the user message that
    /// follows it (policy `Inject`).
    injected: Vec<Value>,
}

impl<'a> History<'a> {
    fn new(options: &'a LowerOptions) -> Self {
        History {
            options,
            system: Vec::new(),
            out: Vec::new(),
            open: None,
            injected: Vec::new(),
        }
    }

    fn lower(&mut self, messages: &[Message]) -> Result<(), Error> {
        self.walk(messages)?;
        self.close();
        Ok(())
    }

    /// Appends a block to the open message of `role`, opening one (and closing
    /// any other) when needed.
    fn block(&mut self, role: Role, block: Value) {
        match &mut self.open {
            Some((open, blocks)) if *open == role => blocks.push(block),
            _ => {
                self.close();
                self.open = Some((role, vec![block]));
            }
        }
    }

    /// Writes the open message, then the injected files.
    fn close(&mut self) {
        if let Some((role, blocks)) = self.open.take() {
            let role = if role == Role::Assistant {
                "assistant"
            } else {
                "user"
            };
            self.out.push(json!({"role": role, "content": blocks}));
        }
        if !self.injected.is_empty() {
            let files = std::mem::take(&mut self.injected);
            self.out.push(json!({"role": "user", "content": files}));
        }
    }

    /// A result's block; under `Inject`, its files go to `files`.
    fn tool_result(&self, result: &ToolResult, files: &mut Vec<Value>) -> Result<Value, Error> {
        if self.options.tool_result_media != ToolResultMedia::Reject {
            refuse_audio(&result.content, || {
                format!(
                    "the result of tool call `{}` ({})",
                    result.call_id, result.name
                )
            })?;
        }
        let has_media = result
            .content
            .iter()
            .any(|block| block.as_media().is_some());
        let content = if !has_media {
            match result.content.as_slice() {
                [ContentBlock::Text { text }] => Value::String(text.clone()),
                blocks => Value::Array(
                    blocks
                        .iter()
                        .filter_map(ContentBlock::as_text)
                        .map(text_block)
                        .collect(),
                ),
            }
        } else {
            match self.options.tool_result_media {
                ToolResultMedia::Native => {
                    let blocks = result.content.iter().map(content_block);
                    Value::Array(blocks.collect::<Result<_, _>>()?)
                }
                ToolResultMedia::Reject => return Err(media::rejected(PROVIDER, result)),
                ToolResultMedia::Inject => {
                    files.push(text_block(media::attachments_heading(
                        Some(&result.call_id),
                        &result.name,
                    )));
                    let media = result.content.iter().filter(|b| b.as_media().is_some());
                    for block in media {
                        files.push(content_block(block)?);
                    }
                    Value::String(media::text_with_note(result))
                }
            }
        };
        let mut block = json!({
            "type": "tool_result",
            "tool_use_id": result.call_id,
            "content": content,
        });
        if result.is_error {
            block["is_error"] = true.into();
        }
        Ok(block)
    }
}

impl<'a> LowerHistory for History<'a> {
    fn text(&mut self, message: &TextMessage) -> Result<(), Error> {
        match message.role {
            Role::System => self.system.push(message.text.clone()),
            Role::User => {
                self.close();
                self.out
                    .push(json!({"role": "user", "content": message.text}));
            }
            Role::Assistant => match message.metadata.get(BLOCK_KEY) {
                Some(block @ Value::Object(_)) => self.block(Role::Assistant, block.clone()),
                _ if message.text.is_empty() => {} // the API refuses empty text blocks
                _ => self.block(Role::Assistant, text_block(&message.text)),
            },
            Role::Tool => return Err(history::tool_role(PROVIDER, "text")),
        }
        Ok(())
    }

    fn multimodal(&mut self, message: &MultimodalMessage) -> Result<(), Error> {
        match message.role {
            Role::User => {
                refuse_audio(&message.content, || "a user message".to_owned())?;
                let blocks = message
                    .content
                    .iter()
                    .map(content_block)
                    .collect::<Result<Vec<_>, _>>()?;
                self.close();
                self.out.push(json!({"role": "user", "content": blocks}));
            }
            Role::System | Role::Assistant => {
                let mut text = String::new();
                for block in &message.content {
                    match block.as_text() {
                        Some(piece) => text.push_str(piece),
                        None => {
                            return Err(Error::InvalidRequest(format!(
                                "anthropic: Messages takes images and documents only from the user, not the {}",
                                if message.role == Role::System {
                                    "system"
                                } else {
                                    "assistant"
                                }
                            )));
                        }
                    }
                }
                if message.role == Role::System {
                    self.system.push(text);
                } else if !text.is_empty() {
                    self.block(Role::Assistant, text_block(text));
                }
            }
            Role::Tool => return Err(history::tool_role(PROVIDER, "multimodal")),
        }
        Ok(())
    }

    /// Thinking goes back unchanged with its signature; reasoning without one
    /// (from another provider) cannot be verified by the API and is left out.
    fn reasoning(&mut self, message: &ReasoningMessage) {
        let Some(signature) = &message.signature else {
            return;
        };
        let block = if message.redacted {
            json!({"type": "redacted_thinking", "data": signature})
        } else {
            json!({"type": "thinking", "thinking": message.text, "signature": signature})
        };
        self.block(Role::Assistant, block);
    }

    fn calls(&mut self, calls: &[ToolCall]) {
        for call in calls {
            self.block(Role::Assistant, lower_call(call));
        }
    }

    fn results(&mut self, results: &[ToolResult]) -> Result<(), Error> {
        for result in results {
            let mut files = Vec::new();
            let block = self.tool_result(result, &mut files)?;
            self.block(Role::User, block);
            // After the block: opening the results message closes the turn
            // before it, and the files wait for the results message to close.
            self.injected.extend(files);
        }
        Ok(())
    }
}

/// A call as its block: the fields lifting kept (under [`BLOCK_KEY`]), then
/// `id`, `name` and `input`. Arguments that are not an object (a call that
/// could not be read) go as `{}`: `input` must be an object.
fn lower_call(call: &ToolCall) -> Value {
    let mut block = match call.metadata.get(BLOCK_KEY) {
        Some(Value::Object(fields)) => fields.clone(),
        _ => Map::new(),
    };
    if !block.contains_key("type") {
        let kind = if call.provider_executed {
            "server_tool_use"
        } else {
            "tool_use"
        };
        block.insert("type".into(), kind.into());
    }
    let input = match &call.arguments {
        Value::Object(_) => call.arguments.clone(),
        _ => json!({}),
    };
    block.insert("id".into(), call.id.clone().into());
    block.insert("name".into(), call.name.clone().into());
    block.insert("input".into(), input);
    Value::Object(block)
}

/// Refuses audio in `content`, which the Messages API cannot take (it has no
/// audio input); `holder` names the block's place for the error.
fn refuse_audio(content: &[ContentBlock], holder: impl FnOnce() -> String) -> Result<(), Error> {
    match content
        .iter()
        .find(|block| matches!(block, ContentBlock::Audio(_)))
    {
        Some(audio) => Err(no_audio(&holder(), audio)),
        None => Ok(()),
    }
}

/// The error for an audio block held by `holder`: it names the type.
fn no_audio(holder: &str, audio: &ContentBlock) -> Error {
    let media_type = audio.as_media().and_then(Media::media_type);
    Error::InvalidRequest(format!(
        "anthropic: {holder} holds audio ({}), and the Messages API takes no audio input",
        media_type.unwrap_or("of unknown type")
    ))
}

/// A block as the Messages API writes it. Audio, which it cannot take, is an
/// error; callers refuse it first with [`refuse_audio`], which says where it was.
fn content_block(block: &ContentBlock) -> Result<Value, Error> {
    Ok(match block {
        ContentBlock::Text { text } => text_block(text),
        ContentBlock::Image(media) => json!({"type": "image", "source": source(media)?}),
        ContentBlock::Document(media) => {
            let mut document = json!({"type": "document", "source": source(media)?});
            if let Some(name) = &media.name {
                document["title"] = name.clone().into();
            }
            document
        }
        ContentBlock::Audio(_) => return Err(no_audio("a content block", block)),
    })
}

fn source(media: &Media) -> Result<Value, Error> {
    Ok(match &media.source {
        MediaSource::Base64 { media_type, data } => {
            json!({"type": "base64", "media_type": media_type, "data": &**data})
        }
        MediaSource::Url { url, .. } => json!({"type": "url", "url": url}),
        MediaSource::Ref { reference, .. } => return Err(media::unresolved(PROVIDER, reference)),
    })
}

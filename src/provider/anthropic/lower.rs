//! Lowering: a canonical [`ChatRequest`] → the Anthropic Messages request body.
//!
//! Pure: no IO. The history is walked once. The system messages before the
//! first other message become the top-level `system`, one text block each;
//! a later one stays in its place as a `system` message (the form Claude
//! Code sends, consecutive ones joined into one). Every [`CacheControl`]
//! goes back as `cache_control` on its block, message or tool. The assistant's side of a turn —
//! reasoning, text, tool calls, server tool blocks — becomes one `assistant`
//! message of content blocks in their order; a run of tool results becomes one
//! `user` message of `tool_result` blocks. Under the `Inject` media policy,
//! the files follow in a user message of their own right after it (the API
//! joins consecutive user turns).

use serde_json::{Map, Value};

use super::beta::BETA_KEY;
use super::cache;
use super::citation;
use super::output_format;
use super::server_tool;
use super::types::{
    Block, Content, InputMessage, MediaBlock, RedactedThinkingBlock, Request, Role as WireRole,
    Source, TextBlock, ThinkingBlock, Tool, ToolChoice as WireChoice, ToolResultBlock,
    ToolUseBlock,
};
use crate::message::{
    CacheControl, Citation, Metadata, MultimodalMessage, ReasoningMessage, TextMessage,
};
use crate::provider::Kind;
use crate::provider::history::{self, LowerHistory};
use crate::provider::media::{self, MediaPart, MediaPlan, Placement, ToolResultMedia};
use crate::provider::wire_extra;
use crate::{
    ChatRequest, ContentBlock, Error, Media, MediaSource, Message, Role, ToolCall, ToolChoice,
    ToolResult, ToolSpec,
};

/// The name errors from this provider carry.
pub(crate) const PROVIDER: &str = Kind::Anthropic.name();

/// The metadata key under which lifting keeps what lowering must send back as
/// it came: a tool call's block fields other than `id`, `name` and `input`
/// (its `type` when a server ran it, `caller`), or the whole raw block of a
/// server tool's result (on an assistant text message with empty text).
pub const BLOCK_KEY: &str = "anthropic_block";

/// The metadata key under which the decoder keeps the fields of a block it
/// has no place for, as they came, and the lowering finds them to write
/// back: on a system or assistant text message, its text block's; on a
/// reasoning message, its `thinking` or `redacted_thinking` block's; on a
/// tool result, its `tool_result` block's (`cache_control` has a typed place
/// instead). Other wires leave it out.
///
/// ```
/// use lmstack::provider::anthropic::{EXTRA_KEY, LowerOptions, decode_request, lower};
/// use serde_json::json;
///
/// let body = json!({"max_tokens": 8, "messages": [{"role": "user", "content": "Hi"},
///     {"role": "assistant", "content": [{"type": "text", "text": "Yo", "x_new": 1}]}]});
/// let request = decode_request(body.to_string().as_bytes()).unwrap();
/// assert_eq!(request.messages[1].metadata().get(EXTRA_KEY), Some(&json!({"x_new": 1})));
/// assert_eq!(lower(&request, &LowerOptions::default()).unwrap(), body);
/// ```
pub const EXTRA_KEY: &str = "anthropic_extra";

/// The metadata key under which the decoder keeps the fields of each content
/// block of a user message, or of a tool result's content, that it has no
/// place for: one object per content block, in order.
pub const BLOCKS_KEY: &str = "anthropic_blocks";

/// The metadata key, on the first message, call or result a request message
/// was decoded into, under which the decoder keeps that request message's
/// fields other than `role` and `content`.
pub const MESSAGE_KEY: &str = "anthropic_message";

/// The `options.extra` key under which the decoder keeps the fields of
/// `tool_choice` other than its `type` and `name`
/// (`disable_parallel_tool_use`); the lowering writes them back into
/// `tool_choice`, other wires drop it.
pub const TOOL_CHOICE_KEY: &str = "anthropic_tool_choice";

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

/// Lowers a request to the Messages body, as JSON (see [`lower_request`]).
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
    let body = lower_request(request, options)?;
    serde_json::to_value(body).map_err(|error| Error::json("anthropic: the request body", error))
}

/// Lowers a request to the typed Messages body.
///
/// `options.extra` goes into the body's flattened fields last (`thinking`,
/// `metadata`, `cache_control`, `top_k`…), so a key there wins over a field
/// of the same name; an extra `stop` (a string or a list) is sent as
/// `stop_sequences`. A JSON-schema response format goes in
/// `output_config.format`, beside any other `output_config` setting; the beta
/// flags ([`BETA_KEY`](super::BETA_KEY)) go in a header instead. Server tools
/// follow the client's tools in `tools`: one an Anthropic client wrote goes
/// back as it came (its typed options written over it if they were changed),
/// web search from another wire as [`WEB_SEARCH_TYPE`](super::WEB_SEARCH_TYPE)
/// with its options, code execution as
/// [`CODE_EXECUTION_TYPE`](super::CODE_EXECUTION_TYPE) (with its beta flag in
/// the header); another wire's own tool is refused.
///
/// ```
/// use lmstack::provider::anthropic::types::Content;
/// use lmstack::provider::anthropic::{LowerOptions, lower_request};
/// use lmstack::{ChatRequest, Message};
///
/// let mut request = ChatRequest::new(vec![Message::user("Hi")]);
/// request.options.extra.insert("stop".into(), "END".into());
/// let body = lower_request(&request, &LowerOptions::default()).unwrap();
/// assert_eq!(body.max_tokens, 4096);
/// assert_eq!(body.messages[0].content, Content::Text("Hi".into()));
/// assert_eq!(body.extra["stop_sequences"], serde_json::json!(["END"]));
/// ```
pub fn lower_request(request: &ChatRequest, options: &LowerOptions) -> Result<Request, Error> {
    let chat = &request.options;
    let mut history = History::new(options);
    history.lower(&request.messages)?;
    let system = Some(system_content(history.system))
        .filter(|content| !matches!(content, Content::Blocks(blocks) if blocks.is_empty()));
    let mut extra = Map::new();
    for (key, value) in &chat.extra {
        match (key.as_str(), value) {
            ("stop", Value::String(stop)) => {
                extra.insert("stop_sequences".into(), vec![stop.clone()].into());
            }
            ("stop", stops) => {
                extra.insert("stop_sequences".into(), stops.clone());
            }
            // Sent as a header (`Wire::headers`); written into `tool_choice`.
            (BETA_KEY | TOOL_CHOICE_KEY, _) => {}
            _ => {
                extra.insert(key.clone(), value.clone());
            }
        }
    }
    if let Some(format) = &chat.response_format {
        output_format::lower(format, &mut extra);
    }
    let mut tools: Vec<Tool> = chat.tools.iter().map(lower_tool).collect();
    for tool in &chat.server_tools {
        tools.push(server_tool::lower(tool)?);
    }
    Ok(Request {
        model: chat.model.clone(),
        max_tokens: chat.max_tokens.unwrap_or(options.max_tokens),
        system,
        messages: history.out,
        tools,
        tool_choice: chat
            .tool_choice
            .as_ref()
            .map(|choice| lower_tool_choice(choice, chat.extra.get(TOOL_CHOICE_KEY))),
        temperature: chat.temperature,
        stream: chat.stream,
        extra,
        ..Request::default()
    })
}

fn lower_tool(tool: &ToolSpec) -> Tool {
    let extra = (tool.extra.iter())
        .filter(|(key, _)| !another_wires(key))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    Tool {
        kind: None,
        name: tool.name.clone(),
        description: Some(tool.description.clone()).filter(|text| !text.is_empty()),
        input_schema: Some(tool.parameters.clone()),
        extra: cache::with(extra, tool.cache_control),
    }
}

/// Whether a key of a [`ToolSpec`]'s `extra` holds another wire's fields
/// (an Anthropic client's own are kept there as they came).
fn another_wires(key: &str) -> bool {
    #[cfg(feature = "openai")]
    if key == crate::provider::openai_chat::EXTRA_KEY {
        return true;
    }
    #[cfg(feature = "openai-responses")]
    if key == crate::provider::openai_responses::EXTRA_KEY {
        return true;
    }
    #[cfg(feature = "gemini")]
    if key == crate::provider::gemini::EXTRA_KEY || key == crate::provider::gemini::TOOL_KEY {
        return true;
    }
    let _ = key;
    false
}

/// System text blocks as the API takes them: one plain block as a string,
/// blocks otherwise (a breakpoint needs its block).
fn system_content(mut blocks: Vec<Block>) -> Content<Block> {
    match blocks.as_mut_slice() {
        [Block::Text(only)] if only.extra.is_empty() => {
            Content::Text(std::mem::take(&mut only.text))
        }
        _ => Content::Blocks(blocks),
    }
}

/// A text block with `cache` as its `cache_control`.
fn cached_text(text: impl Into<String>, cache: Option<CacheControl>) -> Block {
    text_with(text, Map::new(), cache)
}

/// A text block with `fields` (kept by the decoder) and `cache`.
fn text_with(
    text: impl Into<String>,
    fields: Map<String, Value>,
    cache: Option<CacheControl>,
) -> Block {
    Block::Text(TextBlock {
        text: text.into(),
        extra: cache::with(fields, cache),
    })
}

/// The tool choice, with the fields the decoder kept ([`TOOL_CHOICE_KEY`]).
fn lower_tool_choice(choice: &ToolChoice, kept: Option<&Value>) -> WireChoice {
    let disable_parallel_tool_use = kept
        .and_then(|kept| kept.get("disable_parallel_tool_use"))
        .and_then(Value::as_bool);
    match choice {
        ToolChoice::Auto => WireChoice::Auto {
            disable_parallel_tool_use,
        },
        ToolChoice::None => WireChoice::None,
        ToolChoice::Required => WireChoice::Any {
            disable_parallel_tool_use,
        },
        ToolChoice::Tool(name) => WireChoice::Tool {
            name: name.clone(),
            disable_parallel_tool_use,
        },
    }
}

fn text_block(text: impl Into<String>) -> Block {
    Block::Text(TextBlock::new(text))
}

/// The walk over the history.
struct History<'a> {
    options: &'a LowerOptions,
    /// The blocks of the top-level `system`.
    system: Vec<Block>,
    out: Vec<InputMessage>,
    /// The message whose content blocks are being gathered: an assistant
    /// turn, or a run of tool results (role `user`), and its fields.
    open: Option<(WireRole, Vec<Block>, Map<String, Value>)>,
    /// Where tool results' files go; those of the current run of tool
    /// results wait for the user message that follows it.
    media: MediaPlan<Block>,
}

impl<'a> History<'a> {
    fn new(options: &'a LowerOptions) -> Self {
        History {
            options,
            system: Vec::new(),
            out: Vec::new(),
            open: None,
            media: MediaPlan::new(PROVIDER, options.tool_result_media),
        }
    }

    /// An assistant text as the blocks its citations cover, each with those it
    /// takes back: all but a web page cited without its `encrypted_index`
    /// (one from another wire). The breakpoint goes on the last block.
    fn cited_text(
        &mut self,
        message: &TextMessage,
        fields: Map<String, Value>,
        cache: Option<CacheControl>,
    ) {
        let citations: Vec<Citation> = message
            .metadata
            .citations()
            .into_iter()
            .filter(citation::sent_back)
            .collect();
        let pieces = citation::split(&message.text, &citations);
        let last = pieces.len().saturating_sub(1);
        // The block's own fields and its breakpoint go on its last piece.
        let mut fields = Some(fields);
        for (at, (piece, cited)) in pieces.into_iter().enumerate() {
            let kept = if at == last { fields.take() } else { None };
            let mut extra = cache::with(kept.unwrap_or_default(), cache.filter(|_| at == last));
            if !cited.is_empty() {
                let cited = cited.into_iter().map(citation::lower).collect();
                extra.insert("citations".into(), Value::Array(cited));
            }
            let block = TextBlock {
                text: piece.to_owned(),
                extra,
            };
            self.block(WireRole::Assistant, Block::Text(block), &message.metadata);
        }
    }

    fn lower(&mut self, messages: &[Message]) -> Result<(), Error> {
        self.walk(messages)?;
        self.close();
        Ok(())
    }

    /// The open message of `role`, opening one (and closing any other) when
    /// needed; the request message's fields in `metadata` ([`MESSAGE_KEY`])
    /// join its own.
    fn open(&mut self, role: WireRole, metadata: &Metadata) -> &mut Vec<Block> {
        if !matches!(&self.open, Some((open, ..)) if *open == role) {
            self.close();
        }
        let (_, blocks, fields) = self
            .open
            .get_or_insert_with(|| (role, Vec::new(), Map::new()));
        fields.extend(wire_extra::kept(metadata, MESSAGE_KEY));
        blocks
    }

    /// Appends a block to the open message of `role` (see [`Self::open`]).
    fn block(&mut self, role: WireRole, block: Block, metadata: &Metadata) {
        self.open(role, metadata).push(block);
    }

    /// Writes a user message, closing what is open, with the request
    /// message's fields in `metadata`.
    fn user(&mut self, content: Content<Block>, metadata: &Metadata) {
        self.close();
        self.out.push(InputMessage {
            role: WireRole::User,
            content,
            extra: wire_extra::kept(metadata, MESSAGE_KEY),
        });
    }

    /// Writes the open message, then the injected files.
    fn close(&mut self) {
        if let Some((role, blocks, extra)) = self.open.take() {
            let content = match role {
                WireRole::System => system_content(blocks),
                _ => Content::Blocks(blocks),
            };
            self.out.push(InputMessage {
                role,
                content,
                extra,
            });
        }
        if let Some(files) = self.media.take_waiting() {
            self.out.push(InputMessage {
                role: WireRole::User,
                content: Content::Blocks(files),
                extra: Map::new(),
            });
        }
    }

    /// A system text block: into the top-level `system` before the
    /// conversation starts, else into a `system` message in its place.
    fn system(&mut self, block: Block, metadata: &Metadata) {
        if self.out.is_empty() && self.open.is_none() {
            self.system.push(block);
        } else {
            self.block(WireRole::System, block, metadata);
        }
    }

    /// A result's block; under `Inject`, its files wait for the message
    /// after the run of results.
    fn tool_result(&mut self, result: &ToolResult) -> Result<Block, Error> {
        if self.options.tool_result_media != ToolResultMedia::Reject {
            refuse_audio(&result.content, || {
                format!(
                    "the result of tool call `{}` ({})",
                    result.call_id, result.name
                )
            })?;
        }
        let metadata = &result.metadata;
        let content = match self.media.place(result, Some(&result.call_id))? {
            Placement::NoFiles => match result.content.as_slice() {
                [
                    ContentBlock::Text {
                        text,
                        cache_control: None,
                    },
                ] if metadata.get(BLOCKS_KEY).is_none() => Content::Text(text.clone()),
                blocks => Content::Blocks(
                    blocks
                        .iter()
                        .enumerate()
                        .filter_map(|(index, block)| {
                            let fields = wire_extra::kept_block(metadata, BLOCKS_KEY, index);
                            Some(text_with(block.as_text()?, fields, block.cache_control()))
                        })
                        .collect(),
                ),
            },
            Placement::Native => Content::Blocks(blocks(&result.content, metadata)?),
            Placement::Injected(text) => Content::Text(text),
        };
        Ok(Block::ToolResult(ToolResultBlock {
            tool_use_id: result.call_id.clone(),
            content: Some(content),
            is_error: result.is_error,
            extra: cache::with(
                wire_extra::kept(metadata, EXTRA_KEY),
                metadata.cache_control(),
            ),
        }))
    }
}

impl<'a> LowerHistory for History<'a> {
    fn text(&mut self, message: &TextMessage) -> Result<(), Error> {
        let metadata = &message.metadata;
        let cache = metadata.cache_control();
        let fields = wire_extra::kept(metadata, EXTRA_KEY);
        match message.role {
            Role::System => self.system(text_with(&message.text, fields, cache), metadata),
            Role::User if cache.is_none() && fields.is_empty() => {
                self.user(Content::Text(message.text.clone()), metadata)
            }
            Role::User => {
                let block = text_with(&message.text, fields, cache);
                self.user(Content::Blocks(vec![block]), metadata)
            }
            Role::Assistant => match metadata.get(BLOCK_KEY) {
                Some(Value::Object(block)) => {
                    self.block(WireRole::Assistant, Block::Other(block.clone()), metadata)
                }
                _ if message.text.is_empty() => {} // the API refuses empty text blocks
                _ => self.cited_text(message, fields, cache),
            },
            Role::Tool => return Err(history::tool_role(PROVIDER, "text")),
        }
        Ok(())
    }

    fn multimodal(&mut self, message: &MultimodalMessage) -> Result<(), Error> {
        match message.role {
            Role::User => {
                refuse_audio(&message.content, || "a user message".to_owned())?;
                let blocks = blocks(&message.content, &message.metadata)?;
                self.user(Content::Blocks(blocks), &message.metadata);
            }
            Role::System => {
                let what = "Messages takes images and documents";
                history::text_only(PROVIDER, what, message)?;
                for block in &message.content {
                    self.system(content_block(block)?, &message.metadata);
                }
            }
            Role::Assistant => {
                let what = "Messages takes images and documents";
                let text = history::text_only(PROVIDER, what, message)?;
                if !text.is_empty() {
                    self.block(WireRole::Assistant, text_block(text), &message.metadata);
                }
            }
            Role::Tool => return Err(history::tool_role(PROVIDER, "multimodal")),
        }
        Ok(())
    }

    /// Thinking goes back unchanged with its signature; reasoning without one
    /// (from another provider) cannot be verified by the API and is left out.
    fn reasoning(&mut self, message: &ReasoningMessage) {
        if let Some(block) = reasoning_block(message) {
            self.block(WireRole::Assistant, block, &message.metadata);
        }
    }

    fn calls(&mut self, calls: &[ToolCall]) {
        for call in calls {
            let input = match &call.arguments {
                Value::Object(_) => call.arguments.clone(),
                _ => Value::Object(Map::new()),
            };
            let block = call_block(
                call.id.clone(),
                call.name.clone(),
                call.provider_executed,
                &call.metadata,
                input,
            );
            self.block(WireRole::Assistant, block, &call.metadata);
        }
    }

    fn results(&mut self, results: &[ToolResult]) -> Result<(), Error> {
        for result in results {
            // The results message opens first: opening it closes the turn
            // before, and with it any files waiting, not this result's.
            self.open(WireRole::User, &result.metadata);
            let block = self.tool_result(result)?;
            self.block(WireRole::User, block, &result.metadata);
        }
        Ok(())
    }
}

/// A reasoning message as its block: `thinking` with its signature, or
/// `redacted_thinking`, with the block's fields the decoder kept
/// ([`EXTRA_KEY`]); `None` without a signature (the API could not verify it).
pub(crate) fn reasoning_block(message: &ReasoningMessage) -> Option<Block> {
    let signature = message.signature.clone()?;
    let extra = wire_extra::kept(&message.metadata, EXTRA_KEY);
    Some(if message.redacted {
        Block::RedactedThinking(RedactedThinkingBlock {
            data: signature,
            extra,
        })
    } else {
        Block::Thinking(ThinkingBlock {
            thinking: message.text.clone(),
            signature,
            extra,
        })
    })
}

/// A call as its block, for lowering and for the server's replies: `tool_use`
/// (`server_tool_use` when the provider ran it), with the fields lifting kept
/// under [`BLOCK_KEY`] in `metadata` (its type, `caller`) sent back as they
/// came, and its cache breakpoint as `cache_control`. A block of a type other than `tool_use` is [`Block::Other`].
pub(crate) fn call_block(
    id: String,
    name: String,
    provider_executed: bool,
    metadata: &Metadata,
    input: Value,
) -> Block {
    let fields = match metadata.get(BLOCK_KEY) {
        Some(Value::Object(fields)) => fields.clone(),
        _ => Map::new(),
    };
    let mut fields = cache::with(fields, metadata.cache_control());
    let kind = match fields.get("type") {
        Some(Value::String(kind)) => kind.as_str(),
        _ if provider_executed => "server_tool_use",
        _ => "tool_use",
    };
    if kind == "tool_use" {
        fields.shift_remove("type");
        return Block::ToolUse(ToolUseBlock {
            id,
            name,
            input,
            extra: fields,
        });
    }
    if !fields.contains_key("type") {
        fields.insert("type".into(), kind.into());
    }
    fields.insert("id".into(), id.into());
    fields.insert("name".into(), name.into());
    fields.insert("input".into(), input);
    Block::Other(fields)
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
impl MediaPart for Block {
    fn text(text: String) -> Self {
        text_block(text)
    }

    fn file(block: &ContentBlock) -> Result<Self, Error> {
        content_block(block)
    }
}

/// Content blocks as the API writes them, each with the fields the decoder
/// kept for it in `metadata` ([`BLOCKS_KEY`]).
fn blocks(content: &[ContentBlock], metadata: &Metadata) -> Result<Vec<Block>, Error> {
    content
        .iter()
        .enumerate()
        .map(|(index, block)| {
            let mut block = content_block(block)?;
            let kept = wire_extra::kept_block(metadata, BLOCKS_KEY, index);
            match &mut block {
                Block::Text(TextBlock { extra, .. })
                | Block::Image(MediaBlock { extra, .. })
                | Block::Document(MediaBlock { extra, .. }) => extra.extend(kept),
                _ => {}
            }
            Ok(block)
        })
        .collect()
}

fn content_block(block: &ContentBlock) -> Result<Block, Error> {
    let media = |media: &Media, title: Option<String>| -> Result<MediaBlock, Error> {
        Ok(MediaBlock {
            source: source(media)?,
            title,
            extra: cache::with(Map::new(), media.cache_control),
        })
    };
    Ok(match block {
        ContentBlock::Text {
            text,
            cache_control,
        } => cached_text(text, *cache_control),
        ContentBlock::Image(image) => Block::Image(media(image, None)?),
        ContentBlock::Document(document) => {
            Block::Document(media(document, document.name.clone())?)
        }
        ContentBlock::Audio(_) => return Err(no_audio("a content block", block)),
    })
}

fn source(media: &Media) -> Result<Source, Error> {
    Ok(match &media.source {
        MediaSource::Base64 { media_type, data } => Source::Base64 {
            media_type: media_type.clone(),
            data: data.clone(),
        },
        MediaSource::Url { url, .. } => Source::Url { url: url.clone() },
        MediaSource::Ref { reference, .. } => return Err(media::unresolved(PROVIDER, reference)),
    })
}

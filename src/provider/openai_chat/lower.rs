//! Lowering: a canonical [`ChatRequest`] → the Chat Completions request body.
//!
//! Pure: no IO. It builds the typed [`ChatCompletionRequest`] the server
//! direction reads too (the server direction's request decoding). The history is walked once; the assistant's side of a turn
//! (reasoning, text, tool calls — of `tool_calls` or `tool_aggregate` messages)
//! becomes one `assistant` message, and every tool result a `role: "tool"`
//! message with its `tool_call_id`.

use serde_json::{Map, Value};

use super::response_format;
use super::server_tool as search;
use super::types::{
    ChatCompletionRequest, ChatMessage, ChatRole, ContentPart, FileData, FunctionCall,
    FunctionDefinition, FunctionName, ImageUrl, InputAudio, MessageContent, NamedToolChoice,
    StreamOptions, Tool, ToolCall as WireToolCall, ToolChoice as WireToolChoice,
};

use crate::message::{Metadata, MultimodalMessage, ReasoningMessage, TextMessage};
use crate::provider::Kind;
use crate::provider::history::{self, LowerHistory};
use crate::provider::media::{self, MediaPart, MediaPlan, Placement, ToolResultMedia};
use crate::provider::redact::redact_url;
use crate::provider::server_tool;
use crate::provider::wire_extra;
use crate::{
    ChatRequest, ContentBlock, Error, Media, MediaSource, Message, Role, ToolCall, ToolChoice,
    ToolResult, ToolSpec,
};

/// The name errors from this provider carry.
pub(crate) const PROVIDER: &str = Kind::OpenAiChat.name();

/// The metadata key that records which wire field a reasoning message came in
/// (`reasoning_content` or `reasoning`), so that it is echoed back in the same one.
pub const REASONING_FIELD_KEY: &str = "reasoning_field";

pub use crate::provider::openai_shared::{DEVELOPER_KEY, REFUSAL_KEY};

/// The metadata key under which the decoder keeps the fields of a wire
/// object it has no place for, as they came, and the lowering finds them to
/// write back: on a message, its message's (`name`, unknown ones); on a tool
/// call, the call's; on a tool result, its `tool` message's; in a
/// [`ToolSpec`]'s `extra`, the tool's (`{"tool": {…}, "function": {…}}`:
/// `function.strict` among them). Other wires leave it out.
///
/// ```
/// use lmstack::provider::openai_chat::{EXTRA_KEY, LowerOptions, decode_request, lower};
/// use serde_json::json;
///
/// let body = json!({"messages": [{"role": "user", "name": "ann", "x_new": 1, "content": "Hi"}]});
/// let request = decode_request(body.to_string().as_bytes()).unwrap();
/// assert_eq!(request.messages[0].metadata().get(EXTRA_KEY), Some(&json!({"x_new": 1, "name": "ann"})));
/// assert_eq!(lower(&request, &LowerOptions::default()).unwrap(), body);
/// ```
pub const EXTRA_KEY: &str = "openai_extra";

/// The metadata key under which the decoder keeps the fields of each content
/// part of a message or a tool result that it has no place for, one object
/// per content block in order (an image's `image_url.detail` as
/// `{"image_url": {"detail": …}}`).
pub const PARTS_KEY: &str = "openai_parts";

/// The metadata key, on the first call of an assistant message that holds
/// calls only, under which the decoder keeps that message's fields it has no
/// place for.
pub const MESSAGE_KEY: &str = "openai_message";

/// The role a system message goes back with: `developer` when it came so.
fn system_role(metadata: &Metadata) -> ChatRole {
    if metadata.get(DEVELOPER_KEY) == Some(&Value::Bool(true)) {
        ChatRole::Developer
    } else {
        ChatRole::System
    }
}

/// How the lowering writes what the canonical model holds and Chat Completions
/// spells in several ways.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LowerOptions {
    /// What to do with images, documents and audio in tool results.
    pub tool_result_media: ToolResultMedia,
    /// Whether and how reasoning is sent back on the next request.
    pub reasoning_echo: ReasoningEcho,
    /// The field that carries `options.max_tokens`.
    pub max_tokens_field: MaxTokensField,
    /// When set, every tool's `function.strict` is set to this.
    pub strict_tools: Option<bool>,
    /// Ask for usage in streaming mode (`stream_options.include_usage`).
    pub include_usage: bool,
}

impl Default for LowerOptions {
    fn default() -> Self {
        LowerOptions {
            tool_result_media: ToolResultMedia::Inject,
            reasoning_echo: ReasoningEcho::Auto,
            max_tokens_field: MaxTokensField::MaxTokens,
            strict_tools: None,
            include_usage: true,
        }
    }
}

/// Whether and how reasoning goes back to the server on the next request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ReasoningEcho {
    /// Reasoning that came from a Chat Completions server goes back in the field
    /// it came in (recorded under [`REASONING_FIELD_KEY`]: GLM and llama.cpp read
    /// `reasoning_content` back); other reasoning is left out.
    #[default]
    Auto,
    /// All reasoning goes back in this field.
    Field(String),
    /// Reasoning is never sent back.
    Never,
}

/// The field that carries the output token limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_tokens`: what compatible servers read.
    #[default]
    MaxTokens,
    /// `max_completion_tokens`: what OpenAI's reasoning models require.
    MaxCompletionTokens,
}

/// Lowers a request to the Chat Completions body.
///
/// ```
/// use lmstack::provider::openai_chat::{LowerOptions, lower};
/// use lmstack::{ChatRequest, Message};
/// use serde_json::json;
///
/// let request = ChatRequest::new(vec![Message::system("Be brief."), Message::user("Hi")]).model("gpt-4o");
/// let body = lower(&request, &LowerOptions::default()).unwrap();
/// assert_eq!(body, json!({
///     "model": "gpt-4o",
///     "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
/// }));
/// ```
pub fn lower(request: &ChatRequest, options: &LowerOptions) -> Result<Value, Error> {
    let body = lower_request(request, options)?;
    serde_json::to_value(&body).map_err(|source| Error::Json {
        context: format!("{PROVIDER}: writing the request body"),
        source,
    })
}

/// Lowers a request to the typed Chat Completions body (what [`lower`] writes
/// as JSON). `options.extra` goes in [`ChatCompletionRequest::extra`], and wins
/// over a typed field of the same name when written.
///
/// ```
/// use lmstack::provider::openai_chat::{LowerOptions, lower_request};
/// use lmstack::{ChatRequest, Message};
///
/// let request = ChatRequest::new(vec![Message::user("Hi")]).streaming(true);
/// let body = lower_request(&request, &LowerOptions::default()).unwrap();
/// assert_eq!(body.stream, Some(true));
/// assert_eq!(body.stream_options.unwrap().include_usage, Some(true));
/// ```
pub fn lower_request(
    request: &ChatRequest,
    options: &LowerOptions,
) -> Result<ChatCompletionRequest, Error> {
    let chat = &request.options;
    if let Some(n) = chat.extra.get("n")
        && n.as_u64() != Some(1)
    {
        return Err(Error::InvalidRequest(format!(
            "openai: `n` = {n} asks for several choices; lmstack lifts one choice per reply"
        )));
    }
    let mut body = ChatCompletionRequest {
        model: chat.model.clone(),
        messages: History::new(options).lower(&request.messages)?,
        tool_choice: server_tool::function_choice(chat).map(lower_tool_choice),
        temperature: chat.temperature,
        extra: chat.extra.clone(),
        ..ChatCompletionRequest::default()
    };
    if !chat.extra.contains_key("response_format") {
        body.response_format = chat.response_format.as_ref().map(response_format::lower);
    }
    let web_search = search::lower(&chat.server_tools)?;
    if !chat.extra.contains_key("web_search_options") {
        body.web_search_options = web_search;
    }
    if !chat.tools.is_empty() {
        let tools = chat.tools.iter().map(|tool| lower_tool(tool, options));
        body.tools = Some(tools.collect());
    }
    match options.max_tokens_field {
        MaxTokensField::MaxTokens => body.max_tokens = chat.max_tokens,
        MaxTokensField::MaxCompletionTokens => body.max_completion_tokens = chat.max_tokens,
    }
    if chat.stream {
        body.stream = Some(true);
        if options.include_usage {
            body.stream_options = Some(StreamOptions {
                include_usage: Some(true),
                extra: Map::new(),
            });
        }
    }
    Ok(body)
}

/// A tool as the wire writes it, with the fields the decoder kept
/// ([`EXTRA_KEY`]); [`LowerOptions::strict_tools`] wins over a kept `strict`.
fn lower_tool(tool: &ToolSpec, options: &LowerOptions) -> Tool {
    let kept = |place: &str| match tool.extra.get(EXTRA_KEY).and_then(|kept| kept.get(place)) {
        Some(Value::Object(fields)) => fields.clone(),
        _ => Map::new(),
    };
    let mut function = kept("function");
    let strict = function
        .remove("strict")
        .and_then(|strict| strict.as_bool());
    Tool {
        kind: "function".into(),
        function: FunctionDefinition {
            name: tool.name.clone(),
            description: Some(tool.description.clone()).filter(|text| !text.is_empty()),
            parameters: Some(tool.parameters.clone()),
            strict: options.strict_tools.or(strict),
            extra: function,
        },
        extra: kept("tool"),
    }
}

fn lower_tool_choice(choice: &ToolChoice) -> WireToolChoice {
    let mode = |mode: &str| WireToolChoice::Mode(mode.into());
    match choice {
        ToolChoice::Auto => mode("auto"),
        ToolChoice::None => mode("none"),
        ToolChoice::Required => mode("required"),
        ToolChoice::Tool(name) => WireToolChoice::Named(NamedToolChoice {
            kind: "function".into(),
            function: FunctionName { name: name.clone() },
        }),
    }
}

/// The walk over the history: wire messages out, the assistant turn being built,
/// and the files waiting for their synthetic user message.
struct History<'a> {
    options: &'a LowerOptions,
    out: Vec<ChatMessage>,
    assistant: Option<AssistantTurn>,
    /// Where tool results' files go; the parts of the synthetic user message
    /// that follows the current run of tool messages.
    media: MediaPlan<ContentPart>,
}

#[derive(Default)]
struct AssistantTurn {
    text: Option<String>,
    refusal: Option<String>,
    reasoning: Option<(String, String)>,
    calls: Vec<WireToolCall>,
    /// The message's fields the decoder kept ([`EXTRA_KEY`], [`MESSAGE_KEY`]).
    extra: Map<String, Value>,
}

/// A wire message from `role` with `content`, and the fields of `metadata`'s
/// [`EXTRA_KEY`].
fn wire_message(role: ChatRole, content: MessageContent, metadata: &Metadata) -> ChatMessage {
    ChatMessage {
        role: Some(role),
        content: Some(content),
        extra: wire_extra::kept(metadata, EXTRA_KEY),
        ..ChatMessage::default()
    }
}

impl<'a> History<'a> {
    fn new(options: &'a LowerOptions) -> Self {
        History {
            options,
            out: Vec::new(),
            assistant: None,
            media: MediaPlan::new(PROVIDER, options.tool_result_media),
        }
    }

    fn lower(mut self, messages: &[Message]) -> Result<Vec<ChatMessage>, Error> {
        self.walk(messages)?;
        self.close_turn();
        self.close_injected();
        Ok(self.out)
    }

    fn turn(&mut self) -> &mut AssistantTurn {
        self.close_injected();
        self.assistant.get_or_insert_with(AssistantTurn::default)
    }

    /// Writes a wire message that is not part of the assistant's turn.
    fn push(&mut self, message: ChatMessage) {
        self.close_turn();
        self.close_injected();
        self.out.push(message);
    }

    fn tool_message(&mut self, result: &ToolResult) -> Result<ChatMessage, Error> {
        let content = match self.media.place(result, Some(&result.call_id))? {
            Placement::NoFiles => text_content(&result.content),
            Placement::Native => MessageContent::Parts(parts(&result.content, &result.metadata)?),
            Placement::Injected(text) => MessageContent::Text(text),
        };
        Ok(ChatMessage {
            tool_call_id: Some(result.call_id.clone()),
            ..wire_message(ChatRole::Tool, content, &result.metadata)
        })
    }

    fn close_turn(&mut self) {
        let Some(turn) = self.assistant.take() else {
            return;
        };
        let content = match turn.text {
            Some(text) => Some(text),
            None if turn.calls.is_empty() && turn.refusal.is_none() => Some(String::new()),
            None => None,
        };
        let mut message = ChatMessage {
            role: Some(ChatRole::Assistant),
            content: content.map(MessageContent::Text),
            refusal: turn.refusal,
            tool_calls: Some(turn.calls).filter(|calls| !calls.is_empty()),
            extra: turn.extra,
            ..ChatMessage::default()
        };
        if let Some((field, text)) = turn.reasoning {
            match field.as_str() {
                "reasoning_content" => message.reasoning_content = Some(text),
                "reasoning" => message.reasoning = Some(text),
                _ => {
                    message.extra.insert(field, text.into());
                }
            }
        }
        self.out.push(message);
    }

    fn close_injected(&mut self) {
        if let Some(parts) = self.media.take_waiting() {
            let content = MessageContent::Parts(parts);
            self.out
                .push(wire_message(ChatRole::User, content, &Metadata::new()));
        }
    }
}

impl<'a> LowerHistory for History<'a> {
    fn text(&mut self, message: &TextMessage) -> Result<(), Error> {
        match message.role {
            Role::Assistant => {
                let refusal = message
                    .metadata
                    .get(REFUSAL_KEY)
                    .is_some_and(|flag| flag == &Value::Bool(true));
                let turn = self.turn();
                turn.extra
                    .extend(wire_extra::kept(&message.metadata, EXTRA_KEY));
                let slot = if refusal {
                    &mut turn.refusal
                } else {
                    &mut turn.text
                };
                slot.get_or_insert_default().push_str(&message.text);
            }
            Role::System | Role::User => {
                let role = if message.role == Role::System {
                    system_role(&message.metadata)
                } else {
                    ChatRole::User
                };
                self.push(wire_message(
                    role,
                    MessageContent::Text(message.text.clone()),
                    &message.metadata,
                ));
            }
            Role::Tool => return Err(history::tool_role(PROVIDER, "text")),
        }
        Ok(())
    }

    fn multimodal(&mut self, message: &MultimodalMessage) -> Result<(), Error> {
        match message.role {
            Role::User => {
                let parts = parts(&message.content, &message.metadata)?;
                let content = MessageContent::Parts(parts);
                self.push(wire_message(ChatRole::User, content, &message.metadata));
            }
            Role::System | Role::Assistant => {
                let what = "Chat Completions takes images, documents and audio";
                let text = history::text_only(PROVIDER, what, message)?;
                if message.role == Role::Assistant {
                    let turn = self.turn();
                    turn.extra
                        .extend(wire_extra::kept(&message.metadata, EXTRA_KEY));
                    turn.text.get_or_insert_default().push_str(&text);
                } else {
                    let role = system_role(&message.metadata);
                    let content = MessageContent::Text(text);
                    self.push(wire_message(role, content, &message.metadata));
                }
            }
            Role::Tool => return Err(history::tool_role(PROVIDER, "multimodal")),
        }
        Ok(())
    }

    fn reasoning(&mut self, message: &ReasoningMessage) {
        let field = match &self.options.reasoning_echo {
            ReasoningEcho::Never => return,
            ReasoningEcho::Field(field) => field.clone(),
            ReasoningEcho::Auto => match message.metadata.get(REASONING_FIELD_KEY) {
                Some(Value::String(field)) => field.clone(),
                _ => return,
            },
        };
        if message.redacted {
            return;
        }
        let turn = self.turn();
        turn.extra
            .extend(wire_extra::kept(&message.metadata, EXTRA_KEY));
        match &mut turn.reasoning {
            Some((_, text)) => text.push_str(&message.text),
            None => turn.reasoning = Some((field, message.text.clone())),
        }
    }

    fn calls(&mut self, calls: &[ToolCall]) {
        let lowered: Vec<WireToolCall> = calls
            .iter()
            // The server ran these itself; it expects no tool message for them.
            .filter(|call| !call.provider_executed)
            .map(lower_call)
            .collect();
        if !lowered.is_empty() {
            let turn = self.turn();
            for call in calls {
                turn.extra
                    .extend(wire_extra::kept(&call.metadata, MESSAGE_KEY));
            }
            turn.calls.extend(lowered);
        }
    }

    fn results(&mut self, results: &[ToolResult]) -> Result<(), Error> {
        self.close_turn();
        for result in results {
            let message = self.tool_message(result)?;
            self.out.push(message);
        }
        Ok(())
    }
}

/// A canonical call as the wire writes it (no `index`: the caller sets it in a
/// stream), with the call's fields the decoder kept ([`EXTRA_KEY`]). Shared by
/// the lowering and the reply encoder.
pub(super) fn lower_call(call: &ToolCall) -> WireToolCall {
    // A call that could not be read goes back as the model wrote it.
    let arguments = match (&call.invalid, &call.arguments) {
        (Some(invalid), _) if invalid.raw.is_some() => invalid.raw.clone().unwrap_or_default(),
        (_, Value::String(text)) => text.clone(),
        (_, arguments) => arguments.to_string(),
    };
    WireToolCall {
        index: None,
        id: Some(call.id.clone()),
        kind: Some("function".into()),
        function: FunctionCall {
            name: Some(call.name.clone()),
            arguments: Some(arguments),
        },
        extra: wire_extra::kept(&call.metadata, EXTRA_KEY),
    }
}

/// Text-only content: a string for one block, text parts for several.
fn text_content(content: &[ContentBlock]) -> MessageContent {
    match content {
        [] => MessageContent::Text(String::new()),
        [ContentBlock::Text { text, .. }] => MessageContent::Text(text.clone()),
        blocks => MessageContent::Parts(
            blocks
                .iter()
                .filter_map(ContentBlock::as_text)
                .map(ContentPart::text)
                .collect(),
        ),
    }
}

impl MediaPart for ContentPart {
    fn text(text: String) -> Self {
        ContentPart::text(text)
    }

    fn file(block: &ContentBlock) -> Result<Self, Error> {
        content_part(block)
    }
}

/// Content blocks as parts, each with the fields the decoder kept for it in
/// `metadata` ([`PARTS_KEY`]).
fn parts(blocks: &[ContentBlock], metadata: &Metadata) -> Result<Vec<ContentPart>, Error> {
    blocks
        .iter()
        .enumerate()
        .map(|(index, block)| {
            let mut part = content_part(block)?;
            let mut kept = wire_extra::kept_block(metadata, PARTS_KEY, index);
            if let (ContentPart::ImageUrl { image_url, .. }, Some(fields)) =
                (&mut part, kept.remove("image_url"))
            {
                image_url.detail = fields["detail"].as_str().map(str::to_owned);
            }
            *part.extra_mut() = kept;
            Ok(part)
        })
        .collect()
}

fn content_part(block: &ContentBlock) -> Result<ContentPart, Error> {
    Ok(match block {
        ContentBlock::Text { text, .. } => ContentPart::text(text.clone()),
        ContentBlock::Image(media) => ContentPart::ImageUrl {
            image_url: ImageUrl {
                url: media_url(media)?,
                detail: None,
            },
            extra: Map::new(),
        },
        ContentBlock::Audio(media) => input_audio(media)?,
        ContentBlock::Document(media) => match &media.source {
            MediaSource::Base64 { .. } => ContentPart::File {
                file: FileData {
                    file_data: Some(media_url(media)?),
                    file_id: None,
                    filename: media.name.clone(),
                },
                extra: Map::new(),
            },
            MediaSource::Url { url, .. } => {
                return Err(Error::InvalidRequest(format!(
                    "openai: Chat Completions takes documents inline only, not by URL ({})",
                    redact_url(url)
                )));
            }
            MediaSource::Ref { reference, .. } => {
                return Err(media::unresolved(PROVIDER, reference));
            }
        },
    })
}

/// An `input_audio` part: inline WAV or MP3 only, the two formats Chat
/// Completions takes.
fn input_audio(media: &Media) -> Result<ContentPart, Error> {
    match &media.source {
        MediaSource::Base64 { media_type, data } => {
            let format = audio_format(media_type).ok_or_else(|| {
                Error::InvalidRequest(format!(
                    "openai: Chat Completions takes audio as WAV or MP3 only, not {media_type}"
                ))
            })?;
            Ok(ContentPart::InputAudio {
                input_audio: InputAudio {
                    data: data.to_string(),
                    format: format.into(),
                },
                extra: Map::new(),
            })
        }
        MediaSource::Url { url, .. } => Err(Error::InvalidRequest(format!(
            "openai: Chat Completions takes audio inline only, not by URL ({})",
            redact_url(url)
        ))),
        MediaSource::Ref { reference, .. } => Err(media::unresolved(PROVIDER, reference)),
    }
}

/// The `input_audio.format` of a MIME type (parameters and case ignored).
fn audio_format(media_type: &str) -> Option<&'static str> {
    match crate::message::mime_essence(media_type).as_str() {
        "audio/wav" | "audio/x-wav" | "audio/wave" | "audio/vnd.wave" => Some("wav"),
        "audio/mpeg" | "audio/mp3" | "audio/x-mp3" | "audio/mpeg3" => Some("mp3"),
        _ => None,
    }
}

fn media_url(media: &Media) -> Result<String, Error> {
    match &media.source {
        MediaSource::Url { url, .. } => Ok(url.clone()),
        MediaSource::Base64 { .. } => Ok(media.data_uri().unwrap_or_default()),
        MediaSource::Ref { reference, .. } => Err(media::unresolved(PROVIDER, reference)),
    }
}

//! Lowering: a canonical [`ChatRequest`] → the Chat Completions request body.
//!
//! Pure: no IO. The history is walked once; the assistant's side of a turn
//! (reasoning, text, tool calls — of `tool_calls` or `tool_aggregate` messages)
//! becomes one `assistant` message, and every tool result a `role: "tool"`
//! message with its `tool_call_id`.

use serde_json::{Map, Value, json};

use crate::message::{MultimodalMessage, ReasoningMessage, TextMessage};
use crate::provider::history::{self, LowerHistory};
use crate::provider::media::{self, ToolResultMedia};
use crate::provider::redact::redact_url;
use crate::{
    ChatRequest, ContentBlock, Error, Media, MediaSource, Message, Role, ToolCall, ToolChoice,
    ToolResult, ToolSpec,
};

/// The name errors from this provider carry.
pub const PROVIDER: &str = "openai";

/// The metadata key that records which wire field a reasoning message came in
/// (`reasoning_content` or `reasoning`), so that it is echoed back in the same one.
pub const REASONING_FIELD_KEY: &str = "reasoning_field";

/// The metadata key that marks assistant text as a refusal (the `refusal` field).
pub const REFUSAL_KEY: &str = "refusal";

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

impl MaxTokensField {
    fn name(self) -> &'static str {
        match self {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        }
    }
}

/// Lowers a request to the Chat Completions body.
///
/// ```
/// use lmstack::provider::openai::{LowerOptions, lower};
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
    let mut body = Map::new();
    let chat = &request.options;
    if let Some(model) = &chat.model {
        body.insert("model".into(), model.clone().into());
    }
    body.insert(
        "messages".into(),
        History::new(options).lower(&request.messages)?.into(),
    );
    if !chat.tools.is_empty() {
        let tools = chat.tools.iter().map(|tool| lower_tool(tool, options));
        body.insert("tools".into(), tools.collect::<Vec<_>>().into());
    }
    if let Some(choice) = &chat.tool_choice {
        body.insert("tool_choice".into(), lower_tool_choice(choice));
    }
    if let Some(temperature) = chat.temperature {
        body.insert("temperature".into(), temperature.into());
    }
    if let Some(max_tokens) = chat.max_tokens {
        body.insert(options.max_tokens_field.name().into(), max_tokens.into());
    }
    if chat.stream {
        body.insert("stream".into(), true.into());
        if options.include_usage {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
    }
    for (key, value) in &chat.extra {
        body.insert(key.clone(), value.clone());
    }
    if let Some(n) = body.get("n")
        && n.as_u64() != Some(1)
    {
        return Err(Error::InvalidRequest(format!(
            "openai: `n` = {n} asks for several choices; lmstack lifts one choice per reply"
        )));
    }
    Ok(Value::Object(body))
}

fn lower_tool(tool: &ToolSpec, options: &LowerOptions) -> Value {
    let mut function = Map::new();
    function.insert("name".into(), tool.name.clone().into());
    if !tool.description.is_empty() {
        function.insert("description".into(), tool.description.clone().into());
    }
    function.insert("parameters".into(), tool.parameters.clone());
    if let Some(strict) = options.strict_tools {
        function.insert("strict".into(), strict.into());
    }
    json!({"type": "function", "function": function})
}

fn lower_tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => "auto".into(),
        ToolChoice::None => "none".into(),
        ToolChoice::Required => "required".into(),
        ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
    }
}

/// The walk over the history: wire messages out, the assistant turn being built,
/// and the files waiting for their synthetic user message.
struct History<'a> {
    options: &'a LowerOptions,
    out: Vec<Value>,
    assistant: Option<AssistantTurn>,
    /// Parts of the synthetic user message that follows the current run of tool
    /// messages (policy `Inject`).
    injected: Vec<Value>,
}

#[derive(Default)]
struct AssistantTurn {
    text: Option<String>,
    refusal: Option<String>,
    reasoning: Option<(String, String)>,
    calls: Vec<Value>,
}

impl<'a> History<'a> {
    fn new(options: &'a LowerOptions) -> Self {
        History {
            options,
            out: Vec::new(),
            assistant: None,
            injected: Vec::new(),
        }
    }

    fn lower(mut self, messages: &[Message]) -> Result<Vec<Value>, Error> {
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
    fn push(&mut self, message: Value) {
        self.close_turn();
        self.close_injected();
        self.out.push(message);
    }

    fn tool_message(&mut self, result: &ToolResult) -> Result<Value, Error> {
        let media = result
            .content
            .iter()
            .filter(|block| block.as_media().is_some())
            .count();
        let content = if media == 0 {
            text_content(&result.content)
        } else {
            match self.options.tool_result_media {
                ToolResultMedia::Native => Value::Array(
                    result
                        .content
                        .iter()
                        .map(content_part)
                        .collect::<Result<_, _>>()?,
                ),
                ToolResultMedia::Reject => return Err(media::rejected(PROVIDER, result)),
                ToolResultMedia::Inject => {
                    self.injected.push(json!({
                        "type": "text",
                        "text": media::attachments_heading(Some(&result.call_id), &result.name),
                    }));
                    for block in result.content.iter().filter(|b| b.as_media().is_some()) {
                        self.injected.push(content_part(block)?);
                    }
                    Value::String(media::text_with_note(result))
                }
            }
        };
        Ok(json!({"role": "tool", "tool_call_id": result.call_id, "content": content}))
    }

    fn close_turn(&mut self) {
        let Some(turn) = self.assistant.take() else {
            return;
        };
        let mut message = Map::new();
        message.insert("role".into(), "assistant".into());
        match turn.text {
            Some(text) => {
                message.insert("content".into(), text.into());
            }
            None if turn.calls.is_empty() && turn.refusal.is_none() => {
                message.insert("content".into(), "".into());
            }
            None => {}
        }
        if let Some(refusal) = turn.refusal {
            message.insert("refusal".into(), refusal.into());
        }
        if let Some((field, text)) = turn.reasoning {
            message.insert(field, text.into());
        }
        if !turn.calls.is_empty() {
            message.insert("tool_calls".into(), turn.calls.into());
        }
        self.out.push(Value::Object(message));
    }

    fn close_injected(&mut self) {
        if !self.injected.is_empty() {
            let parts = std::mem::take(&mut self.injected);
            self.out.push(json!({"role": "user", "content": parts}));
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
                let slot = if refusal {
                    &mut turn.refusal
                } else {
                    &mut turn.text
                };
                slot.get_or_insert_default().push_str(&message.text);
            }
            Role::System | Role::User => {
                let role = role_name(message.role);
                self.push(json!({"role": role, "content": message.text}));
            }
            Role::Tool => return Err(history::tool_role(PROVIDER, "text")),
        }
        Ok(())
    }

    fn multimodal(&mut self, message: &MultimodalMessage) -> Result<(), Error> {
        match message.role {
            Role::User => {
                let parts = message
                    .content
                    .iter()
                    .map(content_part)
                    .collect::<Result<Vec<_>, _>>()?;
                self.push(json!({"role": "user", "content": parts}));
            }
            Role::System | Role::Assistant => {
                let mut text = String::new();
                for block in &message.content {
                    match block.as_text() {
                        Some(piece) => text.push_str(piece),
                        None => {
                            return Err(Error::InvalidRequest(format!(
                                "openai: Chat Completions takes images, documents and audio only from the user, not the {}",
                                role_name(message.role)
                            )));
                        }
                    }
                }
                if message.role == Role::Assistant {
                    self.turn().text.get_or_insert_default().push_str(&text);
                } else {
                    self.push(json!({"role": "system", "content": text}));
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
        match &mut turn.reasoning {
            Some((_, text)) => text.push_str(&message.text),
            None => turn.reasoning = Some((field, message.text.clone())),
        }
    }

    fn calls(&mut self, calls: &[ToolCall]) {
        let lowered: Vec<Value> = calls
            .iter()
            // The server ran these itself; it expects no tool message for them.
            .filter(|call| !call.provider_executed)
            .map(lower_call)
            .collect();
        if !lowered.is_empty() {
            self.turn().calls.extend(lowered);
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

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

fn lower_call(call: &ToolCall) -> Value {
    // A call that could not be read goes back as the model wrote it.
    let arguments = match (&call.invalid, &call.arguments) {
        (Some(invalid), _) if invalid.raw.is_some() => invalid.raw.clone().unwrap_or_default(),
        (_, Value::String(text)) => text.clone(),
        (_, arguments) => arguments.to_string(),
    };
    json!({
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    })
}

/// Text-only content: a string for one block, text parts for several.
fn text_content(content: &[ContentBlock]) -> Value {
    match content {
        [] => Value::String(String::new()),
        [ContentBlock::Text { text }] => Value::String(text.clone()),
        blocks => Value::Array(
            blocks
                .iter()
                .filter_map(ContentBlock::as_text)
                .map(|text| json!({"type": "text", "text": text}))
                .collect(),
        ),
    }
}

fn content_part(block: &ContentBlock) -> Result<Value, Error> {
    Ok(match block {
        ContentBlock::Text { text } => json!({"type": "text", "text": text}),
        ContentBlock::Image(media) => {
            json!({"type": "image_url", "image_url": {"url": media_url(media)?}})
        }
        ContentBlock::Audio(media) => input_audio(media)?,
        ContentBlock::Document(media) => match &media.source {
            MediaSource::Base64 { .. } => {
                let mut file = Map::new();
                file.insert("file_data".into(), media_url(media)?.into());
                if let Some(name) = &media.name {
                    file.insert("filename".into(), name.clone().into());
                }
                json!({"type": "file", "file": file})
            }
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
fn input_audio(media: &Media) -> Result<Value, Error> {
    match &media.source {
        MediaSource::Base64 { media_type, data } => {
            let format = audio_format(media_type).ok_or_else(|| {
                Error::InvalidRequest(format!(
                    "openai: Chat Completions takes audio as WAV or MP3 only, not {media_type}"
                ))
            })?;
            Ok(json!({"type": "input_audio", "input_audio": {"data": &**data, "format": format}}))
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
    let essence = media_type.split(';').next().unwrap_or_default().trim();
    match essence.to_ascii_lowercase().as_str() {
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

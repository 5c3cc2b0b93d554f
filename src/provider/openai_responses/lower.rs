//! Lowering: a canonical [`ChatRequest`] → the Responses request body.
//!
//! Pure: no IO. The history becomes `input` items, in order, one walk:
//!
//! - system text → a `system` message item (`developer` when marked
//!   [`DEVELOPER_KEY`]), wherever it stands; system text marked
//!   [`INSTRUCTIONS_KEY`] goes to `instructions` instead;
//! - user text → a `user` message (its text as a string); user files → parts:
//!   `input_text`, `input_image` (a URL or `data:` URI), `input_file` (inline
//!   as `file_data`, or by `file_url`);
//! - assistant text → an `assistant` message with one `output_text` part
//!   (its web-page citations as `url_citation` annotations), or a `refusal`
//!   part when marked [`REFUSAL_KEY`];
//! - a tool call → a `function_call` item whose `call_id` is the call's id;
//!   calls the server ran (`provider_executed`) are left out;
//! - a tool result → a `function_call_output` item: its text as a string, or,
//!   when it holds files, parts (`input_text`, `input_image`, `input_file`) —
//!   natively by default ([`LowerOptions::tool_result_media`]);
//! - reasoning that came from this wire (its metadata holds [`EXTRA_KEY`]) →
//!   a `reasoning` item: its text as one `summary_text`, its signature as
//!   `encrypted_content`; reasoning from other wires is left out;
//! - an item the lifter kept whole ([`ITEM_KEY`]: a built-in tool's call, a
//!   custom tool call) → that item, as it came.
//!
//! The fields an item came with and the canonical model has no place for
//! ([`EXTRA_KEY`]: its `id`, an assistant message's `phase`…) go back on it.
//! With `store: false` (in `options.extra`) the server keeps nothing, so no
//! item `id` a response gave is sent (it would be refused as unknown) — those a
//! client sent go back, but for reasoning's —, and reasoning goes back only
//! with its encrypted content. Custom tools,
//! namespaces and custom tool calls a client of this wire sent go back as
//! they came.

use serde_json::{Map, Value};

use super::keys::{
    ARGUMENTS, CLIENT_ID, EXTRA_KEY, INSTRUCTIONS_KEY, ITEM_KEY, PARTS_KEY, PROVIDER,
};
use super::server_tool;
use super::tools::{self, CUSTOM_CALL, CUSTOM_CALL_OUTPUT, custom_input, is_custom};
use super::types::{
    ContentPart, FunctionCallItem, FunctionCallOutputItem, Input, InputFile, InputImage, Item,
    MessageContent, MessageItem, MessageRole, OutputText, ReasoningItem, Refusal, ResponseRequest,
    SummaryPart, TextConfig, TextPart, Tool, ToolChoice as WireToolChoice,
};
use crate::message::{Metadata, MultimodalMessage, ReasoningMessage, TextMessage};
use crate::provider::history::{self, LowerHistory};
use crate::provider::media::{self, MediaPart, MediaPlan, Placement, ToolResultMedia};
use crate::provider::openai_shared::{
    DEVELOPER_KEY, REFUSAL_KEY, json_schema_fields, lower_url_citation,
};
use crate::provider::server_tool::function_choice;
use crate::provider::wire_extra;
use crate::{
    ChatRequest, ContentBlock, Error, Media, MediaSource, ResponseFormat, Role, ToolCall,
    ToolChoice, ToolResult,
};

/// What `include` asks for to carry reasoning between turns without a store.
const ENCRYPTED_REASONING: &str = "reasoning.encrypted_content";

/// How the lowering writes what the canonical model holds and the Responses
/// API takes in more than one way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LowerOptions {
    /// What to do with images and documents in tool results: native by
    /// default (`function_call_output` takes them).
    pub tool_result_media: ToolResultMedia,
    /// With `store: false` and `reasoning` set (both in `options.extra`), ask
    /// for `reasoning.encrypted_content` in `include`, so that the reasoning
    /// can be sent back on the next turn (`true` by default).
    pub encrypted_reasoning: bool,
}

impl Default for LowerOptions {
    fn default() -> Self {
        LowerOptions {
            tool_result_media: ToolResultMedia::Native,
            encrypted_reasoning: true,
        }
    }
}

/// Lowers a request to the Responses body.
///
/// ```
/// use lmstack::provider::openai_responses::{LowerOptions, lower};
/// use lmstack::{ChatRequest, Message};
/// use serde_json::json;
///
/// let request = ChatRequest::new(vec![Message::system("Be brief."), Message::user("Hi")]).model("gpt-5");
/// let body = lower(&request, &LowerOptions::default()).unwrap();
/// assert_eq!(body, json!({
///     "model": "gpt-5",
///     "input": [{"type": "message", "role": "system", "content": "Be brief."},
///               {"type": "message", "role": "user", "content": "Hi"}],
/// }));
/// ```
pub fn lower(request: &ChatRequest, options: &LowerOptions) -> Result<Value, Error> {
    let body = lower_request(request, options)?;
    serde_json::to_value(&body).map_err(|source| Error::Json {
        context: format!("{PROVIDER}: writing the request body"),
        source,
    })
}

/// Lowers a request to the typed Responses body (what [`lower`] writes as
/// JSON). `options.extra` goes in [`ResponseRequest::extra`] as it is, but for
/// three keys it is merged with: `tools` (built-in and custom tools, after the
/// functions), `include` (with what the lowering asks for) and `text` (the
/// structured output's `format` goes in it unless it has one).
///
/// ```
/// use lmstack::provider::openai_responses::{LowerOptions, lower_request};
/// use lmstack::{ChatRequest, Message};
/// use serde_json::json;
///
/// let mut request = ChatRequest::new(vec![Message::user("Hi")]).streaming(true);
/// request.options.extra.insert("store".into(), json!(false));
/// request.options.extra.insert("reasoning".into(), json!({"effort": "low"}));
/// let body = lower_request(&request, &LowerOptions::default()).unwrap();
/// assert_eq!(body.stream, Some(true));
/// assert_eq!(body.include, Some(vec!["reasoning.encrypted_content".to_owned()]));
/// ```
pub fn lower_request(
    request: &ChatRequest,
    options: &LowerOptions,
) -> Result<ResponseRequest, Error> {
    let chat = &request.options;
    let mut extra = chat.extra.clone();
    let store_false = extra.get("store") == Some(&Value::Bool(false));
    let mut history = History::new(options, store_false);
    history.walk(&request.messages)?;
    history.close_injected();

    let mut tools: Vec<Tool> = tools::lower(&chat.tools);
    for tool in &chat.server_tools {
        tools.push(server_tool::lower(tool)?);
    }
    if let Some(Value::Array(more)) = extra.remove("tools") {
        for tool in more {
            tools.push(read_extra(tool, "tools")?);
        }
    }
    let mut include: Vec<String> = match extra.remove("include") {
        Some(include) => read_extra(include, "include")?,
        None => Vec::new(),
    };
    let wants_reasoning = extra.get("reasoning").is_some_and(|r| !r.is_null());
    if options.encrypted_reasoning
        && store_false
        && wants_reasoning
        && !include.iter().any(|item| item == ENCRYPTED_REASONING)
    {
        include.push(ENCRYPTED_REASONING.into());
    }
    let mut text: Option<TextConfig> = match extra.remove("text") {
        Some(text) => Some(read_extra(text, "text")?),
        None => None,
    };
    if let Some(format) = &chat.response_format {
        let text = text.get_or_insert_with(TextConfig::default);
        if text.format.is_none() {
            text.format = Some(lower_format(format));
        }
    }
    Ok(ResponseRequest {
        model: chat.model.clone(),
        instructions: history.instructions,
        input: Input::Items(history.items),
        tools: Some(tools).filter(|tools| !tools.is_empty()),
        tool_choice: function_choice(chat).map(lower_tool_choice),
        temperature: chat.temperature,
        max_output_tokens: chat.max_tokens,
        stream: chat.stream.then_some(true),
        include: Some(include).filter(|include| !include.is_empty()),
        text,
        extra,
        ..ResponseRequest::default()
    })
}

/// A value of `options.extra` read as the wire's type, or an error naming
/// the key.
fn read_extra<T: serde::de::DeserializeOwned>(value: Value, key: &str) -> Result<T, Error> {
    serde_json::from_value(value).map_err(|error| {
        Error::InvalidRequest(format!("{PROVIDER}: `{key}` in the options: {error}"))
    })
}

/// `text.format` for a structured output.
fn lower_format(format: &ResponseFormat) -> Value {
    match format {
        ResponseFormat::JsonObject => serde_json::json!({"type": "json_object"}),
        ResponseFormat::JsonSchema {
            name,
            schema,
            strict,
        } => {
            let mut fields = Map::new();
            fields.insert("type".into(), "json_schema".into());
            fields.extend(json_schema_fields(name.as_deref(), schema, *strict));
            Value::Object(fields)
        }
    }
}

fn lower_tool_choice(choice: &ToolChoice) -> WireToolChoice {
    let mode = |mode: &str| WireToolChoice::Mode(mode.into());
    match choice {
        ToolChoice::Auto => mode("auto"),
        ToolChoice::None => mode("none"),
        ToolChoice::Required => mode("required"),
        ToolChoice::Tool(name) => WireToolChoice::Named {
            kind: "function".into(),
            name: name.clone(),
        },
    }
}

/// The walk over the history: the items out, the instructions, and the files
/// of tool results waiting for the user message that follows them.
struct History {
    store_false: bool,
    items: Vec<Item>,
    instructions: Option<String>,
    media: MediaPlan<ContentPart>,
}

impl History {
    fn new(options: &LowerOptions, store_false: bool) -> Self {
        History {
            store_false,
            items: Vec::new(),
            instructions: None,
            media: MediaPlan::new(PROVIDER, options.tool_result_media),
        }
    }

    /// Writes an item that is not a function call's output.
    fn push(&mut self, item: Item) {
        self.close_injected();
        self.items.push(item);
    }

    /// The item's id and other fields kept in `metadata` ([`EXTRA_KEY`]):
    /// the id a client sent, or, unless nothing is stored, a response's.
    fn kept(&self, metadata: &Metadata) -> (Option<String>, Map<String, Value>) {
        let mut fields = wire_extra::kept(metadata, EXTRA_KEY);
        let lifted = fields.remove("id").filter(|_| !self.store_false);
        let id = match fields.remove(CLIENT_ID).or(lifted) {
            Some(Value::String(id)) => Some(id),
            _ => None,
        };
        (id, fields)
    }

    fn message(&mut self, role: MessageRole, content: MessageContent, metadata: &Metadata) {
        let (id, extra) = self.kept(metadata);
        let item = MessageItem {
            id,
            extra,
            ..MessageItem::new(role, content)
        };
        self.push(Item::Message(item));
    }

    fn assistant(&mut self, text: &str, metadata: &Metadata) {
        let refusal = metadata.get(REFUSAL_KEY) == Some(&Value::Bool(true));
        let part = if refusal {
            ContentPart::Refusal(Refusal {
                refusal: text.to_owned(),
                extra: Map::new(),
            })
        } else {
            let annotations = metadata
                .citations()
                .iter()
                .filter_map(|citation| lower_url_citation(citation, 0))
                .map(|mut payload| {
                    let mut annotation = Map::new();
                    annotation.insert("type".into(), "url_citation".into());
                    annotation.append(&mut payload);
                    Value::Object(annotation)
                })
                .collect();
            ContentPart::OutputText(OutputText {
                text: text.to_owned(),
                annotations,
                extra: Map::new(),
            })
        };
        let content = MessageContent::Parts(vec![part]);
        self.message(MessageRole::Assistant, content, metadata);
    }

    fn close_injected(&mut self) {
        if let Some(parts) = self.media.take_waiting() {
            let content = MessageContent::Parts(parts);
            self.items
                .push(Item::Message(MessageItem::new(MessageRole::User, content)));
        }
    }
}

/// The role a system message goes back with: `developer` when it came so.
fn system_role(metadata: &Metadata) -> MessageRole {
    if metadata.get(DEVELOPER_KEY) == Some(&Value::Bool(true)) {
        MessageRole::Developer
    } else {
        MessageRole::System
    }
}

impl LowerHistory for History {
    fn text(&mut self, message: &TextMessage) -> Result<(), Error> {
        if let Some(Value::Object(item)) = message.metadata.get(ITEM_KEY) {
            self.push(Item::Other(item.clone()));
            return Ok(());
        }
        match message.role {
            Role::System if message.metadata.get(INSTRUCTIONS_KEY) == Some(&Value::Bool(true)) => {
                let instructions = self.instructions.get_or_insert_default();
                if !instructions.is_empty() {
                    instructions.push_str("\n\n");
                }
                instructions.push_str(&message.text);
            }
            Role::System => {
                let content = MessageContent::Text(message.text.clone());
                self.message(system_role(&message.metadata), content, &message.metadata);
            }
            Role::User => {
                let content = MessageContent::Text(message.text.clone());
                self.message(MessageRole::User, content, &message.metadata);
            }
            Role::Assistant => self.assistant(&message.text, &message.metadata),
            Role::Tool => return Err(history::tool_role(PROVIDER, "text")),
        }
        Ok(())
    }

    fn multimodal(&mut self, message: &MultimodalMessage) -> Result<(), Error> {
        match message.role {
            Role::User => {
                let content = MessageContent::Parts(parts(&message.content, &message.metadata)?);
                self.message(MessageRole::User, content, &message.metadata);
            }
            Role::System
                if message
                    .content
                    .iter()
                    .all(|block| block.as_text().is_some()) =>
            {
                let content = MessageContent::Parts(parts(&message.content, &message.metadata)?);
                let role = system_role(&message.metadata);
                self.message(role, content, &message.metadata);
            }
            Role::System | Role::Assistant => {
                let what = "the Responses API takes images and files";
                let text = history::text_only(PROVIDER, what, message)?;
                if message.role == Role::Assistant {
                    self.assistant(&text, &message.metadata);
                } else {
                    let role = system_role(&message.metadata);
                    self.message(role, MessageContent::Text(text), &message.metadata);
                }
            }
            Role::Tool => return Err(history::tool_role(PROVIDER, "multimodal")),
        }
        Ok(())
    }

    fn reasoning(&mut self, message: &ReasoningMessage) {
        // Only this wire's reasoning: another's signature is no encrypted content.
        if message.redacted || message.metadata.get(EXTRA_KEY).is_none() {
            return;
        }
        let (id, extra) = self.kept(&message.metadata);
        // Not kept, the server could not find it by its id.
        let id = id.filter(|_| !self.store_false);
        let encrypted_content = message.signature.clone();
        if id.is_none() && encrypted_content.is_none() {
            return; // nothing the server could read it by
        }
        let summary = (!message.text.is_empty()).then(|| SummaryPart {
            kind: "summary_text".into(),
            text: message.text.clone(),
        });
        self.push(Item::Reasoning(ReasoningItem {
            id,
            summary: summary.into_iter().collect(),
            encrypted_content,
            extra,
            ..ReasoningItem::default()
        }));
    }

    fn calls(&mut self, calls: &[ToolCall]) {
        // The server ran these itself; it expects no output for them.
        for call in calls.iter().filter(|call| !call.provider_executed) {
            let (id, mut extra) = self.kept(&call.metadata);
            if is_custom(&extra, CUSTOM_CALL) {
                if let Some(id) = id {
                    extra.insert("id".into(), id.into());
                }
                extra.insert("call_id".into(), call.id.clone().into());
                extra.insert("name".into(), call.name.clone().into());
                extra.insert("input".into(), custom_input(&call.arguments).into());
                self.push(Item::Other(extra));
                continue;
            }
            // The arguments' text as it came, unless a stage changed them.
            let written = match extra.remove(ARGUMENTS) {
                Some(Value::String(text)) => Some(text),
                _ => None,
            };
            let written = written.filter(|text| {
                serde_json::from_str::<Value>(text).is_ok_and(|read| read == call.arguments)
            });
            // A call that could not be read goes back as the model wrote it.
            let arguments = match (&call.invalid, &call.arguments) {
                _ if written.is_some() => written.unwrap_or_default(),
                (Some(invalid), _) if invalid.raw.is_some() => {
                    invalid.raw.clone().unwrap_or_default()
                }
                (_, Value::String(text)) => text.clone(),
                (_, arguments) => arguments.to_string(),
            };
            self.push(Item::FunctionCall(FunctionCallItem {
                id,
                call_id: call.id.clone(),
                name: call.name.clone(),
                arguments,
                status: None,
                extra,
            }));
        }
    }

    fn results(&mut self, results: &[ToolResult]) -> Result<(), Error> {
        for result in results {
            let output = match self.media.place(result, Some(&result.call_id))? {
                Placement::NoFiles => match result.content.as_slice() {
                    [] => MessageContent::Text(String::new()),
                    [ContentBlock::Text { text, .. }] => MessageContent::Text(text.clone()),
                    blocks => MessageContent::Parts(parts(blocks, &result.metadata)?),
                },
                Placement::Native => {
                    MessageContent::Parts(parts(&result.content, &result.metadata)?)
                }
                Placement::Injected(text) => MessageContent::Text(text),
            };
            let (id, mut extra) = self.kept(&result.metadata);
            if is_custom(&extra, CUSTOM_CALL_OUTPUT) {
                if let Some(id) = id {
                    extra.insert("id".into(), id.into());
                }
                extra.insert("call_id".into(), result.call_id.clone().into());
                let output = serde_json::to_value(&output).unwrap_or_default();
                extra.insert("output".into(), output);
                self.items.push(Item::Other(extra));
                continue;
            }
            self.items
                .push(Item::FunctionCallOutput(FunctionCallOutputItem {
                    id,
                    call_id: result.call_id.clone(),
                    output,
                    status: None,
                    extra,
                }));
        }
        Ok(())
    }
}

impl MediaPart for ContentPart {
    fn text(text: String) -> Self {
        ContentPart::InputText(TextPart {
            text,
            extra: Map::new(),
        })
    }

    fn file(block: &ContentBlock) -> Result<Self, Error> {
        content_part(block)
    }
}

/// Content blocks as parts, each with the fields this wire kept for it in
/// `metadata` ([`PARTS_KEY`]).
fn parts(blocks: &[ContentBlock], metadata: &Metadata) -> Result<Vec<ContentPart>, Error> {
    blocks
        .iter()
        .enumerate()
        .map(|(index, block)| {
            let mut part = content_part(block)?;
            let kept = wire_extra::kept_block(metadata, PARTS_KEY, index);
            match &mut part {
                ContentPart::InputText(part) => part.extra = kept,
                ContentPart::InputImage(image) => {
                    let mut kept = kept;
                    if let Some(Value::String(detail)) = kept.remove("detail") {
                        image.detail = Some(detail);
                    }
                    image.extra = kept;
                }
                ContentPart::InputFile(file) => file.extra = kept,
                _ => {}
            }
            Ok(part)
        })
        .collect()
}

fn content_part(block: &ContentBlock) -> Result<ContentPart, Error> {
    Ok(match block {
        ContentBlock::Text { text, .. } => <ContentPart as MediaPart>::text(text.clone()),
        ContentBlock::Image(media) => ContentPart::InputImage(InputImage {
            image_url: Some(media_url(media)?),
            ..InputImage::default()
        }),
        ContentBlock::Document(media) => ContentPart::InputFile(match &media.source {
            MediaSource::Url { url, .. } => InputFile {
                file_url: Some(url.clone()),
                filename: media.name.clone(),
                ..InputFile::default()
            },
            _ => InputFile {
                file_data: Some(media_url(media)?),
                // OpenAI asks a name of an inline file.
                filename: Some(media.name.clone().unwrap_or_else(|| "document".into())),
                ..InputFile::default()
            },
        }),
        ContentBlock::Audio(_) => {
            return Err(Error::InvalidRequest(format!(
                "{PROVIDER}: the Responses API takes no audio in its input"
            )));
        }
    })
}

fn media_url(media: &Media) -> Result<String, Error> {
    match &media.source {
        MediaSource::Url { url, .. } => Ok(url.clone()),
        MediaSource::Base64 { .. } => Ok(media.data_uri().unwrap_or_default()),
        MediaSource::Ref { reference, .. } => Err(media::unresolved(PROVIDER, reference)),
    }
}

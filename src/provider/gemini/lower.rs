//! Lowering: a canonical [`ChatRequest`] → the `generateContent` request body.
//!
//! Pure: no IO. The history is walked once into `contents` of roles `user` and
//! `model` (consecutive parts of one role share one content); the system
//! messages before the first other message become `systemInstruction`, and a
//! later one (which the API has no place for) a `user` part in its place, its
//! text wrapped in `<system>` … `</system>` so the model reads it as an
//! instruction; the instruction stays the same turn after turn, which keeps
//! the prompt's prefix cacheable. Cache breakpoints are left out (Gemini has
//! none in the request).

use std::borrow::Cow;
use std::collections::HashSet;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::server_tool;
use super::types::{
    Blob, Content, FileData, FunctionCall, FunctionCallingConfig, FunctionDeclaration,
    FunctionResponse, GenerateContentRequest, GenerationConfig, Part, Tool, ToolConfig,
};

use crate::message::{Metadata, MultimodalMessage, ReasoningMessage, TextMessage};
use crate::provider::Kind;
use crate::provider::history::{self, LowerHistory};
use crate::provider::media::{self, MediaPart, MediaPlan, Placement, ToolResultMedia};
use crate::provider::redact::redact_url;
use crate::provider::server_tool::function_choice;
use crate::provider::wire_extra;
use crate::{
    ChatRequest, ContentBlock, Error, Media, MediaSource, Message, ResponseFormat, Role, ToolCall,
    ToolChoice, ToolResult, ToolSpec,
};

/// What a system message after the conversation's start is wrapped in, as
/// the `user` part that stands for it (`<system>\n` … `\n</system>`).
pub const SYSTEM_NOTE_START: &str = "<system>\n";
/// The end of a system note (see [`SYSTEM_NOTE_START`]).
pub const SYSTEM_NOTE_END: &str = "\n</system>";

/// The name errors from this provider carry.
pub(crate) const PROVIDER: &str = Kind::Gemini.name();

/// The metadata key of a part's `thoughtSignature`, on the tool call or text
/// message lifted from that part; lowering puts it back on the same part.
pub const THOUGHT_SIGNATURE_KEY: &str = "thought_signature";

/// The metadata key that marks a tool call whose id the lifter made up (the
/// model gave none, as before Gemini 3): lowering sends no `id` for it or its
/// result, so Gemini pairs them by name.
pub const GENERATED_ID_KEY: &str = "generated_id";

/// The metadata key of a part's fields that its canonical item has no place
/// for (a text's `videoMetadata`, a function response's own `response` or
/// `id`…), as a partial part object, which lowering writes over the part it
/// makes: a field of `functionCall` or `functionResponse` replaces the one
/// there. Kept by [`decode_request`](super::decode_request) for this wire's
/// lowering alone; on a tool, its declaration's fields (`parameters`,
/// `behavior`) the same way.
pub const EXTRA_KEY: &str = "gemini_extra";

/// The key, in the first function tool's `extra`, of the fields of the tool
/// object its declarations came in (`"codeExecution": null` beside them).
pub const TOOL_KEY: &str = "gemini_tool";

/// The metadata key of a user message's parts' fields, one object per content
/// block in order (see [`EXTRA_KEY`]).
pub const BLOCKS_KEY: &str = "gemini_blocks";

/// The metadata key, on the first item decoded from a content, that has it
/// start a content of its own (two contents of one role are not joined), and
/// holds that content's fields other than `role` and `parts`.
pub const CONTENT_KEY: &str = "gemini_content";

/// The metadata key, on a tool result, of the files that came as parts of
/// their own right after its function response, in the same content (as
/// Gemini CLI sends a file its tool read), rather than in the response's
/// `parts`: they are the last blocks of the result's content, and this holds
/// one object per such block, in order, with its part's other fields (as
/// [`EXTRA_KEY`]). Lowering sends them back after the response as they came.
pub const FOLLOWING_KEY: &str = "gemini_following";

/// The metadata key of an empty text standing for a part with no canonical
/// form (`executableCode`, `codeExecutionResult`…): the part as it came,
/// which lowering sends in the text's place.
pub const PART_KEY: &str = "gemini_part";

/// How the lowering writes what Gemini models take differently.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LowerOptions {
    /// What to do with images, documents and audio in tool results; `None`
    /// (the default) chooses by model: [`ToolResultMedia::Native`]
    /// (`functionResponse.parts`) for Gemini 3 and later and for model names
    /// without a `gemini-N` version, [`ToolResultMedia::Inject`] for Gemini 1
    /// and 2, which refuse `functionResponse.parts`. Under `Native`, audio,
    /// which `functionResponse.parts` does not list, is injected after the
    /// responses as under `Inject`.
    pub tool_result_media: Option<ToolResultMedia>,
}

impl LowerOptions {
    /// The media policy for `model`: the configured one, else the model's.
    pub fn media_policy(&self, model: Option<&str>) -> ToolResultMedia {
        self.tool_result_media
            .unwrap_or_else(|| match model.and_then(gemini_version) {
                Some(version) if version < 3 => ToolResultMedia::Inject,
                _ => ToolResultMedia::Native,
            })
    }
}

/// The major version in a model name such as `gemini-2.5-flash` (2).
fn gemini_version(model: &str) -> Option<u32> {
    let (_, rest) = model.split_once("gemini-")?;
    let digits = rest.split(|c: char| !c.is_ascii_digit()).next()?;
    digits.parse().ok()
}

/// Lowers a request to the `generateContent` body.
///
/// Tools are declared with `parametersJsonSchema`, which takes the tool's JSON
/// Schema as it is (`$ref`, `$defs`, `additionalProperties`, `const`,
/// `type: [.., "null"]` …), rather than `parameters`, whose OpenAPI subset
/// Gemini enforces with a 400 for every keyword outside it.
///
/// ```
/// use lmstack::provider::gemini::{LowerOptions, lower};
/// use lmstack::{ChatRequest, Message};
/// use serde_json::json;
///
/// let request = ChatRequest::new(vec![Message::system("Be brief."), Message::user("Hi")])
///     .model("gemini-2.5-flash");
/// let body = lower(&request, &LowerOptions::default()).unwrap();
/// assert_eq!(body, json!({
///     "systemInstruction": {"parts": [{"text": "Be brief."}]},
///     "contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
/// }));
/// ```
pub fn lower(request: &ChatRequest, options: &LowerOptions) -> Result<Value, Error> {
    let body = lower_request(request, options)?;
    serde_json::to_value(body).map_err(|error| Error::json("gemini: the request body", error))
}

/// Lowers a request to the typed `generateContent` body.
///
/// A response format sets `generationConfig.responseMimeType` to
/// `application/json` and, with a schema, `responseJsonSchema`. Server tools
/// follow the function declarations in `tools`: web search as
/// `{"googleSearch": {}}`, code execution as `{"codeExecution": {}}`; with
/// server tools, a tool choice that names none of the functions (or with no
/// function to choose) is left out, so the model decides.
/// `options.extra` is merged into the body last: an object into the object of
/// the same name, key by key (so `generationConfig.thinkingConfig` joins
/// `maxOutputTokens`), anything else replacing what is there; keys the body
/// does not name (`safetySettings`, …) go to its `extra`.
///
/// ```
/// use lmstack::provider::gemini::{LowerOptions, lower_request};
/// use lmstack::{ChatRequest, Message};
/// use serde_json::json;
///
/// let mut request = ChatRequest::new(vec![Message::user("Hi")]);
/// request.options.max_tokens = Some(64);
/// request.options.extra.insert(
///     "generationConfig".into(),
///     json!({"thinkingConfig": {"thinkingBudget": 0}}),
/// );
/// let body = lower_request(&request, &LowerOptions::default()).unwrap();
/// assert_eq!(body.contents[0].role.as_deref(), Some("user"));
/// let generation = body.generation_config.unwrap();
/// assert_eq!(generation.max_output_tokens, Some(64));
/// assert_eq!(generation.extra["thinkingConfig"], json!({"thinkingBudget": 0}));
/// ```
pub fn lower_request(
    request: &ChatRequest,
    options: &LowerOptions,
) -> Result<GenerateContentRequest, Error> {
    let chat = &request.options;
    let policy = options.media_policy(chat.model.as_deref());
    let mut history = History::new(policy);
    history.lower(&request.messages)?;
    let mut tools = if chat.tools.is_empty() {
        Vec::new()
    } else {
        let extra = match chat.tools[0].extra.get(TOOL_KEY) {
            Some(Value::Object(fields)) => fields.clone(),
            _ => Map::new(),
        };
        vec![Tool {
            function_declarations: Some(chat.tools.iter().map(lower_tool).collect()),
            extra,
        }]
    };
    for tool in &chat.server_tools {
        tools.push(server_tool::lower(tool)?);
    }
    // A client's own `responseSchema` (the OpenAPI subset) goes in its place.
    let own_schema = chat
        .extra
        .get("generationConfig")
        .is_some_and(|config| config.get("responseSchema").is_some());
    let generation = GenerationConfig {
        temperature: chat.temperature,
        max_output_tokens: chat.max_tokens,
        extra: chat
            .response_format
            .as_ref()
            .map(|format| lower_response_format(format, own_schema))
            .unwrap_or_default(),
    };
    let mut body = GenerateContentRequest {
        system_instruction: (!history.system.is_empty()).then(|| Content {
            role: None,
            parts: Some(history.system),
            extra: Map::new(),
        }),
        contents: history.contents,
        tools,
        tool_config: function_choice(chat).map(|choice| ToolConfig {
            function_calling_config: Some(lower_tool_choice(choice)),
            extra: Map::new(),
        }),
        generation_config: Some(generation).filter(|config| *config != GenerationConfig::default()),
        extra: Map::new(),
    };
    for (key, value) in &chat.extra {
        let extra = &mut body.extra;
        match key.as_str() {
            "systemInstruction" => merge_field(&mut body.system_instruction, key, value, extra),
            "contents" => merge_list(&mut body.contents, key, value, extra),
            "tools" => merge_list(&mut body.tools, key, value, extra),
            "toolConfig" => merge_field(&mut body.tool_config, key, value, extra),
            "generationConfig" => merge_field(&mut body.generation_config, key, value, extra),
            _ => merge(extra, key, value),
        }
    }
    Ok(body)
}

/// Merges `value` into a typed field of the body as into its JSON: kept typed
/// where the merged JSON reads back as the same JSON, key order included (an
/// `extra` sub-key joins the field's own `extra`); else sent verbatim from the
/// body's `extra` in its place.
fn merge_field<T: Serialize + DeserializeOwned>(
    field: &mut Option<T>,
    key: &str,
    value: &Value,
    extra: &mut Map<String, Value>,
) {
    let mut merged = Map::new();
    if let Some(current) = field
        .take()
        .and_then(|typed| serde_json::to_value(typed).ok())
    {
        merged.insert(key.to_owned(), current);
    }
    merge(&mut merged, key, value);
    let Some(merged) = merged.remove(key) else {
        return;
    };
    let typed = serde_json::from_value::<T>(merged.clone()).ok();
    let same = |typed: &T| serde_json::to_string(typed).ok() == serde_json::to_string(&merged).ok();
    match typed {
        Some(typed) if same(&typed) => *field = Some(typed),
        _ => {
            extra.insert(key.to_owned(), merged);
        }
    }
}

/// [`merge_field`] for a list, not written when empty.
fn merge_list<T: Serialize + DeserializeOwned>(
    field: &mut Vec<T>,
    key: &str,
    value: &Value,
    extra: &mut Map<String, Value>,
) {
    let mut list = Some(std::mem::take(field)).filter(|list| !list.is_empty());
    merge_field(&mut list, key, value, extra);
    *field = list.unwrap_or_default();
}

/// Merges `value` into `body[key]`: an object into an object, key by key,
/// anything else replacing what is there.
fn merge(body: &mut Map<String, Value>, key: &str, value: &Value) {
    match (body.get_mut(key), value) {
        (Some(Value::Object(into)), Value::Object(from)) => {
            for (key, value) in from {
                merge(into, key, value);
            }
        }
        _ => {
            body.insert(key.to_owned(), value.clone());
        }
    }
}

/// A response format's fields of `generationConfig`: JSON
/// (`responseMimeType`), and the schema as JSON Schema (`responseJsonSchema`,
/// not the OpenAPI subset of `responseSchema`), unless the client gave its
/// own `responseSchema` (`own_schema`).
fn lower_response_format(format: &ResponseFormat, own_schema: bool) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("responseMimeType".into(), "application/json".into());
    if let Some(schema) = format.schema().filter(|_| !own_schema) {
        fields.insert("responseJsonSchema".into(), schema.clone());
    }
    fields
}

/// A function declaration, with the fields a Gemini client sent that the
/// tool has no place for (its [`EXTRA_KEY`]): a client's own `parameters`
/// (the OpenAPI subset) goes in place of `parametersJsonSchema`.
fn lower_tool(tool: &ToolSpec) -> FunctionDeclaration {
    let kept = match tool.extra.get(EXTRA_KEY) {
        Some(Value::Object(kept)) => kept.clone(),
        _ => Map::new(),
    };
    FunctionDeclaration {
        name: tool.name.clone(),
        description: Some(tool.description.clone()).filter(|text| !text.is_empty()),
        parameters_json_schema: (!kept.contains_key("parameters")).then(|| tool.parameters.clone()),
        extra: kept,
    }
}

fn lower_tool_choice(choice: &ToolChoice) -> FunctionCallingConfig {
    let (mode, allowed) = match choice {
        ToolChoice::Auto => ("AUTO", None),
        ToolChoice::None => ("NONE", None),
        ToolChoice::Required => ("ANY", None),
        ToolChoice::Tool(name) => ("ANY", Some(vec![name.clone()])),
    };
    FunctionCallingConfig {
        mode: Some(mode.into()),
        allowed_function_names: allowed,
        extra: Map::new(),
    }
}

/// The walk over the history.
struct History {
    system: Vec<Part>,
    contents: Vec<Content>,
    /// Ids the lifter made up: neither their calls nor their results send them.
    generated_ids: HashSet<String>,
    /// Where tool results' files go; those injected follow the current run
    /// of function responses.
    media: MediaPlan<Part>,
    /// The fields of a content the next part must start ([`CONTENT_KEY`]).
    fresh: Option<Map<String, Value>>,
}

impl History {
    fn new(policy: ToolResultMedia) -> Self {
        History {
            system: Vec::new(),
            contents: Vec::new(),
            generated_ids: HashSet::new(),
            media: MediaPlan::new(PROVIDER, policy),
            fresh: None,
        }
    }

    fn lower(&mut self, messages: &[Message]) -> Result<(), Error> {
        self.walk(messages)?;
        self.close_injected();
        Ok(())
    }

    /// Appends a part to the last content when it has `role`, else to a new one.
    fn push(&mut self, role: &str, part: Part) {
        if role != "user" || part.function_response.is_none() {
            self.close_injected();
        }
        self.push_part(role, part);
    }

    /// Has the next part start a content of its own, if `metadata` says so
    /// ([`CONTENT_KEY`]).
    fn open(&mut self, metadata: &Metadata) {
        if let Some(Value::Object(fields)) = metadata.get(CONTENT_KEY) {
            self.fresh = Some(fields.clone());
        }
    }

    /// System text: into `systemInstruction` before the conversation starts
    /// (with the part's kept fields), else a `user` part marked as a system
    /// note, in its place.
    fn system(&mut self, text: &str, kept: Map<String, Value>) {
        if self.contents.is_empty() {
            self.system.push(with_kept(Part::text(text), kept));
        } else {
            self.push(
                "user",
                Part::text(format!("{SYSTEM_NOTE_START}{text}{SYSTEM_NOTE_END}")),
            );
        }
    }

    fn push_part(&mut self, role: &str, part: Part) {
        let fresh = self.fresh.take();
        if let Some(last) = self.contents.last_mut()
            && fresh.is_none()
            && last.role.as_deref() == Some(role)
            && let Some(parts) = &mut last.parts
        {
            parts.push(part);
            return;
        }
        let mut content = Content::new(role, vec![part]);
        content.extra = fresh.unwrap_or_default();
        self.contents.push(content);
    }

    /// The call's id as the model saw it: a generated id never was (nor was
    /// one a client left out of its function response).
    fn shown_id<'a>(&self, result: &'a ToolResult) -> Option<&'a str> {
        let generated =
            is_generated(&result.metadata) || self.generated_ids.contains(&result.call_id);
        Some(result.call_id.as_str()).filter(|_| !generated)
    }

    fn close_injected(&mut self) {
        let fresh = self.fresh.take();
        for part in self.media.take_waiting().into_iter().flatten() {
            self.push_part("user", part);
        }
        self.fresh = fresh;
    }
}

impl LowerHistory for History {
    fn text(&mut self, message: &TextMessage) -> Result<(), Error> {
        let metadata = &message.metadata;
        let kept = wire_extra::kept(metadata, EXTRA_KEY);
        if let (Some(raw), Role::User | Role::Assistant) = (metadata.get(PART_KEY), message.role) {
            let part = Part::deserialize(raw).map_err(|error| {
                Error::InvalidRequest(format!("gemini: a kept part does not read back: {error}"))
            })?;
            self.open(metadata);
            self.push(
                if message.role == Role::User {
                    "user"
                } else {
                    "model"
                },
                part,
            );
            return Ok(());
        }
        let signed = metadata.get(THOUGHT_SIGNATURE_KEY).is_some();
        if message.role == Role::Assistant && message.text.is_empty() && kept.is_empty() && !signed
        {
            // Another wire's block or item kept raw on an empty text (an
            // Anthropic server tool's result, a Responses `web_search_call`):
            // nothing for Gemini, which refuses an empty text part.
            return Ok(());
        }
        let part = with_kept(
            with_signature(Part::text(&message.text), metadata),
            kept.clone(),
        );
        self.open(metadata);
        match message.role {
            Role::System => self.system(&message.text, kept),
            Role::User => self.push("user", part),
            Role::Assistant => self.push("model", part),
            Role::Tool => return Err(history::tool_role(PROVIDER, "text")),
        }
        Ok(())
    }

    fn multimodal(&mut self, message: &MultimodalMessage) -> Result<(), Error> {
        let parts = message
            .content
            .iter()
            .enumerate()
            .map(|(index, block)| {
                let kept = wire_extra::kept_block(&message.metadata, BLOCKS_KEY, index);
                content_part(block).map(|part| with_kept(part, kept))
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.open(&message.metadata);
        match message.role {
            Role::System => {
                if parts.iter().any(|part| part.text.is_none()) {
                    return Err(Error::InvalidRequest(
                        "gemini: a system instruction holds text only, not images, documents or audio"
                            .into(),
                    ));
                }
                for part in parts {
                    self.system(part.text.as_deref().unwrap_or_default(), Map::new());
                }
            }
            Role::User | Role::Assistant => {
                let role = if message.role == Role::User {
                    "user"
                } else {
                    "model"
                };
                for part in parts {
                    self.push(role, part);
                }
            }
            Role::Tool => return Err(history::tool_role(PROVIDER, "multimodal")),
        }
        Ok(())
    }

    /// A thought summary goes back as a `thought` part; a signature alone (it came
    /// on an empty text part) as that empty text part.
    fn reasoning(&mut self, message: &ReasoningMessage) {
        if message.redacted || (message.text.is_empty() && message.signature.is_none()) {
            return;
        }
        let part = Part {
            thought: (!message.text.is_empty()).then_some(true),
            thought_signature: message.signature.clone(),
            ..Part::text(&message.text)
        };
        self.open(&message.metadata);
        let part = with_kept(part, wire_extra::kept(&message.metadata, EXTRA_KEY));
        self.push("model", part);
    }

    fn calls(&mut self, calls: &[ToolCall]) {
        for call in calls.iter().filter(|call| !call.provider_executed) {
            let generated = is_generated(&call.metadata);
            let arguments = match &call.arguments {
                Value::Null => Value::Object(Map::new()),
                arguments => arguments.clone(),
            };
            let function = FunctionCall {
                name: Some(call.name.clone()),
                args: Some(arguments),
                id: (!generated).then(|| call.id.clone()),
                ..FunctionCall::default()
            };
            if generated {
                self.generated_ids.insert(call.id.clone());
            }
            let part = Part {
                function_call: Some(function),
                ..Part::default()
            };
            let part = with_signature(part, &call.metadata);
            self.open(&call.metadata);
            self.push(
                "model",
                with_kept(part, wire_extra::kept(&call.metadata, EXTRA_KEY)),
            );
        }
    }

    fn results(&mut self, results: &[ToolResult]) -> Result<(), Error> {
        for result in results {
            let (result, following) = following_parts(result)?;
            let result = result.as_ref();
            let shown_id = self.shown_id(result);
            let mut response = FunctionResponse {
                name: Some(result.name.clone()),
                id: shown_id.map(str::to_owned),
                ..FunctionResponse::default()
            };
            let text = match self.media.place(result, shown_id)? {
                Placement::NoFiles => result.text_content(),
                Placement::Injected(text) => text,
                Placement::Native => {
                    let (inside, after): (Vec<_>, Vec<_>) = result
                        .content
                        .iter()
                        .filter(|block| block.as_media().is_some())
                        .partition(|block| in_function_response(block));
                    if !inside.is_empty() {
                        let parts = inside.into_iter().map(content_part);
                        response.parts = Some(parts.collect::<Result<Vec<_>, _>>()?);
                    }
                    if after.is_empty() {
                        result.text_content()
                    } else {
                        self.media.inject(result, shown_id, after.iter().copied())?;
                        media::text_with_note_of(result, after)
                    }
                }
            };
            response.response = Some(response_object(&text, result.is_error));
            let part = Part {
                function_response: Some(response),
                ..Part::default()
            };
            self.open(&result.metadata);
            self.push(
                "user",
                with_kept(part, wire_extra::kept(&result.metadata, EXTRA_KEY)),
            );
            for part in following {
                self.push("user", part);
            }
        }
        Ok(())
    }
}

/// A result without the files that came as parts after its function
/// response ([`FOLLOWING_KEY`]), and those parts, as they came.
fn following_parts(result: &ToolResult) -> Result<(Cow<'_, ToolResult>, Vec<Part>), Error> {
    let Some(Value::Array(marks)) = result.metadata.get(FOLLOWING_KEY) else {
        return Ok((Cow::Borrowed(result), Vec::new()));
    };
    let at = result.content.len().saturating_sub(marks.len());
    let parts = result.content[at..]
        .iter()
        .zip(marks)
        .map(|(block, fields)| {
            let kept = match fields {
                Value::Object(fields) => fields.clone(),
                _ => Map::new(),
            };
            content_part(block).map(|part| with_kept(part, kept))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut rest = ToolResult::new(&result.call_id, &result.name, result.content[..at].to_vec());
    rest.is_error = result.is_error;
    rest.metadata = result.metadata.clone();
    Ok((Cow::Owned(rest), parts))
}

/// `functionResponse.response`, an object: `{"result": …}`, or `{"error": …}`
/// for an error result; text holding a JSON object or array goes as that value.
pub(super) fn response_object(text: &str, is_error: bool) -> Value {
    let value = match serde_json::from_str::<Value>(text) {
        Ok(value @ (Value::Object(_) | Value::Array(_))) => value,
        _ => Value::String(text.to_owned()),
    };
    let key = if is_error { "error" } else { "result" };
    Value::Object(Map::from_iter([(key.to_owned(), value)]))
}

/// Whether `metadata` marks an id as made up ([`GENERATED_ID_KEY`]).
fn is_generated(metadata: &Metadata) -> bool {
    metadata.get(GENERATED_ID_KEY) == Some(&Value::Bool(true))
}

/// `part` with `kept` ([`EXTRA_KEY`]) written over it: each field replaces
/// the part's, but an object's fields (of `functionResponse`, `inlineData`…)
/// each replace the one in that object.
fn with_kept(part: Part, kept: Map<String, Value>) -> Part {
    if kept.is_empty() {
        return part;
    }
    let Ok(Value::Object(mut fields)) = serde_json::to_value(&part) else {
        return part;
    };
    for (key, value) in kept {
        match (fields.get_mut(&key), value) {
            (Some(Value::Object(inner)), Value::Object(over)) => inner.extend(over),
            (_, value) => {
                fields.insert(key, value);
            }
        }
    }
    Part::deserialize(Value::Object(fields)).unwrap_or(part)
}

/// The part with the signature kept in `metadata`: a string as
/// `thoughtSignature`, anything else as it is, in the same place (`extra`
/// follows `thoughtSignature`).
fn with_signature(mut part: Part, metadata: &Metadata) -> Part {
    match metadata.get(THOUGHT_SIGNATURE_KEY) {
        Some(Value::String(signature)) => part.thought_signature = Some(signature.clone()),
        Some(other) => {
            part.extra.insert("thoughtSignature".into(), other.clone());
        }
        None => {}
    }
    part
}

/// Whether a tool's file may go inside `functionResponse.parts` (Gemini 3):
/// images and documents, the types multimodal function responses list; not
/// audio, which goes after the responses as a part of its own.
fn in_function_response(block: &ContentBlock) -> bool {
    !matches!(block, ContentBlock::Audio(_))
}

impl MediaPart for Part {
    fn text(text: String) -> Self {
        Part::text(text)
    }

    fn file(block: &ContentBlock) -> Result<Self, Error> {
        content_part(block)
    }
}

pub(super) fn content_part(block: &ContentBlock) -> Result<Part, Error> {
    match block {
        ContentBlock::Text { text, .. } => Ok(Part::text(text)),
        ContentBlock::Image(media) | ContentBlock::Document(media) | ContentBlock::Audio(media) => {
            inline_data(media)
        }
    }
}

fn inline_data(media: &Media) -> Result<Part, Error> {
    match &media.source {
        MediaSource::Base64 { media_type, data } => Ok(Part {
            inline_data: Some(Blob {
                mime_type: Some(media_type.clone()),
                data: Some(data.clone()),
                extra: Map::new(),
            }),
            ..Part::default()
        }),
        MediaSource::Url {
            url,
            media_type: Some(media_type),
        } => Ok(Part {
            file_data: Some(FileData {
                mime_type: Some(media_type.clone()),
                file_uri: Some(url.clone()),
                extra: Map::new(),
            }),
            ..Part::default()
        }),
        MediaSource::Url { url, .. } => Err(Error::InvalidRequest(format!(
            "gemini: images, documents and audio are sent inline only, or by URL with a media \
             type (as `fileData`), not by a URL alone ({})",
            redact_url(url)
        ))),
        MediaSource::Ref { reference, .. } => Err(media::unresolved(PROVIDER, reference)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_media_policy_follows_the_model_unless_set() {
        let default = LowerOptions::default();
        for (model, policy) in [
            ("gemini-2.5-flash", ToolResultMedia::Inject),
            ("models/gemini-2.0-flash-001", ToolResultMedia::Inject),
            ("gemini-1.5-pro", ToolResultMedia::Inject),
            ("gemini-3-pro-preview", ToolResultMedia::Native),
            ("gemini-3.1-pro-preview", ToolResultMedia::Native),
            ("gemini-10-ultra", ToolResultMedia::Native),
            ("my-proxy-model", ToolResultMedia::Native),
        ] {
            assert_eq!(default.media_policy(Some(model)), policy, "{model}");
        }
        assert_eq!(default.media_policy(None), ToolResultMedia::Native);
        let set = LowerOptions {
            tool_result_media: Some(ToolResultMedia::Reject),
        };
        assert_eq!(
            set.media_policy(Some("gemini-3-pro-preview")),
            ToolResultMedia::Reject
        );
    }
}

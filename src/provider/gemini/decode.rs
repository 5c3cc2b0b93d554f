//! The server half, inward: a client's `generateContent` request body, and
//! the model its path names, → a canonical [`ChatRequest`]
//! ([`decode_request`]; [`decode_count_request`] for `countTokens`). Pure,
//! linear in the body.

use std::mem;

use serde_json::{Map, Value};

use super::lower::{
    BLOCKS_KEY, CONTENT_KEY, EXTRA_KEY, FOLLOWING_KEY, GENERATED_ID_KEY, PART_KEY,
    THOUGHT_SIGNATURE_KEY, TOOL_KEY, content_part, response_object,
};
use super::server_tool;
use super::types::{
    Content, FunctionCallingConfig, FunctionResponse, GenerateContentRequest, GenerationConfig,
    Part, ToolConfig,
};
use crate::message::{Metadata, ReasoningMessage, Role, ToolCall, ToolResult};
use crate::provider::wire_extra;
use crate::{
    ChatRequest, ContentBlock, Error, Media, Message, ResponseFormat, ToolChoice, ToolSpec,
};

/// Reads a client's `generateContent` body, for the model `model` its path
/// names (`models/NAME` or `NAME`), into a canonical request: the inverse of
/// [`lower`](super::lower) — decoding and lowering again gives the body back.
///
/// - `systemInstruction`'s text parts → system messages, first;
/// - a `user` content: its run of text, `inlineData` and `fileData` parts →
///   one user message (text, or multimodal: images, audio and documents by
///   media type, `fileData` as media by URL), each run of `functionResponse`
///   parts → one `tool_results` message: the response's one value
///   (`{"result": …}`, `{"output": …}`; `{"error": …}` is an error result)
///   as its text, the files in its `parts` as its content; paired with the
///   call it answers by `id`, else with the first call of its `name` not yet
///   answered (Gemini CLI gives a response an `id` of its own for a call that
///   had none); the `inlineData` and `fileData` parts right after a
///   function response, in the same content (as Gemini CLI sends the file
///   its tool read), → the last of that response's result content, marked
///   [`FOLLOWING_KEY`] so that lowering sends them back after it;
/// - a `model` content: text → assistant text (its `thoughtSignature` in the
///   metadata under [`THOUGHT_SIGNATURE_KEY`]), `thought: true` text →
///   reasoning with its signature (a signature on an empty text too), each run
///   of `functionCall`s → one `tool_calls` message (a call without `id` gets
///   one, marked [`GENERATED_ID_KEY`], which lowering does not send; its
///   signature under [`THOUGHT_SIGNATURE_KEY`]);
/// - any other part (`executableCode`, `codeExecutionResult`…) → an empty
///   text of its role holding the part under [`PART_KEY`], which lowering
///   sends back as it came;
/// - `tools`: `functionDeclarations` → [`ToolSpec`]s (the schema of
///   `parametersJsonSchema`, or of `parameters` with its OpenAPI type names
///   lowercased), any other tool (`googleSearch`, `codeExecution`,
///   `urlContext`) → a server tool ([`server_tool::decode`]);
/// - `toolConfig.functionCallingConfig` → the tool choice (`AUTO`, `NONE`,
///   `ANY` → required, `ANY` of one function → that tool);
/// - `generationConfig`: `temperature`, `maxOutputTokens`, and
///   `responseMimeType: application/json` with `responseJsonSchema` (or
///   `responseSchema`) → the response format; a `candidateCount` above 1 is
///   refused (one candidate is served);
/// - the rest of `generationConfig` (`topP`, `topK`, `stopSequences`,
///   `thinkingConfig`…) and of `toolConfig`, and every other field
///   (`safetySettings`, `cachedContent`…) → `options.extra` under their own
///   names, as they came.
///
/// What the canonical model has no place for travels in metadata for this
/// wire's lowering alone: a part's other fields under [`EXTRA_KEY`] (a
/// user message's, one per block, under [`BLOCKS_KEY`]), a content's other
/// fields — and that it stands apart from the content before it, of the same
/// role — under [`CONTENT_KEY`] on its first item.
///
/// Bad input — not JSON, a wrong type, a role other than `user` or `model`,
/// a function call in a user content, a system instruction with files — is
/// [`Error::InvalidRequest`] naming the field at fault.
///
/// ```
/// use lmstack::provider::gemini::decode_request;
/// use lmstack::{Message, ToolChoice};
///
/// let request = decode_request(br#"{
///     "systemInstruction": {"parts": [{"text": "Be brief."}]},
///     "contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
///     "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
///     "generationConfig": {"maxOutputTokens": 64, "topK": 3}
/// }"#, "models/gemini-2.5-flash").unwrap();
/// assert_eq!(request.messages, vec![Message::system("Be brief."), Message::user("Hi")]);
/// assert_eq!(request.options.model.as_deref(), Some("gemini-2.5-flash"));
/// assert_eq!(request.options.max_tokens, Some(64));
/// assert_eq!(request.options.tool_choice, Some(ToolChoice::Required));
/// assert_eq!(request.options.extra["generationConfig"], serde_json::json!({"topK": 3}));
///
/// let error = decode_request(br#"{"contents": [{"role": "user", "parts": [{"text": 1}]}]}"#, "m")
///     .unwrap_err();
/// assert!(error.to_string().contains("contents[0].parts[0].text: invalid type"), "{error}");
/// ```
pub fn decode_request(body: &[u8], model: &str) -> Result<ChatRequest, Error> {
    let body: Value = serde_json::from_slice(body).map_err(|error| invalid(error.to_string()))?;
    decode_value(body, model)
}

/// Decodes a body read as JSON; its typed fields sent as `null` are kept so.
fn decode_value(body: Value, model: &str) -> Result<ChatRequest, Error> {
    let nulls: Vec<String> = match &body {
        Value::Object(fields) => fields
            .iter()
            .filter(|(_, value)| value.is_null())
            .map(|(key, _)| key.clone())
            .collect(),
        _ => Vec::new(),
    };
    let request: GenerateContentRequest =
        serde_path_to_error::deserialize(body).map_err(described)?;
    let mut request = decode(request, model)?;
    for key in nulls {
        request.options.extra.entry(key).or_insert(Value::Null);
    }
    Ok(request)
}

/// Reads a client's `countTokens` body into a canonical request: its
/// `generateContentRequest` (whose `model` is left out: the path names it),
/// or its `contents` alone, read as [`decode_request`] reads a body.
///
/// ```
/// use lmstack::provider::gemini::decode_count_request;
///
/// let whole = decode_count_request(br#"{"generateContentRequest": {"model": "models/m",
///     "contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}}"#, "m").unwrap();
/// let bare = decode_count_request(br#"{"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}"#, "m").unwrap();
/// assert_eq!(whole.messages, bare.messages);
/// assert!(whole.options.extra.is_empty());
/// ```
pub fn decode_count_request(body: &[u8], model: &str) -> Result<ChatRequest, Error> {
    let mut fields: Map<String, Value> =
        serde_json::from_slice(body).map_err(|error| invalid(error.to_string()))?;
    let Some(mut inner) = fields.remove("generateContentRequest") else {
        return decode_value(Value::Object(fields), model);
    };
    if let Value::Object(inner) = &mut inner {
        inner.remove("model");
    }
    decode_value(inner, model).map_err(|error| match error {
        Error::InvalidRequest(message) => invalid(format!("generateContentRequest.{message}")),
        other => other,
    })
}

fn decode(request: GenerateContentRequest, model: &str) -> Result<ChatRequest, Error> {
    let mut decoder = Decoder::default();
    let mut extra = request.extra;
    if let Some(system) = request.system_instruction {
        let fields = decoder.system(system)?;
        if !fields.is_empty() {
            extra.insert("systemInstruction".into(), Value::Object(fields));
        }
    }
    let mut last_role = None;
    for (at, content) in request.contents.into_iter().enumerate() {
        let role = content_role(content.role.as_deref(), at)?;
        if last_role == Some(role) || !content.extra.is_empty() {
            decoder.mark = Some(content.extra);
        }
        last_role = Some(role);
        decoder.content(role, content.parts.unwrap_or_default(), at)?;
    }
    let mut chat = ChatRequest::new(decoder.messages);
    let options = &mut chat.options;
    options.model = Some(model.strip_prefix("models/").unwrap_or(model).to_owned());
    for (index, tool) in request.tools.into_iter().enumerate() {
        let Some(declarations) = tool.function_declarations else {
            options.server_tools.push(server_tool::decode(tool.extra));
            continue;
        };
        // Beside the declarations, a tool named with no value stays with them,
        // any other is a tool of its own.
        let (unset, tools): (Map<String, Value>, Map<String, Value>) = tool
            .extra
            .into_iter()
            .partition(|(_, value)| value.is_null());
        if !tools.is_empty() {
            options.server_tools.push(server_tool::decode(tools));
        }
        let mut unset = Some(unset).filter(|unset| !unset.is_empty());
        for (inner, declaration) in declarations.into_iter().enumerate() {
            if declaration.name.is_empty() {
                return Err(invalid(format!(
                    "tools[{index}].functionDeclarations[{inner}].name: a function needs a name"
                )));
            }
            let mut kept = declaration.extra;
            let schema = match (declaration.parameters_json_schema, kept.get("parameters")) {
                (Some(schema), _) => schema,
                (None, Some(parameters)) => json_schema_of(parameters.clone()),
                (None, None) => serde_json::json!({"type": "object", "properties": {}}),
            };
            let description = declaration.description.unwrap_or_default();
            let mut spec = ToolSpec::new(declaration.name, description, schema);
            if !kept.is_empty() {
                spec.extra
                    .insert(EXTRA_KEY.into(), Value::Object(mem::take(&mut kept)));
            }
            if let Some(unset) = unset.take() {
                spec.extra.insert(TOOL_KEY.into(), Value::Object(unset));
            }
            options.tools.push(spec);
        }
    }
    if let Some(config) = request.tool_config {
        let (choice, rest) = tool_choice(config);
        options.tool_choice = choice;
        if !rest.is_empty() {
            extra.insert("toolConfig".into(), Value::Object(rest));
        }
    }
    if let Some(config) = request.generation_config {
        options.temperature = config.temperature;
        options.max_tokens = config.max_output_tokens;
        let (format, rest) = generation(config)?;
        options.response_format = format;
        // An empty config is sent back as it came.
        let nothing = options.temperature.is_none()
            && options.max_tokens.is_none()
            && options.response_format.is_none();
        if !rest.is_empty() || nothing {
            extra.insert("generationConfig".into(), Value::Object(rest));
        }
    }
    options.extra = extra;
    Ok(chat)
}

/// A body's mistake, named by the path of the field at fault.
fn described<E: std::fmt::Display>(error: serde_path_to_error::Error<E>) -> Error {
    let path = error.path().to_string();
    let message = error.inner().to_string();
    invalid(match path.as_str() {
        "." => message,
        path => format!("{path}: {message}"),
    })
}

fn invalid(message: String) -> Error {
    Error::InvalidRequest(message)
}

/// The role of the content at `at`: `user` (also when absent, or the older
/// `function`) or `model`.
fn content_role(role: Option<&str>, at: usize) -> Result<Role, Error> {
    match role {
        None | Some("user" | "function") => Ok(Role::User),
        Some("model") => Ok(Role::Assistant),
        Some(other) => Err(invalid(format!(
            "contents[{at}].role: `{other}` is not a role (`user` or `model`)"
        ))),
    }
}

/// `toolConfig` → the tool choice, and the fields it does not say (the
/// names of `ANY` of several functions; the whole `functionCallingConfig`
/// when it is no choice of those).
fn tool_choice(config: ToolConfig) -> (Option<ToolChoice>, Map<String, Value>) {
    let mut rest = config.extra;
    let Some(calling) = config.function_calling_config else {
        return (None, rest);
    };
    let FunctionCallingConfig {
        mode,
        allowed_function_names,
        extra,
    } = calling.clone();
    let choice = match (mode.as_deref(), allowed_function_names.as_deref()) {
        (Some("AUTO"), None) => Some(ToolChoice::Auto),
        (Some("NONE"), None) => Some(ToolChoice::None),
        (Some("ANY"), None) => Some(ToolChoice::Required),
        (Some("ANY"), Some([name])) => Some(ToolChoice::Tool(name.clone())),
        (Some("ANY"), Some([_, _, ..])) => Some(ToolChoice::Required),
        _ => None,
    };
    let fields = match (choice.as_ref(), allowed_function_names) {
        // Required of some functions: the names go as they came.
        (Some(ToolChoice::Required), Some(names)) => {
            let mut fields = Map::new();
            fields.insert("allowedFunctionNames".into(), names.into());
            fields.extend(extra);
            fields
        }
        (Some(_), _) => extra,
        (None, _) => match serde_json::to_value(calling) {
            Ok(Value::Object(fields)) => fields,
            _ => Map::new(),
        },
    };
    if !fields.is_empty() {
        rest.insert("functionCallingConfig".into(), Value::Object(fields));
    }
    (choice, rest)
}

/// `generationConfig`'s response format, and its fields the options do not
/// hold; a `candidateCount` above 1 is refused.
fn generation(
    config: GenerationConfig,
) -> Result<(Option<ResponseFormat>, Map<String, Value>), Error> {
    let mut rest = config.extra;
    if let Some(count) = rest.get("candidateCount")
        && count.as_u64() != Some(1)
        && !count.is_null()
    {
        return Err(invalid(format!(
            "generationConfig.candidateCount: {count} candidates were asked for; one is served"
        )));
    }
    if rest.get("responseMimeType").and_then(Value::as_str) != Some("application/json") {
        return Ok((None, rest));
    }
    let format = if let Some(schema) = rest.get("responseJsonSchema") {
        let format = ResponseFormat::json_schema(schema.clone());
        rest.shift_remove("responseJsonSchema");
        format
    } else if let Some(schema) = rest.get("responseSchema") {
        // Kept too: lowering sends the client's own in its place.
        ResponseFormat::json_schema(json_schema_of(schema.clone()))
    } else {
        ResponseFormat::JsonObject
    };
    rest.shift_remove("responseMimeType");
    Ok((Some(format), rest))
}

/// A schema of Gemini's OpenAPI subset (`parameters`, `responseSchema`) as
/// JSON Schema: its type names (`OBJECT`, `STRING`) lowercased.
fn json_schema_of(mut schema: Value) -> Value {
    fn lower_types(value: &mut Value) {
        match value {
            Value::Object(fields) => {
                for (key, value) in fields.iter_mut() {
                    match value {
                        Value::String(name) if key == "type" => *name = name.to_ascii_lowercase(),
                        value => lower_types(value),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(lower_types),
            _ => {}
        }
    }
    lower_types(&mut schema);
    schema
}

/// The walk over a decoded request.
#[derive(Default)]
struct Decoder {
    messages: Vec<Message>,
    /// The fields of the content being decoded, when it stands apart: for its
    /// first item ([`CONTENT_KEY`]).
    mark: Option<Map<String, Value>>,
    /// Calls not yet answered: their id and name, in order.
    pending: Vec<(String, String)>,
    /// The ids of every call so far.
    ids: Vec<String>,
    /// Ids made up so far.
    made_up: usize,
    calls: Vec<ToolCall>,
    results: Vec<ToolResult>,
    /// A user content's run of text and files, and their parts' fields.
    blocks: Vec<ContentBlock>,
    block_fields: Vec<Map<String, Value>>,
    /// The metadata of the first of those blocks.
    blocks_metadata: Option<Metadata>,
}

impl Decoder {
    /// The system instruction's text parts, as system messages; the
    /// instruction's own fields (a `role`) for `options.extra`.
    fn system(&mut self, system: Content) -> Result<Map<String, Value>, Error> {
        let mut fields = system.extra;
        if let Some(role) = system.role {
            fields.insert("role".into(), role.into());
        }
        for (index, part) in system.parts.unwrap_or_default().into_iter().enumerate() {
            let Part {
                text: Some(text),
                thought: thought @ (None | Some(false)),
                inline_data: None,
                file_data: None,
                function_call: None,
                function_response: None,
                thought_signature: None,
                mut extra,
            } = part
            else {
                return Err(invalid(format!(
                    "systemInstruction.parts[{index}]: a system instruction holds text parts only"
                )));
            };
            if thought.is_some() {
                extra.insert("thought".into(), false.into());
            }
            let mut metadata = Metadata::new();
            wire_extra::keep(&mut metadata, EXTRA_KEY, extra);
            self.messages
                .push(Message::system(text).with_metadata(metadata));
        }
        Ok(fields)
    }

    /// Metadata for the next item: the content's mark, if it is the first.
    fn item(&mut self) -> Metadata {
        let mut metadata = Metadata::new();
        if let Some(fields) = self.mark.take() {
            metadata.insert(CONTENT_KEY, Value::Object(fields));
        }
        metadata
    }

    fn content(&mut self, role: Role, parts: Vec<Part>, at: usize) -> Result<(), Error> {
        for (index, part) in parts.into_iter().enumerate() {
            let path = || format!("contents[{at}].parts[{index}]");
            match (role, part) {
                (
                    _,
                    Part {
                        function_call: Some(_),
                        ..
                    },
                ) if role == Role::User => {
                    return Err(invalid(format!(
                        "{}.functionCall: a function call belongs in a `model` content",
                        path()
                    )));
                }
                (
                    _,
                    Part {
                        function_response: Some(_),
                        ..
                    },
                ) if role == Role::Assistant => {
                    return Err(invalid(format!(
                        "{}.functionResponse: a function response belongs in a `user` content",
                        path()
                    )));
                }
                (
                    Role::Assistant,
                    part @ Part {
                        function_call: Some(_),
                        ..
                    },
                ) => {
                    self.flush_all();
                    self.call(part);
                }
                (
                    Role::User,
                    part @ Part {
                        function_response: Some(_),
                        ..
                    },
                ) => {
                    self.flush_blocks();
                    self.flush_calls();
                    let result = self.result(part, &path)?;
                    self.results.push(result);
                }
                (Role::User, part) => match user_block(part) {
                    Ok((block, fields))
                        if block.as_media().is_some() && !self.results.is_empty() =>
                    {
                        self.following(block, fields);
                    }
                    Ok((block, fields)) => {
                        self.flush_results();
                        self.flush_calls();
                        self.block(block, fields);
                    }
                    Err(part) => {
                        self.flush_all();
                        let message = self.raw_part(role, *part);
                        self.messages.push(message);
                    }
                },
                (_, part) => {
                    self.flush_all();
                    let message = self.model_part(part);
                    self.messages.push(message);
                }
            }
        }
        self.flush_all();
        self.mark = None;
        Ok(())
    }

    fn flush_all(&mut self) {
        self.flush_blocks();
        self.flush_calls();
        self.flush_results();
    }

    /// A part of a user's text or files, gathered.
    fn block(&mut self, block: ContentBlock, fields: Map<String, Value>) {
        if self.blocks.is_empty() {
            self.blocks_metadata = Some(self.item());
        }
        self.blocks.push(block);
        self.block_fields.push(fields);
    }

    fn flush_blocks(&mut self) {
        if self.blocks.is_empty() {
            return;
        }
        let mut metadata = self.blocks_metadata.take().unwrap_or_default();
        let blocks = mem::take(&mut self.blocks);
        let mut fields = mem::take(&mut self.block_fields);
        let message = match <[ContentBlock; 1]>::try_from(blocks) {
            Ok([ContentBlock::Text { text, .. }]) => {
                wire_extra::keep(&mut metadata, EXTRA_KEY, fields.remove(0));
                Message::user(text)
            }
            Ok([block]) => {
                wire_extra::keep_blocks(&mut metadata, BLOCKS_KEY, fields);
                Message::multimodal(Role::User, vec![block])
            }
            Err(blocks) => {
                wire_extra::keep_blocks(&mut metadata, BLOCKS_KEY, fields);
                Message::multimodal(Role::User, blocks)
            }
        };
        self.messages.push(message.with_metadata(metadata));
    }

    /// A model's part other than a call: text, a thought, a file, or kept raw.
    fn model_part(&mut self, mut part: Part) -> Message {
        let text = part.text.take();
        let reasoning = part.inline_data.is_none() && part.file_data.is_none();
        match text {
            Some(text)
                if reasoning
                    && (part.thought == Some(true)
                        || (text.is_empty()
                            && part.thought_signature.is_some()
                            && part.thought.is_none())) =>
            {
                let mut metadata = self.item();
                wire_extra::keep(&mut metadata, EXTRA_KEY, part.extra);
                // Lowering marks a thought by its text: an empty one that
                // said so keeps the mark as a field.
                if text.is_empty() && part.thought == Some(true) {
                    wire_extra::keep(&mut metadata, EXTRA_KEY, nonempty_thought());
                }
                Message::Reasoning(ReasoningMessage {
                    text,
                    signature: part.thought_signature,
                    redacted: false,
                    metadata,
                })
            }
            Some(text) if reasoning && part.thought != Some(true) => {
                let mut metadata = self.item();
                if let Some(signature) = part.thought_signature {
                    metadata.insert(THOUGHT_SIGNATURE_KEY, signature.into());
                }
                if let Some(thought) = part.thought {
                    part.extra.insert("thought".into(), thought.into());
                }
                wire_extra::keep(&mut metadata, EXTRA_KEY, part.extra);
                Message::assistant(text).with_metadata(metadata)
            }
            text => {
                part.text = text;
                self.raw_part(Role::Assistant, part)
            }
        }
    }

    /// An empty text of `role` holding `part` as it came ([`PART_KEY`]).
    fn raw_part(&mut self, role: Role, part: Part) -> Message {
        let mut metadata = self.item();
        metadata.insert(PART_KEY, serde_json::to_value(part).unwrap_or_default());
        Message::text(role, "").with_metadata(metadata)
    }

    fn call(&mut self, part: Part) {
        let Part {
            function_call: Some(call),
            thought_signature,
            thought,
            extra,
            ..
        } = part
        else {
            return;
        };
        let mut metadata = self.item();
        let mut kept = extra;
        if let Some(thought) = thought {
            kept.insert("thought".into(), thought.into());
        }
        let mut inner = Map::new();
        if let Some(will_continue) = call.will_continue {
            inner.insert("willContinue".into(), will_continue.into());
        }
        if let Some(pieces) = call.partial_args {
            inner.insert(
                "partialArgs".into(),
                serde_json::to_value(pieces).unwrap_or_default(),
            );
        }
        let arguments = match call.args {
            Some(arguments @ Value::Object(_)) => arguments,
            None => Value::Object(Map::new()),
            Some(other) => {
                inner.insert("args".into(), other);
                Value::Object(Map::new())
            }
        };
        kept.extend(nonempty("functionCall", inner));
        let id = match call.id {
            Some(id) => id,
            None => {
                metadata.insert(GENERATED_ID_KEY, true.into());
                self.made_up_id()
            }
        };
        if let Some(signature) = thought_signature {
            metadata.insert(THOUGHT_SIGNATURE_KEY, signature.into());
        }
        wire_extra::keep(&mut metadata, EXTRA_KEY, kept);
        let name = call.name.unwrap_or_default();
        self.pending.push((id.clone(), name.clone()));
        self.ids.push(id.clone());
        let mut call = ToolCall::new(id, name, arguments);
        call.metadata = metadata;
        self.calls.push(call);
    }

    fn made_up_id(&mut self) -> String {
        loop {
            let id = format!("call_{}", self.made_up);
            self.made_up += 1;
            if !self.ids.contains(&id) {
                return id;
            }
        }
    }

    /// The call a response answers: by its id, else the first unanswered call
    /// of its name. The call's id, and whether the response gave it.
    fn answered(&mut self, id: Option<&str>, name: &str) -> Option<String> {
        let at = match id {
            Some(id) if self.ids.iter().any(|seen| seen == id) => {
                self.pending.iter().position(|(pending, _)| pending == id)
            }
            _ => self.pending.iter().position(|(_, pending)| pending == name),
        };
        at.map(|at| self.pending.remove(at).0)
    }

    fn result(&mut self, part: Part, path: &impl Fn() -> String) -> Result<ToolResult, Error> {
        let Part {
            function_response: Some(response),
            extra,
            thought_signature,
            thought,
            ..
        } = part
        else {
            return Err(invalid(format!("{}: not a function response", path())));
        };
        let FunctionResponse {
            name,
            id,
            parts,
            response,
            extra: inner_extra,
        } = response;
        let name = name.unwrap_or_default();
        let mut metadata = self.item();
        let mut kept = extra;
        if let Some(signature) = thought_signature {
            kept.insert("thoughtSignature".into(), signature.into());
        }
        if let Some(thought) = thought {
            kept.insert("thought".into(), thought.into());
        }
        let mut inner = inner_extra;
        let known = id
            .as_deref()
            .is_some_and(|id| self.ids.iter().any(|seen| seen == id));
        let call_id = match (self.answered(id.as_deref(), &name), id) {
            (Some(call), Some(id)) if !known => {
                // The client's own id for a call that had another (or none).
                inner.insert("id".into(), id.into());
                call
            }
            (_, Some(id)) => id,
            (Some(call), None) => {
                metadata.insert(GENERATED_ID_KEY, true.into());
                call
            }
            (None, None) => {
                metadata.insert(GENERATED_ID_KEY, true.into());
                self.made_up_id()
            }
        };
        let (text, is_error) = response.as_ref().map(response_text).unwrap_or_default();
        if let Some(response) =
            response.filter(|response| response_object(&text, is_error) != *response)
        {
            inner.insert("response".into(), response);
        }
        let mut content = Vec::new();
        if !text.is_empty() {
            content.push(ContentBlock::text(&text));
        }
        if let Some(parts) = parts {
            let mut files = Vec::with_capacity(parts.len());
            for (index, part) in parts.iter().enumerate() {
                files.push(file_block(part).ok_or_else(|| {
                    invalid(format!(
                        "{}.functionResponse.parts[{index}]: a function's file is `inlineData` or `fileData`",
                        path()
                    ))
                })?);
            }
            let lowered: Result<Vec<Part>, Error> = files.iter().map(content_part).collect();
            if lowered.ok().as_ref() != Some(&parts) {
                inner.insert(
                    "parts".into(),
                    serde_json::to_value(&parts).unwrap_or_default(),
                );
            }
            content.extend(files);
        }
        kept.extend(nonempty("functionResponse", inner));
        wire_extra::keep(&mut metadata, EXTRA_KEY, kept);
        let mut result = ToolResult::new(call_id, name, content);
        result.is_error = is_error;
        result.metadata = metadata;
        Ok(result)
    }

    /// A file right after a function response, as the last of its result's
    /// content, marked so ([`FOLLOWING_KEY`]) with its part's `fields`.
    fn following(&mut self, block: ContentBlock, fields: Map<String, Value>) {
        let Some(result) = self.results.last_mut() else {
            return;
        };
        result.content.push(block);
        let mut marks = match result.metadata.remove(FOLLOWING_KEY) {
            Some(Value::Array(marks)) => marks,
            _ => Vec::new(),
        };
        marks.push(Value::Object(fields));
        result.metadata.insert(FOLLOWING_KEY, Value::Array(marks));
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
}

/// A user's part of text or a file as a content block, with the part's
/// fields the block has no place for; any other part given back.
fn user_block(mut part: Part) -> Result<(ContentBlock, Map<String, Value>), Box<Part>> {
    let kinds = [
        &part.text.is_some(),
        &part.inline_data.is_some(),
        &part.file_data.is_some(),
    ];
    if kinds.into_iter().filter(|kind| **kind).count() != 1 || part.thought == Some(true) {
        return Err(Box::new(part));
    }
    let mut fields = mem::take(&mut part.extra);
    if let Some(thought) = part.thought.take() {
        fields.insert("thought".into(), thought.into());
    }
    if let Some(signature) = part.thought_signature.take() {
        fields.insert("thoughtSignature".into(), signature.into());
    }
    if let Some(text) = part.text {
        return Ok((ContentBlock::text(text), fields));
    }
    if let Some(blob) = &mut part.inline_data {
        fields.extend(nonempty("inlineData", mem::take(&mut blob.extra)));
    }
    if let Some(file) = &mut part.file_data {
        fields.extend(nonempty("fileData", mem::take(&mut file.extra)));
    }
    match file_block(&part) {
        Some(block) => Ok((block, fields)),
        None => Err(Box::new(part)),
    }
}

/// A function response's text, and whether it is an error: the one value of
/// a one-field object (`{"result": …}`, `{"output": …}`, `{"error": …}`),
/// else the whole response as JSON text.
fn response_text(response: &Value) -> (String, bool) {
    let text = |value: &Value| match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        value => value.to_string(),
    };
    match response {
        Value::Object(fields) if fields.len() == 1 => {
            let (key, value) = fields
                .iter()
                .next()
                .map_or(("", &Value::Null), |(k, v)| (k.as_str(), v));
            (text(value), key == "error")
        }
        other => (text(other), false),
    }
}

/// A file of a function's response as a content block.
fn file_block(part: &Part) -> Option<ContentBlock> {
    if let Some(blob) = &part.inline_data {
        let media_type = blob.mime_type.clone().unwrap_or_default();
        return Some(ContentBlock::of_media(Media::base64(
            media_type,
            blob.data.clone().unwrap_or_default(),
        )));
    }
    let file = part.file_data.as_ref()?;
    let mut media = Media::url(file.file_uri.clone().unwrap_or_default());
    if let crate::MediaSource::Url { media_type, .. } = &mut media.source {
        media_type.clone_from(&file.mime_type);
    }
    Some(ContentBlock::of_media(media))
}

/// `{key: fields}`, or nothing when `fields` is empty.
fn nonempty(key: &str, fields: Map<String, Value>) -> Map<String, Value> {
    let mut kept = Map::new();
    if !fields.is_empty() {
        kept.insert(key.to_owned(), Value::Object(fields));
    }
    kept
}

/// The `thought: true` of an empty thought, as a kept field.
fn nonempty_thought() -> Map<String, Value> {
    Map::from_iter([("thought".to_owned(), Value::Bool(true))])
}

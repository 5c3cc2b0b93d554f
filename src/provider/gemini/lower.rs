//! Lowering: a canonical [`ChatRequest`] → the `generateContent` request body.
//!
//! Pure: no IO. The history is walked once into `contents` of roles `user` and
//! `model` (consecutive parts of one role share one content); system messages
//! become `systemInstruction`.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use crate::message::{Metadata, MultimodalMessage, ReasoningMessage, TextMessage};
use crate::provider::Kind;
use crate::provider::history::{self, LowerHistory};
use crate::provider::media::{self, MediaPart, MediaPlan, Placement, ToolResultMedia};
use crate::provider::redact::redact_url;
use crate::{
    ChatRequest, ContentBlock, Error, Media, MediaSource, Message, Role, ToolCall, ToolChoice,
    ToolResult, ToolSpec,
};

/// The name errors from this provider carry.
pub(crate) const PROVIDER: &str = Kind::Gemini.name();

/// The metadata key of a part's `thoughtSignature`, on the tool call or text
/// message lifted from that part; lowering puts it back on the same part.
pub const THOUGHT_SIGNATURE_KEY: &str = "thought_signature";

/// The metadata key that marks a tool call whose id the lifter made up (the
/// model gave none, as before Gemini 3): lowering sends no `id` for it or its
/// result, so Gemini pairs them by name.
pub const GENERATED_ID_KEY: &str = "generated_id";

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
    let chat = &request.options;
    let policy = options.media_policy(chat.model.as_deref());
    let mut history = History::new(policy);
    history.lower(&request.messages)?;
    let mut body = Map::new();
    if !history.system.is_empty() {
        body.insert("systemInstruction".into(), json!({"parts": history.system}));
    }
    body.insert("contents".into(), history.contents.into());
    if !chat.tools.is_empty() {
        let declarations: Vec<Value> = chat.tools.iter().map(lower_tool).collect();
        body.insert(
            "tools".into(),
            json!([{"functionDeclarations": declarations}]),
        );
    }
    if let Some(choice) = &chat.tool_choice {
        body.insert(
            "toolConfig".into(),
            json!({"functionCallingConfig": lower_tool_choice(choice)}),
        );
    }
    let mut generation = Map::new();
    if let Some(temperature) = chat.temperature {
        generation.insert("temperature".into(), temperature.into());
    }
    if let Some(max_tokens) = chat.max_tokens {
        generation.insert("maxOutputTokens".into(), max_tokens.into());
    }
    if !generation.is_empty() {
        body.insert("generationConfig".into(), generation.into());
    }
    merge(&mut body, &chat.extra);
    Ok(Value::Object(body))
}

/// Merges `extra` into `body`: an object into the object of the same name, key
/// by key (so `generationConfig.thinkingConfig` joins `maxOutputTokens`),
/// anything else replacing what is there.
fn merge(body: &mut Map<String, Value>, extra: &Map<String, Value>) {
    for (key, value) in extra {
        match (body.get_mut(key), value) {
            (Some(Value::Object(into)), Value::Object(from)) => merge(into, from),
            _ => {
                body.insert(key.clone(), value.clone());
            }
        }
    }
}

fn lower_tool(tool: &ToolSpec) -> Value {
    let mut declaration = Map::new();
    declaration.insert("name".into(), tool.name.clone().into());
    if !tool.description.is_empty() {
        declaration.insert("description".into(), tool.description.clone().into());
    }
    declaration.insert("parametersJsonSchema".into(), tool.parameters.clone());
    Value::Object(declaration)
}

fn lower_tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!({"mode": "AUTO"}),
        ToolChoice::None => json!({"mode": "NONE"}),
        ToolChoice::Required => json!({"mode": "ANY"}),
        ToolChoice::Tool(name) => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
    }
}

/// The walk over the history.
struct History {
    system: Vec<Value>,
    contents: Vec<Value>,
    /// Ids the lifter made up: neither their calls nor their results send them.
    generated_ids: HashSet<String>,
    /// Where tool results' files go; those injected follow the current run
    /// of function responses.
    media: MediaPlan<Value>,
}

impl History {
    fn new(policy: ToolResultMedia) -> Self {
        History {
            system: Vec::new(),
            contents: Vec::new(),
            generated_ids: HashSet::new(),
            media: MediaPlan::new(PROVIDER, policy),
        }
    }

    fn lower(&mut self, messages: &[Message]) -> Result<(), Error> {
        self.walk(messages)?;
        self.close_injected();
        Ok(())
    }

    /// Appends a part to the last content when it has `role`, else to a new one.
    fn push(&mut self, role: &str, part: Value) {
        if role != "user" || part.get("functionResponse").is_none() {
            self.close_injected();
        }
        self.push_part(role, part);
    }

    fn push_part(&mut self, role: &str, part: Value) {
        if let Some(last) = self.contents.last_mut()
            && last["role"] == role
            && let Some(parts) = last["parts"].as_array_mut()
        {
            parts.push(part);
            return;
        }
        self.contents.push(json!({"role": role, "parts": [part]}));
    }

    /// The call's id as the model saw it: a generated id never was.
    fn shown_id<'a>(&self, result: &'a ToolResult) -> Option<&'a str> {
        Some(result.call_id.as_str()).filter(|id| !self.generated_ids.contains(*id))
    }

    fn close_injected(&mut self) {
        for part in self.media.take_waiting().into_iter().flatten() {
            self.push_part("user", part);
        }
    }
}

impl LowerHistory for History {
    fn text(&mut self, message: &TextMessage) -> Result<(), Error> {
        let part = with_signature(json!({"text": message.text}), &message.metadata);
        match message.role {
            Role::System => {
                self.system.push(part);
            }
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
            .map(content_part)
            .collect::<Result<Vec<_>, _>>()?;
        match message.role {
            Role::System => {
                if parts.iter().any(|part| part.get("text").is_none()) {
                    return Err(Error::InvalidRequest(
                        "gemini: a system instruction holds text only, not images, documents or audio"
                            .into(),
                    ));
                }
                self.system.extend(parts);
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
        let mut part = json!({"text": message.text});
        if !message.text.is_empty() {
            part["thought"] = true.into();
        }
        if let Some(signature) = &message.signature {
            part["thoughtSignature"] = signature.clone().into();
        }
        self.push("model", part);
    }

    fn calls(&mut self, calls: &[ToolCall]) {
        for call in calls.iter().filter(|call| !call.provider_executed) {
            let generated = call.metadata.get(GENERATED_ID_KEY) == Some(&Value::Bool(true));
            let arguments = match &call.arguments {
                Value::Null => json!({}),
                arguments => arguments.clone(),
            };
            let mut function = json!({"name": call.name, "args": arguments});
            if generated {
                self.generated_ids.insert(call.id.clone());
            } else {
                function["id"] = call.id.clone().into();
            }
            let part = with_signature(json!({"functionCall": function}), &call.metadata);
            self.push("model", part);
        }
    }

    fn results(&mut self, results: &[ToolResult]) -> Result<(), Error> {
        for result in results {
            let mut response = json!({"name": result.name});
            let shown_id = self.shown_id(result);
            if let Some(id) = shown_id {
                response["id"] = id.into();
            }
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
                        response["parts"] = parts.collect::<Result<Vec<_>, _>>()?.into();
                    }
                    if after.is_empty() {
                        result.text_content()
                    } else {
                        self.media.inject(result, shown_id, after.iter().copied())?;
                        media::text_with_note_of(result, after)
                    }
                }
            };
            response["response"] = response_object(&text, result.is_error);
            self.push("user", json!({"functionResponse": response}));
        }
        Ok(())
    }
}

/// `functionResponse.response`, an object: `{"result": …}`, or `{"error": …}`
/// for an error result; text holding a JSON object or array goes as that value.
fn response_object(text: &str, is_error: bool) -> Value {
    let value = match serde_json::from_str::<Value>(text) {
        Ok(value @ (Value::Object(_) | Value::Array(_))) => value,
        _ => Value::String(text.to_owned()),
    };
    let key = if is_error { "error" } else { "result" };
    json!({ key: value })
}

fn with_signature(mut part: Value, metadata: &Metadata) -> Value {
    if let Some(signature) = metadata.get(THOUGHT_SIGNATURE_KEY) {
        part["thoughtSignature"] = signature.clone();
    }
    part
}

/// Whether a tool's file may go inside `functionResponse.parts` (Gemini 3):
/// images and documents, the types multimodal function responses list; not
/// audio, which goes after the responses as a part of its own.
fn in_function_response(block: &ContentBlock) -> bool {
    !matches!(block, ContentBlock::Audio(_))
}

impl MediaPart for Value {
    fn text(text: String) -> Self {
        json!({ "text": text })
    }

    fn file(block: &ContentBlock) -> Result<Self, Error> {
        content_part(block)
    }
}

fn content_part(block: &ContentBlock) -> Result<Value, Error> {
    match block {
        ContentBlock::Text { text } => Ok(json!({"text": text})),
        ContentBlock::Image(media) | ContentBlock::Document(media) | ContentBlock::Audio(media) => {
            inline_data(media)
        }
    }
}

fn inline_data(media: &Media) -> Result<Value, Error> {
    match &media.source {
        MediaSource::Base64 { media_type, data } => {
            Ok(json!({"inlineData": {"mimeType": media_type, "data": &**data}}))
        }
        MediaSource::Url { url, .. } => Err(Error::InvalidRequest(format!(
            "gemini: images, documents and audio are sent inline only, not by URL ({})",
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

//! The Chat Completions wire, typed: the request body, the whole response
//! (`chat.completion`), the stream chunk (`chat.completion.chunk`), usage and
//! the error body.
//!
//! Written once for both directions: [`lower`](super::lower) builds a
//! [`ChatCompletionRequest`] and [`decode_request`](super::decode_request)
//! reads one; the reply [`ReplyEncoder`](super::ReplyEncoder) writes [`ChatCompletion`]s
//! and [`ChatCompletionChunk`]s, whose messages and deltas are the same
//! [`ChatMessage`] a request carries. Unknown request fields are kept in
//! `extra` maps, so nothing a client sends is lost.
//!
//! A client reads the same response objects leniently, as real servers send
//! them: [`ResponseRead`] is that reading of a [`ChatCompletionChunk`] or a
//! [`ChatCompletion`] — the fields the lifter uses, optional, unknown roles,
//! part types and fields tolerated — and [`CompletionUsage::read_lenient`] that
//! of the usage. Requests keep their strict reading above.
//!
//! ```
//! use lmstack::provider::openai_chat::types::{ChatCompletionRequest, MessageContent};
//!
//! let body = r#"{"model":"m","messages":[{"role":"user","content":"Hi"}],"logit_bias":{}}"#;
//! let request: ChatCompletionRequest = serde_json::from_str(body).unwrap();
//! assert_eq!(request.messages[0].content, Some(MessageContent::Text("Hi".into())));
//! assert!(request.extra.contains_key("logit_bias"));
//! ```

use std::borrow::Cow;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::provider::body::token_count;
use crate::provider::text_or_list;

/// A Chat Completions request body (`POST /chat/completions`).
///
/// The options a canonical request has no field for (`top_p`, `stop`, `n`,
/// `seed`, …) are typed here so that a bad value is refused with its name, and
/// travel in [`ChatOptions::extra`](crate::ChatOptions::extra) otherwise.
///
/// ```
/// use lmstack::provider::openai_chat::types::{ChatCompletionRequest, Stop};
///
/// let body = r#"{"messages":[],"stop":"\n","seed":1}"#;
/// let request: ChatCompletionRequest = serde_json::from_str(body).unwrap();
/// assert_eq!((request.stop, request.seed), (Some(Stop::One("\n".into())), Some(1)));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletionRequest {
    /// The model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// The tools the model may call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    /// Whether and which tool the model must call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// The output token limit, as compatible servers read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// The output token limit, as OpenAI's reasoning models require it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    /// Streaming mode (SSE chunks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// Streaming options (`include_usage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Stop>,
    /// How many choices to generate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u32>,
    /// Sampling seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// The output format (`{"type":"json_schema",…}`), passed through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<Value>,
    /// The end user's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Reasoning effort (`low`, `medium`, `high`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// Web search (`{}`, `search_context_size`, `user_location`), which the
    /// search models take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub web_search_options: Option<Value>,
    /// Every other field, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `stream_options`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamOptions {
    /// Send a last chunk with the usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_usage: Option<bool>,
    /// Every other field, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `stop`: one sequence or several.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    /// One stop sequence.
    One(String),
    /// Several.
    Many(Vec<String>),
}

/// Who speaks a [`ChatMessage`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChatRole {
    /// Instructions.
    System,
    /// Instructions, as OpenAI's newer models name them.
    Developer,
    /// The user.
    User,
    /// The model.
    Assistant,
    /// A tool's result.
    Tool,
    /// A legacy function result.
    Function,
}

/// A message of a request, the `message` of a response choice, or the `delta`
/// of a stream chunk: the three have one shape.
///
/// ```
/// use lmstack::provider::openai_chat::types::{ChatMessage, ChatRole, MessageContent};
///
/// let message = ChatMessage {
///     role: Some(ChatRole::Assistant),
///     content: Some(MessageContent::Text("Hi".into())),
///     ..ChatMessage::default()
/// };
/// assert_eq!(serde_json::to_string(&message).unwrap(), r#"{"role":"assistant","content":"Hi"}"#);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// The speaker (absent from most stream deltas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<ChatRole>,
    /// Text, or content parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<MessageContent>,
    /// A participant's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The model's refusal, in place of content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// Reasoning, as GLM, llama.cpp and DeepSeek name it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// Reasoning, as vLLM and Ollama name it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// The assistant's tool calls (fragments of them, in a stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// The call a `tool` message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Every other field, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `content`: a string, or an array of parts.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// Plain text.
    Text(String),
    /// Content parts.
    Parts(Vec<ContentPart>),
}

/// Read so that an error inside a part keeps its path
/// (`messages[2].content[0].image_url: missing field `url``).
impl<'de> Deserialize<'de> for MessageContent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let expecting = "a string or an array of content parts";
        text_or_list::deserialize(deserializer, expecting, Self::Text, Self::Parts)
    }
}

/// One part of a message's content, with the fields of the part lmstack does
/// not know (`extra`, kept as they came).
///
/// Read through a flat form, so that an error names the field at fault (a part
/// of an unknown `type` is refused).
///
/// ```
/// use lmstack::provider::openai_chat::types::{ContentPart, ImageUrl};
/// use serde_json::Map;
///
/// let part: ContentPart =
///     serde_json::from_str(r#"{"type":"image_url","image_url":{"url":"https://x/a.png"}}"#).unwrap();
/// let image_url = ImageUrl { url: "https://x/a.png".into(), detail: None };
/// assert_eq!(part, ContentPart::ImageUrl { image_url, extra: Map::new() });
/// assert!(serde_json::from_str::<ContentPart>(r#"{"type":"video"}"#).is_err());
///
/// let text = r#"{"type":"text","text":"Hi","x_new":1}"#;
/// let part: ContentPart = serde_json::from_str(text).unwrap();
/// assert_eq!(serde_json::to_string(&part).unwrap(), text);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", try_from = "RawPart")]
pub enum ContentPart {
    /// Text.
    Text {
        /// The text.
        text: String,
        /// Every other field, verbatim.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    /// An image, by URL or `data:` URI.
    ImageUrl {
        /// The image.
        image_url: ImageUrl,
        /// Every other field, verbatim.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    /// Inline audio.
    InputAudio {
        /// The audio.
        input_audio: InputAudio,
        /// Every other field, verbatim.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    /// A file (a PDF, say), inline or by id.
    File {
        /// The file.
        file: FileData,
        /// Every other field, verbatim.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    /// A refusal (assistant content).
    Refusal {
        /// The refusal's text.
        refusal: String,
        /// Every other field, verbatim.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
}

impl ContentPart {
    /// A text part with no other field.
    pub fn text(text: impl Into<String>) -> Self {
        ContentPart::Text {
            text: text.into(),
            extra: Map::new(),
        }
    }

    /// The part's fields other than its own (`extra`).
    pub fn extra(&self) -> &Map<String, Value> {
        match self {
            ContentPart::Text { extra, .. }
            | ContentPart::ImageUrl { extra, .. }
            | ContentPart::InputAudio { extra, .. }
            | ContentPart::File { extra, .. }
            | ContentPart::Refusal { extra, .. } => extra,
        }
    }

    /// The part's fields other than its own, to change.
    pub fn extra_mut(&mut self) -> &mut Map<String, Value> {
        match self {
            ContentPart::Text { extra, .. }
            | ContentPart::ImageUrl { extra, .. }
            | ContentPart::InputAudio { extra, .. }
            | ContentPart::File { extra, .. }
            | ContentPart::Refusal { extra, .. } => extra,
        }
    }
}

/// The flat form a [`ContentPart`] is read through: each known field read as
/// its type (an error keeps its path), any other kept in `extra`.
#[derive(Default)]
struct RawPart {
    kind: String,
    text: Option<String>,
    image_url: Option<ImageUrl>,
    input_audio: Option<InputAudio>,
    file: Option<FileData>,
    refusal: Option<String>,
    extra: Map<String, Value>,
}

impl<'de> Deserialize<'de> for RawPart {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> de::Visitor<'de> for Fields {
            type Value = RawPart;

            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a content part")
            }

            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<RawPart, A::Error> {
                let mut raw = RawPart::default();
                let mut kind = None;
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "type" => kind = Some(map.next_value()?),
                        "text" => raw.text = map.next_value()?,
                        "image_url" => raw.image_url = map.next_value()?,
                        "input_audio" => raw.input_audio = map.next_value()?,
                        "file" => raw.file = map.next_value()?,
                        "refusal" => raw.refusal = map.next_value()?,
                        _ => {
                            raw.extra.insert(key, map.next_value()?);
                        }
                    }
                }
                raw.kind = kind.ok_or_else(|| de::Error::missing_field("type"))?;
                Ok(raw)
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

impl TryFrom<RawPart> for ContentPart {
    type Error = String;

    fn try_from(raw: RawPart) -> Result<Self, String> {
        let missing = |field: &str| format!("a `{}` part needs `{field}`", raw.kind);
        let extra = raw.extra;
        Ok(match raw.kind.as_str() {
            "text" => ContentPart::Text {
                text: raw.text.ok_or_else(|| missing("text"))?,
                extra,
            },
            "image_url" => ContentPart::ImageUrl {
                image_url: raw.image_url.ok_or_else(|| missing("image_url"))?,
                extra,
            },
            "input_audio" => ContentPart::InputAudio {
                input_audio: raw.input_audio.ok_or_else(|| missing("input_audio"))?,
                extra,
            },
            "file" => ContentPart::File {
                file: raw.file.ok_or_else(|| missing("file"))?,
                extra,
            },
            "refusal" => ContentPart::Refusal {
                refusal: raw.refusal.ok_or_else(|| missing("refusal"))?,
                extra,
            },
            other => {
                return Err(format!(
                    "unknown content part type `{other}` (expected text, image_url, input_audio, file or refusal)"
                ));
            }
        })
    }
}

/// `image_url`: a URL or a `data:` URI.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImageUrl {
    /// The URL.
    pub url: String,
    /// `auto`, `low` or `high`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// `input_audio`: base64 audio and its format.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputAudio {
    /// The audio, base64.
    pub data: String,
    /// `wav` or `mp3`.
    pub format: String,
}

/// `file`: a file inline (a `data:` URI) or by the id of an upload.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FileData {
    /// The file as a `data:` URI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_data: Option<String>,
    /// The id of an uploaded file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_id: Option<String>,
    /// The file's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
}

/// A tool call of an assistant message, or a fragment of one in a stream
/// (where `index` says which call it continues).
///
/// ```
/// use lmstack::provider::openai_chat::types::{FunctionCall, ToolCall};
///
/// let fragment = ToolCall {
///     index: Some(0),
///     function: FunctionCall { name: None, arguments: Some("{\"a\":".into()) },
///     ..ToolCall::default()
/// };
/// assert_eq!(
///     serde_json::to_string(&fragment).unwrap(),
///     r#"{"index":0,"function":{"arguments":"{\"a\":"}}"#
/// );
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's position among the reply's calls (streams only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    /// The call's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `function`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The function called.
    #[serde(default)]
    pub function: FunctionCall,
    /// Every other field, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The function of a [`ToolCall`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The arguments' JSON text (a fragment of it, in a stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
}

/// A tool the model may call: `{"type":"function","function":{…}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The function.
    pub function: FunctionDefinition,
    /// Every other field, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `tool_choice`: a mode (`auto`, `none`, `required`) or one function.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolChoice {
    /// `auto`, `none` or `required`.
    Mode(String),
    /// `{"type":"function","function":{"name":…}}`.
    Named(NamedToolChoice),
}

/// A [`ToolChoice`] that names one function.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NamedToolChoice {
    /// `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The function.
    pub function: FunctionName,
}

/// A function's name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionName {
    /// The name.
    pub name: String,
}

/// A whole response: `"object": "chat.completion"`.
///
/// ```
/// use lmstack::provider::openai_chat::types::ChatCompletion;
///
/// let body = r#"{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[
///     {"index":0,"message":{"role":"assistant","content":null,"refusal":null},"finish_reason":"stop"}]}"#;
/// let completion: ChatCompletion = serde_json::from_str(body).unwrap();
/// assert_eq!(completion.choices[0].finish_reason.as_deref(), Some("stop"));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletion {
    /// The response id (`chatcmpl-…`).
    pub id: String,
    /// `chat.completion`.
    pub object: String,
    /// When it was created, in seconds since the Unix epoch.
    pub created: u64,
    /// The model that answered.
    pub model: String,
    /// The choices (lmstack writes one).
    pub choices: Vec<Choice>,
    /// Token usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<CompletionUsage>,
}

/// A choice of a [`ChatCompletion`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    /// Its index.
    pub index: u32,
    /// The message.
    pub message: ChatMessage,
    /// Why the model stopped.
    pub finish_reason: Option<String>,
    /// Log probabilities (lmstack writes `null`).
    #[serde(default)]
    pub logprobs: Option<Value>,
}

/// One chunk of a stream: `"object": "chat.completion.chunk"`.
///
/// ```
/// use lmstack::provider::openai_chat::types::ChatCompletionChunk;
///
/// let data = r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",
///     "choices":[{"index":0,"delta":{"reasoning_content":"hm"},"finish_reason":null}]}"#;
/// let chunk: ChatCompletionChunk = serde_json::from_str(data).unwrap();
/// assert_eq!(chunk.choices[0].delta.reasoning_content.as_deref(), Some("hm"));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletionChunk {
    /// The response id, the same in every chunk.
    pub id: String,
    /// `chat.completion.chunk`.
    pub object: String,
    /// When the response was created, in seconds since the Unix epoch.
    pub created: u64,
    /// The model that answers.
    pub model: String,
    /// The choices' deltas (none in the usage chunk).
    pub choices: Vec<ChunkChoice>,
    /// Token usage (the last chunk, with `include_usage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<CompletionUsage>,
}

/// A choice of a [`ChatCompletionChunk`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChunkChoice {
    /// Its index.
    pub index: u32,
    /// What this chunk adds.
    pub delta: ChatMessage,
    /// Why the model stopped (the last delta only).
    pub finish_reason: Option<String>,
    /// Log probabilities (lmstack writes `null`).
    #[serde(default)]
    pub logprobs: Option<Value>,
}

/// Token usage.
///
/// ```
/// use lmstack::provider::openai_chat::types::CompletionUsage;
///
/// let usage: CompletionUsage = serde_json::from_str(
///     r#"{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"prompt_tokens_details":{"cached_tokens":1,"audio_tokens":0}}"#,
/// ).unwrap();
/// assert_eq!(usage.prompt_tokens_details.unwrap().cached_tokens, Some(1));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CompletionUsage {
    /// Input tokens.
    pub prompt_tokens: u64,
    /// Output tokens.
    pub completion_tokens: u64,
    /// Their sum.
    pub total_tokens: u64,
    /// Input tokens read from and written to the cache (both counted in
    /// `prompt_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    /// Reasoning tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
}

impl CompletionUsage {
    /// Reads a usage leniently, as a client reads a response's: `None` when
    /// `usage` is not an object; a count that is not a non-negative number (a
    /// string, say) counts as absent — 0 for the three counts, no details for
    /// the others —, and a float counts as its whole part (`12.0` is 12).
    ///
    /// ```
    /// use lmstack::provider::openai_chat::types::CompletionUsage;
    /// use serde_json::json;
    ///
    /// let usage = CompletionUsage::read_lenient(&json!({"prompt_tokens": 3.0, "completion_tokens": "4"})).unwrap();
    /// assert_eq!((usage.prompt_tokens, usage.completion_tokens), (3, 0));
    /// assert_eq!(usage.prompt_tokens_details, None);
    /// assert_eq!(CompletionUsage::read_lenient(&json!([1])), None);
    /// ```
    pub fn read_lenient(usage: &Value) -> Option<Self> {
        usage.as_object()?;
        let count = |path: &str| token_count(usage, path);
        Some(Self {
            prompt_tokens: count("/prompt_tokens").unwrap_or_default(),
            completion_tokens: count("/completion_tokens").unwrap_or_default(),
            total_tokens: count("/total_tokens").unwrap_or_default(),
            prompt_tokens_details: PromptTokensDetails::new(
                count("/prompt_tokens_details/cached_tokens"),
                count("/prompt_tokens_details/cache_write_tokens"),
            ),
            completion_tokens_details: count("/completion_tokens_details/reasoning_tokens")
                .map(|reasoning_tokens| CompletionTokensDetails { reasoning_tokens }),
        })
    }
}

/// `usage.prompt_tokens_details` and `usage.completion_tokens_details`, the
/// error body and a function tool's definition: the Responses wire's too.
pub use crate::provider::openai_shared::{
    CompletionTokensDetails, ErrorBody, ErrorObject, FunctionDefinition, PromptTokensDetails,
};

/// A response as a client reads it: a [`ChatCompletionChunk`], or a
/// [`ChatCompletion`] (whose choices carry `message` instead of `delta`), read
/// leniently — the same objects as those types, not a second wire.
///
/// Only what a client lifts is read, and all of it is optional: `id`,
/// `object`, `created` and `model` may be missing (the first three are not
/// read), `choices` may be `null`, unknown fields are ignored. The usage is
/// read by [`CompletionUsage::read_lenient`] (a usage of an odd shape is
/// ignored rather than failing the chunk), also under `x_groq.usage`; an
/// `error` object stands for the whole response. The id is borrowed from the
/// text when it can be.
///
/// ```
/// use lmstack::provider::openai_chat::types::ResponseRead;
///
/// let data = r#"{"id":"c1","choices":[{"index":0,"delta":{"role":"critic",
///     "content":[{"type":"text","text":"Hi"},{"type":"blink"}],
///     "tool_calls":[{"index":0,"type":"web_search","web_search":{"q":"x"}}]}}],
///     "usage":"odd","x_groq":{"usage":{"prompt_tokens":2}}}"#;
/// let chunk: ResponseRead = serde_json::from_str(data).unwrap();
/// let delta = chunk.choices[0].delta.as_ref().unwrap();
/// assert_eq!(delta.content.clone().map(|c| c.into_text()).as_deref(), Some("Hi"));
/// assert_eq!(delta.tool_calls.as_ref().unwrap()[0].rest["web_search"]["q"], "x");
/// assert_eq!(chunk.usage, None);
/// assert_eq!(chunk.x_groq.unwrap().usage.unwrap().prompt_tokens, 2);
/// ```
#[derive(Debug, Default, Deserialize)]
pub struct ResponseRead<'a> {
    /// The response id (borrowed from the text unless it holds escapes).
    #[serde(default, borrow, deserialize_with = "borrowed_text")]
    pub id: Option<Cow<'a, str>>,
    /// The choices (`null` reads as none).
    #[serde(default, deserialize_with = "null_as_default")]
    pub choices: Vec<ChoiceRead>,
    /// Token usage, if it reads as one.
    #[serde(default, deserialize_with = "lenient_usage")]
    pub usage: Option<CompletionUsage>,
    /// Groq's extras, where it puts the usage (ignored unless an object).
    #[serde(default, deserialize_with = "lenient_x_groq")]
    pub x_groq: Option<XGroq>,
    /// An error in place of the response (a body or a chunk).
    #[serde(default)]
    pub error: Option<Value>,
}

/// A choice of a [`ResponseRead`]: a [`ChunkChoice`] or a [`Choice`].
#[derive(Debug, Default, Deserialize)]
pub struct ChoiceRead {
    /// Its index (0 when missing).
    #[serde(default)]
    pub index: u32,
    /// What a chunk adds.
    #[serde(default)]
    pub delta: Option<MessageRead>,
    /// A whole body's message.
    #[serde(default)]
    pub message: Option<MessageRead>,
    /// Why the model stopped.
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// A [`ChatMessage`] as a client reads a response's: the fields a reply
/// carries, typed, and any other (the role among them) in `rest`.
///
/// Read field by field, by hand: it is every stream chunk's delta, and
/// `#[serde(flatten)]` would buffer each delta whole before reading it.
#[derive(Clone, Debug, Default)]
pub struct MessageRead {
    /// Text, or content parts of any type (their `text`s count).
    pub content: Option<ContentRead>,
    /// Reasoning, as GLM, llama.cpp and DeepSeek name it.
    pub reasoning_content: Option<String>,
    /// Reasoning, as vLLM and Ollama name it.
    pub reasoning: Option<String>,
    /// The model's refusal.
    pub refusal: Option<String>,
    /// Tool calls, or fragments of them.
    pub tool_calls: Option<Vec<ToolCallRead>>,
    /// Annotations of the content (`url_citation`s), unchecked.
    pub annotations: Option<Vec<Value>>,
    /// Every other field (`role` among them), as it came.
    pub rest: Map<String, Value>,
}

impl<'de> Deserialize<'de> for MessageRead {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// A field's name: one of the typed ones, or another (owned only then).
        enum Key {
            Content,
            ReasoningContent,
            Reasoning,
            Refusal,
            ToolCalls,
            Annotations,
            Other(String),
        }

        impl<'de> Deserialize<'de> for Key {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Name;
                impl de::Visitor<'_> for Name {
                    type Value = Key;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        f.write_str("a field name")
                    }
                    fn visit_str<E: de::Error>(self, name: &str) -> Result<Key, E> {
                        Ok(match name {
                            "content" => Key::Content,
                            "reasoning_content" => Key::ReasoningContent,
                            "reasoning" => Key::Reasoning,
                            "refusal" => Key::Refusal,
                            "tool_calls" => Key::ToolCalls,
                            "annotations" => Key::Annotations,
                            other => Key::Other(other.to_owned()),
                        })
                    }
                }
                deserializer.deserialize_identifier(Name)
            }
        }

        struct Fields;
        impl<'de> de::Visitor<'de> for Fields {
            type Value = MessageRead;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a message object")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<MessageRead, A::Error> {
                let mut message = MessageRead::default();
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Content => message.content = map.next_value()?,
                        Key::ReasoningContent => message.reasoning_content = map.next_value()?,
                        Key::Reasoning => message.reasoning = map.next_value()?,
                        Key::Refusal => message.refusal = map.next_value()?,
                        Key::ToolCalls => message.tool_calls = map.next_value()?,
                        Key::Annotations => message.annotations = map.next_value()?,
                        Key::Other(name) => {
                            message.rest.insert(name, map.next_value()?);
                        }
                    }
                }
                Ok(message)
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

/// A [`MessageContent`] as a client reads it: a string, or an array of parts
/// of any type, unchecked.
#[derive(Clone, Debug, PartialEq)]
pub enum ContentRead {
    /// Plain text.
    Text(String),
    /// Parts, as they came.
    Parts(Vec<Value>),
}

impl<'de> Deserialize<'de> for ContentRead {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let expecting = "a string or an array of content parts";
        text_or_list::deserialize(deserializer, expecting, Self::Text, Self::Parts)
    }
}

impl ContentRead {
    /// The text: the string, or the `text` of each part, joined.
    pub fn into_text(self) -> String {
        match self {
            ContentRead::Text(text) => text,
            ContentRead::Parts(parts) => parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect(),
        }
    }
}

/// A [`ToolCall`] as a client reads it: its type may be any (a call that ran
/// on the server — GLM's `web_search`, `mcp` — has its payload under the key
/// named by its type, in `rest`), its function may be missing.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ToolCallRead {
    /// Which call a fragment continues (streams only).
    #[serde(default)]
    pub index: Option<u32>,
    /// The call's id.
    #[serde(default)]
    pub id: Option<String>,
    /// `function`, or the type of a server-side call.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// The function called.
    #[serde(default)]
    pub function: Option<FunctionCallRead>,
    /// Every other field: a server-side call's payload.
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// A [`FunctionCall`] as a client reads it: the arguments as JSON text
/// normally, the object itself from some servers.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct FunctionCallRead {
    /// The tool's name.
    #[serde(default)]
    pub name: Option<String>,
    /// The arguments: a JSON string (a fragment of one, in a stream) or a value.
    #[serde(default)]
    pub arguments: Option<Value>,
}

/// `x_groq`: Groq's extras on a chunk.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct XGroq {
    /// The usage, on Groq's last chunk.
    #[serde(default, deserialize_with = "lenient_usage")]
    pub usage: Option<CompletionUsage>,
}

fn lenient_usage<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<CompletionUsage>, D::Error> {
    let value = Option::<Value>::deserialize(deserializer)?;
    Ok(value.as_ref().and_then(CompletionUsage::read_lenient))
}

fn lenient_x_groq<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<XGroq>, D::Error> {
    let value = Option::<Value>::deserialize(deserializer)?;
    Ok(value.filter(Value::is_object).map(|groq| XGroq {
        usage: groq.get("usage").and_then(CompletionUsage::read_lenient),
    }))
}

/// Text borrowed from the input where it can be: serde borrows a `Cow<str>`
/// field marked `borrow`, but not one inside an `Option`, which it copies.
#[derive(Deserialize)]
struct CowText<'a>(#[serde(borrow)] Cow<'a, str>);

fn borrowed_text<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Cow<'de, str>>, D::Error> {
    Ok(Option::<CowText<'de>>::deserialize(deserializer)?.map(|CowText(text)| text))
}

fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

//! The request every stage takes.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::response_format::ResponseFormat;
use super::server_tool::ServerTool;
use crate::message::{CacheControl, ContentBlock, Message};

/// A conversation to continue, with the options of the call.
///
/// ```
/// use lmstack::{ChatRequest, Message, ToolSpec};
/// use serde_json::json;
/// let request = ChatRequest::new(vec![Message::user("What is 2 + 3?")])
///     .model("gpt-4o-mini")
///     .tool(ToolSpec::new("add", "Adds two numbers", json!({"type": "object"})))
///     .streaming(true);
/// assert!(request.options.stream);
/// ```
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// Model, tools, sampling and mode.
    #[serde(default)]
    pub options: ChatOptions,
    /// What a layer or the gateway tells the layers below about the call, by
    /// type, as `http::Request::extensions` does: such as the conversation it
    /// belongs to ([`SessionKey`]). Never
    /// sent upstream, serialized or compared.
    ///
    /// ```
    /// use lmstack::{ChatRequest, SessionKey};
    ///
    /// let mut request = ChatRequest::new(vec![]);
    /// request.extensions.insert(SessionKey::new("conversation-7"));
    /// assert_eq!(request.extensions.get::<SessionKey>().unwrap().as_str(), "conversation-7");
    /// ```
    #[serde(skip)]
    pub extensions: http::Extensions,
}

/// Two requests are equal when their messages and options are: their
/// [`extensions`](ChatRequest::extensions) are not compared.
impl PartialEq for ChatRequest {
    fn eq(&self, other: &Self) -> bool {
        self.messages == other.messages && self.options == other.options
    }
}

/// The conversation a request belongs to, in a request's
/// [`extensions`](ChatRequest::extensions): a key a client sends with every
/// turn (a session id header), by which [`Deployments`](crate::deploy::Deployments)
/// keep a conversation on one deployment, where its prompt cache lives. The
/// gateway sets it from the agents' session headers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SessionKey(String);

impl SessionKey {
    /// The key `key`.
    pub fn new(key: impl Into<String>) -> Self {
        SessionKey(key.into())
    }

    /// The key.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl ChatRequest {
    /// A request with default options (non-streaming).
    pub fn new(messages: Vec<Message>) -> Self {
        ChatRequest {
            messages,
            options: ChatOptions::default(),
            extensions: http::Extensions::new(),
        }
    }

    /// Sets the model.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.options.model = Some(model.into());
        self
    }

    /// Adds a tool.
    pub fn tool(mut self, tool: ToolSpec) -> Self {
        self.options.tools.push(tool);
        self
    }

    /// Picks streaming (`true`) or non-streaming mode.
    pub fn streaming(mut self, stream: bool) -> Self {
        self.options.stream = stream;
        self
    }

    /// Whether a cache breakpoint ([`CacheControl`]) marks any part of the
    /// request: a tool, a message, a content block, a call or a result.
    ///
    /// ```
    /// use lmstack::{CacheControl, ChatRequest, ContentBlock, Message, Role};
    /// let plain = ChatRequest::new(vec![Message::user("Hi")]);
    /// assert!(!plain.has_cache_breakpoints());
    /// let block = ContentBlock::text("A long document…").with_cache_control(Some(CacheControl::default()));
    /// let marked = ChatRequest::new(vec![Message::multimodal(Role::User, vec![block])]);
    /// assert!(marked.has_cache_breakpoints());
    /// ```
    pub fn has_cache_breakpoints(&self) -> bool {
        let block = |block: &ContentBlock| block.cache_control().is_some();
        let marked = |message: &Message| {
            message.metadata().cache_control().is_some()
                || (message.calls().iter()).any(|call| call.metadata.cache_control().is_some())
                || message.results().iter().any(|result| {
                    result.metadata.cache_control().is_some() || result.content.iter().any(block)
                })
                || matches!(message, Message::Multimodal(multimodal) if multimodal.content.iter().any(block))
        };
        (self.options.tools.iter()).any(|tool| tool.cache_control.is_some())
            || self.messages.iter().any(marked)
    }
}

/// The options of a call. Unknown provider parameters go in `extra` and are
/// passed to the wire request as they are.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatOptions {
    /// The model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The tools the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// The tools the provider runs itself (web search, code execution…),
    /// beside `tools`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_tools: Vec<ServerTool>,
    /// Whether and which tool the model must call (a client tool or a
    /// server tool, by name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// The maximum number of output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// The form the reply's text must take (JSON, or JSON matching a
    /// schema): lowered natively by every wire, and checked by the providers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
    /// Streaming mode: the reply carries deltas as they arrive. Otherwise it carries
    /// complete messages.
    #[serde(default)]
    pub stream: bool,
    /// Other provider parameters, passed through.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
}

impl ChatOptions {
    /// The tool with this name, compared case-insensitively.
    pub fn find_tool(&self, name: &str) -> Option<&ToolSpec> {
        self.tools
            .iter()
            .find(|tool| tool.name.eq_ignore_ascii_case(name))
    }
}

/// A tool the model may call: a name, a description and a JSON Schema for the
/// arguments.
///
/// ```json
/// {"name":"get_weather","description":"Current weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}
/// {"name":"search","description":"…","parameters":{…},"cache_control":{"ttl":"1h"},"extra":{"defer_loading":true}}
/// ```
///
/// `cache_control` is a cache breakpoint after the tool (Anthropic's tools
/// take one; other wires leave it out). `extra` holds the fields of an
/// Anthropic tool definition the model has no place for (`defer_loading`…):
/// the Anthropic decoder fills it and only the Anthropic lowering writes it
/// back, so they survive an Anthropic-to-Anthropic trip through the gateway.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What the tool does, for the model.
    #[serde(default)]
    pub description: String,
    /// The JSON Schema of the arguments object.
    #[serde(default = "empty_object_schema")]
    pub parameters: Value,
    /// A cache breakpoint after this tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<CacheControl>,
    /// Anthropic tool fields with no place here, as they came.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
}

impl ToolSpec {
    /// A tool spec.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters,
            cache_control: None,
            extra: Map::new(),
        }
    }
}

fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

/// Whether and which tool the model must call.
///
/// JSON: `"auto"`, `"none"`, `"required"` or `{"tool":"NAME"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// The model must not call tools.
    None,
    /// The model must call some tool.
    Required,
    /// The model must call this tool.
    Tool(String),
}

impl ToolChoice {
    /// True when a call of the tool `name` is allowed under this choice: any
    /// call under `auto` and `required`, none under `none`, only a call of the
    /// named tool (matched case-insensitively) under `tool`.
    ///
    /// The layers that run or parse calls refuse a call the request did not
    /// allow (a model may write one anyway).
    ///
    /// ```
    /// use lmstack::ToolChoice;
    /// assert!(ToolChoice::Auto.allows("add"));
    /// assert!(!ToolChoice::None.allows("add"));
    /// assert!(ToolChoice::Tool("add".into()).allows("ADD"));
    /// assert!(!ToolChoice::Tool("add".into()).allows("sub"));
    /// ```
    pub fn allows(&self, name: &str) -> bool {
        match self {
            ToolChoice::Auto | ToolChoice::Required => true,
            ToolChoice::None => false,
            ToolChoice::Tool(tool) => tool.eq_ignore_ascii_case(name),
        }
    }
}

//! Tools the provider runs itself: web search, code execution, and any other
//! a wire names ([`ServerTool`]).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A tool the provider runs on its side (it answers the call itself, in the
/// same reply): typed where several wires have it, kept raw for its own wire
/// otherwise. Requests carry them in
/// [`ChatOptions::server_tools`](crate::ChatOptions::server_tools), beside
/// the client's [`ToolSpec`](crate::ToolSpec)s.
///
/// ```json
/// {"type":"web_search","max_uses":8}
/// {"type":"web_search","allowed_domains":["docs.rs"],"user_location":{"country":"FR"},
///  "native":{"wire":"anthropic","tool":{"type":"web_search_20250305","name":"web_search","allowed_domains":["docs.rs"],"user_location":{"type":"approximate","country":"FR"}}}}
/// {"type":"code_execution"}
/// {"type":"native","wire":"anthropic","tool":{"type":"bash_20250124","name":"bash"}}
/// ```
///
/// Each wire lowers the typed kinds to its own tool (Anthropic's
/// `web_search_20250305` and `code_execution_20250825`, Gemini's
/// `googleSearch` and `codeExecution`, OpenAI Chat's `web_search_options`)
/// with the options it has; a decoder keeps the tool as its client wrote it
/// in `native`, and the same wire sends that back as it came unless the typed
/// fields were changed. A [`ServerTool::Native`] tool reaches its own wire
/// only. What a wire cannot take is refused by its lowering, and dropped with
/// a logged warning by a gateway (docs/providers.md lists each wire's).
///
/// ```
/// use lmstack::{ServerTool, WebSearch};
/// let search = ServerTool::WebSearch(WebSearch { max_uses: Some(8), ..WebSearch::default() });
/// assert_eq!(serde_json::to_string(&search).unwrap(), r#"{"type":"web_search","max_uses":8}"#);
/// assert_eq!(search.name(), "web_search");
/// let back: ServerTool = serde_json::from_str(r#"{"type":"code_execution"}"#).unwrap();
/// assert_eq!(back, ServerTool::CodeExecution(Default::default()));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerTool {
    /// The provider searches the web (its results cited in the reply).
    WebSearch(WebSearch),
    /// The provider runs code the model writes, in a sandbox.
    CodeExecution(CodeExecution),
    /// A tool only its own wire has (Anthropic's `web_fetch_*`, `bash_*`,
    /// `text_editor_*`, `computer_*`, `memory_*`, tool search; Gemini's
    /// `urlContext`…), as that wire's client wrote it.
    Native(NativeTool),
}

impl ServerTool {
    /// The name the model calls the tool by: the native tool's `name` where
    /// it has one, else `web_search`, `code_execution`, or empty.
    pub fn name(&self) -> &str {
        let (native, default) = match self {
            ServerTool::WebSearch(search) => (search.native.as_ref(), "web_search"),
            ServerTool::CodeExecution(code) => (code.native.as_ref(), "code_execution"),
            ServerTool::Native(native) => (Some(native), ""),
        };
        native
            .and_then(|native| native.tool.get("name")?.as_str())
            .unwrap_or(default)
    }

    /// The tool as `wire` (a [`Kind`](crate::provider::Kind)'s name) wrote
    /// it, if it came from that wire.
    pub fn native_of(&self, wire: &str) -> Option<&NativeTool> {
        let native = match self {
            ServerTool::WebSearch(search) => search.native.as_ref(),
            ServerTool::CodeExecution(code) => code.native.as_ref(),
            ServerTool::Native(native) => Some(native),
        };
        native.filter(|native| native.wire == wire)
    }

    /// The same tool without its native form: what a wire must make of it
    /// when it did not write it. `None` for a [`ServerTool::Native`] tool.
    pub fn portable(&self) -> Option<ServerTool> {
        match self {
            ServerTool::WebSearch(search) => Some(ServerTool::WebSearch(WebSearch {
                native: None,
                ..search.clone()
            })),
            ServerTool::CodeExecution(_) => {
                Some(ServerTool::CodeExecution(CodeExecution::default()))
            }
            ServerTool::Native(_) => None,
        }
    }
}

/// Web search, with the options that cross wires. Every field is optional;
/// an upstream that lacks one searches without it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WebSearch {
    /// The most searches in one reply (Anthropic's `max_uses`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_uses: Option<u32>,
    /// Only these domains' pages are searched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_domains: Option<Vec<String>>,
    /// These domains' pages are never searched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_domains: Option<Vec<String>>,
    /// Where the user is, roughly, for local results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_location: Option<UserLocation>,
    /// The tool as its client's wire wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native: Option<NativeTool>,
}

/// Code execution in the provider's sandbox.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CodeExecution {
    /// The tool as its client's wire wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native: Option<NativeTool>,
}

/// An approximate location of the user (every wire's `approximate` kind).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserLocation {
    /// The city (`San Francisco`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub city: Option<String>,
    /// The region or state (`California`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The country, two letters of ISO 3166-1 (`US`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
    /// The IANA time zone (`America/Los_Angeles`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
}

/// A tool object as one wire's client wrote it: the wire's name (`anthropic`,
/// `openai`, `gemini`) and the object, every field in its order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NativeTool {
    /// The wire that wrote it (a [`Kind`](crate::provider::Kind)'s name).
    pub wire: String,
    /// The tool object, as it came.
    pub tool: Map<String, Value>,
}

impl NativeTool {
    /// A tool `wire` wrote.
    pub fn new(wire: impl Into<String>, tool: Map<String, Value>) -> Self {
        NativeTool {
            wire: wire.into(),
            tool,
        }
    }
}

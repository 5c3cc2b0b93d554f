//! Gemini's built-in tools as canonical [`ServerTool`]s, both ways: a tool
//! object of `tools` other than `functionDeclarations` — `{"googleSearch":
//! {}}`, `{"codeExecution": {}}`, `{"urlContext": {}}` — and the server tool
//! it is. Pure.

use serde_json::{Map, Value};

use super::types::Tool;
use crate::provider::Kind;
use crate::provider::server_tool::lacking;
use crate::{CodeExecution, Error, NativeTool, ServerTool, WebSearch};

/// The tool key of Google Search grounding.
const GOOGLE_SEARCH: &str = "googleSearch";
/// The tool key of code execution.
const CODE_EXECUTION: &str = "codeExecution";

/// A tool object a Gemini client sent (without `functionDeclarations`) →
/// the server tool it is, keeping the object as it came: `googleSearch` is
/// web search, `codeExecution` code execution, any other (`urlContext`,
/// `googleMaps`, …) a native tool of this wire.
///
/// ```
/// use lmstack::ServerTool;
/// use lmstack::provider::gemini::server_tool;
/// use serde_json::json;
///
/// let tool = json!({"googleSearch": {}}).as_object().unwrap().clone();
/// assert!(matches!(server_tool::decode(tool), ServerTool::WebSearch(_)));
/// ```
pub fn decode(tool: Map<String, Value>) -> ServerTool {
    let only = |key: &str| tool.len() == 1 && tool.contains_key(key);
    let native = NativeTool::new(Kind::Gemini.name(), tool.clone());
    if only(GOOGLE_SEARCH) {
        ServerTool::WebSearch(WebSearch {
            native: Some(native),
            ..WebSearch::default()
        })
    } else if only(CODE_EXECUTION) {
        ServerTool::CodeExecution(CodeExecution {
            native: Some(native),
        })
    } else {
        ServerTool::Native(native)
    }
}

/// A server tool as a tool of its own: web search as `{"googleSearch": {}}`
/// (none of its options: the Gemini API has no place for them), code
/// execution as `{"codeExecution": {}}`, a tool a Gemini client wrote
/// (`{"urlContext": {}}`) as it came; another wire's own tool is refused.
pub(crate) fn lower(tool: &ServerTool) -> Result<Tool, Error> {
    let own = |key: &str| Map::from_iter([(key.to_owned(), Value::Object(Map::new()))]);
    let extra = match (tool.native_of(Kind::Gemini.name()), tool) {
        (Some(native), _) => native.tool.clone(),
        (None, ServerTool::WebSearch(_)) => own(GOOGLE_SEARCH),
        (None, ServerTool::CodeExecution(_)) => own(CODE_EXECUTION),
        (None, ServerTool::Native(_)) => return Err(lacking(Kind::Gemini, tool)),
    };
    Ok(Tool {
        function_declarations: None,
        extra,
    })
}

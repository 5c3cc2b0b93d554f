//! Server tools on the Messages wire: a request's `type`d tool ⇄ a canonical
//! [`ServerTool`]. Pure.
//!
//! `web_search_*` (every version) is web search — `max_uses`,
//! `allowed_domains`, `blocked_domains` and `user_location` typed —,
//! `code_execution_*` code execution, any other type (`web_fetch_*`,
//! `bash_*`, `text_editor_*`, `computer_*`, `memory_*`, tool search…) a
//! [`ServerTool::Native`] tool. Each keeps the tool object as it came, which
//! goes back as it came unless its typed fields were changed.

use serde_json::{Map, Value};

use super::types::Tool;
use crate::provider::Kind;
use crate::provider::server_tool::{Fit, approximate, fit, lacking, read, set};
use crate::{CodeExecution, Error, NativeTool, ServerTool, WebSearch};

/// This wire's name, in [`NativeTool::wire`].
const WIRE: &str = Kind::Anthropic.name();

/// The web search tool written for a web search from another wire.
pub const WEB_SEARCH_TYPE: &str = "web_search_20250305";

/// The code execution tool written for code execution from another wire,
/// sent with the [`CODE_EXECUTION_BETA`] flag.
pub const CODE_EXECUTION_TYPE: &str = "code_execution_20250825";

/// The beta flag [`CODE_EXECUTION_TYPE`] needs.
pub const CODE_EXECUTION_BETA: &str = "code-execution-2025-08-25";

/// A tool object with a `type` other than `custom` → its server tool.
pub(crate) fn decode(tool: Map<String, Value>) -> ServerTool {
    let kind = tool.get("type").and_then(Value::as_str).unwrap_or_default();
    if kind.starts_with("web_search_") {
        let mut search = web_search(&tool);
        search.native = Some(NativeTool::new(WIRE, tool));
        ServerTool::WebSearch(search)
    } else if kind.starts_with("code_execution_") {
        ServerTool::CodeExecution(CodeExecution {
            native: Some(NativeTool::new(WIRE, tool)),
        })
    } else {
        ServerTool::Native(NativeTool::new(WIRE, tool))
    }
}

/// The typed options of a `web_search_*` tool (those of a wrong type left
/// out: the tool object still holds them).
fn web_search(tool: &Map<String, Value>) -> WebSearch {
    WebSearch {
        max_uses: read(tool, "max_uses"),
        allowed_domains: read(tool, "allowed_domains"),
        blocked_domains: read(tool, "blocked_domains"),
        user_location: read(tool, "user_location"),
        native: None,
    }
}

/// A server tool → the tool object the Messages API takes: the tool its
/// client wrote, as it came, unless its typed fields were changed (then
/// those are written over it); from another wire, `web_search_20250305` with
/// the options, `code_execution_20250825`. Another wire's own tool is
/// refused ([`Error::InvalidRequest`]).
pub(crate) fn lower(tool: &ServerTool) -> Result<Tool, Error> {
    if fit(Kind::Anthropic, tool) == Fit::Lacks {
        return Err(lacking(Kind::Anthropic, tool));
    }
    let native = tool.native_of(WIRE);
    let fields = match (tool, native) {
        (ServerTool::Native(_), Some(native)) => native.tool.clone(),
        (_, Some(native)) if decode(native.tool.clone()) == *tool => native.tool.clone(),
        (ServerTool::WebSearch(search), native) => {
            let mut fields = base(native, WEB_SEARCH_TYPE, "web_search");
            let lists = |list: &Option<Vec<String>>| list.clone().map(Value::from);
            set(&mut fields, "max_uses", search.max_uses.map(Value::from));
            set(
                &mut fields,
                "allowed_domains",
                lists(&search.allowed_domains),
            );
            set(
                &mut fields,
                "blocked_domains",
                lists(&search.blocked_domains),
            );
            let location = search.user_location.as_ref().map(approximate);
            set(&mut fields, "user_location", location);
            fields
        }
        (ServerTool::CodeExecution(_), native) => {
            base(native, CODE_EXECUTION_TYPE, "code_execution")
        }
        (ServerTool::Native(_), None) => return Err(lacking(Kind::Anthropic, tool)),
    };
    serde_json::from_value(Value::Object(fields)).map_err(|error| {
        Error::InvalidRequest(format!(
            "{WIRE}: the server tool `{}`: {error}",
            tool.name()
        ))
    })
}

/// Whether the request's server tools need the code execution beta flag:
/// code execution that no Anthropic client wrote.
pub(crate) fn needs_code_execution_beta(tools: &[ServerTool]) -> bool {
    tools
        .iter()
        .any(|tool| matches!(tool, ServerTool::CodeExecution(_)) && tool.native_of(WIRE).is_none())
}

/// The native tool's fields, or a tool of this type and name.
fn base(native: Option<&NativeTool>, kind: &str, name: &str) -> Map<String, Value> {
    match native {
        Some(native) => native.tool.clone(),
        None => {
            let mut fields = Map::new();
            fields.insert("type".into(), kind.into());
            fields.insert("name".into(), name.into());
            fields
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::UserLocation;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        let Value::Object(fields) = value else {
            panic!("an object")
        };
        fields
    }

    fn lowered(tool: &ServerTool) -> Value {
        serde_json::to_value(lower(tool).unwrap()).unwrap()
    }

    #[test]
    fn every_web_search_version_is_web_search_with_its_options() {
        let raw = json!({"type": "web_search_20260209", "name": "web_search", "max_uses": 2,
            "blocked_domains": ["x.com"], "user_location": {"type": "approximate", "country": "FR"},
            "cache_control": {"type": "ephemeral"}});
        let ServerTool::WebSearch(search) = decode(object(raw.clone())) else {
            panic!("web search")
        };
        assert_eq!(search.max_uses, Some(2));
        assert_eq!(search.blocked_domains, Some(vec!["x.com".to_owned()]));
        assert_eq!(search.user_location.unwrap().country.as_deref(), Some("FR"));
        assert_eq!(search.native.unwrap().tool, object(raw));
    }

    #[test]
    fn a_changed_option_is_written_over_the_tool_as_it_came() {
        let raw = json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 8,
            "cache_control": {"type": "ephemeral"}});
        let mut tool = decode(object(raw));
        let ServerTool::WebSearch(search) = &mut tool else {
            panic!("web search")
        };
        search.max_uses = None;
        search.allowed_domains = Some(vec!["docs.rs".into()]);
        assert_eq!(
            lowered(&tool),
            json!({"type": "web_search_20250305", "name": "web_search",
                "cache_control": {"type": "ephemeral"}, "allowed_domains": ["docs.rs"]})
        );
    }

    #[test]
    fn tools_of_another_wire_get_this_wires_own() {
        let search = ServerTool::WebSearch(WebSearch {
            user_location: Some(UserLocation {
                city: Some("Paris".into()),
                ..UserLocation::default()
            }),
            ..WebSearch::default()
        });
        assert_eq!(
            lowered(&search),
            json!({"type": WEB_SEARCH_TYPE, "name": "web_search",
                "user_location": {"type": "approximate", "city": "Paris"}})
        );
        let code = ServerTool::CodeExecution(CodeExecution::default());
        assert_eq!(
            lowered(&code),
            json!({"type": CODE_EXECUTION_TYPE, "name": "code_execution"})
        );
        assert!(needs_code_execution_beta(&[code]));
        let url = ServerTool::Native(NativeTool::new("gemini", object(json!({"urlContext": {}}))));
        let error = lower(&url).unwrap_err().to_string();
        assert!(error.contains("no equivalent"), "{error}");
    }
}

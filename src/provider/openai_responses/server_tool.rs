//! Server tools on the Responses wire, its built-in tools ⇄ a canonical
//! [`ServerTool`]. Pure.
//!
//! `web_search` (and its dated and preview versions) is web search —
//! `filters.allowed_domains` and `user_location` typed —, `code_interpreter`
//! code execution, any other built-in type (`file_search`, `mcp`,
//! `image_generation`, `shell`…) a [`ServerTool::Native`] tool. Each keeps
//! the tool object as it came, which goes back as it came unless its typed
//! fields were changed.

use serde_json::{Map, Value, json};

use super::types::Tool;
use crate::provider::Kind;
use crate::provider::server_tool::{Fit, approximate, fit, lacking, read, set};
use crate::{CodeExecution, Error, NativeTool, ServerTool, WebSearch};

/// This wire's name, in [`NativeTool::wire`].
const WIRE: &str = Kind::OpenAiResponses.name();

/// A built-in tool object → its server tool, keeping the object.
pub(crate) fn decode(tool: Map<String, Value>) -> ServerTool {
    let kind = tool.get("type").and_then(Value::as_str).unwrap_or_default();
    if kind.starts_with("web_search") {
        let filters = tool.get("filters").and_then(Value::as_object);
        let search = WebSearch {
            allowed_domains: filters.and_then(|filters| read(filters, "allowed_domains")),
            user_location: read(&tool, "user_location"),
            native: Some(NativeTool::new(WIRE, tool)),
            ..WebSearch::default()
        };
        ServerTool::WebSearch(search)
    } else if kind == "code_interpreter" {
        ServerTool::CodeExecution(CodeExecution {
            native: Some(NativeTool::new(WIRE, tool)),
        })
    } else {
        ServerTool::Native(NativeTool::new(WIRE, tool))
    }
}

/// A server tool → the built-in tool object: the one this wire's client
/// wrote, as it came unless its typed fields were changed; otherwise
/// `{"type":"web_search", …}` or `{"type":"code_interpreter",
/// "container":{"type":"auto"}}`. Another wire's own tool is refused
/// ([`Error::InvalidRequest`]).
pub(crate) fn lower(tool: &ServerTool) -> Result<Tool, Error> {
    if fit(Kind::OpenAiResponses, tool) == Fit::Lacks {
        return Err(lacking(Kind::OpenAiResponses, tool));
    }
    let native = tool.native_of(WIRE);
    let fields = match (tool, native) {
        (ServerTool::Native(_), Some(native)) => native.tool.clone(),
        (_, Some(native)) if decode(native.tool.clone()) == *tool => native.tool.clone(),
        (ServerTool::WebSearch(search), native) => {
            let mut fields = base(native, json!({"type": "web_search"}));
            let mut filters = fields
                .get("filters")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            let allowed = search.allowed_domains.clone().map(Value::from);
            set(&mut filters, "allowed_domains", allowed);
            let filters = Some(Value::Object(filters)).filter(|f| f != &json!({}));
            set(&mut fields, "filters", filters);
            let location = search.user_location.as_ref().map(approximate);
            set(&mut fields, "user_location", location);
            fields
        }
        (ServerTool::CodeExecution(_), native) => base(
            native,
            json!({"type": "code_interpreter", "container": {"type": "auto"}}),
        ),
        (ServerTool::Native(_), None) => return Err(lacking(Kind::OpenAiResponses, tool)),
    };
    Ok(Tool::Other(fields))
}

/// The tool object this wire's client wrote, or `default`.
fn base(native: Option<&NativeTool>, default: Value) -> Map<String, Value> {
    match (native, default) {
        (Some(native), _) => native.tool.clone(),
        (None, Value::Object(fields)) => fields,
        (None, _) => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::UserLocation;

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
    fn a_clients_built_in_tools_go_back_as_they_came() {
        for raw in [
            json!({"type": "web_search", "search_context_size": "low",
                   "filters": {"allowed_domains": ["a.example"]},
                   "user_location": {"type": "approximate", "country": "FR"}}),
            json!({"type": "code_interpreter", "container": "cntr_1"}),
            json!({"type": "file_search", "vector_store_ids": ["vs_1"]}),
        ] {
            assert_eq!(lowered(&decode(object(raw.clone()))), raw);
        }
    }

    #[test]
    fn web_search_reads_and_writes_its_typed_options() {
        let raw = json!({"type": "web_search_2025_08_26",
                         "filters": {"allowed_domains": ["a.example"]},
                         "user_location": {"type": "approximate", "city": "Paris"}});
        let ServerTool::WebSearch(mut search) = decode(object(raw)) else {
            panic!("web search")
        };
        assert_eq!(search.allowed_domains, Some(vec!["a.example".to_owned()]));
        assert_eq!(
            search.user_location.as_ref().unwrap().city.as_deref(),
            Some("Paris")
        );
        // A stage changes a typed field: the object is written over.
        search.allowed_domains = None;
        let written = lowered(&ServerTool::WebSearch(search));
        assert_eq!(
            written,
            json!({"type": "web_search_2025_08_26",
                   "user_location": {"type": "approximate", "city": "Paris"}})
        );
    }

    #[test]
    fn another_wires_tools_are_written_in_this_wires_shape() {
        let search = ServerTool::WebSearch(WebSearch {
            max_uses: Some(3),
            allowed_domains: Some(vec!["a.example".into()]),
            user_location: Some(UserLocation {
                country: Some("US".into()),
                ..UserLocation::default()
            }),
            native: Some(NativeTool::new(
                "anthropic",
                object(json!({"type": "web_search_20250305"})),
            )),
            ..WebSearch::default()
        });
        assert_eq!(
            lowered(&search),
            json!({"type": "web_search", "filters": {"allowed_domains": ["a.example"]},
                   "user_location": {"type": "approximate", "country": "US"}})
        );
        let code = ServerTool::CodeExecution(CodeExecution::default());
        assert_eq!(
            lowered(&code),
            json!({"type": "code_interpreter", "container": {"type": "auto"}})
        );
        let bash = ServerTool::Native(NativeTool::new(
            "anthropic",
            object(json!({"type": "bash_20250124", "name": "bash"})),
        ));
        assert!(
            matches!(lower(&bash), Err(Error::InvalidRequest(message)) if message.contains("bash"))
        );
    }
}

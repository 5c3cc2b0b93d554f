//! What each wire makes of a [`ServerTool`]: the one table the lowerings
//! refuse by and a gateway drops by ([`fit`]). Pure.

use crate::ServerTool;
use crate::provider::Kind;

/// What a wire makes of a server tool.
#[cfg(any(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic"
))]
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Fit {
    /// The wire takes the tool, without the options named (it has no place
    /// for them).
    Takes(Vec<&'static str>),
    /// The wire has no such tool.
    Lacks,
}

/// The web search options each wire has a place for.
#[cfg(any(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic"
))]
const fn web_search_options(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Anthropic => &[
            "max_uses",
            "allowed_domains",
            "blocked_domains",
            "user_location",
        ],
        Kind::OpenAiChat => &["user_location"],
        // `filters.allowed_domains`.
        Kind::OpenAiResponses => &["allowed_domains", "user_location"],
        // `googleSearch` takes none of them (`excludeDomains` is Vertex's).
        Kind::Gemini => &[],
    }
}

/// Whether the wire has code execution (the Responses API's
/// `code_interpreter`).
#[cfg(any(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic"
))]
const fn runs_code(kind: Kind) -> bool {
    matches!(kind, Kind::Anthropic | Kind::Gemini | Kind::OpenAiResponses)
}

/// Whether the wire takes its own tools raw ([`ServerTool::Native`]):
/// OpenAI Chat's only server tool is its typed `web_search_options`.
#[cfg(any(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic"
))]
const fn takes_native(kind: Kind) -> bool {
    matches!(kind, Kind::Anthropic | Kind::Gemini | Kind::OpenAiResponses)
}

/// What `kind` makes of `tool`: a tool its own wire wrote goes back whole;
/// web search everywhere, with the options the wire has; code execution
/// where the wire runs code; another wire's own tool nowhere.
#[cfg(any(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic"
))]
pub(crate) fn fit(kind: Kind, tool: &ServerTool) -> Fit {
    if tool.native_of(kind.name()).is_some() {
        return match tool {
            ServerTool::Native(_) if !takes_native(kind) => Fit::Lacks,
            _ => Fit::Takes(Vec::new()),
        };
    }
    match tool {
        ServerTool::WebSearch(search) => {
            let kept = web_search_options(kind);
            let set = set_options(search);
            Fit::Takes(
                set.into_iter()
                    .filter(|option| !kept.contains(option))
                    .collect(),
            )
        }
        ServerTool::CodeExecution(_) if runs_code(kind) => Fit::Takes(Vec::new()),
        ServerTool::CodeExecution(_) | ServerTool::Native(_) => Fit::Lacks,
    }
}

/// The names of the options a web search sets.
#[cfg(any(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic"
))]
fn set_options(search: &crate::WebSearch) -> Vec<&'static str> {
    let set = [
        ("max_uses", search.max_uses.is_some()),
        ("allowed_domains", search.allowed_domains.is_some()),
        ("blocked_domains", search.blocked_domains.is_some()),
        ("user_location", search.user_location.is_some()),
    ];
    set.into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect()
}

/// The field `key` of a tool object, if it reads as a `T`.
#[cfg(any(feature = "anthropic", feature = "openai-responses"))]
pub(crate) fn read<T: serde::de::DeserializeOwned>(
    tool: &serde_json::Map<String, serde_json::Value>,
    key: &str,
) -> Option<T> {
    T::deserialize(tool.get(key)?).ok()
}

/// Sets `key` of a tool object to `value`, in its place if it is there;
/// removes it for none.
#[cfg(any(feature = "anthropic", feature = "openai-responses"))]
pub(crate) fn set(
    fields: &mut serde_json::Map<String, serde_json::Value>,
    key: &str,
    value: Option<serde_json::Value>,
) {
    match value {
        Some(value) => {
            fields.insert(key.into(), value);
        }
        None => {
            fields.shift_remove(key);
        }
    }
}

/// A location as Anthropic and the Responses API write it:
/// `{"type":"approximate", "city": …}`.
#[cfg(any(feature = "anthropic", feature = "openai-responses"))]
pub(crate) fn approximate(location: &crate::UserLocation) -> serde_json::Value {
    let mut fields = serde_json::Map::new();
    fields.insert("type".into(), "approximate".into());
    if let Ok(serde_json::Value::Object(set)) = serde_json::to_value(location) {
        fields.extend(set);
    }
    serde_json::Value::Object(fields)
}

/// The error a lowering gives for a server tool its wire lacks.
#[cfg(any(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic",
    feature = "gemini"
))]
pub(crate) fn lacking(kind: Kind, tool: &ServerTool) -> crate::Error {
    crate::Error::InvalidRequest(format!(
        "{kind}: the server tool {} has no equivalent on this wire",
        described(tool)
    ))
}

/// `web_search`, or a native tool's name and wire: `bash` (`anthropic`).
fn described(tool: &ServerTool) -> String {
    match tool {
        ServerTool::Native(native) => format!("`{}` (`{}`)", tool.name(), native.wire),
        _ => format!("`{}`", tool.name()),
    }
}

/// The tool choice for a wire whose choice names its function tools only
/// (OpenAI Chat, Gemini; the Responses API's, as lmstack lowers it), when the request has server tools: none when it
/// names a tool that is not a client tool, or when there is no client tool
/// to choose (the APIs refuse a choice without tools); the model then
/// decides. Without server tools, the choice as it is.
#[cfg(any(feature = "openai", feature = "openai-responses", feature = "gemini"))]
pub(crate) fn function_choice(options: &crate::ChatOptions) -> Option<&crate::ToolChoice> {
    use crate::ToolChoice;
    let choice = options.tool_choice.as_ref()?;
    if options.server_tools.is_empty() {
        return Some(choice);
    }
    match choice {
        _ if options.tools.is_empty() => None,
        ToolChoice::Tool(name) if options.find_tool(name).is_none() => None,
        choice => Some(choice),
    }
}

/// Removes from `options` the server tools an upstream of wire `kind`
/// lacks, and the tool choice it could not follow; returns what was dropped,
/// for the gateway's warning (`server tool `bash` (`anthropic`)`,
/// `web_search max_uses`, `tool_choice`).
#[cfg(feature = "server")]
pub(crate) fn drop_unfit(options: &mut crate::ChatOptions, kind: Kind) -> Vec<String> {
    let mut dropped = Vec::new();
    options.server_tools.retain(|tool| match fit(kind, tool) {
        Fit::Takes(lost) => {
            let name = tool.name();
            dropped.extend(lost.into_iter().map(|option| format!("{name} {option}")));
            true
        }
        Fit::Lacks => {
            dropped.push(format!("server tool {}", described(tool)));
            false
        }
    });
    let function_choice_only = matches!(
        kind,
        Kind::OpenAiChat | Kind::OpenAiResponses | Kind::Gemini
    );
    if function_choice_only
        && options.tool_choice.is_some()
        && !options.server_tools.is_empty()
        && function_choice(options).is_none()
    {
        options.tool_choice = None;
        dropped.push("tool_choice".into());
    }
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ChatOptions, CodeExecution, NativeTool, ToolChoice, UserLocation, WebSearch};
    use serde_json::{Map, json};

    fn native(wire: &str, tool: serde_json::Value) -> NativeTool {
        let serde_json::Value::Object(tool) = tool else {
            panic!("an object")
        };
        NativeTool::new(wire, tool)
    }

    #[test]
    fn each_wire_takes_the_web_search_options_it_has() {
        let search = ServerTool::WebSearch(WebSearch {
            max_uses: Some(3),
            user_location: Some(UserLocation::default()),
            ..WebSearch::default()
        });
        assert_eq!(fit(Kind::Anthropic, &search), Fit::Takes(vec![]));
        assert_eq!(fit(Kind::OpenAiChat, &search), Fit::Takes(vec!["max_uses"]));
        let lost = vec!["max_uses", "user_location"];
        assert_eq!(fit(Kind::Gemini, &search), Fit::Takes(lost));
    }

    #[test]
    fn code_execution_and_native_tools_reach_only_the_wires_that_have_them() {
        let code = ServerTool::CodeExecution(CodeExecution::default());
        assert_eq!(fit(Kind::Gemini, &code), Fit::Takes(vec![]));
        assert_eq!(fit(Kind::OpenAiChat, &code), Fit::Lacks);
        let bash = ServerTool::Native(native(
            "anthropic",
            json!({"type": "bash_20250124", "name": "bash"}),
        ));
        assert_eq!(fit(Kind::Anthropic, &bash), Fit::Takes(vec![]));
        assert_eq!(fit(Kind::Gemini, &bash), Fit::Lacks);
        let url = ServerTool::Native(native("gemini", json!({"urlContext": {}})));
        assert_eq!(fit(Kind::Gemini, &url), Fit::Takes(vec![]));
        assert_eq!(fit(Kind::Anthropic, &url), Fit::Lacks);
        let own = ServerTool::Native(NativeTool::new("openai", Map::new()));
        assert_eq!(fit(Kind::OpenAiChat, &own), Fit::Lacks);
    }

    #[cfg(feature = "server")]
    #[test]
    fn the_gateway_drops_what_the_upstream_lacks_and_names_it() {
        let mut options = ChatOptions {
            server_tools: vec![
                ServerTool::WebSearch(WebSearch {
                    max_uses: Some(8),
                    ..WebSearch::default()
                }),
                ServerTool::CodeExecution(CodeExecution::default()),
            ],
            tool_choice: Some(ToolChoice::Tool("web_search".into())),
            ..ChatOptions::default()
        };
        let dropped = drop_unfit(&mut options, Kind::OpenAiChat);
        assert_eq!(
            dropped,
            [
                "web_search max_uses",
                "server tool `code_execution`",
                "tool_choice"
            ]
        );
        assert_eq!(options.server_tools.len(), 1);
        assert_eq!(options.tool_choice, None);
    }

    #[cfg(feature = "openai")]
    #[test]
    fn a_choice_of_functions_only_leaves_server_tools_to_the_model() {
        let mut options = ChatOptions {
            server_tools: vec![ServerTool::WebSearch(WebSearch::default())],
            tool_choice: Some(ToolChoice::Required),
            ..ChatOptions::default()
        };
        assert_eq!(function_choice(&options), None);
        options
            .tools
            .push(crate::ToolSpec::new("add", "", json!({})));
        assert_eq!(function_choice(&options), Some(&ToolChoice::Required));
        options.tool_choice = Some(ToolChoice::Tool("web_search".into()));
        assert_eq!(function_choice(&options), None);
        options.tool_choice = Some(ToolChoice::Tool("ADD".into()));
        assert!(function_choice(&options).is_some());
        options.server_tools.clear();
        options.tool_choice = Some(ToolChoice::Tool("web_search".into()));
        assert!(function_choice(&options).is_some());
    }
}

//! The client tools this wire has and the canonical model does not: custom
//! (free-form) tools and namespaces, as tool specs every wire can offer —
//! and back. Pure.
//!
//! - A `custom` tool `{"type":"custom","name","description","format"}` → a
//!   function of one string argument, `input`; the tool object whole kept
//!   in the spec's `extra` under [`EXTRA_KEY`], which the lowering writes back
//!   as it came. Its calls: a `custom_tool_call` `{call_id, name, input}` ⇄ a
//!   call with arguments `{"input": …}`, its item's other fields (`type`
//!   among them) kept under [`EXTRA_KEY`]; its output likewise.
//! - A `namespace` `{"type":"namespace","name","description","tools":[…]}`
//!   → its tools, each a spec of its own under its own name (as OpenAI's
//!   calls name them: the function's name, the namespace in the call's
//!   `namespace` field), each keeping the namespace object (without its
//!   tools) in its [`EXTRA_KEY`] fields under `namespace`; the lowering
//!   groups a run of specs of the same namespace back into one.
//!
//! A reply's encoder asks [`ClientTools`] which of the request's tools were
//! custom or in a namespace, so that a call from another wire goes to the
//! client as the call the client expects.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::keys::{CLIENT_ID, EXTRA_KEY};
use super::types::{FunctionDefinition, Tool};
use crate::provider::openai_shared::invalid;
use crate::provider::wire_extra;
use crate::{Error, ToolCall, ToolSpec};

/// The type of a custom tool's call item.
pub(crate) const CUSTOM_CALL: &str = "custom_tool_call";
/// The type of a custom tool's output item.
pub(crate) const CUSTOM_CALL_OUTPUT: &str = "custom_tool_call_output";
/// The field of a tool's kept fields that holds its namespace.
const NAMESPACE: &str = "namespace";

/// A function tool → its spec, with its fields (`strict`, unknown ones) and
/// its namespace, if any, kept under [`EXTRA_KEY`].
pub(crate) fn function_spec(function: FunctionDefinition, namespace: Option<&Value>) -> ToolSpec {
    let FunctionDefinition {
        name,
        description,
        parameters,
        strict,
        mut extra,
    } = function;
    if let Some(strict) = strict {
        extra.insert("strict".into(), strict.into());
    }
    let parameters = parameters.unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    let mut spec = ToolSpec::new(name, description.unwrap_or_default(), parameters);
    keep(&mut spec, extra, namespace);
    spec
}

fn keep(spec: &mut ToolSpec, mut fields: Map<String, Value>, namespace: Option<&Value>) {
    if let Some(namespace) = namespace {
        fields.insert(NAMESPACE.into(), namespace.clone());
    }
    if !fields.is_empty() {
        spec.extra.insert(EXTRA_KEY.into(), Value::Object(fields));
    }
}

/// A `custom` or `namespace` tool → its specs. A tool without a `name`, a
/// namespace without `tools`, or a tool in a namespace that is neither a
/// function nor a custom tool is [`Error::InvalidRequest`] (its message
/// names the field).
pub(crate) fn decode(tool: Map<String, Value>) -> Result<Vec<ToolSpec>, Error> {
    if tool.get("type").and_then(Value::as_str) == Some("custom") {
        return Ok(vec![custom_spec(tool, None)?]);
    }
    let mut namespace = tool;
    let inner = match namespace.remove("tools") {
        Some(Value::Array(tools)) => tools,
        _ => return Err(invalid("tools", "a namespace needs its `tools`")),
    };
    if !namespace.get("name").is_some_and(Value::is_string) {
        return Err(invalid("name", "a namespace needs a name"));
    }
    let namespace = Value::Object(namespace);
    inner
        .into_iter()
        .enumerate()
        .map(|(j, tool)| {
            let at = format!("tools[{j}]");
            match serde_json::from_value::<Tool>(tool) {
                Ok(Tool::Function(function)) => Ok(function_spec(function, Some(&namespace))),
                Ok(Tool::Other(fields))
                    if fields.get("type").and_then(Value::as_str) == Some("custom") =>
                {
                    custom_spec(fields, Some(&namespace)).map_err(|error| prefixed(&at, error))
                }
                Ok(Tool::Other(_)) => Err(invalid(
                    &format!("{at}.type"),
                    "a namespace holds functions and custom tools",
                )),
                Err(error) => Err(invalid(&at, &error.to_string())),
            }
        })
        .collect()
}

fn prefixed(at: &str, error: Error) -> Error {
    match error {
        Error::InvalidRequest(message) => Error::InvalidRequest(format!("{at}.{message}")),
        other => other,
    }
}

fn custom_spec(tool: Map<String, Value>, namespace: Option<&Value>) -> Result<ToolSpec, Error> {
    let Some(name) = tool.get("name").and_then(Value::as_str) else {
        return Err(invalid("name", "a custom tool needs a name"));
    };
    let description = tool
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut spec = ToolSpec::new(name, description, custom_parameters());
    keep(&mut spec, tool, namespace);
    Ok(spec)
}

/// The JSON Schema of a custom tool as a function: one string, `input`.
fn custom_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {"input": {"type": "string", "description": "The tool's free-form input."}},
        "required": ["input"],
        "additionalProperties": false,
    })
}

/// Tool specs → this wire's tools: functions flat with their kept fields, a
/// custom tool as it came, and each run of specs of one namespace grouped
/// back into it.
pub(crate) fn lower(specs: &[ToolSpec]) -> Vec<Tool> {
    let mut tools: Vec<Tool> = Vec::new();
    // The namespace being gathered, and where it stands in `tools`.
    let mut open: Option<(Value, usize)> = None;
    for spec in specs {
        let mut fields = wire_extra_fields(spec);
        let namespace = fields.remove(NAMESPACE);
        let tool = if fields.get("type").is_some_and(Value::is_string) {
            Tool::Other(fields)
        } else {
            let strict = fields.remove("strict").and_then(|strict| strict.as_bool());
            Tool::Function(FunctionDefinition {
                name: spec.name.clone(),
                description: Some(spec.description.clone()).filter(|text| !text.is_empty()),
                parameters: Some(spec.parameters.clone()),
                strict,
                extra: fields,
            })
        };
        let Some(namespace) = namespace.filter(Value::is_object) else {
            open = None;
            tools.push(tool);
            continue;
        };
        let tool = serde_json::to_value(&tool).unwrap_or_default();
        match &open {
            Some((held, at)) if *held == namespace => {
                if let Tool::Other(group) = &mut tools[*at]
                    && let Some(Value::Array(inner)) = group.get_mut("tools")
                {
                    inner.push(tool);
                }
            }
            _ => {
                let mut group = namespace.as_object().cloned().unwrap_or_default();
                group.insert("tools".into(), Value::Array(vec![tool]));
                open = Some((namespace, tools.len()));
                tools.push(Tool::Other(group));
            }
        }
    }
    tools
}

fn wire_extra_fields(spec: &ToolSpec) -> Map<String, Value> {
    match spec.extra.get(EXTRA_KEY) {
        Some(Value::Object(fields)) => fields.clone(),
        _ => Map::new(),
    }
}

/// A `custom_tool_call` item → a call with arguments `{"input": …}`, the
/// item's other fields kept under [`EXTRA_KEY`].
pub(crate) fn decode_call(mut item: Map<String, Value>, at: &str) -> Result<ToolCall, Error> {
    let mut take = |field: &str| match item.remove(field) {
        Some(Value::String(text)) => Ok(text),
        _ => Err(invalid(
            &format!("{at}.{field}"),
            "a custom tool call needs it, a string",
        )),
    };
    let (call_id, name, input) = (take("call_id")?, take("name")?, take("input")?);
    let mut call = ToolCall::new(call_id, name, json!({ "input": input }));
    wire_extra::keep(&mut call.metadata, EXTRA_KEY, client_id(item));
    Ok(call)
}

/// A `custom_tool_call_output` item → its call id, its output, and its other
/// fields.
pub(crate) fn decode_output(
    mut item: Map<String, Value>,
    at: &str,
) -> Result<(String, super::types::MessageContent, Map<String, Value>), Error> {
    let Some(Value::String(call_id)) = item.remove("call_id") else {
        let message = "a custom tool's output needs it, a string";
        return Err(invalid(&format!("{at}.call_id"), message));
    };
    let output = item.remove("output").unwrap_or_default();
    let output = serde_json::from_value(output)
        .map_err(|error| invalid(&format!("{at}.output"), &error.to_string()))?;
    Ok((call_id, output, client_id(item)))
}

/// An item's fields, its `id` marked as the client's.
fn client_id(mut item: Map<String, Value>) -> Map<String, Value> {
    if let Some(id) = item.remove("id") {
        item.insert(CLIENT_ID.into(), id);
    }
    item
}

/// The input a custom tool's call carries: its `input` argument, or, from a
/// model that wrote something else, its arguments as JSON text.
pub(crate) fn custom_input(arguments: &Value) -> String {
    match arguments.get("input") {
        Some(Value::String(input)) => input.clone(),
        _ => match arguments {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        },
    }
}

/// Whether a call's or result's kept fields mark it as a custom tool's.
pub(crate) fn is_custom(fields: &Map<String, Value>, kind: &str) -> bool {
    fields.get("type").and_then(Value::as_str) == Some(kind)
}

/// What a request's tools were on this wire, by name: which were custom, and
/// which namespace each belongs to.
#[derive(Clone, Debug, Default)]
pub(crate) struct ClientTools {
    by_name: HashMap<String, ClientTool>,
}

/// One of [`ClientTools`].
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ClientTool {
    /// A custom (free-form) tool.
    pub custom: bool,
    /// The namespace's name.
    pub namespace: Option<String>,
}

impl ClientTools {
    /// The custom and namespaced tools among `specs`.
    pub(crate) fn new(specs: &[ToolSpec]) -> Self {
        let mut by_name = HashMap::new();
        for spec in specs {
            let fields = wire_extra_fields(spec);
            let tool = ClientTool {
                custom: fields.get("type").and_then(Value::as_str) == Some("custom"),
                namespace: fields
                    .get(NAMESPACE)
                    .and_then(|namespace| namespace.get("name"))
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            };
            if tool != ClientTool::default() {
                by_name.entry(spec.name.clone()).or_insert(tool);
            }
        }
        ClientTools { by_name }
    }

    /// The tool named `name`, if it was custom or in a namespace.
    pub(crate) fn get(&self, name: &str) -> Option<&ClientTool> {
        self.by_name.get(name)
    }
}

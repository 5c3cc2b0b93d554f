//! What the model is told when a call cannot run or fails: the texts of error
//! results, in one place.

use std::time::Duration;

use serde_json::Value;

use super::registry::ToolSet;
use crate::{InvalidCall, InvalidCallKind, ToolCall, ToolResult};

/// A call of a tool the registry does not have: the available tools are listed.
pub(crate) fn unknown_tool(call: &ToolCall, tools: &ToolSet) -> ToolResult {
    let available: Vec<String> = tools.names().map(|name| format!("`{name}`")).collect();
    let available = if available.is_empty() {
        "No tools are available.".to_owned()
    } else {
        format!("Available tools: {}.", available.join(", "))
    };
    ToolResult::error(
        &call.id,
        &call.name,
        format!("Unknown tool `{}`. {available}", call.name),
    )
}

/// Arguments that do not fit the tool: the problem, then the schema to follow.
pub(crate) fn bad_arguments(
    call_id: &str,
    name: &str,
    problem: &str,
    schema: Option<&Value>,
) -> ToolResult {
    let mut first = problem.chars();
    let mut text: String = first
        .next()
        .map(|c| c.to_uppercase().collect())
        .unwrap_or_default();
    text.push_str(first.as_str());
    text.push('.');
    if let Some(schema) = schema {
        text.push_str(&format!(
            "\nCall `{name}` again with arguments that match its JSON Schema:\n{schema}"
        ));
    }
    ToolResult::error(call_id, name, text)
}

/// A call marked invalid upstream (by a parser or the joiner).
pub(crate) fn invalid(call: &ToolCall, fault: &InvalidCall, tools: &ToolSet) -> ToolResult {
    match fault.kind {
        InvalidCallKind::UnknownTool => unknown_tool(call, tools),
        InvalidCallKind::MalformedArguments | InvalidCallKind::SchemaViolation => bad_arguments(
            &call.id,
            &call.name,
            &fault.message,
            tools.get(&call.name).map(|tool| &tool.spec().parameters),
        ),
        InvalidCallKind::NotAllowed => not_allowed(call),
        InvalidCallKind::Truncated => ToolResult::error(
            &call.id,
            &call.name,
            format!(
                "The call of `{}` was cut off before it was complete ({}). Make the call again.",
                call.name, fault.message
            ),
        ),
    }
}

/// A call the request's `tool_choice` did not allow: not run.
pub(crate) fn not_allowed(call: &ToolCall) -> ToolResult {
    ToolResult::error(
        &call.id,
        &call.name,
        format!(
            "The call of `{}` was not run: tool calls are not allowed now. Answer without it.",
            call.name
        ),
    )
}

/// The tool returned an error.
pub(crate) fn failed(call_id: &str, name: &str, error: &dyn std::fmt::Display) -> ToolResult {
    ToolResult::error(call_id, name, format!("The tool `{name}` failed: {error}"))
}

/// The tool panicked. Its message is not repeated: it may hold secrets.
pub(crate) fn panicked(call_id: &str, name: &str) -> ToolResult {
    ToolResult::error(
        call_id,
        name,
        format!("The tool `{name}` failed unexpectedly."),
    )
}

/// The tool ran out of time.
pub(crate) fn timed_out(call_id: &str, name: &str, limit: Duration) -> ToolResult {
    ToolResult::error(
        call_id,
        name,
        format!(
            "The tool `{name}` did not finish within {} and was stopped.",
            humantime::format_duration(limit)
        ),
    )
}

/// The tool's task was cancelled from outside (the runtime is shutting down).
pub(crate) fn cancelled(call_id: &str, name: &str) -> ToolResult {
    ToolResult::error(
        call_id,
        name,
        format!("The tool `{name}` was cancelled before it finished."),
    )
}

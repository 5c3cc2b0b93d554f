//! The system-prompt section that tells a model without native tool calling
//! which tools it has and how to call them.

use serde_json::{Map, Value};

use super::dialect::Dialect;
use super::transformer::write_example;
use crate::message::{MultimodalMessage, TextMessage};
use crate::{ContentBlock, Message, Role, ToolChoice, ToolSpec};

/// How the section starts: also how an earlier one is found.
pub(crate) const START: &str = "# Tools\n\nYou can call tools to help you answer.";
/// How the section ends.
pub(crate) const END: &str = "Call a tool only when you need it; otherwise answer directly.";

/// The section for `tools`: each tool's name, description, JSON Schema and one
/// example call in `dialect`, then how calls and results go (in words that fit
/// every dialect: the examples show the form).
pub(crate) fn section(tools: &[ToolSpec], choice: Option<&ToolChoice>, dialect: Dialect) -> String {
    let mut text = String::from(START);
    text.push_str(
        " Each tool is listed below with the JSON Schema of its arguments and an example call.\n",
    );
    for tool in tools {
        text.push_str("\n## ");
        text.push_str(&tool.name);
        text.push_str("\n\n");
        if !tool.description.is_empty() {
            text.push_str(tool.description.trim());
            text.push_str("\n\n");
        }
        text.push_str("Arguments (JSON Schema): ");
        text.push_str(&tool.parameters.to_string());
        text.push_str("\n\nExample:\n");
        let arguments = example(&tool.parameters, &tool.parameters, 0);
        write_example(&mut text, &tool.name, &arguments, dialect);
        text.push('\n');
    }
    text.push_str(
        "\n## How to call tools\n\nTo call a tool, write the call exactly as in the examples, \
         with arguments that match its schema; to call several tools, write one call after \
         another. Then stop: the results come back in <tool_response> blocks in the next \
         message.",
    );
    match choice {
        Some(ToolChoice::Required) => text.push_str(" You must call at least one tool now."),
        Some(ToolChoice::Tool(name)) => {
            text.push_str(&format!(" You must call the tool `{name}` now."));
        }
        _ => {}
    }
    text.push(' ');
    text.push_str(END);
    text
}

/// Puts `section`, which runs from `start` to `end`, into the system message
/// — once: a history that holds it already is left alone, an earlier section
/// (from `start` to `end`, or to the text's end) is replaced, and without a system
/// message one is created first. Only the system messages that open the
/// history count: one in the middle of the conversation is left alone. The
/// section goes at the end of the first one's text, the same every turn, so
/// a client's cache breakpoints stay on their blocks and the prompt's prefix
/// stays cacheable.
pub(crate) fn install(messages: &mut Vec<Message>, section: &str, start: &str, end: &str) {
    let mut leading = messages
        .iter_mut()
        .take_while(|message| message.role() == Role::System);
    let system = leading.find_map(|message| match message {
        Message::Text(TextMessage {
            role: Role::System,
            text,
            ..
        }) => Some(text),
        Message::Multimodal(MultimodalMessage {
            role: Role::System,
            content,
            ..
        }) => {
            let holds_section = |b: &ContentBlock| b.as_text().is_some_and(|t| t.contains(start));
            let at = content.iter().position(holds_section).unwrap_or_else(|| {
                content.push(ContentBlock::text(""));
                content.len() - 1
            });
            match &mut content[at] {
                ContentBlock::Text { text, .. } => Some(text),
                _ => None,
            }
        }
        _ => None,
    });
    let Some(text) = system else {
        messages.insert(0, Message::system(section));
        return;
    };
    if let Some(from) = text.find(start) {
        let to = text[from..]
            .find(end)
            .map_or(text.len(), |at| from + at + end.len());
        text.replace_range(from..to, section);
    } else {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(section);
    }
}

/// Example arguments for a schema: its own examples or defaults where it has
/// them, else a plain value of each type; objects list their required
/// properties (all of them when none is required).
fn example(schema: &Value, root: &Value, depth: usize) -> Value {
    let Some(schema) = schema.as_object().filter(|_| depth < 8) else {
        return Value::Null;
    };
    if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
        return resolve(root, target).map_or(Value::Null, |s| example(s, root, depth + 1));
    }
    let given = schema
        .get("examples")
        .and_then(|e| e.as_array()?.first())
        .or_else(|| schema.get("example"))
        .or_else(|| schema.get("default"))
        .or_else(|| schema.get("const"))
        .or_else(|| schema.get("enum")?.as_array()?.first());
    if let Some(value) = given {
        return value.clone();
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = schema.get(key).and_then(|all| all.as_array()?.first()) {
            return example(first, root, depth + 1);
        }
    }
    let kind = match schema.get("type") {
        Some(Value::String(kind)) => kind.as_str(),
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|kind| *kind != "null")
            .unwrap_or("null"),
        _ if schema.contains_key("properties") => "object",
        _ => "string",
    };
    match kind {
        "object" => {
            let empty = Map::new();
            let properties = schema
                .get("properties")
                .and_then(Value::as_object)
                .unwrap_or(&empty);
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|names| names.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            properties
                .iter()
                .filter(|(name, _)| required.is_empty() || required.contains(&name.as_str()))
                .map(|(name, property)| (name.clone(), example(property, root, depth + 1)))
                .collect::<Map<_, _>>()
                .into()
        }
        "array" => {
            let item = schema
                .get("items")
                .map_or(Value::Null, |items| example(items, root, depth + 1));
            Value::Array(vec![item])
        }
        "integer" => schema.get("minimum").cloned().unwrap_or(Value::from(1)),
        "number" => schema.get("minimum").cloned().unwrap_or(Value::from(1.5)),
        "boolean" => Value::Bool(true),
        "null" => Value::Null,
        _ => Value::from("text"),
    }
}

/// A local reference (`#/$defs/Name`) in the root schema.
fn resolve<'a>(root: &'a Value, target: &str) -> Option<&'a Value> {
    root.pointer(target.strip_prefix('#')?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolCall;
    use crate::natural::NaturalToolUseParser;
    use serde_json::json;

    #[test]
    fn examples_follow_the_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1},
                "at": {"$ref": "#/$defs/Point"},
                "optional": {"type": "boolean"}
            },
            "required": ["city", "unit", "days", "at"],
            "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}}
        });
        assert_eq!(
            example(&schema, &schema, 0),
            json!({"city": "text", "unit": "celsius", "days": 1, "at": {"x": 1.5}})
        );
    }

    /// Each family's own reply parser reads the example the prompt shows it.
    #[test]
    fn each_family_reads_its_example_call() {
        let schema = json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city", "days"]
        });
        let tools = [ToolSpec::new("get_weather", "Forecast.", schema)];
        for model in [
            "Qwen/Qwen2.5-7B-Instruct",
            "mistralai/Magistral-Small-2509",
            "meta-llama/Llama-3.1-8B-Instruct",
            "meta-llama/Llama-4-Scout-17B-16E-Instruct",
            "moonshotai/Kimi-K2-Instruct-0905",
            "deepseek-ai/DeepSeek-V3.1",
            "zai-org/GLM-4.5",
            "openai/gpt-oss-120b",
            "MiniMaxAI/MiniMax-M2",
            "ibm-granite/granite-3.3-8b-instruct",
            "HuggingFaceTB/SmolLM2-135M-Instruct",
        ] {
            let text = section(&tools, None, Dialect::for_model(model).rendered_as());
            let (_, rest) = text.split_once("Example:\n").unwrap();
            let (example, _) = rest.split_once("\n\n## How").unwrap();
            let read = NaturalToolUseParser::new()
                .dialect(Dialect::for_model(model))
                .parse(example, &tools)
                .unwrap();
            // Kimi K2 keeps the id its form writes; the others number calls.
            let id = match Dialect::for_model(model) {
                Dialect::KimiK2 => "functions.get_weather:0",
                _ => "call_1",
            };
            let call = ToolCall::new(id, "get_weather", json!({"city": "text", "days": 1}));
            assert_eq!(
                read,
                vec![Message::tool_calls(vec![call])],
                "{model}: {example}"
            );
        }
    }

    #[test]
    fn the_section_is_installed_once_and_replaced_when_tools_change() {
        let tools = [ToolSpec::new("add", "Adds.", json!({"type": "object"}))];
        let first = section(&tools, None, Dialect::Tagged);
        let mut messages = vec![Message::system("Be brief."), Message::user("hi")];
        install(&mut messages, &first, START, END);
        let once = messages.clone();
        install(&mut messages, &first, START, END);
        assert_eq!(messages, once);
        assert_eq!(
            messages[0].as_text().unwrap(),
            format!("Be brief.\n\n{first}")
        );

        let second = section(&tools, Some(&ToolChoice::Required), Dialect::Hermes);
        install(&mut messages, &second, START, END);
        assert_eq!(
            messages[0].as_text().unwrap(),
            format!("Be brief.\n\n{second}")
        );

        let logo = ContentBlock::image_url("https://example.com/logo.png");
        let mut multimodal = vec![Message::multimodal(
            Role::System,
            vec![ContentBlock::text("Brand:"), logo.clone()],
        )];
        install(&mut multimodal, &first, START, END);
        install(&mut multimodal, &first, START, END);
        assert_eq!(
            multimodal[0],
            Message::multimodal(
                Role::System,
                vec![
                    ContentBlock::text("Brand:"),
                    logo,
                    ContentBlock::text(first.clone())
                ]
            )
        );

        let mut bare = vec![Message::user("hi")];
        install(&mut bare, &first, START, END);
        assert_eq!(bare[0], Message::system(first.clone()));

        let mut late = vec![Message::user("hi"), Message::system("Now be terse.")];
        install(&mut late, &first, START, END);
        assert_eq!(
            late,
            vec![
                Message::system(first.clone()),
                Message::user("hi"),
                Message::system("Now be terse.")
            ],
            "a system message mid-conversation is not the prompt's start"
        );
    }
}

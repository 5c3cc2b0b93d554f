//! Tools and the registry: generated schemas, dynamic tools, duplicate names, and
//! what a tool may return.

#![cfg(feature = "function")]

use std::convert::Infallible;

use lmstack::function::{
    CallContext, Json, MediaPolicy, Tool, ToolError, ToolOutput, ToolRegistry,
};
use lmstack::{ContentBlock, Error, ToolResult};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Where to look.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Search {
    /// Words to look for.
    query: String,
    /// How many hits, at most.
    limit: Option<u32>,
    /// Where to search.
    scope: Scope,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
enum Scope {
    Web,
    News,
}

fn ok_tool(name: &str) -> Tool {
    Tool::dynamic(name, "", json!({"type": "object"}), |_| async {
        Ok::<_, Infallible>("ok")
    })
}

#[test]
fn a_typed_tool_has_a_schema_generated_from_its_argument_type() {
    let tool = Tool::typed("search", "Searches", |_: Search| async {
        Ok::<_, Infallible>("")
    });
    let schema = &tool.spec().parameters;
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["required"], json!(["query", "scope"]));
    assert_eq!(
        schema["properties"]["query"]["description"],
        "Words to look for."
    );
    // Subschemas are inlined: providers such as Gemini refuse `$ref`.
    assert_eq!(
        schema["properties"]["scope"]["enum"],
        json!(["web", "news"])
    );
    assert!(!schema.to_string().contains("$ref"), "{schema}");
    assert!(schema.get("$schema").is_none() && schema.get("title").is_none());
    assert_eq!(tool.spec().description, "Searches");
}

#[tokio::test]
async fn a_typed_tool_reports_arguments_it_cannot_read() {
    let tool = Tool::typed("search", "", |args: Search| async move {
        Ok::<_, Infallible>(args.query)
    });
    let output = tool
        .call(
            json!({"query": "rust", "scope": "web"}),
            CallContext::new("c"),
        )
        .await
        .unwrap();
    assert_eq!(output, ToolOutput::text("rust"));
    let error = tool
        .call(json!({"query": 3}), CallContext::new("c"))
        .await
        .unwrap_err();
    assert!(matches!(error, ToolError::Arguments(_)), "{error:?}");
}

#[tokio::test]
async fn a_dynamic_tool_gets_the_raw_arguments() {
    let tool = Tool::dynamic(
        "echo",
        "Echoes",
        json!({"type": "object"}),
        |args: Value| async move { Ok::<_, Infallible>(args) },
    );
    let output = tool
        .call(json!({"x": [1, 2]}), CallContext::new("c"))
        .await
        .unwrap();
    assert_eq!(output, ToolOutput::text(r#"{"x":[1,2]}"#));
}

/// `a + b`; fails on an overflow.
#[derive(Deserialize, JsonSchema)]
struct Add {
    a: i8,
    b: i8,
}

#[tokio::test]
async fn a_tool_returns_its_output_as_it_is_or_a_result_of_it() {
    let call =
        |tool: Tool, args: Value| async move { tool.call(args, CallContext::new("c")).await };
    // Cannot fail: the output as it is, from every constructor.
    let plain = Tool::typed("add", "", |args: Add| async move {
        (i16::from(args.a) + i16::from(args.b)).to_string()
    });
    let output = call(plain, json!({"a": 2, "b": 3})).await.unwrap();
    assert_eq!(output, ToolOutput::text("5"));
    let echo = Tool::dynamic("echo", "", json!({"type": "object"}), |args| async { args });
    let output = call(echo, json!({"x": 1})).await.unwrap();
    assert_eq!(output, ToolOutput::text(r#"{"x":1}"#));
    let spec = lmstack::ToolSpec::new("id", "", json!({"type": "object"}));
    let id = Tool::new(spec, |_, context: CallContext| async move {
        Json(context.call_id().to_owned())
    });
    assert_eq!(
        call(id, json!({})).await.unwrap(),
        ToolOutput::text(r#""c""#)
    );

    // Can fail: a Result, whose error is the tool's failure.
    let checked = Tool::typed("add", "", |args: Add| async move {
        args.a
            .checked_add(args.b)
            .map(|sum| sum.to_string())
            .ok_or("the sum does not fit an i8")
    });
    let output = call(checked.clone(), json!({"a": 2, "b": 3}))
        .await
        .unwrap();
    assert_eq!(output, ToolOutput::text("5"));
    let error = call(checked, json!({"a": 100, "b": 100}))
        .await
        .unwrap_err();
    assert!(matches!(error, ToolError::Failed(_)), "{error:?}");
    assert_eq!(error.to_string(), "the sum does not fit an i8");
}

#[test]
fn duplicate_names_are_rejected_when_the_registry_is_built() {
    let error = ToolRegistry::new([ok_tool("add"), ok_tool("sub"), ok_tool("Add")]).unwrap_err();
    assert!(
        matches!(&error, Error::DuplicateTool { name } if name == "Add"),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "tool registry: two tools are named `Add`"
    );
}

#[test]
fn an_invalid_schema_is_rejected_when_the_registry_is_built() {
    let broken = Tool::dynamic(
        "broken",
        "",
        json!({"type": "object", "properties": {"a": {"type": "integr"}}}),
        |_| async { Ok::<_, Infallible>("") },
    );
    let error = ToolRegistry::new([broken]).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("tool registry: the schema of `broken` is not a valid JSON Schema"),
        "{error}"
    );
}

#[test]
fn the_registry_finds_tools_by_name_ignoring_case() {
    let registry = ToolRegistry::new([ok_tool("get_weather"), ok_tool("add")])
        .unwrap()
        .tools();
    assert_eq!(registry.len(), 2);
    assert_eq!(registry.get("GET_WEATHER").unwrap().name(), "get_weather");
    assert!(registry.get("weather").is_none());
    assert_eq!(
        registry
            .specs()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
        ["get_weather", "add"]
    );
}

#[derive(Serialize)]
struct Forecast {
    city: &'static str,
    celsius: i32,
}

#[test]
fn tools_return_text_json_or_content_blocks() {
    let policy = MediaPolicy::new();
    let result = |output: ToolOutput| output.into_result("c1", "t", &policy);

    assert_eq!(result("18°C".into()), ToolResult::text("c1", "t", "18°C"));
    assert_eq!(
        result(
            Json(Forecast {
                city: "Paris",
                celsius: 18
            })
            .into()
        ),
        ToolResult::text("c1", "t", r#"{"city":"Paris","celsius":18}"#)
    );
    assert_eq!(
        result(json!({"ok": true}).into()),
        ToolResult::text("c1", "t", r#"{"ok":true}"#)
    );
    let blocks = vec![
        ContentBlock::text("see"),
        ContentBlock::image_url("https://example.com/a.png"),
    ];
    assert_eq!(
        result(blocks.clone().into()),
        ToolResult::new("c1", "t", blocks)
    );
    let error = result(ToolOutput::error("no such city"));
    assert!(error.is_error);
    assert_eq!(error.text_content(), "no such city");
}

//! The NaturalToolUse layer: a text-only model (played by `ScriptedModel`) uses
//! tools through two rounds of the tool loop.

#![cfg(feature = "function")]

use std::convert::Infallible;

use lmstack::function::{FunctionCallLayer, Tool, ToolLoopLayer, ToolOutput, ToolRegistry};
use lmstack::natural::{Dialect, NaturalToolUse};
use lmstack::testing::{Chunking, ScriptedModel, collect_both};
use lmstack::{
    ChatRequest, ContentBlock, Message, Role, ToolCall, ToolChoice, ToolResult, ToolSpec,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tower::{Layer, ServiceBuilder, ServiceExt};

#[derive(Deserialize, JsonSchema)]
struct Add {
    a: i64,
    b: i64,
}

fn add() -> Tool {
    Tool::typed("add", "Adds two integers", |args: Add| async move {
        Ok::<_, Infallible>((args.a + args.b).to_string())
    })
}

fn snapshot() -> Tool {
    Tool::dynamic(
        "snapshot",
        "Takes a picture",
        json!({"type": "object", "properties": {}}),
        |_| async {
            let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
            Ok::<_, Infallible>(
                ToolOutput::text("Here it is.").with(ToolOutput::media(png, "image/png")),
            )
        },
    )
}

const ROUND_ONE: &str =
    "I'll add them.\n<tool_call name=\"add\">\n{\"a\": 2, \"b\": 3}\n</tool_call>";
const ROUND_TWO: &str = "Now a picture.\n<tool_call name=\"snapshot\">\n{}\n</tool_call>";

fn model(chunking: Chunking) -> ScriptedModel {
    ScriptedModel::new()
        .chunking(chunking)
        .reply(ROUND_ONE)
        .reply(ROUND_TWO)
        .reply("2 + 3 = 5, and the picture shows a square.")
}

fn stack(
    model: ScriptedModel,
) -> impl tower::Service<ChatRequest, Response = lmstack::Reply, Error = lmstack::Error> {
    ServiceBuilder::new()
        .layer(ToolLoopLayer::new())
        .layer(FunctionCallLayer::new(
            ToolRegistry::new([add(), snapshot()]).unwrap(),
        ))
        .layer(NaturalToolUse::new())
        .service(model)
}

fn question() -> ChatRequest {
    ChatRequest::new(vec![
        Message::system("Be brief."),
        Message::user("What is 2 + 3? Then show me a picture."),
    ])
}

#[tokio::test]
async fn a_text_only_model_uses_tools_over_two_rounds_in_both_modes() {
    for chunking in [
        Chunking::Whole,
        Chunking::Bytes(1),
        Chunking::Random { seed: 11, max: 9 },
    ] {
        let (whole, streamed) = collect_both(|| stack(model(chunking)), question())
            .await
            .unwrap();
        assert_eq!(whole, streamed, "{chunking:?}");
        let aggregates: Vec<&Message> = whole
            .iter()
            .filter(|m| matches!(m, Message::ToolAggregate(_)))
            .collect();
        assert_eq!(aggregates.len(), 2, "{whole:#?}");
        assert_eq!(
            aggregates[0].calls(),
            [ToolCall::new("call_1", "add", json!({"a": 2, "b": 3}))]
        );
        assert_eq!(aggregates[0].results()[0].text_content(), "5");
        assert_eq!(aggregates[1].calls()[0].id, "call_2");
        assert_eq!(
            whole.last(),
            Some(&Message::assistant(
                "2 + 3 = 5, and the picture shows a square."
            ))
        );
    }
}

#[tokio::test]
async fn the_model_sees_text_and_one_tools_section() {
    let model = model(Chunking::Whole);
    stack(model.clone())
        .oneshot(question())
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    for request in &requests {
        assert!(request.options.tools.is_empty());
        assert_eq!(request.options.tool_choice, None);
        let system = request.messages[0].as_text().unwrap();
        assert!(system.starts_with("Be brief.\n\n# Tools\n\n"), "{system}");
        assert_eq!(system.matches("# Tools").count(), 1);
        assert!(system.contains("## add\n\nAdds two integers\n\nArguments (JSON Schema): {"));
        assert!(system.contains(
            "Example:\n<tool_call name=\"add\">\n{\n  \"a\": 1,\n  \"b\": 1\n}\n</tool_call>"
        ));
    }

    // Round three: the whole history as text, roles alternating.
    let third = &requests[2].messages;
    let roles: Vec<Role> = third.iter().map(Message::role).collect();
    use Role::*;
    assert_eq!(roles, [System, User, Assistant, User, Assistant, User]);
    assert_eq!(
        third[2],
        Message::assistant(
            "I'll add them.\n<tool_call name=\"add\" id=\"call_1\">\n{\n  \"a\": 2,\n  \"b\": 3\n}\n</tool_call>"
        )
    );
    assert_eq!(
        third[3],
        Message::user("<tool_response name=\"add\" id=\"call_1\">\n5\n</tool_response>")
    );
    assert_eq!(
        third[4],
        Message::assistant(
            "Now a picture.\n<tool_call name=\"snapshot\" id=\"call_2\">\n{}\n</tool_call>"
        )
    );
    // The picture reaches the model as an image block of the user message.
    let Message::Multimodal(results) = &third[5] else {
        panic!("expected a multimodal message: {:?}", third[5]);
    };
    assert_eq!(results.role, User);
    assert_eq!(
        results.content[0],
        ContentBlock::text(
            "<tool_response name=\"snapshot\" id=\"call_2\">\nHere it is.\n[image 1: image/png]\n"
        )
    );
    assert!(matches!(results.content[1], ContentBlock::Image(_)));
    assert_eq!(results.content[2], ContentBlock::text("</tool_response>"));
}

#[tokio::test]
async fn a_stored_history_that_holds_the_section_does_not_get_it_twice() {
    let model = ScriptedModel::new().reply("hi").reply("hi again");
    let layer = NaturalToolUse::new().dialect(Dialect::Hermes);
    let tool = ToolSpec::new("add", "Adds", json!({"type": "object"}));
    let first = ChatRequest::new(vec![Message::user("hi")]).tool(tool.clone());
    layer.layer(model.clone()).oneshot(first).await.unwrap();
    // The caller stores what the model saw and sends it again with a changed tool.
    let mut stored = model.requests()[0].messages.clone();
    stored.push(Message::assistant("hi"));
    stored.push(Message::user("again"));
    let changed = ToolSpec::new("add", "Adds two numbers", json!({"type": "object"}));
    let second = ChatRequest::new(stored).tool(changed);
    layer.layer(model.clone()).oneshot(second).await.unwrap();
    let system = model.requests()[1].messages[0]
        .as_text()
        .unwrap()
        .to_owned();
    assert_eq!(system.matches("# Tools").count(), 1, "{system}");
    assert!(system.contains("Adds two numbers"));
    assert!(system.contains("<tool_call>\n{\"name\": \"add\", \"arguments\": {}}\n</tool_call>"));
}

#[tokio::test]
async fn tool_choice_becomes_a_sentence_or_removes_the_section() {
    let tool = ToolSpec::new("add", "Adds", json!({"type": "object"}));
    let run = |choice: ToolChoice| {
        let tool = tool.clone();
        async move {
            let model = ScriptedModel::new().reply("ok");
            let mut request = ChatRequest::new(vec![Message::user("hi")]).tool(tool);
            request.options.tool_choice = Some(choice);
            NaturalToolUse::new()
                .layer(model.clone())
                .oneshot(request)
                .await
                .unwrap();
            model.requests().remove(0)
        }
    };
    let required = run(ToolChoice::Required).await;
    assert!(
        required.messages[0]
            .as_text()
            .unwrap()
            .contains("You must call at least one tool now.")
    );
    let named = run(ToolChoice::Tool("add".into())).await;
    assert!(
        named.messages[0]
            .as_text()
            .unwrap()
            .contains("You must call the tool `add` now.")
    );
    let none = run(ToolChoice::None).await;
    assert_eq!(none.messages, vec![Message::user("hi")]);
    assert_eq!(none.options.tool_choice, None);
}

#[tokio::test]
async fn a_result_without_its_call_fails_the_request_before_the_model() {
    let model = ScriptedModel::new().reply("never");
    let request = ChatRequest::new(vec![
        Message::user("hi"),
        Message::tool_results(vec![ToolResult::text("call_404", "add", "5")]),
    ]);
    let error = NaturalToolUse::new()
        .layer(model.clone())
        .oneshot(request)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, lmstack::Error::ToolPairing { message: 1, call_id, .. } if call_id == "call_404"),
        "{error}"
    );
    assert!(model.requests().is_empty());
}

/// `for_model`: each family is prompted in its own call form (the example in
/// the system prompt) and answered in it, through the whole tool loop.
#[tokio::test]
async fn for_model_prompts_in_the_written_form_and_reads_each_family_reply() {
    let add_call = r#"{"a": 2, "b": 3}"#;
    let example = r#"{"a": 1, "b": 1}"#;
    let families = [
        (
            "Qwen/Qwen2.5-7B-Instruct",
            format!("<tool_call>\n{{\"name\": \"add\", \"arguments\": {example}}}\n</tool_call>"),
            format!("<tool_call>\n{{\"name\": \"add\", \"arguments\": {add_call}}}\n</tool_call>"),
        ),
        (
            "mistralai/Devstral-Small-2507",
            format!("[TOOL_CALLS]add[ARGS]{example}"),
            format!("[TOOL_CALLS]add[ARGS]{add_call}"),
        ),
        (
            "meta-llama/Llama-3.3-70B-Instruct",
            format!("{{\"name\": \"add\", \"parameters\": {example}}}"),
            format!("{{\"name\": \"add\", \"parameters\": {add_call}}}"),
        ),
        (
            "meta-llama/Llama-4-Scout-17B-16E-Instruct",
            "[add(a=1, b=1)]".to_owned(),
            "[add(a=2, b=3)]".to_owned(),
        ),
        (
            "moonshotai/Kimi-K2-Instruct",
            format!("<|tool_calls_section_begin|><|tool_call_begin|>functions.add:0<|tool_call_argument_begin|>{example}<|tool_call_end|><|tool_calls_section_end|>"),
            format!("<|tool_calls_section_begin|><|tool_call_begin|>functions.add:0<|tool_call_argument_begin|>{add_call}<|tool_call_end|><|tool_calls_section_end|>"),
        ),
        (
            "deepseek-ai/DeepSeek-V3.1",
            format!("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>add<｜tool▁sep｜>{example}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"),
            format!("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>add<｜tool▁sep｜>{add_call}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"),
        ),
        (
            "openai/gpt-oss-20b",
            format!("<|start|>assistant<|channel|>commentary to=functions.add <|constrain|>json<|message|>{example}<|call|>"),
            format!("<|channel|>analysis<|message|>Add them.<|end|><|start|>assistant<|channel|>commentary to=functions.add <|constrain|>json<|message|>{add_call}<|call|>"),
        ),
        (
            "zai-org/GLM-4.6",
            "<tool_call>add\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n<arg_key>b</arg_key>\n<arg_value>1</arg_value>\n</tool_call>".to_owned(),
            "<tool_call>add\n<arg_key>a</arg_key>\n<arg_value>2</arg_value>\n<arg_key>b</arg_key>\n<arg_value>3</arg_value>\n</tool_call>".to_owned(),
        ),
        (
            "MiniMaxAI/MiniMax-M2",
            "<minimax:tool_call>\n<invoke name=\"add\">\n<parameter name=\"a\">1</parameter>\n<parameter name=\"b\">1</parameter>\n</invoke>\n</minimax:tool_call>".to_owned(),
            "<minimax:tool_call>\n<invoke name=\"add\">\n<parameter name=\"a\">2</parameter>\n<parameter name=\"b\">3</parameter>\n</invoke>\n</minimax:tool_call>".to_owned(),
        ),
        (
            "ibm-granite/granite-3.3-8b-instruct",
            format!("<|tool_call|>[{{\"name\": \"add\", \"arguments\": {example}}}]"),
            format!("<|tool_call|>[{{\"name\": \"add\", \"arguments\": {add_call}}}]"),
        ),
        (
            "HuggingFaceTB/SmolLM2-135M-Instruct",
            "<tool_call name=\"add\">\n{\n  \"a\": 1,\n  \"b\": 1\n}\n</tool_call>".to_owned(),
            format!("<tool_call name=\"add\">\n{add_call}\n</tool_call>"),
        ),
    ];
    for (name, example, reply) in families {
        let model = ScriptedModel::new().reply(reply.as_str()).reply("5.");
        let stack = ServiceBuilder::new()
            .layer(ToolLoopLayer::new())
            .layer(FunctionCallLayer::new(ToolRegistry::new([add()]).unwrap()))
            .layer(NaturalToolUse::for_model(name))
            .service(model.clone());
        let messages = stack
            .oneshot(question())
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert_eq!(messages.last(), Some(&Message::assistant("5.")), "{name}");
        let sent = model.requests();
        let system = sent[0].messages[0].as_text().unwrap();
        assert!(
            system.contains(&format!("Example:\n{example}\n")),
            "{name}: {system}"
        );
        let answered = sent[1]
            .messages
            .iter()
            .filter_map(Message::as_text)
            .any(|t| t.contains('5'));
        assert!(
            answered,
            "{name}: the result went back: {:?}",
            sent[1].messages
        );
    }
}

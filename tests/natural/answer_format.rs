//! Structured output through the NaturalToolUse layer: the format in the
//! system prompt, and the JSON read out of an answer the model wrapped, the
//! same in both modes.

use lmstack::natural::NaturalToolUse;
use lmstack::testing::{Chunking, ScriptedModel, assert_modes_agree};
use lmstack::{ChatRequest, Error, Message, ResponseFormat, ToolCall, ToolSpec};
use serde_json::json;
use tower::Layer;

fn request(format: ResponseFormat) -> ChatRequest {
    let mut request = ChatRequest::new(vec![Message::user("Give me a.")]);
    request.options.response_format = Some(format);
    request
}

fn schema() -> ResponseFormat {
    ResponseFormat::json_schema(json!({
        "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]
    }))
}

/// The messages and error of `reply` through `layer`, both modes agreeing,
/// with the requests the model saw.
async fn answer(
    layer: NaturalToolUse,
    reply: &str,
    request: ChatRequest,
) -> (Vec<Message>, Option<Error>, Vec<ChatRequest>) {
    let model = ScriptedModel::new();
    let make = |chunking: Chunking| {
        let model = model.clone().chunking(chunking).reply(reply);
        layer.layer(model)
    };
    let (messages, error) = assert_modes_agree(make, request).await;
    (messages, error, model.requests())
}

#[tokio::test]
async fn the_prompt_holds_the_schema_and_the_format_is_sent_on() {
    let (_, _, sent) = answer(NaturalToolUse::new(), "{\"a\": 1}", request(schema())).await;
    let system = sent[0].messages[0].as_text().unwrap();
    assert!(system.starts_with("# Response format"), "{system}");
    let pretty = serde_json::to_string_pretty(schema().schema().unwrap()).unwrap();
    assert!(system.contains(&pretty), "{system}");
    assert_eq!(sent[0].options.response_format, Some(schema()));
}

#[tokio::test]
async fn a_fenced_answer_is_its_json_in_both_modes() {
    let reply = "Here it is:\n```json\n{\"a\":1}\n```";
    for layer in [
        NaturalToolUse::new(),
        NaturalToolUse::new().native_response_format(false),
    ] {
        let (messages, error, _) = answer(layer, reply, request(schema())).await;
        assert!(error.is_none(), "{error:?}");
        assert_eq!(messages, vec![Message::assistant("{\"a\":1}")]);
    }
}

#[tokio::test]
async fn an_answer_without_json_is_left_as_it_is_or_checked_here() {
    let reply = "I would rather not.";
    let (messages, error, _) = answer(NaturalToolUse::new(), reply, request(schema())).await;
    assert_eq!(messages, vec![Message::assistant(reply)]);
    assert!(
        error.is_none(),
        "the provider's check reports it: {error:?}"
    );

    let layer = NaturalToolUse::new().native_response_format(false);
    let (messages, error, sent) = answer(layer, reply, request(schema())).await;
    assert_eq!(messages, vec![Message::assistant(reply)]);
    assert!(
        matches!(error, Some(Error::InvalidOutput { .. })),
        "{error:?}"
    );
    assert_eq!(sent[0].options.response_format, None);
}

#[tokio::test]
async fn with_tools_in_the_prompt_a_call_is_no_answer_and_the_format_stays_here() {
    let mut request = request(schema());
    request.options.tools = vec![ToolSpec::new("add", "Adds.", json!({"type": "object"}))];
    let reply = "<tool_call name=\"add\">\n{\"x\": 1}\n</tool_call>";
    let (messages, error, sent) = answer(NaturalToolUse::new(), reply, request).await;
    assert!(error.is_none(), "{error:?}");
    let call = ToolCall::new("call_1", "add", json!({"x": 1}));
    assert_eq!(messages, vec![Message::tool_calls(vec![call])]);
    assert_eq!(sent[0].options.response_format, None);
    let system = sent[0].messages[0].as_text().unwrap();
    let (tools, format) = (
        system.find("# Tools").unwrap(),
        system.find("# Response format"),
    );
    assert!(format.is_some_and(|format| format > tools), "{system}");
}

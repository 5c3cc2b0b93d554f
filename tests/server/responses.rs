//! `POST /v1/responses` through the gateway over HTTP on loopback: Codex CLI's
//! real turns served by an OpenAI Chat and an Anthropic upstream (the
//! upstream receives the tool result, an image in it in its own shape),
//! Anthropic's signed thinking carried through a Responses client and back,
//! and `previous_response_id` continuing a conversation the gateway kept.

#![cfg(all(
    feature = "server",
    feature = "openai",
    feature = "anthropic",
    feature = "openai-responses"
))]

use crate::common;

use common::server::{Answer, Server};
use common::{body_objects, sse, typed_sse};
use lmstack::provider::anthropic::{Anthropic, AnthropicConfig};
use lmstack::provider::openai_chat::{OpenAi, OpenAiConfig};
use lmstack::server::Gateway;
use serde_json::{Value, json};

const CODEX_EXEC: &str = include_str!("../fixtures/openai_responses/codex/exec_command.json");
const CODEX_IMAGE: &str = include_str!("../fixtures/openai_responses/codex/view_image.json");
const WHOLE: &[usize] = &[1 << 20];

/// A gateway serving model `gpt-test` from `upstream` (`openai` or
/// `anthropic`), and its base URL.
async fn gateway(kind: &str, upstream: &Server) -> String {
    let base = upstream.base_url();
    let gateway = match kind {
        "openai" => {
            let provider = OpenAi::new(OpenAiConfig::new(&base).model("m")).unwrap();
            Gateway::new().model("gpt-test", kind, provider, 4)
        }
        _ => {
            let provider = Anthropic::new(AnthropicConfig::new(&base).model("m")).unwrap();
            Gateway::new().model("gpt-test", kind, provider, 4)
        }
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, gateway.router()).await });
    format!("http://{address}")
}

async fn post(base: &str, body: &Value) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(format!("{base}/v1/responses"))
        .header("content-type", "application/json")
        .header("authorization", "Bearer k")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

fn codex(fixture: &str) -> Vec<Value> {
    serde_json::from_str(fixture).unwrap()
}

fn chat_call(name: &str, arguments: &str) -> Vec<u8> {
    sse(&[
        json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [
                   {"index": 0, "id": "call_1", "type": "function",
                    "function": {"name": name, "arguments": arguments}}]}, "finish_reason": null}]}),
        json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ])
}

fn chat_text(text: &str) -> Vec<u8> {
    sse(&[
        json!({"id": "c2", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": null}]}),
        json!({"id": "c2", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}),
    ])
}

fn anthropic_events(blocks: &[Value], stop: &str) -> Vec<u8> {
    let mut events = vec![
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
        "role": "assistant", "model": "m", "content": [], "stop_reason": null,
        "usage": {"input_tokens": 5, "output_tokens": 1}}}),
    ];
    for (index, block) in blocks.iter().enumerate() {
        let (start, deltas) = match block["type"].as_str().unwrap() {
            "thinking" => (
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                vec![
                    json!({"type": "thinking_delta", "thinking": block["thinking"]}),
                    json!({"type": "signature_delta", "signature": block["signature"]}),
                ],
            ),
            "tool_use" => (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                vec![
                    json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
                ],
            ),
            _ => (
                json!({"type": "text", "text": ""}),
                vec![json!({"type": "text_delta", "text": block["text"]})],
            ),
        };
        events.push(json!({"type": "content_block_start", "index": index, "content_block": start}));
        for delta in deltas {
            events.push(json!({"type": "content_block_delta", "index": index, "delta": delta}));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
    }
    events.push(json!({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 9}}));
    events.push(json!({"type": "message_stop"}));
    typed_sse(&events)
}

/// The `response.completed` response of a stream.
fn completed(body: &str) -> Value {
    let events = body_objects(body);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "response.completed", "{body}");
    last["response"].clone()
}

#[tokio::test]
async fn codexs_turns_run_on_an_openai_chat_upstream() {
    let upstream = Server::start(vec![
        Answer::ok(
            "text/event-stream",
            &chat_call("exec_command", r#"{"cmd": "cat secret.txt"}"#),
            WHOLE,
        ),
        Answer::ok(
            "text/event-stream",
            &chat_text("The file says hello."),
            WHOLE,
        ),
    ])
    .await;
    let base = gateway("openai", &upstream).await;
    let turns = codex(CODEX_EXEC);
    let (status, body) = post(&base, &turns[0]).await;
    assert_eq!(status, 200, "{body}");
    let response = completed(&body);
    let call = &response["output"][0];
    assert_eq!(
        (
            call["type"].as_str(),
            call["call_id"].as_str(),
            call["name"].as_str()
        ),
        (Some("function_call"), Some("call_1"), Some("exec_command"))
    );
    let (status, body) = post(&base, &turns[1]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        completed(&body)["output"][0]["content"][0]["text"],
        "The file says hello."
    );
    let requests = upstream.requests();
    let messages = requests[1].1["messages"].as_array().unwrap();
    let result = messages.last().unwrap();
    assert_eq!(result["role"], "tool");
    assert_eq!(result["tool_call_id"], "call_1");
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("hello from the secret file")
    );
    assert_eq!(messages[0]["role"], "developer");
    let tools = requests[0].1["tools"].as_array().unwrap();
    assert!(
        tools
            .iter()
            .any(|tool| tool["function"]["name"] == "close_agent"),
        "namespaced functions offered"
    );
}

#[tokio::test]
async fn a_viewed_image_reaches_each_upstream_in_its_own_shape() {
    let turns = codex(CODEX_IMAGE);
    for kind in ["openai", "anthropic"] {
        let answer = match kind {
            "openai" => chat_text("It is red."),
            _ => anthropic_events(&[json!({"type": "text", "text": "It is red."})], "end_turn"),
        };
        let upstream = Server::start(vec![Answer::ok("text/event-stream", &answer, WHOLE)]).await;
        let base = gateway(kind, &upstream).await;
        let (status, body) = post(&base, &turns[1]).await;
        assert_eq!(status, 200, "{kind}: {body}");
        let sent = upstream.requests()[0].1.to_string();
        let sent: Value = serde_json::from_str(&sent).unwrap();
        let messages = sent["messages"].as_array().unwrap();
        let data = "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEElEQVR4nGP4z8AARwzEcQCukw/x0F8jngAAAABJRU5ErkJggg==";
        match kind {
            "openai" => {
                let tool = messages.iter().find(|m| m["role"] == "tool").unwrap();
                assert!(
                    !tool["content"].to_string().contains(data),
                    "no base64 in text"
                );
                let injected = messages.last().unwrap();
                assert_eq!(injected["role"], "user");
                let url = injected["content"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|part| part["type"] == "image_url")
                    .unwrap()["image_url"]["url"]
                    .clone();
                assert_eq!(url, format!("data:image/png;base64,{data}"));
            }
            _ => {
                let result = messages
                    .iter()
                    .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
                    .find(|block| block["type"] == "tool_result")
                    .unwrap();
                assert_eq!(result["tool_use_id"], "call_1");
                let image = &result["content"][0];
                assert_eq!(image["type"], "image");
                assert_eq!(image["source"]["data"], data);
            }
        }
    }
}

#[tokio::test]
async fn signed_anthropic_thinking_survives_a_round_trip_through_a_responses_client() {
    let upstream = Server::start(vec![
        Answer::ok("text/event-stream", &anthropic_events(&[
            json!({"type": "thinking", "thinking": "2 + 3 is 5.", "signature": "EqQBsig=="}),
            json!({"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2, "b": 3}}),
        ], "tool_use"), WHOLE),
        Answer::ok("text/event-stream", &anthropic_events(&[json!({"type": "text", "text": "5."})], "end_turn"), WHOLE),
    ])
    .await;
    let base = gateway("anthropic", &upstream).await;
    let tools = json!([{"type": "function", "name": "add", "parameters": {"type": "object"}}]);
    let first = json!({"model": "gpt-test", "input": "What is 2 + 3?", "tools": tools, "store": false,
                       "include": ["reasoning.encrypted_content"]});
    let (status, body) = post(&base, &first).await;
    assert_eq!(status, 200, "{body}");
    let output = body_objects(&body)[0]["output"].as_array().unwrap().clone();
    assert_eq!(output[0]["type"], "reasoning");
    assert_eq!(output[0]["summary"][0]["text"], "2 + 3 is 5.");
    assert_eq!(output[1]["type"], "function_call");
    let mut input = vec![json!({"role": "user", "content": "What is 2 + 3?"})];
    input.extend(output);
    input.push(
        json!({"type": "function_call_output", "call_id": input[2]["call_id"], "output": "5"}),
    );
    let second = json!({"model": "gpt-test", "input": input, "tools": tools, "store": false, "stream": true});
    let (status, body) = post(&base, &second).await;
    assert_eq!(status, 200, "{body}");
    let sent = &upstream.requests()[1].1;
    let assistant = &sent["messages"][1]["content"];
    assert_eq!(
        assistant[0],
        json!({"type": "thinking", "thinking": "2 + 3 is 5.", "signature": "EqQBsig=="})
    );
    assert_eq!(assistant[1]["id"], "toolu_1");
    assert_eq!(sent["messages"][2]["content"][0]["tool_use_id"], "toolu_1");
}

#[tokio::test]
async fn previous_response_id_continues_the_conversation_the_gateway_kept() {
    let upstream = Server::start(vec![
        Answer::ok("text/event-stream", &chat_text("Hello, Ada."), WHOLE),
        Answer::ok("text/event-stream", &chat_text("Ada."), WHOLE),
    ])
    .await;
    let base = gateway("openai", &upstream).await;
    let (status, body) = post(
        &base,
        &json!({"model": "gpt-test", "instructions": "Be brief.", "input": "I am Ada."}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let id = body_objects(&body)[0]["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("resp_"));
    let next = json!({"model": "gpt-test", "previous_response_id": id, "input": "Who am I?", "stream": true});
    let (status, body) = post(&base, &next).await;
    assert_eq!(status, 200, "{body}");
    let sent = &upstream.requests()[1].1;
    let roles: Vec<&str> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"], "{sent}");
    assert_eq!(sent["messages"][1]["content"], "Hello, Ada.");
    assert!(sent.get("previous_response_id").is_none());

    let unknown = json!({"model": "gpt-test", "previous_response_id": "resp_nope", "input": "Hi"});
    let (status, body) = post(&base, &unknown).await;
    assert_eq!(status, 400);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({"error": {
        "message": "Previous response with id 'resp_nope' not found.",
        "type": "invalid_request_error", "param": "previous_response_id",
        "code": "previous_response_not_found"}})
    );
}

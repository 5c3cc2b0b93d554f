//! Gemini clients (Gemini CLI, the google-genai SDKs) through the gateway,
//! over real HTTP on loopback with scripted upstreams of each wire: the tool
//! round trip of a file the client's tool read, whose image reaches an
//! Anthropic upstream inside its `tool_result` and an OpenAI upstream as an
//! image part; thought signatures kept through a Gemini client and a Gemini
//! upstream; the key of `?key=` or `x-goog-api-key`; SSE, JSON-array and
//! whole replies; token counts and the model list in Google's shape.

#![cfg(all(feature = "server", feature = "gemini"))]

use crate::common;

use common::server::{Answer, Server};
use lmstack::provider::ApiKey;
use lmstack::provider::anthropic::{Anthropic, AnthropicConfig};
use lmstack::provider::gemini::{Gemini, GeminiConfig};
use lmstack::provider::openai_chat::{OpenAi, OpenAiConfig};
use lmstack::server::{BearerToken, Gateway};
use lmstack::testing::ScriptedModel;
use serde_json::{Value, json};

/// Serves `gateway` on a loopback port; its base URL.
async fn serve(gateway: Gateway) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, gateway.router()).await });
    format!("http://{address}")
}

/// Posts `body` as a Gemini client does; the status and the body's text.
async fn post(url: &str, headers: &[(&str, &str)], body: &Value) -> (u16, String) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// The responses of an SSE reply (its `data:` events), in order.
fn events(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|event| event.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

/// Every part of a reply's responses, in order.
fn parts(responses: &[Value]) -> Vec<Value> {
    responses
        .iter()
        .flat_map(|response| {
            response["candidates"][0]["content"]["parts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}

const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// Gemini CLI's first request: its system instruction, its `read_file`
/// declared with `parametersJsonSchema`, its thinking settings.
fn first_request() -> Value {
    json!({
        "contents": [{"role": "user", "parts": [{"text": "What is in cat.png?"}]}],
        "systemInstruction": {"role": "user", "parts": [{"text": "You are Gemini CLI."}]},
        "tools": [{"functionDeclarations": [{
            "name": "read_file", "description": "Reads a file",
            "parametersJsonSchema": {"type": "object",
                "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]},
        }]}],
        "generationConfig": {"temperature": 1, "topP": 0.95, "topK": 64,
            "thinkingConfig": {"includeThoughts": true, "thinkingLevel": "HIGH"}},
    })
}

/// Gemini CLI's follow-up: the model's call sent back as it came, answered
/// by `read_file` with the image in the response's `parts`.
fn follow_up(call: &Value) -> Value {
    let mut body = first_request();
    let id = call["functionCall"]["id"].clone();
    body["contents"].as_array_mut().unwrap().extend([
        json!({"role": "model", "parts": [call]}),
        json!({"role": "user", "parts": [{"functionResponse": {
            "id": id, "name": "read_file",
            "response": {"output": "Binary content provided (1 item(s))."},
            "parts": [{"inlineData": {"mimeType": "image/png", "data": PNG}}],
        }}]}),
    ]);
    body
}

/// Runs the round trip against `base`: the call the first reply holds, and
/// the text of the second.
async fn round_trip(base: &str) -> (Value, String) {
    let url = format!("{base}/v1beta/models/agent:streamGenerateContent?alt=sse");
    let (status, reply) = post(&url, &[("x-goog-api-key", "any")], &first_request()).await;
    assert_eq!(status, 200, "{reply}");
    let first = parts(&events(&reply));
    let call = first
        .iter()
        .find(|part| part.get("functionCall").is_some())
        .unwrap_or_else(|| panic!("a call in {reply}"))
        .clone();
    assert_eq!(call["functionCall"]["name"], "read_file");
    assert_eq!(
        call["functionCall"]["args"],
        json!({"file_path": "cat.png"})
    );
    let (status, reply) = post(&url, &[], &follow_up(&call)).await;
    assert_eq!(status, 200, "{reply}");
    let responses = events(&reply);
    let last = responses.last().unwrap();
    assert_eq!(last["candidates"][0]["finishReason"], "STOP", "{reply}");
    let text = parts(&responses)
        .iter()
        .filter_map(|part| part["text"].as_str())
        .collect();
    (call, text)
}

fn typed_sse(events: &[Value]) -> Vec<u8> {
    common::typed_sse(events)
}

fn anthropic_answer(content: Value, stop: &str) -> Vec<u8> {
    let mut events = vec![json!({"type": "message_start", "message": {"id": "msg_1",
        "type": "message", "role": "assistant", "model": "claude", "content": [],
        "usage": {"input_tokens": 9, "output_tokens": 1}}})];
    let start = match content["type"].as_str() {
        Some("tool_use") => {
            json!({"type": "tool_use", "id": content["id"], "name": content["name"], "input": {}})
        }
        _ => json!({"type": "text", "text": ""}),
    };
    events.push(json!({"type": "content_block_start", "index": 0, "content_block": start}));
    let delta = match content["type"].as_str() {
        Some("tool_use") => {
            json!({"type": "input_json_delta", "partial_json": content["input"].to_string()})
        }
        _ => json!({"type": "text_delta", "text": content["text"]}),
    };
    events.push(json!({"type": "content_block_delta", "index": 0, "delta": delta}));
    events.push(json!({"type": "content_block_stop", "index": 0}));
    events.push(
        json!({"type": "message_delta", "delta": {"stop_reason": stop},
        "usage": {"output_tokens": 5}}),
    );
    events.push(json!({"type": "message_stop"}));
    typed_sse(&events)
}

#[tokio::test]
async fn a_tool_round_trip_reaches_an_anthropic_upstream_with_the_image_in_its_tool_result() {
    let call = json!({"type": "tool_use", "id": "toolu_1", "name": "read_file",
        "input": {"file_path": "cat.png"}});
    let text = json!({"type": "text", "text": "A black cat."});
    let upstream = Server::start(vec![
        Answer::ok(
            "text/event-stream",
            &anthropic_answer(call, "tool_use"),
            &[37],
        ),
        Answer::ok(
            "text/event-stream",
            &anthropic_answer(text, "end_turn"),
            &[37],
        ),
    ])
    .await;
    let config = AnthropicConfig::new(upstream.base_url())
        .model("claude-sonnet-4-5")
        .api_key(ApiKey::new("k"));
    let gateway = Gateway::new().model("agent", "anthropic", Anthropic::new(config).unwrap(), 4);
    let base = serve(gateway).await;
    let (call, text) = round_trip(&base).await;
    assert_eq!(call["functionCall"]["id"], "toolu_1");
    assert_eq!(text, "A black cat.");
    let requests = upstream.requests();
    let first = &requests[0].1;
    assert_eq!(first["system"], "You are Gemini CLI.");
    assert_eq!(
        (&first["top_p"], &first["top_k"]),
        (&json!(0.95), &json!(64))
    );
    assert_eq!(first["tools"][0]["name"], "read_file");
    assert_eq!(
        first["tools"][0]["input_schema"]["required"],
        json!(["file_path"])
    );
    let second = &requests[1].1;
    let result = &second["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result", "{second}");
    assert_eq!(result["tool_use_id"], "toolu_1");
    let image = result["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|block| block["type"] == "image")
        .unwrap_or_else(|| panic!("an image in {result}"));
    assert_eq!(
        image["source"],
        json!({"type": "base64", "media_type": "image/png", "data": PNG})
    );
    assert!(!second.to_string().contains("generationConfig"), "{second}");
}

#[tokio::test]
async fn a_tool_round_trip_reaches_an_openai_upstream_with_the_image_injected() {
    let call = common::sse(&[
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt",
            "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [{"index": 0,
                "id": "call_abc", "type": "function",
                "function": {"name": "read_file", "arguments": "{\"file_path\":\"cat.png\"}"}}]},
                "finish_reason": null}]}),
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ]);
    let text = common::sse(&[
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "A black cat."},
                "finish_reason": null}]}),
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ]);
    let upstream = Server::start(vec![
        Answer::ok("text/event-stream", &call, &[23]),
        Answer::ok("text/event-stream", &text, &[23]),
    ])
    .await;
    let config = OpenAiConfig::new(upstream.base_url())
        .model("gpt")
        .api_key(ApiKey::new("k"));
    let gateway = Gateway::new().model("agent", "openai", OpenAi::new(config).unwrap(), 4);
    let base = serve(gateway).await;
    let (call, text) = round_trip(&base).await;
    assert_eq!(call["functionCall"]["id"], "call_abc");
    assert_eq!(text, "A black cat.");
    let second = &upstream.requests()[1].1;
    let messages = second["messages"].as_array().unwrap();
    let tool = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool["tool_call_id"], "call_abc");
    let image = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|part| part["type"] == "image_url")
        .unwrap_or_else(|| panic!("an image part in {second}"));
    assert_eq!(
        image["image_url"]["url"],
        format!("data:image/png;base64,{PNG}")
    );
}

#[tokio::test]
async fn thought_signatures_survive_a_gemini_client_and_a_gemini_upstream() {
    let call = format!(
        "data: {}\r\n\r\n",
        json!({"candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"name": "read_file", "args": {"file_path": "cat.png"}},
             "thoughtSignature": "U0lHTkVE"}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 3}, "responseId": "resp1"})
    );
    let text = format!(
        "data: {}\r\n\r\n",
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "A black cat."}]},
            "finishReason": "STOP"}]})
    );
    let upstream = Server::start(vec![
        Answer::ok("text/event-stream", call.as_bytes(), &[19]),
        Answer::ok("text/event-stream", text.as_bytes(), &[19]),
    ])
    .await;
    let config = GeminiConfig::new(upstream.base_url())
        .model("gemini-3-pro-preview")
        .api_key(ApiKey::new("k"));
    let gateway = Gateway::new().model("agent", "gemini", Gemini::new(config).unwrap(), 4);
    let base = serve(gateway).await;
    let (call, text) = round_trip(&base).await;
    assert_eq!(call["thoughtSignature"], "U0lHTkVE");
    assert!(call["functionCall"]["id"].is_string(), "{call}");
    assert_eq!(text, "A black cat.");
    let requests = upstream.requests();
    let first = &requests[0].1;
    assert_eq!(
        first["generationConfig"]["thinkingConfig"]["thinkingLevel"],
        "HIGH"
    );
    assert_eq!(first["generationConfig"]["topK"], 64);
    assert_eq!(first["tools"], first_request()["tools"]);
    let second = &requests[1].1;
    let contents = second["contents"].as_array().unwrap();
    assert_eq!(
        contents[1]["parts"][0],
        json!({"functionCall": {"name": "read_file", "args": {"file_path": "cat.png"}},
               "thoughtSignature": "U0lHTkVE"}),
        "the call as the model wrote it, without the id it never gave"
    );
    let response = &contents[2]["parts"][0]["functionResponse"];
    assert!(response.get("id").is_none(), "{response}");
    assert_eq!(response["parts"][0]["inlineData"]["data"], PNG);
}

fn scripted_gateway() -> Gateway {
    let model = (0..8).fold(ScriptedModel::new(), |model, _| model.reply("Hello there."));
    Gateway::new().model("flash", "scripted", model, 4)
}

#[tokio::test]
async fn the_key_comes_as_a_query_or_a_header_and_a_wrong_one_is_refused_in_googles_shape() {
    let base = serve(scripted_gateway().token(BearerToken::new("s3cret"))).await;
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]});
    let url = format!("{base}/v1beta/models/flash:generateContent");
    let (status, reply) = post(&format!("{url}?key=s3cret"), &[], &body).await;
    assert_eq!(status, 200, "{reply}");
    let (status, reply) = post(&url, &[("x-goog-api-key", "s3cret")], &body).await;
    assert_eq!(status, 200, "{reply}");
    for (query, headers) in [
        ("?key=wrong", vec![]),
        ("", vec![("x-goog-api-key", "wrong")]),
        ("", vec![]),
    ] {
        let (status, reply) = post(&format!("{url}{query}"), &headers, &body).await;
        assert_eq!(status, 401, "{reply}");
        let error: Value = serde_json::from_str(&reply).unwrap();
        assert_eq!(error["error"]["code"], 401);
        assert_eq!(error["error"]["status"], "UNAUTHENTICATED");
    }
    let listed = reqwest::get(format!("{base}/v1beta/models?key=s3cret"))
        .await
        .unwrap();
    assert_eq!(listed.status(), 200);
    let listed: Value = listed.json().await.unwrap();
    assert_eq!(listed["models"][0]["name"], "models/flash");
}

#[tokio::test]
async fn replies_come_whole_as_sse_or_as_a_json_array() {
    let base = serve(scripted_gateway()).await;
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]});
    let models = format!("{base}/v1beta/models");
    let (status, whole) = post(&format!("{models}/flash:generateContent"), &[], &body).await;
    assert_eq!(status, 200, "{whole}");
    let whole: Value = serde_json::from_str(&whole).unwrap();
    assert_eq!(
        whole["candidates"][0]["content"]["parts"][0]["text"],
        "Hello there."
    );
    assert_eq!(whole["candidates"][0]["finishReason"], "STOP");
    assert_eq!(whole["modelVersion"], "flash");
    let sse_url = format!("{models}/models/flash:streamGenerateContent?alt=sse");
    let (status, sse) = post(&sse_url, &[], &body).await;
    assert_eq!(status, 200, "{sse}");
    let text: String = parts(&events(&sse))
        .iter()
        .filter_map(|part| part["text"].as_str())
        .collect();
    assert_eq!(text, "Hello there.");
    let (status, array) = post(&format!("{models}/flash:streamGenerateContent"), &[], &body).await;
    assert_eq!(status, 200, "{array}");
    let array: Vec<Value> = serde_json::from_str(&array).unwrap();
    assert_eq!(
        array.last().unwrap()["candidates"][0]["finishReason"],
        "STOP"
    );
    let (status, missing) = post(&format!("{models}/nope:generateContent"), &[], &body).await;
    assert_eq!(status, 404);
    assert_eq!(
        serde_json::from_str::<Value>(&missing).unwrap()["error"]["status"],
        "NOT_FOUND"
    );
    let bad = json!({"contents": [{"role": "tool", "parts": []}]});
    let (status, refused) = post(&format!("{models}/flash:generateContent"), &[], &bad).await;
    assert_eq!(status, 400);
    let refused: Value = serde_json::from_str(&refused).unwrap();
    assert_eq!(refused["error"]["status"], "INVALID_ARGUMENT");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("contents[0].role")
    );
}

#[tokio::test]
async fn token_counts_are_the_upstreams_own_or_unimplemented() {
    let upstream = Server::start(vec![Answer::ok(
        "application/json",
        br#"{"totalTokens":31}"#,
        &[64],
    )])
    .await;
    let config = GeminiConfig::new(upstream.base_url())
        .model("gemini-2.5-flash")
        .api_key(ApiKey::new("k"));
    let gemini = Gemini::new(config).unwrap();
    let gateway = scripted_gateway()
        .model("counted", "gemini", gemini.clone(), 4)
        .token_counter("counted", gemini);
    let base = serve(gateway).await;
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]});
    let (status, counted) = post(
        &format!("{base}/v1beta/models/counted:countTokens"),
        &[],
        &body,
    )
    .await;
    assert_eq!(status, 200, "{counted}");
    assert_eq!(
        serde_json::from_str::<Value>(&counted).unwrap(),
        json!({"totalTokens": 31})
    );
    assert!(
        upstream.uris()[0].ends_with(":countTokens"),
        "{:?}",
        upstream.uris()
    );
    let (status, none) = post(
        &format!("{base}/v1beta/models/flash:countTokens"),
        &[],
        &body,
    )
    .await;
    assert_eq!(status, 501, "{none}");
    assert_eq!(
        serde_json::from_str::<Value>(&none).unwrap()["error"]["status"],
        "UNIMPLEMENTED"
    );
}

/// Gemini CLI's count of a file its tool read, before it sends it: the
/// function response and the image beside it, without the call.
fn count_of_a_response_alone() -> Value {
    json!({"contents": [{"role": "user", "parts": [
        {"functionResponse": {"id": "read_file_1_0", "name": "read_file",
            "response": {"output": "Binary content provided (1 item(s))."}}},
        {"inlineData": {"mimeType": "image/png", "data": PNG}},
    ]}]})
}

#[tokio::test]
async fn a_count_of_a_response_without_its_call_reaches_a_gemini_upstream_as_it_came() {
    let upstream = Server::start(vec![Answer::ok(
        "application/json",
        br#"{"totalTokens":270}"#,
        &[64],
    )])
    .await;
    let config = GeminiConfig::new(upstream.base_url())
        .model("gemini-3-pro-preview")
        .api_key(ApiKey::new("k"));
    let gemini = Gemini::new(config).unwrap();
    let gateway = Gateway::new()
        .model("agent", "gemini", gemini.clone(), 4)
        .token_counter("agent", gemini);
    let base = serve(gateway).await;
    let body = count_of_a_response_alone();
    let url = format!("{base}/v1beta/models/agent:countTokens");
    let (status, counted) = post(&url, &[], &body).await;
    assert_eq!(status, 200, "{counted}");
    assert_eq!(
        serde_json::from_str::<Value>(&counted).unwrap(),
        json!({"totalTokens": 270})
    );
    let sent = &upstream.requests()[0].1;
    assert_eq!(
        sent["generateContentRequest"]["contents"], body["contents"],
        "{sent}"
    );
}

#[tokio::test]
async fn a_count_of_a_response_without_its_call_reaches_an_anthropic_upstream_as_user_content() {
    let upstream = Server::start(vec![Answer::ok(
        "application/json",
        br#"{"input_tokens":270}"#,
        &[64],
    )])
    .await;
    let config = AnthropicConfig::new(upstream.base_url())
        .model("claude-sonnet-4-5")
        .api_key(ApiKey::new("k"));
    let anthropic = Anthropic::new(config).unwrap();
    let gateway = Gateway::new()
        .model("agent", "anthropic", anthropic.clone(), 4)
        .token_counter("agent", anthropic);
    let base = serve(gateway).await;
    let url = format!("{base}/v1beta/models/agent:countTokens");
    let (status, counted) = post(&url, &[], &count_of_a_response_alone()).await;
    assert_eq!(status, 200, "{counted}");
    assert_eq!(
        serde_json::from_str::<Value>(&counted).unwrap(),
        json!({"totalTokens": 270})
    );
    assert!(
        upstream.uris()[0].ends_with("/count_tokens"),
        "{:?}",
        upstream.uris()
    );
    let sent = &upstream.requests()[0].1;
    assert_eq!(
        sent["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "Binary content provided (1 item(s))."},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        ]}]),
        "the result without its call, as user content: {sent}"
    );
}

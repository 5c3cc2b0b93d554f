//! What Anthropic clients (Claude Code, the SDKs) need of the gateway, over
//! real HTTP on loopback with recording upstreams of each wire: their
//! `anthropic-beta` flags carried to an Anthropic upstream (and dropped for
//! another), `?beta=true`, token counts answered by the upstream's own count,
//! and the models listed in their shape.

#![cfg(all(feature = "server", feature = "gemini"))]

use crate::common;

use common::server::{Answer, Server};
use lmstack::provider::anthropic::{Anthropic, AnthropicConfig};
use lmstack::provider::gemini::{Gemini, GeminiConfig};
use lmstack::provider::openai_chat::{OpenAi, OpenAiConfig};
use lmstack::provider::{AnyProvider, ApiKey};
use lmstack::server::Gateway;
use lmstack::testing::ScriptedModel;
use serde_json::{Value, json};

/// Serves `gateway` on a loopback port; its base URL.
async fn serve(gateway: Gateway) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, gateway.router()).await });
    format!("http://{address}")
}

/// What Claude Code sends besides its body: its version, two lines of beta
/// flags, its own key — and an `Authorization` that must not reach anyone.
const CLAUDE_CODE: &[(&str, &str)] = &[
    ("anthropic-version", "2099-01-01"),
    (
        "anthropic-beta",
        "claude-code-20250219, interleaved-thinking-2025-05-14",
    ),
    ("anthropic-beta", "context-management-2025-06-27"),
    ("x-api-key", "the-clients-key"),
    ("authorization", "Bearer the-clients-bearer"),
];

async fn send(
    method: reqwest::Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> (u16, Value) {
    let mut request = reqwest::Client::new().request(method, url);
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_owned());
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

async fn post(url: &str, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
    send(reqwest::Method::POST, url, headers, Some(body)).await
}

async fn get(url: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    send(reqwest::Method::GET, url, headers, None).await
}

const MESSAGES: &str = r#"{"model":"m","max_tokens":64,
    "messages":[{"role":"user","content":"Hi"}]}"#;

const COUNT: &str = r#"{"model":"m","system":"Be brief.",
    "messages":[{"role":"user","content":"Hi"}]}"#;

fn anthropic_upstream(server: &Server) -> Anthropic {
    let config = AnthropicConfig::new(server.base_url())
        .model("claude-sonnet-4-5")
        .api_key(ApiKey::new("the-upstreams-key"))
        .header(
            "anthropic-beta".parse().unwrap(),
            "the-gateways-flag".parse().unwrap(),
        );
    Anthropic::new(config).unwrap()
}

fn openai_upstream(server: &Server) -> OpenAi {
    let config = OpenAiConfig::new(server.base_url())
        .model("gpt")
        .api_key(ApiKey::new("the-upstreams-key"));
    OpenAi::new(config).unwrap()
}

fn gemini_upstream(server: &Server) -> Gemini {
    let config = GeminiConfig::new(server.base_url())
        .model("gemini-2.5-flash")
        .api_key(ApiKey::new("the-upstreams-key"));
    Gemini::new(config).unwrap()
}

fn header<'a>(headers: &'a axum::http::HeaderMap, name: &str) -> Vec<&'a str> {
    headers
        .get_all(name)
        .iter()
        .map(|value| value.to_str().unwrap())
        .collect()
}

#[tokio::test]
async fn beta_flags_reach_an_anthropic_upstream_merged_and_the_key_stays_the_upstreams() {
    let message =
        br#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",
        "content":[{"type":"text","text":"Hi."}],"stop_reason":"end_turn",
        "usage":{"input_tokens":3,"output_tokens":2}}"#;
    let upstream = Server::start(vec![Answer::ok("application/json", message, &[64])]).await;
    let gateway = Gateway::new().model("m", "anthropic", anthropic_upstream(&upstream), 4);
    let base = serve(gateway).await;
    let (status, reply) = post(
        &format!("{base}/v1/messages?beta=true"),
        CLAUDE_CODE,
        MESSAGES,
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["content"][0]["text"], "Hi.");
    let (headers, body) = upstream.requests().remove(0);
    assert_eq!(
        header(&headers, "anthropic-beta"),
        [
            "the-gateways-flag,claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27"
        ]
    );
    // The version the gateway's lowering and lifting are written for is kept.
    assert_eq!(header(&headers, "anthropic-version"), ["2023-06-01"]);
    assert_eq!(header(&headers, "x-api-key"), ["the-upstreams-key"]);
    assert!(headers.get("authorization").is_none());
    assert!(body.get("anthropic-beta").is_none(), "{body}");
    assert_eq!(body["max_tokens"], 64);
}

#[tokio::test]
async fn beta_flags_are_dropped_for_an_openai_upstream_and_the_request_still_answers() {
    let completion = br#"{"id":"c1","object":"chat.completion","created":1,"model":"gpt",
        "choices":[{"index":0,"message":{"role":"assistant","content":"Hi."},"finish_reason":"stop"}]}"#;
    let upstream = Server::start(vec![Answer::ok("application/json", completion, &[64])]).await;
    let gateway = Gateway::new().model("m", "openai", openai_upstream(&upstream), 4);
    let base = serve(gateway).await;
    let (status, reply) = post(
        &format!("{base}/v1/messages?beta=true"),
        CLAUDE_CODE,
        MESSAGES,
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["content"][0]["text"], "Hi.");
    let (headers, body) = upstream.requests().remove(0);
    assert!(headers.get("anthropic-beta").is_none());
    assert_eq!(
        header(&headers, "authorization"),
        ["Bearer the-upstreams-key"]
    );
    assert!(!body.to_string().contains("claude-code-20250219"), "{body}");
}

#[tokio::test]
async fn a_token_count_is_the_anthropic_upstreams_own() {
    let upstream = Server::start(vec![Answer::ok(
        "application/json",
        br#"{"input_tokens":42}"#,
        &[5],
    )])
    .await;
    let provider = anthropic_upstream(&upstream);
    let gateway = Gateway::new()
        .model("m", "anthropic", provider.clone(), 4)
        .token_counter("m", AnyProvider::from(provider));
    let base = serve(gateway).await;
    let url = format!("{base}/v1/messages/count_tokens?beta=true");
    let (status, reply) = post(&url, CLAUDE_CODE, COUNT).await;
    assert_eq!((status, reply), (200, json!({"input_tokens": 42})));
    assert_eq!(upstream.uris(), ["/v1/messages/count_tokens"]);
    let (headers, body) = upstream.requests().remove(0);
    assert_eq!(
        body,
        json!({"model": "m", "system": "Be brief.",
               "messages": [{"role": "user", "content": "Hi"}]})
    );
    assert!(header(&headers, "anthropic-beta")[0].ends_with(",context-management-2025-06-27"));
    assert_eq!(header(&headers, "x-api-key"), ["the-upstreams-key"]);
}

#[tokio::test]
async fn a_token_count_is_the_gemini_upstreams_own() {
    let counted =
        br#"{"totalTokens":17,"promptTokensDetails":[{"modality":"TEXT","tokenCount":17}]}"#;
    let upstream = Server::start(vec![Answer::ok("application/json", counted, &[7])]).await;
    let provider = gemini_upstream(&upstream);
    let gateway = Gateway::new()
        .model("m", "gemini", provider.clone(), 4)
        .token_counter("m", provider);
    let base = serve(gateway).await;
    let (status, reply) = post(&format!("{base}/v1/messages/count_tokens"), &[], COUNT).await;
    assert_eq!((status, reply), (200, json!({"input_tokens": 17})));
    assert_eq!(upstream.uris(), ["/v1/models/m:countTokens"]);
    let (headers, body) = upstream.requests().remove(0);
    assert_eq!(
        body,
        json!({"generateContentRequest": {
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
            "model": "models/m"}})
    );
    assert_eq!(header(&headers, "x-goog-api-key"), ["the-upstreams-key"]);
}

#[tokio::test]
async fn a_token_count_where_the_upstream_has_none_is_a_clear_error_not_zero() {
    let upstream = Server::start(Vec::new()).await;
    let provider = openai_upstream(&upstream);
    let gateway = Gateway::new()
        .model("m", "openai", provider.clone(), 4)
        .token_counter("m", provider)
        .model("scripted", "scripted", ScriptedModel::new(), 4);
    let base = serve(gateway).await;
    let url = format!("{base}/v1/messages/count_tokens");
    for model in ["m", "scripted"] {
        let body = COUNT.replace(r#""m""#, &format!("\"{model}\""));
        let (status, reply) = post(&url, CLAUDE_CODE, &body).await;
        assert_eq!(status, 501, "{model}: {reply}");
        assert_eq!(reply["type"], "error", "{reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(message.contains("count"), "{message}");
        assert!(reply.get("input_tokens").is_none());
    }
    assert!(upstream.requests().is_empty());
    // A count body is read as a Messages body is: its mistakes are the client's.
    let (status, reply) = post(&url, &[], r#"{"model":"m","messages":[]}"#).await;
    assert_eq!(status, 400, "{reply}");
    assert_eq!(reply["error"]["type"], "invalid_request_error");
}

#[tokio::test]
async fn the_models_are_listed_in_the_clients_shape() {
    let gateway = Gateway::new()
        .model("b-model", "openai", ScriptedModel::new(), 1)
        .model("a-model", "anthropic", ScriptedModel::new(), 1);
    let base = serve(gateway).await;
    let anthropic_clients: [&[(&str, &str)]; 2] = [
        &[("anthropic-version", "2023-06-01")],
        &[("x-api-key", "k")],
    ];
    for headers in anthropic_clients {
        let (status, list) = get(&format!("{base}/v1/models"), headers).await;
        assert_eq!(status, 200);
        assert_eq!(list["has_more"], false, "{list}");
        assert_eq!(
            (list["first_id"].as_str(), list["last_id"].as_str()),
            (Some("a-model"), Some("b-model"))
        );
        let first = &list["data"][0];
        assert_eq!(
            (first["type"].as_str(), first["id"].as_str()),
            (Some("model"), Some("a-model"))
        );
        assert_eq!(first["display_name"], "a-model");
        let created = first["created_at"].as_str().unwrap();
        assert!(humantime::parse_rfc3339(created).is_ok(), "{created}");
        let (status, one) = get(&format!("{base}/v1/models/b-model"), headers).await;
        assert_eq!(
            (status, &one["type"], &one["id"]),
            (200, &json!("model"), &json!("b-model"))
        );
        let (status, missing) = get(&format!("{base}/v1/models/nope"), headers).await;
        assert_eq!(status, 404);
        assert_eq!(missing["error"]["type"], "not_found_error", "{missing}");
    }
    let openai_client = [("authorization", "Bearer k")];
    let (status, list) = get(&format!("{base}/v1/models"), &openai_client).await;
    assert_eq!(status, 200);
    assert_eq!(list["object"], "list");
    assert_eq!(list["data"][1]["object"], "model");
    assert_eq!(list["data"][1]["id"], "b-model");
    let (status, one) = get(&format!("{base}/v1/models/a-model"), &[]).await;
    assert_eq!(
        (status, &one["object"], &one["id"]),
        (200, &json!("model"), &json!("a-model"))
    );
    let (status, missing) = get(&format!("{base}/v1/models/nope"), &[]).await;
    assert_eq!(status, 404);
    assert!(missing["error"]["message"].is_string(), "{missing}");
}

/// Claude Code's WebSearch request (its tool exactly as Claude Code writes it).
const WEB_SEARCH: &str = r#"{"model":"m","max_tokens":64,
    "messages":[{"role":"user","content":"Perform a web search for the query: tokio 1.45"}],
    "tools":[{"type":"web_search_20250305","name":"web_search","max_uses":8}]}"#;

#[tokio::test]
async fn claude_codes_web_search_reaches_an_anthropic_upstream_as_it_came() {
    let message =
        br#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",
        "content":[{"type":"text","text":"Found it."}],"stop_reason":"end_turn",
        "usage":{"input_tokens":3,"output_tokens":2}}"#;
    let upstream = Server::start(vec![Answer::ok("application/json", message, &[64])]).await;
    let gateway = Gateway::new().model("m", "anthropic", anthropic_upstream(&upstream), 4);
    let base = serve(gateway).await;
    let (status, reply) = post(&format!("{base}/v1/messages"), CLAUDE_CODE, WEB_SEARCH).await;
    assert_eq!(status, 200, "{reply}");
    let (headers, body) = upstream.requests().remove(0);
    assert_eq!(
        body["tools"].to_string(),
        r#"[{"type":"web_search_20250305","name":"web_search","max_uses":8}]"#
    );
    // Web search needs no beta flag; the client's own pass.
    assert!(!header(&headers, "anthropic-beta")[0].contains("code-execution"));
}

#[tokio::test]
async fn claude_codes_web_search_reaches_a_gemini_upstream_as_google_search_and_its_citations_come_back()
 {
    let answer = br#"{"candidates":[{"content":{"role":"model","parts":[
        {"executableCode":{"language":"PYTHON","code":"print(1)"}},
        {"codeExecutionResult":{"outcome":"OUTCOME_OK","output":"1\n"}},
        {"text":"Tokio 1.45 is out."}]},
        "finishReason":"STOP",
        "groundingMetadata":{"groundingChunks":[{"web":{"uri":"https://tokio.rs/blog","title":"tokio.rs"}}],
            "groundingSupports":[{"segment":{"startIndex":0,"endIndex":18,"text":"Tokio 1.45 is out."},
                "groundingChunkIndices":[0]}]}}],
        "usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":5}}"#;
    let upstream = Server::start(vec![Answer::ok("application/json", answer, &[64])]).await;
    let gateway = Gateway::new().model("m", "gemini", gemini_upstream(&upstream), 4);
    let base = serve(gateway).await;
    let (status, reply) = post(&format!("{base}/v1/messages"), CLAUDE_CODE, WEB_SEARCH).await;
    assert_eq!(status, 200, "{reply}");
    let (_, body) = upstream.requests().remove(0);
    assert_eq!(body["tools"], json!([{"googleSearch": {}}]), "{body}");
    let text: Vec<&str> = (reply["content"].as_array().unwrap().iter())
        .filter_map(|block| block["text"].as_str())
        .collect();
    assert_eq!(text.concat(), "Tokio 1.45 is out.", "{reply}");
    assert!(
        reply.to_string().contains("https://tokio.rs/blog"),
        "{reply}"
    );
}

#[tokio::test]
async fn claude_codes_web_search_reaches_an_openai_upstream_as_web_search_options() {
    let completion = br#"{"id":"c1","object":"chat.completion","created":1,"model":"gpt",
        "choices":[{"index":0,"message":{"role":"assistant","content":"Found it."},"finish_reason":"stop"}]}"#;
    let upstream = Server::start(vec![Answer::ok("application/json", completion, &[64])]).await;
    let gateway = Gateway::new().model("m", "openai", openai_upstream(&upstream), 4);
    let base = serve(gateway).await;
    let forced = WEB_SEARCH.replace(
        r#""tools""#,
        r#""tool_choice":{"type":"tool","name":"web_search"},"tools""#,
    );
    let (status, reply) = post(&format!("{base}/v1/messages"), CLAUDE_CODE, &forced).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["content"][0]["text"], "Found it.");
    let (_, body) = upstream.requests().remove(0);
    // `max_uses` has no place there; a choice of a tool that is no function
    // is left to the model.
    assert_eq!(body["web_search_options"], json!({}), "{body}");
    assert!(
        body.get("tools").is_none() && body.get("tool_choice").is_none(),
        "{body}"
    );
}

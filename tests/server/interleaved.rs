//! Parallel tool calls whose fragments an OpenAI-format upstream interleaves
//! by `index`: through the gateway, an Anthropic client and an OpenAI client
//! each get every call whole (one `tool_use` block per call with its whole
//! input; fragments with stable indexes), streaming and not.

#![cfg(all(feature = "server", feature = "openai", feature = "anthropic"))]

use crate::common;

use common::interleaved::{Interleaved, alternating};
use common::server::{Answer, Server};
use lmstack::provider::anthropic::{Anthropic, AnthropicConfig};
use lmstack::provider::openai_chat::{OpenAi, OpenAiConfig};
use lmstack::server::Gateway;
use lmstack::{ChatRequest, FinishReason, Message, Reply};
use serde_json::Value;
use tower::ServiceExt;

/// Serves `gateway` on a loopback port; its base URL.
async fn serve(gateway: Gateway) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, gateway.router()).await });
    format!("http://{address}")
}

/// A gateway whose model `up` is an OpenAI-format upstream that answers every
/// request with `sent`'s interleaved stream, cut at `sizes`.
async fn gateway_over(sent: &Interleaved, requests: usize, sizes: &[usize]) -> (Server, String) {
    let answers = (0..requests)
        .map(|_| Answer::ok("text/event-stream", &sent.openai_sse(), sizes))
        .collect();
    let upstream = Server::start(answers).await;
    let provider = OpenAi::new(OpenAiConfig::new(upstream.base_url()).model("m")).unwrap();
    let base = serve(Gateway::new().model("up", "openai", provider, 4)).await;
    (upstream, base)
}

/// The reply's calls are `sent`'s, whole, in one `tool_calls` message, and it
/// finished for tool calls.
async fn assert_every_call_whole(reply: Reply, sent: &Interleaved, what: &str) {
    let events = reply.collect_events().await.unwrap();
    let finish = events.iter().find_map(|event| match event {
        lmstack::Event::Finish { reason } => Some(reason.clone()),
        _ => None,
    });
    assert_eq!(finish, Some(FinishReason::ToolCalls), "{what}");
    let messages = lmstack::Joiner::join(events);
    let calls: Vec<&Message> = messages.iter().filter(|m| !m.calls().is_empty()).collect();
    assert_eq!(calls.len(), 1, "{what}: {messages:?}");
    let got: Vec<(&str, &Value)> = calls[0]
        .calls()
        .iter()
        .map(|call| (call.name.as_str(), &call.arguments))
        .collect();
    let want: Vec<(&str, &Value)> = sent
        .calls
        .iter()
        .map(|call| (call.name.as_str(), &call.arguments))
        .collect();
    assert_eq!(got, want, "{what}");
    let invalid = calls[0]
        .calls()
        .iter()
        .filter(|c| c.invalid.is_some())
        .count();
    assert_eq!(invalid, 0, "{what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interleaved_upstream_calls_reach_anthropic_and_openai_clients_whole_in_both_modes() {
    for (n, sent) in alternating().into_iter().enumerate() {
        let sizes = [7, 13, 2, 31];
        let (_upstream, base) = gateway_over(&sent, 4, &sizes).await;
        let openai = OpenAi::new(OpenAiConfig::new(format!("{base}/v1")).model("up")).unwrap();
        let anthropic =
            Anthropic::new(AnthropicConfig::new(format!("{base}/v1")).model("up")).unwrap();
        for stream in [true, false] {
            let request = ChatRequest::new(vec![Message::user("Weather?")]).streaming(stream);
            let what = format!("example {n}, OpenAI client, stream {stream}");
            let reply = openai.clone().oneshot(request.clone()).await.unwrap();
            assert_every_call_whole(reply, &sent, &what).await;
            let what = format!("example {n}, Anthropic client, stream {stream}");
            let reply = anthropic.clone().oneshot(request).await.unwrap();
            assert_every_call_whole(reply, &sent, &what).await;
        }
    }
}

/// What the clients read, on the wire: an Anthropic stream has one `tool_use`
/// block per call, each started, given its input and stopped before the next
/// starts; an OpenAI stream gives each call one stable `index`, with its id and
/// name on its first fragment only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_clients_wire_each_call_is_one_block_or_one_index() {
    let sent = &alternating()[1];
    let (_upstream, base) = gateway_over(sent, 2, &[5]).await;
    let client = reqwest::Client::new();
    let anthropic_body = r#"{"model":"up","max_tokens":100,"stream":true,
        "messages":[{"role":"user","content":"Weather?"}]}"#;
    let sse = client
        .post(format!("{base}/v1/messages"))
        .header("content-type", "application/json")
        .body(anthropic_body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut open: Option<u64> = None;
    let mut inputs: Vec<String> = Vec::new();
    for data in sse.lines().filter_map(|line| line.strip_prefix("data: ")) {
        let event: Value = serde_json::from_str(data).unwrap();
        let index = event["index"].as_u64();
        match event["type"].as_str().unwrap() {
            "content_block_start" => {
                assert_eq!(open, None, "a block starts while another is open: {sse}");
                assert_eq!(event["content_block"]["type"], "tool_use");
                open = index;
                inputs.push(String::new());
            }
            "content_block_delta" => {
                assert_eq!(index, open, "a delta for a block not open: {sse}");
                inputs
                    .last_mut()
                    .unwrap()
                    .push_str(event["delta"]["partial_json"].as_str().unwrap());
            }
            "content_block_stop" => {
                assert_eq!(index, open);
                open = None;
            }
            _ => {}
        }
    }
    let inputs: Vec<Value> = inputs
        .iter()
        .map(|text| serde_json::from_str(text).unwrap())
        .collect();
    let want: Vec<Value> = sent
        .calls
        .iter()
        .map(|call| call.arguments.clone())
        .collect();
    assert_eq!(inputs, want);

    let openai_body =
        r#"{"model":"up","stream":true,"messages":[{"role":"user","content":"Weather?"}]}"#;
    let sse = client
        .post(format!("{base}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(openai_body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut calls: Vec<(String, String)> = Vec::new(); // by index: id, arguments
    for data in sse.lines().filter_map(|line| line.strip_prefix("data: ")) {
        if data == "[DONE]" {
            continue;
        }
        let chunk: Value = serde_json::from_str(data).unwrap();
        for call in chunk["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let index = call["index"].as_u64().unwrap() as usize;
            if let Some(id) = call["id"].as_str() {
                assert_eq!(index, calls.len(), "indexes 0, 1, … in order: {sse}");
                calls.push((id.to_owned(), String::new()));
            }
            calls[index]
                .1
                .push_str(call["function"]["arguments"].as_str().unwrap_or(""));
        }
    }
    let arguments: Vec<Value> = calls
        .iter()
        .map(|(_, text)| serde_json::from_str(text).unwrap())
        .collect();
    assert_eq!(arguments, want);
}

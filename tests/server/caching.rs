//! A Claude Code shaped request through the gateway to an Anthropic upstream
//! over loopback: the upstream receives its mid-conversation system message,
//! every `cache_control` with its TTL and the tools' `defer_loading`, in both
//! modes.

#![cfg(all(feature = "server", feature = "anthropic"))]

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use lmstack::provider::anthropic::{Anthropic, AnthropicConfig};
use lmstack::server::Gateway;
use serde_json::Value;

use crate::common::fixture;

const REPLY: &str = r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Done."}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":2}}"#;

const STREAM: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":0}}}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Done.\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

/// An Anthropic upstream on loopback that keeps every request body; its base
/// URL and the bodies.
async fn recording_upstream() -> (String, Arc<Mutex<Vec<Value>>>) {
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let kept = bodies.clone();
    let app = Router::new().route(
        "/v1/messages",
        post(move |body: Bytes| {
            let body: Value = serde_json::from_slice(&body).unwrap();
            let stream = body["stream"] == true;
            kept.lock().unwrap().push(body);
            async move {
                let (kind, text) = if stream {
                    ("text/event-stream", STREAM)
                } else {
                    ("application/json", REPLY)
                };
                ([("content-type", kind)], text)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}"), bodies)
}

#[tokio::test]
async fn the_upstream_receives_every_breakpoint_and_the_system_message_in_both_modes() {
    let (upstream, bodies) = recording_upstream().await;
    let model = Anthropic::new(AnthropicConfig::new(format!("{upstream}/v1"))).unwrap();
    let gateway = Gateway::new().model("claude-sonnet-4-5", "anthropic", model, 2);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, gateway.router()).await });
    let mut sent: Value =
        serde_json::from_slice(&fixture("anthropic/hand-made/claude-code-request.json")).unwrap();
    for stream in [false, true] {
        sent["stream"] = stream.into();
        let response = reqwest::Client::new()
            .post(format!("http://{address}/v1/messages"))
            .header("content-type", "application/json")
            .body(sent.to_string())
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        assert_eq!(status, 200, "{text}");
        assert!(text.contains("Done."), "{text}");
        let received = bodies
            .lock()
            .unwrap()
            .pop()
            .expect("the upstream was called");
        for field in [
            "system",
            "messages",
            "tools",
            "thinking",
            "metadata",
            "context_management",
            "output_config",
        ] {
            assert_eq!(
                received[field], sent[field],
                "field `{field}`, stream {stream}"
            );
        }
    }
}

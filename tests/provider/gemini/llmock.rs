//! Faults injected by llmock (PyPI `llmock==0.2.2`, its Gemini router) on
//! loopback, through the real transport, the Gemini provider and the retry
//! layer: a 429 with `Retry-After`, a 5xx, a disconnect before and after the
//! first event, a truncated stream.
//!
//! These tests need the server: `.ci/test` starts it and sets
//! `LMSTACK_LLMOCK_URL`. A plain `cargo test` lists them as ignored.

#![cfg(all(feature = "gemini", feature = "retry"))]

use crate::common;

use std::time::Duration;

use common::llmock::{ANSWER, attempts, llmock, read, script, script_faults_then_answer, unique};
use lmstack::provider::TransportErrorKind;
use lmstack::provider::gemini::{Gemini, GeminiConfig};
use lmstack::retry::{Retry, RetryLayer};
use lmstack::{ChatRequest, Error, Message};
use serde_json::{Value, json};
use tower::{Layer, ServiceExt};

fn model() -> Retry<Gemini> {
    let config = GeminiConfig::new(format!("{}/gemini/v1beta", llmock()));
    RetryLayer::new()
        .initial_backoff(Duration::from_millis(50))
        .layer(Gemini::new(config).unwrap())
}

fn ask(model: &str) -> ChatRequest {
    ChatRequest::new(vec![Message::user("Count to five")])
        .model(model)
        .streaming(true)
}

/// Scripts `faults` then the answer for `name`, and streams the reply: the text
/// that arrived, and how it ended.
async fn stream_through(name: &str, faults: Value) -> (String, Result<(), Error>) {
    script_faults_then_answer(name, faults).await;
    read(model().oneshot(ask(name)).await.unwrap()).await
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn a_429_is_retried_after_its_retry_after() {
    let name = &unique("gemini-2.5-flash-429");
    let (text, end) = stream_through(
        name,
        json!([{"type": "fail", "status": 429, "retry_after": 0.6}]),
    )
    .await;
    end.unwrap();
    assert_eq!(text, ANSWER);
    let attempts = attempts(name).await;
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0]["status"], 429);
    let waited =
        attempts[1]["started_at"].as_f64().unwrap() - attempts[0]["ended_at"].as_f64().unwrap();
    assert!(waited >= 0.6, "waited {waited}s");
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn a_5xx_is_retried() {
    let name = &unique("gemini-2.5-flash-5xx");
    let (text, end) = stream_through(
        name,
        json!([{"type": "fail", "status": 503, "retry_after": 0.1}]),
    )
    .await;
    end.unwrap();
    assert_eq!(text, ANSWER);
    assert_eq!(attempts(name).await.len(), 2);
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn a_disconnect_before_the_first_event_is_retried() {
    let name = &unique("gemini-2.5-flash-drop-early");
    let fault = json!({"type": "stream_fault", "kind": "disconnect", "after_chunks": 0});
    let (text, end) = stream_through(name, json!([fault])).await;
    end.unwrap();
    assert_eq!(text, ANSWER);
    assert_eq!(attempts(name).await.len(), 2);
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn a_disconnect_after_the_first_event_is_not_retried() {
    let name = &unique("gemini-2.5-flash-drop-late");
    let fault = json!({"type": "stream_fault", "kind": "disconnect", "after_chunks": 2});
    let (text, end) = stream_through(name, json!([fault])).await;
    let error = end.expect_err("the reply ends with its error");
    assert!(error.transport_error().is_some(), "{error:?}");
    assert!(!text.is_empty() && ANSWER.starts_with(&text), "{text:?}");
    assert_eq!(attempts(name).await.len(), 1);
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn a_truncated_stream_is_an_error_not_an_answer() {
    let name = &unique("gemini-2.5-flash-truncated");
    let fault = json!({"type": "stream_fault", "kind": "truncate", "after_chunks": 2});
    let (_, end) = stream_through(name, json!([fault])).await;
    let error = end.expect_err("a stream cut before its finish reason fails");
    assert_eq!(
        error.transport_error().map(|error| error.kind),
        Some(TransportErrorKind::Truncated)
    );
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn a_call_without_an_id_and_its_result_make_a_round_trip() {
    let name = &unique("gemini-2.0-flash-tools");
    let call = json!({"name": "get_weather", "arguments": {"city": "Paris"}});
    script(
        name,
        json!([
            {"type": "reply", "tool_calls": [call]},
            {"type": "reply", "text": "Sunny."},
        ]),
    )
    .await;
    let mut request = ask(name);
    request.options.stream = false;
    request.options.tools = vec![lmstack::ToolSpec::new(
        "get_weather",
        "The weather in a city",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "additionalProperties": false}),
    )];
    let first = model()
        .oneshot(request.clone())
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let calls: Vec<_> = first.iter().flat_map(Message::calls).cloned().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].arguments, json!({"city": "Paris"}));
    let result = lmstack::ToolResult::text(&calls[0].id, "get_weather", "18°C, sunny");
    request.messages.extend(first);
    request.messages.push(Message::tool_results(vec![result]));
    let second = model()
        .oneshot(request)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(second[0].as_text(), Some("Sunny."));
    let sent = &attempts(name).await[1];
    assert_eq!(sent["status"], 200, "{sent}");
}

//! Faults injected by llmock (PyPI `llmock==0.2.2`) on its Anthropic routes
//! (`/anthropic/v1/messages`), through the real transport, the Anthropic
//! provider and the retry layer: 429 and 529 (`overloaded_error`) retried,
//! disconnects retried only before the first event, a 4xx not retried.
//!
//! Like `tests/provider/openai_chat/llmock.rs`, these need the server: `.ci/test` starts it
//! and sets `LMSTACK_LLMOCK_URL`; a plain `cargo test` lists them as ignored.
//! Each test scripts its faults for its own model name.

#![cfg(all(feature = "anthropic", feature = "retry"))]

use crate::common;

use std::time::Duration;

use common::llmock::{ANSWER, attempts, llmock, read, script, script_faults_then_answer, unique};
use lmstack::provider::TransportErrorKind;
use lmstack::provider::anthropic::{Anthropic, AnthropicConfig};
use lmstack::retry::{Retry, RetryLayer};
use lmstack::{ChatRequest, Error, Message};
use serde_json::{Value, json};
use tower::{Layer, ServiceExt};

fn model() -> Retry<Anthropic> {
    let config = AnthropicConfig::new(format!("{}/anthropic/v1", llmock()));
    RetryLayer::new()
        .initial_backoff(Duration::from_millis(50))
        .layer(Anthropic::new(config).unwrap())
}

fn ask(model: &str, stream: bool) -> ChatRequest {
    ChatRequest::new(vec![Message::user("Count to five")])
        .model(model)
        .streaming(stream)
}

/// Scripts `fault` before the answer for `name`, then streams the answer
/// through the provider and the retry layer: the text that arrived, and how
/// the reply ended.
async fn stream_through(name: &str, fault: Value) -> (String, Result<(), Error>) {
    script_faults_then_answer(name, fault).await;
    read(model().oneshot(ask(name, true)).await.unwrap()).await
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn a_529_overloaded_and_a_429_are_retried() {
    for (status, label) in [(529, "overloaded"), (429, "rate-limited")] {
        let name = &unique(&format!("anthropic-{label}"));
        let fault = json!({"type": "fail", "status": status, "retry_after": 0.1});
        let (text, end) = stream_through(name, fault).await;
        end.unwrap();
        assert_eq!(text, ANSWER);
        let attempts = attempts(name).await;
        assert_eq!(attempts.len(), 2);
        assert_eq!(attempts[0]["status"], status);
    }
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn a_disconnect_before_the_first_event_is_retried() {
    let name = &unique("anthropic-disconnect-early");
    // Only `message_start` arrives: it carries usage, but no event is delivered.
    let fault = json!({"type": "stream_fault", "kind": "disconnect", "after_chunks": 1});
    let (text, end) = stream_through(name, fault).await;
    end.unwrap();
    assert_eq!(text, ANSWER);
    assert_eq!(attempts(name).await.len(), 2);
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn a_disconnect_mid_stream_is_not_replayed() {
    let name = &unique("anthropic-disconnect-mid");
    let fault = json!({"type": "stream_fault", "kind": "disconnect", "after_chunks": 6});
    let (text, end) = stream_through(name, fault).await;
    assert!(!text.is_empty() && ANSWER.starts_with(&text), "{text:?}");
    let error = end.expect_err("the reply ends with an error");
    let kind = error.transport_error().map(|error| error.kind);
    assert_eq!(kind, Some(TransportErrorKind::Interrupted), "{error}");
    assert!(error.to_string().starts_with("anthropic: "), "{error}");
    assert_eq!(attempts(name).await.len(), 1, "not replayed after events");
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn a_4xx_is_not_retried() {
    let name = &unique("anthropic-400");
    script(
        name,
        json!([{"type": "fail", "status": 400, "message": "Bad things in the request"}]),
    )
    .await;
    let result = model().oneshot(ask(name, false)).await;
    let error = result.expect_err("a 400 fails the call");
    let provider = error.provider_error().expect("a provider error");
    assert_eq!((provider.status, provider.provider), (400, "anthropic"));
    assert_eq!(attempts(name).await.len(), 1);
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn a_scripted_tool_call_streams_and_joins() {
    let name = &unique("anthropic-tool-call");
    script(name, json!([{"type": "reply", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}], "times": 2}])).await;
    let tool = lmstack::ToolSpec::new(
        "get_weather",
        "Weather",
        json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    );
    for stream in [true, false] {
        let request = ask(name, stream).tool(tool.clone());
        let messages = model()
            .oneshot(request)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let calls: Vec<_> = messages.iter().flat_map(|m| m.calls()).collect();
        assert_eq!(calls.len(), 1, "{messages:?}");
        assert_eq!(calls[0].name, "get_weather");
        assert_eq!(
            calls[0].arguments,
            json!({"city": "Paris", "unit": "celsius"})
        );
    }
}

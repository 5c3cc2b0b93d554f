//! Faults injected by a real mock provider, llmock (PyPI `llmock==0.2.2`),
//! running on loopback: rate limits with `Retry-After`, server errors, dropped
//! connections, truncated, malformed and stalled streams — through the real
//! transport, the OpenAI provider and the retry layer; and the deployments'
//! fallbacks past each of them.
//!
//! These tests need the server: `.ci/test` starts it and sets
//! `LMSTACK_LLMOCK_URL`. A plain `cargo test` lists them as ignored; run with
//! `--include-ignored` and without the variable, they fail and say why.
//!
//! Every test uses its own model name, and its scripted faults match only that
//! model, so the tests share one server while running in parallel.

#![cfg(all(feature = "openai", feature = "retry"))]

use crate::common;

use std::time::Duration;

use common::llmock::{ANSWER, attempts, llmock, read, script, script_faults_then_answer, unique};
use lmstack::deploy::Deployments;
use lmstack::provider::openai_chat::{OpenAi, OpenAiConfig};
use lmstack::provider::transport::HttpConfig;
use lmstack::provider::{ProviderError, TransportErrorKind};
use lmstack::retry::{Retry, RetryLayer};
use lmstack::{ChatRequest, Error, Message};
use serde_json::{Value, json};
use tower::{Layer, ServiceExt};

fn model(read_timeout: Duration) -> Retry<OpenAi> {
    let config = OpenAiConfig::new(format!("{}/v1", llmock()))
        .http(HttpConfig::default().read_timeout(read_timeout));
    RetryLayer::new()
        .initial_backoff(Duration::from_millis(50))
        .layer(OpenAi::new(config).unwrap())
}

fn ask(model: &str, stream: bool) -> ChatRequest {
    ChatRequest::new(vec![Message::user("Count to five")])
        .model(model)
        .streaming(stream)
}

/// Scripts `fault` before the answer for `name`, then streams the answer through
/// the provider and the retry layer: the text that arrived, and how it ended.
async fn stream_through(
    name: &str,
    fault: Value,
    read_timeout: Duration,
) -> (String, Result<(), Error>) {
    script_faults_then_answer(name, fault).await;
    read(model(read_timeout).oneshot(ask(name, true)).await.unwrap()).await
}

/// The error a reply ended with, checked to be a transport error; read it with
/// `.transport_error()`.
fn transport_error(end: Result<(), Error>) -> Error {
    let error = end.expect_err("expected a transport error, the reply ended well");
    assert!(
        error.transport_error().is_some(),
        "expected a transport error, got {error:?}"
    );
    error
}

/// The provider error a call failed with.
fn provider_error(result: Result<lmstack::Reply, Error>) -> ProviderError {
    match result {
        Err(error) => match error.provider_error() {
            Some(provider) => provider.clone(),
            None => panic!("expected a provider error, got {error:?}"),
        },
        Ok(reply) => panic!("expected a provider error, got {reply:?}"),
    }
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn a_429_is_retried_after_its_retry_after() {
    let name = &unique("fault-429");
    script(
        name,
        json!([
            {"type": "fail", "status": 429, "retry_after": 0.6},
            {"type": "reply", "text": ANSWER},
        ]),
    )
    .await;
    let reply = model(Duration::from_secs(10))
        .oneshot(ask(name, true))
        .await
        .unwrap();
    let (text, end) = read(reply).await;
    end.unwrap();
    assert_eq!(text, ANSWER);
    let attempts = attempts(name).await;
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0]["status"], 429);
    let waited =
        attempts[1]["started_at"].as_f64().unwrap() - attempts[0]["ended_at"].as_f64().unwrap();
    assert!(
        waited >= 0.6,
        "retried after {waited}s, before the 0.6s Retry-After"
    );
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn a_5xx_is_retried_and_reported_once_retries_run_out() {
    let name = &unique("fault-503");
    script(
        name,
        json!([{"type": "fail", "status": 503, "retry_after": 0.1, "times": 3}]),
    )
    .await;
    let error = provider_error(
        model(Duration::from_secs(10))
            .oneshot(ask(name, false))
            .await,
    );
    assert_eq!(error.status, 503);
    assert!(error.to_string().starts_with("openai: HTTP 503"), "{error}");
    assert_eq!(error.retry_after, Some(Duration::from_millis(100)));
    assert_eq!(attempts(name).await.len(), 3, "one attempt and two retries");

    let name = &unique("fault-500-once");
    script(name, json!([{"type": "fail", "status": 500, "retry_after": 0.1}, {"type": "reply", "text": ANSWER}])).await;
    let messages = model(Duration::from_secs(10))
        .oneshot(ask(name, false))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(messages[0].as_text(), Some(ANSWER));
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn a_4xx_is_not_retried() {
    let name = &unique("fault-400");
    script(name, json!([{"type": "fail", "status": 400, "message": "Bad things in the request", "code": "bad_thing"}])).await;
    let error = provider_error(
        model(Duration::from_secs(10))
            .oneshot(ask(name, true))
            .await,
    );
    assert_eq!(error.status, 400);
    assert_eq!(error.code.as_deref(), Some("bad_thing"));
    assert_eq!(error.message, "Bad things in the request");
    assert_eq!(attempts(name).await.len(), 1);
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn a_retry_after_longer_than_allowed_is_not_waited_out() {
    let name = &unique("fault-429-long");
    script(
        name,
        json!([{"type": "fail", "status": 429, "retry_after": 600}]),
    )
    .await;
    let started = std::time::Instant::now();
    let error = provider_error(
        model(Duration::from_secs(10))
            .oneshot(ask(name, true))
            .await,
    );
    assert_eq!(error.retry_after, Some(Duration::from_secs(600)));
    assert!(error.to_string().contains("retry after 600s"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(attempts(name).await.len(), 1);
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn a_disconnect_before_the_first_event_is_retried() {
    let name = &unique("fault-disconnect-early");
    // The first chunk only says `role: assistant`: no event has been delivered.
    let fault = json!({"type": "stream_fault", "kind": "disconnect", "after_chunks": 1});
    let (text, end) = stream_through(name, fault, Duration::from_secs(10)).await;
    end.unwrap();
    assert_eq!(text, ANSWER);
    assert_eq!(attempts(name).await.len(), 2);
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn a_disconnect_mid_stream_ends_the_reply_with_a_clear_error() {
    let name = &unique("fault-disconnect-mid");
    let fault = json!({"type": "stream_fault", "kind": "disconnect", "after_chunks": 4});
    let (text, end) = stream_through(name, fault, Duration::from_secs(10)).await;
    assert_eq!(text, "one two three ");
    let end = transport_error(end);
    let error = end.transport_error().unwrap();
    assert_eq!(error.kind, TransportErrorKind::Interrupted, "{error}");
    assert!(
        error
            .to_string()
            .starts_with("openai: connection interrupted: POST "),
        "{error}"
    );
    assert_eq!(
        attempts(name).await.len(),
        1,
        "not replayed after events were delivered"
    );
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn a_truncated_stream_is_an_error_not_an_answer() {
    let name = &unique("fault-truncate");
    let fault = json!({"type": "stream_fault", "kind": "truncate", "after_chunks": 3});
    let (text, end) = stream_through(name, fault, Duration::from_secs(10)).await;
    assert_eq!(text, "one two ");
    let end = transport_error(end);
    let error = end.transport_error().unwrap();
    assert_eq!(error.kind, TransportErrorKind::Truncated);
    assert!(
        error
            .to_string()
            .contains("without `[DONE]` or a finish reason"),
        "{error}"
    );
    assert_eq!(attempts(name).await.len(), 1);
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn a_malformed_chunk_is_an_error_naming_the_chunk() {
    let name = &unique("fault-malformed");
    let fault = json!({"type": "stream_fault", "kind": "malformed", "after_chunks": 2});
    let (text, end) = stream_through(name, fault, Duration::from_secs(10)).await;
    assert_eq!(text, "one ");
    let end = transport_error(end);
    let error = end.transport_error().unwrap();
    assert_eq!(error.kind, TransportErrorKind::Malformed);
    assert!(
        error
            .message
            .contains("chunk 3 is not a JSON chat completion chunk"),
        "{error}"
    );
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn a_stalled_stream_times_out_and_is_retried_only_before_its_first_event() {
    let name = &unique("fault-stall-early");
    let fault =
        json!({"type": "stream_fault", "kind": "stall", "after_chunks": 0, "stall_seconds": 5});
    let (text, end) = stream_through(name, fault, Duration::from_millis(800)).await;
    end.unwrap();
    assert_eq!(text, ANSWER);
    assert_eq!(attempts(name).await.len(), 2);

    let name = &unique("fault-stall-late");
    let fault =
        json!({"type": "stream_fault", "kind": "stall", "after_chunks": 3, "stall_seconds": 5});
    let (text, end) = stream_through(name, fault, Duration::from_millis(800)).await;
    assert_eq!(text, "one two ");
    let end = transport_error(end);
    assert_eq!(
        end.transport_error().unwrap().kind,
        TransportErrorKind::Timeout
    );
    assert_eq!(attempts(name).await.len(), 1);
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn a_scripted_tool_call_streams_and_joins() {
    let name = &unique("fault-free-tool-call");
    script(name, json!([{"type": "reply", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}], "times": 2}])).await;
    let tool = lmstack::ToolSpec::new(
        "get_weather",
        "Weather",
        json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    );
    for stream in [true, false] {
        let request = ask(name, stream).tool(tool.clone());
        let messages = model(Duration::from_secs(10))
            .oneshot(request)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let calls = messages.iter().flat_map(|m| m.calls()).collect::<Vec<_>>();
        assert_eq!(calls.len(), 1, "{messages:?}");
        assert_eq!(calls[0].name, "get_weather");
        assert_eq!(
            calls[0].arguments,
            json!({"city": "Paris", "unit": "celsius"})
        );
    }
}

/// Deployments of one model over llmock, one per scripted model name (each
/// deployment's provider asks for its own), opening a breaker at the first
/// failure.
fn deployments(names: &[&str]) -> Deployments<OpenAi> {
    let providers = names.iter().map(|name| {
        let config = OpenAiConfig::new(format!("{}/v1", llmock())).model(*name);
        OpenAi::new(config).unwrap()
    });
    Deployments::new(providers).failures_to_open(1)
}

/// A request that names no model: each deployment asks for its own.
fn unnamed(stream: bool) -> ChatRequest {
    ChatRequest::new(vec![Message::user("Count to five")]).streaming(stream)
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn deployments_fall_back_past_each_llmock_fault_and_cool_the_failing_ones() {
    let limited = &unique("deploy-429");
    let broken = &unique("deploy-503");
    let dropped = &unique("deploy-disconnect-early");
    let healthy = &unique("deploy-healthy");
    script(
        limited,
        json!([{"type": "fail", "status": 429, "retry_after": 30}]),
    )
    .await;
    script(broken, json!([{"type": "fail", "status": 503, "times": 5}])).await;
    // The first chunk only says `role: assistant`: nothing was delivered yet.
    let fault = json!({"type": "stream_fault", "kind": "disconnect", "after_chunks": 1});
    script_faults_then_answer(dropped, fault).await;
    script(
        healthy,
        json!([{"type": "reply", "text": ANSWER, "times": 3}]),
    )
    .await;
    let deployments = deployments(&[limited, broken, dropped, healthy]);

    for (round, stream) in [true, false, true].into_iter().enumerate() {
        let reply = deployments.clone().oneshot(unnamed(stream)).await.unwrap();
        let messages = reply.collect().await.unwrap();
        assert_eq!(messages[0].as_text(), Some(ANSWER), "round {round}");
    }
    // Each failing deployment was called once, then cooled down.
    for name in [limited, broken, dropped] {
        assert_eq!(attempts(name).await.len(), 1, "{name}");
    }
    assert_eq!(attempts(healthy).await.len(), 3);
    assert_eq!(deployments.cooling_down(), [true, true, true, false]);
}

#[tokio::test]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn deployments_never_send_a_request_again_after_its_first_event() {
    let dropped = &unique("deploy-disconnect-mid");
    let healthy = &unique("deploy-unused");
    let fault = json!({"type": "stream_fault", "kind": "disconnect", "after_chunks": 4});
    script_faults_then_answer(dropped, fault).await;
    script(healthy, json!([{"type": "reply", "text": ANSWER}])).await;
    let deployments = deployments(&[dropped, healthy]);

    let reply = deployments.oneshot(unnamed(true)).await.unwrap();
    let (text, end) = read(reply).await;
    assert_eq!(text, "one two three ");
    transport_error(end);
    assert_eq!(attempts(dropped).await.len(), 1);
    assert!(attempts(healthy).await.is_empty());
}

//! Provider faults: a body past its limit whatever its content type and mode, a
//! line that never ends, more tool calls than a reply may hold, an answer that
//! trickles, and the retry layer's rule for streams that fail after their first
//! event — over real HTTP on loopback where the fault lives in the exchange.

use std::time::{Duration, Instant};

use lmstack::provider::TransportErrorKind;
use lmstack::provider::body::{BodyDecoder, DEFAULT_MAX_TOOL_CALLS};
use lmstack::provider::openai_chat::{Lifter, OpenAi, OpenAiConfig};
use lmstack::provider::sse::DEFAULT_MAX_EVENT_BYTES;
use lmstack::provider::transport::HttpConfig;
use lmstack::{ChatRequest, Error, Joiner, Message};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::common::server::{Answer, Server};
use crate::common::{decode_cut, sse};

/// Far longer than any of these exchanges takes on a loaded machine: a reply
/// that takes longer hangs.
const HANG_GUARD: Duration = Duration::from_secs(10);

fn request(stream: bool) -> ChatRequest {
    ChatRequest::new(vec![Message::user("Hi")]).streaming(stream)
}

/// A streamed chunk whose delta is `delta`.
fn chunk(delta: Value) -> Value {
    json!({"id": "c1", "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
}

/// An answer whose body is `pieces` written again and again, never ending.
fn endless(content_type: &str, piece: &[u8]) -> Answer {
    let mut answer = Answer::ok(content_type, piece, &[usize::MAX]);
    answer.endless = true;
    answer
}

/// Asks the server of `config` in the given mode and returns how the reply
/// failed: the call's error (non-streaming) or the stream's last item
/// (streaming). Panics when the reply succeeds or hangs.
async fn failure(config: OpenAiConfig, stream: bool) -> Error {
    let exchange = async {
        let reply = OpenAi::new(config)?.oneshot(request(stream)).await?;
        reply.collect().await
    };
    match tokio::time::timeout(HANG_GUARD, exchange).await {
        Ok(Ok(messages)) => panic!("expected an error, got {} messages", messages.len()),
        Ok(Err(error)) => error,
        Err(_) => panic!("no end within {HANG_GUARD:?}: the reply hangs"),
    }
}

/// A read timeout that no pause of these answers reaches, and a request timeout
/// that the whole of each passes.
fn deadlines(server: &Server) -> OpenAiConfig {
    let http = HttpConfig::default()
        .read_timeout(Duration::from_secs(2))
        .request_timeout(Duration::from_secs(1));
    OpenAiConfig::new(server.base_url()).http(http)
}

#[tokio::test]
async fn a_trickled_answer_stops_at_the_request_timeout() {
    let body = br#"{"choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}]}"#;
    // A byte every 200 ms: some 20 s for the whole.
    let mut trickle = Answer::ok("application/json", body, &[1]);
    trickle.pace = Duration::from_millis(200);
    let server = Server::start(vec![trickle]).await;
    let started = Instant::now();
    let error = failure(deadlines(&server), false).await;
    let elapsed = started.elapsed();
    assert_eq!(
        error.transport_error().map(|error| error.kind),
        Some(TransportErrorKind::Timeout),
        "{error}"
    );
    assert!(
        error.to_string().contains("request_timeout of 1s"),
        "{error}"
    );
    assert_eq!(error.http_status(), 504);
    #[cfg(feature = "retry")]
    assert!(lmstack::retry::is_retryable(&error));
    assert!(
        (Duration::from_secs(1)..Duration::from_millis(2500)).contains(&elapsed),
        "failed after {elapsed:?}"
    );
}

#[tokio::test]
async fn a_stream_outlives_the_request_timeout() {
    // A frame every 200 ms for 2 s.
    let mut frames: Vec<Value> = (0..10).map(|_| chunk(json!({"content": "a"}))).collect();
    frames.push(json!({"id": "c1", "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}));
    let mut answer = Answer::ok("text/event-stream", b"", &[1]);
    answer.pieces = frames
        .iter()
        .map(|frame| format!("data: {frame}\n\n").into_bytes())
        .chain([b"data: [DONE]\n\n".to_vec()])
        .collect();
    answer.pace = Duration::from_millis(200);
    let server = Server::start(vec![answer]).await;
    let started = Instant::now();
    let reply = OpenAi::new(deadlines(&server))
        .unwrap()
        .oneshot(request(true))
        .await
        .unwrap();
    let messages = tokio::time::timeout(HANG_GUARD, reply.collect())
        .await
        .expect("the stream ends")
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let text = serde_json::to_value(&messages).unwrap()[0]["text"].clone();
    assert_eq!(text, "a".repeat(10), "the whole stream: {messages:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_event_stream_stops_at_the_body_limit_in_either_mode() {
    const LIMIT: usize = 64 << 10;
    let text = format!("data: {}\n\n", chunk(json!({"content": "a".repeat(1000)})));
    for stream in [false, true] {
        let server = Server::start(vec![endless("text/event-stream", text.as_bytes())]).await;
        let config = OpenAiConfig::new(server.base_url()).max_body_bytes(LIMIT);
        let error = failure(config, stream).await;
        assert!(
            matches!(
                error,
                Error::LimitExceeded {
                    what: "the response body",
                    limit: LIMIT,
                    ..
                }
            ),
            "streaming {stream}: {error}"
        );
    }
}

#[test]
fn every_byte_counts_towards_the_body_limit_whatever_the_framing() {
    let streamed = sse(&[
        chunk(json!({"content": "Hello"})),
        chunk(json!({"content": " there"})),
    ]);
    let whole = serde_json::to_vec(&json!({"id": "c1", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello there"},
            "finish_reason": "stop"}]}))
    .unwrap();
    for (content_type, body) in [("text/event-stream", streamed), ("application/json", whole)] {
        for streaming in [false, true] {
            let decoder = |limit| {
                BodyDecoder::for_content_type(Lifter::new(), Some(content_type), streaming)
                    .with_limits(DEFAULT_MAX_EVENT_BYTES, limit)
            };
            let read = decode_cut(decoder(body.len()), &body, &[7]);
            assert!(read.is_ok(), "{content_type}, at the limit: {read:?}");
            let error = decode_cut(decoder(body.len() - 1), &body, &[7]).unwrap_err();
            assert!(
                matches!(error, Error::LimitExceeded { what: "the response body", limit, .. } if limit == body.len() - 1),
                "{content_type}, streaming {streaming}: {error}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_that_never_ends_stops_at_the_event_limit_in_either_mode() {
    const LIMIT: usize = 4 << 10;
    // `data: aaaa…` with no line end, ever.
    let line = format!("data: {}", "a".repeat(1000));
    for stream in [false, true] {
        let server = Server::start(vec![endless("text/event-stream", line.as_bytes())]).await;
        let config = OpenAiConfig::new(server.base_url()).max_event_bytes(LIMIT);
        let error = failure(config, stream).await;
        assert!(
            matches!(
                error,
                Error::LimitExceeded {
                    stage: "sse decoder",
                    what: "one event",
                    limit: LIMIT,
                }
            ),
            "streaming {stream}: {error}"
        );
    }
}

/// A streamed reply of `calls` whole calls at indexes 0, 1, … without ids
/// (older Ollama): the shape whose every call is checked against the calls
/// already closed.
fn calls_without_ids(calls: usize) -> Vec<u8> {
    let chunks: Vec<Value> = (0..calls)
        .map(|n| {
            chunk(json!({"tool_calls": [{"index": n, "type": "function",
                "function": {"name": "f", "arguments": format!("{{\"n\":{n}}}")}}]}))
        })
        .collect();
    sse(&chunks)
}

/// A non-streaming body of `calls` calls.
fn body_of_calls(calls: usize) -> Vec<u8> {
    let calls: Vec<Value> = (0..calls)
        .map(|n| {
            json!({"id": format!("call_{n}"), "type": "function",
            "function": {"name": "f", "arguments": "{}"}})
        })
        .collect();
    serde_json::to_vec(&json!({"id": "c1", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": calls},
            "finish_reason": "tool_calls"}]}))
    .unwrap()
}

fn is_call_limit(error: &Error, expected: usize) -> bool {
    matches!(error, Error::ToolCallLimit { stage: "openai", limit } if *limit == expected)
}

#[test]
fn more_tool_calls_than_the_limit_is_a_clear_error() {
    let streamed = |calls| {
        decode_cut(
            BodyDecoder::sse(Lifter::new()),
            &calls_without_ids(calls),
            &[4096],
        )
    };
    let whole = |calls| {
        decode_cut(
            BodyDecoder::json(Lifter::new()),
            &body_of_calls(calls),
            &[4096],
        )
    };
    for (framing, lift) in [
        ("streamed", &streamed as &dyn Fn(usize) -> _),
        ("whole", &whole),
    ] {
        let calls = Joiner::join(lift(DEFAULT_MAX_TOOL_CALLS).unwrap())
            .iter()
            .flat_map(Message::calls)
            .count();
        assert_eq!(
            calls, DEFAULT_MAX_TOOL_CALLS,
            "{framing}: as many as the limit"
        );
        let error = lift(DEFAULT_MAX_TOOL_CALLS + 1).unwrap_err();
        assert!(
            is_call_limit(&error, DEFAULT_MAX_TOOL_CALLS),
            "{framing}: {error}"
        );
        assert_eq!(
            error.to_string(),
            "openai: the reply has more than 1024 tool calls"
        );
    }
}

#[tokio::test]
async fn the_configured_tool_call_limit_holds_over_http_in_either_mode() {
    for stream in [false, true] {
        let server = Server::start(vec![Answer::ok(
            "text/event-stream",
            &calls_without_ids(4),
            &[100],
        )])
        .await;
        let config = OpenAiConfig::new(server.base_url()).max_tool_calls(3);
        let error = failure(config, stream).await;
        assert!(is_call_limit(&error, 3), "streaming {stream}: {error}");
    }
}

/// Each fragment is checked against the calls already closed in constant time:
/// a reply of 100,000 calls lifts whole (`benches/sse.rs` shows the cost per
/// call staying flat as the count grows).
#[test]
fn a_hundred_thousand_calls_lift_under_a_raised_limit() {
    const CALLS: usize = 100_000;
    let decoder = BodyDecoder::sse(Lifter::new()).with_max_tool_calls(CALLS);
    let events = decode_cut(decoder, &calls_without_ids(CALLS), &[64 << 10]).unwrap();
    let messages = Joiner::join(events);
    let calls: Vec<_> = messages.iter().flat_map(Message::calls).collect();
    assert_eq!(calls.len(), CALLS);
    for (n, call) in calls.iter().enumerate() {
        assert_eq!(call.id, format!("c1_call_{n}"));
        assert_eq!(call.arguments, json!({"n": n}));
    }
}

/// The retry layer retries a call only until its first event: a streaming reply
/// that fails later ends with its error, never replayed.
#[cfg(feature = "retry")]
mod through_retry {
    use lmstack::retry::is_retryable;
    use lmstack::{Event, Reply};
    use tower::Layer;

    use super::*;
    use crate::common::lift_sse;
    use crate::common::retry::{Waits, recorded_retries};

    /// A server error inside a 200 stream, as OpenAI sends one: retryable by
    /// the default classifier.
    const SERVER_ERROR: &str =
        "data: {\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\"}}\n\n";

    /// The role chunk, which makes no event, then `rest`.
    fn after_the_role_chunk(rest: &str) -> String {
        format!(
            "data: {}\n\n{rest}",
            chunk(json!({"role": "assistant", "content": ""}))
        )
    }

    /// A good streamed reply: `Hello`.
    fn hello() -> Vec<u8> {
        let mut finish = chunk(json!({}));
        finish["choices"][0]["finish_reason"] = json!("stop");
        sse(&[chunk(json!({"content": "Hello"})), finish])
    }

    /// Asks a server that answers `first`, then `hello()`, through the retry
    /// layer: the reply, the waits and the server (which counts the requests).
    async fn ask(first: &str, stream: bool) -> (Reply, Waits, Server) {
        let server = Server::start(vec![
            Answer::ok("text/event-stream", first.as_bytes(), &[usize::MAX]),
            Answer::ok("text/event-stream", &hello(), &[usize::MAX]),
        ])
        .await;
        let (layer, waits) = recorded_retries();
        let provider = OpenAi::new(OpenAiConfig::new(server.base_url())).unwrap();
        let reply = layer
            .layer(provider)
            .oneshot(request(stream))
            .await
            .unwrap();
        (reply, waits, server)
    }

    /// The waits asked for and the requests received, once the reply is read.
    fn retries(waits: &Waits, server: &Server) -> (Vec<Duration>, usize) {
        (waits.lock().unwrap().clone(), server.requests().len())
    }

    #[tokio::test]
    async fn an_error_before_the_first_event_is_retried_in_either_mode() {
        for stream in [false, true] {
            let (reply, waits, server) = ask(&after_the_role_chunk(SERVER_ERROR), stream).await;
            assert_eq!(reply.collect().await.unwrap(), lift_sse(&hello()).unwrap());
            let (waits, requests) = retries(&waits, &server);
            assert_eq!(waits, [Duration::from_millis(50)], "streaming {stream}");
            assert_eq!(requests, 2, "streaming {stream}");
        }
    }

    #[tokio::test]
    async fn an_error_after_the_first_event_of_a_stream_ends_it_and_is_not_retried() {
        let hel = format!("data: {}\n\n", chunk(json!({"content": "Hel"})));
        let (reply, waits, server) = ask(&after_the_role_chunk(&(hel + SERVER_ERROR)), true).await;
        let items: Vec<Result<Event, Error>> = futures::StreamExt::collect(reply).await;
        let (waits, requests) = retries(&waits, &server);
        assert!(
            matches!(&items[..], [Ok(Event::TextDelta(delta)), Err(_)] if delta.text == "Hel"),
            "{items:?}"
        );
        let error = items[1].as_ref().unwrap_err();
        let provider_error = error.provider_error().expect("the in-stream error");
        assert_eq!(provider_error.error_type.as_deref(), Some("server_error"));
        assert!(
            is_retryable(error),
            "only the first-event rule keeps it from a retry"
        );
        assert!(waits.is_empty(), "{waits:?}");
        assert_eq!(requests, 1, "not replayed after the first event");
    }

    #[tokio::test]
    async fn a_non_streaming_reply_that_fails_anywhere_is_retried() {
        // Nothing of a non-streaming reply is delivered before it is whole.
        let hel = format!("data: {}\n\n", chunk(json!({"content": "Hel"})));
        let (reply, waits, server) = ask(&after_the_role_chunk(&(hel + SERVER_ERROR)), false).await;
        assert_eq!(reply.collect().await.unwrap(), lift_sse(&hello()).unwrap());
        let (waits, requests) = retries(&waits, &server);
        assert_eq!(waits, [Duration::from_millis(50)]);
        assert_eq!(requests, 2);
    }
}

//! The Anthropic provider over real HTTP on loopback, through the real
//! transport: recorded streams served cut at random byte boundaries, the
//! endpoint and headers, recorded error answers, and the retry layer on 429,
//! 529 and a stream error.

#![cfg(feature = "anthropic")]

use crate::common;

use common::server::{Answer, Server};
use common::*;
use lmstack::provider::ApiKey;
use lmstack::provider::anthropic::{Anthropic, AnthropicConfig, Lifter};
use lmstack::provider::body::BodyDecoder;
use lmstack::{ChatRequest, Error, Message};
use tower::ServiceExt;

fn provider(server: &Server) -> Anthropic {
    let config = AnthropicConfig::new(server.base_url())
        .model("claude-test")
        .api_key(ApiKey::new("sk-ant-secret"));
    Anthropic::new(config).unwrap()
}

fn request(stream: bool) -> ChatRequest {
    ChatRequest::new(vec![Message::user("What is the weather in SF?")]).streaming(stream)
}

fn recorded_streams() -> Vec<(String, Vec<u8>)> {
    let mut streams = vec![(
        "lmdotnet".to_owned(),
        fixture("anthropic/LmDotnetTools/sample-response-anthropic.sse.txt"),
    )];
    for name in [
        "anthropic/fantasy/TestAnthropicCommon/claude-sonnet-4/multi_tool_streaming.yaml",
        "anthropic/fantasy/TestAnthropicThinking/claude-sonnet-4/thinking-streaming.yaml",
    ] {
        streams.push((
            name.to_owned(),
            cassette(name)[0].response.clone().into_bytes(),
        ));
    }
    let name = "anthropic/anthropic-sdk-python/555fb399-a54c-455b-9ac5-2c9673f18e12.json";
    streams.push((
        name.to_owned(),
        json_cassette(name)[0].response.clone().into_bytes(),
    ));
    streams
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_streams_over_loopback_cut_at_random_bytes() {
    for (name, body) in recorded_streams() {
        let expected = lift_with(BodyDecoder::sse(Lifter::new()), &body).unwrap();
        for seed in 0..4u64 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let sizes: Vec<usize> = (0..32).map(|_| rng.usize(1..=48)).collect();
            let server = Server::start(vec![Answer::ok(
                "text/event-stream; charset=utf-8",
                &body,
                &sizes,
            )])
            .await;
            let reply = provider(&server).oneshot(request(true)).await.unwrap();
            assert!(!reply.is_ready(), "a streaming reply streams");
            assert_eq!(
                reply.collect().await.unwrap(),
                expected,
                "{name}, seed {seed}"
            );
            let (headers, sent) = &server.requests()[0];
            assert_eq!(headers["x-api-key"], "sk-ant-secret");
            assert_eq!(headers["anthropic-version"], "2023-06-01");
            assert!(headers.get("authorization").is_none());
            assert_eq!(headers["accept"], "text/event-stream");
            assert_eq!(sent["model"], "claude-test");
            assert_eq!(sent["stream"], true);
            assert_eq!(sent["max_tokens"], 4096);
        }
    }
}

#[tokio::test]
async fn a_recorded_body_in_non_streaming_mode() {
    let exchange =
        &json_cassette("anthropic/anthropic-sdk-python/10e53c1d-51be-4c64-b5bf-99adb3fa4719.json")
            [0];
    let body = exchange.response.as_bytes();
    let server = Server::start(vec![Answer::ok("application/json", body, &[7, 100, 3])]).await;
    let reply = provider(&server).oneshot(request(false)).await.unwrap();
    assert!(reply.is_ready());
    assert_eq!(
        reply.collect().await.unwrap(),
        lift_with(BodyDecoder::json(Lifter::new()), body).unwrap()
    );
    assert!(server.requests()[0].1.get("stream").is_none());
}

#[tokio::test]
async fn a_recorded_400_is_a_typed_error_that_is_not_retryable() {
    let exchange =
        &json_cassette("anthropic/anthropic-sdk-python/f59a9391-643b-422c-96dc-1f28bc7ea4d7.json")
            [1];
    let server = Server::start(vec![Answer::error(
        exchange.status,
        exchange.response.as_bytes(),
        &[
            ("x-should-retry", "false"),
            ("request-id", "req_011CYHyk9NPsBYeGbC9LuDNK"),
        ],
    )])
    .await;
    let result = provider(&server).oneshot(request(false)).await;
    let Some(error) = result.as_ref().err().and_then(Error::provider_error) else {
        panic!("expected a provider error, got {result:?}");
    };
    assert_eq!(error.status, 400);
    assert_eq!(error.provider, "anthropic");
    assert_eq!(error.error_type.as_deref(), Some("invalid_request_error"));
    assert_eq!(error.should_retry, Some(false));
    assert_eq!(
        error.request_id.as_deref(),
        Some("req_011CYHyk9NPsBYeGbC9LuDNK")
    );
    #[cfg(feature = "retry")]
    assert!(!lmstack::retry::is_retryable(result.as_ref().unwrap_err()));
}

#[cfg(feature = "retry")]
mod through_retry {
    use std::time::Duration;

    use tower::Layer;

    use super::*;
    use crate::common::retry::recorded_retries;

    async fn messages_with_retries(
        server: &Server,
        stream: bool,
    ) -> (Result<Vec<Message>, Error>, Vec<Duration>) {
        let (layer, waits) = recorded_retries();
        let result = match layer.layer(provider(server)).oneshot(request(stream)).await {
            Ok(reply) => reply.collect().await,
            Err(error) => Err(error),
        };
        let waits = waits.lock().unwrap().clone();
        (result, waits)
    }

    /// The second recorded stream of fantasy's parallel-calls cassette.
    fn multi_tool_stream() -> String {
        cassette("anthropic/fantasy/TestAnthropicCommon/claude-sonnet-4/multi_tool_streaming.yaml")
            [1]
        .response
        .clone()
    }

    /// The first `n` SSE events of `body`.
    fn first_events(body: &str, n: usize) -> String {
        body.split("\n\n")
            .take(n)
            .map(|event| format!("{event}\n\n"))
            .collect()
    }

    #[tokio::test]
    async fn the_recorded_429s_with_x_should_retry_are_retried_until_the_200() {
        let exchanges = json_cassette(
            "anthropic/anthropic-sdk-python/d743d628-16aa-4c9f-ae78-51deb578f746.json",
        );
        let answers = exchanges
            .iter()
            .map(|exchange| match exchange.status {
                200 => Answer::ok("application/json", exchange.response.as_bytes(), &[64]),
                status => Answer::error(
                    status,
                    exchange.response.as_bytes(),
                    &[("x-should-retry", "true")],
                ),
            })
            .collect();
        let server = Server::start(answers).await;
        let (messages, waits) = messages_with_retries(&server, false).await;
        let expected = lift_with(
            BodyDecoder::json(Lifter::new()),
            exchanges[2].response.as_bytes(),
        )
        .unwrap();
        assert_eq!(messages.unwrap(), expected);
        assert_eq!(waits.len(), 2);
        assert_eq!(server.requests().len(), 3);
    }

    #[tokio::test]
    async fn a_529_overloaded_and_an_overloaded_stream_error_before_the_first_event_are_retried() {
        let overloaded =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        let in_stream = format!(
            "event: error\ndata: {}\n\n",
            std::str::from_utf8(overloaded).unwrap()
        );
        let body = multi_tool_stream();
        let server = Server::start(vec![
            Answer::error(529, overloaded, &[]),
            Answer::ok("text/event-stream", in_stream.as_bytes(), &[9]),
            Answer::ok("text/event-stream", body.as_bytes(), &[17]),
        ])
        .await;
        let (messages, waits) = messages_with_retries(&server, true).await;
        assert_eq!(
            messages.unwrap(),
            lift_with(BodyDecoder::sse(Lifter::new()), body.as_bytes()).unwrap()
        );
        assert_eq!(waits.len(), 2);
        assert_eq!(server.requests().len(), 3);
    }

    #[tokio::test]
    async fn a_stream_that_breaks_before_its_first_event_is_retried() {
        let body = multi_tool_stream();
        // `message_start`, an empty text block's start and a ping: no event yet.
        let head: String = first_events(&body, 3);
        let mut broken = Answer::ok("text/event-stream", head.as_bytes(), &[usize::MAX]);
        broken.break_after = true;
        let server = Server::start(vec![
            broken,
            Answer::ok("text/event-stream", body.as_bytes(), &[29]),
        ])
        .await;
        let (messages, waits) = messages_with_retries(&server, true).await;
        assert_eq!(
            messages.unwrap(),
            lift_with(BodyDecoder::sse(Lifter::new()), body.as_bytes()).unwrap()
        );
        assert_eq!(waits.len(), 1);
        assert_eq!(server.requests().len(), 2);
    }

    #[tokio::test]
    async fn a_stream_that_breaks_after_its_first_event_is_not_retried() {
        let body = multi_tool_stream();
        let head: String = first_events(&body, 4);
        assert!(head.contains("text_delta"), "the first event is in");
        let mut broken = Answer::ok("text/event-stream", head.as_bytes(), &[usize::MAX]);
        broken.break_after = true;
        let server = Server::start(vec![broken]).await;
        let (result, waits) = messages_with_retries(&server, true).await;
        assert!(result.unwrap_err().transport_error().is_some());
        assert_eq!(
            server.requests().len(),
            1,
            "not replayed after the first event"
        );
        assert!(waits.is_empty());
    }
}

#[tokio::test]
async fn the_key_goes_in_x_api_key_marked_sensitive_and_never_in_debug_output() {
    let config = AnthropicConfig::new("http://127.0.0.1:9/v1")
        .model("claude-test")
        .api_key(ApiKey::new("sk-ant-secret"));
    assert!(!format!("{config:?}").contains("sk-ant-secret"));
    let provider = Anthropic::new(config).unwrap();
    assert!(!format!("{provider:?}").contains("sk-ant-secret"));
    let http = provider.http_request(request(false)).unwrap();
    assert_eq!(http.uri(), "http://127.0.0.1:9/v1/messages");
    assert!(http.headers()["x-api-key"].is_sensitive());
    assert!(!format!("{http:?}").contains("sk-ant-secret"));
}

//! The Gemini provider over real HTTP on loopback, through the real transport:
//! recorded streams served cut at random byte boundaries, a recorded body, the
//! endpoint and key header, a 429 with Google's `RetryInfo`, an error appended
//! to a stream, and the retry layer retrying only before the first event.

#![cfg(feature = "gemini")]

use crate::common;

use common::server::{Answer, Server};
use common::*;
use lmstack::provider::ApiKey;
use lmstack::provider::body::BodyDecoder;
use lmstack::provider::gemini::{Gemini, GeminiConfig, Lifter};
use lmstack::{ChatRequest, Error, Joiner, Message};
use tower::ServiceExt;

const RECORDED: [&str; 3] = [
    "google/fantasy/TestGoogleCommon/gemini-3-pro-preview/multi_tool_streaming.yaml",
    "google/fantasy/TestGoogleThinking/gemini-3-pro-preview/thinking-streaming.yaml",
    "google/rig/gemini/streaming_multimodal_tool_results/streaming_history_preserves_hybrid_tool_result_image_parts.yaml",
];

fn provider(server: &Server) -> Gemini {
    let config = GeminiConfig::new(server.base_url())
        .model("gemini-3-pro-preview")
        .api_key(ApiKey::new("goog-very-secret"));
    Gemini::new(config).unwrap()
}

fn request(stream: bool) -> ChatRequest {
    ChatRequest::new(vec![Message::user("Add and multiply 2 and 3")]).streaming(stream)
}

fn lifted(body: &[u8], sse: bool) -> Vec<Message> {
    let decoder = if sse {
        BodyDecoder::sse(Lifter::new())
    } else {
        BodyDecoder::json(Lifter::new())
    };
    Joiner::join(decode_cut(decoder, body, &[body.len()]).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_streams_over_loopback_cut_at_random_bytes() {
    for name in RECORDED {
        for exchange in cassette(name) {
            let body = exchange.response.into_bytes();
            let expected = lifted(&body, true);
            for seed in 0..4u64 {
                let mut rng = fastrand::Rng::with_seed(seed);
                let sizes: Vec<usize> = (0..32).map(|_| rng.usize(1..=48)).collect();
                let server =
                    Server::start(vec![Answer::ok("text/event-stream", &body, &sizes)]).await;
                let reply = provider(&server).oneshot(request(true)).await.unwrap();
                let messages = reply.collect().await.unwrap();
                assert_eq!(messages, expected, "{name}, seed {seed}");
                assert_eq!(
                    server.uris(),
                    ["/v1/models/gemini-3-pro-preview:streamGenerateContent?alt=sse"]
                );
                let (headers, sent) = &server.requests()[0];
                assert_eq!(headers["x-goog-api-key"], "goog-very-secret");
                assert!(headers.get("authorization").is_none());
                assert_eq!(
                    sent["contents"][0]["parts"][0]["text"],
                    "Add and multiply 2 and 3"
                );
            }
        }
    }
}

#[tokio::test]
async fn a_recorded_body_in_non_streaming_mode() {
    let body = fixture("google/vercel-ai/google-tool-call.json");
    let server = Server::start(vec![Answer::ok("application/json", &body, &[7, 100, 3])]).await;
    let provider = provider(&server);
    assert!(
        !format!("{:?}", provider.http_request(request(false)).unwrap())
            .contains("goog-very-secret")
    );
    let messages = provider
        .oneshot(request(false))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(messages, lifted(&body, false));
    assert_eq!(
        server.uris(),
        ["/v1/models/gemini-3-pro-preview:generateContent"]
    );
}

#[tokio::test]
async fn a_429_with_retry_info_is_a_provider_error_with_its_wait() {
    let body = fixture("google/vercel-ai/google-429-retry-info.json");
    let server = Server::start(vec![Answer::error(429, &body, &[])]).await;
    let result = provider(&server).oneshot(request(true)).await;
    let Some(error) = result.as_ref().err().and_then(Error::provider_error) else {
        panic!("expected a provider error, got {result:?}");
    };
    assert_eq!(error.status, 429);
    assert_eq!(error.error_type.as_deref(), Some("RESOURCE_EXHAUSTED"));
    assert_eq!(
        error.retry_after,
        Some(std::time::Duration::from_millis(34_400))
    );
    assert_eq!(error.provider, "gemini");
}

#[tokio::test]
async fn an_error_appended_to_a_stream_ends_the_reply_after_what_came_before() {
    let body =
        fixture("google/vertexai-sdk-test-data/vertexai/streaming-failure-error-mid-stream.txt");
    let server = Server::start(vec![Answer::ok("text/event-stream", &body, &[17])]).await;
    let reply = provider(&server).oneshot(request(true)).await.unwrap();
    let (messages, error) = reply.collect_partial().await;
    assert_eq!(messages, vec![Message::assistant("First Second ")]);
    let error = error.expect("the stream ends with its error");
    assert_eq!(
        error.provider_error().and_then(|e| e.code.as_deref()),
        Some("499")
    );
}

#[cfg(feature = "retry")]
mod through_retry {
    use std::time::Duration;

    use tower::Layer;

    use super::*;
    use crate::common::retry::recorded_retries;

    #[tokio::test]
    async fn a_429_is_retried_after_its_retry_info_delay() {
        let error = br#"{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"13s"}]}}"#;
        let body = cassette(RECORDED[0])[1].response.clone().into_bytes();
        let server = Server::start(vec![
            Answer::error(429, error, &[]),
            Answer::ok("text/event-stream", &body, &[13]),
        ])
        .await;
        let (layer, waits) = recorded_retries();
        let layer = layer.max_retry_after(Duration::from_secs(60));
        let messages = layer
            .layer(provider(&server))
            .oneshot(request(true))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert_eq!(*waits.lock().unwrap(), vec![Duration::from_secs(13)]);
        assert_eq!(messages, lifted(&body, true));
    }

    #[tokio::test]
    async fn a_stream_that_breaks_after_its_first_event_is_not_retried() {
        let body = cassette(RECORDED[0])[1].response.clone();
        let head = body.split("\r\n\r\n").next().unwrap().to_owned() + "\r\n\r\n";
        let mut broken = Answer::ok("text/event-stream", head.as_bytes(), &[usize::MAX]);
        broken.break_after = true;
        let server = Server::start(vec![broken]).await;
        let (layer, waits) = recorded_retries();
        let reply = layer
            .layer(provider(&server))
            .oneshot(request(true))
            .await
            .unwrap();
        let (messages, error) = reply.collect_partial().await;
        assert!(error.is_some(), "the broken stream ends with its error");
        assert_eq!(
            messages[0].as_text(),
            Some("The sum of 2 and 3 is 5, and their product is 6")
        );
        assert!(waits.lock().unwrap().is_empty());
        assert_eq!(server.requests().len(), 1);
    }
}

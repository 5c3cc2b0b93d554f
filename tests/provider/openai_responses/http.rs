//! The Responses provider over real HTTP on loopback, through the real
//! transport: recorded streams served cut at random byte boundaries, a
//! recorded body, the endpoint and key, and an error answer whose message
//! quotes the key (redacted).

#![cfg(feature = "openai-responses")]

use crate::common;

use super::lift::{FANTASY, json, sse};
use common::server::{Answer, Server};
use common::*;
use lmstack::provider::openai_responses::{OpenAiResponses, OpenAiResponsesConfig};
use lmstack::provider::{ApiKey, REDACTED};
use lmstack::{ChatRequest, Error, Message};
use tower::ServiceExt;

const KEY: &str = "sk-responses-very-secret";

fn provider(server: &Server) -> OpenAiResponses {
    let config = OpenAiResponsesConfig::new(server.base_url())
        .model("gpt-5")
        .api_key(ApiKey::new(KEY));
    OpenAiResponses::new(config).unwrap()
}

fn request(stream: bool) -> ChatRequest {
    ChatRequest::new(vec![Message::user("Add and multiply 2 and 3")]).streaming(stream)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_streams_over_loopback_cut_at_random_bytes() {
    for exchange in cassette(FANTASY) {
        let body = exchange.response.into_bytes();
        let expected = sse(&body);
        for seed in 0..4u64 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let sizes: Vec<usize> = (0..32).map(|_| rng.usize(1..=48)).collect();
            let server = Server::start(vec![Answer::ok("text/event-stream", &body, &sizes)]).await;
            let reply = provider(&server).oneshot(request(true)).await.unwrap();
            assert_eq!(reply.collect().await.unwrap(), expected, "seed {seed}");
            assert_eq!(server.uris(), ["/v1/responses"]);
            let (headers, sent) = &server.requests()[0];
            assert_eq!(headers["authorization"], format!("Bearer {KEY}"));
            assert_eq!(sent["model"], "gpt-5");
            assert_eq!(sent["stream"], true);
            assert_eq!(sent["input"][0]["content"], "Add and multiply 2 and 3");
        }
    }
}

#[tokio::test]
async fn a_recorded_body_in_non_streaming_mode() {
    let body = fixture("openai_responses/vercel-ai/openai-reasoning-encrypted-content.1.json");
    let server = Server::start(vec![Answer::ok("application/json", &body, &[7, 100, 3])]).await;
    let reply = provider(&server).oneshot(request(false)).await.unwrap();
    assert_eq!(reply.collect().await.unwrap(), json(&body));
    let (_, sent) = &server.requests()[0];
    assert!(sent.get("stream").is_none());
}

#[tokio::test]
async fn an_error_answer_is_a_provider_error_with_the_key_redacted() {
    let body = format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {KEY}.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}}}"#
    );
    let server = Server::start(vec![Answer::error(401, body.as_bytes(), &[])]).await;
    let result = provider(&server).oneshot(request(true)).await;
    let Some(error) = result.as_ref().err().and_then(Error::provider_error) else {
        panic!("expected a provider error, got {result:?}");
    };
    assert_eq!((error.status, error.provider), (401, "openai-responses"));
    assert_eq!(error.code.as_deref(), Some("invalid_api_key"));
    assert!(
        !error.message.contains(KEY) && error.message.contains(REDACTED),
        "{}",
        error.message
    );
}

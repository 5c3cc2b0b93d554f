//! The Anthropic Messages wire against a real server: llama.cpp's own HTTP
//! server (the one `.ci/test` starts, see `tests/e2e/llamacpp.rs`) answers
//! `/v1/messages` too. SmolLM2-135M, fixed seed, temperature 0.
//!
//! `.ci/test` sets `LMSTACK_LLAMACPP_URL`; a plain `cargo test` lists these
//! tests as ignored.

#![cfg(all(feature = "anthropic", feature = "openai", feature = "retry"))]

use std::time::Duration;

use lmstack::provider::anthropic::{Anthropic, AnthropicConfig};
use lmstack::provider::openai_chat::{OpenAi, OpenAiConfig};
use lmstack::provider::transport::HttpConfig;
use lmstack::retry::RetryLayer;
use lmstack::{ChatRequest, Error, FinishReason, Joiner, Message, Reply};
use serde_json::json;
use tower::{Layer, Service, ServiceExt};

fn server() -> String {
    std::env::var("LMSTACK_LLAMACPP_URL").unwrap_or_else(|_| {
        panic!("LMSTACK_LLAMACPP_URL is not set: this test needs llama.cpp's server; .ci/test starts one and sets the variable")
    })
}

fn http() -> HttpConfig {
    HttpConfig::default().read_timeout(Duration::from_secs(120))
}

fn question(stream: bool) -> ChatRequest {
    let mut request = ChatRequest::new(vec![Message::user("What is 2+3?")]).streaming(stream);
    request.options.temperature = Some(0.0);
    request.options.max_tokens = Some(16);
    request.options.extra.insert("seed".into(), json!(42));
    request
}

/// The text, finish reason and output tokens of one answer.
async fn ask<S>(service: S, request: ChatRequest) -> (String, Option<FinishReason>, u64)
where
    S: Service<ChatRequest, Response = Reply, Error = Error> + Clone,
{
    let reply = RetryLayer::default()
        .layer(service)
        .oneshot(request)
        .await
        .unwrap();
    let mut joiner = Joiner::new();
    reply.fold_into(&mut joiner).await.unwrap();
    let finish = joiner.finish_reason().cloned();
    let messages = joiner.finish();
    let text = messages.iter().filter_map(Message::as_text).collect();
    let output = messages
        .iter()
        .find_map(|message| match message {
            Message::Usage(usage) => Some(usage.output_tokens),
            _ => None,
        })
        .expect("llama.cpp reports usage");
    (text, finish, output)
}

fn anthropic() -> Anthropic {
    let config = AnthropicConfig::new(format!("{}/v1", server()))
        .model("smollm2-135m")
        .http(http());
    Anthropic::new(config).unwrap()
}

#[tokio::test]
#[ignore = "needs llama.cpp's server: .ci/test starts one and sets LMSTACK_LLAMACPP_URL"]
async fn the_messages_wire_streams_and_completes_alike_on_llama_cpp() {
    let (whole, whole_finish, whole_tokens) = ask(anthropic(), question(false)).await;
    let (streamed, streamed_finish, streamed_tokens) = ask(anthropic(), question(true)).await;
    assert!(whole.contains('5'), "the model answers 2 + 3: {whole:?}");
    assert_eq!(whole, streamed);
    assert_eq!(whole_finish, streamed_finish);
    assert!(whole_finish.is_some(), "a stop reason is mapped");
    assert_eq!(whole_tokens, streamed_tokens);
    assert!(whole_tokens > 0);
}

#[tokio::test]
#[ignore = "needs llama.cpp's server: .ci/test starts one and sets LMSTACK_LLAMACPP_URL"]
async fn the_messages_and_chat_completions_wires_get_the_same_answer() {
    let openai = OpenAi::new(
        OpenAiConfig::new(format!("{}/v1", server()))
            .model("smollm2-135m")
            .http(http()),
    )
    .unwrap();
    let (chat, chat_finish, _) = ask(openai, question(false)).await;
    let (messages, messages_finish, _) = ask(anthropic(), question(false)).await;
    assert_eq!(chat, messages, "one model, one seed, two wires");
    assert_eq!(chat_finish, messages_finish);
}

//! End to end against llama.cpp's own HTTP server (the `xllamacpp` wheel) running
//! SmolLM2-135M on loopback, with a fixed seed and temperature 0.
//!
//! `.ci/test` installs and starts the server and sets `LMSTACK_LLAMACPP_URL`. A
//! plain `cargo test` lists these tests as ignored; run with `--include-ignored`
//! and without the variable, they fail and say why.

#![cfg(feature = "openai")]

use std::time::Duration;

use lmstack::provider::openai::{OpenAi, OpenAiConfig};
use lmstack::provider::retry::RetryLayer;
use lmstack::provider::transport::HttpConfig;
use lmstack::{ChatRequest, Event, FinishReason, Joiner, Message, Usage};
use serde_json::{Value, json};
use tower::{Layer, ServiceExt};

fn server() -> String {
    std::env::var("LMSTACK_LLAMACPP_URL").unwrap_or_else(|_| {
        panic!("LMSTACK_LLAMACPP_URL is not set: this test needs llama.cpp's server; .ci/test starts one and sets the variable")
    })
}

async fn chat(request: ChatRequest) -> (Vec<Message>, Option<FinishReason>) {
    let config = OpenAiConfig::new(format!("{}/v1", server()))
        .model("smollm2-135m")
        .http(HttpConfig::default().read_timeout(Duration::from_secs(120)));
    let model = RetryLayer::default().layer(OpenAi::new(config).unwrap());
    let reply = model.oneshot(request).await.unwrap();
    let mut joiner = Joiner::new();
    reply.fold_into(&mut joiner).await.unwrap();
    let finish = joiner.finish_reason().cloned();
    (joiner.finish(), finish)
}

fn question(stream: bool) -> ChatRequest {
    let mut request = ChatRequest::new(vec![Message::user("What is 2+3?")]).streaming(stream);
    request.options.temperature = Some(0.0);
    request.options.max_tokens = Some(16);
    request.options.extra.insert("seed".into(), json!(42));
    request
}

fn text_and_usage(messages: &[Message]) -> (String, Usage) {
    let text = messages.iter().filter_map(Message::as_text).collect();
    let usage = messages
        .iter()
        .find_map(|message| match message {
            Message::Usage(usage) => Some(usage.clone()),
            _ => None,
        })
        .expect("llama.cpp reports usage");
    (text, usage)
}

#[tokio::test]
#[ignore = "needs llama.cpp's server: .ci/test starts one and sets LMSTACK_LLAMACPP_URL"]
async fn streaming_and_non_streaming_chat_agree_on_a_real_server() {
    let (whole, whole_finish) = chat(question(false)).await;
    let (streamed, streamed_finish) = chat(question(true)).await;
    let (whole_text, whole_usage) = text_and_usage(&whole);
    let (streamed_text, streamed_usage) = text_and_usage(&streamed);
    assert!(
        whole_text.contains('5'),
        "the model answers 2 + 3: {whole_text:?}"
    );
    assert_eq!(
        streamed_text, whole_text,
        "temperature 0 and a fixed seed: the same answer in both modes"
    );
    assert_eq!(whole_finish, streamed_finish);
    assert!(matches!(
        whole_finish,
        Some(FinishReason::Stop | FinishReason::Length)
    ));
    assert_eq!(streamed_usage.output_tokens, whole_usage.output_tokens);
    assert!(whole_usage.input_tokens > 10);
    let id = whole[0]
        .metadata()
        .generation_id
        .as_deref()
        .unwrap_or_default();
    assert!(
        id.starts_with("chatcmpl-"),
        "the response id is kept: {id:?}"
    );
}

#[tokio::test]
#[ignore = "needs llama.cpp's server: .ci/test starts one and sets LMSTACK_LLAMACPP_URL"]
async fn a_streamed_reply_arrives_in_many_deltas() {
    let config = OpenAiConfig::new(format!("{}/v1", server()));
    let reply = OpenAi::new(config)
        .unwrap()
        .oneshot(question(true))
        .await
        .unwrap();
    let events = reply.collect_events().await.unwrap();
    let deltas = events
        .iter()
        .filter(|e| matches!(e, Event::TextDelta(_)))
        .count();
    assert!(deltas > 2, "token by token: {events:?}");
    assert!(matches!(events.last(), Some(Event::Finish { .. })));
}

/// The wire half of the natural-tool-use round trip: a grammar passed through
/// `extra` makes the model write a `<tool_call>` block, which arrives intact in
/// both modes. (Parsing and executing it needs the natural tool use and function
/// layers.)
#[tokio::test]
#[ignore = "needs llama.cpp's server: .ci/test starts one and sets LMSTACK_LLAMACPP_URL"]
async fn a_grammar_in_extra_makes_the_model_write_a_tool_call_block() {
    let grammar = r#"root ::= "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": " [0-9]+ ", \"b\": " [0-9]+ "}}\n</tool_call>""#;
    for stream in [false, true] {
        let mut request = ChatRequest::new(vec![
            Message::system("You can call the tool add(a, b). Answer with a tool call."),
            Message::user("What is 2 + 3?"),
        ])
        .streaming(stream);
        request.options.temperature = Some(0.0);
        request.options.max_tokens = Some(64);
        request
            .options
            .extra
            .insert("grammar".into(), json!(grammar));
        let (messages, _) = chat(request).await;
        let text: String = messages.iter().filter_map(Message::as_text).collect();
        let inner = text
            .strip_prefix("<tool_call>\n")
            .and_then(|rest| rest.strip_suffix("\n</tool_call>"))
            .unwrap_or_else(|| panic!("not a tool call block: {text:?}"));
        let call: Value = serde_json::from_str(inner).unwrap();
        assert_eq!(call["name"], "add");
        assert!(
            call["arguments"]["a"].is_u64() && call["arguments"]["b"].is_u64(),
            "{call}"
        );
    }
}

//! End to end against llama.cpp's own HTTP server (the `xllamacpp` wheel) running
//! SmolLM2-135M on loopback, with a fixed seed and temperature 0.
//!
//! `.ci/test` installs and starts the server and sets `LMSTACK_LLAMACPP_URL`. A
//! plain `cargo test` lists these tests as ignored; run with `--include-ignored`
//! and without the variable, they fail and say why.

#![cfg(all(feature = "openai", feature = "function", feature = "retry"))]

use crate::common;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lmstack::function::{FunctionCallLayer, Tool, ToolLoopLayer, ToolRegistry};
use lmstack::natural::NaturalToolUse;
use lmstack::provider::openai_chat::{LowerOptions, OpenAi, OpenAiConfig, lower};
use lmstack::provider::transport::HttpConfig;
use lmstack::retry::{Retry, RetryLayer};
use lmstack::{
    ChatRequest, Event, FinishReason, Joiner, Message, Role, ToolCall, ToolResult, Usage,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tower::{Layer, ServiceBuilder, ServiceExt};

fn server() -> String {
    std::env::var("LMSTACK_LLAMACPP_URL").unwrap_or_else(|_| {
        panic!("LMSTACK_LLAMACPP_URL is not set: this test needs llama.cpp's server; .ci/test starts one and sets the variable")
    })
}

/// The provider for the server, with retries.
fn model() -> Retry<OpenAi> {
    let config = OpenAiConfig::new(format!("{}/v1", server()))
        .model("smollm2-135m")
        .http(HttpConfig::default().read_timeout(Duration::from_secs(120)));
    RetryLayer::default().layer(OpenAi::new(config).unwrap())
}

async fn chat(request: ChatRequest) -> (Vec<Message>, Option<FinishReason>) {
    let reply = model().oneshot(request).await.unwrap();
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
    let id = whole[0].metadata().generation_id().unwrap_or_default();
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

/// A GBNF grammar that makes the model write one Hermes-style `add` call.
const GRAMMAR: &str = common::ADD_CALL_GRAMMAR;

/// The wire half of the natural-tool-use round trip: a grammar passed through
/// `extra` makes the model write a `<tool_call>` block, which arrives intact in
/// both modes.
#[tokio::test]
#[ignore = "needs llama.cpp's server: .ci/test starts one and sets LMSTACK_LLAMACPP_URL"]
async fn a_grammar_in_extra_makes_the_model_write_a_tool_call_block() {
    let grammar = GRAMMAR;
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

/// The arguments of `add`.
#[derive(Deserialize, JsonSchema)]
struct Add {
    a: u64,
    b: u64,
}

/// The requests the stack sends to the model, after the NaturalToolUse layer:
/// in the first round only, before any `<tool_response>` is in the history, the
/// grammar that makes the model write a call. Each is recorded in `sent`.
fn natural_requests(
    sent: Arc<Mutex<Vec<ChatRequest>>>,
) -> impl FnMut(ChatRequest) -> ChatRequest + Clone {
    move |mut request: ChatRequest| {
        let answered = request
            .messages
            .iter()
            .filter(|message| message.role() == Role::User)
            .filter_map(Message::as_text)
            .any(|text| text.starts_with("<tool_response"));
        if !answered {
            request
                .options
                .extra
                .insert("grammar".into(), json!(GRAMMAR));
        }
        sent.lock().unwrap().push(request.clone());
        request
    }
}

/// The natural-tool-use round trip: ToolLoop → FunctionCall(add) →
/// NaturalToolUse → the real server. The layer describes `add` in the system
/// prompt; round 1's grammar makes the model write a `<tool_call>` block; the
/// stack parses it, runs `add` and sends the call and result back as text;
/// round 2 answers.
#[tokio::test]
#[ignore = "needs llama.cpp's server: .ci/test starts one and sets LMSTACK_LLAMACPP_URL"]
async fn the_stack_parses_runs_and_answers_the_call_the_model_writes() {
    for stream in [false, true] {
        let ran = Arc::new(Mutex::new(Vec::new()));
        let add = Tool::typed("add", "Adds two whole numbers", {
            let ran = ran.clone();
            move |args: Add| {
                ran.lock().unwrap().push((args.a, args.b));
                async move { Ok::<_, Infallible>((args.a + args.b).to_string()) }
            }
        });
        let sent = Arc::new(Mutex::new(Vec::new()));
        let stack = ServiceBuilder::new()
            .layer(ToolLoopLayer::new())
            .layer(FunctionCallLayer::new(ToolRegistry::new([add]).unwrap()))
            .layer(NaturalToolUse::new())
            .map_request(natural_requests(sent.clone()))
            .service(model());
        let mut request = ChatRequest::new(vec![
            Message::system("When you have a tool's result, answer in words."),
            Message::user("What is 2 + 3?"),
        ])
        .streaming(stream);
        request.options.temperature = Some(0.0);
        request.options.max_tokens = Some(64);
        request.options.extra.insert("seed".into(), json!(42));
        let messages = stack
            .oneshot(request)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();

        // The model's call was parsed and run with its arguments.
        let calls: Vec<&ToolCall> = messages.iter().flat_map(Message::calls).collect();
        assert_eq!(calls.len(), 1, "stream {stream}: {messages:?}");
        let (a, b) = (
            calls[0].arguments["a"].as_u64().unwrap(),
            calls[0].arguments["b"].as_u64().unwrap(),
        );
        assert_eq!(*ran.lock().unwrap(), [(a, b)], "stream {stream}");
        let results: Vec<&ToolResult> = messages.iter().flat_map(Message::results).collect();
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].call_id, calls[0].id);
        assert_eq!(results[0].text_content(), (a + b).to_string());

        // Both requests described the tool in the system prompt and offered no
        // native tools; the second carried the call and the result as text,
        // without the grammar.
        let sent = sent.lock().unwrap();
        assert_eq!(sent.len(), 2, "stream {stream}: two rounds");
        for request in sent.iter() {
            assert!(request.options.tools.is_empty());
            let system = request.messages[0].as_text().unwrap();
            assert!(system.contains("## add"), "{system}");
        }
        assert!(sent[0].options.extra.contains_key("grammar"));
        assert!(!sent[1].options.extra.contains_key("grammar"));
        let wire = lower(&sent[1], &LowerOptions::default()).unwrap();
        let tail: Vec<&Value> = wire["messages"].as_array().unwrap()[2..].iter().collect();
        let id = &calls[0].id;
        assert_eq!(
            tail,
            [
                &json!({"role": "assistant", "content": format!(
                    "<tool_call name=\"add\" id=\"{id}\">\n{{\n  \"a\": {a},\n  \"b\": {b}\n}}\n</tool_call>"
                )}),
                &json!({"role": "user", "content": format!(
                    "<tool_response name=\"add\" id=\"{id}\">\n{}\n</tool_response>", a + b
                )}),
            ],
            "stream {stream}"
        );

        // Round 2 answered in text, from the result.
        let answer: String = messages
            .iter()
            .skip_while(|message| message.results().is_empty())
            .filter_map(Message::as_text)
            .collect();
        assert!(
            answer.contains(&(a + b).to_string()),
            "stream {stream}: {messages:?}"
        );
    }
}

//! `lmstack serve` as a process: the offline demo for a new user, a request in
//! one format served by an upstream of the other (a loopback server playing
//! the upstream), an MCP server's tool run by the gateway, the token rule, a bad
//! configuration, and SIGTERM draining the requests in flight.

use crate::common;

use std::time::Duration;

use common::cli::{Serving, command, write_config};
use common::server::{Answer, Server};
use lmstack::provider::anthropic::{Anthropic, AnthropicConfig};
use lmstack::provider::openai_chat::{OpenAi, OpenAiConfig};
use lmstack::{ChatRequest, Message};
use serde_json::json;
use tower::ServiceExt;

fn serve(args: &[&str]) -> Serving {
    common::cli::serve(args, None)
}

fn openai(base: &str, model: &str) -> OpenAi {
    OpenAi::new(OpenAiConfig::new(format!("{base}/v1")).model(model)).unwrap()
}

fn anthropic(base: &str, model: &str) -> Anthropic {
    Anthropic::new(AnthropicConfig::new(format!("{base}/v1")).model(model)).unwrap()
}

async fn ask<S: lmstack::service::ChatService>(client: S, stream: bool) -> Vec<Message> {
    let request = ChatRequest::new(vec![Message::user("Hi")]).streaming(stream);
    client
        .oneshot(request)
        .await
        .map_err(Into::into)
        .unwrap()
        .collect()
        .await
        .unwrap()
}

fn text(messages: &[Message]) -> String {
    messages.iter().filter_map(Message::as_text).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_configuration_the_demo_answers_both_formats() {
    let serving = serve(&[]);
    for stream in [false, true] {
        let said = text(&ask(openai(&serving.base, "lmstack-demo"), stream).await);
        assert!(said.contains("1234 × 5678 = 7,006,652"), "{said}");
        let said = text(&ask(anthropic(&serving.base, "lmstack-demo"), stream).await);
        assert!(said.contains("the red box frames the house"), "{said}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_in_one_format_is_served_by_an_upstream_of_the_other() {
    let openai_reply = json!({"id": "chatcmpl-up", "object": "chat.completion", "created": 1,
        "model": "up-gpt", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": "From an OpenAI upstream."}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}});
    let anthropic_reply = json!({"id": "msg_up", "type": "message", "role": "assistant",
        "model": "up-claude", "content": [{"type": "text", "text": "From an Anthropic upstream."}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 3, "output_tokens": 5}});
    let upstream = Server::start(vec![
        Answer::ok(
            "application/json",
            openai_reply.to_string().as_bytes(),
            &[7],
        ),
        Answer::ok(
            "application/json",
            anthropic_reply.to_string().as_bytes(),
            &[7],
        ),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let base = upstream.base_url();
    let config = write_config(
        &dir,
        &format!(
            "[models.gpt]\nprovider = \"openai\"\nbase_url = \"{base}\"\nmodel = \"up-gpt\"\nretry = false\n\n\
             [models.claude]\nprovider = \"anthropic\"\nbase_url = \"{base}\"\nmodel = \"up-claude\"\nretry = false\n"
        ),
    );
    let serving = serve(&["--config", &config]);
    // An Anthropic client asks the OpenAI-backed model, then the reverse.
    let said = text(&ask(anthropic(&serving.base, "gpt"), false).await);
    assert_eq!(said, "From an OpenAI upstream.");
    let said = text(&ask(openai(&serving.base, "claude"), false).await);
    assert_eq!(said, "From an Anthropic upstream.");
    let sent = upstream.requests();
    assert_eq!(upstream.uris(), ["/v1/chat/completions", "/v1/messages"]);
    assert_eq!(sent[0].1["model"], "up-gpt");
    assert_eq!(
        sent[0].1["messages"],
        json!([{"role": "user", "content": "Hi"}])
    );
    assert_eq!(sent[1].1["model"], "up-claude");
}

#[test]
fn without_a_token_it_listens_on_loopback_only_and_a_bad_configuration_is_named() {
    let output = command(&["serve", "--listen", "0.0.0.0:0"])
        .env_remove("LMSTACK_SERVE_TOKEN")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("refusing to listen on 0.0.0.0:0 without a token: set LMSTACK_SERVE_TOKEN"),
        "{stderr}"
    );
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(&dir, "[models.x]\nprovider = \"openia\"\n");
    let output = command(&["serve", "--config", &config]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&config) && stderr.contains("openia"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_the_requests_in_flight_finish_then_exits() {
    let slow = json!({"id": "chatcmpl-up", "object": "chat.completion", "created": 1,
        "model": "up", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": "Worth the wait."}}]});
    let mut answer = Answer::ok("application/json", slow.to_string().as_bytes(), &[64]);
    answer.stall = Duration::from_millis(800);
    let upstream = Server::start(vec![answer]).await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            "[models.slow]\nprovider = \"openai\"\nbase_url = \"{}\"\nretry = false\n",
            upstream.base_url()
        ),
    );
    let serving = serve(&["--config", &config, "--drain", "5"]);
    let base = serving.base.clone();
    let asking = tokio::spawn(async move { text(&ask(openai(&base, "slow"), false).await) });
    while upstream.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    serving.signal(libc::SIGTERM);
    assert_eq!(asking.await.unwrap(), "Worth the wait.");
    serving.exits_successfully().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs server-everything: .ci/test installs and starts it"]
async fn the_gateway_runs_an_mcp_servers_tools_itself_and_the_client_sees_the_answer() {
    let call = json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
        "model": "up", "choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_sum",
            "type": "function", "function": {"name": "get-sum", "arguments": "{\"a\": 2, \"b\": 3}"}}]}}]});
    let answer = json!({"id": "chatcmpl-2", "object": "chat.completion", "created": 1,
        "model": "up", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": "2 + 3 = 5."}}]});
    let upstream = Server::start(vec![
        Answer::ok(
            "application/json",
            call.to_string().as_bytes(),
            &[usize::MAX],
        ),
        Answer::ok(
            "application/json",
            answer.to_string().as_bytes(),
            &[usize::MAX],
        ),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            "[models.tooled]\nprovider = \"openai\"\nbase_url = \"{}\"\nretry = false\nmcp_urls = [\"{}\"]\n",
            upstream.base_url(),
            common::mcp::everything_url()
        ),
    );
    let serving = serve(&["--config", &config]);
    // An Anthropic client, an OpenAI upstream, an MCP server's tool.
    let messages = ask(anthropic(&serving.base, "tooled"), false).await;
    assert_eq!(text(&messages), "2 + 3 = 5.");
    assert!(
        messages.iter().all(|m| m.calls().is_empty()),
        "the client is never asked to run the gateway's tools: {messages:?}"
    );
    let sent = upstream.requests();
    let offered: Vec<&str> = sent[0].1["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap())
        .collect();
    assert!(offered.contains(&"get-sum"), "{offered:?}");
    let result = &sent[1].1["messages"][2];
    assert_eq!(result["role"], "tool");
    assert_eq!(result["tool_call_id"], "call_sum");
    assert!(
        result["content"].to_string().contains('5'),
        "the server's result went back upstream: {result}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_mid_stream_cancels_the_upstream_request() {
    let chunk = json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "up",
        "choices": [{"index": 0, "delta": {"content": "more "}, "finish_reason": null}]});
    let mut answer = Answer::ok(
        "text/event-stream",
        format!("data: {chunk}\n\n").as_bytes(),
        &[usize::MAX],
    );
    answer.endless = true;
    let upstream = Server::start(vec![answer]).await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            "[models.endless]\nprovider = \"openai\"\nbase_url = \"{}\"\nretry = false\n",
            upstream.base_url()
        ),
    );
    let serving = serve(&["--config", &config]);
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", serving.base))
        .header("content-type", "application/json")
        .body(r#"{"model":"endless","stream":true,"messages":[{"role":"user","content":"Go on"}]}"#)
        .send()
        .await
        .unwrap();
    let mut body = response.bytes_stream();
    use futures::StreamExt;
    let first = body.next().await.unwrap().unwrap();
    assert!(first.starts_with(b"data: "), "{first:?}");
    assert_eq!(upstream.abandoned(), 0, "the upstream is still streaming");
    drop(body);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while upstream.abandoned() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the upstream request was never cancelled"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Its log line says so.
    serving.log_containing(&["cancelled=true"]);
}

/// Gemini 3's thought signatures and call ids survive a client of another
/// format: the recorded Gemini 3 stream calls two tools with signatures; the
/// gateway hands the calls to an OpenAI client with sealed ids; the client
/// answers them; Gemini gets back exactly the parts it sent (as the recorded
/// follow-up request of a real client had them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_thought_signatures_survive_a_client_that_drops_unknown_fields() {
    let recorded = common::cassette(
        "google/fantasy/TestGoogleCommon/gemini-3-pro-preview/multi_tool_streaming.yaml",
    );
    let upstream = Server::start(
        recorded
            .iter()
            .map(|exchange| Answer::ok("text/event-stream", exchange.response.as_bytes(), &[97]))
            .collect(),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            "[models.gemini]\nprovider = \"gemini\"\nbase_url = \"{}\"\nmodel = \"gemini-3-pro-preview\"\nretry = false\n",
            upstream.base_url()
        ),
    );
    let serving = serve(&["--config", &config]);
    let tools: Vec<lmstack::ToolSpec> = ["add", "multiply"]
        .iter()
        .map(|name| {
            lmstack::ToolSpec::new(
                *name,
                "Arithmetic",
                json!({"type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}),
            )
        })
        .collect();
    let asked = Message::user("Add and multiply the number 2 and 3");
    let mut request = ChatRequest::new(vec![asked.clone()]).streaming(true);
    request.options.tools = tools.clone();
    let client = openai(&serving.base, "gemini");
    let first = client
        .clone()
        .oneshot(request)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let calls: Vec<lmstack::ToolCall> = first.iter().flat_map(|m| m.calls()).cloned().collect();
    assert_eq!(calls.len(), 2, "{first:?}");
    // Gemini signs the first of parallel calls: that one travels sealed.
    assert!(calls[0].id.starts_with("lmc_"), "sealed: {calls:?}");
    assert_eq!(calls[1].id, "k0srpqrc", "nothing to carry, nothing sealed");
    // What an OpenAI client keeps of a call: id, name, arguments.
    let kept: Vec<lmstack::ToolCall> = calls
        .iter()
        .map(|c| lmstack::ToolCall::new(c.id.clone(), c.name.clone(), c.arguments.clone()))
        .collect();
    let results = kept
        .iter()
        .map(|c| {
            let (a, b) = (
                c.arguments["a"].as_i64().unwrap(),
                c.arguments["b"].as_i64().unwrap(),
            );
            let value = if c.name == "add" { a + b } else { a * b };
            lmstack::ToolResult::text(c.id.clone(), c.name.clone(), value.to_string())
        })
        .collect();
    let mut follow_up = ChatRequest::new(vec![
        asked,
        Message::tool_calls(kept),
        Message::tool_results(results),
    ])
    .streaming(true);
    follow_up.options.tools = tools;
    let answer = client
        .oneshot(follow_up)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert!(
        text(&answer).starts_with("The sum of 2 and 3 is 5"),
        "{answer:?}"
    );

    let sent = &upstream.requests()[1].1["contents"][1]["parts"];
    let want = &recorded[1].request["contents"][1]["parts"];
    for (part, recorded_part) in sent
        .as_array()
        .unwrap()
        .iter()
        .zip(want.as_array().unwrap())
    {
        assert_eq!(part["thoughtSignature"], recorded_part["thoughtSignature"]);
        assert_eq!(
            part["functionCall"]["id"],
            recorded_part["functionCall"]["id"]
        );
        assert_eq!(
            part["functionCall"]["name"],
            recorded_part["functionCall"]["name"]
        );
    }
    assert_eq!(
        sent.as_array().unwrap().len(),
        want.as_array().unwrap().len()
    );
}

/// `lmstack serve` with one model, `[models.NAME]` of upstream `model` and
/// `natural_tools = "NATURAL"`, on a loopback upstream whose every answer says
/// `content`; an OpenAI client asks it to use `add`. What the client got, and
/// the system prompt the upstream was sent.
async fn serve_natural_tools(model: &str, natural: &str, content: &str) -> (Vec<Message>, String) {
    let reply = json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
        "model": "up", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": content}}]});
    let upstream = Server::start(vec![Answer::ok(
        "application/json",
        reply.to_string().as_bytes(),
        &[usize::MAX],
    )])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            "[models.served]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"{model}\"\nnatural_tools = \"{natural}\"\nretry = false\n",
            upstream.base_url()
        ),
    );
    let serving = serve(&["--config", &config]);
    let add = lmstack::ToolSpec::new(
        "add",
        "Adds",
        json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
    );
    let request = ChatRequest::new(vec![Message::user("Add 1")]).tool(add);
    let said = openai(&serving.base, "served")
        .oneshot(request)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let sent = &upstream.requests()[0].1;
    assert!(
        sent.get("tools").is_none(),
        "tools go in the prompt: {sent}"
    );
    let system = sent["messages"][0]["content"].as_str().unwrap().to_owned();
    (said, system)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn natural_tools_hermes_describes_the_clients_tools_in_the_hermes_form() {
    // A model name that does not look like Qwen: the file's word decides.
    let (said, system) = serve_natural_tools("some-llama", "hermes", "No tool needed.").await;
    assert_eq!(text(&said), "No tool needed.");
    assert!(system.contains(r#"{"name": "add""#), "{system}");
    assert!(!system.contains(r#"<tool_call name="add""#), "{system}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn natural_tools_takes_a_familys_form_by_name() {
    let (said, system) = serve_natural_tools("some-model", "pythonic", "[add(a=1)]").await;
    let calls: Vec<_> = said.iter().flat_map(|m| m.calls().to_vec()).collect();
    assert_eq!(calls.len(), 1, "{said:?}");
    assert_eq!(calls[0].arguments, json!({"a": 1}));
    assert!(system.contains("Example:\n[add("), "{system}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn natural_tools_model_prompts_in_and_reads_the_familys_own_markup() {
    let devstral = "mistralai/Devstral-Small-2507";
    let (said, system) =
        serve_natural_tools(devstral, "model", "[TOOL_CALLS]add[ARGS]{\"a\": 1}").await;
    let calls: Vec<_> = said.iter().flat_map(|m| m.calls().to_vec()).collect();
    assert_eq!(calls.len(), 1, "{said:?}");
    assert_eq!(
        (calls[0].name.as_str(), &calls[0].arguments),
        ("add", &json!({"a": 1}))
    );
    // Prompted in Mistral's own form.
    assert!(
        system.contains("Example:\n[TOOL_CALLS]add[ARGS]{"),
        "{system}"
    );
}

/// What an Anthropic client sends that an OpenAI upstream cannot take — its
/// beta flags, its cache breakpoints, code execution and web search's
/// `max_uses` — is dropped, the request answered, and the log says what was
/// dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_upstream_cannot_take_is_dropped_with_a_warning_in_the_log() {
    let completion = br#"{"id":"c1","object":"chat.completion","created":1,"model":"gpt",
        "choices":[{"index":0,"message":{"role":"assistant","content":"Hi."},"finish_reason":"stop"}]}"#;
    let upstream = Server::start(vec![Answer::ok(
        "application/json",
        completion,
        &[usize::MAX],
    )])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            "[models.gpt]\nprovider = \"openai\"\nbase_url = \"{}\"\nretry = false\n",
            upstream.base_url()
        ),
    );
    let serving = serve(&["--config", &config]);
    let request = json!({"model": "gpt", "max_tokens": 16, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "Hello", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}],
        "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 8},
            {"type": "code_execution_20250825", "name": "code_execution"}]});
    let response = reqwest::Client::new()
        .post(format!("{}/v1/messages", serving.base))
        .header("content-type", "application/json")
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "interleaved-thinking-2025-05-14")
        .body(request.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let sent = upstream.requests().remove(0).1.to_string();
    assert!(
        !sent.contains("cache_control") && !sent.contains("interleaved"),
        "{sent}"
    );
    assert!(
        sent.contains(r#""web_search_options":{}"#) && !sent.contains("code_execution"),
        "{sent}"
    );
    serving.log_containing(&[
        "does not take were dropped",
        "anthropic-beta",
        "cache_control breakpoints",
        "web_search max_uses",
        "server tool `code_execution`",
    ]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_same_wire_request_is_forwarded_and_its_log_line_says_so() {
    let completion = br#"{"id":"c1","object":"chat.completion","created":1,"model":"qwen3-8b",
        "choices":[{"index":0,"message":{"role":"assistant","content":"Hi."},"finish_reason":"stop"}],
        "usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}}"#;
    let answer = Answer::ok("application/json", completion, &[usize::MAX]);
    let upstream = Server::start(vec![answer.clone(), answer]).await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            "[models.gpt]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"qwen3-8b\"\n\
             retry = false\n",
            upstream.base_url()
        ),
    );
    let serving = serve(&["--config", &config]);
    let post = |body: serde_json::Value| {
        reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", serving.base))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    let hi = json!({"model": "gpt", "messages": [{"role": "user", "content": "Hi"}]});
    let response = post(hi).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(&response.bytes().await.unwrap()[..], &completion[..]);
    assert_eq!(upstream.requests()[0].1["model"], "qwen3-8b");
    serving.log_containing(&["path=\"fast\"", "input_tokens=4", "output_tokens=2"]);
    let structured = json!({"model": "gpt", "messages": [{"role": "user", "content": "Hi"}],
        "response_format": {"type": "text"}});
    assert_eq!(post(structured).await.unwrap().status(), 200);
    serving.log_containing(&["path=\"full\""]);
}

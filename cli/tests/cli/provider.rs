//! `lmstack lift`, `lower` and `chat` on the command line.

use crate::common;

use std::process::Output;

use common::cli::{calculator_rounds, lmstack};
use common::server::{Answer, Server};
use common::*;
use lmstack::provider::body::BodyDecoder;
use lmstack::provider::openai_chat::Lifter;
use serde_json::{Value, json};

fn json_lines(output: &Output) -> Vec<Value> {
    String::from_utf8(output.stdout.clone())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn lift_prints_the_messages_of_a_recorded_stream() {
    let body = fixture("openai/openai-python/parallel_tools.sse");
    let output = lmstack(&["lift", "--provider", "openai", "--stream"], &body);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        json_lines(&output),
        as_json(&lift_with(BodyDecoder::sse(Lifter::new()), &body).unwrap())
            .as_array()
            .unwrap()
            .clone()
    );
}

#[test]
fn lift_prints_events_in_either_mode() {
    let body = fixture("openai/openai-python/max_tokens_reached.sse");
    let output = lmstack(
        &["lift", "--provider", "openai", "--stream", "--events"],
        &body,
    );
    let events = json_lines(&output);
    assert_eq!(events[0]["type"], "text_delta");
    assert_eq!(
        events.last().unwrap(),
        &json!({"type": "finish", "reason": "length"})
    );

    let body = fixture("openai/openai-python/parallel_tools.json");
    let output = lmstack(&["lift", "--provider", "openai", "--events"], &body);
    let events = json_lines(&output);
    assert_eq!(events[0]["type"], "message");
    assert_eq!(events[0]["message"]["type"], "tool_calls");
    assert_eq!(
        events.last().unwrap(),
        &json!({"type": "finish", "reason": "tool_calls"})
    );
}

#[test]
fn lift_keeps_what_came_before_an_error_and_fails() {
    let output = lmstack(
        &["lift", "--provider", "openai", "--stream"],
        b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"half\"}}]}\n\n",
    );
    assert!(!output.status.success());
    assert_eq!(
        json_lines(&output),
        vec![json!({"type": "text", "role": "assistant", "text": "half"})]
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("response truncated"));
}

#[test]
fn lower_prints_the_wire_body() {
    let request = json!({
        "messages": [
            {"type": "text", "role": "user", "text": "Add 2 and 3"},
            {"type": "tool_aggregate",
             "calls": [{"id": "c1", "name": "add", "arguments": {"a": 2, "b": 3}}],
             "results": [{"call_id": "c1", "name": "add", "content": [{"type": "text", "text": "5"}], "is_error": false}]}
        ],
        "options": {"model": "gpt-4o", "max_tokens": 100}
    });
    let output = lmstack(
        &["lower", "--provider", "openai", "--max-completion-tokens"],
        request.to_string().as_bytes(),
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        json_lines(&output),
        vec![json!({
            "model": "gpt-4o",
            "max_completion_tokens": 100,
            "messages": [
                {"role": "user", "content": "Add 2 and 3"},
                {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{\"a\":2,\"b\":3}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "5"},
            ],
        })]
    );
}

#[test]
fn lower_explains_bad_input() {
    let output = lmstack(&["lower", "--provider", "openai"], b"[1, 2]");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("not a canonical request"));
}

/// Runs `lmstack chat` with `args` against `server`, off the async threads.
async fn chat(server: &Server, args: &[&str]) -> Output {
    let mut args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
    args.extend(["--base-url".into(), server.base_url()]);
    let output = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        lmstack(&args, b"")
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The second request carried the call and the calculator's result as a
/// `role: "tool"` message; both offered the demo tools.
fn assert_the_result_went_back(server: &Server) {
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "two rounds");
    for (_, sent) in &requests {
        let tools: Vec<&str> = sent["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            tools,
            ["calculator", "current_time", "detect_boxes", "draw_boxes"]
        );
    }
    assert_eq!(
        normalise_request(requests[1].1.clone())["messages"],
        json!([
            {"role": "user", "content": "What is 6 times 7?"},
            {"role": "assistant", "tool_calls": [{"id": "call_calc", "type": "function",
                "function": {"name": "calculator", "arguments": {"expression": "6 * 7"}}}]},
            {"role": "tool", "tool_call_id": "call_calc", "content": "6 * 7 = 42"},
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_runs_the_demo_tools_and_shows_the_conversation() {
    let server = Server::start(calculator_rounds(true)).await;
    let output = chat(
        &server,
        &[
            "chat",
            "--provider",
            "openai",
            "--model",
            "m",
            "--stream",
            "What is 6 times 7?",
        ],
    )
    .await;
    assert_the_result_went_back(&server);
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().filter(|line| !line.is_empty()).collect();
    assert_eq!(
        lines,
        [
            "user: What is 6 times 7?",
            "  ⚙ calculator {\"expression\":\"6 * 7\"}",
            "    → 6 * 7 = 42",
            "assistant: 6 × 7 is 42.",
        ],
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_prints_the_conversation_as_json_lines_in_non_streaming_mode() {
    let server = Server::start(calculator_rounds(false)).await;
    let output = chat(
        &server,
        &[
            "chat",
            "--provider",
            "openai",
            "--model",
            "m",
            "--json",
            "What is 6 times 7?",
        ],
    )
    .await;
    assert_the_result_went_back(&server);
    assert_eq!(server.requests()[0].1.get("stream"), None);
    assert_eq!(
        json_lines(&output),
        vec![
            json!({"type": "tool_aggregate",
                   "calls": [{"id": "call_calc", "name": "calculator", "arguments": {"expression": "6 * 7"}}],
                   "results": [{"call_id": "call_calc", "name": "calculator",
                                "content": [{"type": "text", "text": "6 * 7 = 42"}], "is_error": false}]}),
            json!({"type": "text", "role": "assistant", "text": "6 × 7 is 42.",
                   "metadata": {"generation_id": "chatcmpl-1"}}),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_with_natural_tools_talks_to_a_text_only_model() {
    let body = |text: &str| {
        json!({"id": "chatcmpl-1", "object": "chat.completion",
               "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop"}]})
        .to_string()
    };
    let server = Server::start(vec![
        Answer::ok(
            "application/json",
            body("Let me compute.\n<tool_call name=\"calculator\">\n{\"expression\": \"6 * 7\"}\n</tool_call>").as_bytes(),
            &[usize::MAX],
        ),
        Answer::ok("application/json", body("6 × 7 is 42.").as_bytes(), &[usize::MAX]),
    ])
    .await;
    let output = chat(
        &server,
        &[
            "chat",
            "--provider",
            "openai",
            "--model",
            "m",
            "--natural-tools",
            "What is 6 times 7?",
        ],
    )
    .await;
    let stdout = String::from_utf8(output.stdout).unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{stdout}");
    for (_, sent) in &requests {
        assert_eq!(sent.get("tools"), None, "no native tools");
        let system = sent["messages"][0]["content"].as_str().unwrap();
        assert!(
            system.starts_with("# Tools") && system.contains("## calculator"),
            "{system}"
        );
    }
    assert_eq!(
        requests[1].1["messages"].as_array().unwrap()[2..],
        [
            json!({"role": "assistant", "content": "Let me compute.\n<tool_call name=\"calculator\" id=\"call_1\">\n{\n  \"expression\": \"6 * 7\"\n}\n</tool_call>"}),
            json!({"role": "user", "content": "<tool_response name=\"calculator\" id=\"call_1\">\n6 * 7 = 42\n</tool_response>"}),
        ]
    );
    let lines: Vec<&str> = stdout.lines().filter(|line| !line.is_empty()).collect();
    assert_eq!(
        lines,
        [
            "user: What is 6 times 7?",
            "assistant: Let me compute.",
            "  ⚙ calculator {\"expression\":\"6 * 7\"}",
            "    → 6 * 7 = 42",
            "assistant: 6 × 7 is 42.",
        ],
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_talks_to_a_server_and_prints_the_messages() {
    let body = cassette("openai/fantasy/gpt-4o-multi_tool_streaming.yaml")[1]
        .response
        .clone();
    let server = Server::start(vec![Answer::ok(
        "text/event-stream",
        body.as_bytes(),
        &[17],
    )])
    .await;
    let output = chat(
        &server,
        &[
            "chat",
            "--provider",
            "openai",
            "--model",
            "gpt-4o",
            "--stream",
            "--json",
            "Add 2 and 3",
        ],
    )
    .await;
    assert_eq!(
        json_lines(&output),
        as_json(&lift_with(BodyDecoder::sse(Lifter::new()), body.as_bytes()).unwrap())
            .as_array()
            .unwrap()
            .clone()
    );
    let sent = &server.requests()[0].1;
    assert_eq!(sent["model"], "gpt-4o");
    assert_eq!(
        sent["messages"],
        json!([{"role": "user", "content": "Add 2 and 3"}])
    );
}

#[test]
fn lift_and_lower_speak_anthropic() {
    let body = fixture("anthropic/LmDotnetTools/sample-response-anthropic.sse.txt");
    let output = lmstack(&["lift", "--provider", "anthropic", "--stream"], &body);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let messages = json_lines(&output);
    assert_eq!(
        messages
            .iter()
            .map(|m| m["type"].clone())
            .collect::<Vec<_>>(),
        ["reasoning", "text", "tool_calls", "usage"]
    );
    assert_eq!(messages[2]["calls"].as_array().unwrap().len(), 3);

    let request = json!({"messages": [
        {"type": "text", "role": "system", "text": "Be brief."},
        {"type": "text", "role": "user", "text": "Hi"},
    ], "options": {"model": "claude"}});
    let output = lmstack(
        &["lower", "--provider", "anthropic"],
        request.to_string().as_bytes(),
    );
    assert_eq!(
        json_lines(&output),
        [
            json!({"model": "claude", "max_tokens": 4096, "system": "Be brief.",
                "messages": [{"role": "user", "content": "Hi"}]})
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_runs_the_demo_tools_over_anthropic() {
    let call = json!({"id": "msg_1", "type": "message", "role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_calc", "name": "calculator", "input": {"expression": "6 * 7"}},
    ], "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}});
    let answer = json!({"id": "msg_2", "type": "message", "role": "assistant", "content": [
        {"type": "text", "text": "6 × 7 is 42."},
    ], "stop_reason": "end_turn", "usage": {"input_tokens": 20, "output_tokens": 5}});
    let server = Server::start(vec![
        Answer::ok("application/json", call.to_string().as_bytes(), &[11]),
        Answer::ok("application/json", answer.to_string().as_bytes(), &[11]),
    ])
    .await;
    let output = chat(
        &server,
        &[
            "chat",
            "--provider",
            "anthropic",
            "--model",
            "m",
            "What is 6 times 7?",
        ],
    )
    .await;
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(stdout.contains("6 * 7 = 42"), "{stdout}");
    assert!(stdout.contains("6 × 7 is 42."), "{stdout}");
    let sent = &server.requests()[1].1;
    assert_eq!(sent["messages"][2]["content"][0]["type"], "tool_result");
    assert_eq!(
        sent["messages"][2]["content"][0]["tool_use_id"],
        "toolu_calc"
    );
}

mod openai_responses {
    use super::*;

    #[test]
    fn lift_and_lower_speak_openai_responses() {
        let body = fixture("openai_responses/vercel-ai/openai-reasoning-encrypted-content.1.json");
        let output = lmstack(&["lift", "--provider", "openai-responses"], &body);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let lines = json_lines(&output);
        assert_eq!(lines[0]["type"], "reasoning");
        assert!(
            lines[1]["text"]
                .as_str()
                .unwrap()
                .starts_with("12 + 7 = 19")
        );
        assert_eq!(lines[2]["reasoning_tokens"], 128);

        let request = json!({
            "messages": [{"type": "text", "role": "user", "text": "hi"}],
            "options": {"model": "gpt-5", "max_tokens": 10},
        });
        let output = lmstack(
            &["lower", "--provider", "openai-responses"],
            request.to_string().as_bytes(),
        );
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(
            json_lines(&output)[0],
            json!({
                "model": "gpt-5",
                "input": [{"type": "message", "role": "user", "content": "hi"}],
                "max_output_tokens": 10,
            })
        );
    }
}

mod gemini {
    use super::*;

    #[test]
    fn lift_and_lower_speak_gemini() {
        let body = fixture("google/vercel-ai/google-tool-call.json");
        let output = lmstack(&["lift", "--provider", "gemini"], &body);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let lines = json_lines(&output);
        assert_eq!(lines[0]["calls"][0]["name"], "weather");
        assert_eq!(lines[1]["reasoning_tokens"], 893);

        let request = json!({
            "messages": [{"type": "text", "role": "user", "text": "hi"}],
            "options": {"model": "gemini-2.5-flash", "max_tokens": 10},
        });
        let output = lmstack(
            &["lower", "--provider", "gemini"],
            request.to_string().as_bytes(),
        );
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(
            json_lines(&output)[0],
            json!({
                "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                "generationConfig": {"maxOutputTokens": 10},
            })
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn chat_talks_to_a_gemini_server() {
        let body = cassette(
            "google/fantasy/TestGoogleCommon/gemini-3-pro-preview/multi_tool_streaming.yaml",
        )[1]
        .response
        .clone();
        let server = Server::start(vec![Answer::ok(
            "text/event-stream",
            body.as_bytes(),
            &[17],
        )])
        .await;
        let output = chat(
            &server,
            &[
                "chat",
                "--provider",
                "gemini",
                "--model",
                "gemini-3-pro-preview",
                "--stream",
                "--json",
                "Add 2 and 3",
            ],
        )
        .await;
        let lines = json_lines(&output);
        assert!(
            lines
                .iter()
                .any(|line| line["text"] == "The sum of 2 and 3 is 5, and their product is 6."),
            "{lines:?}"
        );
        assert_eq!(
            server.uris(),
            ["/v1/models/gemini-3-pro-preview:streamGenerateContent?alt=sse"]
        );
    }
}

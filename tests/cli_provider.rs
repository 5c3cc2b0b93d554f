//! `lmstack lift`, `lower` and `chat` on the command line.

#![cfg(feature = "cli")]

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use common::server::{Answer, Server};
use common::*;
use serde_json::{Value, json};

fn lmstack(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lmstack"))
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the lmstack binary runs");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

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
        as_json(&lift_sse(&body).unwrap())
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
    let base_url = server.base_url();
    let output = tokio::task::spawn_blocking(move || {
        lmstack(
            &[
                "chat",
                "--provider",
                "openai",
                "--model",
                "gpt-4o",
                "--base-url",
                &base_url,
                "--stream",
                "Add 2 and 3",
            ],
            b"",
        )
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        json_lines(&output),
        as_json(&lift_sse(body.as_bytes()).unwrap())
            .as_array()
            .unwrap()
            .clone()
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim(),
        "The sum of 2 and 3 is 5, and the product is 6."
    );
    let sent = &server.requests()[0].1;
    assert_eq!(sent["model"], "gpt-4o");
    assert_eq!(
        sent["messages"],
        json!([{"role": "user", "content": "Add 2 and 3"}])
    );
}

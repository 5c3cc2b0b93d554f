//! `lmstack mcp list`, `lmstack mcp call` and `lmstack chat --mcp`: servers that
//! cannot start fail clearly (plain `cargo test`); with the real
//! server-everything (`.ci/test` installs and starts it) the tools are listed,
//! called, timed out and offered to a model.

use crate::common;

use std::process::Output;
use std::time::{Duration, Instant};

use base64::Engine;
use common::cli::lmstack;
use common::mcp::{everything_command, everything_dir, everything_url};
use common::server::{Answer, Server};
use serde_json::{Value, json};

/// Runs `lmstack args` with no stdin.
fn run(args: &[&str]) -> Output {
    lmstack(args, b"")
}

/// Its stderr, as text.
fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Its stdout as JSON lines, after checking it succeeded.
fn json_lines(output: &Output) -> Vec<Value> {
    assert!(output.status.success(), "{}", stderr(output));
    String::from_utf8(output.stdout.clone())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn a_command_that_does_not_exist_is_named_in_the_error() {
    let output = run(&["mcp", "list", "--server", "lmstack-no-such-server --stdio"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("could not start the MCP server `lmstack-no-such-server --stdio`"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_server_that_exits_at_once_shows_its_exit_status_and_stderr() {
    let output = run(&["mcp", "list", "--server", "sh -c 'echo boom >&2; exit 3'"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = stderr(&output);
    assert!(stderr.contains("exit status: 3"), "{stderr}");
    assert!(stderr.contains("boom"), "{stderr}");
}

#[test]
fn a_server_that_does_not_answer_is_stopped_after_the_start_timeout() {
    let started = Instant::now();
    let output = run(&[
        "mcp",
        "call",
        "--server",
        "sleep 30",
        "--start-timeout",
        "1",
        "echo",
    ]);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("`sleep 30` did not answer the handshake within 1s"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn arguments_that_are_not_a_json_object_are_refused_before_any_server_starts() {
    for (arguments, problem) in [("{", "not valid JSON"), ("[1]", "not an object")] {
        let output = run(&["mcp", "call", "--server", "sleep 30", "echo", arguments]);
        assert_eq!(output.status.code(), Some(1));
        assert!(
            stderr(&output).contains(&format!("ARGS_JSON is {problem}")),
            "{}",
            stderr(&output)
        );
    }
}

#[test]
fn an_empty_or_unterminated_server_command_is_refused() {
    for (line, problem) in [
        ("  ", "the command line is empty"),
        ("sh -c 'echo", "unterminated single quote"),
    ] {
        let output = run(&["mcp", "list", "--server", line]);
        assert_eq!(output.status.code(), Some(1));
        assert!(stderr(&output).contains(problem), "{}", stderr(&output));
    }
}

#[test]
fn mcp_needs_exactly_one_of_server_and_url() {
    assert_eq!(run(&["mcp", "list"]).status.code(), Some(2));
    let both = run(&[
        "mcp",
        "list",
        "--server",
        "x",
        "--url",
        "http://127.0.0.1:1/",
    ]);
    assert_eq!(both.status.code(), Some(2));
}

#[test]
fn chat_fails_clearly_when_an_mcp_server_does_not_start() {
    let output = run(&[
        "chat",
        "--provider",
        "openai",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--mcp",
        "lmstack-no-such-server",
        "Hi",
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("`lmstack-no-such-server`"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn chat_help_gives_the_naming_rule_of_mcp_tools() {
    let output = run(&["chat", "--help"]);
    let help = String::from_utf8(output.stdout).unwrap();
    assert!(help.contains("a name offered twice is an error"), "{help}");
    assert!(help.contains("SERVER__TOOL"), "{help}");
}

const NEEDS: &str = "needs server-everything: .ci/test installs it";

/// `--server 'npx --no-install mcp-server-everything stdio' --cwd DIR`.
fn stdio_server() -> Vec<String> {
    let (program, args) = everything_command();
    let line = std::iter::once(program).chain(args).collect::<Vec<_>>();
    vec![
        "--server".into(),
        line.join(" "),
        "--cwd".into(),
        everything_dir().to_string_lossy().into_owned(),
    ]
}

/// `--url URL`.
fn http_server() -> Vec<String> {
    vec!["--url".into(), everything_url()]
}

/// `lmstack mcp SUBCOMMAND SERVER… REST…`.
fn mcp(subcommand: &str, server: &[String], rest: &[&str]) -> Output {
    let mut args = vec!["mcp", subcommand];
    args.extend(server.iter().map(String::as_str));
    args.extend(rest);
    run(&args)
}

/// The one result of a `tool_results` line.
fn the_result(output: &Output) -> Value {
    let lines = json_lines(output);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["type"], "tool_results");
    let results = lines[0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    results[0].clone()
}

#[test]
#[ignore = "needs server-everything: .ci/test installs it"]
fn list_gives_the_tools_with_their_schemas_over_stdio_and_http() {
    for server in [stdio_server(), http_server()] {
        let tools = json_lines(&mcp("list", &server, &[]));
        let tool = |name: &str| {
            tools
                .iter()
                .find(|tool| tool["name"] == name)
                .unwrap_or_else(|| panic!("no `{name}` in {tools:?} ({NEEDS})"))
        };
        let echo = tool("echo");
        assert_eq!(echo["description"], "Echoes back the input string");
        assert_eq!(echo["parameters"]["type"], "object");
        assert_eq!(
            echo["parameters"]["properties"]["message"]["type"],
            "string"
        );
        assert_eq!(echo["parameters"]["required"], json!(["message"]));
        let image = tool("get-tiny-image");
        assert_eq!(image["parameters"]["properties"], json!({}));
        assert!(
            tools
                .iter()
                .all(|tool| tool.as_object().unwrap().len() == 3)
        );
    }
}

#[test]
#[ignore = "needs server-everything: .ci/test installs it"]
fn call_prints_the_tiny_image_between_its_texts() {
    for server in [stdio_server(), http_server()] {
        let result = the_result(&mcp("call", &server, &["get-tiny-image"]));
        assert_eq!(result["call_id"], "call_1");
        assert_eq!(result["name"], "get-tiny-image");
        assert_eq!(result["is_error"], false);
        let content = result["content"].as_array().unwrap();
        let types: Vec<&str> = content
            .iter()
            .map(|b| b["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["text", "image", "text"]);
        assert_eq!(content[1]["media_type"], "image/png");
        let png = base64::engine::general_purpose::STANDARD
            .decode(content[1]["data"].as_str().unwrap())
            .unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    }
}

#[test]
#[ignore = "needs server-everything: .ci/test installs it"]
fn call_gives_an_error_result_for_bad_arguments_with_exit_status_0() {
    let output = mcp(
        "call",
        &http_server(),
        &["--call-id", "c7", "get-sum", r#"{"a":"x","b":1}"#],
    );
    let result = the_result(&output);
    assert_eq!(result["call_id"], "c7");
    assert_eq!(result["is_error"], true);
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("get-sum")
    );
}

#[test]
#[ignore = "needs server-everything: .ci/test installs it"]
fn call_past_its_timeout_is_stopped_and_gives_an_error_result() {
    for server in [stdio_server(), http_server()] {
        let started = Instant::now();
        let output = mcp(
            "call",
            &server,
            &[
                "trigger-long-running-operation",
                r#"{"duration":30,"steps":30}"#,
                "--timeout",
                "1",
            ],
        );
        assert!(started.elapsed() < Duration::from_secs(10));
        let result = the_result(&output);
        assert_eq!(result["is_error"], true);
        assert_eq!(
            result["content"][0]["text"],
            "The tool `trigger-long-running-operation` did not finish within 1s and was stopped."
        );
    }
}

/// A Chat Completions body: one assistant message.
fn completion(message: Value, finish: &str) -> Answer {
    let body = json!({"id": "chatcmpl-1", "object": "chat.completion",
                      "choices": [{"index": 0, "message": message, "finish_reason": finish}]});
    Answer::ok(
        "application/json",
        body.to_string().as_bytes(),
        &[usize::MAX],
    )
}

/// Runs `lmstack chat --provider openai` with `args` against `server`, off the
/// async threads.
async fn chat(server: &Server, args: Vec<String>) -> Output {
    let mut all: Vec<String> = ["chat", "--provider", "openai", "--model", "m", "--json"]
        .map(String::from)
        .into();
    all.extend(["--base-url".into(), server.base_url()]);
    all.extend(args);
    tokio::task::spawn_blocking(move || {
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        run(&all)
    })
    .await
    .unwrap()
}

/// The names of the tools a request offered.
fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// `--mcp LINE --mcp-url URL … --cwd DIR`, from `--server`'s and `--url`'s
/// values.
fn chat_servers(stdio: bool, http: bool) -> Vec<String> {
    let server = stdio_server();
    let mut args = Vec::new();
    if stdio {
        args.extend(["--mcp".into(), server[1].clone()]);
    }
    if http {
        args.extend(["--mcp-url".into(), everything_url()]);
    }
    args.extend(server[2..].iter().cloned());
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs server-everything: .ci/test installs it"]
async fn chat_offers_the_mcp_tools_beside_its_own_and_runs_them() {
    let call = json!({"id": "call_echo", "type": "function",
                      "function": {"name": "echo", "arguments": "{\"message\":\"hi\"}"}});
    let server = Server::start(vec![
        completion(
            json!({"role": "assistant", "content": null, "tool_calls": [call]}),
            "tool_calls",
        ),
        completion(
            json!({"role": "assistant", "content": "It said hi."}),
            "stop",
        ),
    ])
    .await;
    let mut args = chat_servers(true, false);
    args.push("Echo hi".into());
    let output = chat(&server, args).await;
    let lines = json_lines(&output);
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "two rounds");
    let tools = offered(&requests[0].1);
    assert_eq!(
        tools[..4],
        ["calculator", "current_time", "detect_boxes", "draw_boxes"]
    );
    assert!(tools.iter().any(|name| name == "echo"), "{tools:?}");
    assert!(
        tools.iter().any(|name| name == "get-tiny-image"),
        "{tools:?}"
    );
    assert_eq!(lines[0]["type"], "tool_aggregate");
    assert_eq!(lines[0]["results"][0]["content"][0]["text"], "Echo: hi");
    assert_eq!(lines[1]["text"], "It said hi.");
    let sent_back = &requests[1].1["messages"][2];
    assert_eq!(sent_back["role"], "tool");
    assert_eq!(sent_back["tool_call_id"], "call_echo");
    assert_eq!(sent_back["content"], "Echo: hi");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs server-everything: .ci/test installs it"]
async fn chat_refuses_a_tool_name_offered_twice_unless_prefixed() {
    let server = Server::start(vec![completion(
        json!({"role": "assistant", "content": "Hello."}),
        "stop",
    )])
    .await;
    let mut args = chat_servers(true, true);
    args.push("Hi".into());
    let clash = chat(&server, args.clone()).await;
    assert_eq!(clash.status.code(), Some(1));
    let stderr = stderr(&clash);
    assert!(stderr.contains("two tools are named `echo`"), "{stderr}");
    assert!(stderr.contains("--mcp-prefix"), "{stderr}");
    assert!(
        server.requests().is_empty(),
        "no request with clashing tools"
    );

    args.insert(0, "--mcp-prefix".into());
    json_lines(&chat(&server, args).await);
    let tools = offered(&server.requests()[0].1);
    assert!(tools.iter().any(|tool| tool == "calculator"), "{tools:?}");
    let echoes: Vec<&String> = tools.iter().filter(|t| t.ends_with("__echo")).collect();
    assert_eq!(echoes.len(), 2, "one echo per server: {tools:?}");
    assert_eq!(echoes[0], "mcp-server-everything__echo");
}

#[test]
fn a_bearer_variable_that_is_not_set_is_named() {
    let output = run(&[
        "mcp",
        "list",
        "--url",
        "http://127.0.0.1:9/mcp",
        "--bearer-env",
        "LMSTACK_NO_SUCH_TOKEN",
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("--bearer-env LMSTACK_NO_SUCH_TOKEN: the variable is not set"),
        "{}",
        stderr(&output)
    );
}

#[test]
#[ignore = "needs server-everything: .ci/test installs it"]
fn call_gives_a_stdio_server_the_environment_asked_for() {
    let mut server = stdio_server();
    server.extend(["--env".into(), "LMSTACK_PROBE=a b=c".into()]);
    let result = the_result(&mcp("call", &server, &["get-env"]));
    let text = result["content"][0]["text"].as_str().unwrap();
    let env: Value = serde_json::from_str(text).unwrap();
    assert_eq!(env["LMSTACK_PROBE"], "a b=c");
}

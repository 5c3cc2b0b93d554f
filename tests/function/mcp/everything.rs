//! The MCP tool source against the real `@modelcontextprotocol/server-everything`
//! (over stdio with `npx`, and over streamable HTTP): its tools listed, results
//! kept block by block, error results, calls cancelled on the server, a server
//! that crashes restarted (a bounded number of times), and a changed tool list
//! read again. Then servers that do not start: clear errors in time, no process
//! left behind (these need no server and always run).
//!
//! The tests that talk to server-everything are `#[ignore]`d: `.ci/test` installs
//! it, sets LMSTACK_MCP_EVERYTHING_DIR and LMSTACK_MCP_EVERYTHING_URL, and runs
//! them with `--include-ignored`.

#![cfg(feature = "mcp")]

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::mcp::{everything, everything_command, everything_dir, everything_http};
use futures::StreamExt;
use lmstack::function::mcp::{McpConfig, McpError, McpServer};
use lmstack::function::{
    CallContext, FunctionCallLayer, MediaPolicy, ToolRegistry, ToolSource, sniff,
};
use lmstack::testing::ScriptedModel;
use lmstack::{ChatRequest, ContentBlock, Message, ToolCall, ToolResult};
use serde_json::{Value, json};
use tower::{Layer, ServiceExt};

/// Calls `tool` directly and makes the result under the default media policy.
async fn call(server: &McpServer, tool: &str, arguments: Value) -> ToolResult {
    let output = server
        .call(tool, arguments, &CallContext::new("c1"))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    output.into_result("c1", tool, &MediaPolicy::new())
}

/// The kinds of a result's blocks, in order.
fn kinds(result: &ToolResult) -> Vec<&'static str> {
    result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text { .. } => "text",
            ContentBlock::Image(_) => "image",
            ContentBlock::Audio(_) => "audio",
            ContentBlock::Document(_) => "document",
        })
        .collect()
}

fn png_of(block: &ContentBlock) -> Vec<u8> {
    let bytes = block.as_media().unwrap().decode().unwrap().unwrap();
    assert_eq!(sniff(&bytes), Some("image/png"), "a valid PNG");
    bytes
}

async fn lists_its_tools_with_their_schemas(config: McpConfig) {
    let server = McpServer::connect(config).await.unwrap();
    let tools = server.tools();
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    for expected in ["echo", "get-sum", "get-tiny-image", "get-annotated-message"] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    let sum = tools.iter().find(|t| t.name() == "get-sum").unwrap().spec();
    assert_eq!(sum.parameters["type"], "object");
    assert!(sum.parameters["properties"]["a"].is_object(), "{sum:?}");
    assert!(!sum.description.is_empty());
}

#[tokio::test]
#[ignore = "needs server-everything: .ci/test installs it"]
async fn stdio_lists_its_tools_with_their_schemas() {
    lists_its_tools_with_their_schemas(everything()).await;
}

#[tokio::test]
#[ignore = "needs server-everything: .ci/test installs it"]
async fn http_lists_its_tools_with_their_schemas() {
    lists_its_tools_with_their_schemas(everything_http()).await;
}

async fn the_tiny_image_comes_between_its_texts(config: McpConfig) {
    let server = McpServer::connect(config).await.unwrap();
    let result = call(&server, "get-tiny-image", json!({})).await;
    assert!(!result.is_error, "{result:?}");
    assert_eq!(kinds(&result), ["text", "image", "text"]);
    png_of(&result.content[1]);
    assert!(result.content[0].as_text().unwrap().contains("image"));
}

#[tokio::test]
#[ignore = "needs server-everything: .ci/test installs it"]
async fn stdio_the_tiny_image_comes_between_its_texts() {
    the_tiny_image_comes_between_its_texts(everything()).await;
}

#[tokio::test]
#[ignore = "needs server-everything: .ci/test installs it"]
async fn http_the_tiny_image_comes_between_its_texts() {
    the_tiny_image_comes_between_its_texts(everything_http()).await;
}

#[tokio::test]
#[ignore = "needs server-everything: .ci/test installs it"]
async fn the_annotated_message_comes_with_or_without_its_image() {
    let server = McpServer::connect(everything()).await.unwrap();
    let with = json!({"messageType": "error", "includeImage": true});
    let result = call(&server, "get-annotated-message", with).await;
    assert_eq!(kinds(&result), ["text", "image"]);
    assert_eq!(result.content[0].as_text(), Some("Error: Operation failed"));
    png_of(&result.content[1]);
    let without = json!({"messageType": "success", "includeImage": false});
    let result = call(&server, "get-annotated-message", without).await;
    assert_eq!(kinds(&result), ["text"]);
    assert!(!result.is_error);
}

#[tokio::test]
#[ignore = "needs server-everything: .ci/test installs it"]
async fn a_result_the_server_marks_as_an_error_is_an_error_result_with_its_text() {
    let server = McpServer::connect(everything()).await.unwrap();
    let result = call(&server, "get-sum", json!({"a": "x", "b": 1})).await;
    assert!(result.is_error, "{result:?}");
    assert!(result.text_content().contains("-32602"), "{result:?}");
}

#[tokio::test]
#[ignore = "needs server-everything: .ci/test installs it"]
async fn structured_content_is_kept_beside_the_text() {
    let server = McpServer::connect(everything()).await.unwrap();
    let result = call(
        &server,
        "get-structured-content",
        json!({"location": "New York"}),
    )
    .await;
    let structured = lmstack::function::mcp::structured_content(&result.metadata).unwrap();
    assert!(structured["temperature"].is_number(), "{structured}");
}

/// A stdio server-everything whose stdin is copied to `log` first: what the
/// client sends it can be read there.
fn everything_logging_to(log: &Path) -> McpConfig {
    let (program, args) = everything_command();
    let line = format!("tee -a '{}' | {program} {}", log.display(), args.join(" "));
    McpConfig::stdio("sh", ["-c", line.as_str()])
        .current_dir(everything_dir())
        .named("everything")
}

/// Waits until `log` holds a `notifications/cancelled`; its request id.
async fn cancelled_request(log: &Path) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let found = text
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find(|message| message["method"] == "notifications/cancelled");
        if let Some(message) = found {
            return message["params"]["requestId"].clone();
        }
        assert!(
            Instant::now() < deadline,
            "no notifications/cancelled in:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The id of the `tools/call` request in `log`.
fn call_request(log: &Path) -> Value {
    let text = std::fs::read_to_string(log).unwrap();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|message| message["method"] == "tools/call")
        .map(|message| message["id"].clone())
        .unwrap_or_else(|| panic!("no tools/call in:\n{text}"))
}

/// A registry of a server-everything whose stdin is logged: the temporary
/// directory (kept while it lives), the log, the registry.
async fn registry_logging_stdin() -> (tempfile::TempDir, std::path::PathBuf, ToolRegistry) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stdin.jsonl");
    let server = McpServer::connect(everything_logging_to(&log))
        .await
        .unwrap();
    let registry = ToolRegistry::builder().source(server).build().unwrap();
    (dir, log, registry)
}

fn long_call() -> Message {
    Message::tool_calls(vec![ToolCall::new(
        "c1",
        "trigger-long-running-operation",
        json!({"duration": 60, "steps": 60}),
    )])
}

#[tokio::test]
#[ignore = "needs server-everything: .ci/test installs it"]
async fn a_call_past_its_time_limit_is_an_error_result_and_cancelled_on_the_server() {
    let (_dir, log, registry) = registry_logging_stdin().await;
    // Kept to the end, as in the test below.
    let layer = FunctionCallLayer::new(registry.clone()).timeout(Duration::from_secs(1));
    let model = ScriptedModel::new().reply_messages(vec![long_call()]);
    let started = Instant::now();
    let request = ChatRequest::new(vec![Message::user("go")]);
    let messages = layer.layer(model).oneshot(request).await.unwrap();
    let messages = messages.collect().await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "stopped in time"
    );
    let result = &messages[0].results()[0];
    assert!(result.is_error && result.text_content().contains("did not finish within 1s"));
    assert_eq!(cancelled_request(&log).await, call_request(&log));
    drop(registry);
}

#[tokio::test]
#[ignore = "needs server-everything: .ci/test installs it"]
async fn dropping_the_reply_cancels_the_call_on_the_server() {
    let (_dir, log, registry) = registry_logging_stdin().await;
    let model = ScriptedModel::new().reply_messages(vec![long_call()]);
    // The application keeps its registry, so the server outlives the reply (when
    // the last handle goes, the server is stopped, and may be before it has read
    // the notification).
    let service = FunctionCallLayer::new(registry.clone()).layer(model);
    let request = ChatRequest::new(vec![Message::user("go")]).streaming(true);
    let mut reply = service.oneshot(request).await.unwrap();
    // Read the reply until the server has the call's request, then drop it.
    let reached_the_server = async {
        while !std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("tools/call")
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        item = reply.next() => panic!("the reply cannot end while its call runs: {item:?}"),
        () = reached_the_server => {}
        () = tokio::time::sleep(Duration::from_secs(10)) => panic!("the call never reached the server"),
    }
    drop(reply);
    assert_eq!(cancelled_request(&log).await, call_request(&log));
    drop(registry);
}

/// A stdio server-everything that writes its process group's id to `pid_file`
/// (the shell `exec`s `npx`, which keeps the shell's pid).
fn everything_recording_its_pid(pid_file: &Path) -> McpConfig {
    let (program, args) = everything_command();
    let line = format!(
        "echo $$ > '{}'; exec {program} {}",
        pid_file.display(),
        args.join(" ")
    );
    McpConfig::stdio("sh", ["-c", line.as_str()])
        .current_dir(everything_dir())
        .named("everything")
}

fn kill_group(pid_file: &Path) {
    let pid = std::fs::read_to_string(pid_file).unwrap();
    let status = std::process::Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", pid.trim())])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
#[ignore = "needs server-everything: .ci/test installs it"]
async fn a_server_that_crashes_mid_call_gives_an_error_result_and_is_restarted_a_bounded_number_of_times()
 {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let config = everything_recording_its_pid(&pid_file).max_restarts(1);
    let server = McpServer::connect(config).await.unwrap();
    let registry = ToolRegistry::builder()
        .source(server.clone())
        .build()
        .unwrap();
    let model = ScriptedModel::new().reply_messages(vec![long_call()]);
    let service = FunctionCallLayer::new(registry).layer(model);
    let request = ChatRequest::new(vec![Message::user("go")]);
    let reply = tokio::spawn(async move { service.oneshot(request).await?.collect().await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    kill_group(&pid_file);
    let messages = reply.await.unwrap().unwrap();
    let result = &messages[0].results()[0];
    assert!(result.is_error, "{result:?}");
    assert!(
        result
            .text_content()
            .contains("the connection closed during the call"),
        "{result:?}"
    );

    // The next use starts it again.
    let echoed = call(&server, "echo", json!({"message": "again"})).await;
    assert_eq!(echoed.text_content(), "Echo: again");

    // Past the restarts allowed, a clear error.
    kill_group(&pid_file);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let error = server
        .call("echo", json!({"message": "x"}), &CallContext::new("c"))
        .await;
    let error = error.unwrap_err();
    assert!(
        matches!(error, McpError::GaveUp { restarts: 1, .. }),
        "{error}"
    );
}

#[tokio::test]
#[ignore = "needs server-everything: .ci/test installs it"]
async fn a_tool_list_changed_notification_has_the_list_read_again() {
    // server-everything announces a change right after the handshake, when it
    // registers its conditional tools.
    let server = McpServer::connect(everything()).await.unwrap();
    let first = server.version();
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.version() == first {
        assert!(Instant::now() < deadline, "the list was not read again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(server.tools().iter().any(|t| t.name() == "get-tiny-image"));
}

// Servers that do not start: no server needed.

/// The process ids whose command line holds `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains(marker) && !status.contains("State:\tZ")
        })
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect()
}

#[tokio::test]
async fn a_command_that_does_not_exist_is_a_clear_error() {
    let config = McpConfig::stdio("lmstack-no-such-server", ["--flag"]);
    let error = McpServer::connect(config).await.unwrap_err();
    assert!(matches!(error, McpError::Spawn { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("`lmstack-no-such-server --flag`"),
        "{message}"
    );
    assert!(message.contains("No such file"), "{message}");
}

#[tokio::test]
async fn a_server_that_exits_at_once_is_an_error_with_its_status_and_stderr() {
    let config = McpConfig::stdio("sh", ["-c", "echo 'config file missing' >&2; exit 3"]);
    let error = McpServer::connect(config).await.unwrap_err();
    let message = error.to_string();
    assert!(message.contains("`sh -c echo"), "{message}");
    assert!(message.contains("exit status: 3"), "{message}");
    assert!(message.contains("config file missing"), "{message}");
}

#[tokio::test]
async fn a_server_that_hangs_at_start_is_stopped_in_time_with_its_whole_process_group() {
    // The server's child, a script whose path names it, must be stopped with it.
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("lmstack-hang-{}.sh", std::process::id());
    std::fs::write(dir.path().join(&marker), "sleep 600\n").unwrap();
    let script = format!("echo 'warming up' >&2; sh {marker} & wait");
    let config = McpConfig::stdio("sh", ["-c", script.as_str()])
        .current_dir(dir.path())
        .start_timeout(Duration::from_millis(500));
    let started = Instant::now();
    let error = McpServer::connect(config).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(matches!(error, McpError::StartTimeout { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("within 500ms"), "{message}");
    assert!(message.contains("warming up"), "{message}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with(&marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "left running: {:?}",
            processes_with(&marker)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

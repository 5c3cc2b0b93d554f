//! Faults of tools: files that block or lead outside the media root, media that
//! loads slower than the call's time limit, panics that carry secrets, text without
//! end, and a reply dropped while its tool runs.

#![cfg(feature = "function")]

use std::convert::Infallible;
use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use lmstack::function::{FunctionCallLayer, MediaPolicy, Tool, ToolOutput, ToolRegistry};
use lmstack::testing::ScriptedModel;
use lmstack::{ChatRequest, Message, ToolCall, ToolResult};
use serde_json::json;
use tokio::sync::oneshot;
use tower::{Layer, ServiceExt};

const PNG: &[u8] =
    b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";

/// How long a reply that must not hang is given before the test gives up on it.
const GUARD: Duration = Duration::from_secs(20);

/// A tool `name` that takes no arguments and returns what `output` makes.
fn tool(name: &str, output: impl Fn() -> ToolOutput + Send + Sync + 'static) -> Tool {
    let output = std::sync::Arc::new(output);
    Tool::dynamic(name, "", json!({"type": "object"}), move |_| {
        let output = output.clone();
        async move { Ok::<_, Infallible>(output()) }
    })
}

/// The results of one call of each tool of `layer`, by a model that calls them
/// all at once, in a streaming reply; the guard fails the test if it hangs.
async fn results(layer: FunctionCallLayer) -> Vec<ToolResult> {
    tokio::time::timeout(GUARD, unguarded_results(layer))
        .await
        .expect("the reply finished")
}

/// [`results`] without the guard.
async fn unguarded_results(layer: FunctionCallLayer) -> Vec<ToolResult> {
    let calls: Vec<ToolCall> = layer
        .registry()
        .tools()
        .names()
        .enumerate()
        .map(|(i, name)| ToolCall::new(format!("c{i}"), name, json!({})))
        .collect();
    let model = ScriptedModel::new().reply_messages(vec![Message::tool_calls(calls)]);
    let request = ChatRequest::new(vec![Message::user("go")]).streaming(true);
    let reply = layer.layer(model).oneshot(request).await.unwrap();
    let messages = reply.collect().await.unwrap();
    match messages.as_slice() {
        [aggregate @ Message::ToolAggregate(_)] => aggregate.results().to_vec(),
        other => panic!("one aggregate expected: {other:?}"),
    }
}

/// Asserts that `result` is an error result whose text holds `needle`.
fn assert_error(result: &ToolResult, needle: &str) {
    assert!(result.is_error, "{result:?}");
    let text = result.text_content();
    assert!(text.contains(needle), "{needle:?} not in {text:?}");
}

fn registry(tools: impl IntoIterator<Item = Tool>) -> ToolRegistry {
    ToolRegistry::new(tools).unwrap()
}

/// A named pipe at `path`. Opened for reading, it blocks until a writer comes.
#[cfg(unix)]
fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(status.success(), "mkfifo {path:?}: {status}");
}

/// Opens the pipe for writing, which releases the readers blocked on opening it:
/// a regression then fails the test instead of hanging the runtime's shutdown on
/// its blocking threads. On a thread of its own, waited for a while, in case no
/// reader is there (the pipe must outlive the open).
#[cfg(unix)]
fn release(fifo: &Path) {
    let fifo = fifo.to_owned();
    let (opened, waiting) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = std::fs::OpenOptions::new().write(true).open(fifo);
        let _ = opened.send(());
    });
    let _ = waiting.recv_timeout(Duration::from_secs(5));
}

#[cfg(unix)]
#[tokio::test]
async fn a_fifo_in_the_media_root_is_refused_without_hanging() {
    let root = tempfile::tempdir().unwrap();
    let fifo = root.path().join("chart.png");
    mkfifo(&fifo);
    // A link inside the root to the pipe is the same pipe.
    std::os::unix::fs::symlink(&fifo, root.path().join("link.png")).unwrap();
    let layer = FunctionCallLayer::new(registry([
        tool("pipe", || ToolOutput::file("chart.png")),
        tool("link", || ToolOutput::file("link.png")),
    ]))
    .media(MediaPolicy::new().root(root.path()));
    let guarded = tokio::time::timeout(GUARD, unguarded_results(layer)).await;
    let Ok(results) = guarded else {
        release(&fifo);
        panic!("the reply hung on the pipe");
    };
    for result in &results {
        assert_error(result, "is not a regular file");
    }
}

#[tokio::test]
async fn media_loading_counts_against_the_calls_time_limit() {
    // The tool answers at once, but reading and encoding its files takes far
    // longer than the limit of a millisecond: 8 files of 4 MiB.
    let root = tempfile::tempdir().unwrap();
    let mut big = PNG.to_vec();
    big.resize(4 << 20, 0);
    std::fs::write(root.path().join("big.png"), big).unwrap();
    let slow = tool("slow", || {
        (0..8).fold(ToolOutput::new(), |output, _| {
            output.with(ToolOutput::file("big.png"))
        })
    });
    let layer = FunctionCallLayer::new(registry([slow]))
        .media(MediaPolicy::new().root(root.path()))
        .timeout(Duration::from_millis(1));
    let results = results(layer).await;
    assert_eq!(
        results[0].text_content(),
        "The tool `slow` did not finish within 1ms and was stopped."
    );
    assert!(results[0].is_error);
}

#[tokio::test]
async fn a_panic_message_does_not_reach_the_model() {
    let leaky = Tool::dynamic("leaky", "", json!({"type": "object"}), |_| async {
        if true {
            panic!("cannot connect with password SECRET");
        }
        Ok::<_, Infallible>("unreachable")
    });
    let results = results(FunctionCallLayer::new(registry([leaky]))).await;
    assert_error(&results[0], "The tool `leaky` failed unexpectedly");
    assert!(
        !results[0].text_content().contains("SECRET"),
        "{:?}",
        results[0]
    );
}

#[tokio::test]
async fn text_over_the_limit_gets_an_error_result_naming_the_limit() {
    let layer = FunctionCallLayer::new(registry([
        tool("chatty", || ToolOutput::text("x".repeat(1000))),
        // The limit holds for all the text of a result, not for each block.
        tool("blocks", || {
            ToolOutput::text("y".repeat(600)).with(ToolOutput::text("z".repeat(600)))
        }),
    ]))
    .media(MediaPolicy::new().max_text_bytes(1000));
    let results = results(layer).await;
    assert_eq!(results[0].text_content(), "x".repeat(1000), "at the limit");
    assert!(!results[0].is_error);
    assert_eq!(
        results[1].text_content(),
        "The tool `blocks` returned content that was refused: \
         the text is 1200 bytes, over the limit of 1000 bytes."
    );
    assert!(results[1].is_error);
}

#[test]
fn the_default_text_limit_is_a_mebibyte() {
    let policy = MediaPolicy::new();
    assert_eq!(policy.text_limit(), 1 << 20);
    let at_limit = ToolOutput::text("a".repeat(1 << 20)).into_result("c1", "t", &policy);
    assert!(!at_limit.is_error);
    let over = ToolOutput::text("a".repeat((1 << 20) + 1)).into_result("c1", "t", &policy);
    assert_error(&over, "over the limit of 1048576 bytes");
}

#[tokio::test]
async fn paths_out_of_the_media_root_are_refused_through_the_layer() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.png");
    std::fs::write(&secret, PNG).unwrap();
    std::fs::write(root.path().join("fine.png"), PNG).unwrap();
    let relative = Path::new("..")
        .join(outside.path().file_name().unwrap())
        .join("secret.png");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&secret, root.path().join("link.png")).unwrap();
    let tools = [
        tool("fine", || ToolOutput::file("fine.png")),
        tool("dotdot", move || ToolOutput::file(relative.clone())),
        tool("absolute", move || ToolOutput::file(secret.clone())),
    ]
    .into_iter()
    .chain(cfg!(unix).then(|| tool("symlink", || ToolOutput::file("link.png"))));
    let layer = FunctionCallLayer::new(registry(tools)).media(MediaPolicy::new().root(root.path()));
    let results = results(layer).await;
    assert!(!results[0].is_error, "inside the root: {:?}", results[0]);
    for result in &results[1..] {
        assert_error(result, "is outside the directory tools may read");
    }
}

/// Sends on its channel when dropped: how a tool observes that it was stopped.
struct SignalOnDrop(Option<oneshot::Sender<()>>);

impl Drop for SignalOnDrop {
    fn drop(&mut self) {
        if let Some(sender) = self.0.take() {
            let _ = sender.send(());
        }
    }
}

#[tokio::test]
async fn dropping_the_reply_stops_the_running_tool() {
    let (started_tx, started) = oneshot::channel::<()>();
    let (dropped_tx, dropped) = oneshot::channel::<()>();
    let handles = std::sync::Mutex::new(Some((started_tx, dropped_tx)));
    let stuck = Tool::dynamic("stuck", "", json!({"type": "object"}), move |_| {
        let (started, dropped) = handles.lock().unwrap().take().expect("called once");
        async move {
            let _guard = SignalOnDrop(Some(dropped));
            let _ = started.send(());
            futures::future::pending::<()>().await;
            Ok::<_, Infallible>("never")
        }
    });
    let model =
        ScriptedModel::new().reply_messages(vec![Message::tool_calls(vec![ToolCall::new(
            "c1",
            "stuck",
            json!({}),
        )])]);
    let request = ChatRequest::new(vec![Message::user("go")]).streaming(true);
    let mut reply = FunctionCallLayer::new(registry([stuck]))
        .layer(model)
        .oneshot(request)
        .await
        .unwrap();
    tokio::select! {
        item = reply.next() => panic!("the reply cannot end while its tool runs: {item:?}"),
        started = started => started.expect("the tool started"),
    }
    drop(reply);
    tokio::time::timeout(GUARD, dropped)
        .await
        .expect("the tool's future was dropped")
        .expect("the guard signalled its drop");
}

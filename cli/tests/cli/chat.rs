//! The interactive `lmstack chat` (no PROMPT), driven through stdin scripts
//! against a loopback model server: the history each turn sends, `/reset`,
//! `/save` and `--resume`, `/image`, `--log`, and Ctrl-C.

#![cfg(unix)]

use crate::common;

use std::io::Write;
use std::process::{Child, Output};
use std::time::{Duration, Instant};

use common::cli::{calculator_rounds, command, lmstack, spawn};
use common::server::{Answer, Server};
use common::{normalise_request, sse};
use serde_json::{Value, json};

/// A streamed answer in two deltas, `first` then `second`.
fn says(first: &str, second: &str) -> Answer {
    let chunk = |delta: Value, finish: Value| json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    Answer::ok(
        "text/event-stream",
        &sse(&[
            chunk(json!({"role": "assistant", "content": first}), Value::Null),
            chunk(json!({"content": second}), json!("stop")),
        ]),
        &[usize::MAX],
    )
}

/// The arguments of an interactive chat with `server`, and `extra`.
fn chat_args(server: &Server, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["chat", "--provider", "openai", "--model", "m"]
        .iter()
        .map(|arg| arg.to_string())
        .collect();
    args.extend(["--base-url".into(), server.base_url()]);
    args.extend(extra.iter().map(|arg| arg.to_string()));
    args
}

/// Runs an interactive chat with `server` on the stdin `script`, off the async
/// threads; it must end well.
async fn session(server: &Server, extra: &[&str], script: &str) -> Output {
    let args = chat_args(server, extra);
    let script = script.to_owned();
    let output = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        lmstack(&args, script.as_bytes())
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

/// The non-empty lines of stdout.
fn shown(output: &Output) -> Vec<String> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| !line.is_empty())
        .map(str::to_owned)
        .collect()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The messages of each request the server received.
fn sent(server: &Server) -> Vec<Value> {
    server
        .requests()
        .into_iter()
        .map(|(_, body)| body["messages"].clone())
        .collect()
}

fn text(role: &str, content: &str) -> Value {
    json!({"role": role, "content": content})
}

#[test]
fn help_explains_the_session_and_its_commands() {
    let output = lmstack(&["chat", "--help"], b"");
    let help = String::from_utf8(output.stdout).unwrap();
    assert!(help.contains("[PROMPT]"), "{help}");
    for word in [
        "interactive session",
        "/reset",
        "/save FILE",
        "/image PATH",
        "/help",
        "/quit",
        "Ctrl-C",
        "--resume <FILE>",
        "--log <FILE>",
    ] {
        assert!(help.contains(word), "{word} missing from:\n{help}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_turn_sends_the_history_so_far() {
    let server = Server::start(vec![says("Hi ", "there."), says("Still ", "here.")]).await;
    let output = session(&server, &[], "Hello\n\nAre you there?\n").await;
    assert_eq!(
        sent(&server),
        [
            json!([text("user", "Hello")]),
            json!([
                text("user", "Hello"),
                text("assistant", "Hi there."),
                text("user", "Are you there?"),
            ]),
        ]
    );
    assert!(
        server
            .requests()
            .iter()
            .all(|(_, body)| body["stream"] == true),
        "the session streams"
    );
    // No prompt marker when stdin is not a terminal: stdout is the replies alone.
    assert!(!stderr(&output).contains('>'), "{}", stderr(&output));
    assert_eq!(
        shown(&output),
        ["assistant: Hi there.", "assistant: Still here."]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_keeps_the_tool_calls_and_their_results() {
    let mut answers = calculator_rounds(true);
    answers.push(says("You are ", "welcome."));
    let server = Server::start(answers).await;
    let output = session(&server, &[], "What is 6 times 7?\nThanks\n").await;
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "two rounds, then the second turn");
    assert_eq!(
        normalise_request(requests[2].1.clone())["messages"],
        json!([
            text("user", "What is 6 times 7?"),
            {"role": "assistant", "tool_calls": [{"id": "call_calc", "type": "function",
                "function": {"name": "calculator", "arguments": {"expression": "6 * 7"}}}]},
            {"role": "tool", "tool_call_id": "call_calc", "content": "6 * 7 = 42"},
            text("assistant", "6 × 7 is 42."),
            text("user", "Thanks"),
        ])
    );
    assert_eq!(
        shown(&output),
        [
            "  ⚙ calculator {\"expression\":\"6 * 7\"}",
            "    → 6 * 7 = 42",
            "assistant: 6 × 7 is 42.",
            "assistant: You are welcome.",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_json_each_reply_prints_as_message_lines() {
    let server = Server::start(vec![says("Hi ", "there."), says("Still ", "here.")]).await;
    let output = session(&server, &["--json"], "Hello\nAre you there?\n").await;
    let printed: Vec<Value> = shown(&output)
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let texts: Vec<&Value> = printed.iter().map(|message| &message["text"]).collect();
    assert_eq!(texts, ["Hi there.", "Still here."], "{printed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_forgets_the_history_and_a_bad_command_is_only_an_error() {
    let server = Server::start(vec![says("Hi ", "there."), says("Hello ", "again.")]).await;
    let output = session(&server, &[], "Hello\n/nope\n/reset\nWho are you?\n").await;
    assert_eq!(
        sent(&server),
        [
            json!([text("user", "Hello")]),
            json!([text("user", "Who are you?")]),
        ]
    );
    let stderr = stderr(&output);
    assert!(stderr.contains("unknown command /nope"), "{stderr}");
    assert!(stderr.contains("cleared"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_conversation_resumes_in_a_new_process() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("conversation.jsonl");
    let file = file.to_str().unwrap();
    let server = Server::start(vec![says("Hi ", "there."), says("Welcome ", "back.")]).await;
    session(&server, &[], &format!("Hello\n/save {file}\n")).await;
    let saved: Vec<Value> = std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(
        saved,
        [
            json!({"type": "text", "role": "user", "text": "Hello"}),
            json!({"type": "text", "role": "assistant", "text": "Hi there.",
                   "metadata": {"generation_id": "chatcmpl-1"}}),
        ]
    );

    let output = session(&server, &["--resume", file], "I am back\n").await;
    assert_eq!(
        sent(&server)[1],
        json!([
            text("user", "Hello"),
            text("assistant", "Hi there."),
            text("user", "I am back"),
        ])
    );
    assert_eq!(shown(&output), ["assistant: Welcome back."]);
}

#[test]
fn a_bad_conversation_to_resume_is_an_error_naming_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("broken.jsonl");
    std::fs::write(
        &file,
        "{\"type\":\"text\",\"role\":\"user\",\"text\":\"Hello\"}\n\n{\"type\":\"nope\"}\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let output = lmstack(
        &[
            "chat",
            "--provider",
            "openai",
            "--model",
            "m",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--resume",
            file,
        ],
        b"Hello\n",
    );
    assert_eq!(output.status.code(), Some(1));
    let stderr = stderr(&output);
    assert!(stderr.contains(&format!("{file} line 3")), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_goes_with_the_next_prompt_and_a_non_image_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("dot.png");
    std::fs::write(&png, b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01").unwrap();
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "not an image").unwrap();
    let (png, notes) = (png.to_str().unwrap(), notes.to_str().unwrap());
    let server = Server::start(vec![says("A ", "dot."), says("Plain ", "text.")]).await;
    let output = session(
        &server,
        &[],
        &format!("/image {notes}\n/image {png}\nWhat is this?\nAnd now?\n"),
    )
    .await;
    let stderr = stderr(&output);
    assert!(
        stderr.contains(notes) && stderr.contains("not allowed"),
        "{stderr}"
    );
    let sent = sent(&server);
    let content = &sent[0][0]["content"];
    assert_eq!(sent[0][0]["role"], "user");
    assert_eq!(content[0], json!({"type": "text", "text": "What is this?"}));
    assert_eq!(content[1]["type"], "image_url");
    let url = content[1]["image_url"]["url"].as_str().unwrap();
    assert!(url.starts_with("data:image/png;base64,"), "{url}");
    assert_eq!(content.as_array().unwrap().len(), 2, "only the image");
    // The image went with one prompt only; the history keeps it.
    assert_eq!(sent[1][0]["content"], *content);
    assert_eq!(sent[1][2], text("user", "And now?"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_holds_each_turn_with_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("chat.log");
    let server = Server::start(vec![says("Hi ", "there."), says("Still ", "here.")]).await;
    session(
        &server,
        &["--log", log.to_str().unwrap()],
        "Hello\nAre you there?\n",
    )
    .await;
    let text = std::fs::read_to_string(&log).unwrap();
    for line in text.lines() {
        let entry: Value = serde_json::from_str(line).unwrap();
        assert!(
            entry["at"].as_str().is_some_and(|at| at.ends_with('Z')),
            "{line}"
        );
    }
    let exchanges = lmstack::transcript::read(text.as_bytes()).unwrap();
    assert_eq!(exchanges.len(), 2, "{text}");
    for (exchange, user_messages) in exchanges.iter().zip([1, 2]) {
        assert!(
            exchange.complete && exchange.error.is_none(),
            "{exchange:?}"
        );
        assert!(!exchange.events.is_empty());
        let users = exchange
            .request
            .messages
            .iter()
            .filter(|message| message.role() == lmstack::Role::User)
            .count();
        assert_eq!(users, user_messages);
    }
}

/// Waits until `server` has received `count` requests.
async fn until_requests(server: &Server, count: usize) {
    let start = Instant::now();
    while server.requests().len() < count {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "request {count} never came"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn interrupt(child: &Child) {
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn alive(child: &mut Child) -> bool {
    child.try_wait().unwrap().is_none()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_cancels_the_reply_and_the_session_goes_on() {
    let mut held = says("never ", "shown");
    held.stall = Duration::from_secs(60);
    let server = Server::start(vec![held, says("Quick ", "answer.")]).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("chat.log");
    let args = chat_args(&server, &["--log", log.to_str().unwrap()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = spawn(&args);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"A slow question\n").unwrap();
    until_requests(&server, 1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    interrupt(&child);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        alive(&mut child),
        "Ctrl-C during a reply ends the reply only"
    );
    // Ctrl-C at the prompt does not end the session either.
    interrupt(&child);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(alive(&mut child), "Ctrl-C at the prompt ends nothing");

    stdin.write_all(b"A quick one\n").unwrap();
    until_requests(&server, 2).await;
    drop(stdin);
    let output = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let stderr = stderr(&output);
    assert!(stderr.contains("[cancelled]"), "{stderr}");
    assert_eq!(shown(&output), ["assistant: Quick answer."]);
    // The cancelled turn left nothing in the history.
    assert_eq!(sent(&server)[1], json!([text("user", "A quick one")]));
    // The log holds the cancelled turn up to where it was read, then the next.
    let exchanges = lmstack::transcript::read(std::fs::read(&log).unwrap().as_slice()).unwrap();
    assert_eq!(exchanges.len(), 2);
    assert!(!exchanges[0].complete, "{:?}", exchanges[0]);
    assert!(exchanges[1].complete, "{:?}", exchanges[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_turn_is_shown_and_not_kept() {
    let server = Server::start(vec![
        Answer::error(400, br#"{"error": {"message": "bad day"}}"#, &[]),
        says("Fine ", "now."),
    ])
    .await;
    let output = session(&server, &[], "First\nSecond\n").await;
    let stderr = stderr(&output);
    assert!(stderr.contains("bad day"), "{stderr}");
    assert_eq!(sent(&server)[1], json!([text("user", "Second")]));
    assert_eq!(shown(&output), ["assistant: Fine now."]);
}

/// A pseudo-terminal: its controlling side, and its terminal side opened.
#[cfg(target_os = "linux")]
fn pseudo_terminal() -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd;
    // SAFETY: calls on a descriptor this function opens and then owns; the name
    // is written into a buffer of the given length.
    let (controller, name) = unsafe {
        let controller = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(controller >= 0, "posix_openpt");
        assert_eq!(libc::grantpt(controller), 0);
        assert_eq!(libc::unlockpt(controller), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(
            libc::ptsname_r(controller, name.as_mut_ptr(), name.len()),
            0
        );
        let name = std::ffi::CStr::from_ptr(name.as_ptr())
            .to_str()
            .unwrap()
            .to_owned();
        (std::fs::File::from_raw_fd(controller), name)
    };
    let terminal = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name)
        .unwrap();
    (controller, terminal)
}

#[cfg(target_os = "linux")]
#[test]
fn the_prompt_marker_shows_on_a_terminal() {
    let (mut controller, terminal) = pseudo_terminal();
    let child = command(&[
        "chat",
        "--provider",
        "openai",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9/v1",
    ])
    .stdin(terminal)
    .spawn()
    .unwrap();
    controller.write_all(b"/quit\n").unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stderr(&output), "> ");
    assert!(output.stdout.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_are_saved_and_logged_by_reference_and_resume_whole() {
    let dir = tempfile::tempdir().unwrap();
    let png_bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01";
    let png = dir.path().join("dot.png");
    std::fs::write(&png, png_bytes).unwrap();
    let (log, saved) = (dir.path().join("chat.log"), dir.path().join("conv.jsonl"));
    let inline = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, png_bytes);
    let server = Server::start(vec![says("A ", "dot."), says("Still ", "a dot.")]).await;
    session(
        &server,
        &["--log", log.to_str().unwrap()],
        &format!(
            "/image {}\nWhat is this?\n/save {}\n",
            png.display(),
            saved.display()
        ),
    )
    .await;

    // Both files name the image by its digest; its bytes are stored once, beside them.
    let reference = format!("sha256:{}", lmstack::MediaRef::of(png_bytes).hex());
    for file in [&log, &saved] {
        let text = std::fs::read_to_string(file).unwrap();
        assert!(text.contains(&format!("\"ref\":\"{reference}\"")), "{text}");
        assert!(
            !text.contains(&inline),
            "no inline copy in {}",
            file.display()
        );
    }
    let store = lmstack::store::FileStore::new(dir.path().join("media"));
    let blob = store.path(&lmstack::MediaRef::of(png_bytes));
    assert_eq!(std::fs::read(&blob).unwrap(), png_bytes);
    let exchanges = lmstack::transcript::read_with_store(
        std::io::BufReader::new(std::fs::File::open(&log).unwrap()),
        &store,
    )
    .unwrap();
    let asked = &exchanges[0].request.messages[0];
    let lmstack::Message::Multimodal(asked) = asked else {
        panic!("{asked:?}");
    };
    let lmstack::ContentBlock::Image(image) = &asked.content[1] else {
        panic!("{asked:?}");
    };
    assert_eq!(image.decode().unwrap().unwrap(), png_bytes);

    // Resumed in a new process, the image goes back on the wire inline.
    session(
        &server,
        &["--resume", saved.to_str().unwrap()],
        "And now?\n",
    )
    .await;
    let sent = sent(&server);
    assert_eq!(
        sent[1][0]["content"][1]["image_url"]["url"],
        format!("data:image/png;base64,{inline}")
    );

    // A corrupted blob is an error naming its reference, not a conversation.
    std::fs::write(&blob, b"not the picture").unwrap();
    let args = chat_args(&server, &["--resume", saved.to_str().unwrap()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = tokio::task::block_in_place(|| lmstack(&args, b"Hi\n"));
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains(&reference), "{}", stderr(&output));
    assert_eq!(server.requests().len(), 2, "nothing sent");
}

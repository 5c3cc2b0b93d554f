//! Running the `lmstack` binary, without the `OPENAI_*` variables of the
//! environment, and a model's answers for `lmstack chat`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::server::Answer;
use super::sse;

/// The command `lmstack args`, its output piped.
pub fn command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_lmstack"));
    command
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Starts `lmstack args` with stdin, stdout and stderr piped.
pub fn spawn(args: &[&str]) -> Child {
    command(args)
        .stdin(Stdio::piped())
        .spawn()
        .expect("the lmstack binary runs")
}

/// Runs `lmstack args` with `stdin` as its input. The input is written from a
/// thread while the output is read, and a program that stops reading early
/// (the pipe breaks) ends the writing, not the test.
pub fn lmstack(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = spawn(args);
    let mut pipe = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&stdin);
    });
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    output
}

/// Round 1: the model calls the calculator (arguments in two fragments when
/// streamed); round 2: it answers in text.
pub fn calculator_rounds(stream: bool) -> Vec<Answer> {
    let call = |arguments: &str| {
        json!({"index": 0, "id": "call_calc", "type": "function",
               "function": {"name": "calculator", "arguments": arguments}})
    };
    let answer = "6 × 7 is 42.";
    if stream {
        let chunk = |delta: Value, finish: Value| json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        let fragment = json!({"index": 0, "function": {"arguments": "\"6 * 7\"}"}});
        vec![
            Answer::ok(
                "text/event-stream",
                &sse(&[
                    chunk(
                        json!({"role": "assistant", "tool_calls": [call("{\"expression\": ")]}),
                        Value::Null,
                    ),
                    chunk(json!({"tool_calls": [fragment]}), Value::Null),
                    chunk(json!({}), json!("tool_calls")),
                ]),
                &[23],
            ),
            Answer::ok(
                "text/event-stream",
                &sse(&[
                    chunk(
                        json!({"role": "assistant", "content": "6 × 7 "}),
                        Value::Null,
                    ),
                    chunk(json!({"content": "is 42."}), json!("stop")),
                ]),
                &[23],
            ),
        ]
    } else {
        let body = |message: Value, finish: &str| {
            json!({"id": "chatcmpl-1", "object": "chat.completion",
                   "choices": [{"index": 0, "message": message, "finish_reason": finish}]})
            .to_string()
        };
        vec![
            Answer::ok(
                "application/json",
                body(
                    json!({"role": "assistant", "content": null, "tool_calls": [call("{\"expression\":\"6 * 7\"}")]}),
                    "tool_calls",
                )
                .as_bytes(),
                &[usize::MAX],
            ),
            Answer::ok(
                "application/json",
                body(json!({"role": "assistant", "content": answer}), "stop").as_bytes(),
                &[usize::MAX],
            ),
        ]
    }
}

/// A running `lmstack serve`, stopped when dropped.
pub struct Serving {
    pub child: Child,
    /// Its base URL, `http://127.0.0.1:PORT`.
    pub base: String,
    /// What it wrote on stderr so far, a line each.
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Serving {
    /// The lines it wrote on stderr so far.
    pub fn stderr(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// Its log once it contains every one of `needles` (lines are written as
    /// answers end, so it waits up to five seconds); panics with the log if
    /// it never does.
    pub fn log_containing(&self, needles: &[&str]) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let log = self.stderr().concat();
            if needles.iter().all(|needle| log.contains(needle)) {
                return log;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the log never said {needles:?}:\n{log}"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

#[cfg(unix)]
impl Serving {
    /// Sends it `signal` (SIGTERM, SIGINT…).
    pub fn signal(&self, signal: libc::c_int) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: a plain kill(2) of the child this test started.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    }

    /// Waits (off the runtime's threads) for it to exit, and checks that it
    /// exited successfully.
    pub async fn exits_successfully(mut self) {
        let status = tokio::task::spawn_blocking(move || {
            let status = self.child.wait().unwrap();
            std::mem::forget(self);
            status
        })
        .await
        .unwrap();
        assert!(status.success(), "{status:?}");
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `lmstack serve` on a free loopback port with `args`, wanting `token`
/// from its clients when given; waits for the line that says where it listens.
pub fn serve(args: &[&str], token: Option<&str>) -> Serving {
    start(serve_command(args, token))
}

/// The command `lmstack serve` on a free loopback port with `args`, wanting
/// `token` from its clients when given.
pub fn serve_command(args: &[&str], token: Option<&str>) -> Command {
    let mut all = vec!["serve", "--listen", "127.0.0.1:0"];
    all.extend_from_slice(args);
    let mut command = command(&all);
    match token {
        Some(token) => command.env("LMSTACK_SERVE_TOKEN", token),
        None => command.env_remove("LMSTACK_SERVE_TOKEN"),
    };
    command
}

/// Starts a `serve_command`; waits for the line that says where it listens.
pub fn start(mut command: Command) -> Serving {
    let mut child = command
        .stdin(Stdio::null())
        .spawn()
        .expect("the lmstack binary runs");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut lines = Vec::new();
    let base = loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap() == 0 {
            panic!("no address in {lines:?}");
        }
        let address = line
            .split("listening on ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_owned);
        lines.push(line);
        if let Some(address) = address {
            break address;
        }
    };
    let written = Arc::new(Mutex::new(lines));
    let keep = written.clone();
    // Keep reading stderr, so that the process never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut line = String::new();
        while stderr.read_line(&mut line).is_ok_and(|n| n > 0) {
            keep.lock().unwrap().push(std::mem::take(&mut line));
        }
    });
    Serving {
        child,
        base,
        stderr: written,
    }
}

/// Writes a configuration file `lmstack.toml` into `dir`; its path.
pub fn write_config(dir: &tempfile::TempDir, text: &str) -> String {
    let path = dir.path().join("lmstack.toml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

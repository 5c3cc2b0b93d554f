//! The command line under hostile input: credentials in a base URL, and input
//! larger than its limit or without end.

use std::io::{Read, Write};
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::cli::{lmstack, spawn};

/// Everything a run printed.
fn printed(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn chat_shows_no_credentials_of_the_base_url() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let closed = format!("http://user:PASS@{addr}/v1?key=SECRET#SECRET");
    for (base_url, failure) in [
        (closed.as_str(), "could not connect"),
        ("http://user:PASS@bad host/v1?key=SECRET", "invalid request"),
    ] {
        let output = lmstack(
            &[
                "chat",
                "--provider",
                "openai",
                "--model",
                "m",
                "--base-url",
                base_url,
                "hi",
            ],
            b"",
        );
        let text = printed(&output);
        assert!(!output.status.success(), "{text}");
        assert!(text.contains(failure), "{text}");
        for secret in ["PASS", "SECRET"] {
            assert!(!text.contains(secret), "{base_url}: {text}");
        }
    }
}

/// A command that reads stdin, and inputs for it.
struct StdinCommand {
    args: &'static [&'static str],
    /// A valid input, which stays valid padded with `pad` to any size.
    valid: &'static [u8],
    pad: u8,
    /// A piece of input that, repeated without end, never completes or keeps
    /// adding to what the command holds.
    endless: &'static [u8],
}

impl StdinCommand {
    /// The command's arguments, with `--max-input limit`.
    fn args<'a>(&self, limit: &'a str) -> Vec<&'a str> {
        let mut args = self.args.to_vec();
        args.extend(["--max-input", limit]);
        args
    }

    /// A valid input of exactly `size` bytes.
    fn input(&self, size: usize) -> Vec<u8> {
        let mut input = self.valid.to_vec();
        input.resize(size, self.pad);
        input
    }
}

const MESSAGE: &[u8] = b"{\"type\":\"text\",\"role\":\"user\",\"text\":\"hi\"}\n";
const CHUNK: &[u8] = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n";
const STREAM: &[u8] =
    b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n";
const BODY: &[u8] = br#"{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#;

/// Every command that reads stdin.
const STDIN_COMMANDS: [StdinCommand; 8] = [
    StdinCommand {
        args: &["parse"],
        valid: b"",
        pad: b'a',
        endless: b"aaaaaaaa",
    },
    StdinCommand {
        args: &["render"],
        valid: MESSAGE,
        pad: b' ',
        endless: MESSAGE,
    },
    StdinCommand {
        args: &["render", "--read"],
        valid: MESSAGE,
        pad: b' ',
        endless: MESSAGE,
    },
    StdinCommand {
        args: &["lift", "--provider", "openai"],
        valid: BODY,
        pad: b' ',
        endless: b"        ",
    },
    StdinCommand {
        args: &["lift", "--provider", "openai", "--stream"],
        valid: STREAM,
        pad: b'\n',
        endless: CHUNK,
    },
    StdinCommand {
        args: &["lift", "--provider", "openai", "--stream", "--events"],
        valid: STREAM,
        pad: b'\n',
        endless: CHUNK,
    },
    StdinCommand {
        args: &["lower", "--provider", "openai"],
        valid: br#"{"messages":[],"options":{}}"#,
        pad: b' ',
        endless: b"        ",
    },
    // The interactive session: blank lines send nothing (no server listens).
    StdinCommand {
        args: &[
            "chat",
            "--provider",
            "openai",
            "--model",
            "m",
            "--base-url",
            "http://127.0.0.1:9/v1",
        ],
        valid: b"",
        pad: b'\n',
        endless: b"\n\n\n\n\n\n\n\n",
    },
];

#[test]
fn every_command_reads_its_limit_of_stdin_and_not_a_byte_more() {
    for command in &STDIN_COMMANDS {
        let args = command.args("4096");
        let output = lmstack(&args, &command.input(4096));
        assert!(output.status.success(), "{args:?}: {}", printed(&output));

        let output = lmstack(&args, &command.input(4097));
        let text = printed(&output);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {text}");
        assert!(
            text.contains("stdin exceeded its limit of 4096 bytes"),
            "{args:?}: {text}"
        );
    }
}

#[test]
fn the_default_limit_is_64_mib() {
    // One line longer than the limit: it is refused, not held.
    let input = vec![b'a'; (64 << 20) + 1];
    let output = lmstack(&["render"], &input);
    let text = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains("stdin exceeded its limit of 67108864 bytes"),
        "{text}"
    );
}

#[test]
fn the_tools_file_of_parse_is_read_within_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tools.json");
    let mut tools = b"[]".to_vec();
    tools.resize(4097, b' ');
    std::fs::write(&path, &tools).unwrap();
    let path = path.to_str().unwrap();
    let output = lmstack(&["parse", "--tools", path, "--max-input", "4097"], b"hi");
    assert!(output.status.success(), "{}", printed(&output));
    let output = lmstack(&["parse", "--tools", path, "--max-input", "4096"], b"hi");
    let text = printed(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains("the tools file exceeded its limit of 4096 bytes"),
        "{text}"
    );
}

/// Runs `lmstack args` with `piece` written to its stdin again and again until
/// the pipe breaks; its output. The test fails, and the command is killed
/// before it can grow further, when it has taken 64 MiB of stdin or still runs
/// after a minute.
fn fed_forever(args: &[&str], piece: &'static [u8]) -> Output {
    const MOST: usize = 64 << 20;
    let mut child = spawn(args);
    let mut stdin = child.stdin.take().unwrap();
    let written = Arc::new(AtomicUsize::new(0));
    let writer = {
        let written = written.clone();
        std::thread::spawn(move || {
            while written.load(Ordering::Relaxed) <= MOST && stdin.write_all(piece).is_ok() {
                written.fetch_add(piece.len(), Ordering::Relaxed);
            }
        })
    };
    // Both output pipes are read, so that a command printing as it goes is
    // never blocked on a full pipe.
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    let err = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stderr.read_to_end(&mut text);
        text
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        let taken = written.load(Ordering::Relaxed);
        if taken > MOST || Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} still reads stdin, {taken} bytes so far");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    writer.join().unwrap();
    let _ = out.join().unwrap();
    Output {
        status,
        stdout: Vec::new(),
        stderr: err.join().unwrap(),
    }
}

#[test]
fn endless_stdin_ends_in_an_error() {
    for command in &STDIN_COMMANDS {
        let args = command.args("1048576");
        let output = fed_forever(&args, command.endless);
        let text = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {text}");
        assert!(
            text.contains("stdin exceeded its limit of 1048576 bytes"),
            "{args:?}: {text}"
        );
    }
}

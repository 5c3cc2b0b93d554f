//! Running the `lmstack` binary, without the `OPENAI_*` variables of the
//! environment.

use std::io::Write;
use std::process::{Child, Command, Output, Stdio};

/// Starts `lmstack args` with stdin, stdout and stderr piped.
pub fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_lmstack"))
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
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

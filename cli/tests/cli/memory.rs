//! The memory the `lmstack` commands hold for an input just under their
//! `--max-input`: its peak resident size, beyond what the command holds for an
//! empty input, as a multiple of the input's size.
//!
//! A child's peak as the kernel reports it (`ru_maxrss`) is at least that of the
//! process it was started from, so this test holds no input in memory (each is
//! written to a file and given as stdin), and checks that its own peak stays
//! below the command's.

#![cfg(target_os = "linux")]

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::{Command, Stdio};

/// The limit given, and the inputs' size: just under it.
const LIMIT: usize = 8 << 20;
const SIZE: usize = LIMIT - 1024;

/// The peak resident size of `lmstack args` on the file at `stdin`, in bytes
/// (its own, as `wait4` reports it); the command must succeed.
fn peak(args: &[&str], stdin: &Path) -> usize {
    let limit = LIMIT.to_string();
    let stderr = stdin.with_extension("stderr");
    #[expect(clippy::zombie_processes, reason = "wait4 waits for it")]
    let child = Command::new(env!("CARGO_BIN_EXE_lmstack"))
        .args(args)
        .args(["--max-input", &limit])
        .stdin(File::open(stdin).unwrap())
        .stdout(Stdio::null())
        .stderr(File::create(&stderr).unwrap())
        .spawn()
        .expect("the lmstack binary runs");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid one, which `wait4` fills in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, which nothing else waits for.
    assert_eq!(unsafe { libc::wait4(pid, &mut status, 0, &mut usage) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{args:?}: {}",
        std::fs::read_to_string(&stderr).unwrap()
    );
    usize::try_from(usage.ru_maxrss).unwrap() * 1024
}

/// This process's own peak resident size, in bytes.
fn own_peak() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib = line.split_whitespace().nth(1).unwrap();
    kib.parse::<usize>().unwrap() * 1024
}

/// Writes `start`, `piece` repeated, then `end`, filled with `fill` to `SIZE`
/// bytes, to `path`.
fn write_input(path: &Path, start: &[u8], piece: &[u8], end: &[u8], fill: u8) {
    let mut file = BufWriter::new(File::create(path).unwrap());
    file.write_all(start).unwrap();
    let mut written = start.len();
    while written + piece.len() + end.len() <= SIZE {
        file.write_all(piece).unwrap();
        written += piece.len();
    }
    file.write_all(end).unwrap();
    written += end.len();
    file.write_all(&vec![fill; SIZE - written]).unwrap();
    file.flush().unwrap();
}

/// How many times its input's size `args` holds at most for `input`, over what
/// it holds for `empty`.
fn held(args: &[&str], empty: &[u8], input: &Path) -> f64 {
    let empty_file = input.with_extension("empty");
    std::fs::write(&empty_file, empty).unwrap();
    let baseline = peak(args, &empty_file);
    assert!(
        own_peak() < baseline,
        "{args:?}: this process ({} bytes) would hide the command's peak ({baseline})",
        own_peak()
    );
    let peak = peak(args, input);
    peak.saturating_sub(baseline) as f64 / SIZE as f64
}

#[test]
fn a_command_holds_at_most_one_and_a_half_times_its_input() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let small = concat!(r#"{"type":"text","role":"user","text":"hi"}"#, "\n");
    let long =
        serde_json::json!({"type": "text", "role": "user", "text": "lorem ipsum ".repeat(85)});
    let long = format!("{long}\n");
    let inputs: [(&str, &[u8], &[u8], u8); 4] = [
        ("text", b"lorem ipsum dolor sit amet ", b"", b' '),
        ("small", small.as_bytes(), b"", b' '),
        ("long", long.as_bytes(), b"", b' '),
        (
            "sse",
            b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n",
            b"data: [DONE]\n",
            b'\n',
        ),
    ];
    for (name, piece, end, fill) in inputs {
        write_input(&path(name), b"", piece, end, fill);
    }
    for (args, empty, input) in [
        // One huge text, whole and streamed.
        (&["parse"][..], &b""[..], "text"),
        (&["parse", "--chunk-size", "4096", "--events"], b"", "text"),
        // Many small messages, and long ones read back.
        (&["render"], b"", "small"),
        (&["render", "--read"], b"", "long"),
        // A long stream of small events.
        (
            &["lift", "--provider", "openai", "--stream"],
            b"data: [DONE]\n",
            "sse",
        ),
    ] {
        let times = held(args, empty, &path(input));
        assert!(times <= 1.5, "{args:?} held {times:.2} times its input");
    }
}

/// A JSON body must be whole to be read, and its text is decoded out of it:
/// twice the body is the least a body of one text can take.
#[test]
fn lift_of_a_json_body_holds_the_body_and_its_text_and_no_more() {
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body");
    write_input(
        &body,
        br#"{"choices":[{"index":0,"message":{"role":"assistant","content":""#,
        b"a",
        br#""},"finish_reason":"stop"}]}"#,
        b' ',
    );
    let args = ["lift", "--provider", "openai"];
    let times = held(&args, br#"{"choices":[]}"#, &body);
    assert!(times <= 2.25, "lift held {times:.2} times its input");
}

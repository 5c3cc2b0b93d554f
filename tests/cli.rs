//! The `lmstack` command line.

use std::process::Command;

fn lmstack(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lmstack"))
        .args(args)
        .output()
        .expect("the lmstack binary runs")
}

#[test]
fn help_lists_the_six_subcommands() {
    let output = lmstack(&["--help"]);
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).unwrap();
    for subcommand in ["demo", "parse", "render", "lift", "lower", "chat"] {
        assert!(
            help.lines()
                .any(|line| line.trim_start().starts_with(subcommand)),
            "`{subcommand}` missing from:\n{help}"
        );
    }
}

#[test]
fn every_subcommand_has_help() {
    for subcommand in ["demo", "parse", "render", "lift", "lower", "chat"] {
        let output = lmstack(&[subcommand, "--help"]);
        assert!(output.status.success(), "{subcommand} --help failed");
        let help = String::from_utf8(output.stdout).unwrap();
        assert!(help.contains("Usage: lmstack"), "{help}");
    }
}

#[test]
fn an_unknown_subcommand_is_a_usage_error() {
    let output = lmstack(&["frobnicate"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("unrecognized subcommand"));
}

fn lmstack_with_stdin(args: &[&str], stdin: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_lmstack"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the lmstack binary runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

const MODEL_TEXT: &str = "Voilà:\n<tool_call name=\"add\">{\"a\": 1, \"b\": \"x</tool_call>\"}</tool_call>\n<tool_call>{\"name\": \"nope\", \"arguments\": {}}</tool_call>";

#[test]
fn parse_gives_the_same_messages_whole_and_in_any_chunks() {
    let whole = lmstack_with_stdin(&["parse"], MODEL_TEXT);
    assert!(
        whole.status.success(),
        "{}",
        String::from_utf8_lossy(&whole.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(whole.stdout.clone())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(
        lines[0],
        serde_json::json!({"type": "text", "role": "assistant", "text": "Voilà:\n"})
    );
    assert_eq!(
        lines[1]["calls"][0]["arguments"],
        serde_json::json!({"a": 1, "b": "x</tool_call>"})
    );
    assert_eq!(lines.len(), 2, "without --tools any name goes: {lines:?}");
    for chunks in [
        ["--chunk-size", "1"],
        ["--chunk-size", "5"],
        ["--random-chunks", "7"],
    ] {
        let chunked = lmstack_with_stdin(&["parse", chunks[0], chunks[1]], MODEL_TEXT);
        assert_eq!(chunked.stdout, whole.stdout, "{chunks:?}");
    }
}

#[test]
fn parse_checks_tools_from_a_file_and_prints_events() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.json");
    std::fs::write(&tools, r#"[{"name": "add", "description": "", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}]"#).unwrap();
    let output = lmstack_with_stdin(&["parse", "--tools", tools.to_str().unwrap()], MODEL_TEXT);
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("\"unknown_tool\""), "{text}");
    let events = lmstack_with_stdin(&["parse", "--chunk-size", "8", "--events"], MODEL_TEXT);
    let first: serde_json::Value = serde_json::from_str(
        String::from_utf8(events.stdout)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(first["type"], "text_delta");
    let failing = lmstack_with_stdin(
        &[
            "parse",
            "--on-invalid",
            "error",
            "--tools",
            tools.to_str().unwrap(),
        ],
        MODEL_TEXT,
    );
    assert!(!failing.status.success());
    assert!(String::from_utf8_lossy(&failing.stderr).contains("unknown_tool tool call"));
}

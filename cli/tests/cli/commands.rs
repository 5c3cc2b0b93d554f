//! The `lmstack` command line.

use std::process::Command;

fn lmstack(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lmstack"))
        .args(args)
        .output()
        .expect("the lmstack binary runs")
}

/// Every subcommand of `lmstack`, in the order `--help` lists them.
const SUBCOMMANDS: [&str; 8] = [
    "demo", "parse", "render", "lift", "lower", "chat", "mcp", "serve",
];

/// The names in the `Commands:` section of a help text.
fn commands_listed(help: &str) -> Vec<&str> {
    help.lines()
        .skip_while(|line| *line != "Commands:")
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .filter_map(|line| line.split_whitespace().next())
        .collect()
}

#[test]
fn help_lists_every_subcommand_and_no_other() {
    let output = lmstack(&["--help"]);
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).unwrap();
    let mut expected = SUBCOMMANDS.to_vec();
    expected.push("help");
    assert_eq!(commands_listed(&help), expected, "{help}");
}

#[test]
fn every_subcommand_has_help() {
    let mcp = ["mcp list", "mcp call"];
    for subcommand in SUBCOMMANDS.into_iter().chain(mcp) {
        let mut args: Vec<&str> = subcommand.split(' ').collect();
        args.push("--help");
        let output = lmstack(&args);
        assert!(output.status.success(), "{subcommand} --help failed");
        let help = String::from_utf8(output.stdout).unwrap();
        assert!(
            help.contains(&format!("Usage: lmstack {subcommand}")),
            "{subcommand}: {help}"
        );
    }
    let help = String::from_utf8(lmstack(&["mcp", "--help"]).stdout).unwrap();
    assert_eq!(commands_listed(&help), ["list", "call", "help"], "{help}");
}

#[test]
fn an_unknown_subcommand_is_a_usage_error() {
    let output = lmstack(&["frobnicate"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("unrecognized subcommand"));
}

fn lmstack_with_stdin(args: &[&str], stdin: &str) -> std::process::Output {
    lmstack_with_bytes(args, stdin.as_bytes())
}

fn lmstack_with_bytes(args: &[&str], stdin: &[u8]) -> std::process::Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_lmstack"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the lmstack binary runs");
    // A command refused at its arguments exits before it reads: the pipe
    // closes under the write, which is no failure of the test.
    if let Err(error) = child.stdin.take().unwrap().write_all(stdin) {
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe, "{error}");
    }
    child.wait_with_output().unwrap()
}

/// Runs lmstack on `stdin`, which must succeed; its stdout, and that stdout's
/// JSON lines.
fn json_out(args: &[&str], stdin: &str) -> (String, Vec<serde_json::Value>) {
    let output = lmstack_with_stdin(args, stdin);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    let lines = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (text, lines)
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

const HISTORY: &str = r#"{"type":"text","role":"user","text":"2 + 3?"}
{"type":"tool_aggregate","calls":[{"id":"call_1","name":"add","arguments":{"a":2,"b":3}}],"results":[{"call_id":"call_1","name":"add","content":[{"type":"text","text":"5"}],"is_error":false}]}
{"type":"text","role":"assistant","text":"5."}
"#;

#[test]
fn render_writes_calls_and_results_as_text_and_read_reverses_it() {
    let (text, lines) = json_out(&["render"], HISTORY);
    assert_eq!(
        lines[1],
        serde_json::json!({"type": "text", "role": "assistant", "text":
            "<tool_call name=\"add\" id=\"call_1\">\n{\n  \"a\": 2,\n  \"b\": 3\n}\n</tool_call>"})
    );
    assert_eq!(
        lines[2],
        serde_json::json!({"type": "text", "role": "user", "text":
            "<tool_response name=\"add\" id=\"call_1\">\n5\n</tool_response>"})
    );
    assert_eq!(lines.len(), 4);

    let (_, read) = json_out(&["render", "--read"], &text);
    let want: Vec<serde_json::Value> = HISTORY
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(read, want);

    let hermes = lmstack_with_stdin(&["render", "--dialect", "hermes"], HISTORY);
    assert!(String::from_utf8(hermes.stdout).unwrap().contains(
        r#"{\"name\": \"add\", \"id\": \"call_1\", \"arguments\": {\"a\": 2, \"b\": 3}}"#
    ));

    let (text, lines) = json_out(&["render", "--dialect", "pythonic"], HISTORY);
    assert_eq!(lines[1]["text"], "[add(a=2, b=3)]");
    let (_, read) = json_out(&["render", "--read", "--dialect", "pythonic"], &text);
    assert_eq!(read, want);
    let bad = lmstack_with_stdin(&["render", "--dialect", "auto"], HISTORY);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("minimax, granite"));
}

#[test]
fn render_consolidate_single_and_no_ids_write_one_message_per_turn_and_read_back() {
    let (text, lines) = json_out(&["render", "--consolidate", "single", "--no-ids"], HISTORY);
    assert_eq!(
        lines[1],
        serde_json::json!({"type": "text", "role": "user", "text":
            "<tool_call name=\"add\">\n{\n  \"a\": 2,\n  \"b\": 3\n}\n</tool_call>\n\
             <tool_response name=\"add\">\n5\n</tool_response>\n5.",
            "metadata": {"tool_call_ids": ["call_1", "call_1"]}})
    );
    assert_eq!(lines.len(), 2);
    let (_, read) = json_out(&["render", "--read"], &text);
    let want: Vec<serde_json::Value> = HISTORY
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(read, want);

    let help = String::from_utf8(lmstack(&["render", "--help"]).stdout).unwrap();
    assert!(
        help.contains("--consolidate <FORM>") && help.contains("--no-ids"),
        "{help}"
    );
    let bad = lmstack_with_stdin(&["render", "--consolidate", "one"], HISTORY);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("split, single"));
}

#[test]
fn render_names_the_bad_line_and_the_unpaired_call() {
    let bad = lmstack_with_stdin(
        &["render"],
        "{\"type\":\"text\",\"role\":\"user\",\"text\":\"hi\"}\nnot json\n",
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("the message on line 2"));
    let orphan = r#"{"type":"tool_results","results":[{"call_id":"call_9","name":"add","content":[],"is_error":false}]}"#;
    let unpaired = lmstack_with_stdin(&["render"], orphan);
    assert!(!unpaired.status.success());
    let stderr = String::from_utf8_lossy(&unpaired.stderr);
    assert!(
        stderr.contains("message 0") && stderr.contains("`call_9`"),
        "{stderr}"
    );
}

#[test]
fn parse_reads_a_text_longer_than_a_read_and_refuses_one_not_utf8() {
    // Three-byte characters: reads of any size cut some of them in two.
    let text = "a€".repeat(100_000);
    let (_, lines) = json_out(&["parse"], &text);
    assert_eq!(
        lines,
        [serde_json::json!({"type": "text", "role": "assistant", "text": text})]
    );
    let mut cut = text.into_bytes();
    cut.pop();
    let output = lmstack_with_bytes(&["parse"], &cut);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("stdin is not UTF-8 text"));
}

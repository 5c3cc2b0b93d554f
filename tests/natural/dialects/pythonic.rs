//! Pythonic (Llama 4, Llama 3.2 1B/3B): `[get_weather(city="Paris"), now()]`.

use lmstack::InvalidCallKind;
use lmstack::Message;
use lmstack::natural::Dialect;
use serde_json::json;

use super::harness::{assert_kept, call, calls, checked, faults, marking, parse, text_of};

const PYTHONIC: Dialect = Dialect::Pythonic;

#[test]
fn a_list_of_calls_streams_each_call() {
    let text = "[get_weather(city=\"Paris\", days=3), now()]";
    assert_eq!(
        parse(PYTHONIC, text),
        vec![Message::tool_calls(vec![
            call("call_1", "get_weather", json!({"city": "Paris", "days": 3})),
            call("call_2", "now", json!({})),
        ])]
    );
}

#[test]
fn python_literals_become_json() {
    let text = "[write_file(path='a\\'s.txt', content=\"l1\\nl2 \\u00e9 \\\"q\\\"\", mode=-0o7 if False else 420, force=True)]";
    // A conditional is no literal: a fault.
    assert_eq!(
        faults(&checked(&marking(PYTHONIC), text)),
        vec![InvalidCallKind::MalformedArguments]
    );
    let text = "[write_file(path='a\\'s.txt', content=\"\"\"l1\nl2 \\u00e9 \"q\\\"\"\"\", mode=420, force=True, tags=['x', (1, 2.5e0), None], options={'k': {\"n\": -1}},)]";
    assert_eq!(
        calls(&parse(PYTHONIC, text)),
        vec![call(
            "call_1",
            "write_file",
            json!({"path": "a's.txt", "content": "l1\nl2 é \"q\"", "mode": 420, "force": true,
                   "tags": ["x", [1, 2.5], null], "options": {"k": {"n": -1}}})
        )]
    );
}

#[test]
fn the_python_start_and_end_markers_wrap_the_list() {
    let text =
        "Let me check.\n<|python_start|>[get_weather(city='Zürich 🌧')]<|python_end|>\nThen ✓.";
    let messages = parse(PYTHONIC, text);
    assert_eq!(
        calls(&messages),
        vec![call("call_1", "get_weather", json!({"city": "Zürich 🌧"}))]
    );
    assert_eq!(text_of(&messages), "Let me check.\n\nThen ✓.");
}

#[test]
fn text_after_the_list_and_a_second_list_are_read() {
    let text = "  [now()] then\n[get_weather(city=\"Oslo\")], done";
    let messages = parse(PYTHONIC, text);
    assert_eq!(
        calls(&messages),
        vec![
            call("call_1", "now", json!({})),
            call("call_2", "get_weather", json!({"city": "Oslo"})),
        ]
    );
    assert_eq!(text_of(&messages), "   then\n, done");
}

#[test]
fn a_broken_element_after_a_call_is_text() {
    let text = "[now(), 1, 2]";
    let messages = parse(PYTHONIC, text);
    assert_eq!(calls(&messages), vec![call("call_1", "now", json!({}))]);
    assert_eq!(text_of(&messages), ", 1, 2]");
}

#[test]
fn unknown_tools_positional_and_bad_arguments_are_faults() {
    let text =
        "[nope(a=1), get_weather(city=3), get_weather('Paris'), get_weather(city=Paris), now()]";
    let messages = checked(&marking(PYTHONIC), text);
    assert_eq!(
        faults(&messages),
        vec![
            InvalidCallKind::UnknownTool,
            InvalidCallKind::SchemaViolation,
            InvalidCallKind::MalformedArguments,
            InvalidCallKind::MalformedArguments,
        ]
    );
    let positional = calls(&messages)[2].invalid.clone().unwrap();
    assert!(positional.message.contains("positional"), "{positional:?}");
    assert_eq!(positional.raw.as_deref(), Some("get_weather('Paris')"));
    assert_eq!(calls(&messages)[4], call("call_5", "now", json!({})));
}

#[test]
fn a_bad_literal_is_a_fault_and_the_call_runs_to_its_paren() {
    let text =
        "[get_weather(city=\"a\\xZZ) b\"), get_weather(city='x', days=[1, 0x5], units=(1)), now()]";
    let messages = checked(&marking(PYTHONIC), text);
    assert_eq!(
        faults(&messages),
        vec![
            InvalidCallKind::MalformedArguments,
            InvalidCallKind::MalformedArguments
        ]
    );
    let first = calls(&messages)[0].invalid.clone().unwrap();
    assert_eq!(
        first.raw.as_deref(),
        Some("get_weather(city=\"a\\xZZ) b\")")
    );
    assert!(first.message.contains("hex escape"), "{first:?}");
    assert_eq!(calls(&messages)[2], call("call_3", "now", json!({})));
}

#[test]
fn a_truncated_call_is_marked() {
    let cut = "[get_weather(city='Pa";
    assert_eq!(
        faults(&checked(&marking(PYTHONIC), cut)),
        vec![InvalidCallKind::Truncated]
    );
    // The list's `]` may be missing.
    assert_eq!(
        calls(&parse(PYTHONIC, "[now()")),
        vec![call("call_1", "now", json!({}))]
    );
}

#[test]
fn near_misses_are_kept_exactly() {
    for text in [
        "[1, 2]",
        "[link](url)",
        "[Note] x",
        "[ ] todo\n[x] done",
        "[]",
        "a [now()] mid-line",
        "    [now()]",
        "[now",
        "[now ]",
        "<|python_start|>",
        "<|python_start|> not a list",
        "<|python_sta [now()]",
        "[get_weather city='Paris')]",
    ] {
        assert_kept(PYTHONIC, text);
    }
}

/// A `---` line after a block, before a call list at the start of the next
/// line, is a separator (the transformer's); before a list of no calls it is
/// text.
#[test]
fn a_dashed_line_after_a_block_separates_it_from_the_next_list() {
    let text = "[now()]\n---\n[now()]";
    assert_eq!(
        parse(PYTHONIC, text),
        vec![Message::tool_calls(vec![
            call("call_1", "now", json!({})),
            call("call_2", "now", json!({})),
        ])]
    );
    let text = "[now()]\n---\n[1, 2]";
    assert_eq!(
        parse(PYTHONIC, text),
        vec![
            Message::tool_calls(vec![call("call_1", "now", json!({}))]),
            Message::assistant("\n---\n[1, 2]"),
        ]
    );
}

//! Llama 3.x JSON: `{"name": F, "parameters": {…}}` at the start of a line or
//! after `<|python_tag|>`, several separated by `;`.

use lmstack::InvalidCallKind;
use lmstack::Message;
use lmstack::natural::Dialect;
use serde_json::json;

use super::harness::{assert_kept, call, calls, checked, faults, marking, parse, text_of};

const LLAMA: Dialect = Dialect::Llama3Json;

#[test]
fn a_bare_object_is_a_call() {
    let text = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}";
    assert_eq!(
        parse(LLAMA, text),
        vec![Message::tool_calls(vec![call(
            "call_1",
            "get_weather",
            json!({"city": "Paris"})
        )])]
    );
}

#[test]
fn the_python_tag_and_semicolons_give_several_calls_in_one_piece() {
    let text = "Checking.<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 2}}; {\"name\": \"now\", \"arguments\": {}}";
    assert_eq!(
        parse(LLAMA, text),
        vec![
            Message::assistant("Checking."),
            Message::tool_calls(vec![
                call("call_1", "get_weather", json!({"city": "Paris", "days": 2})),
                call("call_2", "now", json!({})),
            ]),
        ]
    );
}

#[test]
fn calls_on_their_own_lines_with_text_around() {
    let text = "Let me look.\n  {\"name\": \"now\", \"parameters\": {}}\n{\"parameters\": {\"city\": \"Zürich 🌧\"}, \"name\": \"get_weather\"}\n\nDone — ✓.";
    let messages = parse(LLAMA, text);
    assert_eq!(
        calls(&messages),
        vec![
            call("call_1", "now", json!({})),
            call("call_2", "get_weather", json!({"city": "Zürich 🌧"})),
        ]
    );
    assert_eq!(text_of(&messages), "Let me look.\n  \n\nDone — ✓.");
}

#[test]
fn text_after_a_semicolon_is_text() {
    let text = "{\"name\": \"now\", \"parameters\": {}}; and then";
    let messages = parse(LLAMA, text);
    assert_eq!(calls(&messages), vec![call("call_1", "now", json!({}))]);
    assert_eq!(text_of(&messages), "; and then");
    let trailing = "{\"name\": \"now\", \"parameters\": {}} ;";
    assert_eq!(text_of(&parse(LLAMA, trailing)), " ;");
}

#[test]
fn an_object_that_is_not_a_call_is_text_and_numbering_goes_on() {
    let text = "{\"a\": 1}\n{\"name\": \"now\", \"parameters\": {}}";
    let messages = parse(LLAMA, text);
    assert_eq!(text_of(&messages), "{\"a\": 1}\n");
    assert_eq!(calls(&messages), vec![call("call_1", "now", json!({}))]);
    let after = "{\"name\": \"now\", \"parameters\": {}}; {\"name\": 3}";
    let messages = parse(LLAMA, after);
    assert_eq!(calls(&messages), vec![call("call_1", "now", json!({}))]);
    assert_eq!(text_of(&messages), "; {\"name\": 3}");
}

#[test]
fn a_call_inside_a_broken_object_is_found_however_the_text_is_cut() {
    let text = "{\"k\": \"a\n{\"name\": \"now\", \"parameters\": {}} \\q\"}";
    let messages = parse(LLAMA, text);
    assert_eq!(calls(&messages), vec![call("call_1", "now", json!({}))]);
    assert_eq!(text_of(&messages), "{\"k\": \"a\n \\q\"}");
}

#[test]
fn an_unknown_tool_and_bad_arguments_are_faults() {
    let text = "{\"name\": \"nope\", \"parameters\": {}}; {\"name\": \"get_weather\", \"parameters\": {\"city\": 3}}";
    assert_eq!(
        faults(&checked(&marking(LLAMA), text)),
        vec![
            InvalidCallKind::UnknownTool,
            InvalidCallKind::SchemaViolation
        ]
    );
    let broken = "{\"name\": \"get_weather\", \"parameters\": {\"city\" \"Paris\"}}";
    assert_eq!(
        faults(&checked(&marking(LLAMA), broken)),
        vec![InvalidCallKind::MalformedArguments]
    );
}

#[test]
fn a_truncated_call_is_completed_or_marked() {
    let one_missing = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}";
    assert_eq!(
        calls(&parse(LLAMA, one_missing)),
        vec![call("call_1", "get_weather", json!({"city": "Paris"}))]
    );
    let cut = "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Pa";
    assert_eq!(
        faults(&checked(&marking(LLAMA), cut)),
        vec![InvalidCallKind::Truncated]
    );
    // Cut before the name: text.
    assert_kept(LLAMA, "{\"parameters\": {\"city\": \"Pa");
}

#[test]
fn near_misses_are_kept_exactly() {
    for text in [
        "a {\"name\": \"now\", \"parameters\": {}} mid-line",
        "    {\"name\": \"now\", \"parameters\": {}}",
        "{\"name\": 1, \"parameters\": {}}",
        "{\"type\": \"object\"}",
        "{not json",
        "<|python_tag|>brave_search.call(query=\"x\")",
        "<|python_tag|>",
        "<|python_ta {",
        "<|python_tag| {}",
        "{}",
        "[{\"name\": \"now\"}]",
        "{\"k\": \"a\\q\"} x",
    ] {
        assert_kept(LLAMA, text);
    }
}

/// A `---` line after a block, before a call at the start of the next line, is
/// a separator (the transformer's); before JSON that is no call it is text.
#[test]
fn a_dashed_line_after_a_block_separates_it_from_the_next_call() {
    let text =
        "<tool_call name=\"now\">{}</tool_call>\n---\n{\"name\": \"now\", \"parameters\": {}}";
    assert_eq!(
        parse(LLAMA, text),
        vec![Message::tool_calls(vec![
            call("call_1", "now", json!({})),
            call("call_2", "now", json!({})),
        ])]
    );
    let text = "<tool_call name=\"now\">{}</tool_call>\n---\n{\"a\": 1}";
    assert_eq!(
        parse(LLAMA, text),
        vec![
            Message::tool_calls(vec![call("call_1", "now", json!({}))]),
            Message::assistant("\n---\n{\"a\": 1}"),
        ]
    );
}

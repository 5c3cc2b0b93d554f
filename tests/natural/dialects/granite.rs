//! Granite: `<|tool_call|>[{"name": F, "arguments": {…}}, …]`.

use lmstack::InvalidCallKind;
use lmstack::Message;
use lmstack::natural::Dialect;
use serde_json::json;

use super::harness::{assert_kept, call, calls, checked, faults, marking, parse, text_of};

const GRANITE: Dialect = Dialect::Granite;

#[test]
fn a_list_of_calls_after_the_marker_streams_each_call() {
    let text = "Let me look.\n<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"arguments\": {}, \"name\": \"now\"}]";
    assert_eq!(
        parse(GRANITE, text),
        vec![
            Message::assistant("Let me look.\n"),
            Message::tool_calls(vec![
                call("call_1", "get_weather", json!({"city": "Paris"})),
                call("call_2", "now", json!({})),
            ]),
        ]
    );
}

#[test]
fn text_after_the_list_and_a_second_marker_are_read() {
    let text = "<|tool_call|>[{\"name\": \"now\", \"arguments\": {}}] then <|tool_call|> [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich 🌧\"}}]\nDone.";
    let messages = parse(GRANITE, text);
    assert_eq!(
        calls(&messages),
        vec![
            call("call_1", "now", json!({})),
            call("call_2", "get_weather", json!({"city": "Zürich 🌧"})),
        ]
    );
    assert_eq!(text_of(&messages), " then \nDone.");
}

#[test]
fn an_unknown_tool_and_bad_arguments_are_faults() {
    let text = "<|tool_call|>[{\"name\": \"nope\", \"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": {\"city\": 3}}]";
    let messages = checked(&marking(GRANITE), text);
    assert_eq!(
        faults(&messages),
        vec![
            InvalidCallKind::UnknownTool,
            InvalidCallKind::SchemaViolation
        ]
    );
}

#[test]
fn a_truncated_list_is_completed_or_marked() {
    let one_missing =
        "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}";
    assert_eq!(
        calls(&parse(GRANITE, one_missing)),
        vec![call("call_1", "get_weather", json!({"city": "Paris"}))]
    );
    let cut = "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa";
    assert_eq!(
        faults(&checked(&marking(GRANITE), cut)),
        vec![InvalidCallKind::Truncated]
    );
}

#[test]
fn near_misses_are_kept_exactly() {
    for text in [
        "a <|tool_cal b",
        "<|tool_call| x",
        "<|tool_call|> not a list",
        "<|tool_call|>",
        "x <|tool_call|>{\"name\": 1}",
        "< |tool_call|>[]",
        "<|im_start|>",
        "[1, 2] <|",
    ] {
        assert_kept(GRANITE, text);
    }
}

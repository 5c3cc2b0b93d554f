//! Kimi K2: `<|tool_calls_section_begin|><|tool_call_begin|>functions.F:0<|tool_call_argument_begin|>{…}<|tool_call_end|><|tool_calls_section_end|>`.

use lmstack::InvalidCallKind;
use lmstack::Message;
use lmstack::natural::Dialect;
use serde_json::json;

use super::harness::{assert_kept, call, calls, checked, faults, marking, parse, text_of};

const KIMI: Dialect = Dialect::KimiK2;

#[test]
fn a_section_of_calls_keeps_the_models_ids() {
    let text = "Let me look.<|tool_calls_section_begin|>\
        <|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|>\
        <|tool_call_begin|>functions.now:1<|tool_call_argument_begin|>{}<|tool_call_end|>\
        <|tool_calls_section_end|>";
    assert_eq!(
        parse(KIMI, text),
        vec![
            Message::assistant("Let me look."),
            Message::tool_calls(vec![
                call(
                    "functions.get_weather:0",
                    "get_weather",
                    json!({"city": "Paris"})
                ),
                call("functions.now:1", "now", json!({})),
            ]),
        ]
    );
}

#[test]
fn whitespace_between_markers_and_text_around_are_read() {
    let text = "Checking ✓\n<|tool_calls_section_begin|>\n<|tool_call_begin|> functions.get_weather:3 \
        <|tool_call_argument_begin|> {\"city\": \"Zürich 🌧\", \"days\": 2} <|tool_call_end|>\n\
        <|tool_calls_section_end|>\nDone ✓.";
    let messages = parse(KIMI, text);
    assert_eq!(
        calls(&messages),
        vec![call(
            "functions.get_weather:3",
            "get_weather",
            json!({"city": "Zürich 🌧", "days": 2})
        )]
    );
    assert_eq!(text_of(&messages), "Checking ✓\n\nDone ✓.");
}

#[test]
fn two_sections_with_text_between() {
    let text = "<|tool_calls_section_begin|><|tool_call_begin|>functions.now:0<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>then\
        <|tool_calls_section_begin|><|tool_call_begin|>functions.now:1<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>";
    let messages = parse(KIMI, text);
    assert_eq!(
        calls(&messages),
        vec![
            call("functions.now:0", "now", json!({})),
            call("functions.now:1", "now", json!({})),
        ]
    );
    assert_eq!(text_of(&messages), "then");
}

#[test]
fn the_singular_section_markers_a_bare_call_and_ids_without_prefix_or_index() {
    let text = "<|tool_call_section_begin|><|tool_call_begin|>get_weather:0<|tool_call_argument_begin|>{\"city\": \"Oslo\"}<|tool_call_end|><|tool_call_section_end|>\
        <|tool_call_begin|>functions.now<|tool_call_argument_begin|>{}<|tool_call_end|>";
    assert_eq!(
        parse(KIMI, text),
        vec![Message::tool_calls(vec![
            call("get_weather:0", "get_weather", json!({"city": "Oslo"})),
            call("call_2", "now", json!({})),
        ])]
    );
}

#[test]
fn the_tagged_form_and_thinking_are_read_too() {
    let text = "<think>the user wants the time</think><tool_call name=\"now\">{}</tool_call>";
    let messages = parse(KIMI, text);
    assert_eq!(calls(&messages), vec![call("call_1", "now", json!({}))]);
}

#[test]
fn an_unknown_tool_and_bad_arguments_are_faults() {
    let text = "<|tool_calls_section_begin|>\
        <|tool_call_begin|>functions.nope:0<|tool_call_argument_begin|>{}<|tool_call_end|>\
        <|tool_call_begin|>functions.get_weather:1<|tool_call_argument_begin|>{\"city\": 3}<|tool_call_end|>\
        <|tool_call_begin|>functions.get_weather:2<|tool_call_argument_begin|>{\"city\": Paris}<|tool_call_end|>\
        <|tool_call_begin|>functions.now:3<|tool_call_argument_begin|>now please<|tool_call_end|>\
        <|tool_calls_section_end|>";
    let messages = checked(&marking(KIMI), text);
    assert_eq!(
        faults(&messages),
        vec![
            InvalidCallKind::UnknownTool,
            InvalidCallKind::SchemaViolation,
            InvalidCallKind::MalformedArguments,
            InvalidCallKind::MalformedArguments,
        ]
    );
    let raw = calls(&messages)[2].invalid.clone().unwrap().raw.unwrap();
    assert_eq!(
        raw,
        "<|tool_call_begin|>functions.get_weather:2<|tool_call_argument_begin|>{\"city\": Paris}<|tool_call_end|>"
    );
    assert_eq!(text_of(&messages), "");
}

#[test]
fn a_bad_call_is_text_by_default() {
    let bad = "<|tool_call_begin|>functions.nope:0<|tool_call_argument_begin|>{}<|tool_call_end|>";
    let text = format!("<|tool_calls_section_begin|>{bad}<|tool_calls_section_end|>");
    let messages = parse(KIMI, &text);
    assert_eq!(text_of(&messages), bad);
    assert!(calls(&messages).is_empty());
}

#[test]
fn truncated_arguments_are_completed_or_marked() {
    let one_missing = "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"";
    assert_eq!(
        calls(&parse(KIMI, one_missing)),
        vec![call(
            "functions.get_weather:0",
            "get_weather",
            json!({"city": "Paris"})
        )]
    );
    let closed_early = "<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"<|tool_call_end|>";
    assert_eq!(
        calls(&parse(KIMI, closed_early)),
        vec![call(
            "functions.get_weather:0",
            "get_weather",
            json!({"city": "Paris"})
        )]
    );
    for cut in [
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Pa",
        "<|tool_call_begin|>functions.write_file:0<|tool_call_argument_begin|>{\"path\": \"a\", \"tags\": [\"x\"",
        "<|tool_call_begin|>functions.now:0<|tool_call_argument_begin|>",
    ] {
        assert_eq!(
            faults(&checked(&marking(KIMI), cut)),
            vec![InvalidCallKind::Truncated],
            "{cut}"
        );
    }
}

#[test]
fn near_misses_are_kept_exactly() {
    for text in [
        "a <|tool_call b",
        "<|tool_calls_section_begin|>",
        "<|tool_calls_section_begin|> not a call",
        "<|tool_calls_section_begin|><|tool_calls_section_end|>",
        "<|tool_calls_section_begin|><|tool_call_beg",
        "<|tool_call_begin|>functions.now:0",
        "<|tool_call_begin|>functions.now:0<|tool_call_end|>",
        "<|tool_call_begin|>functions.now:0<|tool_call_argument",
        "x <|tool_calls_section_end|> y",
        "<|tool_call_end|>",
        "< |tool_call_begin|>",
        "<|tool_call_begin|>functions.now:0 <b>hm</b>",
        "<|im_end|>",
        "[1, 2] <|",
    ] {
        assert_kept(KIMI, text);
    }
}

#[test]
fn a_near_miss_before_a_call_does_not_hide_it() {
    let text = "<|tool_calls_section_begin|> <|tool_call_begin|>functions.now:0<|tool_call_argument_begin|>{}<|tool_call_end|>";
    let text = format!("<|tool_call_begin|>oops{text}");
    let messages = parse(KIMI, &text);
    assert_eq!(
        calls(&messages),
        vec![call("functions.now:0", "now", json!({}))]
    );
    assert_eq!(text_of(&messages), "<|tool_call_begin|>oops");
    let thinking = parse(KIMI, "<|tool_call_begin|>now <think>hm</think>");
    assert_eq!(
        thinking,
        vec![
            Message::assistant("<|tool_call_begin|>now "),
            Message::reasoning("hm"),
        ]
    );
}

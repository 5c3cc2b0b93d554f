//! DeepSeek V3 / R1: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>F\n```json\n{…}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>`;
//! V3.1: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>F<｜tool▁sep｜>{…}<｜tool▁call▁end｜><｜tool▁calls▁end｜>`.

use lmstack::InvalidCallKind;
use lmstack::Message;
use lmstack::natural::Dialect;
use serde_json::json;

use super::harness::{assert_kept, call, calls, checked, faults, marking, parse, text_of};

const DEEPSEEK: Dialect = Dialect::DeepSeek;

/// A V3 / R1 call, as the chat template writes it.
fn v3(name: &str, args: &str) -> String {
    format!(
        "<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{args}\n```<｜tool▁call▁end｜>"
    )
}

/// A V3.1 call.
fn v31(name: &str, args: &str) -> String {
    format!("<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>{args}<｜tool▁call▁end｜>")
}

/// Calls in a section.
fn section(calls: &[String]) -> String {
    format!(
        "<｜tool▁calls▁begin｜>{}<｜tool▁calls▁end｜>",
        calls.concat()
    )
}

#[test]
fn the_v3_form_streams_each_call() {
    let text = format!(
        "Let me look.{}",
        section(&[
            v3("get_weather", "{\"city\": \"Paris\"}"),
            format!("\n{}", v3("now", "{}")),
        ])
    );
    assert_eq!(
        parse(DEEPSEEK, &text),
        vec![
            Message::assistant("Let me look."),
            Message::tool_calls(vec![
                call("call_1", "get_weather", json!({"city": "Paris"})),
                call("call_2", "now", json!({})),
            ]),
        ]
    );
}

#[test]
fn the_v31_form_streams_each_call() {
    let text = format!(
        "查天气{}\nDone ✓.",
        section(&[
            v31("get_weather", "{\"city\": \"Zürich 🌧\", \"days\": 2}"),
            v31("now", "{}"),
        ])
    );
    let messages = parse(DEEPSEEK, &text);
    assert_eq!(
        calls(&messages),
        vec![
            call(
                "call_1",
                "get_weather",
                json!({"city": "Zürich 🌧", "days": 2})
            ),
            call("call_2", "now", json!({})),
        ]
    );
    assert_eq!(text_of(&messages), "查天气\nDone ✓.");
}

#[test]
fn thinking_then_calls_and_text_between_sections() {
    let text = format!(
        "<think>R1 reasons ü</think>{}then {}",
        section(&[v3("now", "{}")]),
        section(&[v31("now", "{}")])
    );
    let messages = parse(DEEPSEEK, &text);
    assert_eq!(
        calls(&messages),
        vec![
            call("call_1", "now", json!({})),
            call("call_2", "now", json!({}))
        ]
    );
    assert_eq!(text_of(&messages), "then ");
}

#[test]
fn a_tool_named_function_in_the_v31_form() {
    let text = section(&[v31("function", "{}")]);
    let messages = checked(&marking(DEEPSEEK), &text);
    assert_eq!(faults(&messages), vec![InvalidCallKind::UnknownTool]);
    assert_eq!(calls(&messages)[0].name, "function");
}

#[test]
fn an_unknown_tool_and_bad_arguments_are_faults() {
    let text = section(&[
        v3("nope", "{}"),
        v31("get_weather", "{\"city\": 3}"),
        v3("get_weather", "{\"city\": Paris}"),
        v31("now", "now please"),
    ]);
    let messages = checked(&marking(DEEPSEEK), &text);
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
    assert_eq!(raw, v3("get_weather", "{\"city\": Paris}"));
    assert_eq!(text_of(&messages), "");
}

#[test]
fn truncated_arguments_are_completed_or_marked() {
    let one_missing =
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"";
    assert_eq!(
        calls(&parse(DEEPSEEK, one_missing)),
        vec![call("call_1", "get_weather", json!({"city": "Paris"}))]
    );
    let closed_early = v31("get_weather", "{\"city\": \"Paris\"");
    assert_eq!(
        calls(&parse(DEEPSEEK, &closed_early)),
        vec![call("call_1", "get_weather", json!({"city": "Paris"}))]
    );
    for cut in [
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Pa",
        "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_wea",
        "<｜tool▁call▁begin｜>write_file<｜tool▁sep｜>{\"path\": \"a\", \"tags\": [\"x\"",
        "<｜tool▁call▁begin｜>now<｜tool▁sep｜>",
    ] {
        assert_eq!(
            faults(&checked(&marking(DEEPSEEK), cut)),
            vec![InvalidCallKind::Truncated],
            "{cut}"
        );
    }
}

#[test]
fn near_misses_are_kept_exactly() {
    for text in [
        "a <｜tool▁call b",
        "a <｜tool▁calls b",
        "<｜tool▁calls▁begin｜>",
        "<｜tool▁calls▁begin｜> not a call",
        "<｜tool▁calls▁begin｜><｜tool▁calls▁end｜>",
        "<｜tool▁calls▁begin｜><｜tool▁call▁be",
        "<｜tool▁call▁begin｜>now",
        "<｜tool▁call▁begin｜>now<｜tool▁call▁end｜>",
        "<｜tool▁call▁begin｜>now<｜tool▁se",
        "<｜tool▁call▁begin｜>now<｜tool▁sep｝>{}",
        "x <｜tool▁calls▁end｜> y",
        "<｜tool▁call▁end｜>",
        "<｜tool▁",
        "<｜end▁of▁sentence｜>",
        "<|tool_call|>",
        "< ｜tool▁call▁begin｜>",
    ] {
        assert_kept(DEEPSEEK, text);
    }
}

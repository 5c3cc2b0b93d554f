//! Mistral: the v0.3 list `[TOOL_CALLS][{"name": F, "arguments": {…}}, …]` and
//! the newer tokenizers' `[TOOL_CALLS]F[ARGS]{…}` (`[CALL_ID]id` before
//! `[ARGS]` in v11), one call per marker.

use lmstack::natural::{Dialect, NaturalToolUseParser};
use lmstack::service::{Machine, Output};
use lmstack::{Event, InvalidCallKind, Message};
use serde_json::json;

use super::harness::{assert_kept, call, calls, checked, faults, marking, parse, text_of, tools};

const MISTRAL: Dialect = Dialect::Mistral;

#[test]
fn the_v03_list_streams_each_call_and_ignores_written_ids() {
    let text = "Let me check.[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"a1B2c3D4e\"}, {\"name\": \"now\", \"arguments\": {}}]";
    assert_eq!(
        parse(MISTRAL, text),
        vec![
            Message::assistant("Let me check."),
            Message::tool_calls(vec![
                call("call_1", "get_weather", json!({"city": "Paris"})),
                call("call_2", "now", json!({})),
            ]),
        ]
    );
}

#[test]
fn the_list_may_follow_the_marker_after_a_space() {
    let text = "[TOOL_CALLS] [{\"arguments\": {\"city\": \"Oslo\", \"days\": 2}, \"name\": \"get_weather\"}]";
    assert_eq!(
        parse(MISTRAL, text),
        vec![Message::tool_calls(vec![call(
            "call_1",
            "get_weather",
            json!({"city": "Oslo", "days": 2})
        )])]
    );
}

#[test]
fn a_named_call_ends_with_its_object_and_prose_follows() {
    let text =
        "Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\", \"units\": \"C\"} Anything else?";
    assert_eq!(
        parse(MISTRAL, text),
        vec![
            Message::assistant("Sure."),
            Message::tool_calls(vec![call(
                "call_1",
                "get_weather",
                json!({"city": "Paris", "units": "C"})
            )]),
            Message::assistant(" Anything else?"),
        ]
    );
}

#[test]
fn a_named_call_streams_its_name_and_arguments_as_they_arrive() {
    let mut machine = NaturalToolUseParser::new()
        .dialect(MISTRAL)
        .machine(&tools(), 0)
        .unwrap();
    let mut out = Output::new();
    let mut push = |piece: &str| {
        machine.push(Event::text(piece), &mut out).unwrap();
        out.drain().collect::<Vec<_>>()
    };
    assert_eq!(push("Hi [TOOL_CALLS]get_wea"), vec![Event::text("Hi ")]);
    assert_eq!(
        push("ther[ARGS]{\"city\": \"Pa"),
        vec![
            Event::call_start(0, "call_1", "get_weather"),
            Event::call_arguments(0, "{\"city\": \"Pa"),
        ]
    );
    assert_eq!(
        push("ris\"} ok"),
        vec![Event::call_arguments(0, "ris\"}"), Event::text(" ok")]
    );
}

#[test]
fn two_named_calls_in_one_piece_are_one_run() {
    let text = "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]now[ARGS]{}\n";
    assert_eq!(
        parse(MISTRAL, text),
        vec![Message::tool_calls(vec![
            call("call_1", "get_weather", json!({"city": "Paris"})),
            call("call_2", "now", json!({})),
        ])]
    );
    let spaced = "[TOOL_CALLS] now[ARGS] {}\n[TOOL_CALLS]write_file[ARGS]{\"path\": \"a\", \"tags\": [1, {\"b\": \"}\"}]}";
    assert_eq!(
        calls(&parse(MISTRAL, spaced)),
        vec![
            call("call_1", "now", json!({})),
            call(
                "call_2",
                "write_file",
                json!({"path": "a", "tags": [1, {"b": "}"}]})
            ),
        ]
    );
}

#[test]
fn a_call_id_before_args_is_read_and_kept_in_transcript_mode() {
    let text = "[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]now[CALL_ID]Zz9Yy8Xx7[ARGS]{}";
    assert_eq!(
        calls(&parse(MISTRAL, text)),
        vec![
            call("call_1", "get_weather", json!({"city": "Paris"})),
            call("call_2", "now", json!({})),
        ]
    );
    let transcript = NaturalToolUseParser::new()
        .dialect(MISTRAL)
        .transcript(true);
    assert_eq!(
        calls(&checked(&transcript, text)),
        vec![
            call("a1B2c3D4e", "get_weather", json!({"city": "Paris"})),
            call("Zz9Yy8Xx7", "now", json!({})),
        ]
    );
    let list = "[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}, \"id\": \"a1B2c3D4e\"}]";
    assert_eq!(
        calls(&checked(&transcript, list)),
        vec![call("a1B2c3D4e", "now", json!({}))]
    );
}

#[test]
fn an_unknown_tool_is_a_fault_in_either_form() {
    for text in [
        "[TOOL_CALLS]nope[ARGS]{\"a\": 1}",
        "[TOOL_CALLS][{\"name\": \"nope\", \"arguments\": {}}]",
    ] {
        assert_eq!(
            faults(&checked(&marking(MISTRAL), text)),
            vec![InvalidCallKind::UnknownTool],
            "{text}"
        );
    }
    // Kept as it was written under the default policy.
    let text = "a [TOOL_CALLS]nope[ARGS]{\"a\": 1} b";
    assert_eq!(text_of(&parse(MISTRAL, text)), text);
}

#[test]
fn malformed_arguments_are_faults_and_prose_goes_on() {
    for (text, kind) in [
        (
            "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"]",
            InvalidCallKind::MalformedArguments,
        ),
        (
            "[TOOL_CALLS]get_weather[ARGS]\"Paris\"",
            InvalidCallKind::MalformedArguments,
        ),
        (
            "[TOOL_CALLS]get_weather[ARGS]{\"city\": Paris}",
            InvalidCallKind::MalformedArguments,
        ),
        (
            "[TOOL_CALLS]get_weather[ARGS]{\"city\": 3}",
            InvalidCallKind::SchemaViolation,
        ),
        (
            "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"]}]",
            InvalidCallKind::MalformedArguments,
        ),
    ] {
        assert_eq!(
            faults(&checked(&marking(MISTRAL), text)),
            vec![kind],
            "{text}"
        );
    }
    let messages = checked(
        &marking(MISTRAL),
        "[TOOL_CALLS]now[ARGS]oops [TOOL_CALLS]now[ARGS]{}",
    );
    assert_eq!(faults(&messages), vec![InvalidCallKind::MalformedArguments]);
    assert_eq!(calls(&messages).len(), 2);
    assert_eq!(text_of(&messages), "oops ");
    let invalid = calls(&messages)[0].invalid.clone().unwrap();
    assert_eq!(invalid.raw.as_deref(), Some("[TOOL_CALLS]now[ARGS]"));
}

#[test]
fn a_cut_off_call_is_completed_or_truncated() {
    for text in [
        "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"",
        "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"</s>",
        "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}",
    ] {
        assert_eq!(
            calls(&parse(MISTRAL, text)),
            vec![call("call_1", "get_weather", json!({"city": "Paris"}))],
            "{text}"
        );
    }
    for text in [
        "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Pa",
        "[TOOL_CALLS]write_file[ARGS]{\"path\": \"a\", \"tags\": [1",
        "[TOOL_CALLS]get_weather[ARGS]",
        "[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS] ",
    ] {
        assert_eq!(
            faults(&checked(&marking(MISTRAL), text)),
            vec![InvalidCallKind::Truncated],
            "{text}"
        );
    }
}

#[test]
fn unicode_in_arguments_and_around_markers() {
    let text =
        "Voilà 🌧[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Zürich 🌧\", \"units\": \"°C\"}ñ fin";
    let messages = parse(MISTRAL, text);
    assert_eq!(
        calls(&messages),
        vec![call(
            "call_1",
            "get_weather",
            json!({"city": "Zürich 🌧", "units": "°C"})
        )]
    );
    assert_eq!(text_of(&messages), "Voilà 🌧ñ fin");
}

#[test]
fn a_marker_breaking_a_name_is_read_again() {
    let text = "[TOOL_CALLS]get[TOOL_CALLS]now[ARGS]{}";
    let messages = parse(MISTRAL, text);
    assert_eq!(text_of(&messages), "[TOOL_CALLS]get");
    assert_eq!(calls(&messages), vec![call("call_1", "now", json!({}))]);
}

#[test]
fn near_misses_are_kept_exactly() {
    let long_name = format!("[TOOL_CALLS]{}[ARGS]{{}}", "a".repeat(300));
    for text in [
        "[1, 2] and [a](b)",
        "[TOOL_CALL] x",
        "[TOOL_CALLS",
        "x [TOOL_CALLS",
        "[TOOL_CALLS]",
        "[TOOL_CALLS] is the token",
        "[TOOL_CALLS]get weather",
        "[TOOL_CALLS]get_weather",
        "[TOOL_CALLS]get_weather[AR",
        "[TOOL_CALLS]get_weather[ARG]{}",
        "[TOOL_CALLS]get_weather [ARGS]{}",
        "[TOOL_CALLS]get_weather[CALL_ID]a b[ARGS]{}",
        "[TOOL_CALLS]get_weather[CALL_ID]ab[CALL_ID]c[ARGS]{}",
        "[TOOL_CALLS]{\"name\": \"now\"}",
        "[TOOL_CALLS][1, 2] and [TOOL_CALLS][]",
        "x [TOOL_CALLS][",
        "x [TOOL_CALLS] [1, ",
        "[TOOL_CALLS]ñ[ARGS]{}",
        "[[TOOL_CALLS]x",
        "```\n[TOOL_CALLS]now[ARGS]{}\n```",
        &long_name,
    ] {
        assert_kept(MISTRAL, text);
    }
}

#[test]
fn magistral_reasoning_between_think_markers_is_reasoning() {
    let text = "[THINK]The user wants Zürich's weather; one call.[/THINK]Checking.\n[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Zürich\"}";
    assert_eq!(
        parse(MISTRAL, text),
        vec![
            Message::reasoning("The user wants Zürich's weather; one call."),
            Message::assistant("Checking.\n"),
            Message::tool_calls(vec![call(
                "call_1",
                "get_weather",
                json!({"city": "Zürich"})
            )]),
        ]
    );
    // Tool syntax inside the reasoning is not a call; a reasoning cut off is
    // reasoning still.
    let text = "[THINK]maybe [TOOL_CALLS]now[ARGS]{} later";
    assert_eq!(
        parse(MISTRAL, text),
        vec![Message::reasoning("maybe [TOOL_CALLS]now[ARGS]{} later")]
    );
    for text in ["[THINK", "a [THIN b", "[/THINK] x", "[THINKING] x"] {
        assert_kept(MISTRAL, text);
    }
}

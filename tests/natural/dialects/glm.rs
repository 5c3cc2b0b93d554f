//! GLM-4.5 / 4.6 / 4.7: `<tool_call>F\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call>`,
//! values typed by the tool's schema.

use lmstack::natural::Dialect;
use lmstack::{InvalidCallKind, Message};
use serde_json::json;

use super::harness::{assert_kept, call, calls, checked, faults, marking, parse, text_of};

const GLM: Dialect = Dialect::Glm;

#[test]
fn the_template_form_and_the_47_form_without_newlines_are_calls() {
    let glm45 = "Let me check.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>";
    let glm47 = "Let me check.\n<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call>";
    for text in [glm45, glm47] {
        assert_eq!(
            parse(GLM, text),
            vec![
                Message::assistant("Let me check.\n"),
                Message::tool_calls(vec![call(
                    "call_1",
                    "get_weather",
                    json!({"city": "Paris", "days": 3})
                )]),
            ],
            "{text:?}"
        );
    }
}

#[test]
fn values_are_typed_by_the_schema() {
    let text = "<tool_call>write_file\n<arg_key>path</arg_key>\n<arg_value>42</arg_value>\n<arg_key>mode</arg_key>\n<arg_value>644</arg_value>\n<arg_key>tags</arg_key>\n<arg_value>[\"a\", \"b\"]</arg_value>\n<arg_key>options</arg_key>\n<arg_value>{\"x\": null}</arg_value>\n<arg_key>force</arg_key>\n<arg_value>true</arg_value>\n<arg_key>content</arg_key>\n<arg_value>line 1\n<b>x</b> ∑ 🌧\n</arg_value>\n</tool_call>";
    assert_eq!(
        calls(&parse(GLM, text)),
        vec![call(
            "call_1",
            "write_file",
            json!({"path": "42", "mode": 644, "tags": ["a", "b"], "options": {"x": null},
                   "force": true, "content": "line 1\n<b>x</b> ∑ 🌧"})
        )]
    );
}

#[test]
fn two_calls_in_one_piece_with_text_between_and_after() {
    let text = "<tool_call>now\n</tool_call>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Zürich</arg_value>\n</tool_call> and then? Done.";
    let messages = parse(GLM, text);
    assert_eq!(
        calls(&messages),
        vec![
            call("call_1", "now", json!({})),
            call("call_2", "get_weather", json!({"city": "Zürich"})),
        ]
    );
    assert_eq!(text_of(&messages), " and then? Done.");
}

#[test]
fn an_unknown_tool_a_value_without_key_and_a_cut_value_are_faults() {
    let text = "<tool_call>nope\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n</tool_call>";
    assert_eq!(
        faults(&checked(&marking(GLM), text)),
        vec![InvalidCallKind::UnknownTool]
    );
    let text = "<tool_call>get_weather\n<arg_value>Paris</arg_value>\n</tool_call>";
    assert_eq!(
        faults(&checked(&marking(GLM), text)),
        vec![InvalidCallKind::MalformedArguments]
    );
    let text = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Par";
    assert_eq!(
        faults(&checked(&marking(GLM), text)),
        vec![InvalidCallKind::Truncated]
    );
    let text = "<tool_call>get_weather\n<arg_key>days</arg_key>\n<arg_value>three</arg_value>\n</tool_call>";
    assert_eq!(
        faults(&checked(&marking(GLM), text)),
        vec![InvalidCallKind::SchemaViolation]
    );
}

#[test]
fn prose_in_tool_call_tags_and_near_misses_are_kept_exactly() {
    for text in [
        "<tool_call>Let me think</tool_call> ok",
        "<tool_call> - a list</tool_call>",
        "<tool_call",
        "a <arg_key>city</arg_key> b",
        "<tool_callx>now</tool_callx>",
    ] {
        assert_kept(GLM, text);
    }
}

#[test]
fn auto_reads_glm_and_the_others_stay_as_they_were() {
    let text =
        "<tool_call>now</tool_call><tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>";
    assert_eq!(
        calls(&parse(Dialect::Auto, text)),
        vec![
            call("call_1", "now", json!({})),
            call("call_2", "now", json!({}))
        ]
    );
    assert_kept(Dialect::Hermes, "<tool_call>now</tool_call>");
}

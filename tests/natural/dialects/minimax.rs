//! MiniMax-M2: `<minimax:tool_call><invoke name="F"><parameter name="p">v</parameter></invoke></minimax:tool_call>`,
//! read as the Claude-style invokes it holds.

use lmstack::natural::Dialect;
use lmstack::{InvalidCallKind, Message};
use serde_json::json;

use super::harness::{assert_kept, call, calls, checked, faults, marking, parse, text_of};

const MINIMAX: Dialect = Dialect::MiniMax;

#[test]
fn the_template_form_is_a_call_per_invoke() {
    let text = "<think>Weather and time.</think>\nChecking.\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n<parameter name=\"days\">2</parameter>\n</invoke>\n<invoke name=\"now\">\n</invoke>\n</minimax:tool_call>";
    assert_eq!(
        parse(MINIMAX, text),
        vec![
            Message::reasoning("Weather and time."),
            Message::assistant("\nChecking.\n"),
            Message::tool_calls(vec![
                call("call_1", "get_weather", json!({"city": "Paris", "days": 2})),
                call("call_2", "now", json!({})),
            ]),
        ]
    );
}

#[test]
fn two_blocks_with_unicode_and_text_after() {
    let text = "<minimax:tool_call><invoke name=\"get_weather\"><parameter name=\"city\">São Paulo 🌧</parameter></invoke></minimax:tool_call>\n\n<minimax:tool_call><invoke name=\"now\"></invoke></minimax:tool_call>\nVoilà.";
    let messages = parse(MINIMAX, text);
    assert_eq!(
        calls(&messages),
        vec![
            call("call_1", "get_weather", json!({"city": "São Paulo 🌧"})),
            call("call_2", "now", json!({})),
        ]
    );
    assert_eq!(text_of(&messages), "\nVoilà.");
}

#[test]
fn unknown_tools_bad_values_and_cut_blocks_are_faults() {
    let text = "<minimax:tool_call><invoke name=\"nope\"></invoke></minimax:tool_call>";
    assert_eq!(
        faults(&checked(&marking(MINIMAX), text)),
        vec![InvalidCallKind::UnknownTool]
    );
    let text = "<minimax:tool_call><invoke name=\"get_weather\"><parameter name=\"days\">x</parameter></invoke></minimax:tool_call>";
    assert_eq!(
        faults(&checked(&marking(MINIMAX), text)),
        vec![InvalidCallKind::SchemaViolation]
    );
    let text = "<minimax:tool_call><invoke name=\"get_weather\"><parameter name=\"city\">Par";
    assert_eq!(
        faults(&checked(&marking(MINIMAX), text)),
        vec![InvalidCallKind::Truncated]
    );
}

#[test]
fn near_misses_are_kept_exactly() {
    for text in [
        "<minimax:tool_call> not a call",
        "<minimax:tool_cal",
        "<minimax:tool_call x=\"1\"><invoke name=\"now\"></invoke></minimax:tool_call>",
        "<other:tool_call><invoke name=\"now\"></invoke></other:tool_call>",
    ] {
        assert_kept(MINIMAX, text);
    }
}

#[test]
fn claude_blocks_are_not_minimax_and_auto_reads_both() {
    let claude = "<function_calls><invoke name=\"now\"></invoke></function_calls>";
    assert_kept(MINIMAX, claude);
    let both =
        format!("{claude}<minimax:tool_call><invoke name=\"now\"></invoke></minimax:tool_call>");
    assert_eq!(calls(&parse(Dialect::Auto, &both)).len(), 2);
}

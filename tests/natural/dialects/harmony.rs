//! Harmony (gpt-oss): `<|channel|>analysis<|message|>…<|end|>` is reasoning,
//! `<|start|>assistant<|channel|>commentary to=functions.F <|constrain|>json<|message|>{…}<|call|>`
//! a call, `final` and recipient-less `commentary` messages text.

use lmstack::InvalidCallKind;
use lmstack::Message;
use lmstack::natural::Dialect;
use serde_json::json;

use super::harness::{assert_kept, call, calls, checked, faults, marking, parse, text_of};

const HARMONY: Dialect = Dialect::Harmony;

#[test]
fn analysis_then_a_call_is_reasoning_then_the_call() {
    let text = "<|channel|>analysis<|message|>Need to use function get_weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>";
    assert_eq!(
        parse(HARMONY, text),
        vec![
            Message::reasoning("Need to use function get_weather."),
            Message::tool_calls(vec![call(
                "call_1",
                "get_weather",
                json!({"city": "Paris"})
            )]),
        ]
    );
}

#[test]
fn analysis_then_final_is_reasoning_then_text() {
    let text = "<|channel|>analysis<|message|>User asks: \"What is 2 + 2?\" Simple arithmetic.<|end|><|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>";
    assert_eq!(
        parse(HARMONY, text),
        vec![
            Message::reasoning("User asks: \"What is 2 + 2?\" Simple arithmetic."),
            Message::assistant("2 + 2 = 4."),
        ]
    );
}

#[test]
fn a_final_message_without_its_end_runs_to_the_end_of_the_text() {
    let text = "<|start|>assistant<|channel|>final<|message|>Bonjour, ça va ? 🌞";
    assert_eq!(
        parse(HARMONY, text),
        vec![Message::assistant("Bonjour, ça va ? 🌞")]
    );
}

#[test]
fn a_preamble_is_text_before_the_call() {
    let text = "<|channel|>analysis<|message|>Plan.<|end|><|start|>assistant<|channel|>commentary<|message|>**Action plan**: write the file.<|end|><|start|>assistant<|channel|>commentary to=functions.write_file<|constrain|>json<|message|>{\"path\": \"index.html\", \"content\": \"<p>hi</p>\"}<|call|>";
    assert_eq!(
        parse(HARMONY, text),
        vec![
            Message::reasoning("Plan."),
            Message::assistant("**Action plan**: write the file."),
            Message::tool_calls(vec![call(
                "call_1",
                "write_file",
                json!({"path": "index.html", "content": "<p>hi</p>"})
            )]),
        ]
    );
}

#[test]
fn two_calls_in_one_piece_and_the_recipient_in_the_role() {
    let text = "<|start|>assistant to=functions.now<|channel|>commentary json<|message|>{}<|call|><|start|>assistant<|channel|>commentary to=functions.get_weather<|message|>{\"city\": \"Zürich 🌧\", \"days\": 2}<|call|>";
    let messages = parse(HARMONY, text);
    assert_eq!(
        messages,
        vec![Message::tool_calls(vec![
            call("call_1", "now", json!({})),
            call(
                "call_2",
                "get_weather",
                json!({"city": "Zürich 🌧", "days": 2})
            ),
        ])]
    );
}

#[test]
fn a_call_on_the_analysis_channel_is_a_call_and_a_built_in_tool_is_reasoning() {
    let text =
        "<|channel|>analysis to=functions.get_weather code<|message|>{\"city\": \"Oslo\"}<|call|>";
    assert_eq!(
        calls(&parse(HARMONY, text)),
        vec![call("call_1", "get_weather", json!({"city": "Oslo"}))]
    );
    let text =
        "<|channel|>analysis to=browser.search code<|message|>{\"query\": \"weather\"}<|call|>";
    assert_eq!(
        parse(HARMONY, text),
        vec![Message::reasoning("{\"query\": \"weather\"}")]
    );
}

#[test]
fn text_before_any_header_stays_text() {
    let text = "The weather is fine.<|channel|>final<|message|> Enjoy!<|return|>";
    assert_eq!(
        parse(HARMONY, text),
        vec![Message::assistant("The weather is fine. Enjoy!")]
    );
}

#[test]
fn reasoning_ends_at_the_next_header_even_without_its_end() {
    let text =
        "<|channel|>analysis<|message|>think<|start|>assistant<|channel|>final<|message|>done";
    assert_eq!(
        parse(HARMONY, text),
        vec![Message::reasoning("think"), Message::assistant("done")]
    );
}

#[test]
fn tool_syntax_in_reasoning_is_not_a_call_and_the_tagged_form_in_text_is() {
    let text = "<|channel|>analysis<|message|>maybe <tool_call name=\"now\">{}</tool_call><|end|><|start|>assistant<|channel|>final<|message|>Sure. <tool_call name=\"now\">{}</tool_call><|return|>";
    assert_eq!(
        parse(HARMONY, text),
        vec![
            Message::reasoning("maybe <tool_call name=\"now\">{}</tool_call>"),
            Message::assistant("Sure. "),
            Message::tool_calls(vec![call("call_1", "now", json!({}))]),
        ]
    );
}

#[test]
fn an_unknown_tool_is_a_fault_or_text() {
    let text = "<|start|>assistant<|channel|>commentary to=functions.nope <|constrain|>json<|message|>{}<|call|>";
    assert_eq!(
        faults(&checked(&marking(HARMONY), text)),
        vec![InvalidCallKind::UnknownTool]
    );
    let messages = parse(HARMONY, text);
    assert_eq!(text_of(&messages), text);
    assert!(calls(&messages).is_empty());
}

#[test]
fn malformed_and_schema_breaking_arguments_are_faults() {
    for (text, kind) in [
        (
            "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": }<|call|>",
            InvalidCallKind::MalformedArguments,
        ),
        (
            "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": 3}<|call|>",
            InvalidCallKind::SchemaViolation,
        ),
        (
            "<|channel|>commentary to=functions.get_weather<|message|>{\"city\": \"Paris\"} and more<|call|>",
            InvalidCallKind::MalformedArguments,
        ),
        (
            "<|channel|>commentary to=functions. <|constrain|>json<|message|>{}<|call|>",
            InvalidCallKind::MalformedArguments,
        ),
    ] {
        assert_eq!(
            faults(&checked(&marking(HARMONY), text)),
            vec![kind],
            "{text}"
        );
    }
}

#[test]
fn a_truncated_call_is_completed_or_marked() {
    let stopped = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}";
    assert_eq!(
        calls(&parse(HARMONY, stopped)),
        vec![call("call_1", "get_weather", json!({"city": "Paris"}))]
    );
    let one_missing = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"<|call|>";
    assert_eq!(
        calls(&parse(HARMONY, one_missing)),
        vec![call("call_1", "get_weather", json!({"city": "Paris"}))]
    );
    for cut in [
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Pa",
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>",
    ] {
        assert_eq!(
            faults(&checked(&marking(HARMONY), cut)),
            vec![InvalidCallKind::Truncated],
            "{cut}"
        );
    }
}

#[test]
fn terminators_vanish_and_a_cut_header_is_text() {
    assert_eq!(
        parse(HARMONY, "Hi<|end|> there<|return|>"),
        vec![Message::assistant("Hi there")]
    );
    let cut = "<|channel|>analysis<|message|>ok<|end|><|start|>assistant<|channel|>comment";
    assert_eq!(
        parse(HARMONY, cut),
        vec![
            Message::reasoning("ok"),
            Message::assistant("<|start|>assistant<|channel|>comment"),
        ]
    );
}

#[test]
fn near_misses_are_kept_exactly() {
    for text in [
        "a <|chan b",
        "<|channel| x",
        "<|channel|>",
        "text <|channel|>",
        "<|message|>hello",
        "x <|channel|>foo<|message|>bar",
        "<|channel|>final\nnot a header<|message|>",
        "<|start|>user<|message|>hi",
        "<|start|>assistant<|message|>hi",
        "<|start|>assistant to=<|channel|>finale<|message|>hi",
        "<|channel|>final to=functions.x to=functions.y<|message|>",
        "<|channel|>commentary<|constrain|>json xml<|message|>{}",
        "<|channel|>analysis<|channel|>fine<|message|>",
        "<|sta",
        "< |channel|>final<|message|>",
        "<|channel|>finał<|message|>ü",
    ] {
        assert_kept(HARMONY, text);
    }
}

#[test]
fn a_header_inside_a_broken_one_is_read() {
    let text = "<|start|>assistant to=<|channel|>final<|message|>hi";
    assert_eq!(
        parse(HARMONY, text),
        vec![Message::assistant("<|start|>assistant to=hi")]
    );
}

#[test]
fn a_header_longer_than_a_tag_is_text() {
    for filler in ["x", "é", "🌧"] {
        let text = format!("<|channel|>final {}<|message|>hi", filler.repeat(1500));
        assert_eq!(
            parse(HARMONY, &text),
            vec![Message::assistant(text.clone())]
        );
    }
}

#[test]
fn a_call_ends_at_any_terminator_and_calls_on_separate_lines_are_one_run() {
    let text = "<|channel|>commentary to=functions.now<|message|>{}<|end|>\n<|start|>assistant<|channel|>commentary to=functions.get_weather<|message|>{\"city\": \"Lyon\"} <|return|>\n";
    assert_eq!(
        parse(HARMONY, text),
        vec![Message::tool_calls(vec![
            call("call_1", "now", json!({})),
            call("call_2", "get_weather", json!({"city": "Lyon"})),
        ])]
    );
}

#[test]
fn a_call_without_its_terminator_ends_at_the_next_header_which_is_read() {
    // A transcript that dropped `<|call|>`: the next message's header, with
    // the recipient in its role or a bare channel, ends the call and opens
    // its own message.
    let text = "<|channel|>commentary to=functions.now <|constrain|>json<|message|>{}<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Lyon\"}\n<|channel|>final<|message|>Sunny in Lyon.<|return|>";
    assert_eq!(
        parse(HARMONY, text),
        vec![
            Message::tool_calls(vec![
                call("call_1", "now", json!({})),
                call("call_2", "get_weather", json!({"city": "Lyon"})),
            ]),
            Message::assistant("Sunny in Lyon."),
        ]
    );
    // Broken arguments before the next header are marked, and the header is
    // still read.
    let text = "<|channel|>commentary to=functions.get_weather<|message|>{\"city\": \"Lyon\"} oops<|start|>assistant<|channel|>final<|message|>Done.";
    let messages = checked(&marking(HARMONY), text);
    assert_eq!(faults(&messages), vec![InvalidCallKind::MalformedArguments]);
    assert_eq!(text_of(&messages), "Done.");
}

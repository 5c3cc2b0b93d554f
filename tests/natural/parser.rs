//! The natural tool use parser: every dialect, every failure class from the
//! notes, and the equivalence of streaming and non-streaming parsing.

use lmstack::natural::{Dialect, NaturalToolUseParser, OnInvalid};
use lmstack::service::{Machine, Output};
use lmstack::testing::{Chunking, ScriptedModel, collect_both};
use lmstack::{ChatRequest, Error, Event, InvalidCallKind, Joiner, Message};
use proptest::prelude::*;
use serde_json::{Value, json};
use tower::Layer;

// The tools and checks the families' dialect tests use too.
use crate::dialects::harness::{assert_deltas_concatenate, call, calls, text_of, tools};

fn parser() -> NaturalToolUseParser {
    NaturalToolUseParser::new()
}

/// Streams `text` through a machine in the pieces of `chunking`.
fn stream_with(
    parser: &NaturalToolUseParser,
    text: &str,
    chunking: Chunking,
) -> Result<Vec<Event>, Error> {
    let mut machine = parser.machine(&tools(), 0)?;
    let mut out = Output::new();
    let mut events = Vec::new();
    for piece in chunking.split(text) {
        machine.push(Event::text(piece), &mut out)?;
        events.extend(out.drain());
    }
    machine.finish(&mut out)?;
    events.extend(out.drain());
    Ok(events)
}

fn whole(text: &str) -> Vec<Message> {
    parser().parse(text, &tools()).unwrap()
}

/// Checks that every chunking gives the whole-text result, and that each call's
/// streamed argument deltas concatenate to its final arguments.
#[track_caller]
fn assert_chunking_invariant(parser: &NaturalToolUseParser, text: &str) -> Vec<Message> {
    let want = parser.parse(text, &tools());
    for chunking in [
        Chunking::Bytes(1),
        Chunking::Bytes(3),
        Chunking::Chars,
        Chunking::Random { seed: 9, max: 7 },
    ] {
        let streamed = stream_with(parser, text, chunking);
        match (&want, streamed) {
            (Ok(want), Ok(events)) => {
                assert_eq!(
                    &Joiner::join(events.clone()),
                    want,
                    "{chunking:?} on {text:?}"
                );
                assert_deltas_concatenate(&events, want);
            }
            (Err(want), Err(got)) => assert_eq!(want.to_string(), got.to_string()),
            (want, got) => panic!("{chunking:?} on {text:?}: {want:?} vs {got:?}"),
        }
    }
    want.unwrap_or_default()
}

// ---- dialects -------------------------------------------------------------

#[test]
fn tagged_bare_and_fenced() {
    for text in [
        "<tool_call name=\"get_weather\">{\"city\": \"Paris\"}</tool_call>",
        "<tool_call name='get_weather'>\n{\"city\": \"Paris\"}\n</tool_call>",
        "<tool_call name = \"get_weather\" >\n```json\n{\"city\": \"Paris\"}\n```\n</tool_call>",
        "<tool_call name=\"get_weather\">\n```\n{\"city\": \"Paris\"}\n```</tool_call>",
    ] {
        let messages = assert_chunking_invariant(&parser(), text);
        assert_eq!(
            messages,
            vec![Message::tool_calls(vec![call(
                "call_1",
                "get_weather",
                json!({"city": "Paris"})
            )])],
            "{text}"
        );
    }
}

#[test]
fn hermes_in_any_key_order_with_parameters_or_encoded_arguments() {
    for text in [
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
        "<tool_call>{\"arguments\": {\"city\": \"Paris\"}, \"name\": \"get_weather\"}</tool_call>",
        "<tool_call>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}</tool_call>",
        "<tool_call>{\"type\": \"function\", \"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}</tool_call>",
    ] {
        let messages = assert_chunking_invariant(&parser(), text);
        assert_eq!(
            calls(&messages),
            vec![call("call_1", "get_weather", json!({"city": "Paris"}))],
            "{text}"
        );
    }
}

#[test]
fn qwen3_coder_values_are_typed_by_the_schema() {
    let text = "<tool_call>\n<function=write_file>\n<parameter=path>\n123\n</parameter>\n<parameter=content>\nline 1\nline 2\n\n</parameter>\n<parameter=mode>\n420\n</parameter>\n<parameter=tags>\n[\"a\", \"b\"]\n</parameter>\n<parameter=options>\n{\"x\": 1}\n</parameter>\n<parameter=force>\ntrue\n</parameter>\n</function>\n</tool_call>";
    let messages = assert_chunking_invariant(&parser(), text);
    assert_eq!(
        calls(&messages),
        vec![call(
            "call_1",
            "write_file",
            json!({
                "path": "123", "content": "line 1\nline 2\n", "mode": 420,
                "tags": ["a", "b"], "options": {"x": 1}, "force": true
            })
        )]
    );
}

#[test]
fn qwen3_coder_end_markers_inside_values_and_missing_closers() {
    let inner = "<tool_call>\n<function=write_file>\n<parameter=path>\na.xml\n</parameter>\n<parameter=content>\n<a></parameter><b/>\n</parameter>\n</function>\n</tool_call>";
    let messages = assert_chunking_invariant(&parser(), inner);
    assert_eq!(
        calls(&messages)[0].arguments["content"],
        json!("<a></parameter><b/>")
    );

    let missing_before_function =
        "<tool_call>\n<function=write_file>\n<parameter=path>\nx.txt\n</function>\n</tool_call>";
    let messages = assert_chunking_invariant(&parser(), missing_before_function);
    assert_eq!(
        calls(&messages),
        vec![call("call_1", "write_file", json!({"path": "x.txt"}))]
    );

    let missing_before_next = "<tool_call>\n<function=write_file>\n<parameter=path>\nx.txt\n<parameter=content>\nhi\n</parameter>\n</function>\n</tool_call>";
    let messages = assert_chunking_invariant(&parser(), missing_before_next);
    assert_eq!(
        calls(&messages)[0].arguments,
        json!({"path": "x.txt", "content": "hi"})
    );
}

#[test]
fn qwen3_coder_malformed_parameter_names_are_faults() {
    for text in [
        "<tool_call>\n<function=write_file>\n<parameter=\npath>\nx\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=write_file>\n<parameter=a=b>\nx\n</parameter>\n</function>\n</tool_call>",
    ] {
        let messages = assert_chunking_invariant(&parser(), text);
        let call = &calls(&messages)[0];
        assert!(call.invalid.is_some(), "{text}: {messages:?}");
        assert_eq!(call.invalid.as_ref().unwrap().raw.as_deref(), Some(text));
    }
}

#[test]
fn text_in_an_unclosed_claude_block_reads_the_same_however_it_is_cut() {
    // Whole, the trailing newline came with the text; streamed, alone, it was
    // held as space between calls and dropped: the two disagreed.
    let text = "<function_calls><invoke name=\"now\"></invoke>abc\n def \n";
    let messages = assert_chunking_invariant(&parser(), text);
    assert_eq!(text_of(&messages), "abc\n def");
}

#[test]
fn claude_xml_with_several_invokes_and_a_namespace() {
    for prefix in ["", "antml:"] {
        let text = format!(
            "Checking.\n<{p}function_calls>\n<{p}invoke name=\"get_weather\">\n<{p}parameter name=\"city\">Rome</{p}parameter>\n<{p}parameter name=\"days\">2</{p}parameter>\n</{p}invoke>\n<{p}invoke name=\"now\">\n</{p}invoke>\n</{p}function_calls>\nDone.",
            p = prefix
        );
        let messages = assert_chunking_invariant(&parser(), &text);
        assert_eq!(
            messages,
            vec![
                Message::assistant("Checking.\n"),
                Message::tool_calls(vec![
                    call("call_1", "get_weather", json!({"city": "Rome", "days": 2})),
                    call("call_2", "now", json!({})),
                ]),
                Message::assistant("\nDone."),
            ],
            "{prefix}"
        );
    }
}

#[test]
fn dialects_can_be_chosen_one_at_a_time() {
    let tagged = "<tool_call name=\"now\">{}</tool_call>";
    let hermes = "<tool_call>{\"name\": \"now\"}</tool_call>";
    let only_hermes = parser().dialect(Dialect::Hermes);
    assert_eq!(
        only_hermes.parse(tagged, &tools()).unwrap(),
        vec![Message::assistant(tagged)]
    );
    assert_eq!(
        calls(&only_hermes.parse(hermes, &tools()).unwrap()).len(),
        1
    );
    assert!(
        "qwen3-coder"
            .parse::<Dialect>()
            .unwrap()
            .reads(Dialect::Qwen3Coder)
    );
    assert!("xml".parse::<Dialect>().unwrap_err().contains("claude-xml"));
}

// ---- streaming ------------------------------------------------------------

#[test]
fn a_start_tag_split_at_every_byte_never_leaks() {
    let text = "hello <tool_call name=\"get_weather\">{\"city\": \"Oslo\"}</tool_call> bye";
    let want = whole(text);
    assert_eq!(text_of(&want), "hello  bye");
    for cut in 1..text.len() {
        let mut machine = parser().machine(&tools(), 0).unwrap();
        let mut out = Output::new();
        machine.push(Event::text(&text[..cut]), &mut out).unwrap();
        machine.push(Event::text(&text[cut..]), &mut out).unwrap();
        machine.finish(&mut out).unwrap();
        assert_eq!(Joiner::join(out.drain()), want, "cut at {cut}");
    }
}

#[test]
fn text_goes_out_at_once_except_a_possible_marker() {
    let mut machine = parser().machine(&tools(), 0).unwrap();
    let mut out = Output::new();
    machine.push(Event::text("Hello <tool"), &mut out).unwrap();
    assert_eq!(out.drain().collect::<Vec<_>>(), vec![Event::text("Hello ")]);
    machine.push(Event::text("_cal> x"), &mut out).unwrap();
    assert_eq!(
        out.drain().collect::<Vec<_>>(),
        vec![Event::text("<tool_cal> x")]
    );
}

#[test]
fn arguments_stream_before_the_call_ends() {
    let mut machine = parser().machine(&tools(), 0).unwrap();
    let mut out = Output::new();
    machine
        .push(
            Event::text("<tool_call name=\"write_file\">{\"path\": \"a\", \"content\": \"xx"),
            &mut out,
        )
        .unwrap();
    let events: Vec<Event> = out.drain().collect();
    assert_eq!(events[0], Event::call_start(0, "call_1", "write_file"));
    let streamed: String = events[1..]
        .iter()
        .map(|e| match e {
            Event::ToolCallDelta(d) => d.arguments_delta.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(streamed, "{\"path\": \"a\", \"content\": \"xx");
}

#[test]
fn two_calls_in_one_chunk_keep_their_arguments() {
    let text = "<tool_call name=\"get_weather\">{\"city\": \"A\"}</tool_call><tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"B\"}}</tool_call><tool_call name=\"now\"></tool_call><tool_call name=\"get_weather\">{\"city\": \"C\"}</tool_call>";
    let messages = assert_chunking_invariant(&parser(), text);
    let names: Vec<(String, Value)> = calls(&messages)
        .into_iter()
        .map(|c| (c.name, c.arguments))
        .collect();
    assert_eq!(
        names,
        vec![
            ("get_weather".into(), json!({"city": "A"})),
            ("get_weather".into(), json!({"city": "B"})),
            ("now".into(), json!({})),
            ("get_weather".into(), json!({"city": "C"})),
        ]
    );
}

// ---- context --------------------------------------------------------------

#[test]
fn whitespace_between_and_after_blocks_keeps_the_calls_one_run() {
    let text = "Two:\n<tool_call name=\"now\">{}</tool_call>\n\n<tool_call>{\"name\": \"now\"}</tool_call>\n";
    let messages = assert_chunking_invariant(&parser(), text);
    assert_eq!(
        messages,
        vec![
            Message::assistant("Two:\n"),
            Message::tool_calls(vec![
                call("call_1", "now", json!({})),
                call("call_2", "now", json!({}))
            ]),
        ]
    );
    let messages = assert_chunking_invariant(
        &parser(),
        "<tool_call name=\"now\">{}</tool_call>\n\nDone <b>.",
    );
    assert_eq!(messages[1], Message::assistant("\n\nDone <b>."));
    let messages =
        assert_chunking_invariant(&parser(), "<tool_call name=\"now\">{}</tool_call> <b>x");
    assert_eq!(messages[1], Message::assistant(" <b>x"));
}

#[test]
fn an_end_marker_inside_a_json_string_does_not_end_the_call() {
    let text = "<tool_call name=\"write_file\">{\"path\": \"a</tool_call>b\", \"content\": \"{[<]}\"}</tool_call>";
    let messages = assert_chunking_invariant(&parser(), text);
    assert_eq!(
        calls(&messages)[0].arguments,
        json!({"path": "a</tool_call>b", "content": "{[<]}"})
    );
}

#[test]
fn tool_syntax_in_think_is_reasoning() {
    let text = "<think>I could call <tool_call name=\"now\">{}</tool_call></think>No need.";
    let messages = assert_chunking_invariant(&parser(), text);
    assert_eq!(
        messages,
        vec![
            Message::reasoning("I could call <tool_call name=\"now\">{}</tool_call>"),
            Message::assistant("No need."),
        ]
    );
}

#[test]
fn tags_in_a_prose_code_fence_are_text_unless_disabled() {
    let text = "Example:\n```xml\n<tool_call name=\"now\">{}</tool_call>\n```\nand `<tool_call>` inline, then\n  ```\n<tool_call name=\"now\">{}</tool_call>\n  ```\n";
    let messages = assert_chunking_invariant(&parser(), text);
    assert_eq!(messages, vec![Message::assistant(text)]);
    let unfenced = parser().code_fences(false);
    let messages = assert_chunking_invariant(&unfenced, text);
    assert_eq!(calls(&messages).len(), 2);
}

// ---- bad output -----------------------------------------------------------

#[test]
fn an_unknown_tool_stays_as_text_with_the_error_in_metadata() {
    let text = "<tool_call name=\"launch_rockets\">{\"count\": 3}</tool_call>";
    let messages = assert_chunking_invariant(&parser(), text);
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].as_text(), Some(text));
    let error = messages[0].metadata().get("parse_error").unwrap();
    assert_eq!(error["kind"], "unknown_tool");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("get_weather, write_file, now")
    );
}

#[test]
fn an_unknown_tool_can_be_marked_or_fail() {
    let text = "ok <tool_call name=\"launch_rockets\">{\"count\": 3}</tool_call>";
    let marked = assert_chunking_invariant(&parser().on_invalid(OnInvalid::Mark), text);
    let call = &calls(&marked)[0];
    assert_eq!(call.name, "launch_rockets");
    assert_eq!(call.arguments, json!({"count": 3}));
    assert_eq!(
        call.invalid.as_ref().unwrap().kind,
        InvalidCallKind::UnknownTool
    );

    let error = parser()
        .on_invalid(OnInvalid::Error)
        .parse(text, &tools())
        .unwrap_err();
    assert!(
        matches!(&error, Error::InvalidToolCall { invalid, .. } if invalid.kind == InvalidCallKind::UnknownTool)
    );
    assert!(
        error.to_string().contains("unknown_tool tool call"),
        "{error}"
    );
}

#[test]
fn schema_violations_and_malformed_json_mark_the_streamed_call() {
    let violation = "<tool_call name=\"get_weather\">{\"days\": \"three\"}</tool_call>";
    let messages = assert_chunking_invariant(&parser(), violation);
    let invalid = calls(&messages)[0].invalid.clone().unwrap();
    assert_eq!(invalid.kind, InvalidCallKind::SchemaViolation);
    assert!(
        invalid.message.contains("\"city\" is a required property"),
        "{}",
        invalid.message
    );
    assert_eq!(invalid.raw.as_deref(), Some(violation));

    let malformed = "<tool_call name=\"get_weather\">{\"city\": Paris}</tool_call>";
    let messages = assert_chunking_invariant(&parser(), malformed);
    let invalid = calls(&messages)[0].invalid.clone().unwrap();
    assert_eq!(invalid.kind, InvalidCallKind::MalformedArguments);
    assert_eq!(invalid.raw.as_deref(), Some(malformed));
}

#[test]
fn common_json_faults_are_repaired() {
    for text in [
        "<tool_call name=\"get_weather\">{\"city\": \"Paris\", \"days\": 2,}</tool_call>",
        "<tool_call name=\"get_weather\">{\"city\": \"Paris\", \"days\": 2</tool_call>",
        "<tool_call name=\"get_weather\">{\"city\": \"Paris\", \"days\": 2",
        "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}",
        "<tool_call name=\"get_weather\">{\"city\": \"Paris\", \"days\": 2}",
    ] {
        let messages = assert_chunking_invariant(&parser(), text);
        assert_eq!(
            calls(&messages),
            vec![call(
                "call_1",
                "get_weather",
                json!({"city": "Paris", "days": 2})
            )],
            "{text}"
        );
    }
}

#[test]
fn truncated_calls_are_marked_with_their_raw_text() {
    for text in [
        "<tool_call name=\"write_file\">{\"path\": \"a\", \"content\": \"unfinished",
        "<tool_call name=\"write_file\">{\"path\": \"a\", \"tags\": [1, 2",
        "<tool_call>{\"name\": \"write_file\", \"arguments\": {\"path\": \"a\"",
        "<tool_call>\n<function=write_file>\n<parameter=path>\nhalf",
    ] {
        let messages = assert_chunking_invariant(&parser(), text);
        let invalid = calls(&messages)[0]
            .invalid
            .clone()
            .unwrap_or_else(|| panic!("{text}: {messages:?}"));
        assert_eq!(invalid.kind, InvalidCallKind::Truncated, "{text}");
        assert_eq!(invalid.raw.as_deref(), Some(text));
    }
}

/// Checks `text` read whole against every split of it into two pieces, under
/// every policy, besides the chunkings of `assert_chunking_invariant`.
#[track_caller]
fn assert_every_split_agrees(text: &str) {
    for policy in [OnInvalid::Text, OnInvalid::Mark, OnInvalid::Error] {
        let parser = parser().on_invalid(policy);
        assert_chunking_invariant(&parser, text);
        let want = parser.parse(text, &tools()).map_err(|e| e.to_string());
        for at in (1..text.len()).filter(|&at| text.is_char_boundary(at)) {
            let mut machine = parser.machine(&tools(), 0).unwrap();
            let mut out = Output::new();
            let got = machine
                .push(Event::text(&text[..at]), &mut out)
                .and_then(|()| machine.push(Event::text(&text[at..]), &mut out))
                .and_then(|()| machine.finish(&mut out))
                .map(|()| Joiner::join(out.drain().collect::<Vec<_>>()))
                .map_err(|e| e.to_string());
            assert_eq!(got, want, "{policy:?}, split at {at} of {text:?}");
        }
    }
}

#[test]
fn an_unclosed_call_before_a_thought_reads_alike_in_any_chunking() {
    // A call cut off inside its arguments, then a stray quote, a thought with a
    // call in it, and a JSON-form call whose argument is "]": read whole and
    // read a byte at a time, these once gave different messages.
    assert_every_split_agrees(concat!(
        "<tool_call name=\"get_weather\">{\"city\": \"x\"",
        "\"<think><tool_call name=\"now\">{}</tool_call></think>",
        "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\":\"]\"}}</tool_call>",
    ));
}

#[test]
fn a_bad_escape_after_a_closing_tag_in_a_string_reads_alike_in_any_chunking() {
    // The block runs from the bad escape to the next closing tag, wherever the
    // piece holding the escape began.
    for text in [
        "<tool_call>{\"name\": \"get</tool_call>\\q\", \"arguments\": {}}</tool_call> after",
        "<tool_call>{\"na</tool_call>\\u12g4me\": \"get_weather\"}</tool_call> after",
        "<tool_call name=\"get_weather\">{\"city\": \"a</tool_call>\"]}</tool_call> after",
    ] {
        assert_every_split_agrees(text);
    }
}

#[test]
fn a_block_cut_before_its_name_is_text() {
    for text in [
        "<tool_call>{\"arguments\": {\"a\": 1}",
        "<tool_call name=\"get_weather\"",
    ] {
        let messages = assert_chunking_invariant(&parser(), text);
        assert_eq!(text_of(&messages), text);
        assert!(calls(&messages).is_empty());
    }
}

#[test]
fn near_misses_are_kept_exactly() {
    for text in [
        "a <tool_cal> b",
        "x < y and y > z",
        "<",
        "<tool_call",
        "the <tool_call> tag wraps calls",
        "<tool_call>\n<b>bold</b>",
        "<tool_call>  <tool_call>{\"name\": \"now\"}</tool_call>",
        "<function_calls> are described here",
        "&lt;tool_call&gt;",
        "</tool_call> alone",
    ] {
        let messages = assert_chunking_invariant(&parser(), text);
        let calls = calls(&messages);
        if text.starts_with("<tool_call>  <tool_call>") {
            assert_eq!(text_of(&messages), "<tool_call>  ");
            assert_eq!(calls.len(), 1);
        } else {
            assert_eq!(text_of(&messages), text, "{messages:?}");
            assert!(calls.is_empty());
        }
    }
}

#[test]
fn unicode_around_and_inside_calls() {
    let text = "Voilà — 天気を調べます 🌦️\n<tool_call name=\"get_weather\">{\"city\": \"Zürich ✓ 東京\", \"units\": \"°C\"}</tool_call>\nFertig ✅";
    let messages = assert_chunking_invariant(&parser(), text);
    assert_eq!(text_of(&messages), "Voilà — 天気を調べます 🌦️\n\nFertig ✅");
    assert_eq!(
        calls(&messages)[0].arguments,
        json!({"city": "Zürich ✓ 東京", "units": "°C"})
    );
}

#[test]
fn names_match_case_insensitively_and_keep_the_tools_spelling() {
    let messages = whole("<tool_call name=\"GET_WEATHER\">{\"city\": \"x\"}</tool_call>");
    assert_eq!(calls(&messages)[0].name, "get_weather");
}

#[test]
fn without_tools_any_name_goes_unchecked() {
    let messages = parser()
        .parse("<tool_call name=\"anything\">{\"x\": 1}</tool_call>", &[])
        .unwrap();
    assert_eq!(
        calls(&messages),
        vec![call("call_1", "anything", json!({"x": 1}))]
    );
}

#[test]
fn a_block_over_the_limit_is_a_clear_error() {
    let text = format!(
        "<tool_call name=\"write_file\">{{\"path\": \"{}\"}}</tool_call>",
        "x".repeat(5000)
    );
    let limited = parser().call_limit(4096);
    for chunking in [Chunking::Whole, Chunking::Bytes(64)] {
        let error = stream_with(&limited, &text, chunking).unwrap_err();
        assert!(
            matches!(error, Error::LimitExceeded { limit: 4096, .. }),
            "{error:?}"
        );
        assert!(
            error.to_string().starts_with("natural tool use parser:"),
            "{error}"
        );
    }
}

#[test]
fn a_bad_call_in_a_block_past_the_limit_fails_with_the_limit_however_cut() {
    // The block is read no further than its limit, so the unknown tool, found
    // at the call's end, is reached only where the whole block fits.
    let text = "<tool_call name=\"nope\">{\"a\": 1}</tool_call>";
    let strict = parser().on_invalid(OnInvalid::Error);
    for chunking in [Chunking::Whole, Chunking::Bytes(1), Chunking::Bytes(7)] {
        let over = stream_with(&strict.clone().call_limit(text.len() - 1), text, chunking);
        assert!(
            matches!(over, Err(Error::LimitExceeded { .. })),
            "{chunking:?}: {over:?}"
        );
        let fits = stream_with(&strict.clone().call_limit(text.len()), text, chunking);
        assert!(
            matches!(&fits, Err(Error::InvalidToolCall { invalid, .. }) if invalid.kind == InvalidCallKind::UnknownTool),
            "{chunking:?}: {fits:?}"
        );
    }
}

#[test]
fn metadata_of_the_text_is_kept() {
    let message = Message::assistant("<tool_call name=\"now\">{}</tool_call>")
        .with_metadata(lmstack::Metadata::generation("gen-7"));
    let mut machine = parser().machine(&tools(), 0).unwrap();
    let mut out = Output::new();
    machine.push(Event::message(message), &mut out).unwrap();
    let messages = Joiner::join(out.drain());
    assert_eq!(calls(&messages)[0].metadata.generation_id(), Some("gen-7"));
}

// ---- the layer ------------------------------------------------------------

#[tokio::test]
async fn the_layer_parses_both_modes_alike_and_numbers_ids_after_the_history() {
    let reply = "Sure.\n<tool_call name=\"get_weather\">{\"city\": \"Paris\"}</tool_call>";
    let history = vec![
        Message::user("weather?"),
        Message::tool_calls(vec![call("call_1", "now", json!({}))]),
        Message::tool_results(vec![lmstack::ToolResult::text("call_1", "now", "noon")]),
    ];
    let mut request = ChatRequest::new(history);
    request.options.tools = tools();
    let make = || {
        parser().layer(
            ScriptedModel::new()
                .chunking(Chunking::Bytes(2))
                .reply(reply),
        )
    };
    let (whole, streamed) = collect_both(make, request).await.unwrap();
    assert_eq!(whole, streamed);
    assert_eq!(
        whole,
        vec![
            Message::assistant("Sure.\n"),
            Message::tool_calls(vec![call(
                "call_2",
                "get_weather",
                json!({"city": "Paris"})
            )]),
        ]
    );
}

// ---- properties -----------------------------------------------------------

pub(crate) fn fragment() -> impl Strategy<Value = String> {
    let city = "[A-Za-z é東<>/\"{}\\[\\],:]{0,12}";
    prop_oneof![
        "[a-z .,\n]{0,20}".prop_map(String::from),
        "[<>/`{}\"a-z_=\n ]{0,12}".prop_map(String::from),
        Just("<tool_cal>".to_string()),
        Just("```\n".to_string()),
        city.prop_map(|c| format!("<tool_call name=\"get_weather\">{}</tool_call>", json!({"city": c}))),
        city.prop_map(|c| format!("<tool_call name=\"get_weather\">\n```json\n{}\n```\n</tool_call>", json!({"city": c, "days": 3}))),
        city.prop_map(|c| format!("<tool_call>{{\"name\": \"get_weather\", \"arguments\": {}}}</tool_call>", json!({"city": c}))),
        city.prop_map(|c| format!("<tool_call>{{\"arguments\": {}, \"name\": \"GET_weather\"}}</tool_call>", json!({"city": c}).to_string().replace('}', ",}"))),
        "[a-z<>/ \n]{0,12}".prop_map(|c| format!("<tool_call>\n<function=write_file>\n<parameter=path>\n{c}\n</parameter>\n<parameter=mode>\n7\n</parameter>\n</function>\n</tool_call>")),
        "[a-z<>/ \n]{0,12}".prop_map(|c| format!("<function_calls><invoke name=\"write_file\"><parameter name=\"content\">{c}</parameter><parameter name=\"path\">p</parameter></invoke></function_calls>")),
        "[a-z<> ]{0,12}".prop_map(|c| format!("<think>{c}<tool_call name=\"now\">{{}}</tool_call></think>")),
        Just("<tool_call name=\"nope\">{\"a\": 1}</tool_call>".to_string()),
        Just("<tool_call name=\"get_weather\">{\"city\": 1}</tool_call>".to_string()),
        Just("<tool_call name=\"get_weather\">{\"city\": \"x\"".to_string()),
    ]
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig {
        // PROPTEST_CASES runs more cases (for example in a long soak).
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(256),
        ..ProptestConfig::default()
    }))]

    #[test]
    fn any_chunking_gives_the_whole_text_result(
        fragments in prop::collection::vec(fragment(), 0..6),
        seed in any::<u64>(),
        max in 1usize..24,
        policy in prop_oneof![Just(OnInvalid::Text), Just(OnInvalid::Mark), Just(OnInvalid::Error)],
    ) {
        // The same text after a known call, which must be read whatever follows
        // (a reader that gave nothing would agree with itself).
        let known = "<tool_call name=\"get_weather\">{\"city\": \"Paris\"}</tool_call>";
        let text = fragments.concat();
        let parser = parser().on_invalid(policy);
        for text in [text.clone(), format!("{known}{text}")] {
            let want = parser.parse(&text, &tools());
            if let (Some(rest), Ok(want)) = (text.strip_prefix(known), &want) {
                let first = want.first().map(Message::calls).unwrap_or_default();
                prop_assert_eq!(
                    first.first(),
                    Some(&call("call_1", "get_weather", json!({"city": "Paris"}))),
                    "after {:?}", rest
                );
            }
            for chunking in [Chunking::Bytes(1), Chunking::Random { seed, max }] {
                let got = stream_with(&parser, &text, chunking);
                match (&want, got) {
                    (Ok(want), Ok(events)) => {
                        prop_assert_eq!(&Joiner::join(events.clone()), want);
                        assert_deltas_concatenate(&events, want);
                    }
                    (Err(want), Err(got)) => prop_assert_eq!(want.to_string(), got.to_string()),
                    (want, got) => prop_assert!(false, "{:?} vs {:?}", want, got),
                }
            }
        }
    }

    #[test]
    fn json_protocol_any_chunking_gives_the_whole_text_result(
        prose in prop::collection::vec("[a-z {}\"\n`]{0,12}", 1..4),
        city in "[A-Za-z é{}\"\\\\]{0,10}",
        fenced in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let object = json!({"type": "tool_use", "tool_uses": [{"name": "get_weather", "params": {"city": city}}]});
        let object = if fenced { format!("\n```json\n{object}\n```\n") } else { object.to_string() };
        let text = prose.join(&object);
        let parser = json_parser();
        let want = parser.parse(&text, &tools()).unwrap();
        let events = stream_with(&parser, &text, Chunking::Random { seed, max: 6 }).unwrap();
        prop_assert_eq!(&Joiner::join(events.clone()), &want);
        assert_deltas_concatenate(&events, &want);
    }

    #[test]
    fn prose_between_markup_is_never_lost(
        pieces in prop::collection::vec(("[a-zA-Z0-9 .,!?é\n]{1,16}", fragment()), 0..6),
    ) {
        // Plain prose (no markup characters) survives, in order, whatever markup
        // (valid, invalid, or near-miss) surrounds it.
        let text: String = pieces.iter().map(|(prose, markup)| format!("{prose}{markup}")).collect();
        let messages = parser().parse(&text, &tools()).unwrap();
        let mut output = String::new();
        for message in &messages {
            match message {
                Message::Text(t) => output.push_str(&t.text),
                Message::Reasoning(r) => output.push_str(&r.text),
                Message::ToolCalls(c) => {
                    for call in &c.calls {
                        output.push_str(call.invalid.as_ref().and_then(|i| i.raw.as_deref()).unwrap_or("\u{0}"));
                    }
                }
                _ => {}
            }
        }
        // Whitespace after a call block is not kept.
        let mut from = 0;
        for (prose, _) in &pieces {
            let prose = prose.trim();
            let found = output[from..].find(prose);
            prop_assert!(found.is_some(), "{:?} lost from {:?}", prose, output);
            from += found.unwrap() + prose.len();
        }
    }

    #[test]
    fn arbitrary_text_never_panics_and_agrees(text in "[<>/`{}\\[\\]\",:=a-z_ \n\\\\é]{0,80}", seed in any::<u64>()) {
        for dialect in [Dialect::Auto, Dialect::Json] {
            let parser = parser().dialect(dialect);
            let want = parser.parse(&text, &tools());
            let got = stream_with(&parser, &text, Chunking::Random { seed, max: 5 });
            match (&want, got) {
                (Ok(want), Ok(events)) => prop_assert_eq!(&Joiner::join(events), want),
                (Err(want), Err(got)) => prop_assert_eq!(want.to_string(), got.to_string()),
                (want, got) => prop_assert!(false, "{:?} vs {:?}", want, got),
            }
        }
    }
}

// ---- the JSON protocol dialect -------------------------------------------

fn json_parser() -> NaturalToolUseParser {
    parser().dialect(Dialect::Json)
}

#[test]
fn json_protocol_whole_reply_fenced_block_and_first_object() {
    let object = r#"{"type": "tool_use", "tool_uses": [{"name": "get_weather", "params": {"city": "Paris"}}, {"name": "now", "params": {}}]}"#;
    let want_calls = vec![
        call("call_1", "get_weather", json!({"city": "Paris"})),
        call("call_2", "now", json!({})),
    ];
    let whole_reply = assert_chunking_invariant(&json_parser(), object);
    assert_eq!(whole_reply, vec![Message::tool_calls(want_calls.clone())]);

    let fenced = format!("I'll look it up.\n```json\n{object}\n```\nOne moment.");
    let messages = assert_chunking_invariant(&json_parser(), &fenced);
    assert_eq!(
        messages,
        vec![
            Message::assistant("I'll look it up.\n"),
            Message::tool_calls(want_calls.clone()),
            Message::assistant("\nOne moment."),
        ]
    );

    let in_prose = format!("Sure: {object} done");
    let messages = assert_chunking_invariant(&json_parser(), &in_prose);
    assert_eq!(calls(&messages), want_calls);
    assert_eq!(text_of(&messages), "Sure:  done");
}

#[test]
fn json_protocol_text_replies_and_plain_json_in_prose() {
    let messages = assert_chunking_invariant(
        &json_parser(),
        r#"{"type": "text", "text": "Hello \"there\" ✓"}"#,
    );
    assert_eq!(messages, vec![Message::assistant("Hello \"there\" ✓")]);

    for text in [
        "A set {a, b} and an object {\"a\": 1} and ```\nfenced {\"b\": 2}\n```",
        "{\"type\": \"other\", \"tool_uses\": [{\"name\": \"now\", \"params\": {}}]}",
        "unclosed {\"type\": \"tool_use\", \"tool_uses\": [",
    ] {
        let messages = assert_chunking_invariant(&json_parser(), text);
        assert!(calls(&messages).is_empty(), "{text}");
        assert_eq!(text_of(&messages), text);
    }
}

#[test]
fn json_protocol_type_may_come_last() {
    let text = r#"{"tool_uses": [{"params": {"city": "Rome"}, "name": "get_weather"}], "type": "tool_use"}"#;
    let messages = assert_chunking_invariant(&json_parser(), text);
    assert_eq!(
        calls(&messages),
        vec![call("call_1", "get_weather", json!({"city": "Rome"}))]
    );
}

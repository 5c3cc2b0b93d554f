//! The natural tool use transformer: the exact text it writes, consolidation,
//! roles, metadata, errors, both modes, and the round trip through the parser.

use lmstack::natural::{
    Consolidation, Dialect, NaturalToolUseParser, NaturalToolUseTransformer, TOOL_AGGREGATES_KEY,
    TOOL_CALL_IDS_KEY, TOOL_METADATA_KEY,
};
use lmstack::service::{Machine, Output};
use lmstack::testing::{Chunking, ScriptedModel, collect_both};
use lmstack::{
    ChatRequest, ContentBlock, Error, Event, InvalidCall, InvalidCallKind, Joiner, Media, Message,
    Metadata, Role, ToolCall, ToolResult,
};
use proptest::prelude::*;
use serde_json::{Value, json};
use tower::{Layer, ServiceExt};

fn render(messages: Vec<Message>) -> Vec<Message> {
    NaturalToolUseTransformer::new().render(messages).unwrap()
}

fn weather_call() -> ToolCall {
    ToolCall::new(
        "call_1",
        "GetWeather",
        json!({"location": "San Francisco, CA"}),
    )
}

fn weather() -> Message {
    Message::tool_aggregate(
        vec![weather_call()],
        vec![ToolResult::text("call_1", "GetWeather", "18°C and sunny")],
    )
}

const WEATHER_CALL: &str = "<tool_call name=\"GetWeather\" id=\"call_1\">\n{\n  \"location\": \"San Francisco, CA\"\n}\n</tool_call>";
const WEATHER_RESPONSE: &str =
    "<tool_response name=\"GetWeather\" id=\"call_1\">\n18°C and sunny\n</tool_response>";

#[test]
fn an_aggregate_alone_is_the_call_then_the_response() {
    assert_eq!(
        render(vec![weather()]),
        vec![
            Message::assistant(WEATHER_CALL),
            Message::user(WEATHER_RESPONSE)
        ]
    );
}

#[test]
fn several_pairs_are_separated_by_a_dashed_line_in_call_order() {
    let aggregate = Message::tool_aggregate(
        vec![
            ToolCall::new("a", "add", json!({"a": 1, "b": 2})),
            ToolCall::new("b", "now", json!({})),
        ],
        // Results may come in any order; they are written in call order.
        vec![
            ToolResult::text("b", "now", "12:00"),
            ToolResult::text("a", "add", "3"),
        ],
    );
    assert_eq!(
        render(vec![aggregate]),
        vec![
            Message::assistant(
                "<tool_call name=\"add\" id=\"a\">\n{\n  \"a\": 1,\n  \"b\": 2\n}\n</tool_call>\n---\n\
                 <tool_call name=\"now\" id=\"b\">\n{}\n</tool_call>"
            ),
            Message::user(
                "<tool_response name=\"add\" id=\"a\">\n3\n</tool_response>\n---\n\
                 <tool_response name=\"now\" id=\"b\">\n12:00\n</tool_response>"
            ),
        ]
    );
}

#[test]
fn structured_results_are_pretty_json_and_errors_are_marked() {
    let aggregate = Message::tool_aggregate(
        vec![
            ToolCall::new("a", "lookup", json!({})),
            ToolCall::new("b", "lookup", json!({})),
            ToolCall::new("c", "flag", json!({})),
        ],
        vec![
            ToolResult::text("a", "lookup", r#"{"temp":18,"tags":["sun"]}"#),
            ToolResult::error("b", "lookup", "The tool `lookup` failed: timeout"),
            ToolResult::text("c", "flag", "true"),
        ],
    );
    let rendered = render(vec![aggregate]);
    assert_eq!(
        rendered[1].as_text().unwrap(),
        "<tool_response name=\"lookup\" id=\"a\">\n{\n  \"temp\": 18,\n  \"tags\": [\n    \"sun\"\n  ]\n}\n</tool_response>\n---\n\
         <tool_response name=\"lookup\" id=\"b\" is_error=\"true\">\nThe tool `lookup` failed: timeout\n</tool_response>\n---\n\
         <tool_response name=\"flag\" id=\"c\">\ntrue\n</tool_response>"
    );
}

#[test]
fn hermes_writes_json_lines() {
    let rendered = NaturalToolUseTransformer::new()
        .dialect(Dialect::Hermes)
        .render(vec![weather()])
        .unwrap();
    assert_eq!(
        rendered,
        vec![
            Message::assistant(
                "<tool_call>\n{\"name\": \"GetWeather\", \"id\": \"call_1\", \"arguments\": {\"location\": \"San Francisco, CA\"}}\n</tool_call>"
            ),
            Message::user(
                "<tool_response>\n{\"name\": \"GetWeather\", \"id\": \"call_1\", \"content\": \"18°C and sunny\"}\n</tool_response>"
            ),
        ]
    );
}

#[test]
fn images_travel_as_blocks_after_their_placeholder_line() {
    let image = ContentBlock::image_bytes("image/png", b"\x89PNG\r\n\x1a\n");
    let aggregate = Message::tool_aggregate(
        vec![ToolCall::new("call_1", "draw_boxes", json!({"boxes": []}))],
        vec![ToolResult::new(
            "call_1",
            "draw_boxes",
            vec![ContentBlock::text("Drew 2 boxes."), image.clone()],
        )],
    );
    let rendered = render(vec![aggregate]);
    assert_eq!(
        rendered[1],
        Message::multimodal(
            Role::User,
            vec![
                ContentBlock::text(
                    "<tool_response name=\"draw_boxes\" id=\"call_1\">\nDrew 2 boxes.\n[image 1: image/png]\n"
                ),
                image,
                ContentBlock::text("</tool_response>"),
            ]
        )
    );
}

#[test]
fn audio_travels_as_a_block_after_its_placeholder_line_and_reads_back() {
    let audio = ContentBlock::audio_bytes("audio/wav", b"RIFF\x24\0\0\0WAVE");
    let aggregate = Message::tool_aggregate(
        vec![ToolCall::new("call_1", "speak", json!({"text": "hi"}))],
        vec![ToolResult::new(
            "call_1",
            "speak",
            vec![ContentBlock::text("Said."), audio.clone()],
        )],
    );
    let rendered = render(vec![aggregate.clone()]);
    assert_eq!(
        rendered[1],
        Message::multimodal(
            Role::User,
            vec![
                ContentBlock::text(
                    "<tool_response name=\"speak\" id=\"call_1\">\nSaid.\n[audio 1: audio/wav]\n"
                ),
                audio,
                ContentBlock::text("</tool_response>"),
            ]
        )
    );
    let read = NaturalToolUseParser::new()
        .read_history(rendered, &[])
        .unwrap();
    assert_eq!(read, [aggregate]);
}

#[test]
fn a_turn_of_text_aggregate_text_keeps_the_texts_in_order_and_alternates_roles() {
    let history = vec![
        Message::user("Weather in SF?"),
        Message::assistant("Let me check."),
        weather(),
        Message::assistant("It is 18°C and sunny."),
    ];
    assert_eq!(
        render(history),
        vec![
            Message::user("Weather in SF?"),
            Message::assistant(format!("Let me check.\n{WEATHER_CALL}")),
            Message::user(WEATHER_RESPONSE),
            Message::assistant("It is 18°C and sunny."),
        ]
    );
}

#[test]
fn a_tool_loop_history_alternates_user_and_assistant() {
    let second = Message::tool_aggregate(
        vec![ToolCall::new(
            "call_2",
            "GetWeather",
            json!({"location": "Paris"}),
        )],
        vec![ToolResult::text("call_2", "GetWeather", "12°C")],
    );
    let rendered = render(vec![
        Message::system("Be brief."),
        Message::user("SF and Paris?"),
        weather(),
        second,
        Message::assistant("18°C and 12°C."),
    ]);
    let roles: Vec<Role> = rendered.iter().map(Message::role).collect();
    use Role::*;
    assert_eq!(
        roles,
        [System, User, Assistant, User, Assistant, User, Assistant]
    );
    assert!(
        rendered
            .iter()
            .all(|m| matches!(m, Message::Text(_)) && !m.as_text().unwrap().is_empty())
    );
}

#[test]
fn metadata_takes_the_first_sources_keys_and_keeps_every_source_whole() {
    let mut text_meta = Metadata::generation("gen-text");
    text_meta.insert("step", json!(1));
    let mut aggregate_meta = Metadata::generation("gen-tools");
    aggregate_meta.set_from_agent("planner");
    let history = vec![
        Message::assistant("Checking.").with_metadata(text_meta.clone()),
        weather().with_metadata(aggregate_meta.clone()),
    ];
    let rendered = render(history);
    let assistant = rendered[0].metadata();
    assert_eq!(assistant.generation_id(), Some("gen-text"));
    assert_eq!(assistant.from_agent(), Some("planner"));
    assert_eq!(assistant.get("step"), Some(&json!(1)));
    assert_eq!(rendered[1].metadata(), &aggregate_meta);
}

#[test]
fn call_and_result_data_without_a_place_in_the_text_is_kept_in_metadata() {
    let mut call = weather_call();
    call.metadata.insert("signature", json!("sig"));
    call.invalid = Some(InvalidCall {
        kind: InvalidCallKind::SchemaViolation,
        message: "bad".into(),
        raw: None,
    });
    let mut result = ToolResult::error("call_1", "GetWeather", "fix it");
    result.metadata.insert("elapsed_ms", json!(3));
    let rendered = render(vec![Message::tool_aggregate(vec![call], vec![result])]);
    assert_eq!(
        rendered[1].metadata().get(TOOL_METADATA_KEY),
        Some(&json!({"call_1": {
            "call_metadata": {"signature": "sig"},
            "invalid": {"kind": "schema_violation", "message": "bad"},
            "result_metadata": {"elapsed_ms": 3}
        }}))
    );
}

#[test]
fn unpaired_calls_and_results_are_errors_naming_message_and_call() {
    let cases = [
        (
            Message::tool_aggregate(
                vec![weather_call()],
                vec![
                    ToolResult::text("call_1", "GetWeather", "x"),
                    ToolResult::text("call_9", "GetWeather", "y"),
                ],
            ),
            "call_9",
            "a result without its call",
        ),
        (
            Message::tool_aggregate(vec![weather_call()], vec![]),
            "call_1",
            "a call without its result",
        ),
        (
            Message::tool_results(vec![ToolResult::text("call_7", "f", "x")]),
            "call_7",
            "a result whose call never came",
        ),
    ];
    for (message, id, problem) in cases {
        let history = vec![Message::user("hi"), message];
        match NaturalToolUseTransformer::new().render(history) {
            Err(Error::ToolPairing {
                message: 1,
                call_id,
                problem: said,
                ..
            }) => {
                assert_eq!((call_id.as_str(), said), (id, problem));
            }
            other => panic!("expected a pairing error, got {other:?}"),
        }
    }
    let error = NaturalToolUseTransformer::new()
        .render(vec![Message::tool_aggregate(vec![weather_call()], vec![])])
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "natural tool use transformer: message 0: a call without its result (call id `call_1`)"
    );
}

#[test]
fn separate_calls_and_results_messages_are_written_too() {
    let rendered = render(vec![
        Message::tool_calls(vec![weather_call()]),
        Message::tool_results(vec![ToolResult::text(
            "call_1",
            "GetWeather",
            "18°C and sunny",
        )]),
    ]);
    assert_eq!(
        rendered,
        vec![
            Message::assistant(WEATHER_CALL),
            Message::user(WEATHER_RESPONSE)
        ]
    );
}

/// A reply the function layer could give: text, an aggregate, more text, usage.
fn reply() -> Vec<Message> {
    vec![
        Message::assistant("Let me check the weather for you."),
        weather(),
        Message::assistant("Done: sunny."),
        Message::usage(10, 20),
    ]
}

/// What `transformer` makes of [`reply`] as a layer, the same in both modes and
/// at every chunking.
async fn as_a_layer(transformer: NaturalToolUseTransformer) -> Vec<Message> {
    let mut seen = Vec::new();
    for chunking in [
        Chunking::Whole,
        Chunking::Bytes(1),
        Chunking::Chars,
        Chunking::Random { seed: 9, max: 5 },
    ] {
        let make = || {
            let model = ScriptedModel::new()
                .chunking(chunking)
                .reply_messages(reply());
            transformer.clone().layer(model)
        };
        let request = ChatRequest::new(vec![Message::user("weather?")]);
        let (whole, streamed) = collect_both(make, request).await.unwrap();
        assert_eq!(whole, streamed, "{chunking:?}");
        seen.push(whole);
    }
    seen.dedup();
    assert_eq!(seen.len(), 1, "every chunking gives the same: {seen:?}");
    seen.remove(0)
}

#[tokio::test]
async fn the_layer_gives_the_same_messages_in_both_modes() {
    assert_eq!(
        as_a_layer(NaturalToolUseTransformer::new()).await,
        render(reply())
    );
}

#[tokio::test]
async fn streamed_call_deltas_are_written_like_a_calls_message() {
    let calls = Message::tool_calls(vec![
        weather_call(),
        ToolCall::new("call_2", "now", json!({})),
    ]);
    let make = || {
        let model = ScriptedModel::new()
            .chunking(Chunking::Bytes(3))
            .reply_messages(vec![Message::assistant("Two calls:"), calls.clone()]);
        NaturalToolUseTransformer::new().layer(model)
    };
    let (whole, streamed) = collect_both(make, ChatRequest::new(vec![])).await.unwrap();
    assert_eq!(whole, streamed);
    assert_eq!(
        whole,
        vec![Message::assistant(format!(
            "Two calls:\n{WEATHER_CALL}\n---\n<tool_call name=\"now\" id=\"call_2\">\n{{}}\n</tool_call>"
        ))]
    );
}

#[tokio::test]
async fn results_in_a_reply_may_answer_calls_of_the_request() {
    let make = || {
        let model = ScriptedModel::new().reply_messages(vec![Message::tool_results(vec![
            ToolResult::text("call_1", "GetWeather", "18°C and sunny"),
        ])]);
        NaturalToolUseTransformer::new().layer(model)
    };
    let request = ChatRequest::new(vec![Message::tool_calls(vec![weather_call()])]);
    let (whole, _) = collect_both(make, request).await.unwrap();
    assert_eq!(whole, vec![Message::user(WEATHER_RESPONSE)]);
}

// ---- The round trip: read_history(render(x)) == x ----

fn id() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_-]{1,12}"
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(Value::from),
        "[ -~é°</>{}\\[\\]\"\\\\\n]{0,12}".prop_map(Value::from),
        // Strings that read as other values, or lose a newline, in a raw form.
        "(-?[0-9]{1,3}|true|null|\\[1\\]|\n[a-z]{0,3}|[a-z]{0,3}\n|</arg_value>|</parameter>)"
            .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_<>/]{1,6}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Arguments; a key with `-` is no Python identifier.
fn arguments() -> impl Strategy<Value = Value> {
    prop::collection::btree_map("[a-z_][a-z_-]{0,7}", json_value(), 0..4)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

/// Result text: prose with markup, JSON (compact or not), numbers, empty.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ -~é°\n]{0,30}",
        "(</tool_response>|<tool_call>|---|\\[image 1\\]|\\[audio 1\\]|\n|\"|x| ){0,6}",
        json_value().prop_map(|v| v.to_string()),
        json_value().prop_map(|v| serde_json::to_string_pretty(&v).unwrap()),
    ]
}

fn media() -> impl Strategy<Value = ContentBlock> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..8)
            .prop_map(|bytes| ContentBlock::image_bytes("image/png", &bytes)),
        "[a-z]{1,6}".prop_map(|name| ContentBlock::Document(
            Media::from_bytes("application/pdf", b"%PDF-1.7").with_name(format!("{name}.pdf"))
        )),
        Just(ContentBlock::image_url("https://example.com/a.png")),
        prop::collection::vec(any::<u8>(), 0..8)
            .prop_map(|bytes| ContentBlock::audio_bytes("audio/wav", &bytes)),
    ]
}

/// Content whose text blocks never touch: adjacent text blocks read back as one.
fn content() -> impl Strategy<Value = Vec<ContentBlock>> {
    prop::collection::vec((prop::option::of(text()), media()), 0..3).prop_flat_map(|pairs| {
        let mut blocks = Vec::new();
        for (text, media) in pairs {
            if let Some(text) = text {
                blocks.push(ContentBlock::text(text));
            }
            blocks.push(media);
        }
        (Just(blocks), prop::option::of(text())).prop_map(|(mut blocks, last)| {
            if let Some(last) = last {
                blocks.push(ContentBlock::text(last));
            }
            blocks
        })
    })
}

fn metadata() -> impl Strategy<Value = Metadata> {
    prop::option::of("[a-z0-9-]{1,8}")
        .prop_map(|id| id.map(Metadata::generation).unwrap_or_default())
}

fn aggregate() -> impl Strategy<Value = Message> {
    prop::collection::vec(
        (
            id(),
            // Some names no family writes bare: they fall back to tagged.
            "[A-Za-z_]([A-Za-z_.: -]{0,8}[A-Za-z_])?",
            arguments(),
            content(),
            any::<bool>(),
        ),
        1..4,
    )
    .prop_flat_map(|pairs| (Just(pairs), metadata()))
    .prop_map(|(pairs, metadata)| {
        let mut calls = Vec::new();
        let mut results = Vec::new();
        for (i, (id, name, arguments, content, is_error)) in pairs.into_iter().enumerate() {
            let id = format!("{id}{i}");
            calls.push(ToolCall::new(&id, &name, arguments));
            results.push(ToolResult {
                is_error,
                ..ToolResult::new(id, name, content)
            });
        }
        Message::tool_aggregate(calls, results).with_metadata(metadata)
    })
}

/// `default` cases, or `PROPTEST_CASES` when set (for longer hunts).
fn cases(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok());
    ProptestConfig::with_cases(cases.unwrap_or(default))
}

/// Any dialect the transformer writes.
fn dialect() -> impl Strategy<Value = Dialect> {
    prop::sample::select(Dialect::RENDERED.to_vec())
}

/// The parser that reads what `dialect` writes.
fn reader(dialect: Dialect) -> NaturalToolUseParser {
    NaturalToolUseParser::new().dialect(dialect)
}

fn consolidation() -> impl Strategy<Value = Consolidation> {
    prop_oneof![Just(Consolidation::Split), Just(Consolidation::Single)]
}

/// A transformer in any dialect and form, with or without ids, and its
/// dialect.
fn transformer() -> impl Strategy<Value = (Dialect, NaturalToolUseTransformer)> {
    (dialect(), consolidation(), any::<bool>()).prop_map(|(dialect, consolidation, ids)| {
        let transformer = NaturalToolUseTransformer::new()
            .dialect(dialect)
            .consolidation(consolidation)
            .call_ids(ids);
        (dialect, transformer)
    })
}

proptest! {
    #![proptest_config(crate::regressions::beside(cases(256)))]

    #[test]
    fn read_history_of_render_gives_the_aggregates_back(
        aggregates in prop::collection::vec(aggregate(), 1..3),
        (dialect, transformer) in transformer(),
    ) {
        let mut history = vec![Message::user("go")];
        history.extend(aggregates);
        let rendered = transformer.render(history.clone()).unwrap();
        let read = reader(dialect).read_history(rendered.clone(), &[]).unwrap();
        prop_assert_eq!(read, history, "rendered: {:#?}", rendered);
    }

    #[test]
    fn both_modes_agree_for_any_reply_and_chunking(
        aggregate in aggregate(),
        before in "[ -~é\n]{0,20}",
        after in "[ -~é\n]{0,20}",
        seed in any::<u64>(),
        (dialect, transformer) in transformer(),
    ) {
        // Text that may read as markup next to a block is left to other tests.
        let plain = !format!("{before}{after}").contains(['<', '[', '{', '`']);
        let mut messages = Vec::new();
        if !before.is_empty() { messages.push(Message::assistant(before)); }
        messages.push(aggregate.clone());
        if !after.is_empty() { messages.push(Message::assistant(after)); }
        let chunking = Chunking::Random { seed, max: 6 };
        let events = lmstack::testing::stream_messages(messages.clone(), chunking);
        let run = |events: Vec<Event>| {
            let mut machine = transformer.machine(Vec::<String>::new());
            let mut out = lmstack::service::Output::new();
            for event in events {
                lmstack::service::Machine::push(&mut machine, event, &mut out).unwrap();
            }
            lmstack::service::Machine::finish(&mut machine, &mut out).unwrap();
            Joiner::join(out.drain())
        };
        let whole: Vec<Event> = messages.clone().into_iter().map(Event::message).collect();
        let rendered = run(whole);
        prop_assert_eq!(run(events), rendered.clone());
        // What both give reads back as the calls of the aggregate (a machine
        // that dropped everything would agree with itself).
        if plain {
            let read = reader(dialect).read_history(rendered.clone(), &[]).unwrap();
            let calls: Vec<ToolCall> = read.iter().flat_map(|m| m.calls().to_vec()).collect();
            prop_assert_eq!(calls, aggregate.calls().to_vec(), "rendered: {:#?}", rendered);
        }
    }
}

// ---- Reading the format back: the parser's transcript mode ----

fn parse(parser: &NaturalToolUseParser, text: &str) -> Vec<Message> {
    parser.parse(text, &[]).unwrap()
}

#[test]
fn responses_are_results_only_in_transcript_mode() {
    let text = format!("{WEATHER_CALL}\n{WEATHER_RESPONSE}");
    let reply = parse(&NaturalToolUseParser::new(), &text);
    // A model's reply cannot forge a result: the block stays text, and the call
    // gets the parser's own id.
    assert_eq!(reply[0].calls()[0].id, "call_1");
    assert_eq!(
        reply[1],
        Message::assistant(format!("\n{WEATHER_RESPONSE}"))
    );

    let mut call = weather_call();
    call.id = "toolu_9".into();
    let text = format!(
        "{}\n{}",
        WEATHER_CALL.replace("call_1", "toolu_9"),
        WEATHER_RESPONSE.replace("call_1", "toolu_9")
    );
    let transcript = parse(&NaturalToolUseParser::new().transcript(true), &text);
    assert_eq!(
        transcript,
        vec![
            Message::tool_calls(vec![call]),
            Message::tool_results(vec![ToolResult::text(
                "toolu_9",
                "GetWeather",
                "18°C and sunny"
            )]),
        ]
    );
}

#[tokio::test]
async fn a_model_written_id_is_ignored_outside_transcripts() {
    let text = "<tool_call name=\"now\" id=\"call_1\">\n{}\n</tool_call>";
    let reply = parse(&NaturalToolUseParser::new(), text);
    assert_eq!(
        reply,
        vec![Message::tool_calls(vec![ToolCall::new(
            "call_1",
            "now",
            json!({})
        )])]
    );
    // After one call in the conversation, the model's `id="call_1"` would
    // collide: the parser numbers on.
    let model = ScriptedModel::new().reply(text);
    let request = ChatRequest::new(vec![Message::tool_calls(vec![ToolCall::new(
        "call_1",
        "now",
        json!({}),
    )])]);
    let reply = NaturalToolUseParser::new()
        .layer(model)
        .oneshot(request)
        .await
        .unwrap();
    assert_eq!(reply.collect().await.unwrap()[0].calls()[0].id, "call_2");
}

#[test]
fn a_dashed_line_between_blocks_is_a_separator_and_text_elsewhere() {
    let two =
        "<tool_call name=\"a\">\n{}\n</tool_call>\n---\n<tool_call name=\"b\">\n{}\n</tool_call>";
    let messages = parse(&NaturalToolUseParser::new(), two);
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0].calls().len(), 2);

    let trailing = "<tool_call name=\"a\">\n{}\n</tool_call>\n---\n";
    assert_eq!(
        parse(&NaturalToolUseParser::new(), trailing)[1],
        Message::assistant("\n---\n")
    );
    let before_prose = "<tool_call name=\"a\">\n{}\n</tool_call>\n---\nDone.";
    assert_eq!(
        parse(&NaturalToolUseParser::new(), before_prose)[1],
        Message::assistant("\n---\nDone.")
    );
    let four = "<tool_call name=\"a\">\n{}\n</tool_call>\n----\n<b>x</b>";
    assert_eq!(
        parse(&NaturalToolUseParser::new(), four)[1],
        Message::assistant("\n----\n<b>x</b>")
    );
}

#[test]
fn qwen_style_bare_responses_answer_the_calls_in_order() {
    let history = vec![
        Message::assistant(
            "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>\n\
             <tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
        ),
        Message::user(
            "<tool_response>\n1\n</tool_response>\n<tool_response>\n12:00\n</tool_response>",
        ),
    ];
    let read = NaturalToolUseParser::new()
        .read_history(history, &[])
        .unwrap();
    assert_eq!(
        read,
        vec![Message::tool_aggregate(
            vec![
                ToolCall::new("call_1", "add", json!({"a": 1})),
                ToolCall::new("call_2", "now", json!({})),
            ],
            vec![
                ToolResult::text("call_1", "add", "1"),
                ToolResult::text("call_2", "now", "12:00"),
            ],
        )]
    );
}

#[test]
fn read_history_keeps_what_is_not_tool_markup() {
    let photo = Message::multimodal(
        Role::User,
        vec![
            ContentBlock::text("What is this?"),
            ContentBlock::image_url("https://example.com/cat.png"),
        ],
    );
    let history = vec![
        Message::system("Be brief."),
        photo.clone(),
        Message::assistant("A cat."),
        Message::reasoning("thinking"),
    ];
    assert_eq!(
        NaturalToolUseParser::new()
            .read_history(history.clone(), &[])
            .unwrap(),
        history
    );
}

#[test]
fn history_reader_hands_each_message_out_once_what_follows_cannot_change_it() {
    let history = vec![
        Message::user("Weather in Paris?"),
        Message::tool_aggregate(
            vec![ToolCall::new(
                "call_1",
                "get_weather",
                json!({"city": "Paris"}),
            )],
            vec![ToolResult::text("call_1", "get_weather", "18°C")],
        ),
        Message::assistant("It is 18°C."),
    ];
    // The user's text, the calls, the results, the answer.
    let rendered = render(history.clone());
    assert_eq!(rendered.len(), 4);
    let mut reader = NaturalToolUseParser::new().history_reader(&[]);
    let mut out = Output::new();
    let mut read = Vec::new();
    let mut handed_out = Vec::new();
    for message in rendered {
        reader.push(message, &mut out).unwrap();
        handed_out.push(out.len());
        read.extend(out.drain());
    }
    // The calls and results wait for what follows them, which ends their run.
    assert_eq!(handed_out, [1, 0, 0, 2]);
    reader.finish(&mut out).unwrap();
    assert!(out.is_empty());
    assert_eq!(read, history);
}

proptest! {
    #![proptest_config(crate::regressions::beside(cases(128)))]

    #[test]
    fn transcripts_read_the_same_in_any_chunking(
        aggregate in aggregate(),
        seed in any::<u64>(),
        (dialect, transformer) in transformer(),
    ) {
        let rendered = transformer.render(vec![aggregate.clone()]).unwrap();
        let text: String = rendered
            .iter()
            .flat_map(|m| match m {
                Message::Text(t) => vec![t.text.clone()],
                Message::Multimodal(m) => m.content.iter().filter_map(|b| b.as_text().map(str::to_owned)).collect(),
                _ => vec![],
            })
            .collect::<Vec<_>>()
            .join("\n");
        let parser = reader(dialect).transcript(true);
        let whole = parser.parse(&text, &[]).unwrap();
        let mut machine = parser.machine(&[], 0).unwrap();
        let mut out = lmstack::service::Output::new();
        for piece in (Chunking::Random { seed, max: 7 }).split(&text) {
            lmstack::service::Machine::push(&mut machine, Event::text(piece), &mut out).unwrap();
        }
        lmstack::service::Machine::finish(&mut machine, &mut out).unwrap();
        prop_assert_eq!(Joiner::join(out.drain()), whole.clone());
        // The transcript holds the aggregate's calls, by name and arguments (a
        // machine that dropped everything would agree with itself).
        let named = |calls: Vec<&ToolCall>| -> Vec<(String, serde_json::Value)> {
            calls.into_iter().map(|c| (c.name.clone(), c.arguments.clone())).collect()
        };
        let read: Vec<&ToolCall> = whole.iter().flat_map(|m| m.calls()).collect();
        prop_assert_eq!(named(read), named(aggregate.calls().iter().collect()), "text: {:?}", text);
    }
}

// ---- The single form: one message per turn, each call followed by its response ----

fn single() -> NaturalToolUseTransformer {
    NaturalToolUseTransformer::new().consolidation(Consolidation::Single)
}

fn time() -> Message {
    Message::tool_aggregate(
        vec![ToolCall::new("call_2", "GetTime", json!({"zone": "PST"}))],
        vec![ToolResult::text("call_2", "GetTime", "09:00")],
    )
}

const TIME_CALL: &str =
    "<tool_call name=\"GetTime\" id=\"call_2\">\n{\n  \"zone\": \"PST\"\n}\n</tool_call>";
const TIME_RESPONSE: &str =
    "<tool_response name=\"GetTime\" id=\"call_2\">\n09:00\n</tool_response>";

/// The aggregate of `weather()` and `time()` in one.
fn weather_and_time() -> Message {
    let (weather, time) = (weather(), time());
    Message::tool_aggregate(
        [weather.calls(), time.calls()].concat(),
        [weather.results(), time.results()].concat(),
    )
}

fn read(rendered: Vec<Message>) -> Vec<Message> {
    NaturalToolUseParser::new()
        .read_history(rendered, &[])
        .unwrap()
}

#[test]
fn single_form_one_pair_alone_is_a_user_message_of_call_then_response() {
    let rendered = single()
        .render(vec![Message::user("SF?"), weather()])
        .unwrap();
    assert_eq!(
        rendered,
        vec![
            Message::user("SF?"),
            Message::user(format!("{WEATHER_CALL}\n{WEATHER_RESPONSE}")),
        ]
    );
    assert_eq!(read(rendered), vec![Message::user("SF?"), weather()]);
}

#[test]
fn single_form_interleaves_two_pairs_between_the_texts_in_one_user_message() {
    let history = vec![
        Message::user("Weather and time in SF?"),
        Message::assistant("I'll check the weather."),
        weather_and_time(),
        Message::assistant("Based on the results, it is 18°C at 09:00."),
    ];
    let rendered = single().render(history.clone()).unwrap();
    assert_eq!(
        rendered,
        vec![
            Message::user("Weather and time in SF?"),
            Message::user(format!(
                "I'll check the weather.\n{WEATHER_CALL}\n{WEATHER_RESPONSE}\n---\n\
                 {TIME_CALL}\n{TIME_RESPONSE}\nBased on the results, it is 18°C at 09:00."
            )),
        ]
    );
    let mut want = history;
    // Text before calls gains the newline that separates it from them.
    want[1] = Message::assistant("I'll check the weather.\n");
    assert_eq!(read(rendered), want);
}

#[test]
fn single_form_role_is_user_when_the_message_holds_a_response() {
    let roles = |history: Vec<Message>| -> Vec<Role> {
        single()
            .render(history)
            .unwrap()
            .iter()
            .map(Message::role)
            .collect()
    };
    // Responses, with or without text around: user.
    assert_eq!(roles(vec![weather()]), [Role::User]);
    assert_eq!(roles(vec![weather(), time()]), [Role::User]);
    assert_eq!(
        roles(vec![Message::assistant("Checking."), weather()]),
        [Role::User]
    );
    assert_eq!(
        roles(vec![weather(), Message::assistant("Sunny.")]),
        [Role::User]
    );
    // Read back, the text around is the assistant's again.
    assert_eq!(
        read(
            single()
                .render(vec![weather(), Message::assistant("Sunny.")])
                .unwrap()
        ),
        [weather(), Message::assistant("Sunny.")]
    );
    // Calls without responses are the model's: assistant.
    assert_eq!(
        roles(vec![Message::tool_calls(vec![weather_call()])]),
        [Role::Assistant]
    );
    // Text alone passes unchanged; another kind of message ends the turn.
    let history = vec![
        Message::assistant("Hi."),
        Message::user("SF?"),
        weather(),
        Message::user("And now?"),
    ];
    assert_eq!(
        single().render(history.clone()).unwrap(),
        vec![
            history[0].clone(),
            history[1].clone(),
            Message::user(format!("{WEATHER_CALL}\n{WEATHER_RESPONSE}")),
            history[3].clone(),
        ]
    );
}

#[test]
fn single_form_structured_and_error_results() {
    let aggregate = Message::tool_aggregate(
        vec![
            ToolCall::new("a", "lookup", json!({})),
            ToolCall::new("b", "lookup", json!({})),
        ],
        vec![
            ToolResult::error("b", "lookup", "The tool `lookup` failed: timeout"),
            ToolResult::text("a", "lookup", r#"{"temp":18,"tags":["sun"]}"#),
        ],
    );
    let rendered = single().render(vec![aggregate.clone()]).unwrap();
    assert_eq!(
        rendered,
        vec![Message::user(
            "<tool_call name=\"lookup\" id=\"a\">\n{}\n</tool_call>\n\
             <tool_response name=\"lookup\" id=\"a\">\n{\n  \"temp\": 18,\n  \"tags\": [\n    \"sun\"\n  ]\n}\n</tool_response>\n---\n\
             <tool_call name=\"lookup\" id=\"b\">\n{}\n</tool_call>\n\
             <tool_response name=\"lookup\" id=\"b\" is_error=\"true\">\nThe tool `lookup` failed: timeout\n</tool_response>"
        )]
    );
    let Message::ToolAggregate(read) = &read(rendered)[0] else {
        panic!("an aggregate");
    };
    assert!(read.results[1].is_error);
    assert_eq!(
        read.results[0].content,
        [ContentBlock::text(r#"{"temp":18,"tags":["sun"]}"#)]
    );
}

#[test]
fn single_form_media_travel_right_after_their_placeholder_in_the_turns_message() {
    let image = ContentBlock::image_bytes("image/png", b"\x89PNG\r\n\x1a\n");
    let aggregate = Message::tool_aggregate(
        vec![ToolCall::new("call_1", "draw", json!({}))],
        vec![ToolResult::new(
            "call_1",
            "draw",
            vec![ContentBlock::text("Drew it."), image.clone()],
        )],
    );
    let history = vec![
        Message::assistant("Drawing."),
        aggregate,
        Message::assistant("Done."),
    ];
    let rendered = single().render(history.clone()).unwrap();
    assert_eq!(
        rendered,
        vec![Message::multimodal(
            Role::User,
            vec![
                ContentBlock::text(
                    "Drawing.\n<tool_call name=\"draw\" id=\"call_1\">\n{}\n</tool_call>\n\
                     <tool_response name=\"draw\" id=\"call_1\">\nDrew it.\n[image 1: image/png]\n"
                ),
                image,
                ContentBlock::text("</tool_response>\nDone."),
            ]
        )]
    );
    let mut want = history;
    want[0] = Message::assistant("Drawing.\n");
    assert_eq!(read(rendered), want);
}

#[test]
fn without_ids_calls_and_responses_are_written_as_specified_and_ids_kept_in_metadata() {
    let no_ids = |consolidation, dialect| {
        NaturalToolUseTransformer::new()
            .consolidation(consolidation)
            .dialect(dialect)
            .call_ids(false)
    };
    let call = "<tool_call name=\"GetWeather\">\n{\n  \"location\": \"San Francisco, CA\"\n}\n</tool_call>";
    let response = "<tool_response name=\"GetWeather\">\n18°C and sunny\n</tool_response>";
    let ids = |ids: &[&str]| {
        let mut metadata = Metadata::new();
        metadata.insert(TOOL_CALL_IDS_KEY, json!(ids));
        metadata
    };

    let single = no_ids(Consolidation::Single, Dialect::Tagged)
        .render(vec![weather()])
        .unwrap();
    assert_eq!(
        single,
        vec![
            Message::user(format!("{call}\n{response}")).with_metadata(ids(&["call_1", "call_1"]))
        ]
    );
    assert_eq!(read(single), vec![weather()]);

    let split = no_ids(Consolidation::Split, Dialect::Tagged)
        .render(vec![weather()])
        .unwrap();
    assert_eq!(
        split,
        vec![
            Message::assistant(call).with_metadata(ids(&["call_1"])),
            Message::user(response).with_metadata(ids(&["call_1"])),
        ]
    );
    assert_eq!(read(split), vec![weather()]);

    let hermes = no_ids(Consolidation::Single, Dialect::Hermes)
        .render(vec![weather()])
        .unwrap();
    assert_eq!(
        hermes[0].as_text().unwrap(),
        "<tool_call>\n{\"name\": \"GetWeather\", \"arguments\": {\"location\": \"San Francisco, CA\"}}\n</tool_call>\n\
         <tool_response>\n{\"name\": \"GetWeather\", \"content\": \"18°C and sunny\"}\n</tool_response>"
    );
    assert_eq!(read(hermes), vec![weather()]);
}

#[test]
fn single_form_keeps_each_aggregate_and_its_metadata_in_one_message() {
    let mut text_meta = Metadata::generation("gen-text");
    text_meta.insert("step", json!(1));
    let mut call = weather_call();
    call.metadata.insert("signature", json!("sig"));
    let first = Message::tool_aggregate(
        vec![call],
        vec![ToolResult::text("call_1", "GetWeather", "18°C and sunny")],
    )
    .with_metadata(Metadata::generation("gen-1"));
    let second = time().with_metadata(Metadata::generation("gen-2"));
    let history = vec![
        Message::assistant("Checking.").with_metadata(text_meta),
        first,
        second,
    ];
    let rendered = single().render(history.clone()).unwrap();
    assert_eq!(rendered.len(), 1);
    assert_eq!(
        rendered[0].as_text().unwrap(),
        format!("Checking.\n{WEATHER_CALL}\n{WEATHER_RESPONSE}\n---\n{TIME_CALL}\n{TIME_RESPONSE}")
    );
    assert_eq!(
        serde_json::to_value(rendered[0].metadata()).unwrap(),
        json!({
            "generation_id": "gen-text",
            "step": 1,
            TOOL_METADATA_KEY: {"call_1": {"call_metadata": {"signature": "sig"}}},
            TOOL_AGGREGATES_KEY: [
                {"pairs": 1, "metadata": {"generation_id": "gen-1"}},
                {"pairs": 1, "metadata": {"generation_id": "gen-2"}},
            ],
        })
    );
    let mut want = history;
    want[0] = Message::assistant("Checking.\n").with_metadata(want[0].metadata().clone());
    assert_eq!(read(rendered), want);
}

#[tokio::test]
async fn single_form_the_layer_gives_the_same_message_in_both_modes() {
    assert_eq!(
        as_a_layer(single()).await,
        vec![
            Message::user(format!(
                "Let me check the weather for you.\n{WEATHER_CALL}\n{WEATHER_RESPONSE}\nDone: sunny."
            )),
            Message::usage(10, 20),
        ]
    );
}

fn markup_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(format!("{WEATHER_CALL}\n")),
        Just(format!("{WEATHER_RESPONSE}\n")),
        Just("<tool_call name=\"x\">\n{}\n</tool_call>\n".to_owned()),
        Just("<tool_response name=\"x\">\n1\n</tool_response>\n".to_owned()),
        Just("---\n".to_owned()),
        "[ -~\n]{0,8}",
    ]
}

proptest! {
    #![proptest_config(crate::regressions::beside(cases(256)))]

    /// Hand-written transcripts, with metadata that says anything.
    #[test]
    fn read_history_of_any_markup_and_metadata_does_not_panic(
        pieces in prop::collection::vec(markup_piece(), 0..8),
        ids in prop::collection::vec("call_[12]", 0..5),
        pairs in prop::collection::vec(0usize..3, 0..3),
        user in any::<bool>(),
    ) {
        let mut metadata = Metadata::new();
        metadata.insert(TOOL_CALL_IDS_KEY, json!(ids));
        let parts: Vec<Value> = pairs.iter().map(|n| json!({"pairs": n})).collect();
        metadata.insert(TOOL_AGGREGATES_KEY, Value::Array(parts));
        let text = pieces.concat();
        let message = if user { Message::user(text) } else { Message::assistant(text) };
        let _ = NaturalToolUseParser::new().read_history(vec![message.with_metadata(metadata)], &[]);
    }
}

#[tokio::test]
async fn natural_tool_use_writes_the_history_in_the_form_and_with_the_ids_asked() {
    let model = ScriptedModel::new().reply("ok");
    let layer = lmstack::natural::NaturalToolUse::new()
        .consolidation(Consolidation::Single)
        .call_ids(false);
    let request = ChatRequest::new(vec![Message::user("SF?"), weather()]);
    let reply = layer.layer(model.clone()).oneshot(request).await.unwrap();
    reply.collect().await.unwrap();
    let sent = &model.requests()[0].messages;
    assert_eq!(
        sent[1].as_text().unwrap(),
        "<tool_call name=\"GetWeather\">\n{\n  \"location\": \"San Francisco, CA\"\n}\n</tool_call>\n\
         <tool_response name=\"GetWeather\">\n18°C and sunny\n</tool_response>"
    );
    assert_eq!(sent.len(), 2);
}

proptest! {
    #![proptest_config(crate::regressions::beside(cases(256)))]

    /// A single-form turn with text around its aggregates comes back as it was,
    /// but for the line break that text before calls gains.
    #[test]
    fn single_form_turns_with_text_read_back(
        before in prop::option::of("[A-Za-z][A-Za-z .,]{0,20}"),
        aggregates in prop::collection::vec(aggregate(), 1..3),
        after in prop::option::of("[A-Za-z][A-Za-z .,]{0,20}"),
        dialect in dialect(),
        ids in any::<bool>(),
    ) {
        let aggregates: Vec<Message> = aggregates
            .into_iter()
            .map(|a| a.with_metadata(Metadata::new()))
            .collect();
        let mut history = vec![Message::user("go")];
        history.extend(before.clone().map(Message::assistant));
        history.extend(aggregates.clone());
        history.extend(after.clone().map(Message::assistant));
        let rendered = single().dialect(dialect).call_ids(ids).render(history.clone()).unwrap();
        prop_assert_eq!(rendered.len(), 2);
        let mut want = vec![Message::user("go")];
        want.extend(before.map(|text| Message::assistant(format!("{text}\n"))));
        want.extend(aggregates);
        want.extend(after.map(Message::assistant));
        let read = reader(dialect).read_history(rendered.clone(), &[]).unwrap();
        prop_assert_eq!(read, want, "rendered: {:#?}", rendered);
    }
}

/// A GLM or MiniMax value holding a tag that ends a value without its closing
/// tag (the next parameter, the end of the call or block) reads back as itself.
#[test]
fn xml_values_holding_structural_tags_read_back() {
    for (dialect, arguments) in [
        (Dialect::Glm, json!({"s": "</tool_call>"})),
        (Dialect::Glm, json!({"s": "a<arg_key>b</arg_key>", "t": 1})),
        (Dialect::Glm, json!({"l": ["<arg_key>"], "t": 1})),
        (Dialect::MiniMax, json!({"s": "a</invoke>"})),
        (Dialect::MiniMax, json!({"s": "</minimax:tool_call> b"})),
        (
            Dialect::MiniMax,
            json!({"d": {"k": "<parameter name='p'>"}, "t": 1}),
        ),
        (Dialect::MiniMax, json!({"s": "a <b>c</b> <invoke>"})),
    ] {
        let history = vec![
            Message::user("go"),
            Message::tool_aggregate(
                vec![ToolCall::new("call_1", "f", arguments)],
                vec![ToolResult::text("call_1", "f", "ok")],
            ),
        ];
        let rendered = NaturalToolUseTransformer::new()
            .dialect(dialect)
            .render(history.clone())
            .unwrap();
        let read = reader(dialect).read_history(rendered.clone(), &[]).unwrap();
        assert_eq!(read, history, "{dialect}: {rendered:#?}");
    }
}

#[test]
fn kimi_ids_number_the_calls_of_the_whole_conversation() {
    // Kimi K2's template numbers `functions.F:N` across the conversation, not
    // within each message; a reply's calls follow the request's.
    let round = |n: usize| {
        Message::tool_aggregate(
            vec![
                ToolCall::new(format!("a{n}"), "now", json!({})),
                ToolCall::new(format!("b{n}"), "now", json!({})),
            ],
            vec![
                ToolResult::text(format!("a{n}"), "now", "noon"),
                ToolResult::text(format!("b{n}"), "now", "noon"),
            ],
        )
    };
    for consolidation in [Consolidation::Split, Consolidation::Single] {
        let kimi = NaturalToolUseTransformer::new()
            .dialect(Dialect::KimiK2)
            .consolidation(consolidation);
        let text: String = kimi
            .render(vec![Message::user("Time?"), round(0), round(1)])
            .unwrap()
            .iter()
            .filter_map(Message::as_text)
            .collect();
        assert_eq!(text.matches("functions.now:").count(), 4, "{text}");
        for n in 0..4 {
            assert!(
                text.contains(&format!("functions.now:{n}<")),
                "{consolidation:?}: {text}"
            );
        }
        let mut machine = kimi.machine(["a0", "b0", "a1"]);
        let mut out = Output::new();
        let call = Message::tool_calls(vec![ToolCall::new("c", "now", json!({}))]);
        machine.push(Event::message(call), &mut out).unwrap();
        machine.finish(&mut out).unwrap();
        let written: String = Joiner::join(out.drain())
            .iter()
            .filter_map(Message::as_text)
            .collect();
        assert!(written.contains("functions.now:3<"), "{written}");
    }
}

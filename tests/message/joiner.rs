//! The joiner folds any delta split of the same content into the same messages.

use lmstack::testing::Chunking;
use lmstack::{
    Event, FinishReason, InvalidCallKind, Joiner, Message, Metadata, ReasoningDelta, TextDelta,
    ToolCall, ToolCallDelta,
};
use proptest::prelude::*;
use serde_json::{Value, json};

/// One piece of a reply, before it is cut into deltas.
#[derive(Clone, Debug)]
enum Segment {
    Text(String),
    Reasoning(String, Option<String>),
    Calls(Vec<(String, Value)>),
    Usage(u64, u64),
    Finish(FinishReason),
    Whole(Message),
}

impl Segment {
    fn kind(&self) -> u8 {
        match self {
            Segment::Text(_) => 0,
            Segment::Reasoning(..) => 1,
            Segment::Calls(_) => 2,
            Segment::Usage(..) => 3,
            Segment::Whole(_) => 4,
            Segment::Finish(_) => 5,
        }
    }
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
        Just(Value::Null),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{1,6}", inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn arguments() -> impl Strategy<Value = Value> {
    prop::collection::btree_map("[a-z_]{1,6}", json_value(), 0..4)
        .prop_map(|map| Value::Object(map.into_iter().collect()))
}

fn segment() -> impl Strategy<Value = Segment> {
    prop_oneof![
        "\\PC{1,40}".prop_map(Segment::Text),
        ("\\PC{1,40}", proptest::option::of("[A-Za-z0-9+/]{4,16}"))
            .prop_map(|(text, signature)| Segment::Reasoning(text, signature)),
        prop::collection::vec(("[a-z_]{1,10}", arguments()), 1..4).prop_map(Segment::Calls),
        (0u64..10_000, 0u64..10_000).prop_map(|(input, output)| Segment::Usage(input, output)),
        "\\PC{0,20}".prop_map(|text| Segment::Whole(Message::user(text))),
        prop_oneof![Just(FinishReason::Stop), Just(FinishReason::ToolCalls)]
            .prop_map(Segment::Finish),
    ]
}

/// Segments with no two neighbours of the same kind (neighbours of one kind
/// would be one message).
fn segments() -> impl Strategy<Value = Vec<Segment>> {
    prop::collection::vec(segment(), 0..8).prop_map(|mut segments| {
        segments.dedup_by(|next, previous| next.kind() == previous.kind());
        segments
    })
}

/// The messages the segments are, in order.
fn expected(segments: &[Segment]) -> Vec<Message> {
    expected_events(segments)
        .into_iter()
        .filter_map(|event| match event {
            Event::Message { message } => Some(message),
            Event::Usage(usage) => Some(Message::Usage(usage)),
            _ => None,
        })
        .collect()
}

/// The non-streaming reply of the segments: one event each — a `message` for
/// what streams as deltas or comes whole, `usage` and `finish` as they are.
fn expected_events(segments: &[Segment]) -> Vec<Event> {
    segments
        .iter()
        .map(|segment| match segment {
            Segment::Text(text) => Event::message(Message::assistant(text.clone())),
            Segment::Reasoning(text, signature) => {
                let Message::Reasoning(mut reasoning) = Message::reasoning(text.clone()) else {
                    unreachable!()
                };
                reasoning.signature = signature.clone();
                Event::message(Message::Reasoning(reasoning))
            }
            Segment::Calls(calls) => Event::message(Message::tool_calls(
                calls
                    .iter()
                    .enumerate()
                    .map(|(i, (name, args))| ToolCall::new(format!("call_{i}"), name, args.clone()))
                    .collect(),
            )),
            Segment::Usage(input, output) => usage_event(*input, *output),
            Segment::Finish(reason) => Event::finish(reason.clone()),
            Segment::Whole(message) => Event::message(message.clone()),
        })
        .collect()
}

fn usage_event(input: u64, output: u64) -> Event {
    let Message::Usage(usage) = Message::usage(input, output) else {
        unreachable!()
    };
    Event::Usage(usage)
}

/// Cuts the segments into deltas.
fn deltas(segments: &[Segment], chunking: Chunking) -> Vec<Event> {
    let mut events = Vec::new();
    for segment in segments {
        match segment {
            Segment::Text(text) => events.extend(chunking.split(text).into_iter().map(Event::text)),
            Segment::Reasoning(text, signature) => {
                events.extend(chunking.split(text).into_iter().map(Event::reasoning));
                if let Some(signature) = signature {
                    for piece in chunking.split(signature) {
                        events.push(Event::ReasoningDelta(ReasoningDelta {
                            text: String::new(),
                            signature: Some(piece.to_owned()),
                            metadata: Metadata::default(),
                        }));
                    }
                }
            }
            Segment::Calls(calls) => {
                for (index, (name, args)) in (0u32..).zip(calls) {
                    events.push(Event::call_start(index, format!("call_{index}"), name));
                    let text = args.to_string();
                    events.extend(
                        chunking
                            .split(&text)
                            .into_iter()
                            .map(|piece| Event::call_arguments(index, piece)),
                    );
                }
            }
            Segment::Usage(input, output) => events.push(usage_event(*input, *output)),
            Segment::Finish(reason) => events.push(Event::finish(reason.clone())),
            Segment::Whole(message) => events.push(Event::message(message.clone())),
        }
    }
    events
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::default()))]

    #[test]
    fn any_split_joins_to_the_same_messages(
        segments in segments(),
        seed in any::<u64>(),
        max in 1usize..12,
    ) {
        let want = expected(&segments);
        for chunking in [Chunking::Whole, Chunking::Bytes(1), Chunking::Chars, Chunking::Random { seed, max }] {
            let events = deltas(&segments, chunking);
            prop_assert_eq!(Joiner::join(events), want.clone(), "{:?}", chunking);
        }
    }

    /// The non-streaming form: each run of deltas one `message` event, `usage`
    /// and `finish` events as they came, in their places.
    #[test]
    fn any_split_joins_to_the_same_non_streaming_events(
        segments in segments(),
        seed in any::<u64>(),
        max in 1usize..12,
    ) {
        let want = expected_events(&segments);
        for chunking in [Chunking::Whole, Chunking::Bytes(1), Chunking::Chars, Chunking::Random { seed, max }] {
            let events = deltas(&segments, chunking);
            prop_assert_eq!(Joiner::join_events(events), want.clone(), "{:?}", chunking);
        }
    }
}

#[test]
fn a_new_id_at_a_known_index_starts_a_new_call() {
    let messages = Joiner::join([
        Event::call_start(0, "a", "first"),
        Event::call_arguments(0, "{}"),
        Event::call_start(0, "b", "second"),
        Event::call_arguments(0, "{\"x\":1}"),
    ]);
    let calls = messages[0].calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].id.as_str(), &calls[0].arguments),
        ("a", &json!({}))
    );
    assert_eq!(
        (calls[1].id.as_str(), &calls[1].arguments),
        ("b", &json!({"x": 1}))
    );
}

#[test]
fn calls_may_start_at_index_one() {
    let messages = Joiner::join([
        Event::call_start(1, "x", "first"),
        Event::call_arguments(1, "{\"a\":"),
        Event::call_arguments(1, "2}"),
        Event::call_start(2, "y", "second"),
    ]);
    let calls = messages[0].calls();
    assert_eq!(
        (calls[0].name.as_str(), &calls[0].arguments),
        ("first", &json!({"a": 2}))
    );
    assert_eq!(
        (calls[1].name.as_str(), &calls[1].arguments),
        ("second", &json!({}))
    );
}

#[test]
fn a_call_is_complete_once_the_next_one_starts() {
    let mut joiner = Joiner::new();
    joiner.push(Event::call_start(0, "a", "first"));
    joiner.push(Event::call_arguments(0, "{\"n\":1}"));
    assert!(
        joiner.completed_calls().is_empty(),
        "the first call may still grow"
    );
    joiner.push(Event::call_start(1, "b", "second"));
    assert_eq!(
        joiner.completed_calls(),
        &[ToolCall::new("a", "first", json!({"n": 1}))]
    );
    joiner.push(Event::text("done"));
    assert!(joiner.completed_calls().is_empty(), "the run has ended");
    let messages = joiner.finish();
    assert_eq!(messages[0].calls().len(), 2);
    assert_eq!(messages[1], Message::assistant("done"));
}

#[test]
fn malformed_arguments_keep_their_raw_text() {
    let messages = Joiner::join([
        Event::call_start(0, "c1", "add"),
        Event::call_arguments(0, "{\"a\": 1,"),
    ]);
    let call = &messages[0].calls()[0];
    assert_eq!(call.arguments, Value::Null);
    let invalid = call.invalid.as_ref().expect("marked invalid");
    assert_eq!(invalid.kind, InvalidCallKind::MalformedArguments);
    assert_eq!(invalid.raw.as_deref(), Some("{\"a\": 1,"));
}

#[test]
fn missing_ids_and_names_are_filled_stably() {
    let messages = Joiner::join([Event::call_arguments(3, "{}")]);
    assert_eq!(messages[0].calls()[0].id, "call_3");
    assert_eq!(messages[0].calls()[0].name, "");
}

#[test]
fn call_delta_fields_reach_the_call() {
    let mut metadata = Metadata::default();
    metadata.insert("thought_signature", json!("sig"));
    let mut delta = ToolCallDelta::start(0, "ws", "web_search");
    delta.details_mut().provider_executed = true;
    delta.metadata = metadata.clone();
    let messages = Joiner::join([Event::from(delta)]);
    let call = &messages[0].calls()[0];
    assert!(call.provider_executed);
    assert_eq!(call.metadata, metadata);
}

#[test]
fn text_after_a_signed_reasoning_starts_a_new_reasoning_message() {
    let signature = |s: &str| {
        Event::ReasoningDelta(ReasoningDelta {
            text: String::new(),
            signature: Some(s.into()),
            metadata: Metadata::default(),
        })
    };
    let messages = Joiner::join([
        Event::reasoning("one"),
        signature("s1"),
        Event::reasoning("two"),
        signature("s2"),
    ]);
    assert_eq!(messages.len(), 2);
    let signatures: Vec<_> = messages
        .iter()
        .map(|m| match m {
            Message::Reasoning(r) => (r.text.clone(), r.signature.clone()),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        signatures,
        vec![
            ("one".into(), Some("s1".into())),
            ("two".into(), Some("s2".into()))
        ]
    );
}

#[test]
fn text_metadata_merges_first_value_wins() {
    let delta = |text: &str, generation: &str| {
        Event::TextDelta(TextDelta {
            text: text.into(),
            metadata: Metadata::generation(generation),
        })
    };
    let messages = Joiner::join([delta("a", "gen-1"), delta("b", "gen-2")]);
    assert_eq!(
        messages,
        vec![Message::assistant("ab").with_metadata(Metadata::generation("gen-1"))]
    );
}

#[test]
fn citations_of_text_deltas_add_up_in_the_message() {
    let cited = |text: &str, url: &str| {
        let mut metadata = Metadata::generation("gen-1");
        metadata.add_citations([lmstack::Citation::url(url, None).with_span(0, 1)]);
        Event::TextDelta(TextDelta {
            text: text.into(),
            metadata,
        })
    };
    let messages = Joiner::join([
        cited("a", "https://a"),
        Event::text("b"),
        cited("", "https://b"),
    ]);
    let urls: Vec<String> = messages[0]
        .metadata()
        .citations()
        .into_iter()
        .filter_map(|citation| match citation.source {
            lmstack::CitationSource::Url { url, .. } => Some(url),
            _ => None,
        })
        .collect();
    assert_eq!(messages[0].as_text(), Some("ab"));
    assert_eq!(urls, ["https://a", "https://b"]);
}

#[test]
fn empty_deltas_change_nothing() {
    let messages = Joiner::join([
        Event::text("a"),
        Event::reasoning(""),
        Event::text(""),
        Event::text("b"),
    ]);
    assert_eq!(messages, vec![Message::assistant("ab")]);
}

#[test]
fn finish_ends_the_run_and_is_remembered() {
    let mut joiner = Joiner::new();
    joiner.push(Event::text("a"));
    joiner.push(Event::finish(FinishReason::Length));
    assert_eq!(joiner.take_completed(), vec![Message::assistant("a")]);
    joiner.push(Event::text("b"));
    assert_eq!(joiner.finish_reason(), Some(&FinishReason::Length));
    joiner.push(Event::finish(FinishReason::Stop));
    assert_eq!(
        joiner.finish_events(),
        vec![
            Event::message(Message::assistant("b")),
            Event::finish(FinishReason::Stop)
        ],
        "the events not taken yet, the finish in its place"
    );
}

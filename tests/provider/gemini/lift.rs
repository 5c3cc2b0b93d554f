//! Gemini's lifting against every recorded `generateContent` response under
//! `tests/fixtures/google/`: the exact calls, arguments, ids, text, reasoning,
//! signatures, usage and finish reasons they hold; and any cutting of a recorded
//! stream lifts to the same events as the whole.

#![cfg(feature = "gemini")]

use crate::common;

use common::*;
use lmstack::message::FinishReason;
use lmstack::provider::body::BodyDecoder;
use lmstack::provider::gemini::{GENERATED_ID_KEY, Lifter, THOUGHT_SIGNATURE_KEY};
use lmstack::{Error, Event, Joiner, Message, ToolCall, Usage};
use proptest::prelude::*;
use serde_json::{Value, json};

const MULTI_TOOL: &str =
    "google/fantasy/TestGoogleCommon/gemini-3-pro-preview/multi_tool_streaming.yaml";
const THINKING: &str =
    "google/fantasy/TestGoogleThinking/gemini-3-pro-preview/thinking-streaming.yaml";
const RIG: &str = "google/rig/gemini/streaming_multimodal_tool_results/streaming_history_preserves_hybrid_tool_result_image_parts.yaml";
const THOUGHT_SUMMARY: &str = "google/vertexai-sdk-test-data/googleai/streaming-success-thinking-function-call-thought-summary-signature.txt";
const MID_STREAM_ERROR: &str =
    "google/vertexai-sdk-test-data/vertexai/streaming-failure-error-mid-stream.txt";
const PARALLEL_BODY: &str =
    "google/vertexai-sdk-test-data/vertexai/unary-success-function-call-parallel-calls.json";
const NO_ARGS: &str = "google/vercel-ai/google-stream-no-args-tool-call.chunks.txt";
const STREAMED_ARGS: &str = "google/vercel-ai/google-stream-tool-call-arguments.chunks.txt";
const GEMINI3_CALL: &str = "google/vercel-ai/google-tool-call-gemini3.chunks.txt";
const BODY_CALL: &str = "google/vercel-ai/google-tool-call.json";

fn events(decoder: BodyDecoder<Lifter>, body: &[u8]) -> Result<Vec<Event>, Error> {
    decode_cut(decoder, body, &[body.len().max(1)])
}

fn sse(body: &[u8]) -> Vec<Message> {
    Joiner::join(events(BodyDecoder::sse(Lifter::new()), body).unwrap())
}

fn finish_of(body: &[u8]) -> Option<FinishReason> {
    events(BodyDecoder::sse(Lifter::new()), body)
        .unwrap()
        .into_iter()
        .find_map(|event| match event {
            Event::Finish { reason } => Some(reason),
            _ => None,
        })
}

fn calls_in(messages: &[Message]) -> Vec<ToolCall> {
    messages.iter().flat_map(Message::calls).cloned().collect()
}

fn usage(messages: &[Message]) -> Usage {
    let usages: Vec<&Usage> = messages
        .iter()
        .filter_map(|message| match message {
            Message::Usage(usage) => Some(usage),
            _ => None,
        })
        .collect();
    assert_eq!(usages.len(), 1, "one usage, the last (cumulative) one");
    usages[0].clone()
}

fn counts(usage: &Usage) -> (u64, u64, Option<u64>) {
    (
        usage.input_tokens,
        usage.output_tokens,
        usage.reasoning_tokens,
    )
}

fn signature(call: &ToolCall) -> Option<&str> {
    call.metadata
        .get(THOUGHT_SIGNATURE_KEY)
        .and_then(Value::as_str)
}

/// The recorded `thoughtSignature`s of a body, in order.
fn recorded_signatures(body: &str) -> Vec<String> {
    body.split("thoughtSignature")
        .skip(1)
        .map(|rest| {
            let start = rest.find(|c: char| c.is_ascii_alphanumeric()).unwrap();
            let rest = &rest[start..];
            rest[..rest.find(['"', '\\']).unwrap()].to_owned()
        })
        .collect()
}

fn reasonings(messages: &[Message]) -> Vec<(String, Option<String>)> {
    messages
        .iter()
        .filter_map(|message| match message {
            Message::Reasoning(reasoning) => {
                Some((reasoning.text.clone(), reasoning.signature.clone()))
            }
            _ => None,
        })
        .collect()
}

fn text(messages: &[Message]) -> String {
    messages.iter().filter_map(Message::as_text).collect()
}

#[test]
fn fantasy_parallel_calls_carry_their_ids_and_only_the_first_a_signature() {
    let exchanges = cassette(MULTI_TOOL);
    let body = exchanges[0].response.as_bytes();
    let messages = sse(body);
    let calls = calls_in(&messages);
    let signatures = recorded_signatures(&exchanges[0].response);
    assert_eq!(signatures.len(), 1);
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (
            calls[0].id.as_str(),
            calls[0].name.as_str(),
            &calls[0].arguments
        ),
        ("8hd01vsf", "add", &json!({"a": 2, "b": 3}))
    );
    assert_eq!(signature(&calls[0]), Some(signatures[0].as_str()));
    assert_eq!(
        (
            calls[1].id.as_str(),
            calls[1].name.as_str(),
            &calls[1].arguments
        ),
        ("k0srpqrc", "multiply", &json!({"a": 2, "b": 3}))
    );
    assert_eq!(signature(&calls[1]), None);
    assert!(
        calls
            .iter()
            .all(|call| call.metadata.get(GENERATED_ID_KEY).is_none())
    );
    assert_eq!(counts(&usage(&messages)), (157, 32 + 438, Some(438)));
    assert_eq!(finish_of(body), Some(FinishReason::ToolCalls));

    // Round 2: text, then a signature alone on an empty text part.
    let body = exchanges[1].response.as_bytes();
    let messages = sse(body);
    assert_eq!(
        text(&messages),
        "The sum of 2 and 3 is 5, and their product is 6."
    );
    let signatures = recorded_signatures(&exchanges[1].response);
    assert_eq!(
        reasonings(&messages),
        vec![(String::new(), Some(signatures[0].clone()))]
    );
    assert_eq!(counts(&usage(&messages)), (646, 19 + 20, Some(20)));
    assert_eq!(finish_of(body), Some(FinishReason::Stop));
    assert_eq!(
        messages[0].metadata().generation_id(),
        Some("VgCzafjWBa_Qz7IP1KnJoQk")
    );
}

#[test]
fn fantasy_thinking_call_and_signature_only_final_part() {
    let exchanges = cassette(THINKING);
    let messages = sse(exchanges[0].response.as_bytes());
    let calls = calls_in(&messages);
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0].id.as_str(), &calls[0].arguments),
        ("9d532gc9", &json!({"location": "Florence, Italy"}))
    );
    assert_eq!(
        signature(&calls[0]),
        Some(recorded_signatures(&exchanges[0].response)[0].as_str())
    );
    assert_eq!(counts(&usage(&messages)), (65, 16 + 94, Some(94)));

    let messages = sse(exchanges[1].response.as_bytes());
    assert_eq!(
        text(&messages),
        "The current weather in Florence, Italy is 40°C (104°F). Stay cool, it's quite hot!"
    );
    let signature = recorded_signatures(&exchanges[1].response).remove(0);
    assert_eq!(
        reasonings(&messages),
        vec![(String::new(), Some(signature))]
    );
    assert_eq!(counts(&usage(&messages)), (189, 29 + 68, Some(68)));
}

#[test]
fn rig_image_tool_round_trip_responses() {
    let exchanges = cassette(RIG);
    let messages = sse(exchanges[0].response.as_bytes());
    let calls = calls_in(&messages);
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (
            calls[0].id.as_str(),
            calls[0].name.as_str(),
            &calls[0].arguments
        ),
        ("call_320", "render_reference_image", &json!({}))
    );
    assert_eq!(signature(&calls[0]), Some("signature_REDACTED_1"));
    assert_eq!(counts(&usage(&messages)), (90, 12 + 58, Some(58)));

    let messages = sse(exchanges[1].response.as_bytes());
    assert_eq!(text(&messages), "The dominant color in the image is red.");
    assert_eq!(
        reasonings(&messages),
        vec![(String::new(), Some("signature_REDACTED_2".into()))]
    );
    assert_eq!(counts(&usage(&messages)), (1278, 9 + 37, Some(37)));
}

#[test]
fn thought_summaries_are_reasoning_and_the_call_keeps_its_signature() {
    let body = fixture(THOUGHT_SUMMARY);
    let messages = sse(&body);
    let reasoning = reasonings(&messages);
    assert_eq!(
        reasoning.len(),
        1,
        "the two summaries join into one reasoning"
    );
    assert!(reasoning[0].0.starts_with("**Calculating the Days**\n\n"));
    assert!(reasoning[0].0.contains("**Determining the Approach**"));
    assert_eq!(reasoning[0].1, None);
    let calls = calls_in(&messages);
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0].name.as_str(), &calls[0].arguments),
        ("now", &json!({}))
    );
    assert_eq!(calls[0].id, "48SHaPHpHKbG-8YPtZCawAk_call_0");
    assert_eq!(calls[0].metadata.get(GENERATED_ID_KEY), Some(&json!(true)));
    let recorded = recorded_signatures(&String::from_utf8(body.clone()).unwrap());
    assert_eq!(signature(&calls[0]), Some(recorded[0].as_str()));
    assert_eq!(counts(&usage(&messages)), (38, 6 + 168, Some(168)));
    assert_eq!(finish_of(&body), Some(FinishReason::ToolCalls));
}

#[test]
fn an_error_appended_to_a_stream_is_a_typed_provider_error() {
    let body = fixture(MID_STREAM_ERROR);
    let result = events(BodyDecoder::sse(Lifter::new()), &body);
    let Err(error) = &result else {
        panic!("expected an error, got {result:?}");
    };
    let error = error.provider_error().expect("a provider error");
    assert_eq!(error.code.as_deref(), Some("499"));
    assert_eq!(error.error_type.as_deref(), Some("CANCELLED"));
    assert_eq!(error.message, "The operation was cancelled.");
    // What came before the error was lifted first.
    let mut output = lmstack::service::Output::new();
    let mut decoder = BodyDecoder::sse(Lifter::new());
    use lmstack::service::Machine;
    let _ = decoder.push(body.into(), &mut output);
    assert_eq!(text(&Joiner::join(output.drain())), "First Second ");
}

#[test]
fn parallel_calls_without_ids_get_unique_generated_ones() {
    let body = fixture(PARALLEL_BODY);
    let events = events(BodyDecoder::json(Lifter::new()), &body).unwrap();
    assert_eq!(events.last(), Some(&Event::finish(FinishReason::ToolCalls)));
    let calls = calls_in(&Joiner::join(events));
    let expected = [
        ("call_0", json!({"x": 2, "y": 1})),
        ("call_1", json!({"x": 4, "y": 3})),
        ("call_2", json!({"x": 6, "y": 5})),
    ];
    assert_eq!(calls.len(), 3);
    for (call, (id, arguments)) in calls.iter().zip(expected) {
        assert_eq!((call.id.as_str(), call.name.as_str()), (id, "sum"));
        assert_eq!(call.arguments, arguments);
        assert_eq!(call.metadata.get(GENERATED_ID_KEY), Some(&json!(true)));
    }
}

#[test]
fn vertex_streamed_arguments_build_whole_calls() {
    let body = chunks_as_sse(STREAMED_ARGS);
    let messages = sse(&body);
    let calls = calls_in(&messages);
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].name.as_str(), &calls[0].arguments),
        ("getWeather", &json!({"location": "Boston"}))
    );
    assert_eq!(
        (calls[1].name.as_str(), &calls[1].arguments),
        ("getWeather", &json!({"location": "San Francisco"}))
    );
    assert_eq!(calls[0].id, "dqHOab6xGLzWodAPkPuViA4_call_0");
    assert_eq!(calls[1].id, "dqHOab6xGLzWodAPkPuViA4_call_1");
    let recorded = recorded_signatures(&String::from_utf8(fixture(STREAMED_ARGS)).unwrap());
    assert_eq!(signature(&calls[0]), Some(recorded[0].as_str()));
    assert_eq!(signature(&calls[1]), None);
    assert_eq!(counts(&usage(&messages)), (26, 23 + 132, Some(132)));
    assert_eq!(finish_of(&body), Some(FinishReason::ToolCalls));
}

#[test]
fn a_no_argument_call_and_streamed_parallel_calls() {
    let body = chunks_as_sse(NO_ARGS);
    let messages = sse(&body);
    let reasoning = reasonings(&messages);
    assert_eq!(reasoning.len(), 1);
    assert!(reasoning[0].0.starts_with("**Processing User Requests**"));
    let calls = calls_in(&messages);
    let named: Vec<(&str, &Value)> = calls
        .iter()
        .map(|call| (call.name.as_str(), &call.arguments))
        .collect();
    assert_eq!(
        named,
        vec![
            ("read_theme", &json!({})),
            ("read_screen", &json!({"id": "A"})),
            ("read_screen", &json!({"id": "B"})),
            ("read_screen", &json!({"id": "C"})),
        ]
    );
    let ids: std::collections::HashSet<&str> = calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids.len(), 4, "generated ids are unique");
    assert!(signature(&calls[0]).is_some());
    assert!(calls[1..].iter().all(|call| signature(call).is_none()));
    assert_eq!(counts(&usage(&messages)), (249, 58 + 183, Some(183)));
}

#[test]
fn a_gemini3_call_streamed_and_a_call_in_a_body() {
    let body = chunks_as_sse(GEMINI3_CALL);
    let messages = sse(&body);
    let calls = calls_in(&messages);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].arguments, json!({"location": "San Francisco"}));
    let recorded = recorded_signatures(&String::from_utf8(fixture(GEMINI3_CALL)).unwrap());
    assert_eq!(signature(&calls[0]), Some(recorded[0].as_str()));
    assert_eq!(counts(&usage(&messages)), (29, 15 + 804, Some(804)));

    let body = fixture(BODY_CALL);
    let events = events(BodyDecoder::json(Lifter::new()), &body).unwrap();
    assert_eq!(events.last(), Some(&Event::finish(FinishReason::ToolCalls)));
    let messages = Joiner::join(events);
    let calls = calls_in(&messages);
    assert_eq!(
        (calls[0].name.as_str(), &calls[0].arguments),
        ("weather", &json!({"location": "San Francisco"}))
    );
    assert_eq!(
        signature(&calls[0]),
        Some(
            "EskgCsYgAb4+9vtF7/499YQS2bjZs3xcQI+iAl+ILn29nK1j0Kg6su7QsUUUk3nrAAfnS2w5WiVvlcCqu9fAebJ2cvfaEyBahEt5"
        )
    );
    assert_eq!(calls[0].id, "m36LaZGyCLz1xs0PtNSB-QU_call_0");
    assert_eq!(counts(&usage(&messages)), (29, 15 + 893, Some(893)));
}

#[test]
fn finish_reasons_are_mapped() {
    let finish = |reason: &str, call: bool| {
        let part = if call {
            json!({"functionCall": {"name": "f", "args": {}}})
        } else {
            json!({"text": "x"})
        };
        let body = json!({"candidates": [{"content": {"parts": [part]}, "finishReason": reason}]});
        finish_of(format!("data: {body}\r\n\r\n").as_bytes())
    };
    assert_eq!(finish("STOP", false), Some(FinishReason::Stop));
    assert_eq!(finish("STOP", true), Some(FinishReason::ToolCalls));
    assert_eq!(finish("MAX_TOKENS", false), Some(FinishReason::Length));
    assert_eq!(finish("SAFETY", false), Some(FinishReason::ContentFilter));
    assert_eq!(
        finish("RECITATION", false),
        Some(FinishReason::ContentFilter)
    );
    assert_eq!(
        finish("MALFORMED_FUNCTION_CALL", false),
        Some(FinishReason::Other("malformed_function_call".into()))
    );
    let blocked = json!({"promptFeedback": {"blockReason": "SAFETY"}});
    assert_eq!(
        finish_of(format!("data: {blocked}\n\n").as_bytes()),
        Some(FinishReason::ContentFilter)
    );
}

#[test]
fn a_stream_without_a_finish_reason_is_truncated_and_calls_are_limited() {
    let body = b"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hi\"}]}}]}\r\n\r\n";
    let error = events(BodyDecoder::sse(Lifter::new()), body).unwrap_err();
    assert_eq!(
        error.transport_error().map(|e| e.kind),
        Some(lmstack::provider::TransportErrorKind::Truncated)
    );
    let body = fixture(PARALLEL_BODY);
    let error = events(
        BodyDecoder::json(Lifter::new()).with_max_tool_calls(2),
        &body,
    )
    .unwrap_err();
    assert!(
        matches!(error, Error::ToolCallLimit { limit: 2, .. }),
        "{error}"
    );
}

/// Every recorded stream, as SSE bytes.
fn recorded_streams() -> Vec<Vec<u8>> {
    let mut bodies: Vec<Vec<u8>> = [MULTI_TOOL, THINKING, RIG]
        .into_iter()
        .flat_map(cassette)
        .map(|exchange| exchange.response.into_bytes())
        .collect();
    bodies.push(fixture(THOUGHT_SUMMARY));
    bodies.extend([NO_ARGS, STREAMED_ARGS, GEMINI3_CALL].map(chunks_as_sse));
    bodies
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(64)))]

    #[test]
    fn any_cutting_of_a_recorded_stream_lifts_to_the_same_events(
        sizes in prop::collection::vec(1usize..64, 1..16),
    ) {
        for body in recorded_streams() {
            let whole = events(BodyDecoder::sse(Lifter::new()), &body).unwrap();
            let cut = decode_cut(BodyDecoder::sse(Lifter::new()), &body, &sizes).unwrap();
            // Not only the same, but something: every recording holds content
            // and ends with a finish reason.
            prop_assert!(whole.len() > 1, "{:?}", whole);
            prop_assert!(matches!(whole.last(), Some(Event::Finish { .. })), "{:?}", whole);
            prop_assert_eq!(&cut, &whole);
        }
    }
}

/// One part of a generated turn.
fn part() -> impl Strategy<Value = Value> {
    let text = "[a-zA-Z0-9 .,é\"\\\\{}]{1,12}";
    prop_oneof![
        text.prop_map(|text| json!({"text": text})),
        text.prop_map(|text| json!({"text": text, "thought": true})),
        (text, "[A-Za-z0-9+/]{4,8}")
            .prop_map(|(text, signature)| json!({"text": text, "thoughtSignature": signature})),
        "[A-Za-z0-9+/]{4,8}"
            .prop_map(|signature| json!({"text": "", "thoughtSignature": signature})),
        (
            "[a-z_]{1,8}",
            prop::option::of("[a-z0-9]{8}"),
            prop::collection::hash_map("[a-z]{1,4}", any::<i32>(), 0..3),
        )
            .prop_map(|(name, id, args)| {
                let mut call = json!({"name": name, "args": args});
                if let Some(id) = id {
                    call["id"] = id.into();
                }
                json!({"functionCall": call})
            }),
    ]
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(128)))]

    /// A turn streamed one part per response (usage growing, as Gemini sends it)
    /// joins to the messages of the same turn as one non-streaming body.
    #[test]
    fn a_streamed_turn_equals_its_non_streaming_body(
        parts in prop::collection::vec(part(), 1..10),
        finish in prop::sample::select(vec!["STOP", "MAX_TOKENS", "SAFETY", "MALFORMED_FUNCTION_CALL"]),
        sizes in prop::collection::vec(1usize..64, 1..8),
    ) {
        let response = |parts: Vec<Value>, last: bool, n: usize| {
            let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
            if last {
                candidate["finishReason"] = finish.into();
            }
            json!({
                "candidates": [candidate],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": n, "thoughtsTokenCount": 2 * n},
                "responseId": "r1",
            })
        };
        let stream: String = parts
            .iter()
            .enumerate()
            .map(|(i, part)| {
                let last = i + 1 == parts.len();
                format!("data: {}\r\n\r\n", response(vec![part.clone()], last, i + 1))
            })
            .collect();
        let body = response(parts.clone(), true, parts.len()).to_string();
        let streamed = Joiner::join(decode_cut(BodyDecoder::sse(Lifter::new()), stream.as_bytes(), &sizes).unwrap());
        let whole = Joiner::join(decode_cut(BodyDecoder::json(Lifter::new()), body.as_bytes(), &sizes).unwrap());
        prop_assert_eq!(&streamed, &whole);
        // And what went in comes out, read from the parts themselves: the
        // text, the thoughts, each call's name and arguments, its id where it
        // had one, and the usage of the last response.
        let (mut text, mut thoughts, mut calls) = (String::new(), String::new(), Vec::new());
        for part in &parts {
            if let Some(call) = part.get("functionCall") {
                calls.push((call["name"].as_str().unwrap().to_owned(), call["args"].clone()));
            } else if part["thought"] == true {
                thoughts.push_str(part["text"].as_str().unwrap());
            } else {
                text.push_str(part["text"].as_str().unwrap());
            }
        }
        let (mut read_text, mut read_thoughts) = (String::new(), String::new());
        for message in &whole {
            match message {
                Message::Text(said) => read_text.push_str(&said.text),
                Message::Reasoning(thought) => read_thoughts.push_str(&thought.text),
                _ => {}
            }
        }
        prop_assert_eq!(read_text, text);
        prop_assert_eq!(read_thoughts, thoughts);
        let lifted = calls_in(&whole);
        let read_calls: Vec<(String, Value)> = lifted.iter().map(|c| (c.name.clone(), c.arguments.clone())).collect();
        prop_assert_eq!(read_calls, calls);
        let given = parts.iter().filter_map(|part| part.get("functionCall")).map(|call| call.get("id"));
        for (call, id) in lifted.iter().zip(given) {
            if let Some(id) = id {
                prop_assert_eq!(Some(call.id.as_str()), id.as_str());
            }
        }
        let n = parts.len() as u64;
        prop_assert_eq!(counts(&usage(&whole)), (10, 3 * n, Some(2 * n)));
    }
}

#[test]
fn a_json_array_of_responses_is_read_as_one_body() {
    let exchange = &cassette(MULTI_TOOL)[1];
    let responses: Vec<String> = exchange
        .response
        .split("\r\n\r\n")
        .filter_map(|event| event.strip_prefix("data: "))
        .map(str::to_owned)
        .collect();
    let array = format!("[{}]", responses.join(",\r\n"));
    let whole = Joiner::join(events(BodyDecoder::json(Lifter::new()), array.as_bytes()).unwrap());
    assert_eq!(whole, sse(exchange.response.as_bytes()));
}

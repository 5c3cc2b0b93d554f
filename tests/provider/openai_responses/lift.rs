//! The Responses lifter against recorded responses under
//! `tests/fixtures/openai_responses/`: the exact calls, text, reasoning (its
//! summary and encrypted content), citations, items kept whole, usage and
//! finish they hold; errors; parallel calls whose events interleave by
//! `output_index`; and any cutting of a stream lifts to the same events.

#![cfg(feature = "openai-responses")]

use crate::common;

use common::*;
use lmstack::message::FinishReason;
use lmstack::provider::body::BodyDecoder;
use lmstack::provider::openai_responses::{EXTRA_KEY, ITEM_KEY, Lifter, REFUSAL_KEY};
use lmstack::{Error, Event, Joiner, Message, Usage};
use proptest::prelude::*;
use serde_json::{Value, json};

pub const FANTASY: &str = "openai_responses/fantasy/multi_tool_streaming.yaml";
const REASONING_STREAMS: &str =
    "openai_responses/vercel-ai/openai-reasoning-encrypted-content.1.chunks.txt";
const REASONING_BODY: &str = "openai_responses/vercel-ai/openai-reasoning-encrypted-content.1.json";
const WEB_SEARCH_BODY: &str = "openai_responses/vercel-ai/openai-web-search-tool.1.json";
const ERROR_STREAM: &str = "openai_responses/vercel-ai/openai-error.1.chunks.txt";
const ERROR_BODY: &str = "openai_responses/vercel-ai/openai-error.1.json";

/// The streams of a `.chunks.txt` holding several responses, one a line each
/// event: cut where each response is created.
fn streams(name: &str) -> Vec<Vec<u8>> {
    let text = String::from_utf8(fixture(name)).unwrap();
    let mut streams: Vec<Vec<Value>> = Vec::new();
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let event: Value = serde_json::from_str(line).unwrap();
        if event["type"] == "response.created" || streams.is_empty() {
            streams.push(Vec::new());
        }
        streams.last_mut().unwrap().push(event);
    }
    streams.iter().map(|events| typed_sse(events)).collect()
}

fn events(body: &[u8], sizes: &[usize]) -> Result<Vec<Event>, Error> {
    decode_cut(BodyDecoder::sse(Lifter::new()), body, sizes)
}

pub fn sse(body: &[u8]) -> Vec<Message> {
    Joiner::join(events(body, &[body.len().max(1)]).unwrap())
}

pub fn json(body: &[u8]) -> Vec<Message> {
    lift_with(BodyDecoder::json(Lifter::new()), body).unwrap()
}

fn finish(body: &[u8]) -> FinishReason {
    events(body, &[body.len()])
        .unwrap()
        .into_iter()
        .find_map(|event| match event {
            Event::Finish { reason } => Some(reason),
            _ => None,
        })
        .expect("a finish")
}

fn usage(messages: &[Message]) -> &Usage {
    let usages: Vec<&Usage> = messages
        .iter()
        .filter_map(|message| match message {
            Message::Usage(usage) => Some(usage),
            _ => None,
        })
        .collect();
    assert_eq!(usages.len(), 1, "{messages:?}");
    usages[0]
}

fn reasoning(message: &Message) -> (&str, Option<&str>, &Value) {
    let Message::Reasoning(reasoning) = message else {
        panic!("reasoning: {message:?}");
    };
    let kept = reasoning
        .metadata
        .get(EXTRA_KEY)
        .expect("this wire's reasoning");
    (&reasoning.text, reasoning.signature.as_deref(), kept)
}

#[test]
fn the_fantasy_turns_lift_to_their_calls_text_usage_and_finish() {
    let exchanges = cassette(FANTASY);
    let first = exchanges[0].response.as_bytes();
    let messages = sse(first);
    let (text, signature, kept) = reasoning(&messages[0]);
    assert_eq!(
        (text, signature),
        ("", None),
        "no summary, no encrypted content asked for"
    );
    assert_eq!(
        kept["id"],
        "rs_0a7836d50cf181dd016a3c122e5e1881a1b60647835c2c9ab0"
    );
    let calls = messages[1].calls();
    let seen: Vec<(&str, &str, &Value)> = calls
        .iter()
        .map(|call| (call.id.as_str(), call.name.as_str(), &call.arguments))
        .collect();
    let arguments = json!({"a": 2, "b": 3});
    assert_eq!(
        seen,
        [
            ("call_inViAUr9eV0GDtyOywkCxp59", "add", &arguments),
            ("call_Op66UUnzuOoKmgGeFJQJFTUY", "multiply", &arguments)
        ]
    );
    assert_eq!(
        calls[0].metadata.get(EXTRA_KEY),
        Some(&json!({"id": "fc_0a7836d50cf181dd016a3c12307fa481a1a06adb8b03345a43"}))
    );
    let usage = usage(&messages);
    assert_eq!((usage.input_tokens, usage.output_tokens), (109, 223));
    assert_eq!(
        (usage.cached_input_tokens, usage.reasoning_tokens),
        (Some(0), Some(128))
    );
    assert_eq!(
        usage.metadata.generation_id(),
        Some("resp_0a7836d50cf181dd016a3c122cf3b881a1947fb8d49897cfca")
    );
    assert_eq!(finish(first), FinishReason::ToolCalls);

    let second = exchanges[1].response.as_bytes();
    let messages = sse(second);
    assert_eq!(
        messages[0].as_text(),
        Some("Results:\n- Addition (2 + 3) = 5\n- Multiplication (2 × 3) = 6")
    );
    assert_eq!(
        messages[0].metadata().get(EXTRA_KEY),
        Some(&json!({"id": "msg_0dd65ac660ad00e6016a3c1231c5f0819eb6adc3d7b061a6f2"}))
    );
    assert_eq!(finish(second), FinishReason::Stop);
}

#[test]
fn reasoning_summaries_stream_and_the_encrypted_content_comes_from_the_done_item() {
    let streams = streams(REASONING_STREAMS);
    assert_eq!(streams.len(), 4);
    let messages = sse(&streams[0]);
    let (text, signature, kept) = reasoning(&messages[0]);
    assert!(
        text.starts_with("**Calculating step-by-step using calculator**\n\nI'll compute 12 plus 7"),
        "{text}"
    );
    let signature = signature.unwrap();
    assert!(
        signature.starts_with("gAAAAABpPDIVOKrs"),
        "the done item's, not the added one's"
    );
    assert_eq!(
        kept["id"],
        "rs_01830d662ab3856501693c321405c88190be3ab04d5782d5f9"
    );
    let call = &messages[1].calls()[0];
    assert_eq!(call.arguments, json!({"a": 12, "b": 7, "op": "add"}));
    assert_eq!(finish(&streams[0]), FinishReason::ToolCalls);
    let last = sse(&streams[3]);
    assert_eq!(last[0].as_text(), Some("The final result is **570**."));
    assert_eq!(finish(&streams[3]), FinishReason::Stop);
}

#[test]
fn a_whole_body_lifts_like_its_stream_reasoning_text_and_usage() {
    let messages = json(&fixture(REASONING_BODY));
    let (text, signature, _) = reasoning(&messages[0]);
    assert!(text.starts_with("**Reporting final result**"), "{text}");
    assert!(signature.unwrap().starts_with("gAAAAABpPMlcH0HHEv5_"));
    assert!(messages[1].as_text().unwrap().starts_with("12 + 7 = 19"));
    let usage = usage(&messages);
    assert_eq!(
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.reasoning_tokens
        ),
        (865, 163, Some(128))
    );
}

#[test]
fn web_search_calls_are_kept_whole_and_url_citations_lifted_in_characters() {
    let body = fixture(WEB_SEARCH_BODY);
    let response: Value = serde_json::from_slice(&body).unwrap();
    let messages = json(&body);
    let kept: Vec<&Value> = messages
        .iter()
        .filter_map(|message| message.metadata().get(ITEM_KEY))
        .collect();
    let recorded: Vec<&Value> = response["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "web_search_call")
        .collect();
    assert_eq!(kept, recorded, "each web search call whole, in order");
    let reasonings = messages
        .iter()
        .filter(|m| matches!(m, Message::Reasoning(_)))
        .count();
    assert_eq!(reasonings, 4, "each reasoning item its own message");
    let answer = messages.iter().rev().find_map(|m| match m {
        Message::Text(text) if !text.text.is_empty() => Some(text),
        _ => None,
    });
    let answer = answer.unwrap();
    let part = &response["output"].as_array().unwrap().last().unwrap()["content"][0];
    assert_eq!(answer.text, part["text"].as_str().unwrap());
    let citations = answer.metadata.citations();
    let annotations = part["annotations"].as_array().unwrap();
    assert_eq!(citations.len(), annotations.len());
    let chars: Vec<char> = answer.text.chars().collect();
    for (citation, annotation) in citations.iter().zip(annotations) {
        let span = citation.span.unwrap();
        assert_eq!(
            (span.start as u64, span.end as u64),
            (
                annotation["start_index"].as_u64().unwrap(),
                annotation["end_index"].as_u64().unwrap()
            )
        );
        assert!(span.end <= chars.len());
    }
    let usage = usage(&messages);
    assert_eq!(
        (usage.input_tokens, usage.cached_input_tokens),
        (19681, Some(3712))
    );
}

#[test]
fn an_error_event_ends_the_stream_as_a_provider_error() {
    let body = streams(ERROR_STREAM).remove(0);
    let error = events(&body, &[body.len()]).unwrap_err();
    let provider = error.provider_error().expect("a provider error");
    assert_eq!(provider.code.as_deref(), Some("insufficient_quota"));
    assert!(
        provider
            .message
            .starts_with("You exceeded your current quota")
    );
    let body = fixture(ERROR_BODY);
    let error = lift_with(BodyDecoder::json(Lifter::new()), &body).unwrap_err();
    assert_eq!(
        error.provider_error().unwrap().error_type.as_deref(),
        Some("insufficient_quota")
    );
}

#[test]
fn a_failed_response_is_an_error_after_what_came_before() {
    let body = typed_sse(&[
        json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}}),
        json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "item_id": "msg_1", "delta": "Hel"}),
        json!({"type": "response.failed", "response": {"id": "resp_1", "status": "failed", "output": [],
            "error": {"code": "server_error", "message": "The model failed"}}}),
    ]);
    let mut decoder = BodyDecoder::sse(Lifter::new());
    let mut out = lmstack::service::Output::new();
    use lmstack::service::Machine;
    let error = decoder.push(body.into(), &mut out).unwrap_err();
    assert_eq!(
        error.provider_error().unwrap().code.as_deref(),
        Some("server_error")
    );
    let texts: Vec<Event> = out.drain().collect();
    assert!(matches!(&texts[..], [Event::TextDelta(delta)] if delta.text == "Hel"));
}

#[test]
fn an_incomplete_response_finishes_by_its_reason_and_a_refusal_is_marked() {
    let incomplete = |reason: &str| {
        typed_sse(&[
            json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}}),
            json!({"type": "response.refusal.delta", "output_index": 0, "content_index": 0, "item_id": "msg_1", "delta": "I can't"}),
            json!({"type": "response.refusal.delta", "output_index": 0, "content_index": 0, "item_id": "msg_1", "delta": " help."}),
            json!({"type": "response.incomplete", "response": {"id": "resp_1", "status": "incomplete", "output": [],
                "incomplete_details": {"reason": reason}, "usage": {"input_tokens": 5, "output_tokens": 2}}}),
        ])
    };
    assert_eq!(
        finish(&incomplete("max_output_tokens")),
        FinishReason::Length
    );
    assert_eq!(
        finish(&incomplete("content_filter")),
        FinishReason::ContentFilter
    );
    let messages = sse(&incomplete("content_filter"));
    assert_eq!(messages[0].as_text(), Some("I can't help."));
    assert_eq!(
        messages[0].metadata().get(REFUSAL_KEY),
        Some(&Value::Bool(true))
    );
    let completed = json(
        br#"{"id":"r","status":"completed","output":[{"type":"message","id":"m","role":"assistant",
        "content":[{"type":"refusal","refusal":"No."}]}]}"#,
    );
    assert_eq!(
        completed[0].metadata().get(REFUSAL_KEY),
        Some(&Value::Bool(true))
    );
}

#[test]
fn a_stream_that_never_completes_is_truncated() {
    let exchanges = cassette(FANTASY);
    let body = exchanges[0].response.as_bytes();
    let cut = body.len() - 200; // inside response.completed
    let error = events(&body[..cut], &[cut]).unwrap_err();
    assert!(error.transport_error().is_some(), "{error}");
}

/// Two calls whose argument deltas alternate by `output_index`.
fn interleaved(first: &str, second: &str) -> Vec<u8> {
    let added = |index: u32, id: &str| {
        json!({"type": "response.output_item.added", "output_index": index,
               "item": {"type": "function_call", "id": format!("fc_{id}"), "call_id": id, "name": "f", "arguments": ""}})
    };
    let delta = |index: u32, piece: &str| json!({"type": "response.function_call_arguments.delta", "output_index": index, "item_id": "x", "delta": piece});
    let done = |index: u32| {
        json!({"type": "response.output_item.done", "output_index": index,
        "item": {"type": "function_call", "call_id": "ignored", "name": "f", "arguments": "{}"}})
    };
    let (a, b) = first.split_at(first.len() / 2);
    let (c, d) = second.split_at(second.len() / 2);
    typed_sse(&[
        added(0, "call_a"),
        added(1, "call_b"),
        delta(1, c),
        delta(0, a),
        delta(1, d),
        done(1),
        delta(0, b),
        done(0),
        json!({"type": "response.completed", "response": {"id": "r", "status": "completed", "output": []}}),
    ])
}

#[test]
fn parallel_calls_interleaved_by_output_index_come_out_whole_in_start_order() {
    let messages = sse(&interleaved(r#"{"x":"aaaa"}"#, r#"{"y":[1,2,3]}"#));
    let calls = messages[0].calls();
    assert_eq!(
        (calls[0].id.as_str(), &calls[0].arguments),
        ("call_a", &json!({"x": "aaaa"}))
    );
    assert_eq!(
        (calls[1].id.as_str(), &calls[1].arguments),
        ("call_b", &json!({"y": [1, 2, 3]}))
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_cutting_of_a_recorded_stream_lifts_to_the_same_events(
        sizes in proptest::collection::vec(1usize..64, 1..16),
        which in 0usize..6,
    ) {
        let mut bodies: Vec<Vec<u8>> = cassette(FANTASY).into_iter().map(|e| e.response.into_bytes()).collect();
        bodies.extend(streams(REASONING_STREAMS));
        let body = &bodies[which];
        let whole = events(body, &[body.len()]).unwrap();
        prop_assert_eq!(events(body, &sizes).unwrap(), whole);
    }
}

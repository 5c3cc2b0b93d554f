//! Parallel tool calls whose fragments interleave, as OpenAI Chat (fragments
//! keyed by `index`) and Anthropic (blocks keyed by `index`) allow: every call
//! is lifted whole with its exact arguments, however the fragments interleave
//! and however the body is cut, and over HTTP on loopback in both modes.

#![cfg(all(feature = "openai", feature = "anthropic"))]

use crate::common;

use common::interleaved::{Interleaved, alternating, interleaved};
use common::server::{Answer, Server};
use common::*;
use lmstack::provider::anthropic::{self, Anthropic, AnthropicConfig};
use lmstack::provider::body::{BodyDecoder, Lift};
use lmstack::provider::openai_chat::{self, OpenAi, OpenAiConfig};
use lmstack::provider::{ApiKey, TransportErrorKind};
use lmstack::{ChatRequest, Error, Event, FinishReason, Joiner, Message, ToolCall};
use proptest::prelude::*;
use serde_json::json;
use tower::ServiceExt;

/// The calls of lifted messages, which must be one `tool_calls` message.
fn calls_of(messages: &[Message]) -> Vec<ToolCall> {
    let calls: Vec<&Message> = messages.iter().filter(|m| !m.calls().is_empty()).collect();
    assert_eq!(calls.len(), 1, "one tool_calls message: {messages:?}");
    calls[0].calls().to_vec()
}

/// Lifted calls are the calls sent: the same ids, names and exact arguments,
/// none marked invalid, in the order they started.
fn assert_whole(lifted: &[ToolCall], sent: &Interleaved) {
    let lifted: Vec<_> = lifted
        .iter()
        .map(|c| {
            (
                c.id.as_str(),
                c.name.as_str(),
                &c.arguments,
                c.invalid.is_some(),
            )
        })
        .collect();
    let sent: Vec<_> = sent
        .calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), &c.arguments, false))
        .collect();
    assert_eq!(lifted, sent);
}

fn lifted<L: Lift>(decoder: BodyDecoder<L>, body: &[u8], sizes: &[usize]) -> Vec<Event> {
    decode_cut(decoder, body, sizes).unwrap()
}

/// Each call's deltas are contiguous: once a call's delta is followed by
/// another call's, that call has no more.
fn assert_contiguous(events: &[Event]) {
    let mut done = std::collections::HashSet::new();
    let mut current = None;
    for event in events {
        if let Event::ToolCallDelta(delta) = event {
            assert!(
                !done.contains(&delta.index),
                "call {} resumed: {events:?}",
                delta.index
            );
            if current != Some(delta.index) {
                done.extend(current);
                current = Some(delta.index);
            }
        }
    }
}

proptest! {
    #[test]
    fn openai_fragments_interleaved_by_index_lift_to_every_call_whole(
        sent in interleaved(),
        sizes in prop::collection::vec(1usize..64, 1..8),
    ) {
        let events = lifted(BodyDecoder::sse(openai_chat::Lifter::new()), &sent.openai_sse(), &sizes);
        assert_contiguous(&events);
        assert_eq!(events.last(), Some(&Event::finish(FinishReason::ToolCalls)));
        let messages = Joiner::join(events);
        assert_whole(&calls_of(&messages), &sent);
        let whole = lift_json(&sent.openai_json()).unwrap();
        prop_assert_eq!(messages, whole, "streamed and whole bodies agree");
    }

    #[test]
    fn anthropic_blocks_interleaved_by_index_lift_to_every_call_whole(
        sent in interleaved(),
        sizes in prop::collection::vec(1usize..64, 1..8),
    ) {
        let events = lifted(BodyDecoder::sse(anthropic::Lifter::new()), &sent.typed_sse(), &sizes);
        assert_contiguous(&events);
        assert_whole(&calls_of(&Joiner::join(events)), &sent);
    }
}

#[test]
fn the_fixed_examples_interleave() {
    for sent in alternating() {
        assert!(sent.interleaves(), "{sent:?}");
    }
}

/// Calls one after another are never held: each call's first delta comes out
/// with the chunk that starts it.
#[test]
fn calls_sent_one_after_another_stream_as_they_come() {
    let sent = Interleaved::new(&[json!({"a": 1}), json!({"b": 2})], &[3], &[0]);
    assert!(!sent.interleaves());
    let mut lifter = openai_chat::Lifter::new();
    let mut out = lmstack::service::Output::new();
    let body = String::from_utf8(sent.openai_sse()).unwrap();
    for data in body
        .split("\n\n")
        .filter_map(|frame| frame.strip_prefix("data: "))
    {
        if data == "[DONE]" {
            break;
        }
        let before = out.len();
        lifter.push_chunk(data.as_bytes(), &mut out).unwrap();
        if data.contains("tool_calls\":[") {
            assert_eq!(
                out.len(),
                before + 1,
                "the fragment of {data} is sent at once"
            );
        }
    }
}

#[test]
fn an_openai_fragment_for_a_call_already_whole_after_another_began_is_malformed() {
    let fragment = |index: u32, start: Option<&str>, arguments: &str| {
        let mut call = json!({"index": index, "function": {"arguments": arguments}});
        if let Some(id) = start {
            call["id"] = id.into();
            call["function"]["name"] = "f".into();
        }
        json!({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
    };
    let body = sse(&[
        fragment(0, Some("a"), "{\"a\":1}"),
        fragment(1, Some("b"), "{\"b\":"),
        fragment(0, None, " "), // whitespace after the whole arguments: nothing
        fragment(0, None, "{\"c\":3}"),
    ]);
    let result = lift_sse(&body);
    let Some(error) = result.as_ref().err().and_then(Error::transport_error) else {
        panic!("expected a malformed-stream error, got {result:?}");
    };
    assert_eq!(error.kind, TransportErrorKind::Malformed);
    assert!(error.to_string().contains("tool call 0"), "{error}");
}

fn request(stream: bool) -> ChatRequest {
    ChatRequest::new(vec![Message::user("Weather in Paris, Tokyo?")]).streaming(stream)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_loopback_cut_at_random_bytes_both_wires_both_modes_give_every_call_whole() {
    for (n, sent) in alternating().into_iter().enumerate() {
        for seed in 0..4u64 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let sizes: Vec<usize> = (0..32).map(|_| rng.usize(1..=48)).collect();
            let server = Server::start(vec![
                Answer::ok("text/event-stream", &sent.openai_sse(), &sizes),
                Answer::ok("application/json", &sent.openai_json(), &sizes),
                Answer::ok("text/event-stream", &sent.typed_sse(), &sizes),
            ])
            .await;
            let openai = OpenAi::new(OpenAiConfig::new(server.base_url()).model("m")).unwrap();
            let config = AnthropicConfig::new(server.base_url())
                .model("m")
                .api_key(ApiKey::new("sk-ant-test"));
            let anthropic = Anthropic::new(config).unwrap();
            for stream in [true, false] {
                let reply = openai.clone().oneshot(request(stream)).await.unwrap();
                let messages = reply.collect().await.unwrap();
                assert_whole(&calls_of(&messages), &sent);
                assert!(
                    messages.iter().any(|m| matches!(m, Message::Usage(_))),
                    "example {n}"
                );
            }
            let reply = anthropic.oneshot(request(true)).await.unwrap();
            assert_whole(&calls_of(&reply.collect().await.unwrap()), &sent);
        }
    }
}

//! `ScriptedModel` plays its script in both modes, cut as asked, and records requests.

#[path = "../common/regressions.rs"]
mod regressions;

use std::task::{Context, Poll};

use futures::Stream;
use lmstack::testing::{Chunking, ScriptedModel, stream_messages};
use lmstack::{
    ChatRequest, Event, FinishReason, Joiner, Message, Metadata, Role, ToolCall, ToolResult,
};
use proptest::prelude::*;
use serde_json::json;
use tower::ServiceExt;

fn request(stream: bool) -> ChatRequest {
    ChatRequest::new(vec![Message::user("hi")]).streaming(stream)
}

async fn events(model: &ScriptedModel, stream: bool) -> Vec<Event> {
    model
        .clone()
        .oneshot(request(stream))
        .await
        .unwrap()
        .collect_events()
        .await
        .unwrap()
}

#[tokio::test]
async fn text_is_cut_as_asked() {
    let text = "añb€";
    let cases: [(Chunking, &[&str]); 4] = [
        (Chunking::Bytes(1), &["a", "ñ", "b", "€"]),
        (Chunking::Bytes(3), &["añ", "b€"]),
        (Chunking::Chars, &["a", "ñ", "b", "€"]),
        (Chunking::Whole, &["añb€"]),
    ];
    for (chunking, pieces) in cases {
        let model = ScriptedModel::new().chunking(chunking).reply(text);
        let mut want: Vec<Event> = pieces.iter().map(|p| Event::text(*p)).collect();
        want.push(Event::finish(FinishReason::Stop));
        assert_eq!(events(&model, true).await, want, "{chunking:?}");
    }
}

#[test]
fn random_chunking_is_reproducible_and_bounded() {
    let text = "The quick brown fox jumps over the lazy dog";
    let chunking = Chunking::Random { seed: 42, max: 6 };
    let first = chunking.split(text);
    assert_eq!(first, chunking.split(text));
    assert_eq!(first.concat(), text);
    assert!(first.iter().all(|piece| (1..=6).contains(&piece.len())));
    assert!(first.len() >= text.len() / 6);
    assert_ne!(first, Chunking::Random { seed: 43, max: 6 }.split(text));
}

#[tokio::test]
async fn non_streaming_turns_are_complete_messages() {
    let model = ScriptedModel::new().reply("Hello");
    assert_eq!(
        events(&model, false).await,
        vec![
            Event::message(Message::assistant("Hello")),
            Event::finish(FinishReason::Stop)
        ]
    );
}

#[tokio::test]
async fn tool_call_turns_stream_like_a_provider_and_finish_with_tool_calls() {
    let call = ToolCall::new("c1", "add", json!({"a": 1}));
    let model = ScriptedModel::new()
        .chunking(Chunking::Bytes(4))
        .reply_messages(vec![Message::tool_calls(vec![call.clone()])]);
    assert_eq!(
        events(&model, true).await,
        vec![
            Event::call_start(0, "c1", "add"),
            Event::call_arguments(0, "{\"a\""),
            Event::call_arguments(0, ":1}"),
            Event::finish(FinishReason::ToolCalls),
        ]
    );
}

#[tokio::test]
async fn event_turns_are_joined_in_non_streaming_mode() {
    let script = vec![
        Event::text("a"),
        Event::text("b"),
        Event::finish(FinishReason::Length),
    ];
    let model = ScriptedModel::new()
        .reply_events(script.clone())
        .reply_events(script.clone());
    assert_eq!(events(&model, true).await, script);
    assert_eq!(
        events(&model, false).await,
        vec![
            Event::message(Message::assistant("ab")),
            Event::finish(FinishReason::Length)
        ]
    );
}

#[tokio::test]
async fn records_every_request_and_says_when_the_script_is_exhausted() {
    let model = ScriptedModel::new().reply("one");
    model.clone().oneshot(request(false)).await.unwrap();
    let error = model.clone().oneshot(request(true)).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "scripted model: request 2 has no scripted reply (the script had 1 turns)"
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert!(!requests[0].options.stream);
    assert!(requests[1].options.stream);
    assert_eq!(model.remaining(), 0);
}

#[tokio::test]
async fn failing_turns_fail_the_call() {
    let model = ScriptedModel::new().fail("rate limited");
    let error = model.oneshot(request(true)).await.unwrap_err();
    assert_eq!(error.to_string(), "scripted model: rate limited");
}

#[test]
fn streams_yield_pending_before_each_event_unless_told_not_to() {
    let poll_all = |model: ScriptedModel| {
        let mut reply = futures::executor::block_on(model.oneshot(request(true))).unwrap();
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let (mut pending, mut ready) = (0, 0);
        loop {
            match std::pin::Pin::new(&mut reply).poll_next(&mut cx) {
                Poll::Pending => pending += 1,
                Poll::Ready(Some(_)) => ready += 1,
                Poll::Ready(None) => break,
            }
        }
        (pending, ready)
    };
    let script = || {
        ScriptedModel::new()
            .chunking(Chunking::Bytes(1))
            .reply("abc")
    };
    assert_eq!(poll_all(script()), (4, 4));
    assert_eq!(poll_all(script().yielding(false)), (0, 4));
}

fn message() -> impl Strategy<Value = Message> {
    let text = "\\PC{0,30}";
    prop_oneof![
        text.prop_map(Message::assistant),
        text.prop_map(Message::user),
        (text, proptest::option::of("[a-z0-9]{1,8}")).prop_map(|(t, signature)| {
            let Message::Reasoning(mut reasoning) = Message::reasoning(t) else {
                unreachable!()
            };
            reasoning.signature = signature;
            Message::Reasoning(reasoning)
        }),
        prop::collection::vec(("[a-z]{1,6}", "\\PC{0,10}", any::<i32>()), 1..3).prop_map(|calls| {
            Message::tool_calls(
                calls
                    .into_iter()
                    .enumerate()
                    .map(|(i, (name, s, n))| {
                        ToolCall::new(format!("id{i}"), name, json!({"s": s, "n": n}))
                    })
                    .collect(),
            )
        }),
        (0u64..100, 0u64..100).prop_map(|(i, o)| Message::usage(i, o)),
        text.prop_map(|t| Message::tool_results(vec![ToolResult::text("id0", "f", t)])),
        text.prop_map(
            |t| Message::text(Role::Assistant, t).with_metadata(Metadata::generation("g"))
        ),
    ]
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::default()))]

    #[test]
    fn streamed_messages_join_back_to_themselves(
        messages in prop::collection::vec(message(), 0..6),
        seed in any::<u64>(),
        max in 1usize..8,
    ) {
        for chunking in [Chunking::Whole, Chunking::Bytes(1), Chunking::Random { seed, max }] {
            let events = stream_messages(messages.clone(), chunking);
            prop_assert_eq!(Joiner::join(events), messages.clone());
        }
    }
}

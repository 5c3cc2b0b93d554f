//! `ScriptedModel` plays its script in both modes, cut as asked, and records requests;
//! `assert_modes_agree` passes layers that keep the non-streaming contract and
//! catches those that break it.

#[path = "../common/regressions.rs"]
mod regressions;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};
use lmstack::testing::{Chunking, ScriptedModel, Turn, assert_modes_agree, stream_messages};
use lmstack::{
    ChatRequest, Event, FinishReason, Joiner, Message, Metadata, Reply, Role, ToolCall, ToolResult,
};
use proptest::prelude::*;
use serde_json::json;
use tower::util::MapResponseLayer;
use tower::{Layer, ServiceExt};

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

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::default()))]

    /// A model's reply with usage has one shape in both modes: the non-streaming
    /// events are the streamed ones joined, usage an `Event::Usage` in its place.
    #[test]
    fn a_scripted_reply_has_one_shape_in_both_modes(
        messages in prop::collection::vec(message(), 1..6),
    ) {
        let make = |chunking| ScriptedModel::new().chunking(chunking).reply_messages(messages.clone());
        let (agreed, error) = futures::executor::block_on(assert_modes_agree(make, request(false)));
        prop_assert!(error.is_none());
        prop_assert_eq!(agreed, messages.clone());
        let whole = futures::executor::block_on(events(&make(Chunking::Whole), false));
        let usages = messages.iter().filter(|m| matches!(m, Message::Usage(_))).count();
        prop_assert_eq!(whole.iter().filter(|e| matches!(e, Event::Usage(_))).count(), usages);
    }
}

#[tokio::test]
async fn usage_stays_a_usage_event_in_its_place_in_both_modes() {
    let usage = Message::usage(3, 5);
    let Message::Usage(counted) = usage.clone() else {
        unreachable!()
    };
    let messages = vec![Message::assistant("Hello"), usage];
    let model = ScriptedModel::new()
        .chunking(Chunking::Bytes(2))
        .reply_messages(messages.clone())
        .reply_messages(messages);
    let streamed = events(&model, true).await;
    assert_eq!(
        &streamed[3..],
        [
            Event::Usage(counted.clone()),
            Event::finish(FinishReason::Stop)
        ]
    );
    assert_eq!(
        events(&model, false).await,
        vec![
            Event::message(Message::assistant("Hello")),
            Event::Usage(counted),
            Event::finish(FinishReason::Stop)
        ]
    );
}

#[tokio::test]
async fn a_broken_turn_is_joined_before_its_error_in_non_streaming_mode() {
    let model = ScriptedModel::new().turn(Turn::Break(
        vec![Event::text("a"), Event::text("b")],
        "cut".into(),
    ));
    let reply = model.oneshot(request(false)).await.unwrap();
    assert!(reply.is_ready());
    let items: Vec<_> = StreamExt::collect(reply).await;
    assert!(
        matches!(&items[..], [Ok(Event::Message { .. }), Err(_)]),
        "{items:?}"
    );
}

/// A model of one reply with text and usage, cut by `chunking`.
fn model_with_usage(chunking: Chunking) -> ScriptedModel {
    ScriptedModel::new().chunking(chunking).reply_messages(vec![
        Message::assistant("Hello there"),
        Message::usage(2, 4),
    ])
}

#[tokio::test]
async fn layers_that_keep_the_form_agree_in_both_modes() {
    let tokens = Arc::new(AtomicU64::new(0));
    let counted = tokens.clone();
    let layer = MapResponseLayer::new(move |reply: Reply| {
        let counted = counted.clone();
        reply.inspect(move |event| {
            if let Event::Usage(usage) = event {
                counted.fetch_add(usage.output_tokens, Ordering::Relaxed);
            }
        })
    });
    let (messages, error) = assert_modes_agree(
        |chunking| layer.layer(model_with_usage(chunking)),
        request(false),
    )
    .await;
    assert!(error.is_none());
    assert_eq!(
        messages,
        vec![Message::assistant("Hello there"), Message::usage(2, 4)]
    );
    // One non-streaming run and five streamed ones, 4 tokens each.
    assert_eq!(tokens.load(Ordering::Relaxed), 6 * 4);
}

#[tokio::test]
async fn errors_agree_when_both_modes_fail_alike() {
    let make = |_| ScriptedModel::new().fail("down");
    let (messages, error) = assert_modes_agree(make, request(false)).await;
    assert!(messages.is_empty());
    assert_eq!(error.unwrap().to_string(), "scripted model: down");
}

#[tokio::test]
#[should_panic(expected = "the non-streaming reply is not ready")]
async fn a_layer_that_streams_a_non_streaming_reply_is_caught() {
    let naive = MapResponseLayer::new(|reply: Reply| Reply::from_stream(reply));
    assert_modes_agree(
        |chunking| naive.layer(model_with_usage(chunking)),
        request(false),
    )
    .await;
}

#[tokio::test]
#[should_panic(expected = "the non-streaming reply's events differ")]
async fn a_layer_that_rewrites_only_deltas_is_caught() {
    let deltas_only = MapResponseLayer::new(|reply: Reply| {
        reply.map_events(|event| match event {
            Event::TextDelta(mut delta) => {
                delta.text = delta.text.to_uppercase();
                Event::TextDelta(delta)
            }
            other => other,
        })
    });
    assert_modes_agree(
        |chunking| deltas_only.layer(model_with_usage(chunking)),
        request(false),
    )
    .await;
}

#[tokio::test]
#[should_panic(expected = "the modes end differently")]
async fn a_layer_that_fails_only_one_mode_is_caught() {
    let picky =
        tower::service_fn(|request: ChatRequest| async move {
            let model = ScriptedModel::new().reply("hi");
            let reply = model.oneshot(request.clone()).await?;
            Ok::<_, lmstack::Error>(if request.options.stream {
                Reply::from_stream(reply.chain(futures::stream::iter([Err(
                    lmstack::Error::stage("picky", "no"),
                )])))
            } else {
                reply
            })
        });
    assert_modes_agree(|_| picky, request(false)).await;
}

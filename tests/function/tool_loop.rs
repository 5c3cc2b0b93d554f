//! The tool loop: rounds until the model answers, the bound and its policies, one
//! stream across rounds, and tower's readiness contract.

#![cfg(feature = "function")]

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use futures::StreamExt;
use lmstack::function::{FunctionCallLayer, OnLimit, Tool, ToolLoopLayer, ToolRegistry};
use lmstack::testing::{Chunking, ScriptedModel, assert_modes_agree, collect_both};
use lmstack::{
    ChatRequest, Error, Event, FinishReason, Message, Reply, ToolCall, ToolChoice, ToolResult,
    ToolSpec,
};
use proptest::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tower::{Service, ServiceBuilder, ServiceExt};

#[derive(Deserialize, JsonSchema)]
struct Add {
    a: i64,
    b: i64,
}

fn add_tool() -> Tool {
    Tool::typed("add", "Adds two integers", |args: Add| async move {
        Ok::<_, Infallible>((args.a + args.b).to_string())
    })
}

fn add(id: &str, a: i64, b: i64) -> ToolCall {
    ToolCall::new(id, "add", json!({"a": a, "b": b}))
}

fn stack<S>(
    layer: ToolLoopLayer,
    model: S,
) -> impl Service<ChatRequest, Response = Reply, Error = Error> + Clone
where
    S: Service<ChatRequest, Response = Reply, Error = Error> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    ServiceBuilder::new()
        .layer(layer)
        .layer(FunctionCallLayer::new(
            ToolRegistry::new([add_tool()]).unwrap(),
        ))
        .service(model)
}

fn request(stream: bool) -> ChatRequest {
    ChatRequest::new(vec![Message::user("What is 1 + 2, then + 3?")]).streaming(stream)
}

#[tokio::test]
async fn the_loop_feeds_results_back_until_the_model_answers() {
    for stream in [false, true] {
        let model = ScriptedModel::new()
            .reply_messages(vec![
                Message::assistant("First 1 + 2."),
                Message::tool_calls(vec![add("c1", 1, 2)]),
                Message::usage(10, 5),
            ])
            .reply_messages(vec![Message::tool_calls(vec![add("c2", 3, 3)])])
            .reply("1 + 2 + 3 = 6.");
        let messages = stack(ToolLoopLayer::new(), model.clone())
            .oneshot(request(stream))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let first = Message::tool_aggregate(
            vec![add("c1", 1, 2)],
            vec![ToolResult::text("c1", "add", "3")],
        );
        let second = Message::tool_aggregate(
            vec![add("c2", 3, 3)],
            vec![ToolResult::text("c2", "add", "6")],
        );
        assert_eq!(
            messages,
            vec![
                Message::assistant("First 1 + 2."),
                first.clone(),
                Message::usage(10, 5),
                second.clone(),
                Message::assistant("1 + 2 + 3 = 6."),
            ],
            "stream: {stream}"
        );
        let requests = model.requests();
        assert_eq!(requests.len(), 3);
        let user = Message::user("What is 1 + 2, then + 3?");
        // Each round's request is the original plus the new messages, usage left out.
        assert_eq!(
            requests[1].messages,
            vec![
                user.clone(),
                Message::assistant("First 1 + 2."),
                first.clone()
            ]
        );
        assert_eq!(
            requests[2].messages,
            vec![user, Message::assistant("First 1 + 2."), first, second]
        );
        assert!(requests.iter().all(|r| r.options.stream == stream));
        assert!(requests.iter().all(|r| r.options.tools[0].name == "add"));
    }
}

/// A model that calls `add` in every round.
fn insistent_model(rounds: usize) -> ScriptedModel {
    (0..rounds).fold(ScriptedModel::new(), |model, i| {
        model.reply_messages(vec![Message::tool_calls(vec![add(&format!("c{i}"), 1, 1)])])
    })
}

#[tokio::test]
async fn past_the_bound_the_loop_ends_with_a_typed_error_after_every_round() {
    // Both modes: every round's messages (the tools ran), then the error.
    for stream in [false, true] {
        let model = insistent_model(10);
        let reply = stack(ToolLoopLayer::new().max_iterations(3), model.clone())
            .oneshot(request(stream))
            .await
            .unwrap();
        let (messages, error) = reply.collect_partial().await;
        let aggregates = messages
            .iter()
            .filter(|m| matches!(m, Message::ToolAggregate(_)))
            .count();
        assert_eq!(aggregates, 3, "stream: {stream}");
        assert!(
            matches!(error, Some(Error::ToolLoopLimit { max_iterations: 3 })),
            "{error:?}"
        );
        assert_eq!(model.requests().len(), 3);
    }
}

#[tokio::test]
async fn the_default_bound_is_ten_model_calls() {
    let model = insistent_model(20);
    let reply = stack(ToolLoopLayer::new(), model.clone())
        .oneshot(request(false))
        .await
        .unwrap();
    let error = reply.collect().await.unwrap_err();
    assert!(matches!(error, Error::ToolLoopLimit { max_iterations: 10 }));
    assert_eq!(model.requests().len(), 10);
}

#[tokio::test]
async fn past_the_bound_a_final_message_may_end_the_loop() {
    let model = insistent_model(10);
    let layer = ToolLoopLayer::new()
        .max_iterations(2)
        .on_limit(OnLimit::Message(
            "I stopped after two rounds of tools.".into(),
        ));
    let messages = stack(layer, model.clone())
        .oneshot(request(true))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(
        messages[2],
        Message::assistant("I stopped after two rounds of tools.")
    );
    assert_eq!(model.requests().len(), 2);
}

#[tokio::test]
async fn past_the_bound_the_model_may_answer_once_without_tools() {
    let model = insistent_model(2).reply("Enough: 2.");
    let layer = ToolLoopLayer::new()
        .max_iterations(2)
        .on_limit(OnLimit::FinalAnswer);
    let messages = stack(layer, model.clone())
        .oneshot(request(false))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(messages.last(), Some(&Message::assistant("Enough: 2.")));
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[1].options.tool_choice, None);
    assert_eq!(requests[2].options.tool_choice, Some(ToolChoice::None));
    assert_eq!(
        requests[2].messages.len(),
        3,
        "the results so far went along"
    );
}

#[tokio::test]
async fn calls_left_for_the_caller_end_the_loop() {
    let model = ScriptedModel::new()
        .reply_messages(vec![Message::tool_calls(vec![
            add("c1", 1, 2),
            ToolCall::new("c2", "ask_user", json!({"question": "go on?"})),
        ])])
        .reply("never played");
    let request = request(true).tool(ToolSpec::new(
        "ask_user",
        "Asks the user",
        json!({"type": "object"}),
    ));
    let messages = stack(ToolLoopLayer::new(), model.clone())
        .oneshot(request)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(model.requests().len(), 1);
    assert_eq!(messages[0].calls()[0].name, "ask_user");
    assert!(matches!(messages[1], Message::ToolAggregate(_)));
}

#[tokio::test]
async fn a_failing_round_ends_the_stream_with_its_error() {
    let model = ScriptedModel::new()
        .reply_messages(vec![Message::tool_calls(vec![add("c1", 1, 2)])])
        .fail("overloaded");
    let reply = stack(ToolLoopLayer::new(), model.clone())
        .oneshot(request(true))
        .await
        .unwrap();
    let items: Vec<Result<Event, Error>> = StreamExt::collect(reply).await;
    assert_eq!(
        items.last().unwrap().as_ref().unwrap_err().to_string(),
        "scripted model: overloaded"
    );
    // The first round's failure comes from the call itself.
    let error = stack(ToolLoopLayer::new(), ScriptedModel::new().fail("down"))
        .oneshot(request(true))
        .await
        .unwrap_err();
    assert_eq!(error.to_string(), "scripted model: down");
}

#[tokio::test]
async fn rounds_without_a_finish_do_not_run_into_each_other() {
    // Round one ends with text and no `finish`; round two starts with text.
    let model = || {
        ScriptedModel::new()
            .chunking(Chunking::Bytes(2))
            .reply_events(vec![
                Event::call_start(0, "c1", "add"),
                Event::call_arguments(0, r#"{"a":1,"b":2}"#),
                Event::text("Checking"),
            ])
            .reply_events(vec![Event::text("Done.")])
    };
    let (whole, streamed) = collect_both(|| stack(ToolLoopLayer::new(), model()), request(false))
        .await
        .unwrap();
    assert_eq!(whole, streamed);
    assert_eq!(whole[1], Message::assistant("Checking"));
    assert_eq!(whole[2], Message::assistant("Done."));

    let events = stack(ToolLoopLayer::new(), model())
        .oneshot(request(true))
        .await
        .unwrap()
        .collect_events()
        .await
        .unwrap();
    assert!(events.contains(&Event::finish(FinishReason::ToolCalls)));
}

/// A service that fails a call that was not preceded by `poll_ready` on the same
/// instance, as tower requires (clones start not ready).
struct Strict<S> {
    inner: S,
    ready: bool,
    calls: Arc<AtomicUsize>,
}

impl<S: Clone> Clone for Strict<S> {
    fn clone(&self) -> Self {
        Strict {
            inner: self.inner.clone(),
            ready: false,
            calls: self.calls.clone(),
        }
    }
}

impl<S: Service<ChatRequest, Response = Reply, Error = Error>> Service<ChatRequest> for Strict<S> {
    type Response = Reply;
    type Error = Error;
    type Future = futures::future::Either<S::Future, futures::future::Ready<Result<Reply, Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        let ready = self.inner.poll_ready(cx);
        self.ready = ready.is_ready();
        ready
    }

    fn call(&mut self, request: ChatRequest) -> Self::Future {
        if !std::mem::take(&mut self.ready) {
            return futures::future::Either::Right(futures::future::ready(Err(Error::stage(
                "strict",
                "called before poll_ready",
            ))));
        }
        self.calls.fetch_add(1, Ordering::SeqCst);
        futures::future::Either::Left(self.inner.call(request))
    }
}

#[tokio::test]
async fn the_inner_service_is_readied_before_every_round() {
    let calls = Arc::new(AtomicUsize::new(0));
    let model = Strict {
        inner: ScriptedModel::new()
            .reply_messages(vec![Message::tool_calls(vec![add("c1", 1, 2)])])
            .reply_messages(vec![Message::tool_calls(vec![add("c2", 3, 3)])])
            .reply("6"),
        ready: false,
        calls: calls.clone(),
    };
    let mut service = stack(ToolLoopLayer::new(), model);
    let reply = service
        .ready()
        .await
        .unwrap()
        .call(request(true))
        .await
        .unwrap();
    let messages = reply.collect().await.unwrap();
    assert_eq!(messages.last(), Some(&Message::assistant("6")));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

fn chunking() -> impl Strategy<Value = Chunking> {
    prop_oneof![
        Just(Chunking::Whole),
        Just(Chunking::Bytes(1)),
        (any::<u64>(), 1usize..12).prop_map(|(seed, max)| Chunking::Random { seed, max }),
    ]
}

/// A conversation of 1 to 4 rounds: each round some text, a run of calls and its
/// usage, the last round text and usage only.
fn script() -> impl Strategy<Value = Vec<Vec<Message>>> {
    let round = (
        "[a-zA-Z ,.]{0,20}",
        proptest::collection::vec((-50i64..50, -50i64..50), 1..3),
        0u64..100,
    )
        .prop_map(|(text, sums, tokens)| {
            let mut messages = Vec::new();
            if !text.is_empty() {
                messages.push(Message::assistant(text));
            }
            let calls = sums
                .into_iter()
                .enumerate()
                .map(|(i, (a, b))| add(&format!("call_{i}"), a, b))
                .collect();
            messages.push(Message::tool_calls(calls));
            messages.push(Message::usage(tokens, tokens + 1));
            messages
        });
    (proptest::collection::vec(round, 0..4), "[a-zA-Z ,.]{1,20}").prop_map(|(mut rounds, last)| {
        rounds.push(vec![Message::assistant(last), Message::usage(3, 4)]);
        rounds
    })
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(48)))]

    #[test]
    fn streaming_across_rounds_equals_non_streaming(script in script(), chunking in chunking()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let rounds = script.len();
        let (whole, streamed) = runtime.block_on(async {
            let make = || {
                let model = script.iter().fold(ScriptedModel::new().chunking(chunking), |model, round| {
                    model.reply_messages(round.clone())
                });
                stack(ToolLoopLayer::new(), model)
            };
            collect_both(make, request(false)).await.unwrap()
        });
        prop_assert_eq!(&whole, &streamed);
        let aggregates = whole.iter().filter(|m| matches!(m, Message::ToolAggregate(_))).count();
        prop_assert_eq!(aggregates, rounds - 1);
        let expected: Vec<Message> = script.into_iter().flatten().map(|message| match message {
            Message::ToolCalls(calls) => {
                let results = calls.calls.iter().map(|call| {
                    let sum = call.arguments["a"].as_i64().unwrap() + call.arguments["b"].as_i64().unwrap();
                    ToolResult::text(&call.id, "add", sum.to_string())
                }).collect();
                Message::tool_aggregate(calls.calls, results)
            }
            other => other,
        }).collect();
        prop_assert_eq!(whole, expected);
    }

    /// A tool loop's reply has one shape in both modes: each round's messages, its
    /// usage and its finish, in order (the non-streaming events are the streamed
    /// ones joined, for every cut `assert_modes_agree` tries).
    #[test]
    fn both_modes_have_one_event_shape_across_rounds(script in script()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let make = |chunking| {
            let model = script.iter().fold(ScriptedModel::new().chunking(chunking), |model, round| {
                model.reply_messages(round.clone())
            });
            stack(ToolLoopLayer::new(), model)
        };
        let (_, error) = runtime.block_on(assert_modes_agree(make, request(false)));
        prop_assert!(error.is_none());
        let events = runtime.block_on(async {
            make(Chunking::Whole).oneshot(request(false)).await.unwrap().collect_events().await.unwrap()
        });
        let last = script.len() - 1;
        let expected: Vec<Event> = script.into_iter().enumerate().flat_map(|(round, messages)| {
            let finish = if round == last { FinishReason::Stop } else { FinishReason::ToolCalls };
            messages.into_iter().map(|message| match message {
                Message::Usage(usage) => Event::Usage(usage),
                Message::ToolCalls(calls) => {
                    let results = calls.calls.iter().map(|call| {
                        let sum = call.arguments["a"].as_i64().unwrap() + call.arguments["b"].as_i64().unwrap();
                        ToolResult::text(&call.id, "add", sum.to_string())
                    }).collect();
                    Event::message(Message::tool_aggregate(calls.calls, results))
                }
                other => Event::message(other),
            }).chain([Event::finish(finish)]).collect::<Vec<_>>()
        }).collect();
        prop_assert_eq!(events, expected);
    }
}

//! The function layer: running calls concurrently and in order, time limits,
//! cancellation, and every way a call can fail becoming an error result.

#![cfg(feature = "function")]

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc;
use lmstack::function::{FunctionCallLayer, Tool, ToolRegistry};
use lmstack::testing::{Chunking, ScriptedModel, Turn, collect_both};
use lmstack::{
    ChatRequest, Error, Event, InvalidCall, InvalidCallKind, Message, Reply, ToolCall, ToolResult,
    ToolSpec,
};
use proptest::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::time::Instant;
use tower::{Layer, ServiceExt};

#[derive(Deserialize, JsonSchema)]
struct Nap {
    /// How long to sleep, in milliseconds.
    ms: u64,
    /// What to answer.
    #[serde(default)]
    say: String,
}

/// Sleeps for `ms` and answers `say`; records the order in which calls finish.
fn nap_tool(finished: Arc<Mutex<Vec<String>>>) -> Tool {
    Tool::typed("nap", "Sleeps", move |args: Nap| {
        let finished = finished.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(args.ms)).await;
            finished.lock().unwrap().push(args.say.clone());
            Ok::<_, Infallible>(args.say)
        }
    })
}

fn nap(id: &str, ms: u64, say: &str) -> ToolCall {
    ToolCall::new(id, "nap", json!({"ms": ms, "say": say}))
}

fn request(stream: bool) -> ChatRequest {
    ChatRequest::new(vec![Message::user("go")]).streaming(stream)
}

fn registry(tools: impl IntoIterator<Item = Tool>) -> ToolRegistry {
    ToolRegistry::new(tools).unwrap()
}

/// Runs one request through `FunctionCall` over a model that replies with `calls`.
async fn run_calls(layer: FunctionCallLayer, calls: Vec<ToolCall>, stream: bool) -> Vec<Message> {
    let model = ScriptedModel::new().reply_messages(vec![Message::tool_calls(calls)]);
    layer
        .layer(model)
        .oneshot(request(stream))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap()
}

fn only_results(messages: &[Message]) -> &[ToolResult] {
    let aggregates: Vec<_> = messages
        .iter()
        .filter(|m| matches!(m, Message::ToolAggregate(_)))
        .collect();
    assert_eq!(aggregates.len(), 1, "one aggregate expected: {messages:?}");
    aggregates[0].results()
}

#[tokio::test(start_paused = true)]
async fn two_slow_tools_finish_in_about_the_time_of_one() {
    for stream in [false, true] {
        let layer = FunctionCallLayer::new(registry([nap_tool(Arc::default())]));
        let start = Instant::now();
        let messages = run_calls(
            layer,
            vec![nap("a", 1000, "one"), nap("b", 1000, "two")],
            stream,
        )
        .await;
        let elapsed = start.elapsed();
        assert_eq!(only_results(&messages).len(), 2);
        assert!(
            elapsed >= Duration::from_millis(1000) && elapsed < Duration::from_millis(1500),
            "two 1 s tools took {elapsed:?} (stream: {stream})"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_concurrency_limit_holds_calls_back() {
    let layer = FunctionCallLayer::new(registry([nap_tool(Arc::default())])).concurrency(1);
    let start = Instant::now();
    run_calls(
        layer,
        vec![nap("a", 1000, "one"), nap("b", 1000, "two")],
        true,
    )
    .await;
    assert!(
        start.elapsed() >= Duration::from_millis(2000),
        "one at a time: {:?}",
        start.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn results_keep_the_call_order_when_later_calls_finish_first() {
    let finished = Arc::new(Mutex::new(Vec::new()));
    let layer = FunctionCallLayer::new(registry([nap_tool(finished.clone())]));
    let calls = vec![
        nap("c1", 300, "first"),
        nap("c2", 100, "second"),
        nap("c3", 200, "third"),
    ];
    let messages = run_calls(layer, calls.clone(), true).await;
    assert_eq!(*finished.lock().unwrap(), ["second", "third", "first"]);
    let Message::ToolAggregate(aggregate) = &messages[0] else {
        panic!("expected an aggregate: {messages:?}");
    };
    assert_eq!(aggregate.calls, calls);
    let answers: Vec<_> = aggregate
        .results
        .iter()
        .map(|r| (r.call_id.as_str(), r.text_content()))
        .collect();
    assert_eq!(
        answers,
        [
            ("c1", "first".to_owned()),
            ("c2", "second".to_owned()),
            ("c3", "third".to_owned())
        ]
    );
}

/// Feeds a model's reply by hand.
type Feed = mpsc::UnboundedSender<Result<Event, Error>>;

/// A model whose reply stream the test feeds by hand.
fn hand_fed_model() -> (
    Feed,
    impl tower::Service<ChatRequest, Response = Reply, Error = Error, Future: Send + 'static>,
) {
    let (sender, receiver) = mpsc::unbounded();
    let receiver = Mutex::new(Some(receiver));
    let model = tower::service_fn(move |_request: ChatRequest| {
        let receiver = receiver.lock().unwrap().take().expect("one request");
        futures::future::ready(Ok(Reply::from_stream(receiver)))
    });
    (sender, model)
}

#[tokio::test]
async fn in_streaming_mode_a_call_starts_as_soon_as_it_is_complete() {
    let started = Arc::new(Notify::new());
    let tool = {
        let started = started.clone();
        Tool::dynamic("ping", "", json!({"type": "object"}), move |_| {
            let started = started.clone();
            async move {
                started.notify_one();
                Ok::<_, Infallible>("pong")
            }
        })
    };
    let (sender, model) = hand_fed_model();
    let service = FunctionCallLayer::new(registry([tool])).layer(model);
    let reply = service.oneshot(request(true)).await.unwrap();
    let consumer = tokio::spawn(reply.collect());

    sender
        .unbounded_send(Ok(Event::call_start(0, "c1", "ping")))
        .unwrap();
    sender
        .unbounded_send(Ok(Event::call_arguments(0, "{}")))
        .unwrap();
    // The second call begins: the first is complete and must start now, while the
    // reply is still open.
    sender
        .unbounded_send(Ok(Event::call_start(1, "c2", "ping")))
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), started.notified())
        .await
        .expect("the first call ran before the reply ended");

    sender
        .unbounded_send(Ok(Event::call_arguments(1, "{}")))
        .unwrap();
    drop(sender);
    let messages = consumer.await.unwrap().unwrap();
    assert_eq!(only_results(&messages).len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_call_over_its_time_limit_gets_an_error_result() {
    let cancelled = Arc::new(AtomicUsize::new(0));
    let slow = Tool::dynamic("slow", "", json!({"type": "object"}), {
        let cancelled = cancelled.clone();
        move |_| {
            let guard = DropFlag(cancelled.clone(), true);
            async move {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                guard.disarm();
                Ok::<_, Infallible>("late")
            }
        }
    });
    let fast_limit = Tool::dynamic("strict", "", json!({"type": "object"}), |_| async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        Ok::<_, Infallible>("late")
    })
    .timeout(Duration::from_secs(1));
    let layer =
        FunctionCallLayer::new(registry([slow, fast_limit])).timeout(Duration::from_secs(5));
    let start = Instant::now();
    let messages = run_calls(
        layer,
        vec![
            ToolCall::new("c1", "slow", json!({})),
            ToolCall::new("c2", "strict", json!({})),
        ],
        false,
    )
    .await;
    let results = only_results(&messages);
    assert!(results.iter().all(|r| r.is_error), "{results:?}");
    assert_eq!(
        results[0].text_content(),
        "The tool `slow` did not finish within 5s and was stopped."
    );
    assert_eq!(
        results[1].text_content(),
        "The tool `strict` did not finish within 1s and was stopped."
    );
    assert!(start.elapsed() < Duration::from_secs(6));
    assert_eq!(
        cancelled.load(Ordering::SeqCst),
        1,
        "the timed-out tool was dropped"
    );
}

/// Counts up when dropped while armed: how a tool observes cancellation.
struct DropFlag(Arc<AtomicUsize>, bool);

impl DropFlag {
    fn disarm(mut self) {
        self.1 = false;
    }
}

impl Drop for DropFlag {
    fn drop(&mut self) {
        if self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A tool that runs until dropped: it signals `started` once running, then on
/// its drop counts `cancelled` up and signals `dropped`.
fn forever_tool(
    started: &Arc<Notify>,
    cancelled: &Arc<AtomicUsize>,
    dropped: &Arc<Notify>,
) -> Tool {
    let (started, cancelled, dropped) = (started.clone(), cancelled.clone(), dropped.clone());
    Tool::dynamic("forever", "", json!({"type": "object"}), move |_| {
        let (started, cancelled, dropped) = (started.clone(), cancelled.clone(), dropped.clone());
        async move {
            let _guard = NotifyOnDrop { cancelled, dropped };
            started.notify_one();
            futures::future::pending::<()>().await;
            Ok::<_, Infallible>("never")
        }
    })
}

/// A function layer whose model calls `forever_tool` once.
fn calls_forever(
    started: &Arc<Notify>,
    cancelled: &Arc<AtomicUsize>,
    dropped: &Arc<Notify>,
) -> impl tower::Service<ChatRequest, Response = Reply, Error = Error> {
    let model =
        ScriptedModel::new().reply_messages(vec![Message::tool_calls(vec![ToolCall::new(
            "c1",
            "forever",
            json!({}),
        )])]);
    FunctionCallLayer::new(registry([forever_tool(started, cancelled, dropped)])).layer(model)
}

#[tokio::test]
async fn dropping_the_reply_cancels_running_tools() {
    let (started, cancelled, dropped) = Default::default();
    let service = calls_forever(&started, &cancelled, &dropped);
    let mut reply = service.oneshot(request(true)).await.unwrap();
    tokio::select! {
        item = reply.next() => panic!("the reply cannot end while its tool runs: {item:?}"),
        () = started.notified() => {}
    }
    assert_eq!(cancelled.load(Ordering::SeqCst), 0);
    drop(reply);
    tokio::time::timeout(Duration::from_secs(10), dropped.notified())
        .await
        .expect("the tool's future was dropped");
    assert_eq!(cancelled.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn dropping_a_non_streaming_call_cancels_running_tools() {
    let (started, cancelled, dropped) = Default::default();
    let service = calls_forever(&started, &cancelled, &dropped);
    let mut call = Box::pin(service.oneshot(request(false)));
    tokio::select! {
        outcome = &mut call => panic!("the call cannot end while its tool runs: {:?}", outcome.map(|r| r.is_ready())),
        () = started.notified() => {}
    }
    assert_eq!(cancelled.load(Ordering::SeqCst), 0);
    drop(call);
    tokio::time::timeout(Duration::from_secs(10), dropped.notified())
        .await
        .expect("the tool's future was dropped");
    assert_eq!(cancelled.load(Ordering::SeqCst), 1);
}

/// Counts and signals its drop.
struct NotifyOnDrop {
    cancelled: Arc<AtomicUsize>,
    dropped: Arc<Notify>,
}

impl Drop for NotifyOnDrop {
    fn drop(&mut self) {
        self.cancelled.fetch_add(1, Ordering::SeqCst);
        self.dropped.notify_one();
    }
}

#[tokio::test]
async fn a_panicking_tool_gives_an_error_result_and_the_others_still_answer() {
    let boom = Tool::dynamic("boom", "", json!({"type": "object"}), |_| async {
        if true {
            panic!("the disk caught fire");
        }
        Ok::<_, Infallible>("unreachable")
    });
    let fine = Tool::dynamic("fine", "", json!({"type": "object"}), |_| async {
        Ok::<_, Infallible>("all good")
    });
    let messages = run_calls(
        FunctionCallLayer::new(registry([boom, fine])),
        vec![
            ToolCall::new("c1", "boom", json!({})),
            ToolCall::new("c2", "fine", json!({})),
        ],
        true,
    )
    .await;
    let results = only_results(&messages);
    assert!(results[0].is_error);
    assert_eq!(
        results[0].text_content(),
        "The tool `boom` failed unexpectedly."
    );
    assert!(!results[1].is_error);
    assert_eq!(results[1].text_content(), "all good");
}

#[tokio::test]
async fn a_tool_error_becomes_an_error_result_with_its_causes() {
    let failing = Tool::dynamic("save", "", json!({"type": "object"}), |_| async {
        let cause = std::io::Error::other("disk full");
        Err::<String, _>(Box::new(SaveError(cause)) as lmstack::BoxError)
    });
    let messages = run_calls(
        FunctionCallLayer::new(registry([failing])),
        vec![ToolCall::new("c1", "save", json!({}))],
        false,
    )
    .await;
    let result = &only_results(&messages)[0];
    assert!(result.is_error);
    assert_eq!(
        result.text_content(),
        "The tool `save` failed: cannot save the file: disk full"
    );
}

#[derive(Debug, thiserror::Error)]
#[error("cannot save the file")]
struct SaveError(#[source] std::io::Error);

fn counting_tool(name: &'static str, runs: Arc<AtomicUsize>) -> Tool {
    Tool::typed(name, "Adds", move |args: Add| {
        runs.fetch_add(1, Ordering::SeqCst);
        async move { Ok::<_, Infallible>((args.a + args.b).to_string()) }
    })
}

#[derive(Deserialize, JsonSchema)]
struct Add {
    a: i64,
    b: i64,
}

#[tokio::test]
async fn an_unknown_tool_gets_an_error_result_listing_the_available_tools() {
    let runs = Arc::new(AtomicUsize::new(0));
    let layer = FunctionCallLayer::new(registry([
        counting_tool("add", runs.clone()),
        counting_tool("sum", runs.clone()),
    ]));
    let messages = run_calls(
        layer,
        vec![ToolCall::new("c1", "multiply", json!({"a": 2}))],
        true,
    )
    .await;
    let result = &only_results(&messages)[0];
    assert!(result.is_error);
    assert_eq!(
        result.text_content(),
        "Unknown tool `multiply`. Available tools: `add`, `sum`."
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn under_pass_through_an_unknown_tool_goes_to_the_caller_and_the_known_ones_run() {
    for streaming in [false, true] {
        let runs = Arc::new(AtomicUsize::new(0));
        let layer = FunctionCallLayer::new(registry([counting_tool("add", runs.clone())]))
            .unknown_tools(lmstack::function::UnknownTools::PassThrough);
        let multiply = ToolCall::new("c1", "multiply", json!({"a": 2}));
        let messages = run_calls(
            layer,
            vec![
                multiply.clone(),
                ToolCall::new("c2", "add", json!({"a": 2, "b": 3})),
            ],
            streaming,
        )
        .await;
        // The caller's call comes first, as a calls message; the run's aggregate
        // holds the call the layer ran.
        let passed: Vec<&Message> = messages
            .iter()
            .filter(|m| matches!(m, Message::ToolCalls(_)))
            .collect();
        assert_eq!(passed.len(), 1, "{messages:?}");
        assert_eq!(passed[0].calls(), std::slice::from_ref(&multiply));
        let results = only_results(&messages);
        assert_eq!(results.len(), 1);
        assert_eq!(
            (results[0].call_id.as_str(), results[0].is_error),
            ("c2", false)
        );
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }
}

#[tokio::test]
async fn arguments_that_fail_the_schema_get_an_error_result_quoting_the_schema() {
    let runs = Arc::new(AtomicUsize::new(0));
    let tool = counting_tool("add", runs.clone());
    let schema = tool.spec().parameters.to_string();
    let messages = run_calls(
        FunctionCallLayer::new(registry([tool])),
        vec![ToolCall::new("c1", "add", json!({"a": "two", "b": 3}))],
        false,
    )
    .await;
    let result = &only_results(&messages)[0];
    assert!(result.is_error);
    let text = result.text_content();
    assert!(
        text.starts_with(
            "The arguments of `add` do not match its schema: at `/a`: \"two\" is not of type \"integer\"."
        ),
        "{text}"
    );
    assert!(
        text.ends_with(&format!(
            "Call `add` again with arguments that match its JSON Schema:\n{schema}"
        )),
        "{text}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the tool did not run");
}

#[tokio::test]
async fn calls_marked_invalid_are_answered_not_run() {
    let runs = Arc::new(AtomicUsize::new(0));
    let tool = counting_tool("add", runs.clone());
    let schema = tool.spec().parameters.to_string();
    let layer = FunctionCallLayer::new(registry([tool]));
    // Malformed arguments, streamed: the joiner marks the call.
    let model = ScriptedModel::new().reply_events(vec![
        Event::call_start(0, "c1", "add"),
        Event::call_arguments(0, "{\"a\": 1,"),
    ]);
    let messages = layer
        .clone()
        .layer(model)
        .oneshot(request(true))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let result = &only_results(&messages)[0];
    assert!(result.is_error);
    let text = result.text_content();
    assert!(
        text.starts_with("The arguments are not valid JSON: "),
        "{text}"
    );
    assert!(text.ends_with(&schema), "{text}");

    // A truncated call, marked by a parser.
    let mut truncated = ToolCall::new("c2", "add", Value::Null);
    truncated.invalid = Some(InvalidCall {
        kind: InvalidCallKind::Truncated,
        message: "the reply ended inside the call".into(),
        raw: Some("<tool_call name=\"add\">{\"a\"".into()),
    });
    let messages = run_calls(layer, vec![truncated], false).await;
    assert_eq!(
        only_results(&messages)[0].text_content(),
        "The call of `add` was cut off before it was complete (the reply ended inside the call). Make the call again."
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn provider_executed_calls_and_the_callers_tools_pass_through() {
    let runs = Arc::new(AtomicUsize::new(0));
    let layer = FunctionCallLayer::new(registry([counting_tool("add", runs.clone())]));
    let mut search = ToolCall::new("s1", "web_search", json!({"query": "rust"}));
    search.provider_executed = true;
    let confirm = ToolCall::new("u1", "ask_user", json!({"question": "sure?"}));
    let add = ToolCall::new("a1", "add", json!({"a": 1, "b": 2}));
    let model = ScriptedModel::new().reply_messages(vec![Message::tool_calls(vec![
        search.clone(),
        add.clone(),
        confirm.clone(),
    ])]);
    let request = request(true).tool(ToolSpec::new(
        "ask_user",
        "Asks the user",
        json!({"type": "object"}),
    ));
    let messages = layer
        .layer(model)
        .oneshot(request)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(
        messages,
        vec![
            Message::tool_calls(vec![search, confirm]),
            Message::tool_aggregate(vec![add], vec![ToolResult::text("a1", "add", "3")]),
        ]
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_registrys_specs_are_injected_once_by_name() {
    let runs = Arc::new(AtomicUsize::new(0));
    let add = counting_tool("add", runs);
    let spec = add.spec().clone();
    let model = ScriptedModel::new().reply("no calls");
    let service = FunctionCallLayer::new(registry([add])).layer(model.clone());
    let stale = ToolSpec::new("add", "an older description", json!({"type": "object"}));
    let other = ToolSpec::new("search", "Searches", json!({"type": "object"}));
    let request = request(false).tool(stale).tool(other.clone());
    let messages = service
        .oneshot(request)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(messages, vec![Message::assistant("no calls")]);
    assert_eq!(model.requests()[0].options.tools, vec![spec, other]);
}

#[tokio::test]
async fn events_after_a_run_of_calls_wait_for_its_aggregate() {
    let layer = FunctionCallLayer::new(registry([nap_tool(Arc::default())]));
    let model = ScriptedModel::new()
        .chunking(Chunking::Bytes(3))
        .reply_messages(vec![
            Message::assistant("Let me nap."),
            Message::tool_calls(vec![nap("c1", 10, "done")]),
            Message::assistant("Napping."),
            Message::usage(10, 20),
        ]);
    let events = layer
        .layer(model)
        .oneshot(request(true))
        .await
        .unwrap()
        .collect_events()
        .await
        .unwrap();
    assert!(
        !events.iter().any(|e| matches!(e, Event::ToolCallDelta(_))),
        "call deltas are consumed: {events:?}"
    );
    let kinds: Vec<&str> = events
        .iter()
        .map(|event| match event {
            Event::TextDelta(_) => "text",
            Event::Message {
                message: Message::ToolAggregate(_),
            } => "aggregate",
            Event::Usage(_) => "usage",
            Event::Finish { .. } => "finish",
            _ => "other",
        })
        .collect();
    let mut deduped = kinds.clone();
    deduped.dedup();
    assert_eq!(
        deduped,
        ["text", "aggregate", "text", "usage", "finish"],
        "{kinds:?}"
    );
}

#[tokio::test]
async fn a_broken_reply_keeps_its_calls_and_passes_the_error_on() {
    let layer = FunctionCallLayer::new(registry([nap_tool(Arc::default())]));
    let model = ScriptedModel::new().turn(Turn::Break(
        vec![
            Event::text("Calling."),
            Event::call_start(0, "c1", "nap"),
            Event::call_arguments(0, "{\"ms\": 1}"),
            Event::call_start(1, "c2", "nap"),
            Event::call_arguments(1, "{\"ms\""),
        ],
        "connection reset".into(),
    ));
    let reply = layer.layer(model).oneshot(request(true)).await.unwrap();
    let items: Vec<Result<Event, Error>> = StreamExt::collect(reply).await;
    let (events, errors): (Vec<_>, Vec<_>) = items.into_iter().partition(Result::is_ok);
    let messages = lmstack::Joiner::join(events.into_iter().map(Result::unwrap));
    assert_eq!(messages[0], Message::assistant("Calling."));
    assert_eq!(messages[1].calls().len(), 2, "{messages:?}");
    assert!(matches!(messages[1], Message::ToolCalls(_)));
    assert_eq!(errors.len(), 1);
    assert_eq!(
        errors[0].as_ref().unwrap_err().to_string(),
        "scripted model: connection reset"
    );
}

#[tokio::test]
async fn the_call_hook_sees_a_call_start_before_its_result_is_in() {
    for stream in [false, true] {
        let release = Arc::new(Notify::new());
        let add = Tool::typed("add", "Adds", {
            let release = release.clone();
            move |args: Add| {
                let release = release.clone();
                async move {
                    release.notified().await;
                    (args.a + args.b).to_string()
                }
            }
        });
        let (seen, mut started) = mpsc::unbounded();
        let layer = FunctionCallLayer::new(registry([add]))
            .on_call(move |call| seen.unbounded_send(call.clone()).unwrap());
        let model = ScriptedModel::new()
            .chunking(Chunking::Bytes(3))
            .reply_messages(vec![
                Message::assistant("Let me add."),
                Message::tool_calls(vec![ToolCall::new(
                    "call_1",
                    "add",
                    json!({"a": 2, "b": 3}),
                )]),
            ]);
        let reply = tokio::spawn(async move {
            let reply = layer.layer(model).oneshot(request(stream)).await?;
            reply.collect_events().await
        });
        // The tool answers only once the hook has shown its call.
        let call = tokio::time::timeout(Duration::from_secs(5), started.next())
            .await
            .expect("the hook is called while the tool runs");
        assert_eq!(
            call,
            Some(ToolCall::new("call_1", "add", json!({"a": 2, "b": 3})))
        );
        release.notify_one();
        let events = reply.await.unwrap().unwrap();
        let results: Vec<_> = events
            .iter()
            .filter_map(|event| match event {
                Event::Message { message } => Some(message.results()),
                _ => None,
            })
            .flatten()
            .collect();
        assert_eq!(
            results,
            [&ToolResult::text("call_1", "add", "5")],
            "{events:?}"
        );
        assert!(started.next().await.is_none(), "one call, seen once");
    }
}

#[tokio::test]
async fn tools_that_cannot_fail_and_tools_that_can_run_alike() {
    let plain = Tool::typed("add", "Adds", |args: Add| async move {
        (args.a + args.b).to_string()
    });
    let checked = Tool::typed("div", "Divides", |args: Add| async move {
        args.a
            .checked_div(args.b)
            .map(|quotient| quotient.to_string())
            .ok_or("division by zero")
    });
    let calls = vec![
        ToolCall::new("c1", "add", json!({"a": 6, "b": 3})),
        ToolCall::new("c2", "div", json!({"a": 6, "b": 3})),
        ToolCall::new("c3", "div", json!({"a": 6, "b": 0})),
    ];
    let make = || {
        FunctionCallLayer::new(registry([plain.clone(), checked.clone()]))
            .layer(ScriptedModel::new().reply_messages(vec![Message::tool_calls(calls.clone())]))
    };
    let (whole, streamed) = collect_both(make, request(false)).await.unwrap();
    assert_eq!(whole, streamed);
    let results = only_results(&whole);
    assert_eq!(results[0], ToolResult::text("c1", "add", "9"));
    assert_eq!(results[1], ToolResult::text("c2", "div", "2"));
    assert!(results[2].is_error);
    assert_eq!(
        results[2].text_content(),
        "The tool `div` failed: division by zero"
    );
}

fn chunking() -> impl Strategy<Value = Chunking> {
    prop_oneof![
        Just(Chunking::Whole),
        Just(Chunking::Bytes(1)),
        (any::<u64>(), 1usize..12).prop_map(|(seed, max)| Chunking::Random { seed, max }),
    ]
}

/// A model turn: text, a run of calls (some to unknown tools or with bad
/// arguments), more text.
fn turn() -> impl Strategy<Value = Vec<Message>> {
    let call = (0u64..50, "[a-z ]{0,12}", 0u8..4).prop_map(|(ms, say, kind)| match kind {
        0 => json!({"ms": ms, "say": say}),
        1 => json!({"ms": "soon"}),
        _ => json!({"ms": ms, "say": say.to_uppercase()}),
    });
    (
        "[a-zA-Z ,.]{0,30}",
        proptest::collection::vec((call, any::<bool>()), 1..4),
        "[a-zA-Z ,.]{0,30}",
    )
        .prop_map(|(before, calls, after)| {
            let calls = calls
                .into_iter()
                .enumerate()
                .map(|(i, (arguments, known))| {
                    let name = if known { "nap" } else { "unknown" };
                    ToolCall::new(format!("call_{i}"), name, arguments)
                })
                .collect();
            let mut messages = Vec::new();
            if !before.is_empty() {
                messages.push(Message::assistant(before));
            }
            messages.push(Message::tool_calls(calls));
            if !after.is_empty() {
                messages.push(Message::assistant(after));
            }
            messages
        })
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(48)))]

    #[test]
    fn streaming_and_non_streaming_give_the_same_messages(turn in turn(), chunking in chunking()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
        let (whole, streamed) = runtime.block_on(async {
            let make = || FunctionCallLayer::new(registry([nap_tool(Arc::default())]))
                .layer(ScriptedModel::new().chunking(chunking).reply_messages(turn.clone()));
            collect_both(make, request(false)).await.unwrap()
        });
        prop_assert_eq!(&whole, &streamed);
        let aggregates = whole.iter().filter(|m| matches!(m, Message::ToolAggregate(_))).count();
        prop_assert_eq!(aggregates, 1);
        let calls = turn.iter().map(|m| m.calls().len()).sum::<usize>();
        prop_assert_eq!(whole.iter().map(|m| m.results().len()).sum::<usize>(), calls);
    }

    #[test]
    fn a_call_hook_sees_each_call_that_runs_and_changes_no_message(turn in turn(), chunking in chunking()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
        let started = Arc::new(Mutex::new(Vec::new()));
        let model = || ScriptedModel::new().chunking(chunking).reply_messages(turn.clone());
        let (plain, hooked) = runtime.block_on(async {
            let plain = || FunctionCallLayer::new(registry([nap_tool(Arc::default())])).layer(model());
            let hooked = || {
                let started = started.clone();
                FunctionCallLayer::new(registry([nap_tool(Arc::default())]))
                    .on_call(move |call| started.lock().unwrap().push(call.id.clone()))
                    .layer(model())
            };
            let plain = collect_both(plain, request(false)).await.unwrap();
            (plain, collect_both(hooked, request(false)).await.unwrap())
        });
        prop_assert_eq!(&plain, &hooked);
        prop_assert_eq!(&hooked.0, &hooked.1);
        // The calls that ran are those answered without an error (`nap` never
        // fails); the hook saw each once per mode, in call order.
        let ran: Vec<String> = hooked.0.iter().flat_map(Message::results)
            .filter(|result| !result.is_error)
            .map(|result| result.call_id.clone())
            .collect();
        prop_assert_eq!(started.lock().unwrap().clone(), [ran.clone(), ran].concat());
    }
}

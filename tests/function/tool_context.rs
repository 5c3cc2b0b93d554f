//! The call context and tool sources through the function layer: a stopped call's
//! context is cancelled (time limit, dropped reply), a finished one's is not, and a
//! source's changed list is what the next request runs.

#![cfg(feature = "function")]

use std::convert::Infallible;
use std::time::Duration;

use lmstack::function::{CallContext, FunctionCallLayer, Tool, ToolList, ToolRegistry};
use lmstack::testing::ScriptedModel;
use lmstack::{ChatRequest, Message, ToolCall, ToolSpec};
use serde_json::json;
use tokio::sync::mpsc;
use tower::{Layer, ServiceExt};

/// What the `watched` tool reports: its context as it started, then the id of a
/// call whose context was cancelled.
struct Watch {
    started: mpsc::UnboundedReceiver<CallContext>,
    cancelled: mpsc::UnboundedReceiver<String>,
}

/// A tool that reports its context, watches it for cancellation from a task of
/// its own, then runs for `runs` (for ever if `None`).
fn watched(runs: Option<Duration>) -> (Tool, Watch) {
    let (started_tx, started) = mpsc::unbounded_channel();
    let (cancelled_tx, cancelled) = mpsc::unbounded_channel();
    let spec = ToolSpec::new("watched", "", json!({"type": "object"}));
    let tool = Tool::new(spec, move |_, context: CallContext| {
        let (started, cancelled) = (started_tx.clone(), cancelled_tx.clone());
        async move {
            started.send(context.clone()).unwrap();
            tokio::spawn(async move {
                context.cancelled().await;
                let _ = cancelled.send(context.call_id().to_owned());
            });
            match runs {
                Some(time) => tokio::time::sleep(time).await,
                None => futures::future::pending().await,
            }
            Ok::<_, Infallible>("done")
        }
    });
    (tool, Watch { started, cancelled })
}

fn calls_watched() -> ScriptedModel {
    ScriptedModel::new().reply_messages(vec![Message::tool_calls(vec![ToolCall::new(
        "c1",
        "watched",
        json!({}),
    )])])
}

fn request(stream: bool) -> ChatRequest {
    ChatRequest::new(vec![Message::user("go")]).streaming(stream)
}

#[tokio::test(start_paused = true)]
async fn a_call_stopped_by_its_time_limit_has_its_context_cancelled() {
    for stream in [false, true] {
        let (tool, mut watch) = watched(None);
        let layer = FunctionCallLayer::new(ToolRegistry::new([tool]).unwrap())
            .timeout(Duration::from_secs(2));
        let reply = layer.layer(calls_watched()).oneshot(request(stream)).await;
        let messages = reply.unwrap().collect().await.unwrap();
        let result = &messages[0].results()[0];
        assert!(result.is_error && result.text_content().contains("did not finish within 2s"));

        let context = watch.started.recv().await.unwrap();
        assert_eq!(context.call_id(), "c1");
        assert!(
            context.deadline().is_some(),
            "the context carries the deadline"
        );
        let cancelled = tokio::time::timeout(Duration::from_secs(10), watch.cancelled.recv());
        assert_eq!(cancelled.await.unwrap().as_deref(), Some("c1"));
        assert!(context.is_cancelled());
    }
}

#[tokio::test]
async fn dropping_the_reply_cancels_the_context_of_a_running_call() {
    for stream in [false, true] {
        let (tool, mut watch) = watched(None);
        let layer = FunctionCallLayer::new(ToolRegistry::new([tool]).unwrap());
        let service = layer.layer(calls_watched());
        let mut call = Box::pin(async move {
            let reply = service.oneshot(request(stream)).await?;
            reply.collect().await
        });
        let context = tokio::select! {
            outcome = &mut call => panic!("the call cannot end while its tool runs: {outcome:?}"),
            context = watch.started.recv() => context.unwrap(),
        };
        assert!(!context.is_cancelled());
        drop(call);
        let cancelled = tokio::time::timeout(Duration::from_secs(10), watch.cancelled.recv());
        assert_eq!(cancelled.await.unwrap().as_deref(), Some("c1"));
    }
}

#[tokio::test(start_paused = true)]
async fn a_call_that_finishes_leaves_its_context_alone() {
    let (tool, mut watch) = watched(Some(Duration::from_millis(10)));
    let layer = FunctionCallLayer::new(ToolRegistry::new([tool]).unwrap());
    let messages = layer
        .layer(calls_watched())
        .oneshot(request(true))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(messages[0].results()[0].text_content(), "done");
    let context = watch.started.recv().await.unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!context.is_cancelled());
    assert!(watch.cancelled.try_recv().is_err());
}

fn answering(name: &'static str) -> Tool {
    Tool::dynamic(name, "", json!({"type": "object"}), move |_| async move {
        Ok::<_, Infallible>(format!("{name} ran"))
    })
}

#[tokio::test]
async fn a_sources_changed_list_is_what_the_next_request_sees_and_runs() {
    let plugins = ToolList::new("plugins", [answering("old")]);
    let registry = ToolRegistry::builder()
        .tool(answering("local"))
        .source(plugins.clone())
        .build()
        .unwrap();
    let calls_new = || Message::tool_calls(vec![ToolCall::new("c", "new", json!({}))]);
    let model = ScriptedModel::new()
        .reply_messages(vec![calls_new()])
        .reply_messages(vec![calls_new()]);
    let service = FunctionCallLayer::new(registry).layer(model.clone());

    let first = service.clone().oneshot(request(false)).await.unwrap();
    let first = first.collect().await.unwrap();
    let result = &first[0].results()[0];
    assert!(result.is_error, "`new` is not there yet: {result:?}");
    assert!(
        result.text_content().contains("`local`, `old`"),
        "{result:?}"
    );

    plugins.replace([answering("new")]);
    let second = service.oneshot(request(false)).await.unwrap();
    let second = second.collect().await.unwrap();
    assert_eq!(second[0].results()[0].text_content(), "new ran");

    let seen = |i: usize| -> Vec<String> {
        model.requests()[i]
            .options
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect()
    };
    assert_eq!(
        (seen(0), seen(1)),
        (
            vec!["local".into(), "old".into()],
            vec!["local".into(), "new".into()]
        )
    );
}

#[tokio::test]
async fn a_prefixed_source_runs_its_tool_under_the_name_the_model_saw() {
    let server = ToolList::new("server", [answering("local")]);
    let registry = ToolRegistry::builder()
        .tool(answering("local"))
        .source_prefixed(server, "server")
        .build()
        .unwrap();
    let model = ScriptedModel::new().reply_messages(vec![Message::tool_calls(vec![
        ToolCall::new("a", "server__local", json!({})),
        ToolCall::new("b", "local", json!({})),
    ])]);
    let messages = FunctionCallLayer::new(registry)
        .layer(model)
        .oneshot(request(true))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let results: Vec<String> = messages[0]
        .results()
        .iter()
        .map(|r| r.text_content())
        .collect();
    assert_eq!(results, ["local ran", "local ran"]);
    assert_eq!(messages[0].results()[0].name, "server__local");
}

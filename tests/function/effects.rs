//! Work that had effects is never repeated and never dropped: a retry around a
//! whole stack does not run a tool twice (class 1), a tool loop that stops hands
//! back the rounds it ran (class 6), and a call the request did not allow is not
//! run (class 7).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use lmstack::function::{FunctionCallLayer, OnLimit, Tool, ToolLoopLayer, ToolRegistry};
use lmstack::natural::{NaturalToolUse, NaturalToolUseParser, OnInvalid};
use lmstack::testing::{ScriptedModel, collect_both};
use lmstack::{
    ChatRequest, Error, InvalidCallKind, Message, Reply, ToolCall, ToolChoice, ToolSpec,
};
use serde_json::json;
use tower::{Service, ServiceBuilder, ServiceExt};

/// A tool with a side effect: it counts its runs.
fn pay(runs: &Arc<AtomicUsize>) -> Tool {
    let runs = runs.clone();
    Tool::dynamic(
        "pay",
        "Pays the bill",
        json!({"type": "object", "properties": {}}),
        move |_| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok::<_, std::convert::Infallible>("paid")
            }
        },
    )
}

fn pay_call(id: &str) -> Message {
    Message::tool_calls(vec![ToolCall::new(id, "pay", json!({}))])
}

fn stack<S>(
    layer: ToolLoopLayer,
    runs: &Arc<AtomicUsize>,
    model: S,
) -> impl Service<ChatRequest, Response = Reply, Error = Error> + Clone
where
    S: Service<ChatRequest, Response = Reply, Error = Error> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    ServiceBuilder::new()
        .layer(layer)
        .layer(FunctionCallLayer::new(
            ToolRegistry::new([pay(runs)]).unwrap(),
        ))
        .service(model)
}

fn request(stream: bool) -> ChatRequest {
    ChatRequest::new(vec![Message::user("Pay the bill.")]).streaming(stream)
}

fn aggregates(messages: &[Message]) -> usize {
    messages
        .iter()
        .filter(|m| matches!(m, Message::ToolAggregate(_)))
        .count()
}

/// Class 1, over real HTTP: round 1 runs `pay`, round 2 gets a 503. The retry
/// wraps the whole stack; it must not replay round 1.
#[cfg(all(feature = "openai", feature = "retry"))]
#[tokio::test]
async fn a_retry_around_a_whole_stack_never_runs_a_tool_twice() {
    use crate::common::server::{Answer, Server};
    use lmstack::provider::openai_chat::{OpenAi, OpenAiConfig};
    use lmstack::retry::RetryLayer;

    let call = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "pay", "arguments": "{}"}}]}}]
    })
    .to_string();
    let stream_call = concat!(
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",",
        "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,",
        "\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"pay\",\"arguments\":\"{}\"}}]},",
        "\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",",
        "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n"
    );
    let unavailable = br#"{"error":{"message":"overloaded","type":"server_error"}}"#;
    for stream in [false, true] {
        let first = if stream {
            Answer::ok("text/event-stream", stream_call.as_bytes(), &[17])
        } else {
            Answer::ok("application/json", call.as_bytes(), &[usize::MAX])
        };
        // Round 2 fails every time it is made: a replay would show as more requests.
        let server = Server::start(vec![
            first,
            Answer::error(503, unavailable, &[]),
            Answer::error(503, unavailable, &[]),
            Answer::error(503, unavailable, &[]),
        ])
        .await;
        let provider = OpenAi::new(OpenAiConfig::new(server.base_url()).model("m")).unwrap();
        let runs = Arc::new(AtomicUsize::new(0));
        let retry = RetryLayer::new()
            .max_retries(2)
            .sleep(|_| std::future::ready(()));
        let service = ServiceBuilder::new().layer(retry).service(stack(
            ToolLoopLayer::new(),
            &runs,
            provider,
        ));
        let reply = service.oneshot(request(stream)).await.unwrap();
        let (messages, error) = reply.collect_partial().await;
        assert_eq!(runs.load(Ordering::SeqCst), 1, "stream {stream}: ran once");
        assert_eq!(aggregates(&messages), 1, "stream {stream}: round 1 kept");
        let error = error.expect("round 2's error ends the reply");
        assert_eq!(error.provider_error().map(|e| e.status), Some(503));
        assert_eq!(server.requests().len(), 2, "stream {stream}: no replay");
    }
}

/// Class 1, the other side of the boundary: a call that failed before any tool
/// ran is still retried, in both modes.
#[cfg(feature = "retry")]
#[tokio::test]
async fn a_retry_around_a_whole_stack_still_retries_before_any_tool_ran() {
    use lmstack::retry::RetryLayer;

    for stream in [false, true] {
        let runs = Arc::new(AtomicUsize::new(0));
        let model = ScriptedModel::new()
            .fail("busy")
            .reply_messages(vec![pay_call("c1")])
            .reply("Paid.");
        let retry = RetryLayer::new()
            .classifier(|error: &Error| matches!(error, Error::Stage { .. }))
            .sleep(|_| std::future::ready(()));
        let service = ServiceBuilder::new().layer(retry).service(stack(
            ToolLoopLayer::new(),
            &runs,
            model.clone(),
        ));
        let messages = service
            .oneshot(request(stream))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert_eq!(messages.last(), Some(&Message::assistant("Paid.")));
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(model.requests().len(), 3, "one failure, two rounds");
    }
}

/// Class 6: at its bound, the loop hands back every round it ran (whose tools
/// ran) with the error, in non-streaming mode as in streaming mode.
#[tokio::test]
async fn a_tool_loop_at_its_limit_hands_back_the_rounds_it_ran() {
    for stream in [false, true] {
        let runs = Arc::new(AtomicUsize::new(0));
        let model = (0..5).fold(ScriptedModel::new(), |model, i| {
            model.reply_messages(vec![pay_call(&format!("c{i}"))])
        });
        let reply = stack(ToolLoopLayer::new().max_iterations(3), &runs, model)
            .oneshot(request(stream))
            .await
            .expect("the rounds come back, not only the error");
        let (messages, error) = reply.collect_partial().await;
        assert_eq!(runs.load(Ordering::SeqCst), 3);
        assert_eq!(aggregates(&messages), 3, "stream {stream}");
        assert!(matches!(
            error,
            Some(Error::ToolLoopLimit { max_iterations: 3 })
        ));
    }
}

/// Class 7: the final-answer round sets `tool_choice: none`; a call the model
/// writes anyway gets an error result and is not run.
#[tokio::test]
async fn the_final_answer_round_runs_no_tool() {
    let model = ScriptedModel::new()
        .reply_messages(vec![pay_call("c1")])
        .reply_messages(vec![pay_call("c2")])
        .reply_messages(vec![pay_call("c1")])
        .reply_messages(vec![pay_call("c2")]);
    let runs = Arc::new(AtomicUsize::new(0));
    let layer = ToolLoopLayer::new()
        .max_iterations(1)
        .on_limit(OnLimit::FinalAnswer);
    let service = stack(layer, &runs, model.clone());
    let (whole, streamed) = collect_both(|| service.clone(), request(false))
        .await
        .unwrap();
    assert_eq!(whole, streamed);
    assert_eq!(runs.load(Ordering::SeqCst), 2, "one run per mode");
    let final_round = &model.requests()[1];
    assert_eq!(final_round.options.tool_choice, Some(ToolChoice::None));
    let Some(Message::ToolAggregate(refused)) = whole.last() else {
        panic!("the final round's call is answered: {whole:?}")
    };
    assert!(refused.results[0].is_error);
    assert!(
        refused.results[0].text_content().contains("not allowed"),
        "{:?}",
        refused.results[0]
    );
}

/// Class 7: a named `tool_choice` allows that tool only.
#[tokio::test]
async fn a_call_of_another_tool_than_the_named_choice_is_not_run() {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new().reply_messages(vec![pay_call("c1")]);
    let mut request = request(false);
    request.options.tool_choice = Some(ToolChoice::Tool("refund".into()));
    let service = FunctionCallLayer::new(ToolRegistry::new([pay(&runs)]).unwrap());
    let messages = tower::Layer::layer(&service, model)
        .oneshot(request)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(messages[0].results()[0].is_error);
}

/// Class 7, in the text of a model without native tools: under `none` the
/// parser marks a written call `not_allowed` instead of handing it out as a
/// call.
#[tokio::test]
async fn natural_tool_use_marks_a_call_under_tool_choice_none_not_allowed() {
    let text = "<tool_call>\n{\"name\": \"pay\", \"arguments\": {}}\n</tool_call>";
    let model = ScriptedModel::new().reply(text).reply(text);
    let layer =
        NaturalToolUse::new().parser(NaturalToolUseParser::new().on_invalid(OnInvalid::Mark));
    let mut request = request(false);
    request.options.tools = vec![ToolSpec::new("pay", "Pays", json!({"type": "object"}))];
    request.options.tool_choice = Some(ToolChoice::None);
    let (messages, streamed) = collect_both(|| tower::Layer::layer(&layer, model.clone()), request)
        .await
        .unwrap();
    assert_eq!(messages, streamed);
    let calls = messages[0].calls();
    assert_eq!(calls.len(), 1, "{messages:?}");
    let invalid = calls[0].invalid.as_ref().expect("marked");
    assert_eq!(invalid.kind, InvalidCallKind::NotAllowed);
}

/// A reply that breaks while a call is being read hands the call back marked
/// as cut off — not as a complete call with no arguments — answered with an
/// error result, not run, alike in both modes.
#[tokio::test]
async fn a_call_cut_off_by_a_broken_reply_is_marked_and_not_run() {
    use lmstack::Event;
    use lmstack::testing::Turn;

    let mut replies = Vec::new();
    for stream in [false, true] {
        let runs = Arc::new(AtomicUsize::new(0));
        let model = ScriptedModel::new().turn(Turn::Break(
            vec![Event::call_start(0, "c1", "pay")],
            "reset".into(),
        ));
        let layer = FunctionCallLayer::new(ToolRegistry::new([pay(&runs)]).unwrap());
        let reply = tower::Layer::layer(&layer, model)
            .oneshot(request(stream))
            .await
            .unwrap();
        let (messages, error) = reply.collect_partial().await;
        assert!(error.is_some(), "the break ends the reply");
        let [Message::ToolAggregate(cut)] = messages.as_slice() else {
            panic!("the call comes back answered: {messages:?}")
        };
        let fault = cut.calls[0].invalid.as_ref().expect("marked");
        assert_eq!(fault.kind, InvalidCallKind::Truncated, "stream {stream}");
        assert!(cut.results[0].is_error, "stream {stream}");
        replies.push(messages);
        assert_eq!(runs.load(Ordering::SeqCst), 0);
    }
    assert_eq!(replies[0], replies[1], "both modes");
}

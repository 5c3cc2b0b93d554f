//! The retry layer as a service (`lmstack::retry`), on a scripted model that
//! checks tower's readiness contract: failures before the first event retried
//! after the scheduled waits (recorded, not slept), never a stream after its
//! first event, non-streaming replies made again only when no tool ran, the
//! classifier replaced, readiness awaited before each attempt, and tokio's
//! timer as the default sleep.
//!
//! The waits of the policy itself (backoff, jitter, `Retry-After`, the
//! classifier) are unit tests in `src/retry.rs`.

#![cfg(feature = "retry")]

#[path = "../common/outcomes.rs"]
mod outcomes;

use std::collections::VecDeque;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::StreamExt;
use futures::executor::block_on;
use lmstack::provider::TransportErrorKind;
use lmstack::retry::RetryLayer;
use lmstack::{ChatRequest, Error, Event, Message, ToolCall, ToolResult};
use outcomes::{Model, Outcome, answered, transport};
use tower::{Layer, Service, ServiceExt};

type Waits = Arc<Mutex<Vec<Duration>>>;

/// The layer with 100 ms of initial backoff, these jitter samples (drawing
/// another fails the test) and a sleep that records each wait and returns at
/// once.
fn layer(samples: &[f64]) -> (RetryLayer, Waits) {
    let waits = Waits::default();
    let slept = waits.clone();
    let mut samples: VecDeque<f64> = samples.iter().copied().collect();
    let layer = RetryLayer::new()
        .initial_backoff(Duration::from_millis(100))
        .jitter(move || {
            samples
                .pop_front()
                .expect("no more jitter samples expected")
        })
        .sleep(move |wait| {
            slept.lock().unwrap().push(wait);
            std::future::ready(())
        });
    (layer, waits)
}

fn request(stream: bool) -> ChatRequest {
    ChatRequest::new(vec![Message::user("hi")]).streaming(stream)
}

fn text(text: &str) -> Result<Event, Error> {
    Ok(Event::text(text))
}

fn waits(waits: &Waits) -> Vec<Duration> {
    waits.lock().unwrap().clone()
}

#[test]
fn failures_before_the_first_event_are_retried_after_the_scheduled_waits() {
    let model = Model::new([
        Outcome::Fail(transport(TransportErrorKind::Connect)),
        Outcome::Fail(answered(429, &[("retry-after", "3")], "")),
        Outcome::Stream(vec![text("hel"), text("lo")]),
    ]);
    // One sample: the Retry-After wait draws none.
    let (layer, slept) = layer(&[0.5]);
    let service = layer.max_retries(3).layer(model.clone());
    let reply = block_on(service.oneshot(request(true))).unwrap();
    assert!(!reply.is_ready(), "a streaming reply still streams");
    assert_eq!(
        block_on(reply.collect()).unwrap(),
        vec![Message::assistant("hello")]
    );
    assert_eq!(
        waits(&slept),
        vec![Duration::from_millis(75), Duration::from_secs(3)]
    );
    let script = model.script();
    assert_eq!(script.requests.len(), 3);
    assert!(script.requests.iter().all(|sent| *sent == request(true)));
    assert_eq!(script.unready_calls, 0);
}

#[test]
fn the_last_error_is_returned_once_the_retries_are_spent() {
    let model =
        Model::new((1..=3).map(|n| Outcome::Fail(answered(503, &[], &format!("busy {n}")))));
    let (layer, slept) = layer(&[0.0, 0.0]);
    let error = block_on(layer.layer(model.clone()).oneshot(request(false))).unwrap_err();
    assert_eq!(error.to_string(), "openai: HTTP 503: busy 3");
    assert_eq!(model.calls(), 3, "one attempt and two retries");
    assert_eq!(
        waits(&slept),
        vec![Duration::from_millis(50), Duration::from_millis(100)]
    );
}

#[test]
fn an_error_not_worth_retrying_is_returned_at_once() {
    let model = Model::new([
        Outcome::Fail(answered(400, &[], "bad request")),
        Outcome::Stream(vec![text("unused")]),
    ]);
    let (layer, slept) = layer(&[]);
    let error = block_on(layer.layer(model.clone()).oneshot(request(true))).unwrap_err();
    assert_eq!(error.provider_error().map(|error| error.status), Some(400));
    assert_eq!(model.calls(), 1);
    assert!(waits(&slept).is_empty());
}

#[test]
fn a_retry_after_above_the_cap_is_not_waited_out() {
    let outcomes = || {
        [
            Outcome::Fail(answered(429, &[("retry-after", "61")], "")),
            Outcome::Stream(vec![text("ok")]),
        ]
    };
    let model = Model::new(outcomes());
    let (layer, slept) = layer(&[]);
    let error = block_on(layer.clone().layer(model.clone()).oneshot(request(true))).unwrap_err();
    assert_eq!(
        error.provider_error().and_then(|error| error.retry_after),
        Some(Duration::from_secs(61))
    );
    assert_eq!(model.calls(), 1);
    assert!(waits(&slept).is_empty());

    let model = Model::new(outcomes());
    let service = layer
        .max_retry_after(Duration::from_secs(61))
        .layer(model.clone());
    block_on(service.oneshot(request(true))).unwrap();
    assert_eq!(model.calls(), 2);
    assert_eq!(waits(&slept), vec![Duration::from_secs(61)]);
}

#[test]
fn a_stream_that_fails_before_its_first_event_is_retried() {
    let model = Model::new([
        Outcome::Stream(vec![Err(transport(TransportErrorKind::Interrupted))]),
        Outcome::Stream(vec![text("ok")]),
    ]);
    let (layer, slept) = layer(&[1.0]);
    let reply = block_on(layer.layer(model.clone()).oneshot(request(true))).unwrap();
    assert_eq!(
        block_on(reply.collect()).unwrap(),
        vec![Message::assistant("ok")]
    );
    assert_eq!(model.calls(), 2);
    assert_eq!(waits(&slept), vec![Duration::from_millis(100)]);
}

#[test]
fn a_stream_that_fails_after_its_first_event_is_not_replayed() {
    let model = Model::new([
        Outcome::Stream(vec![
            text("one "),
            text("two"),
            Err(transport(TransportErrorKind::Interrupted)),
        ]),
        Outcome::Stream(vec![text("never sent")]),
    ]);
    let (layer, slept) = layer(&[]);
    let reply = block_on(layer.layer(model.clone()).oneshot(request(true))).unwrap();
    let items: Vec<Result<Event, Error>> = block_on(StreamExt::collect(reply));
    assert_eq!(items.len(), 3);
    assert_eq!(items[0].as_ref().ok(), Some(&Event::text("one ")));
    assert_eq!(items[1].as_ref().ok(), Some(&Event::text("two")));
    assert_eq!(
        items[2]
            .as_ref()
            .err()
            .and_then(Error::transport_error)
            .map(|error| error.kind),
        Some(TransportErrorKind::Interrupted)
    );
    assert_eq!(model.calls(), 1);
    assert!(waits(&slept).is_empty());
}

#[test]
fn a_complete_reply_whose_first_item_is_an_error_is_retried_and_stays_complete() {
    let answer = Message::assistant("done");
    let model = Model::new([
        Outcome::Complete(vec![Err(transport(TransportErrorKind::Truncated))]),
        Outcome::Complete(vec![Ok(Event::message(answer.clone()))]),
    ]);
    let (layer, _) = layer(&[0.0]);
    let reply = block_on(layer.layer(model.clone()).oneshot(request(false))).unwrap();
    assert!(reply.is_ready(), "a non-streaming reply stays in memory");
    assert_eq!(block_on(reply.collect()).unwrap(), vec![answer]);
    assert_eq!(model.calls(), 2);
}

#[test]
fn a_complete_reply_that_failed_before_any_tool_ran_is_made_again() {
    let model = Model::new([
        Outcome::Complete(vec![
            Ok(Event::message(Message::assistant("partial"))),
            Err(transport(TransportErrorKind::Truncated)),
        ]),
        Outcome::Complete(vec![Ok(Event::message(Message::assistant("whole")))]),
    ]);
    let (layer, _) = layer(&[0.0]);
    let reply = block_on(layer.layer(model.clone()).oneshot(request(false))).unwrap();
    let messages = block_on(reply.collect()).unwrap();
    assert_eq!(messages, vec![Message::assistant("whole")]);
    assert_eq!(model.calls(), 2);
}

#[test]
fn a_complete_reply_that_failed_after_a_tool_ran_is_delivered_as_it_is() {
    let ran = Message::tool_aggregate(
        vec![ToolCall::new("c1", "pay", serde_json::json!({}))],
        vec![ToolResult::text("c1", "pay", "paid")],
    );
    let model = Model::new([
        Outcome::Complete(vec![
            Ok(Event::message(ran.clone())),
            Err(transport(TransportErrorKind::Connect)),
        ]),
        Outcome::Complete(vec![]),
    ]);
    let (layer, _) = layer(&[0.0]);
    let reply = block_on(layer.layer(model.clone()).oneshot(request(false))).unwrap();
    assert!(reply.is_ready());
    let (messages, error) = block_on(reply.collect_partial());
    assert_eq!(messages, vec![ran], "the tool's result is kept");
    assert!(
        error.is_some_and(|e| e.transport_error().is_some()),
        "then the error"
    );
    assert_eq!(
        model.calls(),
        1,
        "never made again: the tool would run twice"
    );
}

#[test]
fn a_complete_reply_not_retried_keeps_what_it_made_before_the_error() {
    let model = Model::new([Outcome::Complete(vec![
        Ok(Event::message(Message::assistant("partial"))),
        Err(Error::stage("model", "refused")),
    ])]);
    let (layer, _) = layer(&[]);
    let reply = block_on(layer.layer(model.clone()).oneshot(request(false))).unwrap();
    let (messages, error) = block_on(reply.collect_partial());
    assert_eq!(messages, vec![Message::assistant("partial")]);
    assert!(matches!(error, Some(Error::Stage { stage: "model", .. })));
    assert_eq!(model.calls(), 1);
}

#[test]
fn an_empty_reply_is_delivered_empty() {
    for outcome in [Outcome::Stream(vec![]), Outcome::Complete(vec![])] {
        let model = Model::new([outcome]);
        let (layer, _) = layer(&[]);
        let reply = block_on(layer.layer(model.clone()).oneshot(request(true))).unwrap();
        assert_eq!(block_on(reply.collect_events()).unwrap(), vec![]);
        assert_eq!(model.calls(), 1);
    }
}

#[test]
fn a_closure_replaces_the_classifier() {
    let model = Model::new([
        Outcome::Fail(Error::stage("gateway", "busy")),
        Outcome::Fail(transport(TransportErrorKind::Connect)),
        Outcome::Stream(vec![text("unused")]),
    ]);
    let (layer, slept) = layer(&[0.0]);
    let service = layer
        .classifier(|error: &Error| matches!(error, Error::Stage { .. }))
        .layer(model.clone());
    let error = block_on(service.oneshot(request(true))).unwrap_err();
    // The stage error was retried; the connect error, which the default
    // classifier would retry, was not.
    assert_eq!(
        error.transport_error().map(|error| error.kind),
        Some(TransportErrorKind::Connect)
    );
    assert_eq!(model.calls(), 2);
    assert_eq!(waits(&slept), vec![Duration::from_millis(50)]);
}

#[test]
fn the_services_of_a_layer_share_its_jitter_source() {
    let (layer, slept) = layer(&[0.0, 1.0]);
    for _ in 0..2 {
        let model = Model::new([
            Outcome::Fail(transport(TransportErrorKind::Timeout)),
            Outcome::Stream(vec![text("ok")]),
        ]);
        block_on(layer.clone().layer(model).oneshot(request(true))).unwrap();
    }
    assert_eq!(
        waits(&slept),
        vec![Duration::from_millis(50), Duration::from_millis(100)]
    );
}

#[test]
fn the_next_attempt_waits_for_the_inner_service_to_be_ready() {
    let model = Model::new([
        Outcome::Fail(transport(TransportErrorKind::Connect)),
        Outcome::Stream(vec![text("ok")]),
    ]);
    // Ready for the first call (made ready by the caller), then not ready once.
    model.script().readiness = [Poll::Ready(Ok(())), Poll::Pending, Poll::Ready(Ok(()))].into();
    let (layer, _) = layer(&[0.0]);
    let mut service = layer.layer(model.clone());
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    assert!(matches!(service.poll_ready(&mut cx), Poll::Ready(Ok(()))));
    let mut future = pin!(service.call(request(true)));
    assert!(future.as_mut().poll(&mut cx).is_pending());
    assert_eq!(
        model.calls(),
        1,
        "no second attempt before the service is ready"
    );
    let Poll::Ready(Ok(reply)) = future.as_mut().poll(&mut cx) else {
        panic!("the retry succeeds once the service is ready");
    };
    assert_eq!(
        block_on(reply.collect()).unwrap(),
        vec![Message::assistant("ok")]
    );
    assert_eq!(model.calls(), 2);
    assert_eq!(model.script().unready_calls, 0, "every call was made ready");
}

#[test]
fn a_readiness_error_before_a_retry_is_returned() {
    let model = Model::new([Outcome::Fail(transport(TransportErrorKind::Connect))]);
    model.script().readiness = [
        Poll::Ready(Ok(())),
        Poll::Ready(Err(Error::stage("limiter", "closed"))),
    ]
    .into();
    let (layer, _) = layer(&[0.0]);
    let error = block_on(layer.layer(model.clone()).oneshot(request(true))).unwrap_err();
    assert_eq!(error.to_string(), "limiter: closed");
    assert_eq!(model.calls(), 1);
}

/// A sleep that lasts until its gate is opened.
struct Gate(Arc<AtomicBool>);

impl Future for Gate {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if self.0.load(Ordering::SeqCst) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

#[test]
fn the_next_attempt_waits_for_the_sleep() {
    let model = Model::new([
        Outcome::Fail(transport(TransportErrorKind::Connect)),
        Outcome::Stream(vec![text("ok")]),
    ]);
    let open = Arc::new(AtomicBool::new(false));
    let gate = open.clone();
    let service = RetryLayer::new()
        .jitter(|| 0.0)
        .sleep(move |_| Gate(gate.clone()))
        .layer(model.clone());
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(service.oneshot(request(true)));
    for _ in 0..3 {
        assert!(future.as_mut().poll(&mut cx).is_pending());
        assert_eq!(model.calls(), 1, "no second attempt during the sleep");
    }
    open.store(true, Ordering::SeqCst);
    assert!(matches!(future.as_mut().poll(&mut cx), Poll::Ready(Ok(_))));
    assert_eq!(model.calls(), 2);
}

#[test]
fn polling_after_completion_is_an_error_not_a_panic() {
    let model = Model::new([Outcome::Stream(vec![text("ok")])]);
    let (layer, _) = layer(&[]);
    let mut service = layer.layer(model);
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    assert!(service.poll_ready(&mut cx).is_ready());
    let mut future = pin!(service.call(request(true)));
    assert!(matches!(future.as_mut().poll(&mut cx), Poll::Ready(Ok(_))));
    let Poll::Ready(Err(error)) = future.as_mut().poll(&mut cx) else {
        panic!("expected an error");
    };
    assert!(
        error.to_string().contains("polled after it completed"),
        "{error}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_default_sleep_waits_on_tokio_s_timer() {
    let model = Model::new([
        Outcome::Fail(answered(429, &[("retry-after", "2")], "")),
        Outcome::Stream(vec![text("ok")]),
    ]);
    let started = tokio::time::Instant::now();
    let reply = RetryLayer::new()
        .layer(model.clone())
        .oneshot(request(true))
        .await
        .unwrap();
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    assert_eq!(
        reply.collect().await.unwrap(),
        vec![Message::assistant("ok")]
    );
    assert_eq!(model.calls(), 2);
}

//! Deployments as a service (`lmstack::deploy`), over scripted models that
//! fail in each way: fallback before the first event and never after it,
//! least-in-flight choice, session affinity, the breakers opening on failures
//! and `Retry-After` and half-opening on an injected clock.
//!
//! The pure parts (the breaker, the choice, the affinity property) are unit
//! tests in `src/deploy/`.

#[path = "../common/outcomes.rs"]
mod outcomes;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::executor::block_on;
use lmstack::deploy::Deployments;
use lmstack::provider::TransportErrorKind;
use lmstack::{ChatRequest, Error, Event, Message, Reply};
use outcomes::{Model, Outcome, answered, transport};
use serde_json::json;
use tower::ServiceExt;

/// A clock a test moves by hand.
#[derive(Clone)]
struct Clock(Arc<Mutex<Instant>>);

impl Clock {
    fn new() -> Self {
        Clock(Arc::new(Mutex::new(Instant::now())))
    }

    fn now(&self) -> Instant {
        *self.0.lock().unwrap()
    }

    fn advance(&self, by: Duration) {
        *self.0.lock().unwrap() += by;
    }
}

/// Deployments over `models`, on `clock`, opening after one failure.
fn deployments(models: &[Model], clock: &Clock) -> Deployments<Model> {
    let clock = clock.clone();
    Deployments::new(models.iter().cloned())
        .failures_to_open(1)
        .cool_down(Duration::from_secs(10))
        .clock(move || clock.now())
}

fn request(stream: bool) -> ChatRequest {
    ChatRequest::new(vec![Message::user("hi")]).streaming(stream)
}

fn keyed(key: &str) -> ChatRequest {
    let mut request = request(true);
    request
        .options
        .extra
        .insert("prompt_cache_key".into(), json!(key));
    request
}

fn streams(text: &str) -> Outcome {
    Outcome::Stream(vec![Ok(Event::text(text))])
}

fn call(deployments: &Deployments<Model>, request: ChatRequest) -> Result<Reply, Error> {
    block_on(deployments.clone().oneshot(request))
}

fn collect(reply: Reply) -> Vec<Message> {
    block_on(reply.collect()).unwrap()
}

fn calls(models: &[Model]) -> Vec<usize> {
    models.iter().map(Model::calls).collect()
}

/// Makes one failure (an `Error` is not `Clone`).
type MakeError = fn() -> Error;

#[test]
fn each_failure_before_the_first_event_falls_back_to_the_next_deployment() {
    let failures: [(&str, MakeError); 5] = [
        ("429", || answered(429, &[], "")),
        ("500", || answered(500, &[], "oops")),
        ("503", || answered(503, &[], "")),
        ("connect", || transport(TransportErrorKind::Connect)),
        ("timeout", || transport(TransportErrorKind::Timeout)),
    ];
    for (name, failure) in failures {
        for stream in [true, false] {
            let answer = vec![Ok(Event::text("hello"))];
            let answer = match stream {
                true => Outcome::Stream(answer),
                false => Outcome::Complete(answer),
            };
            let models = [Model::new([Outcome::Fail(failure())]), Model::new([answer])];
            let service = deployments(&models, &Clock::new());
            let reply = call(&service, request(stream)).expect(name);
            assert_eq!(collect(reply), vec![Message::assistant("hello")], "{name}");
            assert_eq!(calls(&models), vec![1, 1], "{name}");
            assert_eq!(service.cooling_down(), vec![true, false], "{name}");
            assert!(
                models.iter().all(|model| model.script().unready_calls == 0),
                "{name}: every call was made ready"
            );
        }
    }
}

#[test]
fn a_failure_after_the_first_event_is_never_sent_again() {
    let models = [
        Model::new([Outcome::Stream(vec![
            Ok(Event::text("hel")),
            Err(answered(503, &[], "")),
        ])]),
        // Scripted with nothing: a call here fails the test.
        Model::new([]),
    ];
    let service = deployments(&models, &Clock::new());
    let reply = call(&service, request(true)).unwrap();
    let (messages, error) = block_on(reply.collect_partial());
    assert_eq!(messages, vec![Message::assistant("hel")]);
    assert!(error.is_some());
    assert_eq!(calls(&models), vec![1, 0]);
    assert_eq!(service.cooling_down(), vec![false, false], "it answered");
}

#[test]
fn an_error_of_the_caller_is_returned_without_a_fallback() {
    let models = [
        Model::new([Outcome::Fail(answered(400, &[], "bad"))]),
        Model::new([]),
    ];
    let service = deployments(&models, &Clock::new());
    let error = call(&service, request(true)).unwrap_err();
    assert_eq!(error.to_string(), "openai: HTTP 400: bad");
    assert_eq!(calls(&models), vec![1, 0]);
    assert_eq!(service.cooling_down(), vec![false, false]);
}

#[test]
fn retry_after_cools_a_deployment_for_that_long() {
    let clock = Clock::new();
    let models = [
        Model::new([
            Outcome::Fail(answered(429, &[("retry-after", "7")], "")),
            streams("back"),
        ]),
        Model::new([streams("one"), streams("two")]),
    ];
    // Three failures to open: the Retry-After alone cools it.
    let service = deployments(&models, &clock).failures_to_open(3);
    assert_eq!(
        collect(call(&service, request(true)).unwrap()),
        vec![Message::assistant("one")]
    );
    clock.advance(Duration::from_secs(6));
    assert_eq!(service.cooling_down(), vec![true, false]);
    assert_eq!(
        collect(call(&service, request(true)).unwrap()),
        vec![Message::assistant("two")]
    );
    clock.advance(Duration::from_secs(1));
    assert_eq!(service.cooling_down(), vec![false, false]);
    assert_eq!(
        collect(call(&service, request(true)).unwrap()),
        vec![Message::assistant("back")]
    );
}

#[test]
fn when_every_deployment_fails_the_last_error_is_returned_then_a_503_while_they_cool() {
    let clock = Clock::new();
    let models = [
        Model::new([Outcome::Fail(answered(503, &[], "first"))]),
        Model::new([Outcome::Fail(answered(502, &[], "second"))]),
    ];
    let service = deployments(&models, &clock);
    let error = call(&service, request(false)).unwrap_err();
    assert_eq!(error.to_string(), "openai: HTTP 502: second");
    clock.advance(Duration::from_secs(4));
    let error = call(&service, request(false)).unwrap_err();
    let cooling = error.provider_error().expect("a provider error");
    assert_eq!(cooling.status, 503);
    assert_eq!(cooling.retry_after, Some(Duration::from_secs(6)));
    assert_eq!(calls(&models), vec![1, 1], "no call while both cool down");
}

#[test]
fn the_least_loaded_deployment_takes_each_call() {
    let models = [
        Model::new([streams("a1"), streams("a2")]),
        Model::new([streams("b1")]),
    ];
    let service = deployments(&models, &Clock::new());
    // A streaming reply is in flight until it ends or is dropped.
    let first = call(&service, request(true)).unwrap();
    assert_eq!(service.in_flight(), vec![1, 0]);
    let second = call(&service, request(true)).unwrap();
    assert_eq!(service.in_flight(), vec![1, 1]);
    assert_eq!(collect(first), vec![Message::assistant("a1")]);
    assert_eq!(service.in_flight(), vec![0, 1]);
    let third = call(&service, request(true)).unwrap();
    assert_eq!(service.in_flight(), vec![1, 1]);
    drop(second);
    drop(third);
    assert_eq!(service.in_flight(), vec![0, 0]);
    assert_eq!(calls(&models), vec![2, 1]);
}

#[test]
fn a_session_stays_on_its_deployment_and_moves_only_while_it_is_open() {
    let clock = Clock::new();
    let models: Vec<Model> = (0..3)
        .map(|_| Model::new((0..6).map(|n| streams(&format!("turn {n}")))))
        .collect();
    let service = deployments(&models, &clock);
    // Held replies load the key's deployment: the key stays there anyway.
    let held: Vec<Reply> = (0..3)
        .map(|_| call(&service, keyed("conversation")).unwrap())
        .collect();
    let home = calls(&models)
        .iter()
        .position(|&n| n == 3)
        .expect("one deployment took all three");
    drop(held);

    // It fails: the call falls back, and the key moves while it cools down,
    // to one deployment.
    let busy = Outcome::Fail(answered(503, &[], ""));
    models[home].script().outcomes.push_front(busy);
    collect(call(&service, keyed("conversation")).unwrap());
    let away = (0..3)
        .find(|&i| i != home && models[i].calls() == 1)
        .expect("fell back once");
    collect(call(&service, keyed("conversation")).unwrap());
    assert_eq!(models[away].calls(), 2);
    assert_eq!(calls(&models).iter().sum::<usize>(), 6, "no other call");

    // Cooled down: the probe goes home, and the key stays there.
    clock.advance(Duration::from_secs(10));
    collect(call(&service, keyed("conversation")).unwrap());
    collect(call(&service, keyed("conversation")).unwrap());
    assert_eq!(models[home].calls(), 6);
    assert_eq!(models[away].calls(), 2);
}

#[test]
fn the_breaker_opens_after_the_failures_in_a_row_and_half_opens_for_one_probe() {
    let clock = Clock::new();
    let models = [
        Model::new([
            Outcome::Fail(transport(TransportErrorKind::Connect)),
            Outcome::Fail(transport(TransportErrorKind::Connect)),
            Outcome::Fail(transport(TransportErrorKind::Connect)),
            streams("probe"),
            streams("closed"),
        ]),
        Model::new((0..4).map(|n| streams(&format!("spare {n}")))),
    ];
    let service = deployments(&models, &clock).failures_to_open(2);
    // Each call tries the first (least loaded, first listed), then falls back.
    collect(call(&service, request(true)).unwrap());
    assert_eq!(service.cooling_down(), vec![false, false], "one failure");
    collect(call(&service, request(true)).unwrap());
    assert_eq!(service.cooling_down(), vec![true, false], "two in a row");
    collect(call(&service, request(true)).unwrap());
    assert_eq!(calls(&models), vec![2, 3], "no call while it is open");

    // After the cool-down one probe goes; it fails and the breaker opens again.
    clock.advance(Duration::from_secs(10));
    collect(call(&service, request(true)).unwrap());
    assert_eq!(calls(&models), vec![3, 4]);
    assert_eq!(service.cooling_down(), vec![true, false]);

    // The next probe succeeds: closed.
    clock.advance(Duration::from_secs(10));
    assert_eq!(
        collect(call(&service, request(true)).unwrap()),
        vec![Message::assistant("probe")]
    );
    assert_eq!(service.cooling_down(), vec![false, false]);
    assert_eq!(
        collect(call(&service, request(true)).unwrap()),
        vec![Message::assistant("closed")]
    );
}

#[test]
fn weights_share_the_calls_in_flight_and_the_sessions() {
    let models: Vec<Model> = (0..2)
        .map(|_| Model::new((0..400).map(|_| streams("hi"))))
        .collect();
    let service =
        Deployments::weighted([(models[0].clone(), 3), (models[1].clone(), 1)]).failures_to_open(1);
    assert_eq!(service.weights(), [3, 1]);
    // Calls held in flight: three on the first for each one on the second.
    let held: Vec<Reply> = (0..8)
        .map(|_| call(&service, request(true)).unwrap())
        .collect();
    assert_eq!(service.in_flight(), vec![6, 2]);
    drop(held);
    // Sessions: about three in four on the first, each on its own for good.
    let homes: Vec<usize> = (0..200)
        .map(|n| {
            let before = calls(&models);
            collect(call(&service, keyed(&format!("session-{n}"))).unwrap());
            let after = calls(&models);
            (0..2).find(|&i| after[i] > before[i]).unwrap()
        })
        .collect();
    let first = homes.iter().filter(|&&home| home == 0).count();
    assert!((125..175).contains(&first), "{first} of 200 on the first");
    for (n, home) in homes.iter().enumerate().take(40) {
        let before = models[*home].calls();
        collect(call(&service, keyed(&format!("session-{n}"))).unwrap());
        assert_eq!(models[*home].calls(), before + 1, "session-{n} stayed");
    }
}

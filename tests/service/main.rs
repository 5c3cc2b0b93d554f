//! The generic driver runs one state machine in both modes, with the same result.

#[path = "../common/regressions.rs"]
mod regressions;

use lmstack::service::{Machine, MachineFactory, MachineLayer, Output};
use lmstack::testing::{Chunking, ScriptedModel, Turn, collect_both};
use lmstack::{BoxError, ChatRequest, Error, Event, FinishReason, Message, Reply};
use proptest::prelude::*;
use tower::{Layer, ServiceBuilder, ServiceExt};

/// The example layer: upper-cases assistant text.
#[derive(Clone)]
struct Uppercase;

struct UppercaseMachine;

impl MachineFactory for Uppercase {
    type Machine = UppercaseMachine;
    fn start(&self, _request: &mut ChatRequest) -> Result<UppercaseMachine, Error> {
        Ok(UppercaseMachine)
    }
}

impl Machine for UppercaseMachine {
    type In = Event;
    type Out = Event;

    fn push(&mut self, event: Event, out: &mut Output) -> Result<(), Error> {
        out.push(match event {
            Event::TextDelta(mut delta) => {
                delta.text = delta.text.to_uppercase();
                Event::TextDelta(delta)
            }
            Event::Message {
                message: Message::Text(mut text),
            } => {
                text.text = text.text.to_uppercase();
                Event::message(Message::Text(text))
            }
            other => other,
        });
        Ok(())
    }
}

/// Holds back text after the last space until more text or the end arrives, and
/// fails on a configured word: exercises `finish` and errors.
#[derive(Clone)]
struct WholeWords {
    forbidden: Option<&'static str>,
}

struct WholeWordsMachine {
    held: String,
    forbidden: Option<&'static str>,
}

impl MachineFactory for WholeWords {
    type Machine = WholeWordsMachine;
    fn start(&self, request: &mut ChatRequest) -> Result<WholeWordsMachine, Error> {
        if request.messages.is_empty() {
            return Err(Error::InvalidRequest("no messages".into()));
        }
        request
            .messages
            .insert(0, Message::system("speak in whole words"));
        Ok(WholeWordsMachine {
            held: String::new(),
            forbidden: self.forbidden,
        })
    }
}

impl WholeWordsMachine {
    fn release(&mut self, upto: usize, out: &mut Output) -> Result<(), Error> {
        let words: String = self.held.drain(..upto).collect();
        if let Some(forbidden) = self.forbidden
            && words.contains(forbidden)
        {
            return Err(Error::stage(
                "whole words",
                format!("forbidden word {forbidden:?}"),
            ));
        }
        if !words.is_empty() {
            out.push(Event::text(words));
        }
        Ok(())
    }
}

impl Machine for WholeWordsMachine {
    type In = Event;
    type Out = Event;

    fn push(&mut self, event: Event, out: &mut Output) -> Result<(), Error> {
        let text = match event {
            Event::TextDelta(delta) => delta.text,
            Event::Message {
                message: Message::Text(text),
            } => text.text,
            other => {
                self.finish(out)?;
                out.push(other);
                return Ok(());
            }
        };
        self.held.push_str(&text);
        match self.held.rfind(' ') {
            Some(space) => self.release(space + 1, out),
            None => Ok(()),
        }
    }

    fn finish(&mut self, out: &mut Output) -> Result<(), Error> {
        self.release(self.held.len(), out)
    }
}

fn request(stream: bool) -> ChatRequest {
    ChatRequest::new(vec![Message::user("hi")]).streaming(stream)
}

fn chunking() -> impl Strategy<Value = Chunking> {
    prop_oneof![
        Just(Chunking::Whole),
        Just(Chunking::Bytes(1)),
        Just(Chunking::Chars),
        (any::<u64>(), 1usize..16).prop_map(|(seed, max)| Chunking::Random { seed, max }),
    ]
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(128)))]

    #[test]
    fn uppercase_layer_gives_the_same_messages_in_both_modes(text in "\\PC{0,60}", chunking in chunking()) {
        let make = || MachineLayer::new(Uppercase).layer(ScriptedModel::new().chunking(chunking).reply(text.clone()));
        let (whole, streamed) = futures::executor::block_on(collect_both(make, request(false))).unwrap();
        prop_assert_eq!(&whole, &streamed);
        let want: Vec<Message> = if text.is_empty() { vec![Message::assistant("")] } else { vec![Message::assistant(text.to_uppercase())] };
        prop_assert_eq!(whole, want);
    }

    #[test]
    fn holding_back_gives_the_same_messages_in_both_modes(text in "[a-z ]{0,60}", chunking in chunking()) {
        let make = || MachineLayer::new(WholeWords { forbidden: None })
            .layer(ScriptedModel::new().chunking(chunking).reply(text.clone()));
        let (whole, streamed) = futures::executor::block_on(collect_both(make, request(false))).unwrap();
        prop_assert_eq!(whole, streamed);
    }
}

#[tokio::test]
async fn streaming_releases_output_before_the_reply_ends() {
    let model = ScriptedModel::new()
        .chunking(Chunking::Bytes(3))
        .reply("one two three");
    let service = MachineLayer::new(WholeWords { forbidden: None }).layer(model);
    let events = service
        .oneshot(request(true))
        .await
        .unwrap()
        .collect_events()
        .await
        .unwrap();
    assert_eq!(
        events,
        vec![
            Event::text("one "),
            Event::text("two "),
            Event::text("three"),
            Event::finish(FinishReason::Stop),
        ]
    );
}

#[tokio::test]
async fn non_streaming_reply_is_ready_messages_with_the_finish_event() {
    let model = ScriptedModel::new().reply("one two");
    let service = MachineLayer::new(WholeWords { forbidden: None }).layer(model);
    let reply = service.oneshot(request(false)).await.unwrap();
    assert!(reply.is_ready());
    assert_eq!(
        reply.collect_events().await.unwrap(),
        vec![
            Event::message(Message::assistant("one two")),
            Event::finish(FinishReason::Stop)
        ]
    );
}

#[tokio::test]
async fn a_broken_inner_stream_flushes_held_output_then_fails() {
    let model = ScriptedModel::new().turn(Turn::Break(
        vec![Event::text("kept words"), Event::text(" and")],
        "connection reset".into(),
    ));
    let service = MachineLayer::new(WholeWords { forbidden: None }).layer(model);
    let mut reply = service.oneshot(request(true)).await.unwrap();
    let mut events = Vec::new();
    let mut error = None;
    while let Some(item) = futures::StreamExt::next(&mut reply).await {
        match item {
            Ok(event) => events.push(event),
            Err(e) => error = Some(e),
        }
    }
    assert_eq!(
        events,
        vec![
            Event::text("kept "),
            Event::text("words "),
            Event::text("and")
        ]
    );
    assert_eq!(
        error.expect("the stream error is passed on").to_string(),
        "scripted model: connection reset"
    );
}

#[tokio::test]
async fn a_broken_inner_stream_fails_a_non_streaming_call_with_nothing_made() {
    let model = ScriptedModel::new().turn(Turn::Break(vec![], "reset".into()));
    let service = MachineLayer::new(WholeWords { forbidden: None }).layer(model);
    let error = service.oneshot(request(false)).await.unwrap_err();
    assert_eq!(error.to_string(), "scripted model: reset");
}

#[tokio::test]
async fn a_broken_inner_stream_ends_a_non_streaming_reply_after_what_it_made() {
    let model = ScriptedModel::new().turn(Turn::Break(
        vec![Event::text("kept "), Event::text("a")],
        "reset".into(),
    ));
    let service = MachineLayer::new(WholeWords { forbidden: None }).layer(model);
    let reply = service.oneshot(request(false)).await.unwrap();
    assert!(reply.is_ready());
    let (messages, error) = reply.collect_partial().await;
    assert_eq!(
        messages,
        vec![Message::assistant("kept a")],
        "nothing is lost"
    );
    assert_eq!(error.unwrap().to_string(), "scripted model: reset");
}

#[tokio::test]
async fn a_machine_error_ends_the_reply_after_earlier_output() {
    let model = ScriptedModel::new()
        .chunking(Chunking::Whole)
        .reply_events(vec![
            Event::text("fine "),
            Event::text("bad "),
            Event::text("never"),
        ]);
    let service = MachineLayer::new(WholeWords {
        forbidden: Some("bad"),
    })
    .layer(model);
    let reply = service.oneshot(request(true)).await.unwrap();
    let items: Vec<Result<Event, Error>> = futures::StreamExt::collect(reply).await;
    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!(items[0].as_ref().unwrap(), &Event::text("fine "));
    assert_eq!(
        items[1].as_ref().unwrap_err().to_string(),
        "whole words: forbidden word \"bad\""
    );
}

#[tokio::test]
async fn a_factory_error_fails_the_call_without_calling_the_model() {
    let model = ScriptedModel::new().reply("unused");
    let service = MachineLayer::new(WholeWords { forbidden: None }).layer(model.clone());
    let error = service
        .oneshot(ChatRequest::new(Vec::new()))
        .await
        .unwrap_err();
    assert_eq!(error.to_string(), "invalid request: no messages");
    assert!(model.requests().is_empty());
    assert_eq!(model.remaining(), 1);
}

#[tokio::test]
async fn the_factory_may_rewrite_the_request() {
    let model = ScriptedModel::new().reply("ok");
    let service = MachineLayer::new(WholeWords { forbidden: None }).layer(model.clone());
    service.oneshot(request(false)).await.unwrap();
    assert_eq!(
        model.requests()[0].messages,
        vec![Message::system("speak in whole words"), Message::user("hi")]
    );
}

#[tokio::test]
async fn composes_with_tower_middleware_that_boxes_errors() {
    let model = ScriptedModel::new().reply("boxed");
    let boxed = ServiceBuilder::new()
        .map_err(|error: Error| -> BoxError { Box::new(error) })
        .service(model);
    let service = ServiceBuilder::new()
        .layer(MachineLayer::new(Uppercase))
        .layer(MachineLayer::new(WholeWords { forbidden: None }))
        .service(boxed);
    let messages = service
        .oneshot(request(true))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(messages, vec![Message::assistant("BOXED")]);

    let failing = ServiceBuilder::new()
        .map_err(|error: Error| -> BoxError { Box::new(error) })
        .service(ScriptedModel::new().fail("overloaded"));
    let error = MachineLayer::new(Uppercase)
        .layer(failing)
        .oneshot(request(false))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::Stage {
                stage: "scripted model",
                ..
            }
        ),
        "a boxed lmstack error comes back as itself: {error:?}"
    );
}

#[test]
fn replies_can_be_built_from_messages() {
    let reply = Reply::from_messages([Message::assistant("x")]);
    assert!(reply.is_ready());
    let messages = futures::executor::block_on(reply.collect()).unwrap();
    assert_eq!(messages, vec![Message::assistant("x")]);
}

/// Both forms of a reply of `events`, then `error` if given.
fn both_forms(events: &[Event], error: Option<&str>) -> [Reply; 2] {
    let items = || {
        let mut items: Vec<Result<Event, Error>> = events.iter().cloned().map(Ok).collect();
        items.extend(error.map(|message| Err(Error::stage("model", message))));
        items
    };
    [
        Reply::from_results(items()),
        Reply::from_stream(futures::stream::iter(items())),
    ]
}

#[tokio::test]
async fn the_adapters_keep_a_replys_form_and_see_every_event() {
    let events = [
        Event::text("a"),
        Event::text("b"),
        Event::finish(FinishReason::Stop),
    ];
    for reply in both_forms(&events, None) {
        let ready = reply.is_ready();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        let reply = reply
            .map_events(|event| match event {
                Event::TextDelta(mut delta) => {
                    delta.text.push('!');
                    Event::TextDelta(delta)
                }
                other => other,
            })
            .filter_map_events(|event| (!matches!(event, Event::Finish { .. })).then_some(event))
            .inspect(move |event| log.lock().unwrap().push(event.clone()))
            .map_err(|error| error);
        assert_eq!(reply.is_ready(), ready, "the form is kept");
        let got = reply.collect_events().await.unwrap();
        assert_eq!(
            got,
            [Event::text("a!"), Event::text("b!")],
            "ready: {ready}"
        );
        assert_eq!(*seen.lock().unwrap(), got, "inspect saw every event");
    }
}

#[tokio::test]
async fn map_err_rewrites_the_error_that_ends_a_reply() {
    for reply in both_forms(&[Event::text("a")], Some("cut")) {
        let reply = reply.map_err(|error| Error::stage("mine", error.to_string()));
        let (messages, error) = reply.collect_partial().await;
        assert_eq!(messages, vec![Message::assistant("a")]);
        assert_eq!(error.unwrap().to_string(), "mine: model: cut");
    }
}

#[tokio::test]
async fn on_end_is_called_once_at_the_end_with_the_error_if_one_ended_the_reply() {
    for error in [None, Some("cut")] {
        for reply in both_forms(&[Event::text("a")], error) {
            let ready = reply.is_ready();
            let (tell, told) = futures::channel::oneshot::channel();
            let reply = reply.on_end(move |error| {
                let _ = tell.send(error.map(ToString::to_string));
            });
            assert_eq!(reply.is_ready(), ready);
            let _ = reply.collect_partial().await;
            let want = error.map(|message| format!("model: {message}"));
            assert_eq!(told.await, Ok(want), "ready: {ready}");
        }
    }
}

#[tokio::test]
async fn a_streaming_reply_dropped_before_its_end_drops_on_end_uncalled() {
    let [_, streaming] = both_forms(&[Event::text("a"), Event::text("b")], None);
    let (tell, told) = futures::channel::oneshot::channel::<()>();
    let mut reply = streaming.on_end(move |_| {
        let _ = tell.send(());
    });
    assert!(futures::StreamExt::next(&mut reply).await.is_some());
    drop(reply);
    assert!(told.await.is_err(), "the sender was dropped, not used");
}

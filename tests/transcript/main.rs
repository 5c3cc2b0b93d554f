//! Transcripts: every request and reply event written as timestamped JSON lines
//! by a writer thread behind a bounded queue, and replayed without the model.

#![cfg(feature = "function")]

use std::convert::Infallible;
use std::future::Future;
use std::io::{self, Write};
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use futures::executor::block_on;
use futures::stream::StreamExt;
use lmstack::function::{FunctionCallLayer, Tool, ToolLoopLayer, ToolRegistry};
use lmstack::testing::{self, Chunking, ScriptedModel, Turn};
use lmstack::transcript::{self, Entry, OnFull, Record, SharedBuffer, TranscriptLayer};
use lmstack::{ChatRequest, ContentBlock, Error, Event, Message, Role, ToolCall, ToolResult};
use serde_json::{Value, json};
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

fn request(text: &str, stream: bool) -> ChatRequest {
    ChatRequest::new(vec![Message::user(text)]).streaming(stream)
}

fn lines(buffer: &SharedBuffer) -> Vec<Value> {
    String::from_utf8(buffer.contents())
        .unwrap()
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn kinds(lines: &[Value]) -> Vec<(u64, &str)> {
    lines
        .iter()
        .map(|l| (l["exchange"].as_u64().unwrap(), l["kind"].as_str().unwrap()))
        .collect()
}

/// Long enough for any test machine; a test that blocks fails after it rather
/// than hanging.
const WATCHDOG: Duration = Duration::from_secs(20);

/// A door the test writers wait at: closed until `open`.
#[derive(Clone, Default)]
struct Gate {
    shared: Arc<(Mutex<GateState>, Condvar)>,
}

#[derive(Default)]
struct GateState {
    open: bool,
    /// Writes that reached the gate.
    arrived: usize,
}

impl Gate {
    fn open(&self) {
        self.shared.0.lock().unwrap().open = true;
        self.shared.1.notify_all();
    }

    fn is_open(&self) -> bool {
        self.shared.0.lock().unwrap().open
    }

    fn wait(&self) {
        let mut state = self.shared.0.lock().unwrap();
        state.arrived += 1;
        self.shared.1.notify_all();
        while !state.open {
            state = self.shared.1.wait(state).unwrap();
        }
    }

    /// Waits until a write is held at the gate.
    fn wait_for_a_writer(&self) {
        let state = self.shared.0.lock().unwrap();
        let (state, _) = self
            .shared
            .1
            .wait_timeout_while(state, WATCHDOG, |state| state.arrived == 0)
            .unwrap();
        assert!(state.arrived > 0, "the writer never wrote");
    }

    /// Opens the gate after `WATCHDOG` unless it was opened before, so that a test
    /// whose conversation blocks on the writer ends (and fails) instead of
    /// hanging. The test checks the gate is still closed where it must be.
    fn watchdog(&self) -> JoinHandle<()> {
        let gate = self.clone();
        std::thread::spawn(move || {
            let (state, changed) = &*gate.shared;
            let state = state.lock().unwrap();
            let (state, _) = changed
                .wait_timeout_while(state, WATCHDOG, |state| !state.open)
                .unwrap();
            drop(state);
            gate.open();
        })
    }
}

/// A writer that blocks every write until its gate opens, and shows what was
/// written only once flushed. It says when it is dropped.
struct Held {
    gate: Gate,
    unflushed: Vec<u8>,
    visible: SharedBuffer,
    dropped: Option<std::sync::mpsc::Sender<()>>,
}

impl Held {
    fn new(gate: &Gate, visible: &SharedBuffer) -> Self {
        Held {
            gate: gate.clone(),
            unflushed: Vec::new(),
            visible: visible.clone(),
            dropped: None,
        }
    }
}

impl Write for Held {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.gate.wait();
        self.unflushed.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.visible.write_all(&std::mem::take(&mut self.unflushed))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(dropped) = &self.dropped {
            let _ = dropped.send(());
        }
    }
}

/// Counts its wake-ups.
#[derive(Default)]
struct Wakes {
    count: Mutex<usize>,
    changed: Condvar,
}

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        *self.count.lock().unwrap() += 1;
        self.changed.notify_all();
    }
}

impl Wakes {
    /// Waits until woken more than `seen` times; false after `WATCHDOG`.
    fn woken_after(&self, seen: usize) -> bool {
        let count = self.count.lock().unwrap();
        let (count, _) = self
            .changed
            .wait_timeout_while(count, WATCHDOG, |count| *count <= seen)
            .unwrap();
        *count > seen
    }

    fn count(&self) -> usize {
        *self.count.lock().unwrap()
    }
}

/// "Hello, world" in 1-byte deltas: 12 deltas and a finish.
fn hello_model() -> ScriptedModel {
    ScriptedModel::new()
        .yielding(false)
        .chunking(Chunking::Bytes(1))
        .reply("Hello, world")
}

const HELLO_EVENTS: usize = 13;

#[tokio::test]
async fn every_request_and_event_is_written_with_a_timestamp() {
    let buffer = SharedBuffer::default();
    let model = ScriptedModel::new()
        .chunking(Chunking::Bytes(3))
        .reply("Hello!")
        .reply("Bye.");
    let recorder = TranscriptLayer::new(buffer.clone());
    let service = recorder.layer(model);
    let before = SystemTime::now() - Duration::from_secs(1);
    service
        .clone()
        .oneshot(request("hi", true))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let reply = service.oneshot(request("bye", false)).await.unwrap();
    assert!(reply.is_ready(), "a non-streaming reply stays in memory");
    reply.collect().await.unwrap();
    recorder.flush().await;

    let lines = lines(&buffer);
    assert_eq!(
        kinds(&lines),
        [
            (1, "request"),
            (1, "event"),
            (1, "event"),
            (1, "event"),
            (1, "end"),
            (2, "request"),
            (2, "event"),
            (2, "event"),
            (2, "end"),
        ]
    );
    assert_eq!(lines[0]["request"]["messages"][0]["text"], "hi");
    assert_eq!(
        lines[1]["event"],
        json!({"type": "text_delta", "text": "Hel"})
    );
    assert_eq!(
        lines[6]["event"]["message"],
        json!({"type": "text", "role": "assistant", "text": "Bye."})
    );
    for line in &lines {
        let entry: Entry = serde_json::from_value(line.clone()).unwrap();
        assert!(
            entry.at >= before && entry.at <= SystemTime::now(),
            "{line}"
        );
        let at = line["at"].as_str().unwrap();
        assert!(
            at.ends_with('Z') && at.len() == "2025-01-01T00:00:00.000Z".len(),
            "{at}"
        );
    }
}

#[tokio::test]
async fn errors_are_written_and_replayed() {
    let buffer = SharedBuffer::default();
    let model = ScriptedModel::new()
        .fail("overloaded")
        .turn(Turn::Break(vec![Event::text("partial")], "reset".into()));
    let recorder = TranscriptLayer::new(buffer.clone());
    let service = recorder.layer(model);
    let error = service
        .clone()
        .oneshot(request("a", true))
        .await
        .unwrap_err();
    assert_eq!(error.to_string(), "scripted model: overloaded");
    let error = service
        .oneshot(request("b", true))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err();
    assert_eq!(error.to_string(), "scripted model: reset");
    recorder.flush().await;

    let exchanges = transcript::read(buffer.contents().as_slice()).unwrap();
    assert_eq!(exchanges.len(), 2);
    assert_eq!(
        exchanges[0].error.as_deref(),
        Some("scripted model: overloaded")
    );
    assert_eq!(exchanges[1].events, vec![Event::text("partial")]);
    assert!(exchanges.iter().all(|e| e.complete && !e.lost));

    let replay = testing::replay(buffer.contents().as_slice()).unwrap();
    let error = replay
        .clone()
        .oneshot(request("a", true))
        .await
        .unwrap_err();
    assert!(
        error.to_string().ends_with("scripted model: overloaded"),
        "{error}"
    );
    let error = replay
        .oneshot(request("b", true))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err();
    assert!(
        error.to_string().ends_with("scripted model: reset"),
        "{error}"
    );
}

/// ToolLoop → FunctionCall (with `add`) → `model`.
fn tool_stack<S>(
    model: S,
) -> impl tower::Service<ChatRequest, Response = lmstack::Reply, Error = Error>
where
    S: tower::Service<ChatRequest, Response = lmstack::Reply, Error = Error>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let add = Tool::dynamic(
        "add",
        "Adds",
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}),
        |args: Value| async move {
            let sum = args["a"].as_i64().unwrap() + args["b"].as_i64().unwrap();
            Ok::<_, Infallible>(sum.to_string())
        },
    );
    ServiceBuilder::new()
        .layer(ToolLoopLayer::new())
        .layer(FunctionCallLayer::new(ToolRegistry::new([add]).unwrap()))
        .service(model)
}

#[tokio::test]
async fn a_tool_conversation_recorded_at_the_model_replays_without_it() {
    let model = ScriptedModel::new()
        .reply_messages(vec![Message::tool_calls(vec![ToolCall::new(
            "c1",
            "add",
            json!({"a": 2, "b": 3}),
        )])])
        .reply("2 + 3 = 5");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("conversation.jsonl");
    let recorder = TranscriptLayer::to_file(&path).unwrap();
    let live = tool_stack(recorder.layer(model))
        .oneshot(request("2 + 3?", true))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(live.last(), Some(&Message::assistant("2 + 3 = 5")));
    recorder.flush().await;

    let text = std::fs::read_to_string(&path).unwrap();
    let exchanges = transcript::read(text.as_bytes()).unwrap();
    assert_eq!(exchanges.len(), 2, "two model calls");
    assert!(matches!(
        &exchanges[1].request.messages[1],
        Message::ToolAggregate(_)
    ));

    for stream in [true, false] {
        let replay = testing::replay(text.as_bytes()).unwrap();
        let replayed = tool_stack(replay.clone())
            .oneshot(request("2 + 3?", stream))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert_eq!(replayed, live, "stream: {stream}");
        let requests: Vec<ChatRequest> = exchanges.iter().map(|e| e.request.clone()).collect();
        let mut asked = replay.requests();
        asked.iter_mut().for_each(|r| r.options.stream = true);
        assert_eq!(asked, requests, "the stack asked what was recorded");
    }
}

#[test]
fn a_file_transcript_is_appended_to() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    for text in ["one", "two"] {
        let recorder = TranscriptLayer::to_file(&path).unwrap();
        let service = recorder.layer(ScriptedModel::new().reply(text));
        block_on(async {
            let reply = service.oneshot(request(text, false)).await?.collect().await;
            recorder.flush().await;
            reply
        })
        .unwrap();
    }
    let exchanges = transcript::read(std::fs::read(&path).unwrap().as_slice()).unwrap();
    let answers: Vec<_> = exchanges
        .iter()
        .map(|e| lmstack::Joiner::join(e.events.clone()))
        .collect();
    assert_eq!(
        answers,
        [
            vec![Message::assistant("one")],
            vec![Message::assistant("two")]
        ]
    );
}

#[test]
fn audio_is_written_and_read_back_as_audio_blocks() {
    let audio = ContentBlock::audio_bytes("audio/wav", b"RIFF\x24\0\0\0WAVE");
    let result = ToolResult::new(
        "call_1",
        "speak",
        vec![ContentBlock::text("Said."), audio.clone()],
    );
    let reply = vec![Message::tool_aggregate(
        vec![ToolCall::new("call_1", "speak", json!({}))],
        vec![result],
    )];
    let buffer = SharedBuffer::default();
    let recorder = TranscriptLayer::new(buffer.clone());
    let service = recorder.layer(ScriptedModel::new().reply_messages(reply.clone()));
    let asked = ChatRequest::new(vec![Message::multimodal(
        Role::User,
        vec![ContentBlock::text("Transcribe"), audio],
    )]);
    block_on(async {
        let reply = service.oneshot(asked.clone()).await?.collect().await;
        recorder.flush().await;
        reply
    })
    .unwrap();
    let written = lines(&buffer);
    assert_eq!(
        written[0]["request"]["messages"][0]["content"][1],
        json!({"type": "audio", "media_type": "audio/wav", "data": "UklGRiQAAABXQVZF"})
    );
    let exchanges = transcript::read(buffer.contents().as_slice()).unwrap();
    assert_eq!(exchanges[0].request, asked);
    assert_eq!(lmstack::Joiner::join(exchanges[0].events.clone()), reply);
}

#[test]
fn a_broken_transcript_is_a_clear_error() {
    let error = transcript::read(
        "{\"at\":\"2025-01-01T00:00:00Z\",\"exchange\":1,\"kind\":\"end\"}\n".as_bytes(),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "transcript: line 1 belongs to exchange 1, whose request is not recorded before it"
    );
    let error = transcript::read("not json\n".as_bytes()).unwrap_err();
    assert!(matches!(error, Error::Json { .. }), "{error:?}");
    assert!(
        error.to_string().starts_with("transcript line 1: "),
        "{error}"
    );
    let entry: Entry = serde_json::from_str(
        r#"{"at":"2025-01-01T00:00:00.5Z","exchange":7,"kind":"error","message":"x"}"#,
    )
    .unwrap();
    assert_eq!(entry.exchange, 7);
    assert_eq!(
        entry.record,
        Record::Error {
            message: "x".into()
        }
    );
}

// ---- The writer thread, its queue and the policies ----

/// Polls `reply` until it returns `Pending`; the items it gave before.
fn poll_until_pending(reply: &mut lmstack::Reply, cx: &mut Context<'_>) -> Vec<Event> {
    let mut received = Vec::new();
    loop {
        match reply.poll_next_unpin(cx) {
            Poll::Ready(Some(item)) => received.push(item.unwrap()),
            Poll::Ready(None) => panic!("the reply ended without waiting for the writer"),
            Poll::Pending => return received,
        }
    }
}

#[test]
fn under_back_pressure_a_streaming_reply_returns_pending_instead_of_blocking() {
    let gate = Gate::default();
    let visible = SharedBuffer::default();
    let recorder = TranscriptLayer::new(Held::new(&gate, &visible)).capacity(2);
    let mut service = recorder.layer(hello_model());
    let watchdog = gate.watchdog();
    let wakes = Arc::new(Wakes::default());
    let waker = Waker::from(wakes.clone());
    let mut cx = Context::from_waker(&waker);

    let mut future = service.call(request("hi", true));
    let Poll::Ready(reply) = Pin::new(&mut future).poll(&mut cx) else {
        panic!("the request's record should have found room");
    };
    let mut reply = reply.unwrap();
    // The writer blocks on its first record; the queue holds two more, so the
    // reply can hand out at most two events before it must wait.
    let mut received = poll_until_pending(&mut reply, &mut cx);
    assert!(
        !gate.is_open(),
        "poll_next blocked until the watchdog opened the writer"
    );
    assert!(
        (1..=2).contains(&received.len()),
        "{} events before waiting",
        received.len()
    );
    assert!(visible.contents().is_empty());

    let seen = wakes.count();
    gate.open();
    assert!(wakes.woken_after(seen), "room in the queue wakes the reply");
    received.extend(block_on(reply.collect_events()).unwrap());
    assert_eq!(received.len(), HELLO_EVENTS);
    block_on(recorder.flush());
    watchdog.join().unwrap();

    let lines = lines(&visible);
    let mut expected = vec![(1, "request")];
    expected.extend([(1, "event"); HELLO_EVENTS]);
    expected.push((1, "end"));
    assert_eq!(kinds(&lines), expected, "everything recorded, in order");
    let recorded: Vec<Event> = lines[1..=HELLO_EVENTS]
        .iter()
        .map(|line| serde_json::from_value(line["event"].clone()).unwrap())
        .collect();
    assert_eq!(recorded, received);
    assert_eq!(recorder.dropped(), 0);
}

#[test]
fn under_back_pressure_a_non_streaming_call_returns_pending_instead_of_blocking() {
    let gate = Gate::default();
    let visible = SharedBuffer::default();
    let recorder = TranscriptLayer::new(Held::new(&gate, &visible)).capacity(1);
    let mut service = recorder.layer(hello_model());
    let watchdog = gate.watchdog();
    let waker = Waker::from(Arc::new(Wakes::default()));
    let mut cx = Context::from_waker(&waker);

    let mut future = service.call(request("hi", false));
    assert!(Pin::new(&mut future).poll(&mut cx).is_pending());
    assert!(
        !gate.is_open(),
        "poll blocked until the watchdog opened the writer"
    );

    gate.open();
    let reply = block_on(future).unwrap();
    assert!(reply.is_ready(), "a non-streaming reply stays in memory");
    assert_eq!(
        block_on(reply.collect()).unwrap(),
        vec![Message::assistant("Hello, world")]
    );
    block_on(recorder.flush());
    watchdog.join().unwrap();
    // Non-streaming: one message event and the finish.
    assert_eq!(
        kinds(&lines(&visible)),
        [(1, "request"), (1, "event"), (1, "event"), (1, "end")]
    );
}

#[test]
fn under_the_drop_policy_a_reply_never_waits_and_the_loss_is_counted_and_written() {
    let gate = Gate::default();
    let visible = SharedBuffer::default();
    let recorder = TranscriptLayer::new(Held::new(&gate, &visible))
        .capacity(2)
        .on_full(OnFull::Drop);
    let service = recorder.layer(hello_model());
    let watchdog = gate.watchdog();

    let messages = block_on(async {
        let reply = service.oneshot(request("hi", true)).await?;
        reply.collect().await
    })
    .unwrap();
    assert!(
        !gate.is_open(),
        "the reply waited until the watchdog opened the writer"
    );
    assert_eq!(messages, vec![Message::assistant("Hello, world")]);
    // The request, the events and the end; the queue held two of them, and the
    // writer perhaps one more.
    let records = 1 + HELLO_EVENTS as u64 + 1;
    let dropped = recorder.dropped();
    assert!(
        (records - 3..=records - 2).contains(&dropped),
        "{dropped} of {records} dropped"
    );

    gate.open();
    block_on(recorder.flush());
    watchdog.join().unwrap();
    let lines = lines(&visible);
    let written = lines.iter().filter(|l| l["kind"] != "dropped").count() as u64;
    assert_eq!(
        written + dropped,
        records,
        "every record written or counted"
    );
    assert_eq!(lines[0]["kind"], "request");
    // The gaps are marked where they were (usually one, at the end; two if the
    // writer took its first record late).
    let last = lines.last().unwrap();
    assert_eq!(
        (&last["exchange"], &last["kind"]),
        (&json!(0), &json!("dropped"))
    );
    let marked: u64 = lines
        .iter()
        .filter(|l| l["kind"] == "dropped")
        .map(|l| l["records"].as_u64().unwrap())
        .sum();
    assert_eq!(
        marked, dropped,
        "every dropped record is marked in the transcript"
    );
    assert_eq!(recorder.write_errors(), 0);

    let exchanges = transcript::read(visible.contents().as_slice()).unwrap();
    assert_eq!(exchanges.len(), 1);
    assert!(exchanges[0].lost && !exchanges[0].complete);
    let error = testing::replay(visible.contents().as_slice()).unwrap_err();
    assert!(error.to_string().contains("lacks"), "{error}");
}

#[test]
fn a_dropped_request_leaves_a_hole_in_the_numbering_and_read_accepts_it() {
    let gate = Gate::default();
    let visible = SharedBuffer::default();
    let recorder = TranscriptLayer::new(Held::new(&gate, &visible))
        .capacity(1)
        .on_full(OnFull::Drop);
    let model = ScriptedModel::new()
        .yielding(false)
        .reply("one")
        .reply("two")
        .reply("three");
    let service = recorder.layer(model);
    let watchdog = gate.watchdog();
    // The writer takes the first request and is held; the first event fills the
    // queue, and everything after it is dropped: the rest of exchange 1, and all
    // of exchange 2.
    let reply = block_on(service.clone().oneshot(request("one", true))).unwrap();
    gate.wait_for_a_writer();
    block_on(reply.collect()).unwrap();
    block_on(async {
        service
            .clone()
            .oneshot(request("two", true))
            .await?
            .collect()
            .await
    })
    .unwrap();
    assert!(!gate.is_open());
    gate.open();
    block_on(recorder.flush());
    // Now the writer is free and the queue large: the third exchange is recorded
    // whole. (The options are shared by the layer's clones and its services.)
    let _ = recorder.clone().capacity(64);
    block_on(async {
        service
            .oneshot(request("three", true))
            .await?
            .collect()
            .await
    })
    .unwrap();
    block_on(recorder.flush());
    watchdog.join().unwrap();

    let exchanges = transcript::read(visible.contents().as_slice()).unwrap();
    let last = exchanges.last().unwrap();
    assert_eq!(
        last.number, 3,
        "numbers are given whether or not records are kept"
    );
    assert!(last.complete && !last.lost);
    assert_eq!(
        lmstack::Joiner::join(last.events.clone()),
        vec![Message::assistant("three")]
    );
    assert!(
        exchanges.iter().all(|e| e.number != 2),
        "exchange 2's request was dropped: {exchanges:?}"
    );
}

#[test]
fn flush_makes_everything_visible() {
    let gate = Gate::default();
    let visible = SharedBuffer::default();
    let recorder = TranscriptLayer::new(Held::new(&gate, &visible));
    let service = recorder.layer(ScriptedModel::new().reply("Hello"));
    block_on(async { service.oneshot(request("hi", false)).await?.collect().await }).unwrap();
    assert!(visible.contents().is_empty(), "the writer is held");

    let opener = {
        let gate = gate.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            gate.open();
        })
    };
    block_on(recorder.flush());
    // `Held` shows bytes only once flushed: the writer flushed after writing all.
    assert_eq!(
        kinds(&lines(&visible)),
        [(1, "request"), (1, "event"), (1, "event"), (1, "end")]
    );
    opener.join().unwrap();
    // Nothing queued: a flush resolves at once.
    block_on(recorder.flush());
}

#[test]
fn when_everything_is_dropped_the_writer_drains_the_queue_and_stops() {
    let gate = Gate::default();
    let visible = SharedBuffer::default();
    let (dropped_tx, dropped_rx) = std::sync::mpsc::channel();
    let mut writer = Held::new(&gate, &visible);
    writer.dropped = Some(dropped_tx);
    let recorder = TranscriptLayer::new(writer);
    let service = recorder.layer(ScriptedModel::new().reply("Hello"));
    block_on(async { service.oneshot(request("hi", true)).await?.collect().await }).unwrap();
    drop(recorder);
    assert!(dropped_rx.try_recv().is_err(), "the writer still has work");

    gate.open();
    dropped_rx
        .recv_timeout(WATCHDOG)
        .expect("the writer stops once it has drained the queue");
    let lines = lines(&visible);
    let kinds = kinds(&lines);
    assert_eq!(kinds.first(), Some(&(1, "request")));
    assert_eq!(kinds.last(), Some(&(1, "end")));
}

/// Fails the writes whose number (from 0) is in `failing`, writing nothing.
struct Failing {
    failing: Vec<usize>,
    calls: usize,
    visible: SharedBuffer,
}

impl Write for Failing {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let call = self.calls;
        self.calls += 1;
        if self.failing.contains(&call) {
            return Err(io::Error::other("disk on fire"));
        }
        self.visible.write(bytes)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn writer_errors_are_counted_and_marked_and_do_not_disturb_the_conversation() {
    let visible = SharedBuffer::default();
    let recorder = TranscriptLayer::new(Failing {
        failing: vec![1],
        calls: 0,
        visible: visible.clone(),
    });
    let service = recorder.layer(hello_model());
    let messages =
        block_on(async { service.oneshot(request("hi", true)).await?.collect().await }).unwrap();
    assert_eq!(messages, vec![Message::assistant("Hello, world")]);
    block_on(recorder.flush());
    assert_eq!(recorder.write_errors(), 1);
    assert_eq!(recorder.dropped(), 0, "nothing dropped by the policy");

    // The first event's line failed: a `dropped` line stands in its place.
    let lines = lines(&visible);
    let mut expected = vec![(1, "request"), (0, "dropped")];
    expected.extend([(1, "event"); HELLO_EVENTS - 1]);
    expected.push((1, "end"));
    assert_eq!(kinds(&lines), expected);
    assert_eq!(lines[1]["records"], 1);
    let exchanges = transcript::read(visible.contents().as_slice()).unwrap();
    assert!(exchanges[0].lost && exchanges[0].complete);

    // A writer that always fails: the conversation still goes through.
    let recorder = TranscriptLayer::new(Failing {
        failing: (0..100).collect(),
        calls: 0,
        visible: SharedBuffer::default(),
    });
    let service = recorder.layer(hello_model());
    let messages =
        block_on(async { service.oneshot(request("hi", true)).await?.collect().await }).unwrap();
    assert_eq!(messages, vec![Message::assistant("Hello, world")]);
    block_on(recorder.flush());
    assert_eq!(recorder.write_errors(), 1 + HELLO_EVENTS as u64 + 1);
}

struct Panicking;

impl Write for Panicking {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        panic!("a writer that panics (expected by this test)")
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_writer_that_panics_neither_stops_the_conversation_nor_hangs_a_flush() {
    let recorder = TranscriptLayer::new(Panicking).capacity(1);
    let service = recorder.layer(hello_model());
    let started = Instant::now();
    let messages = block_on(async {
        let messages = service.oneshot(request("hi", true)).await?.collect().await;
        recorder.flush().await;
        messages
    })
    .unwrap();
    assert_eq!(messages, vec![Message::assistant("Hello, world")]);
    assert!(started.elapsed() < WATCHDOG);
    assert!(recorder.write_errors() >= 1);
}

#[test]
fn a_flush_waits_for_records_queued_before_it_only() {
    let gate = Gate::default();
    let visible = SharedBuffer::default();
    let recorder = TranscriptLayer::new(Held::new(&gate, &visible));
    let waker = Waker::from(Arc::new(Wakes::default()));
    let mut cx = Context::from_waker(&waker);
    // Nothing recorded yet: resolves at once, even with the writer held.
    assert!(Pin::new(&mut recorder.flush()).poll(&mut cx).is_ready());

    let service = recorder.layer(ScriptedModel::new().reply("Hello"));
    block_on(async { service.oneshot(request("hi", false)).await?.collect().await }).unwrap();
    let mut flush = recorder.flush();
    assert!(Pin::new(&mut flush).poll(&mut cx).is_pending());
    gate.open();
    block_on(flush);
    assert_eq!(lines(&visible).len(), 4);
}

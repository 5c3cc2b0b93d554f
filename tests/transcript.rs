//! Transcripts: every request and reply event written as timestamped JSON lines,
//! and replayed without the model.

use std::convert::Infallible;
use std::time::{Duration, SystemTime};

use lmstack::function::{FunctionCallLayer, Tool, ToolLoopLayer, ToolRegistry};
use lmstack::testing::{self, Chunking, ScriptedModel, Turn};
use lmstack::transcript::{self, Entry, Record, SharedBuffer, TranscriptLayer};
use lmstack::{ChatRequest, Error, Event, Message, ToolCall};
use serde_json::{Value, json};
use tower::{Layer, ServiceBuilder, ServiceExt};

fn request(text: &str, stream: bool) -> ChatRequest {
    ChatRequest::new(vec![Message::user(text)]).streaming(stream)
}

fn lines(buffer: &SharedBuffer) -> Vec<Value> {
    String::from_utf8(buffer.contents())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[tokio::test]
async fn every_request_and_event_is_written_with_a_timestamp() {
    let buffer = SharedBuffer::default();
    let model = ScriptedModel::new()
        .chunking(Chunking::Bytes(3))
        .reply("Hello!")
        .reply("Bye.");
    let service = TranscriptLayer::new(buffer.clone()).layer(model);
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

    let lines = lines(&buffer);
    let kinds: Vec<(u64, &str)> = lines
        .iter()
        .map(|l| (l["exchange"].as_u64().unwrap(), l["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
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
    let service = TranscriptLayer::new(buffer.clone()).layer(model);
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

    let exchanges = transcript::read(buffer.contents().as_slice()).unwrap();
    assert_eq!(exchanges.len(), 2);
    assert_eq!(
        exchanges[0].error.as_deref(),
        Some("scripted model: overloaded")
    );
    assert_eq!(exchanges[1].events, vec![Event::text("partial")]);
    assert!(exchanges.iter().all(|e| e.complete));

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
        let service = TranscriptLayer::to_file(&path)
            .unwrap()
            .layer(ScriptedModel::new().reply(text));
        futures::executor::block_on(async {
            service
                .oneshot(request(text, false))
                .await
                .unwrap()
                .collect()
                .await
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

//! The server direction of Anthropic Messages: every recorded request decodes
//! and lowers back to itself; by property, decoding inverts lowering, and
//! lifting the encoder's output (SSE cut anywhere, or one JSON body) gives the
//! messages the joiner makes of the events; bad requests name the field at
//! fault; error bodies; no panic on any bytes.

#![cfg(feature = "anthropic")]

use crate::common;

use bytes::Bytes;
use common::*;
use futures::StreamExt;
use lmstack::message::ReasoningMessage;
use lmstack::provider::anthropic::types::{Response, StreamEvent};
use lmstack::provider::anthropic::{
    BLOCK_KEY, CACHE_CREATION_KEY, Lifter, LowerOptions, MESSAGE_DELTA_KEY, MESSAGE_START_KEY,
    ReplyEncoder, TOOL_CHOICE_KEY, decode_request, error_body, lower,
};
use lmstack::provider::body::BodyDecoder;
use lmstack::provider::sse::SseDecoder;
use lmstack::provider::{ProviderError, TransportError, TransportErrorKind};
use lmstack::service::{Machine, MachineStream, Output};
use lmstack::{
    CacheControl, ChatRequest, ContentBlock, Error, Event, FinishReason, Joiner, Media, Message,
    Metadata, Role, ToolCall, ToolCallDelta, ToolChoice, ToolResult, ToolSpec, Usage,
};
use proptest::prelude::*;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------
// Requests

/// Every request body the fixtures record.
fn recorded_requests() -> Vec<(String, Value)> {
    let mut requests = Vec::new();
    for name in [
        "anthropic/fantasy/TestAnthropicCommon/claude-sonnet-4/multi_tool_streaming.yaml",
        "anthropic/fantasy/TestAnthropicThinking/claude-sonnet-4/thinking-streaming.yaml",
    ] {
        for (n, exchange) in cassette(name).into_iter().enumerate() {
            requests.push((format!("{name} {n}"), exchange.request));
        }
    }
    for id in [
        "10e53c1d-51be-4c64-b5bf-99adb3fa4719",
        "555fb399-a54c-455b-9ac5-2c9673f18e12",
        "d743d628-16aa-4c9f-ae78-51deb578f746",
        "f59a9391-643b-422c-96dc-1f28bc7ea4d7",
    ] {
        let name = format!("anthropic/anthropic-sdk-python/{id}.json");
        for (n, exchange) in json_cassette(&name).into_iter().enumerate() {
            requests.push((format!("{name} {n}"), exchange.request));
        }
    }
    requests
}

/// A body in one spelling, by the normalisation decoding and lowering make:
/// a string `content` or `system` is one text block (the API reads both
/// alike).
fn normalise(mut body: Value) -> Value {
    common::anthropic_text_blocks(&mut body);
    body
}

/// Where a Messages body's objects may carry fields lmstack does not know:
/// the body, its system blocks, its messages, their blocks and the blocks of
/// their tool results, its tools. (`tool_choice` keeps only its
/// `disable_parallel_tool_use`.)
const OBJECTS: [&str; 5] = [
    "/system",
    "/messages",
    "/messages/*/content",
    "/messages/*/content/*/content",
    "/tools",
];

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(64)))]

    /// Unknown fields anywhere a client may put them come back from decoding
    /// and lowering in their place.
    #[test]
    fn unknown_fields_come_back_in_place(
        pick in any::<prop::sample::Index>(),
        fields in unknown_fields(),
    ) {
        let mut bodies = recorded_requests();
        let own = "anthropic/hand-made/claude-code-request.json";
        bodies.push((own.into(), serde_json::from_slice(&fixture(own)).unwrap()));
        let (name, body) = bodies.swap_remove(pick.index(bodies.len()));
        let places = object_places(&body, &OBJECTS);
        let sent = with_unknown_fields(body, &places, &fields);
        let request = decode_request(sent.to_string().as_bytes())
            .map_err(|e| TestCaseError::fail(format!("{name}: {e}")))?;
        let lowered = lower(&request, &LowerOptions::default()).unwrap();
        prop_assert_eq!(normalise(lowered), normalise(sent), "{}", name);
    }
}

#[test]
fn every_recorded_request_decodes_and_lowers_back_to_itself() {
    let requests = recorded_requests();
    assert_eq!(requests.len(), 13);
    for (name, body) in requests {
        let request = decode_request(body.to_string().as_bytes())
            .unwrap_or_else(|error| panic!("{name}: {error}"));
        let lowered = lower(&request, &LowerOptions::default()).unwrap();
        assert_eq!(normalise(lowered), normalise(body.clone()), "{name}");
    }
}

#[test]
fn a_recorded_follow_up_decodes_to_the_canonical_history() {
    let name = "anthropic/anthropic-sdk-python/10e53c1d-51be-4c64-b5bf-99adb3fa4719.json";
    let body = &json_cassette(name)[1].request;
    let request = decode_request(body.to_string().as_bytes()).unwrap();
    let mut call = ToolCall::new(
        "toolu_01A9HHF5Ezy3oBrKmSgfASm9",
        "get_weather",
        json!({"location": "San Francisco, CA", "units": "f"}),
    );
    call.metadata.insert(
        BLOCK_KEY,
        json!({"caller": {"type": "direct"}, "type": "tool_use"}),
    );
    let result = ToolResult::error(
        "toolu_01A9HHF5Ezy3oBrKmSgfASm9",
        "get_weather",
        "RuntimeError('Unexpected error, try again')",
    );
    assert_eq!(
        request.messages,
        vec![
            Message::user("What is the weather in SF?"),
            Message::tool_calls(vec![call]),
            Message::tool_results(vec![result]),
        ]
    );
    assert_eq!(request.options.model.as_deref(), Some("claude-haiku-4-5"));
    assert_eq!(request.options.max_tokens, Some(1024));
    assert_eq!(request.options.tools[0].name, "get_weather");
}

#[test]
fn thinking_blocks_keep_their_signatures_and_options_go_where_they_belong() {
    let body = json!({
        "model": "claude-sonnet-4-5", "max_tokens": 2048, "stream": true,
        "system": [{"type": "text", "text": "A", "cache_control": {"type": "ephemeral"}},
                   {"type": "text", "text": "B"}],
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "stop_sequences": ["END"], "top_k": 5, "top_p": 0.5, "metadata": {"user_id": "u1"},
        "service_tier": "auto",
        "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "Look"},
                {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}},
                {"type": "document", "title": "doc", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}},
            ]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Hmm", "signature": "SIG"},
                {"type": "redacted_thinking", "data": "OPAQUE"},
                {"type": "text", "text": "Calling"},
                {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
                {"type": "tool_use", "id": "t2", "name": "g", "input": {}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": [
                    {"type": "text", "text": "seen"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}},
                ]},
                {"type": "tool_result", "tool_use_id": "t2", "is_error": true},
                {"type": "text", "text": "And now?"},
            ]},
        ],
    });
    let request = decode_request(body.to_string().as_bytes()).unwrap();
    let signed = |text: &str, signature: &str, redacted| {
        Message::Reasoning(ReasoningMessage {
            text: text.into(),
            signature: Some(signature.into()),
            redacted,
            metadata: Metadata::new(),
        })
    };
    let mut failed = ToolResult::new("t2", "g", vec![]);
    failed.is_error = true;
    let mut cached = Metadata::new();
    cached.set_cache_control(Some(CacheControl::default()));
    assert_eq!(
        request.messages,
        vec![
            Message::system("A").with_metadata(cached),
            Message::system("B"),
            Message::multimodal(
                Role::User,
                vec![
                    ContentBlock::text("Look"),
                    ContentBlock::image_url("https://x/a.png"),
                    ContentBlock::Document(
                        Media::base64("application/pdf", "JVBE").with_name("doc")
                    ),
                ]
            ),
            signed("Hmm", "SIG", false),
            signed("", "OPAQUE", true),
            Message::assistant("Calling"),
            Message::tool_calls(vec![
                ToolCall::new("t1", "f", json!({"a": 1})),
                ToolCall::new("t2", "g", json!({})),
            ]),
            Message::tool_results(vec![
                ToolResult::new(
                    "t1",
                    "f",
                    vec![
                        ContentBlock::text("seen"),
                        ContentBlock::Image(Media::base64("image/png", "iVBO")),
                    ]
                ),
                failed,
            ]),
            Message::multimodal(Role::User, vec![ContentBlock::text("And now?")]),
        ]
    );
    let options = &request.options;
    assert!(options.stream);
    assert_eq!(options.tool_choice, Some(ToolChoice::Required));
    assert_eq!(
        Value::Object(options.extra.clone()),
        json!({"stop": ["END"], "top_k": 5, "top_p": 0.5, "metadata": {"user_id": "u1"},
               "thinking": {"type": "enabled", "budget_tokens": 1024}, "service_tier": "auto",
               TOOL_CHOICE_KEY: {"disable_parallel_tool_use": true}})
    );
}

/// `decode_request` on `body`: its error's text, which must be `InvalidRequest`.
fn refused(body: &str) -> String {
    match decode_request(body.as_bytes()) {
        Err(error @ Error::InvalidRequest(_)) => error.to_string(),
        other => panic!("{body}: {other:?}"),
    }
}

#[test]
fn bad_requests_are_invalid_and_name_the_field_at_fault() {
    let user = r#"[{"role":"user","content":"Hi"}]"#;
    for (body, needle) in [
        ("{", "EOF while parsing"),
        ("[]", "invalid type: sequence"),
        (r#"{"max_tokens":1,"messages":[]} x"#, "trailing characters"),
        (
            &format!(r#"{{"messages":{user}}}"#),
            "missing field `max_tokens`",
        ),
        (r#"{"max_tokens":1}"#, "missing field `messages`"),
        (
            r#"{"max_tokens":1,"messages":[]}"#,
            "invalid request: messages: at least one message is required",
        ),
        (
            r#"{"max_tokens":1,"system":"Be brief.","messages":[]}"#,
            "invalid request: messages: at least one message is required",
        ),
        (
            &format!(r#"{{"max_tokens":"9","messages":{user}}}"#),
            "max_tokens: invalid type: string",
        ),
        (
            &format!(r#"{{"max_tokens":-1,"messages":{user}}}"#),
            "max_tokens: invalid value",
        ),
        (
            r#"{"max_tokens":1,"messages":[{"role":"tool","content":"x"}]}"#,
            "messages[0].role: unknown variant `tool`",
        ),
        (
            r#"{"max_tokens":1,"messages":[{"role":"user","content":7}]}"#,
            "messages[0].content: invalid type: integer",
        ),
        (
            r#"{"max_tokens":1,"messages":[{"role":"user","content":[{"text":"x"}]}]}"#,
            "messages[0].content[0]: missing field `type`",
        ),
        (
            r#"{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"text"}]}]}"#,
            "messages[0].content[0]: missing field `text`",
        ),
        (
            r#"{"max_tokens":1,"messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"image","source":{"type":"file"}}]}]}"#,
            "messages[1].content[0].source.type: unknown variant `file`",
        ),
        (
            r#"{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","data":"x"}}]}]}"#,
            "messages[0].content[0].source: missing field `media_type`",
        ),
        (
            r#"{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":5}}]}]}]}"#,
            "messages[0].content[0].content[0].source: invalid type: integer",
        ),
        (
            r#"{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}]}"#,
            "messages[0].content[0]: a `tool_use` block cannot stand here",
        ),
        (
            r#"{"max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}"#,
            "messages[0].content[0]: an assistant message cannot hold a `image` block",
        ),
        (
            &format!(
                r#"{{"max_tokens":1,"system":[{{"type":"image","source":{{"type":"url","url":"u"}}}}],"messages":{user}}}"#
            ),
            "system[0]: system text takes only text blocks, not `image`",
        ),
        (
            &format!(r#"{{"max_tokens":1,"messages":{user},"tools":[{{"name":"f"}}]}}"#),
            "tools[0]: missing field `input_schema`",
        ),
        (
            &format!(r#"{{"max_tokens":1,"messages":{user},"tool_choice":{{"type":"tool"}}}}"#),
            "tool_choice: missing field `name`",
        ),
        (
            &format!(r#"{{"max_tokens":1,"messages":{user},"temperature":"hot"}}"#),
            "temperature: invalid type: string",
        ),
        (
            &format!(r#"{{"max_tokens":1,"messages":{user},"stop_sequences":"END"}}"#),
            "stop_sequences: invalid type: string",
        ),
    ] {
        let error = refused(body);
        assert!(error.contains(needle), "{body}\n{error}\nwanted: {needle}");
    }
    // Nesting deeper than serde_json's recursion limit is refused, not a
    // stack overflow, inside a block as at the top.
    let deep = "[".repeat(100_000);
    let body = format!(
        r#"{{"max_tokens":1,"messages":[{{"role":"assistant","content":[{{"type":"tool_use","id":"t","name":"f","input":{deep}"#
    );
    assert!(refused(&body).contains("recursion limit exceeded"));
}

// ---------------------------------------------------------------------------
// Errors

#[test]
fn error_bodies_follow_the_one_status_mapping() {
    let upstream = |status| -> Error {
        ProviderError::from_response("openai", status, &[], b"{}", std::time::SystemTime::now())
            .into()
    };
    let cases: Vec<(Error, u16, &str)> = vec![
        (
            Error::InvalidRequest("bad".into()),
            400,
            "invalid_request_error",
        ),
        (upstream(400), 400, "invalid_request_error"),
        (upstream(413), 413, "request_too_large"),
        (upstream(429), 429, "rate_limit_error"),
        (upstream(529), 503, "overloaded_error"),
        (upstream(401), 502, "api_error"),
        (upstream(504), 504, "timeout_error"),
        (
            TransportError::new("openai", TransportErrorKind::Timeout, "slow").into(),
            504,
            "timeout_error",
        ),
        (Error::stage("stage", "broke"), 500, "api_error"),
        (Error::ToolLoopLimit { max_iterations: 3 }, 502, "api_error"),
    ];
    for (error, status, kind) in cases {
        let (answered, body) = error_body(&error);
        assert_eq!(answered, status, "{error}");
        assert_eq!(
            body,
            json!({"type": "error", "error": {"type": kind, "message": error.to_string()}}),
        );
        // The body reads back as the typed error body, and as a provider error.
        let read = ProviderError::from_body("anthropic", status, &body).unwrap();
        assert_eq!(read.error_type.as_deref(), Some(kind));
    }
}

// ---------------------------------------------------------------------------
// The typed events read real traffic

/// Every recorded whole `message` body.
fn recorded_bodies() -> Vec<(String, Vec<u8>)> {
    let mut bodies: Vec<(String, Vec<u8>)> = [
        "anthropic/vercel-ai/anthropic-json-tool.1.json",
        "anthropic/vercel-ai/anthropic-claude-opus-5-reasoning-high.1.json",
    ]
    .into_iter()
    .map(|name| (name.to_owned(), fixture(name)))
    .collect();
    let name = "anthropic/anthropic-sdk-python/10e53c1d-51be-4c64-b5bf-99adb3fa4719.json";
    for (n, exchange) in json_cassette(name).into_iter().enumerate() {
        bodies.push((format!("{name} {n}"), exchange.response.into_bytes()));
    }
    bodies
}

/// `value` without its `null` fields (which the typed form writes and the API
/// leaves out, or the other way round).
fn without_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, value)| !value.is_null())
                .map(|(key, value)| (key, without_nulls(value)))
                .collect(),
        ),
        Value::Array(values) => Value::Array(values.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

#[test]
fn the_typed_events_and_bodies_read_every_recording_and_lose_nothing() {
    for (name, body) in recorded_anthropic_streams() {
        let mut sse = SseDecoder::new();
        let mut events = Output::new();
        sse.push(&body, &mut events).unwrap();
        sse.finish(&mut events).unwrap();
        let mut seen = 0;
        for event in events.drain() {
            let raw: Value = serde_json::from_str(&event.data).unwrap();
            let typed: StreamEvent = serde_json::from_str(&event.data)
                .unwrap_or_else(|error| panic!("{name}: {error}: {}", event.data));
            if let Some(named) = &event.event {
                assert_eq!(named, typed.name(), "{name}");
            }
            let written = serde_json::to_value(&typed).unwrap();
            assert_eq!(without_nulls(written), without_nulls(raw), "{name}");
            seen += 1;
        }
        assert!(seen > 3, "{name}");
    }
    for (name, body) in recorded_bodies() {
        let raw: Value = serde_json::from_slice(&body).unwrap();
        let typed: Response =
            serde_json::from_slice(&body).unwrap_or_else(|error| panic!("{name}: {error}"));
        let written = serde_json::to_value(&typed).unwrap();
        assert_eq!(without_nulls(written), without_nulls(raw), "{name}");
    }
}

// ---------------------------------------------------------------------------
// Replies

/// The encoder's output for `events`, as one byte string.
fn encode(events: &[Event], stream: bool) -> Vec<u8> {
    let mut encoder = ReplyEncoder::new("msg_test", "claude-test", stream);
    let mut out = Output::new();
    for event in events {
        encoder.push(Ok(event.clone()), &mut out).unwrap();
    }
    encoder.finish(&mut out).unwrap();
    out.drain().flat_map(|bytes| bytes.to_vec()).collect()
}

/// What a Messages client reads back: the encoded bytes lifted (cut at
/// `sizes`) and joined, with the finish reason.
fn read_back(bytes: &[u8], stream: bool, sizes: &[usize]) -> (Vec<Message>, Option<FinishReason>) {
    let decoder = if stream {
        BodyDecoder::sse(Lifter::new())
    } else {
        BodyDecoder::json(Lifter::new())
    };
    let events = decode_cut(decoder, bytes, sizes).unwrap();
    let mut joiner = Joiner::new();
    events.into_iter().for_each(|event| joiner.push(event));
    let reason = joiner.finish_reason().cloned();
    (joiner.finish(), reason)
}

/// Messages in the form both sides are compared in: without generation ids
/// (the lifter sets the message id), without what a Messages response cannot
/// carry (tool results, non-assistant text), and with the neighbours the wire
/// cannot keep apart joined as the joiner joins their deltas: two texts, a
/// reasoning without signature and the next, a reasoning and a signature that
/// follows it alone, two runs of calls.
fn comparable(messages: Vec<Message>) -> Value {
    let mut out: Vec<Message> = Vec::new();
    for message in messages {
        let message = match message {
            Message::ToolResults(_) | Message::ToolAggregate(_) => continue,
            Message::Text(text) if text.role != Role::Assistant => continue,
            Message::Text(text)
                if text.text.is_empty() && text.metadata.get(BLOCK_KEY).is_none() =>
            {
                continue;
            }
            other => other,
        };
        match (out.last_mut(), message) {
            (Some(Message::Text(last)), Message::Text(next))
                if last.metadata.get(BLOCK_KEY).is_none()
                    && next.metadata.get(BLOCK_KEY).is_none() =>
            {
                last.text.push_str(&next.text)
            }
            (Some(Message::Reasoning(last)), Message::Reasoning(next))
                if (last.signature.is_none() || next.text.is_empty())
                    && !last.redacted
                    && !next.redacted =>
            {
                last.text.push_str(&next.text);
                if let Some(piece) = next.signature {
                    last.signature.get_or_insert_default().push_str(&piece);
                }
            }
            (Some(Message::ToolCalls(last)), Message::ToolCalls(next)) => {
                last.calls.extend(next.calls)
            }
            (_, message) => out.push(message),
        }
    }
    let mut value = as_json(&out);
    strip_keys(&mut value, &["generation_id"]);
    value
}

/// `value` without these metadata keys, anywhere in it.
fn strip_keys(value: &mut Value, keys: &[&str]) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(metadata)) = map.get_mut("metadata") {
                keys.iter().for_each(|key| drop(metadata.remove(*key)));
                if metadata.is_empty() {
                    map.remove("metadata");
                }
            }
            map.values_mut().for_each(|value| strip_keys(value, keys));
        }
        Value::Array(values) => values.iter_mut().for_each(|value| strip_keys(value, keys)),
        _ => {}
    }
}

/// The finish reason a client reads for the one the events gave.
fn expected_reason(events: &[Event], joined: Option<FinishReason>) -> FinishReason {
    match joined {
        Some(FinishReason::ContentFilter) => FinishReason::Refusal,
        Some(reason) => reason,
        None => {
            let called = events.iter().any(|event| match event {
                Event::ToolCallDelta(_) => true,
                Event::Message { message } => matches!(message, Message::ToolCalls(_)),
                _ => false,
            });
            if called {
                FinishReason::ToolCalls
            } else {
                FinishReason::Stop
            }
        }
    }
}

/// Checks that `events`, encoded in both modes and read back (the stream cut
/// at `sizes`), give the messages and the finish reason the joiner gives.
fn check_round_trip(events: &[Event], sizes: &[usize]) -> Result<(), TestCaseError> {
    let mut joiner = Joiner::new();
    events.iter().cloned().for_each(|event| joiner.push(event));
    let joined_reason = joiner.finish_reason().cloned();
    let mut joined = joiner.finish();
    if !joined.iter().any(|m| matches!(m, Message::Usage(_))) {
        // A Messages reply always carries usage: zeros when none was given.
        joined.push(Message::usage(0, 0));
    }
    let expected = comparable(joined);
    let reason = expected_reason(events, joined_reason);
    // The calls put in, read from the events themselves (not through the
    // joiner): each one's id and name, in order.
    let mut calls_in = Vec::new();
    for event in events {
        match event {
            Event::ToolCallDelta(delta) => {
                if let Some(details) = &delta.details {
                    calls_in.push((details.id.clone().unwrap(), details.name.clone().unwrap()));
                }
            }
            Event::Message {
                message: Message::ToolCalls(message),
            } => calls_in.extend(
                message
                    .calls
                    .iter()
                    .map(|call| (call.id.clone(), call.name.clone())),
            ),
            _ => {}
        }
    }
    for stream in [true, false] {
        let bytes = encode(events, stream);
        let (messages, read_reason) = read_back(&bytes, stream, sizes);
        let calls_out: Vec<(String, String)> = messages
            .iter()
            .flat_map(|m| m.calls())
            .map(|call| (call.id.clone(), call.name.clone()))
            .collect();
        prop_assert_eq!(&calls_out, &calls_in, "stream: {}", stream);
        if stream {
            prop_assert_eq!(&comparable(messages), &expected, "stream: {}", stream);
        } else {
            // A body holds the message's fields of `message_start` and
            // `message_delta` at one level, read back as the first's
            // (tests/server/reply_extras.rs checks where they go).
            let mut expected = expected.clone();
            strip_keys(&mut expected, &[MESSAGE_START_KEY, MESSAGE_DELTA_KEY]);
            let mut got = comparable(messages);
            strip_keys(&mut got, &[MESSAGE_START_KEY, MESSAGE_DELTA_KEY]);
            prop_assert_eq!(&got, &expected, "stream: {}", stream);
        }
        prop_assert_eq!(read_reason.as_ref(), Some(&reason), "stream: {}", stream);
    }
    Ok(())
}

/// A recorded stream lifted into canonical events.
fn lifted(body: &[u8]) -> Vec<Event> {
    decode_cut(BodyDecoder::sse(Lifter::new()), body, &[body.len()]).unwrap()
}

#[test]
fn recorded_replies_encode_to_what_a_client_reads_as_the_same_messages() {
    for (name, body) in recorded_anthropic_streams() {
        let events = lifted(&body);
        check_round_trip(&events, &[7, 1, 64]).unwrap_or_else(|error| panic!("{name}: {error}"));
    }
}

#[test]
fn a_stream_is_framed_as_the_api_frames_it() {
    let mut start = ToolCallDelta::start(0, "toolu_1", "add");
    start.arguments_delta = "{\"a\":".into();
    let events = [
        Event::reasoning("Hmm"),
        Event::ReasoningDelta(lmstack::ReasoningDelta {
            text: String::new(),
            signature: Some("SIG".into()),
            metadata: Metadata::new(),
        }),
        Event::text("Hi"),
        Event::from(start),
        Event::call_arguments(0, "1}"),
        Event::Usage(Usage {
            input_tokens: 10,
            output_tokens: 5,
            cached_input_tokens: Some(4),
            ..Usage::default()
        }),
        Event::finish(FinishReason::ToolCalls),
    ];
    let bytes = encode(&events, true);
    let mut sse = SseDecoder::new();
    let mut frames = Output::new();
    sse.push(&bytes, &mut frames).unwrap();
    sse.finish(&mut frames).unwrap();
    let frames: Vec<(String, Value)> = frames
        .drain()
        .map(|event| {
            (
                event.event.unwrap(),
                serde_json::from_str(&event.data).unwrap(),
            )
        })
        .collect();
    let names: Vec<&str> = frames.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    for (name, data) in &frames {
        assert_eq!(data["type"], name.as_str());
    }
    assert_eq!(frames[0].1["message"]["id"], "msg_test");
    assert_eq!(frames[0].1["message"]["model"], "claude-test");
    assert_eq!(
        frames[1].1,
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
    );
    assert_eq!(
        frames[3].1["delta"],
        json!({"type": "signature_delta", "signature": "SIG"})
    );
    assert_eq!(frames[6].1["index"], 1);
    assert_eq!(
        frames[8].1["content_block"],
        json!({"type": "tool_use", "id": "toolu_1", "name": "add", "input": {}})
    );
    assert_eq!(
        frames[10].1["delta"],
        json!({"type": "input_json_delta", "partial_json": "1}"})
    );
    assert_eq!(frames[11].1["index"], 2);
    assert_eq!(
        frames[12].1,
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
               "usage": {"input_tokens": 6, "output_tokens": 5, "cache_read_input_tokens": 4}})
    );

    let body: Value = serde_json::from_slice(&encode(&events, false)).unwrap();
    assert_eq!(
        body,
        json!({"id": "msg_test", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [
                {"type": "thinking", "thinking": "Hmm", "signature": "SIG"},
                {"type": "text", "text": "Hi"},
                {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1}},
            ],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 6, "output_tokens": 5, "cache_read_input_tokens": 4}})
    );
}

/// A reply's items run through the encoder by the one driver, as a gateway
/// runs them: each wrapped in `Ok`, so that an error is encoded.
fn drive(items: Vec<Result<Event, Error>>, stream: bool) -> (Vec<Bytes>, u16) {
    let mut driven = MachineStream::new(
        futures::stream::iter(items.into_iter().map(Ok)),
        ReplyEncoder::new("msg_1", "m", stream),
    );
    let out = futures::executor::block_on(async {
        let mut out = Vec::new();
        while let Some(item) = driven.next().await {
            out.push(item.unwrap());
        }
        out
    });
    (out, driven.machine().status())
}

#[test]
fn a_failure_mid_stream_is_an_error_event_then_the_end() {
    let overloaded = || -> Error {
        ProviderError::from_response(
            "anthropic",
            529,
            &[],
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            std::time::SystemTime::now(),
        )
        .into()
    };
    let items = || {
        vec![
            Ok(Event::text("Hal")),
            Err(overloaded()),
            Ok(Event::text("f")),
        ]
    };
    let (frames, status) = drive(items(), true);
    assert_eq!(status, 503);
    let bytes: Vec<u8> = frames.iter().flat_map(|bytes| bytes.to_vec()).collect();
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(text.ends_with("\n\nevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"anthropic: HTTP 529 (overloaded_error): Overloaded\"}}\n\n"), "{text}");
    assert!(
        !text.contains("message_stop") && !text.contains("\"f\""),
        "{text}"
    );
    // What a client makes of it: the text so far, then a retryable provider error.
    let error = decode_cut(BodyDecoder::sse(Lifter::new()), &bytes, &[5]).unwrap_err();
    assert!(error.provider_error().unwrap().is_overloaded(), "{error}");

    let (bodies, status) = drive(items(), false);
    assert_eq!(status, 503);
    assert_eq!(bodies.len(), 1);
    let body: Value = serde_json::from_slice(&bodies[0]).unwrap();
    assert_eq!(body, error_body(&overloaded()).1);

    // An error before any event: only the error, which the status answers.
    let (frames, status) = drive(vec![Err(Error::InvalidRequest("no".into()))], true);
    assert_eq!(status, 400);
    assert_eq!(frames.len(), 1);
    assert!(frames[0].starts_with(b"event: error\n"));
    let (_, status) = drive(vec![Ok(Event::text("fine"))], true);
    assert_eq!(status, 200);
}

#[test]
fn a_failure_after_the_finish_ends_the_stream_inside_the_open_block() {
    // A reply whose text breaks its schema: the provider's check fails after
    // the finish. The SDKs parse a structured output when its block stops,
    // so the block must not stop before the error.
    let broken = Error::InvalidOutput {
        stage: "openai",
        message: "the reply does not match the response format's schema".into(),
    };
    let items = vec![
        Ok(Event::text(r#"{"name": "Paris"}"#)),
        Ok(Event::finish(FinishReason::Stop)),
        Err(broken),
    ];
    let (frames, status) = drive(items, true);
    assert_eq!(status, 502);
    let text: String = frames
        .iter()
        .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
        .collect();
    assert!(text.contains("text_delta"), "{text}");
    assert!(!text.contains("content_block_stop"), "{text}");
    assert!(text.ends_with("\n\nevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"openai: the reply does not match the response format's schema\"}}\n\n"), "{text}");
    // A reply that ends well still closes its block, then the message.
    let (frames, _) = drive(
        vec![Ok(Event::text("Hi")), Ok(Event::finish(FinishReason::Stop))],
        true,
    );
    let text: String = frames
        .iter()
        .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
        .collect();
    let stop = text.find("content_block_stop").unwrap();
    assert!(stop < text.find("message_delta").unwrap(), "{text}");
}

#[test]
fn a_gateways_tool_results_are_not_sent_and_whole_messages_are_whole_blocks() {
    let mut call = ToolCall::new("srvtoolu_1", "web_search", json!({"query": "q"}));
    call.provider_executed = true;
    call.metadata
        .insert(BLOCK_KEY, json!({"type": "server_tool_use"}));
    let search =
        json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []});
    let mut raw = Metadata::new();
    raw.insert(BLOCK_KEY, search.clone());
    let events = [
        Event::message(Message::tool_calls(vec![ToolCall::new(
            "t1",
            "f",
            json!({}),
        )])),
        Event::message(Message::tool_results(vec![ToolResult::text(
            "t1", "f", "x",
        )])),
        Event::message(Message::tool_aggregate(vec![], vec![])),
        Event::message(Message::user("not the model's")),
        Event::message(Message::tool_calls(vec![call])),
        Event::message(Message::assistant("").with_metadata(raw)),
        Event::message(Message::Reasoning(ReasoningMessage {
            text: String::new(),
            signature: Some("OPAQUE".into()),
            redacted: true,
            metadata: Metadata::new(),
        })),
        Event::message(Message::assistant("Done")),
    ];
    let body: Value = serde_json::from_slice(&encode(&events, false)).unwrap();
    assert_eq!(
        body["content"],
        json!([
            {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
            search,
            {"type": "redacted_thinking", "data": "OPAQUE"},
            {"type": "text", "text": "Done"},
        ])
    );
    assert_eq!(body["stop_reason"], "tool_use");
    check_round_trip(&events, &[3]).unwrap();
}

// ---------------------------------------------------------------------------
// Properties

/// One piece of a generated reply.
#[derive(Clone, Debug)]
enum Piece {
    Text(Vec<String>),
    Reasoning(Vec<String>, Option<String>),
    Call(String, Value, Vec<usize>),
    Whole(Message),
}

fn text() -> impl Strategy<Value = String> {
    "[a-zé \"\\\\{}\n]{1,12}"
}

fn arguments() -> impl Strategy<Value = Value> {
    proptest::collection::btree_map("[a-z]{1,4}", text(), 0..3).prop_map(|map| json!(map))
}

fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        proptest::collection::vec(text(), 1..4).prop_map(Piece::Text),
        (
            proptest::collection::vec(text(), 0..3),
            proptest::option::of("[A-Za-z0-9+/=]{1,16}")
        )
            .prop_filter("some content", |(texts, signature)| !texts.is_empty()
                || signature.is_some())
            .prop_map(|(texts, signature)| Piece::Reasoning(texts, signature)),
        (
            "[a-z_]{1,8}",
            arguments(),
            proptest::collection::vec(1usize..8, 0..4)
        )
            .prop_map(|(name, arguments, cuts)| Piece::Call(name, arguments, cuts)),
        text().prop_map(|text| Piece::Whole(Message::assistant(text))),
        (text(), "[A-Za-z0-9]{1,8}").prop_map(|(text, signature)| {
            Piece::Whole(Message::Reasoning(ReasoningMessage {
                text,
                signature: Some(signature),
                redacted: false,
                metadata: Metadata::new(),
            }))
        }),
        ("[a-z]{1,6}", arguments()).prop_map(|(name, arguments)| Piece::Whole(
            Message::tool_calls(vec![ToolCall::new("", name, arguments)])
        )),
    ]
}

/// A reply's events: the pieces (calls numbered, ids unique), then usage and a
/// finish reason.
fn reply() -> impl Strategy<Value = Vec<Event>> {
    (
        proptest::collection::vec(piece(), 0..6),
        proptest::option::of((
            0u64..50,
            0u64..50,
            proptest::option::of(0u64..9),
            proptest::option::of(0u64..9),
            proptest::option::of(0u64..9),
        )),
        proptest::option::of(proptest::sample::select(vec![
            FinishReason::Stop,
            FinishReason::Length,
            FinishReason::ToolCalls,
            FinishReason::Refusal,
            FinishReason::ContentFilter,
            FinishReason::Other("pause_turn".into()),
        ])),
    )
        .prop_map(|(pieces, usage, finish)| {
            let mut events = Vec::new();
            let mut calls = 0u32;
            for piece in pieces {
                match piece {
                    Piece::Text(texts) => events.extend(texts.into_iter().map(Event::text)),
                    Piece::Reasoning(texts, signature) => {
                        events.extend(texts.into_iter().map(Event::reasoning));
                        if let Some(signature) = signature {
                            events.push(Event::ReasoningDelta(lmstack::ReasoningDelta {
                                text: String::new(),
                                signature: Some(signature),
                                metadata: Metadata::new(),
                            }));
                        }
                    }
                    Piece::Call(name, arguments, cuts) => {
                        calls += 1;
                        let json = arguments.to_string();
                        events.push(Event::call_start(calls, format!("toolu_{calls}"), name));
                        let mut rest = json.as_str();
                        for cut in cuts {
                            let mut at = cut.min(rest.len());
                            while !rest.is_char_boundary(at) {
                                at += 1;
                            }
                            let (head, tail) = rest.split_at(at);
                            events.push(Event::call_arguments(calls, head));
                            rest = tail;
                        }
                        events.push(Event::call_arguments(calls, rest));
                    }
                    Piece::Whole(Message::ToolCalls(mut message)) => {
                        for call in &mut message.calls {
                            calls += 1;
                            call.id = format!("toolu_{calls}");
                        }
                        events.push(Event::message(Message::ToolCalls(message)));
                    }
                    Piece::Whole(message) => events.push(Event::message(message)),
                }
            }
            if let Some((uncached, output, read, created, thinking)) = usage {
                let mut metadata = Metadata::new();
                if let Some(created) = created {
                    metadata.insert(CACHE_CREATION_KEY, created.into());
                }
                events.push(Event::Usage(Usage {
                    input_tokens: uncached + read.unwrap_or(0) + created.unwrap_or(0),
                    output_tokens: output,
                    cached_input_tokens: read,
                    reasoning_tokens: thinking,
                    metadata,
                }));
            }
            events.extend(finish.map(Event::finish));
            events
        })
}

/// A generated canonical request in the form decoding gives: system messages
/// first, each turn's calls answered by results, options that lower and
/// decode to themselves.
fn request() -> impl Strategy<Value = ChatRequest> {
    let user = prop_oneof![
        text().prop_map(Message::user),
        (text(), "[A-Za-z0-9+/]{4,12}", "[a-z]{1,6}").prop_map(|(text, data, title)| {
            Message::multimodal(
                Role::User,
                vec![
                    ContentBlock::text(text),
                    ContentBlock::Image(Media::base64("image/png", data.clone())),
                    ContentBlock::image_url(format!("https://example.com/{title}.png")),
                    ContentBlock::Document(Media::base64("application/pdf", data).with_name(title)),
                ],
            )
        }),
    ];
    let assistant = (
        proptest::option::of(("[a-z ]{0,12}", "[A-Za-z0-9]{1,8}", any::<bool>())),
        proptest::option::of(text()),
        proptest::collection::vec(("[a-z]{1,6}", arguments(), 0u8..4), 0..3),
        proptest::option::of(text()),
    );
    let turn = (user, assistant);
    (
        proptest::collection::vec(text(), 0..3),
        proptest::collection::vec(turn, 1..4),
        (
            proptest::option::of("[a-z-]{1,12}"),
            1u32..100_000,
            proptest::option::of(0.0f64..2.0),
            any::<bool>(),
            proptest::collection::vec(("[a-z_]{1,8}", "[a-z ]{0,12}"), 0..3),
            proptest::option::of(0u8..4),
            proptest::option::of(proptest::collection::vec("[A-Z]{1,4}", 1..3)),
            proptest::option::of(1u32..50),
        ),
    )
        .prop_map(|(system, turns, options)| {
            let mut messages: Vec<Message> = system.into_iter().map(Message::system).collect();
            let mut ids = 0;
            for (user, (reasoning, text, calls, result_text)) in turns {
                messages.push(user);
                if let Some((text, signature, redacted)) = reasoning {
                    messages.push(Message::Reasoning(ReasoningMessage {
                        text: if redacted { String::new() } else { text },
                        signature: Some(signature),
                        redacted,
                        metadata: Metadata::new(),
                    }));
                }
                messages.extend(text.map(Message::assistant));
                if calls.is_empty() {
                    continue;
                }
                let mut made = Vec::new();
                let mut results = Vec::new();
                for (name, arguments, kind) in calls {
                    ids += 1;
                    let mut call = ToolCall::new(format!("toolu_{ids}"), name, arguments);
                    match kind {
                        1 => {
                            call.metadata.insert(
                                BLOCK_KEY,
                                json!({"caller": {"type": "direct"}, "type": "tool_use"}),
                            );
                        }
                        2 => {
                            call.provider_executed = true;
                            call.metadata
                                .insert(BLOCK_KEY, json!({"type": "server_tool_use"}));
                        }
                        _ => {}
                    }
                    if !call.provider_executed {
                        let content = match (&result_text, kind) {
                            (Some(text), 3) => vec![
                                ContentBlock::text(text.clone()),
                                ContentBlock::Image(Media::base64("image/png", "iVBO")),
                            ],
                            (Some(text), _) => vec![ContentBlock::text(text.clone())],
                            (None, _) => vec![],
                        };
                        let mut result = ToolResult::new(&call.id, &call.name, content);
                        result.is_error = kind == 3;
                        results.push(result);
                    }
                    made.push(call);
                }
                messages.push(Message::tool_calls(made));
                if !results.is_empty() {
                    messages.push(Message::tool_results(results));
                }
            }
            let (model, max_tokens, temperature, stream, tools, choice, stop, top_k) = options;
            let mut request = ChatRequest::new(messages);
            let options = &mut request.options;
            options.model = model;
            options.max_tokens = Some(max_tokens);
            options.temperature = temperature;
            options.stream = stream;
            options.tools = tools
                .into_iter()
                .map(|(name, description)| {
                    ToolSpec::new(
                        name,
                        description,
                        json!({"type": "object", "properties": {}}),
                    )
                })
                .collect();
            options.tool_choice = choice.map(|choice| match choice {
                0 => ToolChoice::Auto,
                1 => ToolChoice::None,
                2 => ToolChoice::Required,
                _ => ToolChoice::Tool("f".into()),
            });
            if let Some(stop) = stop {
                options.extra.insert("stop".into(), json!(stop));
            }
            if let Some(top_k) = top_k {
                options.extra.insert("top_k".into(), top_k.into());
                options
                    .extra
                    .insert("metadata".into(), json!({"user_id": "u"}));
                options.extra.insert(
                    "thinking".into(),
                    json!({"type": "enabled", "budget_tokens": 1024}),
                );
                options.extra.insert("service_tier".into(), json!("auto"));
            }
            request
        })
}

/// `normalise`, then consecutive messages of one role as one (decoding splits
/// a user message's tool results from the text after them, lowering joins an
/// assistant turn into one message).
fn merged(body: Value) -> Value {
    let mut body = normalise(body);
    let mut out: Vec<Value> = Vec::new();
    for message in body["messages"].as_array().unwrap().clone() {
        match out.last_mut() {
            Some(last) if last["role"] == message["role"] => {
                let blocks = message["content"].as_array().unwrap().clone();
                last["content"].as_array_mut().unwrap().extend(blocks);
            }
            _ => out.push(message),
        }
    }
    body["messages"] = Value::Array(out);
    body
}

/// A user message's content, in any spelling the API takes.
fn user_content() -> impl Strategy<Value = Value> {
    let block = prop_oneof![
        text().prop_map(|text| json!({"type": "text", "text": text})),
        "[A-Za-z0-9+/]{4,8}".prop_map(|data| json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}})),
        "[a-z]{1,6}".prop_map(|name| json!({"type": "image", "source": {"type": "url", "url": format!("https://x/{name}.png")}})),
        proptest::option::of("[a-z]{1,6}").prop_map(|title| {
            let mut block = json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}});
            if let Some(title) = title {
                block["title"] = title.into();
            }
            block
        }),
        (0u8..4, prop_oneof![
            text().prop_map(Value::from),
            proptest::collection::vec(text().prop_map(|text| json!({"type": "text", "text": text})), 0..3).prop_map(Value::from),
            text().prop_map(|text| json!([{"type": "text", "text": text}, {"type": "image", "source": {"type": "url", "url": "https://x/r.png"}}])),
        ], any::<bool>())
            .prop_map(|(id, content, error)| {
                let mut block = json!({"type": "tool_result", "tool_use_id": format!("toolu_{id}"), "content": content});
                if error {
                    block["is_error"] = true.into();
                }
                block
            }),
    ];
    prop_oneof![
        text().prop_map(Value::from),
        proptest::collection::vec(block, 1..5).prop_map(Value::from),
    ]
}

/// An assistant message's content, in any spelling the API takes.
fn assistant_content() -> impl Strategy<Value = Value> {
    let block = prop_oneof![
        text().prop_map(|text| json!({"type": "text", "text": text})),
        ("[a-z ]{0,8}", "[A-Za-z0-9]{1,8}").prop_map(|(thinking, signature)| json!({"type": "thinking", "thinking": thinking, "signature": signature})),
        "[A-Za-z0-9]{1,8}".prop_map(|data| json!({"type": "redacted_thinking", "data": data})),
        (0u8..4, "[a-z]{1,6}", arguments(), any::<bool>()).prop_map(|(id, name, input, caller)| {
            let mut block = json!({"type": "tool_use", "id": format!("toolu_{id}"), "name": name, "input": input});
            if caller {
                block["caller"] = json!({"type": "direct"});
            }
            block
        }),
        arguments().prop_map(|input| json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": input})),
        Just(json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [{"type": "web_search_result", "url": "https://x", "encrypted_content": "Zz"}]})),
    ];
    prop_oneof![
        text().prop_map(Value::from),
        proptest::collection::vec(block, 1..5).prop_map(Value::from),
    ]
}

/// A Messages request body as a client writes it.
fn wire_request() -> impl Strategy<Value = Value> {
    let message = prop_oneof![
        user_content().prop_map(|content| json!({"role": "user", "content": content})),
        assistant_content().prop_map(|content| json!({"role": "assistant", "content": content})),
    ];
    let system = prop_oneof![
        text().prop_map(Value::from),
        proptest::collection::vec(
            text().prop_map(|text| json!({"type": "text", "text": text})),
            1..3
        )
        .prop_map(Value::from),
    ];
    let tool =
        ("[a-z]{1,6}", proptest::option::of("[a-z ]{1,8}")).prop_map(|(name, description)| {
            let mut tool =
                json!({"name": name, "input_schema": {"type": "object", "properties": {}}});
            if let Some(description) = description {
                tool["description"] = description.into();
            }
            tool
        });
    let choice = prop_oneof![
        Just(json!({"type": "auto"})),
        Just(json!({"type": "any"})),
        Just(json!({"type": "none"})),
        Just(json!({"type": "tool", "name": "f"})),
    ];
    (
        proptest::collection::vec(message, 1..6),
        proptest::option::of(system),
        proptest::collection::vec(tool, 0..3),
        proptest::option::of(choice),
        (1u32..100_000, proptest::option::of(0.0f64..1.0), any::<bool>(), proptest::option::of(proptest::collection::vec("[A-Z]{1,3}", 1..3)), any::<bool>()),
    )
        .prop_map(|(messages, system, tools, choice, (max_tokens, temperature, stream, stop, rest))| {
            let mut body = json!({"model": "claude-sonnet-4-5", "max_tokens": max_tokens, "messages": messages});
            let mut set = |key: &str, value: Option<Value>| {
                if let Some(value) = value {
                    body[key] = value;
                }
            };
            set("system", system);
            set("tools", Some(Value::from(tools)).filter(|tools| tools != &json!([])));
            set("tool_choice", choice);
            set("temperature", temperature.map(Value::from));
            set("stream", stream.then_some(Value::from(true)));
            set("stop_sequences", stop.map(Value::from));
            if rest {
                set("top_p", Some(json!(0.5)));
                set("top_k", Some(json!(40)));
                set("metadata", Some(json!({"user_id": "u1"})));
                set("thinking", Some(json!({"type": "enabled", "budget_tokens": 2048})));
                set("output_config", Some(json!({"effort": "high"})));
            }
            body
        })
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(128)))]

    #[test]
    fn any_client_request_decodes_and_lowers_back(body in wire_request()) {
        let request = decode_request(body.to_string().as_bytes()).unwrap();
        let lowered = lower(&request, &LowerOptions::default()).unwrap();
        prop_assert_eq!(merged(lowered), merged(body));
    }

    #[test]
    fn decoding_inverts_lowering(request in request()) {
        let body = lower(&request, &LowerOptions::default()).unwrap();
        let decoded = decode_request(body.to_string().as_bytes()).unwrap();
        prop_assert_eq!(decoded, request);
    }

    #[test]
    fn a_client_reads_the_encoded_reply_as_the_joined_events(
        events in reply(),
        sizes in proptest::collection::vec(1usize..48, 1..8),
    ) {
        check_round_trip(&events, &sizes)?;
    }

    #[test]
    fn any_bytes_decode_to_a_request_or_an_invalid_request(
        bytes in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        match decode_request(&bytes) {
            Ok(_) | Err(Error::InvalidRequest(_)) => {}
            Err(other) => prop_assert!(false, "{other:?}"),
        }
    }

    #[test]
    fn damaged_recorded_requests_never_panic(
        pick in 0usize..13,
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let (_, body) = &recorded_requests()[pick];
        let mut bytes = body.to_string().into_bytes();
        for (at, byte) in flips {
            let at = at.index(bytes.len());
            bytes[at] = byte;
        }
        bytes.truncate(cut.index(bytes.len() + 1).max(bytes.len() / 2));
        match decode_request(&bytes) {
            Ok(_) | Err(Error::InvalidRequest(_)) => {}
            Err(other) => prop_assert!(false, "{other:?}"),
        }
    }
}

/// A wire's kept fields reach that wire's upstream only: decoded from one
/// wire and lowered to the other, a request carries none of them.
#[cfg(feature = "openai")]
#[test]
fn kept_fields_do_not_leak_into_the_other_wire() {
    use lmstack::provider::openai_chat;
    let probe = |body: &Value| body.to_string().contains("x_probe");
    let from_openai = json!({"model": "m", "messages": [
        {"role": "user", "name": "ann", "x_probe": 1,
         "content": [{"type": "text", "text": "Hi", "x_probe": 2}]},
        {"role": "assistant", "content": "Yes", "x_probe": 3},
    ], "tools": [{"type": "function", "x_probe": 4,
        "function": {"name": "f", "strict": true, "x_probe": 5}}]});
    let request = openai_chat::decode_request(from_openai.to_string().as_bytes()).unwrap();
    let lowered = lower(&request, &LowerOptions::default()).unwrap();
    assert!(!probe(&lowered), "{lowered}");
    assert!(
        !lowered.to_string().contains("\"name\":\"ann\""),
        "{lowered}"
    );
    assert!(!lowered.to_string().contains("strict"), "{lowered}");

    let from_anthropic = json!({"model": "m", "max_tokens": 8,
        "system": [{"type": "text", "text": "Be brief.", "x_probe": 1}],
        "messages": [
            {"role": "user", "x_probe": 2, "content": [{"type": "text", "text": "Hi", "x_probe": 3}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Yes", "x_probe": 4}]},
        ],
        "tools": [{"name": "f", "input_schema": {"type": "object"}, "x_probe": 5}]});
    let request = decode_request(from_anthropic.to_string().as_bytes()).unwrap();
    let lowered = openai_chat::lower(&request, &openai_chat::LowerOptions::default()).unwrap();
    assert!(!probe(&lowered), "{lowered}");
}

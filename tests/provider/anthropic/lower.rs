//! Lowering to Anthropic Messages: where a fixture records the follow-up
//! request, the canonical history (the recorded first request, the lifted
//! reply, the recorded tool results) lowers to it; tool results with files
//! under each media policy; blocks that must go back as they came.

#![cfg(feature = "anthropic")]

use crate::common;

use common::*;
use lmstack::provider::ToolResultMedia;
use lmstack::provider::anthropic::{Lifter, LowerOptions, lower};
use lmstack::provider::body::BodyDecoder;
use lmstack::{
    ChatRequest, ContentBlock, Message, Role, ToolCall, ToolChoice, ToolResult, ToolSpec,
};
use serde_json::{Value, json};

/// Text of a recorded `content` (a string, or text blocks).
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| block["text"].as_str())
            .collect(),
        _ => panic!("unexpected content {content}"),
    }
}

/// The canonical form of a recorded first request.
fn canonical_request(body: &Value) -> ChatRequest {
    let mut messages = Vec::new();
    if let Some(system) = body.get("system") {
        messages.push(Message::system(text_of(system)));
    }
    for message in body["messages"].as_array().unwrap() {
        let role = serde_json::from_value::<Role>(message["role"].clone()).unwrap();
        messages.push(Message::text(role, text_of(&message["content"])));
    }
    let mut request = ChatRequest::new(messages);
    let options = &mut request.options;
    for (key, value) in body.as_object().unwrap() {
        match key.as_str() {
            "messages" | "system" => {}
            "model" => options.model = Some(value.as_str().unwrap().into()),
            "max_tokens" => options.max_tokens = Some(value.as_u64().unwrap() as u32),
            "stream" => options.stream = value.as_bool().unwrap(),
            "tool_choice" => {
                assert_eq!(value["type"], "auto");
                options.tool_choice = Some(ToolChoice::Auto);
            }
            "tools" => {
                options.tools = value
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|tool| {
                        ToolSpec::new(
                            tool["name"].as_str().unwrap(),
                            tool["description"].as_str().unwrap(),
                            tool["input_schema"].clone(),
                        )
                    })
                    .collect()
            }
            _ => {
                options.extra.insert(key.clone(), value.clone());
            }
        }
    }
    request
}

/// The tool results of a recorded follow-up request's last message.
fn recorded_results(second: &Value, calls: &[ToolCall]) -> Vec<ToolResult> {
    let last = second["messages"].as_array().unwrap().last().unwrap();
    last["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|block| {
            let id = block["tool_use_id"].as_str().unwrap();
            let call = calls.iter().find(|call| call.id == id).unwrap();
            let mut result = ToolResult::text(id, &call.name, text_of(&block["content"]));
            result.is_error = block["is_error"] == true;
            result
        })
        .collect()
}

/// A body in one spelling: every `content` and `system` given as a string is
/// written as one text block (the API reads both alike), and what lowering
/// documents it does not write — `tool_choice.disable_parallel_tool_use:
/// false` (the default) — is dropped.
fn normalise(mut body: Value) -> Value {
    common::anthropic_text_blocks(&mut body);
    if let Some(choice) = body.get_mut("tool_choice").and_then(Value::as_object_mut)
        && choice.get("disable_parallel_tool_use") == Some(&json!(false))
    {
        choice.remove("disable_parallel_tool_use");
    }
    body
}

/// Removes `caller` from every block: fantasy's client drops the field the
/// API sent; lmstack sends it back as it came.
fn without_caller(mut body: Value) -> Value {
    for message in body["messages"].as_array_mut().unwrap() {
        for block in message["content"].as_array_mut().into_iter().flatten() {
            if let Some(block) = block.as_object_mut() {
                block.remove("caller");
            }
        }
    }
    body
}

/// The follow-up of a recorded exchange, lowered from its canonical history.
fn follow_up(first: &Exchange, second: &Exchange, sse: bool) -> Value {
    let decoder = if sse {
        BodyDecoder::sse(Lifter::new())
    } else {
        BodyDecoder::json(Lifter::new())
    };
    let reply = lift_with(decoder, first.response.as_bytes()).unwrap();
    let mut request = canonical_request(&first.request);
    let calls: Vec<ToolCall> = reply.iter().flat_map(|m| m.calls()).cloned().collect();
    request.messages.extend(
        reply
            .into_iter()
            .filter(|message| !matches!(message, Message::Usage(_))),
    );
    request
        .messages
        .push(Message::tool_results(recorded_results(
            &second.request,
            &calls,
        )));
    lower(&request, &LowerOptions::default()).unwrap()
}

#[test]
fn the_first_requests_are_reproduced() {
    for (exchange, name) in [
        (
            &cassette(
                "anthropic/fantasy/TestAnthropicCommon/claude-sonnet-4/multi_tool_streaming.yaml",
            )[0],
            "fantasy common",
        ),
        (
            &cassette(
                "anthropic/fantasy/TestAnthropicThinking/claude-sonnet-4/thinking-streaming.yaml",
            )[0],
            "fantasy thinking",
        ),
        (
            &json_cassette(
                "anthropic/anthropic-sdk-python/555fb399-a54c-455b-9ac5-2c9673f18e12.json",
            )[0],
            "sdk streamed",
        ),
    ] {
        let lowered = lower(
            &canonical_request(&exchange.request),
            &LowerOptions::default(),
        )
        .unwrap();
        assert_eq!(
            normalise(lowered),
            normalise(exchange.request.clone()),
            "{name}"
        );
    }
}

#[test]
fn fantasy_follow_ups_with_parallel_calls_and_signed_thinking_are_reproduced() {
    for name in [
        "anthropic/fantasy/TestAnthropicCommon/claude-sonnet-4/multi_tool_streaming.yaml",
        "anthropic/fantasy/TestAnthropicThinking/claude-sonnet-4/thinking-streaming.yaml",
    ] {
        let exchanges = cassette(name);
        let lowered = follow_up(&exchanges[0], &exchanges[1], true);
        assert_eq!(
            without_caller(normalise(lowered)),
            normalise(exchanges[1].request.clone()),
            "{name}"
        );
    }
}

#[test]
fn sdk_python_follow_ups_send_the_caller_back_and_mark_errors() {
    for (name, sse) in [
        ("555fb399-a54c-455b-9ac5-2c9673f18e12", true),
        ("10e53c1d-51be-4c64-b5bf-99adb3fa4719", false),
    ] {
        let exchanges = json_cassette(&format!("anthropic/anthropic-sdk-python/{name}.json"));
        let lowered = follow_up(&exchanges[0], &exchanges[1], sse);
        assert_eq!(
            normalise(lowered),
            normalise(exchanges[1].request.clone()),
            "{name}"
        );
    }
}

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

/// A call, then its result of text and a PNG, then the user again.
fn media_request() -> ChatRequest {
    let mut result = ToolResult::new(
        "toolu_1",
        "screenshot",
        vec![
            ContentBlock::text("Here is the screen."),
            ContentBlock::image_bytes("image/png", PNG),
        ],
    );
    result.is_error = false;
    ChatRequest::new(vec![
        Message::user("Show me the screen"),
        Message::tool_calls(vec![ToolCall::new("toolu_1", "screenshot", json!({}))]),
        Message::tool_results(vec![result]),
        Message::user("What do you see?"),
    ])
}

/// Every string under a `text` key, anywhere in `value`.
fn texts(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("text", Value::String(text)) => out.push(text.clone()),
                    _ => texts(value, out),
                }
            }
        }
        Value::Array(values) => values.iter().for_each(|value| texts(value, out)),
        _ => {}
    }
}

fn no_base64_in_text(body: &Value) {
    let data = lmstack::Media::from_bytes("image/png", PNG);
    let lmstack::MediaSource::Base64 { data, .. } = &data.source else {
        unreachable!()
    };
    let mut found = Vec::new();
    texts(body, &mut found);
    // Tool-result content given as a string is text too.
    for message in body["messages"].as_array().unwrap() {
        for block in message["content"].as_array().into_iter().flatten() {
            if let Some(text) = block["content"].as_str() {
                found.push(text.to_owned());
            }
        }
    }
    assert!(!found.is_empty());
    for text in found {
        assert!(!text.contains(&**data), "base64 in a text: {text}");
    }
}

fn lowered(policy: ToolResultMedia) -> Result<Value, lmstack::Error> {
    let options = LowerOptions {
        tool_result_media: policy,
        ..LowerOptions::default()
    };
    lower(&media_request(), &options)
}

#[test]
fn a_png_in_a_tool_result_under_each_policy() {
    let png = lmstack::Media::from_bytes("image/png", PNG);
    let lmstack::MediaSource::Base64 { data, .. } = &png.source else {
        unreachable!()
    };
    let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": &**data}});

    let native = lowered(ToolResultMedia::Native).unwrap();
    assert_eq!(
        LowerOptions::default().tool_result_media,
        ToolResultMedia::Native
    );
    assert_eq!(
        native["messages"],
        json!([
            {"role": "user", "content": "Show me the screen"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "screenshot", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                {"type": "text", "text": "Here is the screen."}, image.clone(),
            ]}]},
            {"role": "user", "content": "What do you see?"},
        ])
    );
    no_base64_in_text(&native);

    let inject = lowered(ToolResultMedia::Inject).unwrap();
    assert_eq!(
        inject["messages"][2],
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
            "content": "Here is the screen.\n\n(The tool returned 1 image; it follows in the next message.)"}]})
    );
    assert_eq!(
        inject["messages"][3],
        json!({"role": "user", "content": [
            {"type": "text", "text": "Attachments from tool call `toolu_1` (screenshot):"}, image,
        ]})
    );
    assert_eq!(inject["messages"][4]["content"], "What do you see?");
    no_base64_in_text(&inject);

    let error = lowered(ToolResultMedia::Reject).unwrap_err().to_string();
    assert!(
        error.contains("toolu_1") && error.contains("screenshot"),
        "{error}"
    );
    assert!(error.contains("image/png"), "{error}");
}

#[test]
fn consecutive_results_are_one_user_message_and_errors_are_marked() {
    let request = ChatRequest::new(vec![
        Message::tool_calls(vec![
            ToolCall::new("t1", "a", json!({"x": 1})),
            ToolCall::new("t2", "b", json!({})),
        ]),
        Message::tool_results(vec![ToolResult::text("t1", "a", "one")]),
        Message::tool_results(vec![ToolResult::error("t2", "b", "boom")]),
    ]);
    let body = lower(&request, &LowerOptions::default()).unwrap();
    assert_eq!(
        body["messages"][1],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "one"},
            {"type": "tool_result", "tool_use_id": "t2", "content": "boom", "is_error": true},
        ]})
    );
    assert_eq!(body["messages"].as_array().unwrap().len(), 2);
}

#[test]
fn thinking_redacted_thinking_and_server_blocks_go_back_as_they_came() {
    let search = json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
        "content": [{"type": "web_search_result", "url": "https://x", "encrypted_content": "Zz"}]});
    let body = [
        r#"{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":1}}}"#.to_owned(),
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#.into(),
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Hmm."}}"#.into(),
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"SIG1"}}"#.into(),
        r#"{"type":"content_block_stop","index":0}"#.into(),
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"REDACTED"}}"#.into(),
        r#"{"type":"content_block_stop","index":1}"#.into(),
        r#"{"type":"content_block_start","index":2,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}"#.into(),
        r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"q\"}"}}"#.into(),
        r#"{"type":"content_block_stop","index":2}"#.into(),
        format!(r#"{{"type":"content_block_start","index":3,"content_block":{search}}}"#),
        r#"{"type":"content_block_stop","index":3}"#.into(),
        r#"{"type":"content_block_start","index":4,"content_block":{"type":"text","text":"Done"}}"#.into(),
        r#"{"type":"content_block_stop","index":4}"#.into(),
        r#"{"type":"message_delta","delta":{"stop_reason":"pause_turn"},"usage":{"output_tokens":3}}"#.into(),
    ]
    .map(|data| format!("data: {data}\n\n"))
    .concat();
    let reply = lift_with(BodyDecoder::sse(Lifter::new()), body.as_bytes()).unwrap();
    let mut history = vec![Message::user("Search")];
    history.extend(reply);
    let lowered = lower(&ChatRequest::new(history), &LowerOptions::default()).unwrap();
    assert_eq!(
        lowered["messages"][1],
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Hmm.", "signature": "SIG1"},
            {"type": "redacted_thinking", "data": "REDACTED"},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
            search,
            {"type": "text", "text": "Done"},
        ]})
    );
}

#[test]
fn options_tool_choice_stop_and_extra() {
    let mut request = ChatRequest::new(vec![
        Message::system("A"),
        Message::user("Hi"),
        Message::system("B"),
    ])
    .model("claude");
    request.options.temperature = Some(0.5);
    request.options.max_tokens = Some(100);
    request.options.tools = vec![ToolSpec::new("f", "", json!({"type": "object"}))];
    request.options.extra.insert("stop".into(), json!("END"));
    request
        .options
        .extra
        .insert("cache_control".into(), json!({"type": "ephemeral"}));
    for (choice, wire) in [
        (ToolChoice::Auto, json!({"type": "auto"})),
        (ToolChoice::Required, json!({"type": "any"})),
        (ToolChoice::None, json!({"type": "none"})),
        (
            ToolChoice::Tool("f".into()),
            json!({"type": "tool", "name": "f"}),
        ),
    ] {
        request.options.tool_choice = Some(choice);
        let body = lower(&request, &LowerOptions::default()).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "claude",
                "max_tokens": 100,
                "system": "A",
                "messages": [
                    {"role": "user", "content": "Hi"},
                    {"role": "system", "content": "B"},
                ],
                "tools": [{"name": "f", "input_schema": {"type": "object"}}],
                "tool_choice": wire,
                "temperature": 0.5,
                "stop_sequences": ["END"],
                "cache_control": {"type": "ephemeral"},
            })
        );
    }
}

/// The first bytes of a WAV file.
const WAV: &[u8] = b"RIFF\x24\0\0\0WAVEfmt ";

fn audio_request() -> ChatRequest {
    ChatRequest::new(vec![
        Message::user("Say hello"),
        Message::tool_calls(vec![ToolCall::new("toolu_1", "speak", json!({}))]),
        Message::tool_results(vec![ToolResult::new(
            "toolu_1",
            "speak",
            vec![
                ContentBlock::text("Said."),
                ContentBlock::audio_bytes("audio/wav", WAV),
            ],
        )]),
    ])
}

#[test]
fn audio_in_a_tool_result_is_a_clear_error_under_every_policy() {
    for policy in [
        ToolResultMedia::Native,
        ToolResultMedia::Inject,
        ToolResultMedia::Reject,
    ] {
        let options = LowerOptions {
            tool_result_media: policy,
            ..LowerOptions::default()
        };
        let error = lower(&audio_request(), &options).unwrap_err();
        assert!(
            matches!(error, lmstack::Error::InvalidRequest(_)),
            "{error:?}"
        );
        let text = error.to_string();
        for needle in ["toolu_1", "speak", "audio/wav"] {
            assert!(text.contains(needle), "{policy:?}: {needle} in {text}");
        }
    }
}

#[test]
fn audio_from_the_user_is_a_clear_error() {
    let request = ChatRequest::new(vec![Message::multimodal(
        lmstack::Role::User,
        vec![
            ContentBlock::text("Transcribe"),
            ContentBlock::audio_bytes("audio/mpeg", b"ID3\x04"),
        ],
    )]);
    let error = lower(&request, &LowerOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("user message")
            && error.contains("audio/mpeg")
            && error.contains("no audio"),
        "{error}"
    );
}

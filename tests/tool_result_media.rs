//! One conversation — a tool returning text and a PNG — lowered by every wire
//! under every media policy (Gemini as 2.5 and as 3): the image reaches the
//! request whole, exactly once, and never inside text; `reject` names the call
//! and the media type. The exact wire shapes are checked per provider in
//! `tests/{openai,anthropic,gemini}_lower.rs`.

#![cfg(all(feature = "openai", feature = "anthropic", feature = "gemini"))]

use lmstack::provider::openai::{ChatCompletions, LowerOptions};
use lmstack::provider::{ToolResultMedia, Wire, anthropic, gemini};
use lmstack::{ChatRequest, ContentBlock, Media, MediaSource, Message, ToolCall, ToolResult};
use serde_json::{Value, json};

/// A PNG header: enough to be sniffed as one.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDRsome-pixels";

const POLICIES: [ToolResultMedia; 3] = [
    ToolResultMedia::Native,
    ToolResultMedia::Inject,
    ToolResultMedia::Reject,
];

fn conversation(model: &str) -> ChatRequest {
    let result = ToolResult::new(
        "call_1",
        "screenshot",
        vec![
            ContentBlock::text("Here is the screen."),
            ContentBlock::image_bytes("image/png", PNG),
        ],
    );
    ChatRequest::new(vec![
        Message::user("Show me the screen"),
        Message::tool_aggregate(
            vec![ToolCall::new("call_1", "screenshot", json!({}))],
            vec![result],
        ),
        Message::user("What do you see?"),
    ])
    .model(model)
}

fn base64() -> String {
    match Media::from_bytes("image/png", PNG).source {
        MediaSource::Base64 { data, .. } => data.to_string(),
        MediaSource::Url { .. } => unreachable!("bytes are inline"),
    }
}

/// Every string in `value`, with whether it sits under a key that holds
/// media bytes (`data`, OpenAI's `url`).
fn strings<'v>(value: &'v Value, key: &str, out: &mut Vec<(bool, &'v str)>) {
    match value {
        Value::String(text) => out.push((matches!(key, "data" | "url"), text)),
        Value::Array(items) => items.iter().for_each(|item| strings(item, key, out)),
        Value::Object(map) => map.iter().for_each(|(key, item)| strings(item, key, out)),
        _ => {}
    }
}

/// The request body `wire` writes for the conversation to `model`.
fn lowered<W: Wire>(wire: &W, model: &str) -> Result<Value, lmstack::Error> {
    wire.lower(&conversation(model))
}

/// The image is in the body once, whole, in a media field — never in text.
fn image_once(body: &Value, what: &str) {
    let data = base64();
    let mut found = Vec::new();
    strings(body, "", &mut found);
    let holding: Vec<&(bool, &str)> = found.iter().filter(|(_, s)| s.contains(&data)).collect();
    assert_eq!(holding.len(), 1, "{what}: the image once: {body}");
    assert!(holding[0].0, "{what}: in a media field, not text: {body}");
}

/// A refusal names the call, the tool and the media type.
fn refused(error: lmstack::Error, what: &str) {
    let text = error.to_string();
    for needle in ["call_1", "screenshot", "image/png"] {
        assert!(text.contains(needle), "{what}: {needle} in {text}");
    }
}

fn check<W: Wire>(wire: &W, model: &str, policy: ToolResultMedia, what: &str) {
    match (policy, lowered(wire, model)) {
        (ToolResultMedia::Reject, Err(error)) => refused(error, what),
        (ToolResultMedia::Reject, Ok(body)) => panic!("{what}: not refused: {body}"),
        (_, Ok(body)) => image_once(&body, what),
        (_, Err(error)) => panic!("{what}: {error}"),
    }
}

#[test]
fn every_wire_carries_a_tool_image_whole_and_never_as_text() {
    for policy in POLICIES {
        let openai = ChatCompletions {
            lowering: LowerOptions {
                tool_result_media: policy,
                ..LowerOptions::default()
            },
        };
        check(&openai, "gpt-4o", policy, &format!("openai {policy:?}"));
        let claude = anthropic::Messages {
            lowering: anthropic::LowerOptions {
                tool_result_media: policy,
                ..anthropic::LowerOptions::default()
            },
        };
        check(&claude, "claude", policy, &format!("anthropic {policy:?}"));
        for model in ["gemini-2.5-flash", "gemini-3-pro-preview"] {
            let gemini = gemini::GenerateContent {
                lowering: gemini::LowerOptions {
                    tool_result_media: Some(policy),
                },
            };
            check(&gemini, model, policy, &format!("{model} {policy:?}"));
        }
    }
}

#[test]
fn each_wire_has_its_own_default_policy() {
    let claude = anthropic::Messages::default();
    let body = lowered(&claude, "claude").unwrap();
    let result = &body["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["content"][1]["type"], "image", "native: {body}");

    let gemini = gemini::GenerateContent::default();
    let three = lowered(&gemini, "gemini-3-pro-preview").unwrap();
    let response = &three["contents"][2]["parts"][0]["functionResponse"];
    assert!(
        response["parts"][0]["inlineData"].is_object(),
        "native on 3: {three}"
    );
    let two = lowered(&gemini, "gemini-2.5-flash").unwrap();
    let turn = &two["contents"][2]["parts"];
    assert!(
        turn[0]["functionResponse"]["parts"].is_null(),
        "2.x takes no parts: {two}"
    );
    assert!(
        turn.as_array()
            .unwrap()
            .iter()
            .any(|part| part["inlineData"].is_object()),
        "injected into the same turn on 2.x: {two}"
    );

    let openai = lowered(&ChatCompletions::default(), "gpt-4o").unwrap();
    let tool = &openai["messages"][2];
    assert_eq!(tool["role"], "tool");
    assert!(tool["content"].is_string(), "inject: {openai}");
    assert_eq!(openai["messages"][3]["role"], "user");
}

//! One conversation — a tool returning text and a PNG, or text and a WAV clip —
//! lowered by every wire under every media policy (Gemini as 2.5 and as 3): the
//! file reaches the request whole, exactly once, and never inside text;
//! `reject`, and Anthropic for audio (it takes none), name the call and the
//! media type. The exact wire shapes are checked per provider in
//! `tests/provider/{openai_chat,anthropic,gemini}/lower.rs`.

#![cfg(all(feature = "openai", feature = "anthropic", feature = "gemini"))]

use lmstack::provider::openai_chat::{ChatCompletions, LowerOptions};
use lmstack::provider::{ToolResultMedia, Wire, anthropic, gemini};
use lmstack::{ChatRequest, ContentBlock, MediaSource, Message, ToolCall, ToolResult};
use serde_json::{Value, json};

/// A PNG header: enough to be sniffed as one.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDRsome-pixels";
/// A WAV header: enough to be sniffed as one.
const WAV: &[u8] = b"RIFF\x24\0\0\0WAVEfmt some-samples";

/// The file the tool returns, and how it is checked.
#[derive(Clone, Copy)]
enum File {
    Png,
    Wav,
}

impl File {
    fn block(self) -> ContentBlock {
        match self {
            File::Png => ContentBlock::image_bytes("image/png", PNG),
            File::Wav => ContentBlock::audio_bytes("audio/wav", WAV),
        }
    }

    fn media_type(self) -> &'static str {
        match self {
            File::Png => "image/png",
            File::Wav => "audio/wav",
        }
    }

    fn base64(self) -> String {
        match self.block().as_media().map(|media| &media.source) {
            Some(MediaSource::Base64 { data, .. }) => data.to_string(),
            _ => unreachable!("bytes are inline"),
        }
    }
}

const POLICIES: [ToolResultMedia; 3] = [
    ToolResultMedia::Native,
    ToolResultMedia::Inject,
    ToolResultMedia::Reject,
];

fn conversation(model: &str, file: File) -> ChatRequest {
    let result = ToolResult::new(
        "call_1",
        "screenshot",
        vec![ContentBlock::text("Here is the screen."), file.block()],
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
fn lowered<W: Wire>(wire: &W, model: &str, file: File) -> Result<Value, lmstack::Error> {
    wire.lower(&conversation(model, file))
}

/// The file is in the body once, whole, in a media field — never in text.
fn file_once(body: &Value, file: File, what: &str) {
    let data = file.base64();
    let mut found = Vec::new();
    strings(body, "", &mut found);
    let holding: Vec<&(bool, &str)> = found.iter().filter(|(_, s)| s.contains(&data)).collect();
    assert_eq!(holding.len(), 1, "{what}: the file once: {body}");
    assert!(holding[0].0, "{what}: in a media field, not text: {body}");
}

/// A refusal names the call, the tool and the media type.
fn refused(error: lmstack::Error, file: File, what: &str) {
    let text = error.to_string();
    for needle in ["call_1", "screenshot", file.media_type()] {
        assert!(text.contains(needle), "{what}: {needle} in {text}");
    }
}

/// Checks one wire: `refuses` says whether it must refuse the file.
fn check<W: Wire>(wire: &W, model: &str, file: File, refuses: bool, what: &str) {
    match (refuses, lowered(wire, model, file)) {
        (true, Err(error)) => refused(error, file, what),
        (true, Ok(body)) => panic!("{what}: not refused: {body}"),
        (false, Ok(body)) => file_once(&body, file, what),
        (false, Err(error)) => panic!("{what}: {error}"),
    }
}

#[test]
fn every_wire_carries_a_tool_image_whole_and_never_as_text() {
    every_wire(File::Png, false);
}

#[test]
fn tool_audio_is_carried_whole_or_refused_by_name_never_as_text() {
    every_wire(File::Wav, true);
}

/// Lowers the conversation with `file` on every wire under every policy;
/// `reject` refuses, and so does Anthropic when `anthropic_refuses`.
fn every_wire(file: File, anthropic_refuses: bool) {
    for policy in POLICIES {
        let reject = policy == ToolResultMedia::Reject;
        let openai = ChatCompletions {
            lowering: LowerOptions {
                tool_result_media: policy,
                ..LowerOptions::default()
            },
        };
        check(
            &openai,
            "gpt-4o",
            file,
            reject,
            &format!("openai {policy:?}"),
        );
        let claude = anthropic::Messages {
            lowering: anthropic::LowerOptions {
                tool_result_media: policy,
                ..anthropic::LowerOptions::default()
            },
        };
        let refuses = reject || anthropic_refuses;
        check(
            &claude,
            "claude",
            file,
            refuses,
            &format!("anthropic {policy:?}"),
        );
        for model in ["gemini-2.5-flash", "gemini-3-pro-preview"] {
            let gemini = gemini::GenerateContent {
                lowering: gemini::LowerOptions {
                    tool_result_media: Some(policy),
                },
            };
            check(&gemini, model, file, reject, &format!("{model} {policy:?}"));
        }
    }
}

#[test]
fn each_wire_has_its_own_default_policy() {
    let claude = anthropic::Messages::default();
    let body = lowered(&claude, "claude", File::Png).unwrap();
    let result = &body["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["content"][1]["type"], "image", "native: {body}");

    let gemini = gemini::GenerateContent::default();
    let three = lowered(&gemini, "gemini-3-pro-preview", File::Png).unwrap();
    let response = &three["contents"][2]["parts"][0]["functionResponse"];
    assert!(
        response["parts"][0]["inlineData"].is_object(),
        "native on 3: {three}"
    );
    let two = lowered(&gemini, "gemini-2.5-flash", File::Png).unwrap();
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

    let openai = lowered(&ChatCompletions::default(), "gpt-4o", File::Png).unwrap();
    let tool = &openai["messages"][2];
    assert_eq!(tool["role"], "tool");
    assert!(tool["content"].is_string(), "inject: {openai}");
    assert_eq!(openai["messages"][3]["role"], "user");
}

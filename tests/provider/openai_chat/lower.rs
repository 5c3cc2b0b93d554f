//! Lowering canonical requests to Chat Completions bodies: roles, multimodal
//! parts, tools and options, and the policies for images in tool results.

#![cfg(feature = "openai")]

use lmstack::provider::openai_chat::{
    LowerOptions, MaxTokensField, ReasoningEcho, ToolResultMedia, lower,
};
use lmstack::{
    ChatRequest, ContentBlock, Error, Media, Message, Role, ToolCall, ToolChoice, ToolResult,
    ToolSpec,
};
use serde_json::{Value, json};

const PNG: &str = "iVBORw0KGgo=";

fn with(media: ToolResultMedia) -> LowerOptions {
    LowerOptions {
        tool_result_media: media,
        ..LowerOptions::default()
    }
}

/// Two calls; the first answers with text and an image, the second with text.
fn image_history() -> ChatRequest {
    ChatRequest::new(vec![
        Message::user("Look at both files"),
        Message::tool_aggregate(
            vec![
                ToolCall::new("c1", "view", json!({"path": "a.png"})),
                ToolCall::new("c2", "stat", json!({"path": "a.png"})),
            ],
            vec![
                ToolResult::new(
                    "c1",
                    "view",
                    vec![
                        ContentBlock::text("a.png:"),
                        ContentBlock::Image(Media::base64("image/png", PNG)),
                    ],
                ),
                ToolResult::text("c2", "stat", "12 bytes"),
            ],
        ),
        Message::assistant("It is a tiny image."),
    ])
}

fn calls_json() -> Value {
    json!({"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "view", "arguments": "{\"path\":\"a.png\"}"}},
        {"id": "c2", "type": "function", "function": {"name": "stat", "arguments": "{\"path\":\"a.png\"}"}},
    ]})
}

#[test]
fn inject_puts_the_images_in_a_user_message_after_the_tool_messages() {
    let body = lower(&image_history(), &with(ToolResultMedia::Inject)).unwrap();
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": "Look at both files"},
            calls_json(),
            {"role": "tool", "tool_call_id": "c1",
             "content": "a.png:\n\n(The tool returned 1 image; it follows in the next message.)"},
            {"role": "tool", "tool_call_id": "c2", "content": "12 bytes"},
            {"role": "user", "content": [
                {"type": "text", "text": "Attachments from tool call `c1` (view):"},
                {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}},
            ]},
            {"role": "assistant", "content": "It is a tiny image."},
        ])
    );
}

#[test]
fn native_puts_the_images_inside_the_tool_message() {
    let body = lower(&image_history(), &with(ToolResultMedia::Native)).unwrap();
    assert_eq!(
        body["messages"][2],
        json!({"role": "tool", "tool_call_id": "c1", "content": [
            {"type": "text", "text": "a.png:"},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}},
        ]})
    );
    assert_eq!(
        body["messages"].as_array().unwrap().len(),
        5,
        "no injected message"
    );
}

#[test]
fn reject_is_a_clear_error_naming_the_call() {
    match lower(&image_history(), &with(ToolResultMedia::Reject)) {
        Err(Error::InvalidRequest(message)) => {
            assert!(
                message.contains("`c1`") && message.contains("reject"),
                "{message}"
            );
        }
        other => panic!("expected an invalid request, got {other:?}"),
    }
}

#[test]
fn image_bytes_never_become_tool_text() {
    for policy in [ToolResultMedia::Inject, ToolResultMedia::Native] {
        let body = lower(&image_history(), &with(policy)).unwrap();
        for message in body["messages"].as_array().unwrap() {
            if let Some(text) = message["content"].as_str() {
                assert!(!text.contains(PNG), "{policy:?}: {text}");
            }
        }
    }
}

#[test]
fn user_images_and_documents_become_parts() {
    let request = ChatRequest::new(vec![Message::multimodal(
        Role::User,
        vec![
            ContentBlock::text("Compare"),
            ContentBlock::image_url("https://example.com/cat.png"),
            ContentBlock::Document(Media::base64("application/pdf", "JVBERi0=").with_name("r.pdf")),
        ],
    )]);
    let body = lower(&request, &LowerOptions::default()).unwrap();
    assert_eq!(
        body["messages"][0]["content"],
        json!([
            {"type": "text", "text": "Compare"},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
            {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "r.pdf"}},
        ])
    );
    let by_url = ChatRequest::new(vec![Message::multimodal(
        Role::User,
        vec![ContentBlock::Document(Media::url(
            "https://example.com/r.pdf",
        ))],
    )]);
    assert!(matches!(
        lower(&by_url, &LowerOptions::default()),
        Err(Error::InvalidRequest(_))
    ));
}

#[test]
fn tools_choice_and_options() {
    let mut request = ChatRequest::new(vec![Message::user("hi")])
        .model("o4-mini")
        .tool(ToolSpec::new("get", "", json!({"type": "object"})))
        .streaming(true);
    request.options.max_tokens = Some(64);
    request.options.temperature = Some(0.5);
    request.options.tool_choice = Some(ToolChoice::Tool("get".into()));
    request.options.extra.insert("seed".into(), json!(7));
    let options = LowerOptions {
        max_tokens_field: MaxTokensField::MaxCompletionTokens,
        strict_tools: Some(true),
        ..LowerOptions::default()
    };
    let body = lower(&request, &options).unwrap();
    assert_eq!(
        body,
        json!({
            "model": "o4-mini",
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}, "strict": true}}],
            "tool_choice": {"type": "function", "function": {"name": "get"}},
            "temperature": 0.5,
            "max_completion_tokens": 64,
            "stream": true,
            "stream_options": {"include_usage": true},
            "seed": 7,
        })
    );
    for (choice, wire) in [
        (ToolChoice::Auto, "auto"),
        (ToolChoice::None, "none"),
        (ToolChoice::Required, "required"),
    ] {
        request.options.tool_choice = Some(choice);
        assert_eq!(lower(&request, &options).unwrap()["tool_choice"], wire);
    }
}

#[test]
fn several_choices_are_refused() {
    let mut request = ChatRequest::new(vec![Message::user("hi")]);
    request.options.extra.insert("n".into(), json!(2));
    assert!(matches!(
        lower(&request, &LowerOptions::default()),
        Err(Error::InvalidRequest(_))
    ));
}

#[test]
fn reasoning_echo_policies() {
    let request = ChatRequest::new(vec![
        Message::user("q"),
        Message::reasoning("hmm"), // no record of its field: from another provider
        Message::assistant("a"),
    ]);
    let echo = |policy: ReasoningEcho| {
        let options = LowerOptions {
            reasoning_echo: policy,
            ..LowerOptions::default()
        };
        lower(&request, &options).unwrap()["messages"][1].clone()
    };
    assert_eq!(
        echo(ReasoningEcho::Auto),
        json!({"role": "assistant", "content": "a"})
    );
    assert_eq!(
        echo(ReasoningEcho::Never),
        json!({"role": "assistant", "content": "a"})
    );
    assert_eq!(
        echo(ReasoningEcho::Field("reasoning_content".into())),
        json!({"role": "assistant", "content": "a", "reasoning_content": "hmm"})
    );
}

#[test]
fn a_call_that_could_not_be_read_goes_back_as_written() {
    let mut call = ToolCall::new("c1", "f", Value::Null);
    call.invalid = Some(lmstack::InvalidCall {
        kind: lmstack::InvalidCallKind::MalformedArguments,
        message: "not JSON".into(),
        raw: Some("{\"a\":".into()),
    });
    let request = ChatRequest::new(vec![
        Message::tool_calls(vec![call]),
        Message::tool_results(vec![ToolResult::error(
            "c1",
            "f",
            "arguments were not JSON",
        )]),
    ]);
    let body = lower(&request, &LowerOptions::default()).unwrap();
    assert_eq!(
        body["messages"][0]["tool_calls"][0]["function"]["arguments"],
        "{\"a\":"
    );
    assert_eq!(body["messages"][1]["content"], "arguments were not JSON");
}

#[test]
fn a_tool_text_message_without_a_call_is_refused() {
    let request = ChatRequest::new(vec![Message::text(Role::Tool, "orphan")]);
    assert!(matches!(
        lower(&request, &LowerOptions::default()),
        Err(Error::InvalidRequest(_))
    ));
}

/// A call answered with text and a WAV clip.
fn audio_history(media_type: &str) -> ChatRequest {
    ChatRequest::new(vec![
        Message::user("Say hello"),
        Message::tool_aggregate(
            vec![ToolCall::new("c1", "speak", json!({"text": "hello"}))],
            vec![ToolResult::new(
                "c1",
                "speak",
                vec![
                    ContentBlock::text("Said."),
                    ContentBlock::Audio(Media::base64(media_type, WAV)),
                ],
            )],
        ),
    ])
}

const WAV: &str = "UklGRiQAAABXQVZF";

#[test]
fn tool_audio_is_injected_as_input_audio() {
    let body = lower(&audio_history("audio/wav"), &LowerOptions::default()).unwrap();
    assert_eq!(
        body["messages"][2],
        json!({"role": "tool", "tool_call_id": "c1",
               "content": "Said.\n\n(The tool returned 1 audio clip; it follows in the next message.)"})
    );
    assert_eq!(
        body["messages"][3],
        json!({"role": "user", "content": [
            {"type": "text", "text": "Attachments from tool call `c1` (speak):"},
            {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}},
        ]})
    );
    let native = lower(&audio_history("audio/wav"), &with(ToolResultMedia::Native)).unwrap();
    assert_eq!(
        native["messages"][2]["content"][1],
        json!({"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}})
    );
}

#[test]
fn user_audio_becomes_input_audio_in_wav_or_mp3_only() {
    let request = |block: ContentBlock| {
        ChatRequest::new(vec![Message::multimodal(
            Role::User,
            vec![ContentBlock::text("Transcribe"), block],
        )])
    };
    for (media_type, format) in [
        ("audio/wav", "wav"),
        ("audio/x-wav", "wav"),
        ("audio/mpeg", "mp3"),
        ("audio/mp3", "mp3"),
    ] {
        let audio = ContentBlock::Audio(Media::base64(media_type, "SUQz"));
        let body = lower(&request(audio), &LowerOptions::default()).unwrap();
        assert_eq!(
            body["messages"][0]["content"],
            json!([
                {"type": "text", "text": "Transcribe"},
                {"type": "input_audio", "input_audio": {"data": "SUQz", "format": format}},
            ]),
            "{media_type}"
        );
    }
    let ogg = ContentBlock::Audio(Media::base64("audio/ogg", "T2dnUw=="));
    match lower(&request(ogg), &LowerOptions::default()) {
        Err(Error::InvalidRequest(message)) => {
            assert!(message.contains("audio/ogg"), "{message}")
        }
        other => panic!("expected an invalid request, got {other:?}"),
    }
    let by_url = ContentBlock::Audio(Media::url("https://example.com/a.wav"));
    match lower(&request(by_url), &LowerOptions::default()) {
        Err(Error::InvalidRequest(message)) => assert!(message.contains("URL"), "{message}"),
        other => panic!("expected an invalid request, got {other:?}"),
    }
    let from_assistant = ChatRequest::new(vec![Message::multimodal(
        Role::Assistant,
        vec![ContentBlock::Audio(Media::base64("audio/wav", WAV))],
    )]);
    assert!(matches!(
        lower(&from_assistant, &LowerOptions::default()),
        Err(Error::InvalidRequest(_))
    ));
}

//! The JSON form of every message, content block and event is a public contract:
//! these tests pin the exact field names and tags, both ways.

use lmstack::{
    CallDetails, ChatOptions, ChatRequest, CodeExecution, ContentBlock, Event, FinishReason,
    InvalidCall, InvalidCallKind, Media, MediaRef, Message, Metadata, NativeTool, ReasoningDelta,
    ResponseFormat, Role, ServerTool, TextDelta, ToolCall, ToolCallDelta, ToolChoice, ToolResult,
    ToolSpec, Usage, UserLocation, WebSearch,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// `value` serialises to exactly `expected` (same keys, same values) and
/// `expected` deserialises back to `value`.
#[track_caller]
fn pin<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(value: T, expected: Value) {
    assert_eq!(
        serde_json::to_value(&value).unwrap(),
        expected,
        "serialised form"
    );
    let back: T = serde_json::from_value(expected.clone()).unwrap();
    assert_eq!(back, value, "deserialised from {expected}");
    let text = serde_json::to_string(&value).unwrap();
    assert_eq!(
        serde_json::from_str::<T>(&text).unwrap(),
        value,
        "string round trip"
    );
}

fn metadata() -> Metadata {
    let mut metadata = Metadata::generation("gen-1");
    metadata.set_from_agent("planner");
    metadata.insert("step", json!(3));
    metadata
}

#[test]
fn citations_of_each_source() {
    use lmstack::{Citation, CitationSource, DocumentLocation, LocationUnit};
    let mut web = Citation::url("https://a.example", Some("A".into())).with_span(0, 5);
    web.cited_text = Some("a".into());
    pin(
        web,
        json!({"type": "url", "url": "https://a.example", "title": "A", "cited_text": "a",
            "span": {"start": 0, "end": 5}}),
    );
    let document = Citation {
        source: CitationSource::Document {
            document_index: 1,
            document_title: None,
            file_id: Some("file_1".into()),
            location: DocumentLocation {
                unit: LocationUnit::Page,
                start: 2,
                end: 3,
            },
        },
        cited_text: None,
        span: None,
    };
    pin(
        document,
        json!({"type": "document", "document_index": 1, "file_id": "file_1",
            "location": {"unit": "page", "start": 2, "end": 3}}),
    );
    let result = Citation {
        source: CitationSource::SearchResult {
            search_result_index: 0,
            source: "kb".into(),
            title: None,
            start_block_index: 0,
            end_block_index: 2,
        },
        cited_text: None,
        span: None,
    };
    pin(
        result,
        json!({"type": "search_result", "search_result_index": 0, "source": "kb",
            "start_block_index": 0, "end_block_index": 2}),
    );
}

#[test]
fn text_message() {
    pin(
        Message::assistant("Hello").with_metadata(metadata()),
        json!({"type": "text", "role": "assistant", "text": "Hello",
               "metadata": {"generation_id": "gen-1", "from_agent": "planner", "step": 3}}),
    );
    for (role, name) in [
        (Role::System, "system"),
        (Role::User, "user"),
        (Role::Assistant, "assistant"),
        (Role::Tool, "tool"),
    ] {
        pin(
            Message::text(role, "x"),
            json!({"type": "text", "role": name, "text": "x"}),
        );
    }
}

#[test]
fn multimodal_message_and_content_blocks() {
    let document = Media::from_bytes("application/pdf", b"%PDF-").with_name("report.pdf");
    pin(
        Message::multimodal(
            Role::User,
            vec![
                ContentBlock::text("What is this?"),
                ContentBlock::image_bytes("image/png", b"\x89PNG"),
                ContentBlock::image_url("https://example.com/cat.png"),
                ContentBlock::Document(document),
            ],
        ),
        json!({"type": "multimodal", "role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image", "media_type": "image/png", "data": "iVBORw=="},
            {"type": "image", "url": "https://example.com/cat.png"},
            {"type": "document", "media_type": "application/pdf", "data": "JVBERi0=", "name": "report.pdf"},
        ]}),
    );
}

#[test]
fn audio_blocks_have_the_flat_media_form() {
    pin(
        ContentBlock::audio_bytes("audio/wav", b"RIFF"),
        json!({"type": "audio", "media_type": "audio/wav", "data": "UklGRg=="}),
    );
    pin(
        ContentBlock::Audio(Media::url("https://example.com/a.mp3").with_name("a.mp3")),
        json!({"type": "audio", "url": "https://example.com/a.mp3", "name": "a.mp3"}),
    );
    let result = ToolResult::new(
        "call_1",
        "speak",
        vec![
            ContentBlock::text("Said."),
            ContentBlock::audio_bytes("audio/mpeg", b"ID3"),
        ],
    );
    pin(
        Message::tool_results(vec![result]),
        json!({"type": "tool_results", "results": [{"call_id": "call_1", "name": "speak",
            "content": [{"type": "text", "text": "Said."},
                        {"type": "audio", "media_type": "audio/mpeg", "data": "SUQz"}],
            "is_error": false}]}),
    );
    let block = ContentBlock::audio_bytes("audio/wav", b"RIFF");
    assert_eq!(
        block.as_media().and_then(Media::media_type),
        Some("audio/wav")
    );
}

#[test]
fn media_rejects_ambiguous_or_empty_sources() {
    let both =
        json!({"type": "image", "media_type": "image/png", "data": "AA==", "url": "https://x"});
    let error = serde_json::from_value::<ContentBlock>(both).unwrap_err();
    assert!(
        error.to_string().contains("both `data` and `url`"),
        "{error}"
    );
    let neither = json!({"type": "image", "media_type": "image/png"});
    assert!(serde_json::from_value::<ContentBlock>(neither).is_err());
    let untyped = json!({"type": "image", "data": "AA=="});
    let error = serde_json::from_value::<ContentBlock>(untyped).unwrap_err();
    assert!(error.to_string().contains("media_type"), "{error}");
}

#[test]
fn media_by_reference_has_the_flat_media_form_with_ref() {
    let reference: MediaRef =
        "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
            .parse()
            .unwrap();
    assert_eq!(reference, MediaRef::of(b"hello"));
    pin(
        ContentBlock::Image(Media::reference("image/png", reference)),
        json!({"type": "image", "media_type": "image/png",
               "ref": "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}),
    );
    pin(
        ContentBlock::Document(
            Media::reference("application/pdf", reference).with_name("report.pdf"),
        ),
        json!({"type": "document", "media_type": "application/pdf",
               "ref": "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
               "name": "report.pdf"}),
    );
    pin(
        ContentBlock::Audio(Media::reference("audio/wav", reference)),
        json!({"type": "audio", "media_type": "audio/wav",
               "ref": "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}),
    );
    let media = Media::reference("image/png", reference);
    assert_eq!(media.media_type(), Some("image/png"));
    assert_eq!(media.data_uri(), None);
    assert!(media.decode().is_none());
}

#[test]
fn media_by_reference_needs_a_type_a_valid_ref_and_nothing_else() {
    let hello = "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
    for (block, expected) in [
        (
            json!({"type": "image", "ref": hello}),
            "`media_type` beside `ref`",
        ),
        (
            json!({"type": "image", "media_type": "image/png", "ref": hello, "data": "AA=="}),
            "both `ref` and `data` or `url`",
        ),
        (
            json!({"type": "audio", "media_type": "audio/wav", "ref": hello, "url": "https://x"}),
            "both `ref` and `data` or `url`",
        ),
        (
            json!({"type": "image", "media_type": "image/png", "ref": "sha256:../../etc/passwd"}),
            "`sha256:../../etc/passwd` is not a media reference",
        ),
        (
            json!({"type": "image", "media_type": "image/png", "ref": hello.to_uppercase()}),
            "is not a media reference",
        ),
        (
            json!({"type": "image", "media_type": "image/png", "ref": 7}),
            "invalid type",
        ),
    ] {
        let error = serde_json::from_value::<ContentBlock>(block.clone()).unwrap_err();
        assert!(error.to_string().contains(expected), "{block}: {error}");
    }
}

#[test]
fn media_data_uri_and_decode() {
    let media = Media::from_bytes("image/png", b"\x89PNG");
    assert_eq!(media.data_uri().unwrap(), "data:image/png;base64,iVBORw==");
    assert_eq!(media.decode().unwrap().unwrap(), b"\x89PNG");
    assert_eq!(Media::url("https://x").data_uri(), None);
}

#[test]
fn reasoning_message() {
    pin(
        Message::reasoning("Let me think."),
        json!({"type": "reasoning", "text": "Let me think."}),
    );
    let Message::Reasoning(mut reasoning) = Message::reasoning("") else {
        unreachable!()
    };
    reasoning.signature = Some("opaque".into());
    reasoning.redacted = true;
    pin(
        Message::Reasoning(reasoning),
        json!({"type": "reasoning", "text": "", "signature": "opaque", "redacted": true}),
    );
}

#[test]
fn tool_calls_message() {
    let mut server_side = ToolCall::new("ws_1", "web_search", json!({"query": "rust"}));
    server_side.provider_executed = true;
    server_side.metadata = metadata();
    let mut invalid = ToolCall::new("call_2", "add", Value::Null);
    invalid.invalid = Some(InvalidCall {
        kind: InvalidCallKind::MalformedArguments,
        message: "the arguments are not valid JSON".into(),
        raw: Some("{\"a\":".into()),
    });
    pin(
        Message::tool_calls(vec![
            ToolCall::new("call_1", "get_weather", json!({"city": "Paris"})),
            server_side,
            invalid,
        ]),
        json!({"type": "tool_calls", "calls": [
            {"id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}},
            {"id": "ws_1", "name": "web_search", "arguments": {"query": "rust"}, "provider_executed": true,
             "metadata": {"generation_id": "gen-1", "from_agent": "planner", "step": 3}},
            {"id": "call_2", "name": "add", "arguments": null,
             "invalid": {"kind": "malformed_arguments", "message": "the arguments are not valid JSON", "raw": "{\"a\":"}},
        ]}),
    );
    for (kind, name) in [
        (InvalidCallKind::UnknownTool, "unknown_tool"),
        (InvalidCallKind::MalformedArguments, "malformed_arguments"),
        (InvalidCallKind::SchemaViolation, "schema_violation"),
        (InvalidCallKind::Truncated, "truncated"),
    ] {
        pin(kind, json!(name));
    }
}

#[test]
fn tool_results_message() {
    pin(
        Message::tool_results(vec![
            ToolResult::new(
                "call_1",
                "get_weather",
                vec![
                    ContentBlock::text("18°C"),
                    ContentBlock::image_bytes("image/png", b"\x89PNG"),
                ],
            ),
            ToolResult::error("call_2", "add", "boom"),
        ]),
        json!({"type": "tool_results", "results": [
            {"call_id": "call_1", "name": "get_weather", "content": [
                {"type": "text", "text": "18°C"},
                {"type": "image", "media_type": "image/png", "data": "iVBORw=="}],
             "is_error": false},
            {"call_id": "call_2", "name": "add", "content": [{"type": "text", "text": "boom"}], "is_error": true},
        ]}),
    );
}

#[test]
fn tool_aggregate_message() {
    pin(
        Message::tool_aggregate(
            vec![ToolCall::new("call_1", "add", json!({"a": 1, "b": 2}))],
            vec![ToolResult::text("call_1", "add", "3")],
        ),
        json!({"type": "tool_aggregate",
               "calls": [{"id": "call_1", "name": "add", "arguments": {"a": 1, "b": 2}}],
               "results": [{"call_id": "call_1", "name": "add", "content": [{"type": "text", "text": "3"}], "is_error": false}]}),
    );
}

#[test]
fn usage_message() {
    pin(
        Message::usage(12, 40),
        json!({"type": "usage", "input_tokens": 12, "output_tokens": 40}),
    );
    pin(
        Message::Usage(Usage {
            input_tokens: 12,
            output_tokens: 40,
            cached_input_tokens: Some(8),
            reasoning_tokens: Some(30),
            metadata: Metadata::default(),
        }),
        json!({"type": "usage", "input_tokens": 12, "output_tokens": 40,
               "cached_input_tokens": 8, "reasoning_tokens": 30}),
    );
}

#[test]
fn events() {
    pin(
        Event::text("Hel"),
        json!({"type": "text_delta", "text": "Hel"}),
    );
    pin(
        Event::TextDelta(TextDelta {
            text: "Hel".into(),
            metadata: Metadata::generation("gen-1"),
        }),
        json!({"type": "text_delta", "text": "Hel", "metadata": {"generation_id": "gen-1"}}),
    );
    pin(
        Event::reasoning("hmm"),
        json!({"type": "reasoning_delta", "text": "hmm"}),
    );
    pin(
        Event::ReasoningDelta(ReasoningDelta {
            text: String::new(),
            signature: Some("sig".into()),
            metadata: Metadata::default(),
        }),
        json!({"type": "reasoning_delta", "text": "", "signature": "sig"}),
    );
    pin(
        Event::call_start(0, "call_1", "add"),
        json!({"type": "tool_call_delta", "index": 0, "id": "call_1", "name": "add", "arguments_delta": ""}),
    );
    pin(
        Event::call_arguments(1, "{\"a\":"),
        json!({"type": "tool_call_delta", "index": 1, "arguments_delta": "{\"a\":"}),
    );
    pin(
        Event::from(ToolCallDelta {
            details: Some(Box::new(CallDetails {
                provider_executed: true,
                invalid: Some(InvalidCall {
                    kind: InvalidCallKind::UnknownTool,
                    message: "no tool `x`".into(),
                    raw: None,
                }),
                ..CallDetails::default()
            })),
            ..ToolCallDelta::new(2)
        }),
        json!({"type": "tool_call_delta", "index": 2, "arguments_delta": "", "provider_executed": true,
               "invalid": {"kind": "unknown_tool", "message": "no tool `x`"}}),
    );
    pin(
        Event::message(Message::assistant("Hello")),
        json!({"type": "message", "message": {"type": "text", "role": "assistant", "text": "Hello"}}),
    );
    pin(
        Event::Usage(Usage {
            input_tokens: 1,
            output_tokens: 2,
            ..Usage::default()
        }),
        json!({"type": "usage", "input_tokens": 1, "output_tokens": 2}),
    );
    for (reason, name) in [
        (FinishReason::Stop, "stop"),
        (FinishReason::Length, "length"),
        (FinishReason::ToolCalls, "tool_calls"),
        (FinishReason::ContentFilter, "content_filter"),
        (FinishReason::Refusal, "refusal"),
        (FinishReason::Other("pause_turn".into()), "pause_turn"),
    ] {
        pin(
            Event::finish(reason),
            json!({"type": "finish", "reason": name}),
        );
    }
}

#[test]
fn request_and_options() {
    let mut options = ChatOptions {
        model: Some("gpt-4o".into()),
        tools: vec![ToolSpec::new(
            "add",
            "Adds",
            json!({"type": "object", "properties": {"a": {"type": "number"}}}),
        )],
        server_tools: vec![
            ServerTool::WebSearch(WebSearch {
                max_uses: Some(8),
                user_location: Some(UserLocation {
                    country: Some("FR".into()),
                    ..UserLocation::default()
                }),
                native: Some(NativeTool::new(
                    "anthropic",
                    json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 8})
                        .as_object()
                        .unwrap()
                        .clone(),
                )),
                ..WebSearch::default()
            }),
            ServerTool::CodeExecution(CodeExecution::default()),
        ],
        tool_choice: Some(ToolChoice::Tool("add".into())),
        temperature: Some(0.5),
        max_tokens: Some(100),
        response_format: Some(ResponseFormat::JsonSchema {
            name: Some("sum".into()),
            schema: json!({"type": "object"}),
            strict: Some(true),
        }),
        stream: true,
        extra: Default::default(),
    };
    options.extra.insert("seed".into(), json!(42));
    pin(
        ChatRequest {
            messages: vec![Message::user("hi")],
            options,
            extensions: Default::default(),
        },
        json!({"messages": [{"type": "text", "role": "user", "text": "hi"}],
               "options": {"model": "gpt-4o",
                           "tools": [{"name": "add", "description": "Adds",
                                      "parameters": {"type": "object", "properties": {"a": {"type": "number"}}}}],
                           "server_tools": [
                               {"type": "web_search", "max_uses": 8, "user_location": {"country": "FR"},
                                "native": {"wire": "anthropic", "tool": {"type": "web_search_20250305",
                                    "name": "web_search", "max_uses": 8}}},
                               {"type": "code_execution"}],
                           "tool_choice": {"tool": "add"}, "temperature": 0.5, "max_tokens": 100,
                           "response_format": {"type": "json_schema", "name": "sum",
                                               "schema": {"type": "object"}, "strict": true},
                           "stream": true, "extra": {"seed": 42}}}),
    );
    for (choice, form) in [
        (ToolChoice::Auto, json!("auto")),
        (ToolChoice::None, json!("none")),
        (ToolChoice::Required, json!("required")),
    ] {
        pin(choice, form);
    }
    pin(ResponseFormat::JsonObject, json!({"type": "json_object"}));
}

#[test]
fn request_defaults_when_fields_are_missing() {
    let request: ChatRequest = serde_json::from_value(
        json!({"messages": [{"type": "text", "role": "user", "text": "hi"}]}),
    )
    .unwrap();
    assert_eq!(request.options, ChatOptions::default());
    let tool: ToolSpec = serde_json::from_value(json!({"name": "now"})).unwrap();
    assert_eq!(tool.description, "");
    assert_eq!(tool.parameters, json!({"type": "object", "properties": {}}));
}

#[test]
fn unknown_message_type_is_a_clear_error() {
    let error =
        serde_json::from_value::<Message>(json!({"type": "texte", "role": "user", "text": "hi"}))
            .unwrap_err();
    assert!(
        error.to_string().contains("unknown variant `texte`"),
        "{error}"
    );
    let error =
        serde_json::from_value::<Message>(json!({"type": "text", "role": "robot", "text": "hi"}))
            .unwrap_err();
    assert!(error.to_string().contains("robot"), "{error}");
}

#[test]
fn metadata_rides_on_every_kind_of_message_and_delta() {
    let meta = json!({"generation_id": "gen-1", "from_agent": "planner", "step": 3});
    let mut reasoning = Message::reasoning("hmm");
    *reasoning.metadata_mut() = metadata();
    pin(
        reasoning,
        json!({"type": "reasoning", "text": "hmm", "metadata": meta}),
    );
    pin(
        Message::tool_results(vec![]).with_metadata(metadata()),
        json!({"type": "tool_results", "results": [], "metadata": meta}),
    );
    pin(
        Message::tool_aggregate(vec![], vec![]).with_metadata(metadata()),
        json!({"type": "tool_aggregate", "calls": [], "results": [], "metadata": meta}),
    );
    pin(
        Message::usage(1, 2).with_metadata(metadata()),
        json!({"type": "usage", "input_tokens": 1, "output_tokens": 2, "metadata": meta}),
    );
    pin(
        Event::ReasoningDelta(ReasoningDelta {
            text: "a".into(),
            signature: None,
            metadata: metadata(),
        }),
        json!({"type": "reasoning_delta", "text": "a", "metadata": meta}),
    );
    pin(
        Event::from(ToolCallDelta {
            metadata: metadata(),
            ..ToolCallDelta::new(0)
        }),
        json!({"type": "tool_call_delta", "index": 0, "arguments_delta": "", "metadata": meta}),
    );
}

#[test]
fn media_by_url_keeps_its_type_and_name() {
    let mut image = Media::url("https://example.com/a.png");
    if let lmstack::MediaSource::Url { media_type, .. } = &mut image.source {
        *media_type = Some("image/png".into());
    }
    pin(
        ContentBlock::Image(image),
        json!({"type": "image", "media_type": "image/png", "url": "https://example.com/a.png"}),
    );
    pin(
        ContentBlock::Document(Media::url("https://example.com/r.pdf").with_name("r.pdf")),
        json!({"type": "document", "url": "https://example.com/r.pdf", "name": "r.pdf"}),
    );
}

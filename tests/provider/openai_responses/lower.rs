//! The Responses lowering: every message kind as its item (a tool output with
//! an image natively, as `input_image`), options, structured output, the
//! fields an item came with written back, `store: false`; and the recorded
//! follow-up request rebuilt by lifting the first turn's reply and lowering.

#![cfg(feature = "openai-responses")]

use crate::common;

use super::lift::{FANTASY, sse};
use common::*;
use lmstack::message::{Metadata, ReasoningMessage};
use lmstack::provider::ToolResultMedia;
use lmstack::provider::openai_responses::{
    DEVELOPER_KEY, EXTRA_KEY, INSTRUCTIONS_KEY, ITEM_KEY, LowerOptions, REFUSAL_KEY, lower,
};
use lmstack::{
    ChatRequest, ContentBlock, Message, ResponseFormat, Role, ToolCall, ToolChoice, ToolResult,
    ToolSpec,
};
use serde_json::{Value, json};

fn lowered(request: &ChatRequest) -> Value {
    lower(request, &LowerOptions::default()).unwrap()
}

fn input(messages: Vec<Message>) -> Value {
    lowered(&ChatRequest::new(messages))["input"].clone()
}

fn marked(mut message: Message, key: &str, value: Value) -> Message {
    message.metadata_mut().insert(key, value);
    message
}

#[test]
fn system_and_developer_messages_stay_where_they_are_and_instructions_go_apart() {
    let items = input(vec![
        marked(Message::system("Base."), INSTRUCTIONS_KEY, json!(true)),
        Message::user("Hi"),
        Message::system("Mid-conversation."),
        marked(Message::system("As developer."), DEVELOPER_KEY, json!(true)),
    ]);
    assert_eq!(
        items,
        json!([
            {"type": "message", "role": "user", "content": "Hi"},
            {"type": "message", "role": "system", "content": "Mid-conversation."},
            {"type": "message", "role": "developer", "content": "As developer."},
        ])
    );
    let body = lowered(&ChatRequest::new(vec![marked(
        Message::system("Base."),
        INSTRUCTIONS_KEY,
        json!(true),
    )]));
    assert_eq!(body["instructions"], "Base.");
}

#[test]
fn user_images_and_files_are_input_parts() {
    let items = input(vec![Message::multimodal(
        Role::User,
        vec![
            ContentBlock::text("Look"),
            ContentBlock::image_bytes("image/png", b"png"),
            ContentBlock::Document(lmstack::Media::from_bytes("application/pdf", b"%PDF")),
            ContentBlock::image_url("https://x.example/a.png"),
        ],
    )]);
    assert_eq!(
        items[0]["content"],
        json!([
            {"type": "input_text", "text": "Look"},
            {"type": "input_image", "image_url": "data:image/png;base64,cG5n"},
            {"type": "input_file", "file_data": "data:application/pdf;base64,JVBERg==", "filename": "document"},
            {"type": "input_image", "image_url": "https://x.example/a.png"},
        ])
    );
    let audio = Message::multimodal(
        Role::User,
        vec![ContentBlock::audio_bytes("audio/wav", b"RIFF")],
    );
    let error = lower(&ChatRequest::new(vec![audio]), &LowerOptions::default()).unwrap_err();
    assert!(error.to_string().contains("no audio"), "{error}");
}

#[test]
fn assistant_text_refusals_calls_and_results_are_items() {
    let mut call = ToolCall::new("call_1", "add", json!({"a": 2}));
    call.metadata
        .insert(EXTRA_KEY, json!({"id": "fc_1", "namespace": "math"}));
    let mut server = ToolCall::new("srv_1", "web_search", json!({}));
    server.provider_executed = true;
    let items = input(vec![
        Message::assistant("Let me add."),
        marked(Message::assistant("No."), REFUSAL_KEY, json!(true)),
        Message::tool_calls(vec![call, server]),
        Message::tool_results(vec![ToolResult::text("call_1", "add", "2")]),
    ]);
    assert_eq!(
        items,
        json!([
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me add.", "annotations": []}]},
            {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "add", "arguments": "{\"a\":2}", "namespace": "math"},
            {"type": "function_call_output", "call_id": "call_1", "output": "2"},
        ])
    );
}

#[test]
fn a_tool_output_with_an_image_goes_natively_as_input_image() {
    let result = ToolResult::new(
        "call_1",
        "view_image",
        vec![
            ContentBlock::text("A cat."),
            ContentBlock::image_bytes("image/png", b"png"),
        ],
    );
    let items = input(vec![
        Message::tool_calls(vec![ToolCall::new(
            "call_1",
            "view_image",
            json!({"path": "cat.png"}),
        )]),
        Message::tool_results(vec![result.clone()]),
    ]);
    assert_eq!(
        items[1],
        json!({"type": "function_call_output", "call_id": "call_1", "output": [
            {"type": "input_text", "text": "A cat."},
            {"type": "input_image", "image_url": "data:image/png;base64,cG5n"},
        ]})
    );
    // Injected instead, on request: a note, then a user message with the image.
    let options = LowerOptions {
        tool_result_media: ToolResultMedia::Inject,
        ..LowerOptions::default()
    };
    let body = lower(
        &ChatRequest::new(vec![Message::tool_results(vec![result])]),
        &options,
    )
    .unwrap();
    assert!(
        body["input"][0]["output"]
            .as_str()
            .unwrap()
            .contains("1 image")
    );
    assert_eq!(body["input"][1]["role"], "user");
    assert_eq!(body["input"][1]["content"][1]["type"], "input_image");
}

fn this_wires_reasoning(id: &str, signature: Option<&str>) -> Message {
    let mut metadata = Metadata::new();
    metadata.insert(EXTRA_KEY, json!({"id": id}));
    Message::Reasoning(ReasoningMessage {
        text: "Thinking.".into(),
        signature: signature.map(str::to_owned),
        redacted: false,
        metadata,
    })
}

#[test]
fn reasoning_goes_back_with_its_encrypted_content_and_without_ids_when_nothing_is_stored() {
    let anthropic = Message::Reasoning(ReasoningMessage {
        text: "hm".into(),
        signature: Some("anthropic-signature".into()),
        redacted: false,
        metadata: Metadata::new(),
    });
    let messages = vec![
        anthropic,
        this_wires_reasoning("rs_1", Some("gAAA")),
        this_wires_reasoning("rs_2", None),
    ];
    let stored = input(messages.clone());
    assert_eq!(
        stored,
        json!([
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Thinking."}], "encrypted_content": "gAAA"},
            {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": "Thinking."}]},
        ]),
        "another wire's reasoning is left out"
    );
    let mut request = ChatRequest::new(messages);
    request.options.extra.insert("store".into(), json!(false));
    let body = lowered(&request);
    assert_eq!(
        body["input"],
        json!([{"type": "reasoning", "summary": [{"type": "summary_text", "text": "Thinking."}], "encrypted_content": "gAAA"}]),
        "no ids without a store, and reasoning only with its encrypted content"
    );
    assert!(body.get("include").is_none(), "no reasoning asked for");
    request
        .options
        .extra
        .insert("reasoning".into(), json!({"effort": "low"}));
    request
        .options
        .extra
        .insert("include".into(), json!(["message.output_text.logprobs"]));
    assert_eq!(
        lowered(&request)["include"],
        json!([
            "message.output_text.logprobs",
            "reasoning.encrypted_content"
        ])
    );
}

#[test]
fn items_kept_whole_go_back_as_they_came() {
    let item = json!({"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}});
    let items = input(vec![marked(Message::assistant(""), ITEM_KEY, item.clone())]);
    assert_eq!(items, json!([item]));
}

#[test]
fn options_tools_choice_and_structured_output() {
    let mut request = ChatRequest::new(vec![Message::user("Hi")])
        .model("gpt-5")
        .streaming(true);
    let options = &mut request.options;
    options.max_tokens = Some(100);
    options.temperature = Some(0.5);
    let mut tool = ToolSpec::new("add", "Adds.", json!({"type": "object"}));
    tool.extra.insert(EXTRA_KEY.into(), json!({"strict": true}));
    options.tools = vec![tool];
    options.tool_choice = Some(ToolChoice::Tool("add".into()));
    options.response_format = Some(ResponseFormat::json_schema(json!({"type": "object"})));
    options
        .extra
        .insert("text".into(), json!({"verbosity": "low"}));
    options
        .extra
        .insert("tools".into(), json!([{"type": "web_search"}]));
    options
        .extra
        .insert("parallel_tool_calls".into(), json!(false));
    let body = lowered(&request);
    assert_eq!(
        body,
        json!({
            "model": "gpt-5",
            "input": [{"type": "message", "role": "user", "content": "Hi"}],
            "tools": [
                {"type": "function", "name": "add", "description": "Adds.", "parameters": {"type": "object"}, "strict": true},
                {"type": "web_search"},
            ],
            "tool_choice": {"type": "function", "name": "add"},
            "temperature": 0.5,
            "max_output_tokens": 100,
            "stream": true,
            "text": {"format": {"type": "json_schema", "name": "response", "schema": {"type": "object"}}, "verbosity": "low"},
            "parallel_tool_calls": false,
        })
    );
}

/// A recorded request body with each item written as this lowering writes it:
/// `type: message` on messages, a user message's lone `input_text` as a string,
/// call arguments parsed.
fn normalised(mut body: Value) -> Value {
    for item in body["input"].as_array_mut().unwrap() {
        if item.get("role").is_some() {
            item["type"] = json!("message");
            if let Some([part]) = item["content"].as_array().map(Vec::as_slice)
                && part["type"] == "input_text"
            {
                item["content"] = part["text"].clone();
            }
        }
        if let Some(text) = item.get("arguments").and_then(Value::as_str) {
            item["arguments"] = serde_json::from_str(text).unwrap();
        }
    }
    if let Some(tools) = body["tools"].as_array_mut() {
        tools.sort_by_key(|tool| tool["name"].as_str().unwrap().to_owned());
    }
    body
}

#[test]
fn the_recorded_follow_up_is_rebuilt_by_lifting_the_reply_and_lowering() {
    let exchanges = cassette(FANTASY);
    let first = &exchanges[0].request;
    // The first request, as a canonical one.
    let mut messages = vec![marked(
        Message::system(first["input"][0]["content"].as_str().unwrap()),
        DEVELOPER_KEY,
        json!(true),
    )];
    messages.push(Message::user(
        first["input"][1]["content"][0]["text"].as_str().unwrap(),
    ));
    let mut request = ChatRequest::new(messages).model("gpt-5").streaming(true);
    request.options.max_tokens = Some(4000);
    request.options.tool_choice = Some(ToolChoice::Auto);
    request.options.extra.insert("store".into(), json!(false));
    for tool in first["tools"].as_array().unwrap() {
        let mut spec = ToolSpec::new(
            tool["name"].as_str().unwrap(),
            tool["description"].as_str().unwrap(),
            tool["parameters"].clone(),
        );
        spec.extra
            .insert(EXTRA_KEY.into(), json!({"strict": tool["strict"]}));
        request.options.tools.push(spec);
    }
    assert_eq!(normalised(lowered(&request)), normalised(first.clone()));

    // Turn 2: the reply lifted, the results the client sent, lowered again.
    let reply = sse(exchanges[0].response.as_bytes());
    let calls: Vec<ToolCall> = reply.iter().flat_map(Message::calls).cloned().collect();
    request.messages.extend(
        reply
            .into_iter()
            .filter(|m| !matches!(m, Message::Usage(_))),
    );
    request.messages.push(Message::tool_results(vec![
        ToolResult::text(&calls[0].id, "add", "5"),
        ToolResult::text(&calls[1].id, "multiply", "6"),
    ]));
    assert_eq!(
        normalised(lowered(&request)),
        normalised(exchanges[1].request.clone())
    );
}

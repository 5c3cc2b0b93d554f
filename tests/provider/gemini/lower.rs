//! Gemini's lowering: the recorded follow-up requests (fantasy, rig) reproduced
//! from the lifted history; tool schemas; options; images in tool results for
//! Gemini 2.5 and 3 under each policy.

#![cfg(feature = "gemini")]

use crate::common;

use common::*;
use lmstack::provider::body::BodyDecoder;
use lmstack::provider::gemini::{
    GENERATED_ID_KEY, Lifter, LowerOptions, THOUGHT_SIGNATURE_KEY, ToolResultMedia, lower,
    lower_request,
};
use lmstack::{
    ChatRequest, ContentBlock, Error, Joiner, Media, Message, ToolCall, ToolChoice, ToolResult,
    ToolSpec,
};
use serde_json::{Map, Value, json};

/// A request body as compared: what the recordings add and lmstack does not
/// write is taken out (`thought: false`, nulls, an empty `generationConfig`,
/// `systemInstruction.role`), and tools are compared by name, description and
/// schema, whichever field holds it (`parameters`, types in any case, or
/// `parametersJsonSchema`).
fn normalise(body: &Value) -> Value {
    fn clean(value: &Value, key: Option<&str>) -> Option<Value> {
        match value {
            Value::Null => None,
            Value::Bool(false) if key == Some("thought") => None,
            Value::String(text) if key == Some("type") => Some(text.to_lowercase().into()),
            Value::Object(object) => {
                let mut out = Map::new();
                for (k, v) in object {
                    let k = if k == "parametersJsonSchema" {
                        "parameters"
                    } else {
                        k
                    };
                    if let Some(v) = clean(v, Some(k)) {
                        out.insert(k.to_owned(), v);
                    }
                }
                Some(Value::Object(out))
            }
            Value::Array(items) => Some(items.iter().filter_map(|v| clean(v, None)).collect()),
            other => Some(other.clone()),
        }
    }
    let mut body = clean(body, None).unwrap();
    let object = body.as_object_mut().unwrap();
    if let Some(system) = object
        .get_mut("systemInstruction")
        .and_then(Value::as_object_mut)
    {
        system.remove("role");
    }
    if object.get("generationConfig") == Some(&json!({})) {
        object.remove("generationConfig");
    }
    body
}

/// The canonical form of a recorded first request: its system instruction, user
/// text, tools, tool choice and generation config.
fn canonical(body: &Value, model: &str) -> ChatRequest {
    let mut messages = Vec::new();
    for part in body["systemInstruction"]["parts"]
        .as_array()
        .into_iter()
        .flatten()
    {
        messages.push(Message::system(part["text"].as_str().unwrap()));
    }
    for content in body["contents"].as_array().unwrap() {
        assert_eq!(content["role"], "user");
        for part in content["parts"].as_array().unwrap() {
            messages.push(Message::user(part["text"].as_str().unwrap()));
        }
    }
    let mut request = ChatRequest::new(messages).model(model);
    let options = &mut request.options;
    for declaration in body["tools"][0]["functionDeclarations"].as_array().unwrap() {
        let schema = normalise(&declaration["parameters"]);
        options.tools.push(ToolSpec::new(
            declaration["name"].as_str().unwrap(),
            declaration["description"].as_str().unwrap(),
            schema,
        ));
    }
    if body["toolConfig"]["functionCallingConfig"]["mode"] == "AUTO" {
        options.tool_choice = Some(ToolChoice::Auto);
    }
    for (key, value) in body["generationConfig"].as_object().into_iter().flatten() {
        match key.as_str() {
            "maxOutputTokens" => options.max_tokens = value.as_u64().map(|n| n as u32),
            "temperature" => options.temperature = value.as_f64(),
            _ => {
                options
                    .extra
                    .insert("generationConfig".into(), json!({ key: value }));
            }
        }
    }
    request
}

/// The tool results a recorded follow-up request carries: the response's result
/// as text (JSON text for an object), and the images of `parts`.
fn recorded_results(second: &Value) -> Vec<ToolResult> {
    let mut results = Vec::new();
    for content in second["contents"].as_array().unwrap() {
        for part in content["parts"].as_array().unwrap() {
            let Some(response) = part.get("functionResponse") else {
                continue;
            };
            let result = &response["response"]["result"];
            let text = result
                .as_str()
                .map_or_else(|| result.to_string(), str::to_owned);
            let mut content = vec![ContentBlock::text(text)];
            for inline in response["parts"].as_array().into_iter().flatten() {
                let data = &inline["inlineData"];
                content.push(ContentBlock::Image(Media::base64(
                    data["mimeType"].as_str().unwrap(),
                    data["data"].as_str().unwrap(),
                )));
            }
            results.push(ToolResult::new(
                response["id"].as_str().unwrap(),
                response["name"].as_str().unwrap(),
                content,
            ));
        }
    }
    results
}

fn lifted(response: &str) -> Vec<Message> {
    let body = response.as_bytes();
    Joiner::join(decode_cut(BodyDecoder::sse(Lifter::new()), body, &[body.len()]).unwrap())
}

/// Each recorded exchange pair: the first request lowered from its canonical
/// form, and the second from the first plus the lifted reply and the results.
fn reproduces(name: &str, model: &str) {
    let exchanges = cassette(name);
    let first = canonical(&exchanges[0].request, model);
    let options = LowerOptions::default();
    assert_eq!(
        normalise(&lower(&first, &options).unwrap()),
        normalise(&exchanges[0].request),
        "{name}: first request"
    );
    let mut second = first.clone();
    second.messages.extend(lifted(&exchanges[0].response));
    second.messages.push(Message::tool_results(recorded_results(
        &exchanges[1].request,
    )));
    assert_eq!(
        normalise(&lower(&second, &options).unwrap()),
        normalise(&exchanges[1].request),
        "{name}: follow-up request"
    );
}

#[test]
fn fantasy_parallel_calls_follow_up_is_reproduced() {
    reproduces(
        "google/fantasy/TestGoogleCommon/gemini-3-pro-preview/multi_tool_streaming.yaml",
        "gemini-3-pro-preview",
    );
}

#[test]
fn fantasy_thinking_follow_up_is_reproduced() {
    reproduces(
        "google/fantasy/TestGoogleThinking/gemini-3-pro-preview/thinking-streaming.yaml",
        "gemini-3-pro-preview",
    );
}

#[test]
fn rig_image_in_function_response_parts_is_reproduced_for_gemini_3() {
    reproduces(
        "google/rig/gemini/streaming_multimodal_tool_results/streaming_history_preserves_hybrid_tool_result_image_parts.yaml",
        "gemini-3-flash-preview",
    );
}

#[test]
fn signatures_and_generated_ids_round_trip_on_their_parts() {
    let mut call = ToolCall::new("resp_call_0", "now", json!({}));
    call.metadata.insert(GENERATED_ID_KEY, true.into());
    call.metadata
        .insert(THOUGHT_SIGNATURE_KEY, "sig-call".into());
    let mut reasoning = Message::Reasoning(lmstack::message::ReasoningMessage {
        text: "thinking".into(),
        signature: None,
        redacted: false,
        metadata: Default::default(),
    });
    if let Message::Reasoning(r) = &mut reasoning {
        r.metadata.insert("generation_id", "x".into());
    }
    let bare = Message::Reasoning(lmstack::message::ReasoningMessage {
        text: String::new(),
        signature: Some("sig-end".into()),
        redacted: false,
        metadata: Default::default(),
    });
    let request = ChatRequest::new(vec![
        Message::user("What day is it?"),
        reasoning,
        Message::tool_calls(vec![call]),
        Message::tool_results(vec![ToolResult::text("resp_call_0", "now", "Monday")]),
        Message::assistant("Monday."),
        bare,
    ])
    .model("gemini-2.5-flash");
    let body = lower(&request, &LowerOptions::default()).unwrap();
    assert_eq!(
        body["contents"],
        json!([
            {"role": "user", "parts": [{"text": "What day is it?"}]},
            {"role": "model", "parts": [
                {"text": "thinking", "thought": true},
                {"functionCall": {"name": "now", "args": {}}, "thoughtSignature": "sig-call"},
            ]},
            {"role": "user", "parts": [{"functionResponse": {"name": "now", "response": {"result": "Monday"}}}]},
            {"role": "model", "parts": [{"text": "Monday."}, {"text": "", "thoughtSignature": "sig-end"}]},
        ])
    );
}

/// The body's bytes, key order included, as the lowering has always written
/// them; the typed body (`lower_request`) writes the same.
#[test]
fn the_body_is_written_field_by_field_in_its_order() {
    let reasoning = Message::Reasoning(lmstack::message::ReasoningMessage {
        text: "hmm".into(),
        signature: Some("sig-r".into()),
        redacted: false,
        metadata: Default::default(),
    });
    let mut call = ToolCall::new("c1", "speak", json!({}));
    call.metadata.insert(THOUGHT_SIGNATURE_KEY, "sig-c".into());
    let mut done = Message::assistant("Done.");
    let mut odd = Message::assistant("Odd.");
    for (message, signature) in [(&mut done, json!("sig-t")), (&mut odd, json!(7))] {
        let Message::Text(text) = message else {
            unreachable!()
        };
        text.metadata.insert(THOUGHT_SIGNATURE_KEY, signature);
    }
    let result = ToolResult::new(
        "c1",
        "speak",
        vec![
            ContentBlock::text("It is said."),
            ContentBlock::image_bytes("image/png", PNG),
        ],
    );
    let mut request = ChatRequest::new(vec![
        Message::system("Be brief."),
        Message::user("Say hello"),
        reasoning,
        Message::tool_calls(vec![call]),
        Message::tool_results(vec![result]),
        done,
        odd,
    ])
    .model("gemini-3-pro-preview");
    let options = &mut request.options;
    options
        .tools
        .push(ToolSpec::new("speak", "Speaks.", json!({"type": "object"})));
    options.tool_choice = Some(ToolChoice::Tool("speak".into()));
    options.temperature = Some(0.5);
    options.max_tokens = Some(100);
    options.extra.insert("safetySettings".into(), json!([]));
    options.extra.insert(
        "generationConfig".into(),
        json!({"thinkingConfig": {"thinkingBudget": 0}}),
    );
    let image = inline("image/png", PNG).to_string();
    let expected = [
        r#"{"systemInstruction":{"parts":[{"text":"Be brief."}]},"contents":["#,
        r#"{"role":"user","parts":[{"text":"Say hello"}]},"#,
        r#"{"role":"model","parts":[{"text":"hmm","thought":true,"thoughtSignature":"sig-r"},"#,
        r#"{"functionCall":{"name":"speak","args":{},"id":"c1"},"thoughtSignature":"sig-c"}]},"#,
        r#"{"role":"user","parts":[{"functionResponse":{"name":"speak","id":"c1","parts":["#,
        &image,
        r#"],"response":{"result":"It is said."}}}]},"#,
        r#"{"role":"model","parts":[{"text":"Done.","thoughtSignature":"sig-t"},"#,
        r#"{"text":"Odd.","thoughtSignature":7}]}],"#,
        r#""tools":[{"functionDeclarations":[{"name":"speak","description":"Speaks.","parametersJsonSchema":{"type":"object"}}]}],"#,
        r#""toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["speak"]}},"#,
        r#""generationConfig":{"temperature":0.5,"maxOutputTokens":100,"thinkingConfig":{"thinkingBudget":0}},"#,
        r#""safetySettings":[]}"#,
    ]
    .concat();
    let body = lower(&request, &LowerOptions::default()).unwrap();
    assert_eq!(body.to_string(), expected);
    let typed = lower_request(&request, &LowerOptions::default()).unwrap();
    assert_eq!(serde_json::to_string(&typed).unwrap(), expected);
}

/// An extra key that is a field of the body merges into it; one whose merged
/// value is not of the field's type is sent verbatim.
#[test]
fn extra_fields_of_the_body_merge_or_replace() {
    let mut request = ChatRequest::new(vec![Message::user("hi")]);
    request.options.tool_choice = Some(ToolChoice::Auto);
    request.options.extra.insert(
        "toolConfig".into(),
        json!({"functionCallingConfig": {"mode": "VALIDATED"}, "retrievalConfig": {}}),
    );
    request
        .options
        .extra
        .insert("generationConfig".into(), json!("odd"));
    let body = lower(&request, &LowerOptions::default()).unwrap();
    assert_eq!(
        body.to_string(),
        r#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"toolConfig":{"functionCallingConfig":{"mode":"VALIDATED"},"retrievalConfig":{}},"generationConfig":"odd"}"#
    );
}

#[test]
fn tool_schemas_go_whole_in_parameters_json_schema() {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"unit": {"type": "string", "enum": ["c", "f"]}},
        "properties": {
            "unit": {"$ref": "#/$defs/unit"},
            "days": {"type": ["integer", "null"], "exclusiveMinimum": 0},
            "kind": {"const": "forecast"},
            "tags": {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}},
        },
        "additionalProperties": false,
    });
    let mut request = ChatRequest::new(vec![Message::user("hi")]).model("gemini-2.5-flash");
    request.options.tools = vec![ToolSpec::new("forecast", "A forecast", schema.clone())];
    let body = lower(&request, &LowerOptions::default()).unwrap();
    let declaration = &body["tools"][0]["functionDeclarations"][0];
    assert_eq!(declaration["parametersJsonSchema"], schema);
    assert!(declaration.get("parameters").is_none(), "never both");
    assert_eq!(declaration["name"], "forecast");
}

#[test]
fn options_tool_choice_and_extra() {
    let choice = |choice: ToolChoice| {
        let mut request = ChatRequest::new(vec![Message::user("hi")]);
        request.options.tool_choice = Some(choice);
        lower(&request, &LowerOptions::default()).unwrap()["toolConfig"]["functionCallingConfig"]
            .clone()
    };
    assert_eq!(choice(ToolChoice::Auto), json!({"mode": "AUTO"}));
    assert_eq!(choice(ToolChoice::None), json!({"mode": "NONE"}));
    assert_eq!(choice(ToolChoice::Required), json!({"mode": "ANY"}));
    assert_eq!(
        choice(ToolChoice::Tool("add".into())),
        json!({"mode": "ANY", "allowedFunctionNames": ["add"]})
    );
    let mut request = ChatRequest::new(vec![Message::user("hi")]);
    request.options.temperature = Some(0.5);
    request.options.max_tokens = Some(100);
    request.options.extra.insert(
        "generationConfig".into(),
        json!({"stopSequences": ["END"], "thinkingConfig": {"thinkingBudget": 0}}),
    );
    request
        .options
        .extra
        .insert("safetySettings".into(), json!([]));
    let body = lower(&request, &LowerOptions::default()).unwrap();
    assert_eq!(
        body["generationConfig"],
        json!({"temperature": 0.5, "maxOutputTokens": 100, "stopSequences": ["END"], "thinkingConfig": {"thinkingBudget": 0}})
    );
    assert_eq!(body["safetySettings"], json!([]));
}

/// A PNG of one red pixel.
const PNG: &[u8] = &[
    0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, b'I', b'H', b'D', b'R', 0, 0, 0,
    1, 0, 0, 0, 1, 8, 6, 0, 0, 0,
];

fn image_conversation(model: &str) -> ChatRequest {
    ChatRequest::new(vec![
        Message::user("What colour is the image?"),
        Message::tool_calls(vec![ToolCall::new("c1", "render", json!({}))]),
        Message::tool_results(vec![ToolResult::new(
            "c1",
            "render",
            vec![
                ContentBlock::text("Here it is."),
                ContentBlock::image_bytes("image/png", PNG),
            ],
        )]),
    ])
    .model(model)
}

/// Every `text` value in a body.
fn texts(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(object) => {
            for (key, value) in object {
                match value {
                    Value::String(text) if key == "text" || key == "result" => {
                        out.push(text.clone())
                    }
                    other => texts(other, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| texts(item, out)),
        _ => {}
    }
}

#[test]
fn injected_files_of_a_call_whose_id_was_made_up_are_headed_by_the_tool_alone() {
    let mut request = image_conversation("gemini-2.5-flash");
    let Message::ToolCalls(calls) = &mut request.messages[1] else {
        unreachable!()
    };
    calls.calls[0]
        .metadata
        .insert(GENERATED_ID_KEY, true.into());
    let body = lower(&request, &LowerOptions::default()).unwrap();
    let parts = &body["contents"][2]["parts"];
    assert!(parts[0]["functionResponse"].get("id").is_none(), "{parts}");
    assert_eq!(parts[1]["text"], "Attachments from the call of `render`:");
}

fn lower_with(model: &str, policy: Option<ToolResultMedia>) -> Result<Value, Error> {
    lower(
        &image_conversation(model),
        &LowerOptions {
            tool_result_media: policy,
        },
    )
}

#[test]
fn a_tool_image_for_gemini_3_and_2_5_under_each_policy() {
    let data = Media::from_bytes("image/png", PNG);
    let lmstack::MediaSource::Base64 { data, .. } = &data.source else {
        unreachable!()
    };
    let inline = json!({"inlineData": {"mimeType": "image/png", "data": &**data}});
    let native = json!([{"functionResponse": {
        "id": "c1", "name": "render",
        "response": {"result": "Here it is."},
        "parts": [inline],
    }}]);
    let injected = json!([
        {"functionResponse": {"id": "c1", "name": "render", "response": {"result": "Here it is.\n\n(The tool returned 1 image; it follows in the next message.)"}}},
        {"text": "Attachments from tool call `c1` (render):"},
        inline,
    ]);
    for (model, policy, expected) in [
        ("gemini-3-pro-preview", None, &native),
        ("gemini-2.5-flash", None, &injected),
        (
            "gemini-3-pro-preview",
            Some(ToolResultMedia::Inject),
            &injected,
        ),
        ("gemini-2.5-flash", Some(ToolResultMedia::Native), &native),
        (
            "gemini-3-flash-preview",
            Some(ToolResultMedia::Native),
            &native,
        ),
        ("gemini-2.0-flash", Some(ToolResultMedia::Inject), &injected),
    ] {
        let body = lower_with(model, policy).unwrap();
        let contents = body["contents"].as_array().unwrap();
        assert_eq!(
            contents.len(),
            3,
            "{model} {policy:?}: the results and files share one user turn"
        );
        assert_eq!(contents[2]["role"], "user");
        assert_eq!(&contents[2]["parts"], expected, "{model} {policy:?}");
        let mut all = Vec::new();
        texts(&body, &mut all);
        assert!(
            all.iter()
                .all(|text| !text.contains(&**data) && !text.contains("iVBOR")),
            "{model} {policy:?}: no image bytes in text"
        );
    }
    for model in ["gemini-3-pro-preview", "gemini-2.5-flash"] {
        let error = lower_with(model, Some(ToolResultMedia::Reject)).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("`c1`") && text.contains("image/png"),
            "{text}"
        );
    }
}

#[test]
fn media_by_url_and_tool_role_text_are_refused() {
    let request = ChatRequest::new(vec![Message::multimodal(
        lmstack::Role::User,
        vec![ContentBlock::image_url(
            "https://example.com/a.png?sig=secret",
        )],
    )]);
    let text = lower(&request, &LowerOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("inline only") && !text.contains("secret"),
        "{text}"
    );
    let request = ChatRequest::new(vec![Message::text(lmstack::Role::Tool, "x")]);
    match lower(&request, &LowerOptions::default()) {
        Err(Error::InvalidRequest(message)) => assert_eq!(
            message,
            "gemini: a `text` message with role `tool` names no call; send tool output as `tool_results`"
        ),
        other => panic!("an invalid request, not {other:?}"),
    }
}

/// The first bytes of a WAV file.
const WAV: &[u8] = b"RIFF\x24\0\0\0WAVEfmt ";

/// A call answered with `content`.
fn tool_conversation(model: &str, content: Vec<ContentBlock>) -> ChatRequest {
    ChatRequest::new(vec![
        Message::user("Say hello"),
        Message::tool_calls(vec![ToolCall::new("c1", "speak", json!({}))]),
        Message::tool_results(vec![ToolResult::new("c1", "speak", content)]),
    ])
    .model(model)
}

fn inline(media_type: &str, bytes: &[u8]) -> Value {
    let media = Media::from_bytes(media_type, bytes);
    let lmstack::MediaSource::Base64 { data, .. } = &media.source else {
        unreachable!()
    };
    json!({"inlineData": {"mimeType": media_type, "data": &**data}})
}

#[test]
fn tool_audio_follows_the_responses_on_gemini_2_5_and_3() {
    let content = vec![
        ContentBlock::text("Said."),
        ContentBlock::audio_bytes("audio/wav", WAV),
    ];
    // Audio is not among the types of `functionResponse.parts`: on Gemini 3
    // too it is a part after the responses, in the same user turn.
    let expected = json!([
        {"functionResponse": {"id": "c1", "name": "speak", "response": {"result": "Said.\n\n(The tool returned 1 audio clip; it follows in the next message.)"}}},
        {"text": "Attachments from tool call `c1` (speak):"},
        inline("audio/wav", WAV),
    ]);
    for model in ["gemini-2.5-flash", "gemini-3-pro-preview"] {
        let body = lower(
            &tool_conversation(model, content.clone()),
            &LowerOptions::default(),
        )
        .unwrap();
        assert_eq!(body["contents"].as_array().unwrap().len(), 3, "{model}");
        assert_eq!(body["contents"][2]["parts"], expected, "{model}");
    }
    let error = lower(
        &tool_conversation("gemini-3-pro-preview", content),
        &LowerOptions {
            tool_result_media: Some(ToolResultMedia::Reject),
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("`c1`") && error.contains("audio/wav"),
        "{error}"
    );
}

#[test]
fn on_gemini_3_the_image_goes_inside_and_the_audio_after() {
    let content = vec![
        ContentBlock::text("Drawn and said."),
        ContentBlock::image_bytes("image/png", PNG),
        ContentBlock::audio_bytes("audio/wav", WAV),
    ];
    let body = lower(
        &tool_conversation("gemini-3-pro-preview", content.clone()),
        &LowerOptions::default(),
    )
    .unwrap();
    assert_eq!(
        body["contents"][2]["parts"],
        json!([
            {"functionResponse": {"id": "c1", "name": "speak",
                "response": {"result": "Drawn and said.\n\n(The tool returned 1 audio clip; it follows in the next message.)"},
                "parts": [inline("image/png", PNG)]}},
            {"text": "Attachments from tool call `c1` (speak):"},
            inline("audio/wav", WAV),
        ])
    );
    let two = lower(
        &tool_conversation("gemini-2.5-flash", content),
        &LowerOptions::default(),
    )
    .unwrap();
    assert_eq!(
        two["contents"][2]["parts"],
        json!([
            {"functionResponse": {"id": "c1", "name": "speak",
                "response": {"result": "Drawn and said.\n\n(The tool returned 1 image and 1 audio clip; they follow in the next message.)"}}},
            {"text": "Attachments from tool call `c1` (speak):"},
            inline("image/png", PNG),
            inline("audio/wav", WAV),
        ])
    );
}

#[test]
fn user_audio_is_an_inline_data_part() {
    let request = ChatRequest::new(vec![Message::multimodal(
        lmstack::Role::User,
        vec![
            ContentBlock::text("Transcribe"),
            ContentBlock::audio_bytes("audio/mpeg", b"ID3\x04"),
        ],
    )]);
    let body = lower(&request, &LowerOptions::default()).unwrap();
    assert_eq!(
        body["contents"],
        json!([{"role": "user", "parts": [
            {"text": "Transcribe"},
            inline("audio/mpeg", b"ID3\x04"),
        ]}])
    );
    let by_url = ChatRequest::new(vec![Message::multimodal(
        lmstack::Role::User,
        vec![ContentBlock::Audio(Media::url("https://example.com/a.wav"))],
    )]);
    let error = lower(&by_url, &LowerOptions::default()).unwrap_err();
    assert!(error.to_string().contains("inline only"), "{error}");
}

#[test]
fn another_wires_empty_text_is_left_out_and_a_signed_one_kept() {
    // An empty assistant text holding another wire's raw item (a Responses
    // `web_search_call`): Gemini refuses an empty text part.
    let mut raw = Message::assistant("");
    raw.metadata_mut().insert(
        "openai_responses_item",
        json!({"type": "web_search_call", "id": "ws_1"}),
    );
    // An empty text part that came from Gemini with a thought signature.
    let mut signed = Message::assistant("");
    signed
        .metadata_mut()
        .insert(THOUGHT_SIGNATURE_KEY, json!("c2lnbmF0dXJl"));
    let request = ChatRequest::new(vec![
        Message::user("Search the news"),
        raw,
        signed,
        Message::assistant("Here is the news."),
        Message::user("More"),
    ]);
    let body = lower(&request, &LowerOptions::default()).unwrap();
    assert_eq!(
        body["contents"][1]["parts"],
        json!([{"text": "", "thoughtSignature": "c2lnbmF0dXJl"}, {"text": "Here is the news."}])
    );
}

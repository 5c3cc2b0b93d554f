//! The served half of the Responses wire: a client's request decoded and
//! lowered back is what it sent (Codex CLI's real requests, and generated
//! ones); a reply encoded streaming folds, as the SDK accumulates it, to the
//! output of the reply encoded whole; reasoning of another wire sealed and
//! opened.

#![cfg(all(feature = "openai-responses", feature = "server"))]

use bytes::Bytes;
use lmstack::message::{Metadata, ReasoningMessage};
use lmstack::provider::openai_responses::{LowerOptions, ReplyEncoder, decode_request, lower};
use lmstack::service::{Machine, Output};
use lmstack::{ChatRequest, Error, Event, FinishReason, Message, ToolCallDelta};
use proptest::prelude::*;
use serde_json::{Value, json};

const CODEX_EXEC: &str = include_str!("../../fixtures/openai_responses/codex/exec_command.json");
const CODEX_IMAGE: &str = include_str!("../../fixtures/openai_responses/codex/view_image.json");

fn round_trip(body: &Value) -> Value {
    let request = decode_request(body.to_string().as_bytes()).unwrap();
    lower(&request, &LowerOptions::default()).unwrap()
}

#[test]
fn codexs_requests_decode_and_lower_back_to_what_it_sent() {
    for fixture in [CODEX_EXEC, CODEX_IMAGE] {
        let bodies: Vec<Value> = serde_json::from_str(fixture).unwrap();
        for body in bodies {
            let lowered = round_trip(&body);
            for (field, sent) in body.as_object().unwrap() {
                assert_eq!(&lowered[field], sent, "field `{field}`");
            }
            assert_eq!(
                lowered.as_object().unwrap().len(),
                body.as_object().unwrap().len()
            );
        }
    }
}

#[test]
fn codexs_namespace_and_custom_tools_reach_other_wires_as_functions() {
    let bodies: Vec<Value> = serde_json::from_str(CODEX_EXEC).unwrap();
    let request = decode_request(bodies[0].to_string().as_bytes()).unwrap();
    let names: Vec<&str> = request
        .options
        .tools
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert!(
        names.contains(&"exec_command") && names.contains(&"close_agent"),
        "{names:?}"
    );
    assert_eq!(request.options.server_tools.len(), 1, "web_search");
    let custom = json!({"model": "m", "input": "Hi", "tools": [
        {"type": "custom", "name": "apply_patch", "description": "Patch files.",
         "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}]});
    let request = decode_request(custom.to_string().as_bytes()).unwrap();
    let spec = &request.options.tools[0];
    assert_eq!(spec.name, "apply_patch");
    assert_eq!(spec.parameters["properties"]["input"]["type"], "string");
    assert_eq!(
        round_trip(&custom)["tools"],
        custom["tools"],
        "the same wire gets it back"
    );
}

#[test]
fn a_custom_tool_call_and_its_output_round_trip() {
    let body = json!({"model": "m", "input": [
        {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_9", "name": "apply_patch",
         "input": "*** Begin Patch"},
        {"type": "custom_tool_call_output", "call_id": "call_9", "output": "Done."},
        {"type": "item_reference", "id": "msg_7"}]});
    let request = decode_request(body.to_string().as_bytes()).unwrap();
    let call = &request.messages[0].calls()[0];
    assert_eq!(
        (call.id.as_str(), &call.arguments),
        ("call_9", &json!({"input": "*** Begin Patch"}))
    );
    assert_eq!(request.messages[1].results()[0].text_content(), "Done.");
    assert_eq!(round_trip(&body)["input"], body["input"]);
}

#[test]
fn bad_input_is_named() {
    for (body, said) in [
        (
            json!({"input": [{"role": "critic", "content": "x"}]}),
            "input[0]",
        ),
        (
            json!({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}),
            "input[0].call_id",
        ),
        (
            json!({"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]}),
            "input[0].content[0]",
        ),
        (
            json!({"input": "x", "tools": [{"type": "namespace", "name": "n"}]}),
            "tools[0].tools",
        ),
        (
            json!({"input": "x", "text": {"format": {"type": "json_schema"}}}),
            "text.format.schema",
        ),
        (
            json!({"input": "x", "tool_choice": "sometimes"}),
            "tool_choice",
        ),
    ] {
        let Err(Error::InvalidRequest(message)) = decode_request(body.to_string().as_bytes())
        else {
            panic!("{body} was read");
        };
        assert!(message.starts_with(said), "{message} names {said}");
    }
}

fn encoded(request: &ChatRequest, events: &[Event]) -> Vec<Bytes> {
    let mut encoder = ReplyEncoder::new("resp_1", 7, "m", request);
    let mut out = Output::new();
    for event in events {
        encoder.push(Ok(event.clone()), &mut out).unwrap();
    }
    encoder.finish(&mut out).unwrap();
    out.drain().collect()
}

fn stream_events(frames: &[Bytes]) -> Vec<Value> {
    let text: String = frames
        .iter()
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    text.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

/// The output as the official SDK accumulates a stream: items added, parts
/// added, text and arguments appended, items replaced when done.
fn folded(events: &[Value]) -> (Vec<Value>, Value) {
    let mut output: Vec<Value> = Vec::new();
    let mut completed = Value::Null;
    for (n, event) in events.iter().enumerate() {
        assert_eq!(event["sequence_number"], n, "numbered in order");
        let index = event["output_index"].as_u64().unwrap_or(0) as usize;
        match event["type"].as_str().unwrap() {
            "response.output_item.added" => {
                assert_eq!(index, output.len());
                output.push(event["item"].clone());
            }
            "response.content_part.added" => output[index]["content"]
                .as_array_mut()
                .unwrap()
                .push(event["part"].clone()),
            "response.output_text.delta" => {
                let part = &mut output[index]["content"]
                    [event["content_index"].as_u64().unwrap() as usize];
                let text = format!(
                    "{}{}",
                    part["text"].as_str().unwrap(),
                    event["delta"].as_str().unwrap()
                );
                part["text"] = text.into();
            }
            "response.function_call_arguments.delta" => {
                let item = &mut output[index];
                let text = format!(
                    "{}{}",
                    item["arguments"].as_str().unwrap(),
                    event["delta"].as_str().unwrap()
                );
                item["arguments"] = text.into();
            }
            "response.output_item.done" => {
                let mut done = event["item"].clone();
                done["status"] = output[index]["status"].clone();
                assert_eq!(done["id"], output[index]["id"]);
                if done["type"] == "message" {
                    assert_eq!(
                        done["content"].as_array().unwrap().len(),
                        output[index]["content"].as_array().unwrap().len()
                    );
                    for (part, streamed) in done["content"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .zip(output[index]["content"].as_array().unwrap())
                    {
                        assert_eq!(part["text"], streamed["text"], "the deltas make the text");
                    }
                }
                if done["type"] == "function_call" {
                    assert_eq!(done["arguments"], output[index]["arguments"]);
                }
                output[index] = event["item"].clone();
            }
            "response.completed" | "response.incomplete" => completed = event["response"].clone(),
            _ => {}
        }
    }
    (output, completed)
}

fn reply_events(pieces: &[String], arguments: &[String], thinking: bool) -> Vec<Event> {
    let mut events = Vec::new();
    if thinking {
        events.push(Event::reasoning("Let me see."));
        events.push(Event::ReasoningDelta(lmstack::ReasoningDelta {
            text: String::new(),
            signature: Some("sig-1".into()),
            metadata: Metadata::new(),
        }));
    }
    events.extend(pieces.iter().map(|piece| Event::text(piece.clone())));
    events.push(Event::ToolCallDelta(ToolCallDelta::start(
        0, "call_1", "add",
    )));
    events.extend(
        arguments
            .iter()
            .map(|piece| Event::call_arguments(0, piece.clone())),
    );
    events.push(Event::Usage(lmstack::Usage {
        input_tokens: 9,
        output_tokens: 4,
        ..Default::default()
    }));
    events.push(Event::finish(FinishReason::ToolCalls));
    events
}

/// A string cut into pieces at the given fractions.
fn cut(text: &str, cuts: &[usize]) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (chars.len() + 1)).collect();
    at.sort();
    at.dedup();
    let mut pieces = Vec::new();
    let mut start = 0;
    for end in at.into_iter().chain([chars.len()]) {
        pieces.push(chars[start..end].iter().collect());
        start = end;
    }
    pieces
}

proptest! {
    #[test]
    fn a_stream_folds_to_the_whole_replys_output(
        text in "[a-zé ]{0,30}", text_cuts in prop::collection::vec(0usize..40, 0..5),
        argument_cuts in prop::collection::vec(0usize..40, 0..5), thinking: bool,
    ) {
        let arguments = r#"{"a": 2, "b": "ü"}"#;
        let events = reply_events(&cut(&text, &text_cuts), &cut(arguments, &argument_cuts), thinking);
        let whole_events = reply_events(std::slice::from_ref(&text), &[arguments.to_owned()], thinking);
        let request = ChatRequest::new(vec![Message::user("Hi")]);
        let body: Value = serde_json::from_slice(&encoded(&request, &whole_events)[0]).unwrap();
        let streaming = request.clone().streaming(true);
        let events = stream_events(&encoded(&streaming, &events));
        prop_assert_eq!(events[0]["type"].as_str(), Some("response.created"));
        let (output, completed) = folded(&events);
        prop_assert_eq!(&Value::Array(output), &completed["output"]);
        prop_assert_eq!(&completed["output"], &body["output"]);
        prop_assert_eq!(&completed["usage"], &json!({"input_tokens": 9, "output_tokens": 4,
            "total_tokens": 13, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0}}));
    }
}

#[test]
fn another_wires_signed_thinking_is_sealed_and_opens_on_the_next_turn() {
    let request = ChatRequest::new(vec![Message::user("Hi")]);
    let thinking = ReasoningMessage {
        text: "Let me see.".into(),
        signature: Some("sig-1".into()),
        redacted: false,
        metadata: Metadata::new(),
    };
    let events = [
        Event::message(Message::Reasoning(thinking.clone())),
        Event::text("Five."),
    ];
    let body: Value = serde_json::from_slice(&encoded(&request, &events)[0]).unwrap();
    let item = &body["output"][0];
    assert_eq!(item["type"], "reasoning");
    assert_eq!(item["summary"][0]["text"], "Let me see.");
    assert!(
        item["encrypted_content"]
            .as_str()
            .unwrap()
            .starts_with("lmr_")
    );
    let next = json!({"model": "m", "input": [item, body["output"][1], {"role": "user", "content": "And?"}]});
    let decoded = decode_request(next.to_string().as_bytes()).unwrap();
    assert_eq!(decoded.messages[0], Message::Reasoning(thinking));
}

#[test]
fn custom_and_namespaced_calls_from_another_wire_go_back_as_the_client_offered_them() {
    let body = json!({"model": "m", "input": "Hi", "tools": [
        {"type": "custom", "name": "apply_patch"},
        {"type": "namespace", "name": "agents", "description": "Sub-agents.",
         "tools": [{"type": "function", "name": "spawn", "parameters": {"type": "object"}}]}]});
    let request = decode_request(body.to_string().as_bytes()).unwrap();
    let call = |id: &str, name: &str, arguments: &str| {
        let mut start = ToolCallDelta::start(0, id, name);
        start.arguments_delta = arguments.into();
        Event::ToolCallDelta(start)
    };
    let events = [
        call("call_1", "apply_patch", r#"{"input": "*** Begin Patch"}"#),
        call("call_2", "spawn", "{}"),
    ];
    let reply: Value = serde_json::from_slice(&encoded(&request, &events)[0]).unwrap();
    assert_eq!(reply["output"][0]["type"], "custom_tool_call");
    assert_eq!(reply["output"][0]["input"], "*** Begin Patch");
    assert_eq!(reply["output"][1]["type"], "function_call");
    assert_eq!(reply["output"][1]["namespace"], "agents");
}

#[test]
fn an_error_mid_stream_ends_it_with_an_error_event_and_a_failed_response() {
    let request = ChatRequest::new(vec![Message::user("Hi")]).streaming(true);
    let mut encoder = ReplyEncoder::new("resp_1", 7, "m", &request);
    let mut out = Output::new();
    encoder.push(Ok(Event::text("Hel")), &mut out).unwrap();
    encoder
        .push(Err(Error::stage("tool loop", "broke")), &mut out)
        .unwrap();
    encoder.finish(&mut out).unwrap();
    let frames: Vec<Bytes> = out.drain().collect();
    let events = stream_events(&frames);
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(&kinds[kinds.len() - 2..], ["error", "response.failed"]);
    assert_eq!(events.last().unwrap()["response"]["status"], "failed");
    assert_eq!(encoder.status(), 500);
}

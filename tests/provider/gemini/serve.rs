//! The server direction of `generateContent`: every recorded request decodes
//! and lowers back to itself (unknown fields anywhere a client may put them
//! included); a recorded stream lifted, encoded in each mode, and lifted again
//! gives the same messages, at any cutting; Gemini CLI's requests pair their
//! responses with their calls; bad requests name the field at fault; error
//! bodies in Google's shape.

#![cfg(feature = "gemini")]

use crate::common;

use bytes::Bytes;
use common::*;
use lmstack::provider::body::BodyDecoder;
use lmstack::provider::gemini::{
    GENERATED_ID_KEY, Lifter, LowerOptions, ReplyEncoder, StreamMode, THOUGHT_SIGNATURE_KEY,
    decode_request, error_body, lower,
};
use lmstack::service::{Machine, Output};
use lmstack::{ChatRequest, ContentBlock, Error, Event, Joiner, Message, Metadata};
use proptest::prelude::*;
use serde_json::{Value, json};

const MULTI_TOOL: &str =
    "google/fantasy/TestGoogleCommon/gemini-3-pro-preview/multi_tool_streaming.yaml";
const THINKING: &str =
    "google/fantasy/TestGoogleThinking/gemini-3-pro-preview/thinking-streaming.yaml";
const RIG: &str = "google/rig/gemini/streaming_multimodal_tool_results/streaming_history_preserves_hybrid_tool_result_image_parts.yaml";

/// Every recorded request body, with the model its path named.
fn recorded_requests() -> Vec<(String, &'static str, Value)> {
    let mut requests = Vec::new();
    for (name, model) in [
        (MULTI_TOOL, "gemini-3-pro-preview"),
        (THINKING, "gemini-3-pro-preview"),
        (RIG, "gemini-3-flash-preview"),
    ] {
        for (n, exchange) in cassette(name).into_iter().enumerate() {
            requests.push((format!("{name} {n}"), model, exchange.request));
        }
    }
    requests
}

fn round_trip(body: &Value, model: &str) -> Result<Value, Error> {
    let request = decode_request(body.to_string().as_bytes(), model)?;
    lower(&request, &LowerOptions::default())
}

#[test]
fn every_recorded_request_decodes_and_lowers_back_to_itself() {
    let requests = recorded_requests();
    assert_eq!(requests.len(), 6);
    for (name, model, body) in requests {
        let lowered = round_trip(&body, model).unwrap_or_else(|error| panic!("{name}: {error}"));
        assert_eq!(lowered, body, "{name}");
    }
}

/// Where a body's objects may carry fields lmstack does not know.
/// (A tool object's fields beside its declarations are tools of their own.)
const OBJECTS: [&str; 4] = [
    "/contents",
    "/contents/*/parts",
    "/tools/*/functionDeclarations",
    "/systemInstruction/parts",
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
        bodies.push(("gemini cli".into(), "gemini-3-pro-preview", gemini_cli_request()));
        bodies.push(("gemini cli image".into(), "gemini-2.5-flash", gemini_cli_image_request()));
        let (name, model, body) = bodies.swap_remove(pick.index(bodies.len()));
        let places = object_places(&body, &OBJECTS);
        let sent = with_unknown_fields(body, &places, &fields);
        let lowered = round_trip(&sent, model)
            .map_err(|e| TestCaseError::fail(format!("{name}: {e}")))?;
        prop_assert_eq!(lowered, sent, "{}", name);
    }
}

/// A follow-up as Gemini CLI sends it: a system instruction with a role,
/// tools with `parametersJsonSchema`, thinking settings, a call without id
/// answered by a response with an id of the client's own and `output`, an
/// image the tool read in the response's `parts`, two user contents in a row,
/// code execution parts, safety settings.
fn gemini_cli_request() -> Value {
    json!({
        "contents": [
            {"role": "user", "parts": [{"text": "Read notes.txt and cat.png"}]},
            {"role": "model", "parts": [
                {"text": "Reading.", "thoughtSignature": "c2ln"},
                {"functionCall": {"name": "read_file", "args": {"file_path": "notes.txt"}}, "thoughtSignature": "c2lnMg"},
                {"functionCall": {"name": "read_file", "args": {"file_path": "cat.png"}}},
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"id": "read_file_1764201600000_0", "name": "read_file",
                    "response": {"output": "the notes"}}},
                {"functionResponse": {"id": "read_file_1764201600000_1", "name": "read_file",
                    "response": {"output": "Binary content provided (1 item(s))."},
                    "parts": [{"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}]}},
            ]},
            {"role": "user", "parts": [{"text": "And?"}]},
            {"role": "model", "parts": [
                {"text": "plan", "thought": true},
                {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
                {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1\n"}},
                {"text": "", "thoughtSignature": "ZW5k"},
            ]},
        ],
        "systemInstruction": {"role": "user", "parts": [{"text": "You are a CLI."}]},
        "tools": [{"functionDeclarations": [
            {"name": "read_file", "description": "Reads a file",
             "parametersJsonSchema": {"type": "object", "properties": {"file_path": {"type": "string"}},
                                      "required": ["file_path"]}},
            {"name": "old", "parameters": {"type": "OBJECT", "properties": {}}},
        ]}, {"googleSearch": {}}],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["read_file", "old"]}},
        "generationConfig": {"temperature": 0.5, "topP": 1, "topK": 64,
            "thinkingConfig": {"includeThoughts": true, "thinkingLevel": "HIGH"},
            "responseMimeType": "application/json", "responseSchema": {"type": "OBJECT"}},
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
        "cachedContent": "cachedContents/abc",
    })
}

#[test]
fn a_gemini_cli_follow_up_pairs_responses_with_their_calls_and_lowers_back() {
    let body = gemini_cli_request();
    assert_eq!(round_trip(&body, "gemini-3-pro-preview").unwrap(), body);
    let request =
        decode_request(body.to_string().as_bytes(), "models/gemini-3-pro-preview").unwrap();
    assert_eq!(
        request.options.model.as_deref(),
        Some("gemini-3-pro-preview")
    );
    let calls: Vec<_> = request.messages.iter().flat_map(Message::calls).collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].metadata.get(GENERATED_ID_KEY), Some(&json!(true)));
    assert_eq!(
        calls[0].metadata.get(THOUGHT_SIGNATURE_KEY),
        Some(&json!("c2lnMg"))
    );
    assert_ne!(calls[0].id, calls[1].id);
    let results: Vec<_> = request
        .messages
        .iter()
        .filter_map(|message| match message {
            Message::ToolResults(results) => Some(&results.results),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(results[0].call_id, calls[0].id, "paired by name, in order");
    assert_eq!(results[1].call_id, calls[1].id);
    assert_eq!(results[0].text_content(), "the notes");
    assert!(
        matches!(results[1].content[1], ContentBlock::Image(_)),
        "{:?}",
        results[1].content
    );
    let options = &request.options;
    assert_eq!(
        options.tools[1].parameters,
        json!({"type": "object", "properties": {}})
    );
    assert_eq!(options.server_tools.len(), 1);
    assert_eq!(options.tool_choice, Some(lmstack::ToolChoice::Required));
    assert_eq!(options.temperature, Some(0.5));
    assert!(options.response_format.is_some());
    assert_eq!(options.extra["cachedContent"], "cachedContents/abc");
}

/// Gemini CLI's (0.61.0) follow-up after its `read_file` read an image: the
/// file as an `inlineData` part beside the function response, in the same
/// content, not in the response's `parts`; then a text of the user's.
fn gemini_cli_image_request() -> Value {
    json!({
        "contents": [
            {"role": "user", "parts": [{"text": "Describe red.png"}]},
            {"role": "model", "parts": [
                {"functionCall": {"id": "c1", "name": "read_file", "args": {"file_path": "notes.txt"}}},
                {"functionCall": {"id": "c2", "name": "read_file", "args": {"file_path": "red.png"}}},
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"id": "c1", "name": "read_file", "response": {"output": "notes"}}},
                {"functionResponse": {"id": "c2", "name": "read_file",
                    "response": {"output": "Binary content provided (1 item(s))."}}},
                {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
                {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/a.pdf"}},
                {"text": "Be brief."},
                {"inlineData": {"mimeType": "image/png", "data": "AAAA"}},
            ]},
        ],
    })
}

#[test]
fn files_beside_a_function_response_are_its_results_and_go_back_beside_it() {
    let body = gemini_cli_image_request();
    let request = decode_request(body.to_string().as_bytes(), "gemini-2.5-flash").unwrap();
    assert_eq!(
        lower(&request, &LowerOptions::default()).unwrap(),
        body,
        "lowered back as it came"
    );
    let [.., Message::ToolResults(results), Message::Multimodal(user)] =
        request.messages.as_slice()
    else {
        panic!("{:#?}", request.messages);
    };
    let [notes, image] = results.results.as_slice() else {
        panic!("{results:#?}");
    };
    assert_eq!(notes.content, vec![ContentBlock::text("notes")]);
    assert_eq!(image.call_id, "c2");
    // The files right after the response are its result's, those after the
    // text the user's.
    assert_eq!(image.text_content(), "Binary content provided (1 item(s)).");
    assert_eq!(
        image.content[1],
        ContentBlock::of_media(lmstack::Media::base64("image/png", "iVBORw0KGgo="))
    );
    assert!(
        matches!(&image.content[2], ContentBlock::Document(media)
            if media.media_type() == Some("application/pdf")),
        "{:?}",
        image.content
    );
    assert_eq!(image.content.len(), 3);
    assert_eq!(user.content.len(), 2);
}

#[test]
fn bad_requests_name_the_field_at_fault() {
    for (body, expected) in [
        (
            json!({"contents": [{"role": "tool", "parts": []}]}),
            "contents[0].role",
        ),
        (
            json!({"contents": [{"role": "user", "parts": [{"functionCall": {"name": "f"}}]}]}),
            "contents[0].parts[0].functionCall",
        ),
        (
            json!({"contents": [], "generationConfig": {"candidateCount": 2}}),
            "generationConfig.candidateCount",
        ),
        (
            json!({"contents": [], "systemInstruction": {"parts": [{"inlineData": {"mimeType": "image/png", "data": "AA"}}]}}),
            "systemInstruction.parts[0]",
        ),
        (
            json!({"contents": [{"role": "user", "parts": "Hi"}]}),
            "contents[0].parts",
        ),
    ] {
        let error = decode_request(body.to_string().as_bytes(), "m").unwrap_err();
        assert!(matches!(error, Error::InvalidRequest(_)), "{error}");
        assert!(error.to_string().contains(expected), "{expected}: {error}");
    }
    assert!(decode_request(b"{", "m").is_err());
}

#[test]
fn errors_have_googles_shape_and_status_names() {
    for (error, status, name) in [
        (Error::InvalidRequest("x".into()), 400, "INVALID_ARGUMENT"),
        (
            Error::Refused {
                status: 401,
                message: "x".into(),
            },
            401,
            "UNAUTHENTICATED",
        ),
        (
            Error::Refused {
                status: 404,
                message: "x".into(),
            },
            404,
            "NOT_FOUND",
        ),
        (
            Error::Refused {
                status: 429,
                message: "x".into(),
            },
            429,
            "RESOURCE_EXHAUSTED",
        ),
        (
            Error::Refused {
                status: 501,
                message: "x".into(),
            },
            501,
            "UNIMPLEMENTED",
        ),
        (Error::stage("tool loop", "broke"), 500, "INTERNAL"),
    ] {
        let (code, body) = error_body(&error);
        assert_eq!(code, status);
        assert_eq!(body["error"]["code"], status);
        assert_eq!(body["error"]["status"], name, "{error}");
        assert!(body["error"]["message"].is_string());
    }
}

// ---------------------------------------------------------------------------
// Replies

/// Every recorded stream that ends well, framed as SSE.
fn recorded_streams() -> Vec<(String, Vec<u8>)> {
    let mut streams = Vec::new();
    for name in [MULTI_TOOL, THINKING, RIG] {
        for (n, exchange) in cassette(name).into_iter().enumerate() {
            streams.push((format!("{name} {n}"), exchange.response.into_bytes()));
        }
    }
    for name in [
        "google/vercel-ai/google-stream-no-args-tool-call.chunks.txt",
        "google/vercel-ai/google-stream-tool-call-arguments.chunks.txt",
        "google/vercel-ai/google-tool-call-gemini3.chunks.txt",
    ] {
        streams.push((name.into(), chunks_as_sse(name)));
    }
    for name in [
        "google/vertexai-sdk-test-data/googleai/streaming-success-thinking-function-call-thought-summary-signature.txt",
        "google/hand-made/grounding.sse",
    ] {
        streams.push((name.into(), fixture(name)));
    }
    streams
}

/// Messages as they compare across a re-encoding: without the response ids
/// (each response names its own).
fn comparable(messages: Vec<Message>) -> Value {
    fn strip(value: &mut Value) {
        match value {
            Value::Object(fields) => {
                fields.remove("generation_id");
                fields.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut json = as_json(&messages);
    strip(&mut json);
    json
}

/// Encodes `events` in `mode` (their calls' ids sealed, as the gateway
/// does), cut into pieces of `sizes`.
fn encoded(events: Vec<Event>, mode: StreamMode) -> Vec<u8> {
    let mut encoder = ReplyEncoder::new("r-1", "gemini-x", mode);
    let mut out: Output<Bytes> = Output::new();
    for mut event in events {
        lmstack::server::sealed_ids::seal_event(&mut event);
        encoder.push(Ok(event), &mut out).unwrap();
    }
    encoder.finish(&mut out).unwrap();
    out.drain().flat_map(|bytes| bytes.to_vec()).collect()
}

/// Lifts what an encoder wrote and opens the sealed ids again.
fn relifted(bytes: &[u8], mode: StreamMode, sizes: &[usize]) -> Vec<Message> {
    let decoder = match mode {
        StreamMode::Sse => BodyDecoder::sse(Lifter::new()),
        StreamMode::Whole | StreamMode::JsonArray => BodyDecoder::json(Lifter::new()),
    };
    let events = decode_cut(decoder, bytes, sizes).unwrap();
    let mut request = ChatRequest::new(Joiner::join(events));
    lmstack::server::sealed_ids::open_request(&mut request);
    request.messages
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(48)))]

    /// A recorded stream, lifted at any cutting, encoded in every mode and
    /// lifted again at any cutting, gives the same messages.
    #[test]
    fn a_recorded_stream_survives_encoding_in_every_mode(
        pick in any::<prop::sample::Index>(),
        cuts in prop::collection::vec(1usize..97, 1..6),
        again in prop::collection::vec(1usize..97, 1..6),
    ) {
        let mut streams = recorded_streams();
        let (name, body) = streams.swap_remove(pick.index(streams.len()));
        let events = decode_cut(BodyDecoder::sse(Lifter::new()), &body, &cuts).unwrap();
        let expected = comparable(Joiner::join(events.clone()));
        for mode in [StreamMode::Sse, StreamMode::JsonArray, StreamMode::Whole] {
            let bytes = encoded(events.clone(), mode);
            let messages = relifted(&bytes, mode, &again);
            prop_assert_eq!(&comparable(messages), &expected, "{} {:?}", name, mode);
        }
    }
}

#[test]
fn every_recorded_stream_has_something_to_encode() {
    for (name, body) in recorded_streams() {
        let events = decode_cut(BodyDecoder::sse(Lifter::new()), &body, &[usize::MAX]).unwrap();
        let messages = Joiner::join(events.clone());
        assert!(
            messages.iter().any(|m| !matches!(m, Message::Usage(_))),
            "{name}"
        );
        let sse = String::from_utf8(encoded(events, StreamMode::Sse)).unwrap();
        assert!(
            sse.ends_with("\n\n") && sse.contains("\"finishReason\""),
            "{name}"
        );
    }
}

#[test]
fn a_failure_mid_stream_is_a_last_response_holding_the_error() {
    for mode in [StreamMode::Sse, StreamMode::JsonArray] {
        let mut encoder = ReplyEncoder::new("r", "m", mode);
        let mut out: Output<Bytes> = Output::new();
        encoder.push(Ok(Event::text("Hi")), &mut out).unwrap();
        let error = Error::Refused {
            status: 503,
            message: "busy".into(),
        };
        encoder.push(Err(error), &mut out).unwrap();
        encoder.push(Ok(Event::text("more")), &mut out).unwrap();
        encoder.finish(&mut out).unwrap();
        let bytes: Vec<u8> = out.drain().flat_map(|b| b.to_vec()).collect();
        let lifted = decode_cut(
            match mode {
                StreamMode::Sse => BodyDecoder::sse(Lifter::new()),
                _ => BodyDecoder::json(Lifter::new()),
            },
            &bytes,
            &[7],
        );
        let error = lifted.unwrap_err();
        assert!(error.to_string().contains("busy"), "{mode:?}: {error}");
        assert_eq!(encoder.status(), 503);
    }
}

#[test]
fn signatures_and_ids_of_calls_reach_the_client() {
    let mut metadata = Metadata::new();
    metadata.insert(THOUGHT_SIGNATURE_KEY, json!("c2ln"));
    let mut call = lmstack::ToolCallDelta::new(0);
    call.metadata = metadata;
    let details = call.details_mut();
    details.id = Some("c1".into());
    details.name = Some("add".into());
    let mut encoder = ReplyEncoder::new("r", "m", StreamMode::Whole);
    let mut out: Output<Bytes> = Output::new();
    for event in [
        Event::from(call),
        Event::call_arguments(0, "{\"a\":"),
        Event::call_arguments(0, "2}"),
    ] {
        encoder.push(Ok(event), &mut out).unwrap();
    }
    encoder.finish(&mut out).unwrap();
    let body: Value = serde_json::from_slice(&out.pop().unwrap()).unwrap();
    assert_eq!(
        body["candidates"][0]["content"]["parts"],
        json!([{"functionCall": {"name": "add", "args": {"a": 2}, "id": "c1"}, "thoughtSignature": "c2ln"}])
    );
    assert_eq!(body["candidates"][0]["finishReason"], "STOP");
    assert_eq!(body["responseId"], "r");
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(128)))]

    #[test]
    fn any_bytes_decode_to_a_request_or_an_invalid_request(
        bytes in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        match decode_request(&bytes, "m") {
            Ok(_) | Err(Error::InvalidRequest(_)) => {}
            Err(other) => prop_assert!(false, "{other:?}"),
        }
    }

    /// A recorded request with bytes changed and cut decodes or is refused,
    /// and what decodes lowers (or is refused) without a panic.
    #[test]
    fn damaged_recorded_requests_never_panic(
        pick in any::<prop::sample::Index>(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bodies = recorded_requests();
        bodies.push(("gemini cli".into(), "gemini-3-pro-preview", gemini_cli_request()));
        bodies.push(("gemini cli image".into(), "gemini-2.5-flash", gemini_cli_image_request()));
        let (_, model, body) = bodies.swap_remove(pick.index(bodies.len()));
        let mut bytes = body.to_string().into_bytes();
        for (at, byte) in flips {
            let at = at.index(bytes.len());
            bytes[at] = byte;
        }
        bytes.truncate(cut.index(bytes.len() + 1).max(bytes.len() / 2));
        match decode_request(&bytes, model) {
            Ok(request) => {
                let _ = lower(&request, &LowerOptions::default());
            }
            Err(Error::InvalidRequest(_)) => {}
            Err(other) => prop_assert!(false, "{other:?}"),
        }
    }
}

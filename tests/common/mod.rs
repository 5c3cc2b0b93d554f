//! Helpers shared by the provider tests: reading the recorded fixtures, lifting
//! bytes cut in any way, comparing requests as JSON, a scripted HTTP server
//! (`server`) and the llmock control API (`llmock`).

#![allow(dead_code)] // each test file uses its own part of the helpers

use std::path::{Path, PathBuf};

use lmstack::provider::body::{BodyDecoder, Lift};
#[cfg(feature = "openai")]
use lmstack::provider::openai_chat::Lifter;
use lmstack::service::{Machine, Output};
use lmstack::{
    ChatRequest, Error, Event, Message, Role, ToolCall, ToolChoice, ToolResult, ToolSpec,
};
use serde_json::{Value, json};

/// A llama.cpp grammar that makes the model write one Hermes-style call of
/// `add(a, b)` as text: the first round of the natural-tool-use tests on
/// llama.cpp (`tests/e2e/llamacpp.rs`, and through the gateway in
/// `cli/tests/e2e/sdk_clients.rs`).
pub const ADD_CALL_GRAMMAR: &str = r#"root ::= "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": " [0-9]+ ", \"b\": " [0-9]+ "}}\n</tool_call>""#;

/// The path of a fixture under `tests/fixtures` of the repository's root: the
/// library's, which the command line's tests (`cli/`, a package of the same
/// workspace) share.
pub fn fixture_path(name: &str) -> PathBuf {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|dir| dir.join("tests/fixtures"))
        .find(|dir| dir.is_dir())
        .expect("tests/fixtures in the package or above it");
    fixtures.join(name)
}

/// A fixture's bytes.
pub fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixture_path(name)).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

/// One recorded exchange: the request body, the response status and body.
#[derive(Clone, Debug)]
pub struct Exchange {
    pub request: Value,
    pub status: u16,
    pub response: String,
}

/// The exchanges of a go-vcr cassette (charmbracelet/fantasy) or of a rig
/// cassette (`when`/`then` documents).
pub fn cassette(name: &str) -> Vec<Exchange> {
    let text = String::from_utf8(fixture(name)).unwrap();
    let mut exchanges = Vec::new();
    for document in serde_yaml::Deserializer::from_str(&text) {
        let value: serde_yaml::Value = serde::Deserialize::deserialize(document).unwrap();
        if let Some(interactions) = value.get("interactions").and_then(|v| v.as_sequence()) {
            for interaction in interactions {
                exchanges.push(Exchange {
                    request: json_of(&interaction["request"]["body"]),
                    status: interaction["response"]["code"].as_u64().unwrap() as u16,
                    response: interaction["response"]["body"].as_str().unwrap().to_owned(),
                });
            }
        } else if let Some(when) = value.get("when") {
            exchanges.push(Exchange {
                request: json_of(&when["body"]),
                status: value["then"]["status"].as_u64().unwrap() as u16,
                response: value["then"]["body"].as_str().unwrap().to_owned(),
            });
        }
    }
    exchanges
}

/// The exchanges of an anthropic-sdk-python JSON cassette: a request body
/// object, and a response body that is raw SSE text or a parsed JSON object
/// (given back as its JSON text).
pub fn json_cassette(name: &str) -> Vec<Exchange> {
    let cassette: Value = serde_json::from_slice(&fixture(name)).unwrap();
    cassette
        .as_array()
        .unwrap()
        .iter()
        .map(|exchange| {
            let response = &exchange["response"];
            Exchange {
                request: exchange["request"]["body"].clone(),
                status: response["status_code"].as_u64().unwrap() as u16,
                response: match &response["body"] {
                    Value::String(text) => text.clone(),
                    body => body.to_string(),
                },
            }
        })
        .collect()
}

fn json_of(body: &serde_yaml::Value) -> Value {
    serde_json::from_str(body.as_str().expect("a body string")).expect("a JSON request body")
}

/// Vercel's `.chunks.txt`: one chunk's JSON per line, SSE framing stripped. Framed
/// back as `data:` events; nothing is added (no `[DONE]`: the harness dropped it).
pub fn chunks_as_sse(name: &str) -> Vec<u8> {
    let text = String::from_utf8(fixture(name)).unwrap();
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| format!("data: {line}\n\n"))
        .collect::<String>()
        .into_bytes()
}

/// Frames chunk objects as an SSE body ending in `[DONE]`.
pub fn sse(chunks: &[Value]) -> Vec<u8> {
    let mut body: String = chunks
        .iter()
        .map(|chunk| format!("data: {chunk}\n\n"))
        .collect();
    body.push_str("data: [DONE]\n\n");
    body.into_bytes()
}

/// Frames stream events as Anthropic and the Responses API do: each as
/// `event: TYPE` (its `type` field) and its `data:`.
pub fn typed_sse(events: &[Value]) -> Vec<u8> {
    events
        .iter()
        .map(|event| {
            format!(
                "event: {}\ndata: {event}\n\n",
                event["type"].as_str().unwrap()
            )
        })
        .collect::<String>()
        .into_bytes()
}

/// Cuts `bytes` at the given sizes (cycled), feeds them to `decoder` (of any
/// wire's lifter), returns events.
pub fn decode_cut<L: Lift>(
    mut decoder: BodyDecoder<L>,
    bytes: &[u8],
    sizes: &[usize],
) -> Result<Vec<Event>, Error> {
    let mut events = Output::new();
    let mut rest = bytes;
    let mut sizes = sizes.iter().cycle();
    while !rest.is_empty() {
        let size = (*sizes.next().unwrap_or(&usize::MAX)).clamp(1, rest.len());
        decoder.push(rest[..size].to_vec().into(), &mut events)?;
        rest = &rest[size..];
    }
    decoder.finish(&mut events)?;
    Ok(events.drain().collect())
}

/// A body lifted whole into messages by `decoder`, of any wire.
pub fn lift_with<L: Lift>(decoder: BodyDecoder<L>, bytes: &[u8]) -> Result<Vec<Message>, Error> {
    decode_cut(decoder, bytes, &[bytes.len().max(1)]).map(lmstack::Joiner::join)
}

/// A streamed body lifted whole into messages by OpenAI's lifter.
#[cfg(feature = "openai")]
pub fn lift_sse(bytes: &[u8]) -> Result<Vec<Message>, Error> {
    lift_with(BodyDecoder::sse(Lifter::new()), bytes)
}

/// A non-streaming body lifted into messages by OpenAI's lifter.
#[cfg(feature = "openai")]
pub fn lift_json(bytes: &[u8]) -> Result<Vec<Message>, Error> {
    lift_with(BodyDecoder::json(Lifter::new()), bytes)
}

/// Messages as their JSON contract form.
pub fn as_json(messages: &[Message]) -> Value {
    serde_json::to_value(messages).unwrap()
}

/// A request body with every `function.arguments` string parsed, so that two
/// bodies compare as JSON, not as the bytes the model happened to write
/// (`{"a": 2}` and `{"a":2}` are the same arguments).
pub fn normalise_request(mut body: Value) -> Value {
    if let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) {
        for message in messages {
            if let Some(calls) = message.get_mut("tool_calls").and_then(Value::as_array_mut) {
                for call in calls {
                    let arguments = &mut call["function"]["arguments"];
                    if let Some(text) = arguments.as_str() {
                        *arguments =
                            serde_json::from_str(text).unwrap_or(Value::String(text.into()));
                    }
                }
            }
        }
    }
    body
}

/// The canonical form of a recorded first request: its system and user
/// messages, and its options.
pub fn canonical_request(body: &Value) -> ChatRequest {
    let messages = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| {
            let role = serde_json::from_value::<Role>(message["role"].clone()).unwrap();
            Message::text(role, message["content"].as_str().unwrap())
        })
        .collect();
    let mut request = ChatRequest::new(messages);
    let options = &mut request.options;
    for (key, value) in body.as_object().unwrap() {
        match key.as_str() {
            "messages" | "stream_options" => {}
            "model" => options.model = Some(value.as_str().unwrap().into()),
            "max_tokens" | "max_completion_tokens" => {
                options.max_tokens = Some(value.as_u64().unwrap() as u32)
            }
            "temperature" => options.temperature = value.as_f64(),
            "stream" => options.stream = value.as_bool().unwrap(),
            "tool_choice" => {
                options.tool_choice = Some(ToolChoice::Auto).filter(|_| value == "auto")
            }
            "tools" => {
                options.tools = value
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|tool| {
                        let function = &tool["function"];
                        ToolSpec::new(
                            function["name"].as_str().unwrap(),
                            function["description"].as_str().unwrap(),
                            function["parameters"].clone(),
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

/// The tool results the second request of a cassette carries, named after the
/// calls they answer.
pub fn recorded_results(second: &Value, calls: &[ToolCall]) -> Vec<ToolResult> {
    second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "tool")
        .map(|message| {
            let id = message["tool_call_id"].as_str().unwrap();
            let call = calls
                .iter()
                .find(|call| call.id == id)
                .expect("a result answers a lifted call");
            ToolResult::text(id, &call.name, message["content"].as_str().unwrap())
        })
        .collect()
}

#[cfg(feature = "retry")]
pub mod retry;

pub mod interleaved;
pub mod llmock;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod server;

/// Every recorded Chat Completions stream, as its SSE bytes, with its name.
pub fn recorded_openai_streams() -> Vec<(String, Vec<u8>)> {
    let mut replies = Vec::new();
    for name in [
        "openai/fantasy/gpt-4o-multi_tool_streaming.yaml",
        "openai_compat/fantasy/llama-cpp-gpt-oss-tool_streaming.yaml",
        "openai_compat/fantasy/zai-glm-4-7-flash-multi_tool_streaming.yaml",
        "openai_compat/fantasy/zai-glm-4-7-flash-thinking-streaming.yaml",
    ] {
        for (i, exchange) in cassette(name).into_iter().enumerate() {
            replies.push((format!("{name}#{i}"), exchange.response.into_bytes()));
        }
    }
    for name in [
        "refusal",
        "max_tokens_reached",
        "strict_tool",
        "parallel_tools",
    ] {
        let name = format!("openai/openai-python/{name}.sse");
        replies.push((name.clone(), fixture(&name)));
    }
    let name = "openai_compat/vercel-ai/anthropic-fallback-tool-call.sse";
    replies.push((name.into(), fixture(name)));
    let name = "openai_compat/vercel-ai/groq-tool-call.chunks.txt";
    replies.push((name.into(), chunks_as_sse(name)));
    replies
}

/// Every recorded Anthropic Messages stream, framed as SSE, with its name.
pub fn recorded_anthropic_streams() -> Vec<(String, Vec<u8>)> {
    let mut streams = vec![
        (
            "lmdotnet".to_owned(),
            fixture("anthropic/LmDotnetTools/sample-response-anthropic.sse.txt"),
        ),
        (
            "clear-thinking".to_owned(),
            chunks_as_sse("anthropic/vercel-ai/anthropic-clear-thinking.1.chunks.txt"),
        ),
        (
            "tool-no-args".to_owned(),
            chunks_as_sse("anthropic/vercel-ai/anthropic-tool-no-args.chunks.txt"),
        ),
    ];
    for name in [
        "anthropic/fantasy/TestAnthropicCommon/claude-sonnet-4/multi_tool_streaming.yaml",
        "anthropic/fantasy/TestAnthropicThinking/claude-sonnet-4/thinking-streaming.yaml",
    ] {
        for (n, exchange) in cassette(name).into_iter().enumerate() {
            streams.push((format!("{name} {n}"), exchange.response.into_bytes()));
        }
    }
    let name = "anthropic/anthropic-sdk-python/555fb399-a54c-455b-9ac5-2c9673f18e12.json";
    for (n, exchange) in json_cassette(name).into_iter().enumerate() {
        streams.push((format!("{name} {n}"), exchange.response.into_bytes()));
    }
    streams
}

/// Writes every `content` and `system` of an Anthropic Messages body that is a
/// string as one text block (the API reads both alike), so that two bodies
/// compare in one spelling.
pub fn anthropic_text_blocks(body: &mut Value) {
    fn blocks(content: &mut Value) {
        if let Value::String(text) = content {
            *content = json!([{"type": "text", "text": text}]);
        }
    }
    if let Some(system) = body.get_mut("system") {
        blocks(system);
    }
    for message in body["messages"].as_array_mut().unwrap() {
        blocks(&mut message["content"]);
        for block in message["content"].as_array_mut().unwrap() {
            if block["type"] == "tool_result" {
                blocks(&mut block["content"]);
            }
        }
    }
}

/// Fields no wire knows: a name of the `x_probe_` family and any JSON value
/// (nested ones included), as a client of a newer API version might send.
/// Each comes with the index of the place it goes to ([`with_unknown_fields`]).
pub fn unknown_fields()
-> impl proptest::strategy::Strategy<Value = Vec<(proptest::sample::Index, String, Value)>> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-z ]{0,8}".prop_map(Value::from),
    ];
    let value = leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,4}", inner, 0..3)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    });
    prop::collection::vec(
        (any::<prop::sample::Index>(), "x_probe_[a-z]{1,6}", value),
        1..8,
    )
}

/// The places of `body` (JSON pointers) where an object may take unknown
/// fields: `top` itself, each object of the arrays named by `arrays` (a
/// pointer to an array, `*` standing for every index of an array above), as
/// found in `body`.
pub fn object_places(body: &Value, arrays: &[&str]) -> Vec<String> {
    fn expand(body: &Value, pattern: &str) -> Vec<String> {
        match pattern.split_once("/*") {
            None => vec![pattern.to_owned()],
            Some((head, tail)) => {
                let count = body
                    .pointer(head)
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                (0..count)
                    .flat_map(|i| expand(body, &format!("{head}/{i}{tail}")))
                    .collect()
            }
        }
    }
    let mut places = vec![String::new()];
    for array in arrays {
        for place in expand(body, &format!("{array}/*")) {
            if body.pointer(&place).is_some_and(Value::is_object) {
                places.push(place);
            }
        }
    }
    places
}

/// `body` with `fields` added to the objects at `places`, each at the place
/// its index picks (a field already there is left as it is).
pub fn with_unknown_fields(
    mut body: Value,
    places: &[String],
    fields: &[(proptest::sample::Index, String, Value)],
) -> Value {
    for (index, name, value) in fields {
        let place = &places[index.index(places.len())];
        if let Some(object) = body.pointer_mut(place).and_then(Value::as_object_mut) {
            object.entry(name.clone()).or_insert_with(|| value.clone());
        }
    }
    body
}

/// Posts `body` as JSON to a gateway at `base` (with an Anthropic client's
/// `anthropic-version`, which an OpenAI route ignores): the status and the body.
pub async fn post_to_gateway(base: &str, path: &str, body: &Value) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("anthropic-version", "2023-06-01")
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// The JSON objects of an SSE body (its `data:` lines), or the body itself.
pub fn body_objects(body: &str) -> Vec<Value> {
    let data: Vec<Value> = body
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str(data).ok())
        .collect();
    match data.is_empty() {
        true => vec![serde_json::from_str(body).unwrap()],
        false => data,
    }
}

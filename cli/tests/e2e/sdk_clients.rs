//! The official Python SDKs as clients of `lmstack serve`: `openai==3.51.0` and
//! `anthropic==2.10.0`, installed by `.ci/test` in its venv, whose python
//! reaches the tests through `LMSTACK_CI_PYTHON`. The scripts in `tests/e2e/sdk/`
//! drive each SDK and print what they saw; these tests check it.
//!
//! - the demo (no configuration): chat, streaming chat with usage, and errors
//!   raised as the SDKs' typed exceptions (unknown model, bad request, wrong
//!   token);
//! - tool calls round-tripped by the client, across formats: the OpenAI SDK
//!   talks to a model behind an Anthropic upstream, the Anthropic SDK to one
//!   behind an OpenAI upstream (a loopback server plays each upstream);
//! - structured output: each SDK's own (a pydantic model: the OpenAI SDK's
//!   `parse` and `stream`, the Anthropic SDK's `parse`, `stream` and a schema
//!   in `output_config`) through an upstream of each wire, which receives the
//!   schema in its native form; a reply that breaks the schema makes the SDK
//!   raise, whole and streamed;
//! - the OpenAI SDK's Responses API (`responses.create`, the `responses.stream`
//!   helper, `previous_response_id`, typed errors) served from a Responses,
//!   an OpenAI Chat and an Anthropic upstream;
//! - natural tools: llama.cpp's server (a text-only model) behind the gateway
//!   gives the OpenAI SDK a native tool call.

use crate::common;

use std::process::Command;

use common::cli::Serving;
use common::server::{Answer, Server};
use serde_json::{Value, json};

const TOKEN: &str = "test-token";

fn python() -> String {
    std::env::var("LMSTACK_CI_PYTHON")
        .expect("LMSTACK_CI_PYTHON: a python with the openai and anthropic SDKs (.ci/test sets it)")
}

fn serve(args: &[&str]) -> Serving {
    common::cli::serve(args, Some(TOKEN))
}

/// Runs `tests/sdk/SCRIPT SCENARIO BASE [MODEL]`; what it printed.
fn sdk(script: &str, scenario: &str, base: &str, model: Option<&str>) -> Value {
    let path = format!("{}/tests/e2e/sdk/{script}", env!("CARGO_MANIFEST_DIR"));
    let mut command = Command::new(python());
    command.arg(path).arg(scenario).arg(base).args(model);
    let output = command.output().expect("python runs");
    assert!(
        output.status.success(),
        "{script} {scenario}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stdout)))
}

const DEMO_ANSWER: &str = "1234 × 5678 = 7,006,652";

#[test]
#[ignore = "needs the official SDKs: .ci/test installs them"]
fn the_openai_sdk_chats_streams_and_gets_typed_errors() {
    let serving = serve(&[]);
    let chat = sdk("openai_client.py", "chat", &serving.base, None);
    assert!(
        chat["content"].as_str().unwrap().contains(DEMO_ANSWER),
        "{chat}"
    );
    assert_eq!(chat["finish_reason"], "stop");
    let stream = sdk("openai_client.py", "stream", &serving.base, None);
    assert_eq!(
        stream["content"], chat["content"],
        "the stream says what the body says"
    );
    assert_eq!(stream["finish_reason"], "stop");
    let errors = sdk("openai_client.py", "errors", &serving.base, None);
    assert_eq!(errors["unknown_model"], json!(["NotFoundError", 404]));
    assert_eq!(errors["bad_request"][0], "BadRequestError");
    assert_eq!(errors["bad_request"][1], 400);
    let message = errors["bad_request"][2].as_str().unwrap();
    assert!(message.contains("messages[0].content"), "{message}");
    assert_eq!(errors["wrong_token"], json!(["AuthenticationError", 401]));
}

#[test]
#[ignore = "needs the official SDKs: .ci/test installs them"]
fn the_anthropic_sdk_chats_streams_and_gets_typed_errors() {
    let serving = serve(&[]);
    let chat = sdk("anthropic_client.py", "chat", &serving.base, None);
    assert!(
        chat["content"].as_str().unwrap().contains(DEMO_ANSWER),
        "{chat}"
    );
    assert_eq!(chat["stop_reason"], "end_turn");
    let stream = sdk("anthropic_client.py", "stream", &serving.base, None);
    assert_eq!(stream["content"], chat["content"]);
    assert_eq!(stream["final"], chat["content"]);
    assert_eq!(stream["stop_reason"], "end_turn");
    let errors = sdk("anthropic_client.py", "errors", &serving.base, None);
    assert_eq!(errors["unknown_model"], json!(["NotFoundError", 404]));
    assert_eq!(errors["bad_request"][0], "BadRequestError");
    let message = errors["bad_request"][2].as_str().unwrap();
    assert!(message.contains("messages[0].content[0]"), "{message}");
    assert_eq!(errors["wrong_token"], json!(["AuthenticationError", 401]));
}

fn json_answer(body: Value) -> Answer {
    Answer::ok(
        "application/json",
        body.to_string().as_bytes(),
        &[usize::MAX],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the official SDKs: .ci/test installs them"]
async fn each_sdk_round_trips_a_tool_call_through_an_upstream_of_the_other_format() {
    let upstream = Server::start(vec![
        // The OpenAI SDK's turns, answered by an Anthropic upstream.
        json_answer(
            json!({"id": "msg_1", "type": "message", "role": "assistant",
            "model": "up-claude", "stop_reason": "tool_use", "stop_sequence": null,
            "content": [{"type": "tool_use", "id": "toolu_01", "name": "get_weather",
                         "input": {"city": "Paris"}}],
            "usage": {"input_tokens": 20, "output_tokens": 9}}),
        ),
        json_answer(
            json!({"id": "msg_2", "type": "message", "role": "assistant",
            "model": "up-claude", "stop_reason": "end_turn", "stop_sequence": null,
            "content": [{"type": "text", "text": "Paris: 18°C and sunny."}],
            "usage": {"input_tokens": 40, "output_tokens": 7}}),
        ),
        // The Anthropic SDK's turns, answered by an OpenAI upstream.
        json_answer(
            json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
            "model": "up-gpt", "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_01",
                "type": "function", "function": {"name": "get_weather",
                "arguments": "{\"city\": \"Paris\"}"}}]}}]}),
        ),
        json_answer(
            json!({"id": "chatcmpl-2", "object": "chat.completion", "created": 1,
            "model": "up-gpt", "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Paris: 18°C and sunny."}}]}),
        ),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("lmstack.toml");
    let base = upstream.base_url();
    std::fs::write(
        &config,
        format!(
            "[models.claude]\nprovider = \"anthropic\"\nbase_url = \"{base}\"\nmodel = \"up-claude\"\nretry = false\n\n\
             [models.gpt]\nprovider = \"openai\"\nbase_url = \"{base}\"\nmodel = \"up-gpt\"\nretry = false\n"
        ),
    )
    .unwrap();
    let serving = serve(&["--config", config.to_str().unwrap()]);
    let gateway = serving.base.clone();
    let openai = tokio::task::spawn_blocking(move || {
        sdk("openai_client.py", "tools", &gateway, Some("claude"))
    })
    .await
    .unwrap();
    assert_eq!(openai["finish_reason"], "tool_calls");
    assert_eq!(
        openai["call"],
        json!({"id": "toolu_01", "name": "get_weather", "arguments": {"city": "Paris"}})
    );
    assert_eq!(openai["answer"], "Paris: 18°C and sunny.");
    let gateway = serving.base.clone();
    let anthropic = tokio::task::spawn_blocking(move || {
        sdk("anthropic_client.py", "tools", &gateway, Some("gpt"))
    })
    .await
    .unwrap();
    assert_eq!(anthropic["stop_reason"], "tool_use");
    assert_eq!(
        anthropic["call"],
        json!({"id": "call_01", "name": "get_weather", "arguments": {"city": "Paris"}})
    );
    assert_eq!(anthropic["answer"], "Paris: 18°C and sunny.");

    // Each upstream got the client's result in its own format.
    let sent = upstream.requests();
    let to_claude = &sent[1].1["messages"];
    assert_eq!(to_claude[1]["content"][0]["type"], "tool_use");
    assert_eq!(to_claude[2]["content"][0]["type"], "tool_result");
    assert_eq!(to_claude[2]["content"][0]["tool_use_id"], "toolu_01");
    let to_gpt = &sent[3].1["messages"];
    assert_eq!(to_gpt[1]["tool_calls"][0]["id"], "call_01");
    assert_eq!(to_gpt[2]["role"], "tool");
    assert_eq!(to_gpt[2]["tool_call_id"], "call_01");
    assert_eq!(to_gpt[2]["content"], "18°C and sunny in Paris");
}

/// The city each SDK's `City` model reads, and a reply that breaks its schema
/// (valid JSON, so that only the schema is at fault).
const CITY: &str = r#"{"name": "Paris", "country": "France", "population": 2102650}"#;
const NOT_A_CITY: &str = r#"{"name": "Paris"}"#;

/// An upstream of `wire` (`openai`, `anthropic`, `gemini`) saying `text`.
fn says(wire: &str, text: &str) -> Answer {
    json_answer(match wire {
        "openai" => json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
            "model": "up", "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": text}}]}),
        "anthropic" => json!({"id": "msg_1", "type": "message", "role": "assistant",
            "model": "up", "stop_reason": "end_turn", "stop_sequence": null,
            "content": [{"type": "text", "text": text}],
            "usage": {"input_tokens": 20, "output_tokens": 9}}),
        "openai-responses" => json!({"id": "resp_up", "object": "response", "created_at": 1,
            "status": "completed", "model": "up", "output": [{"type": "message", "id": "msg_up",
            "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}]}),
        _ => json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
            "finishReason": "STOP", "index": 0}]}),
    })
}

/// An upstream of `wire` calling `get_weather` for Paris.
fn calls_weather(wire: &str) -> Answer {
    let arguments = r#"{"city": "Paris"}"#;
    json_answer(match wire {
        "openai" => json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
            "model": "up", "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_01",
                "type": "function", "function": {"name": "get_weather", "arguments": arguments}}]}}]}),
        "anthropic" => json!({"id": "msg_1", "type": "message", "role": "assistant",
            "model": "up", "stop_reason": "tool_use", "stop_sequence": null,
            "content": [{"type": "tool_use", "id": "call_01", "name": "get_weather",
                         "input": {"city": "Paris"}}],
            "usage": {"input_tokens": 20, "output_tokens": 9}}),
        _ => json!({"id": "resp_up", "object": "response", "created_at": 1,
            "status": "completed", "model": "up", "output": [{"type": "function_call",
            "id": "fc_up", "call_id": "call_01", "name": "get_weather", "arguments": arguments,
            "status": "completed"}]}),
    })
}

/// The schema an upstream of `wire` received, from its native field; for
/// OpenAI, with the `name` and `strict` beside it.
fn schema_sent(wire: &str, body: &Value) -> (Value, Value, Value) {
    match wire {
        "openai" => {
            let format = &body["response_format"];
            assert_eq!(format["type"], "json_schema", "{body}");
            let named = &format["json_schema"];
            (
                named["schema"].clone(),
                named["name"].clone(),
                named["strict"].clone(),
            )
        }
        "anthropic" => {
            let format = &body["output_config"]["format"];
            assert_eq!(format["type"], "json_schema", "{body}");
            (format["schema"].clone(), Value::Null, Value::Null)
        }
        _ => {
            let config = &body["generationConfig"];
            assert_eq!(config["responseMimeType"], "application/json", "{body}");
            (
                config["responseJsonSchema"].clone(),
                Value::Null,
                Value::Null,
            )
        }
    }
}

/// `lmstack serve` with a model named after each wire, served by the
/// upstream of that wire (its upstream model `up`).
fn serve_each(wires: &[&str], upstreams: &[Server]) -> Serving {
    let tables: String = wires
        .iter()
        .zip(upstreams)
        .map(|(wire, upstream)| {
            let base = upstream.base_url();
            format!(
                "[models.{wire}]\nprovider = \"{wire}\"\nbase_url = \"{base}\"\nmodel = \"up\"\nretry = false\n\n"
            )
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let config = common::cli::write_config(&dir, &tables);
    serve(&["--config", &config])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the official SDKs: .ci/test installs them"]
async fn each_sdks_structured_output_reaches_each_upstream_natively_and_is_held_to() {
    const WIRES: [&str; 3] = ["openai", "anthropic", "gemini"];
    // Per upstream: the OpenAI SDK's four requests (parse, stream, and both
    // again, broken), then the Anthropic SDK's five (parse, stream, a schema
    // of its own, and the two broken).
    let mut upstreams = Vec::new();
    for wire in WIRES {
        let answers = [CITY, CITY, NOT_A_CITY, NOT_A_CITY, CITY, CITY, CITY]
            .into_iter()
            .chain([NOT_A_CITY, NOT_A_CITY])
            .map(|text| says(wire, text))
            .collect();
        upstreams.push(Server::start(answers).await);
    }
    let serving = serve_each(&WIRES, &upstreams);
    let city = json!({"name": "Paris", "country": "France", "population": 2102650});
    for (wire, upstream) in WIRES.iter().zip(&upstreams) {
        for script in ["openai_client.py", "anthropic_client.py"] {
            let (gateway, model) = (serving.base.clone(), wire.to_string());
            let seen = tokio::task::spawn_blocking(move || {
                sdk(script, "structured", &gateway, Some(&model))
            })
            .await
            .unwrap();
            let case = format!("{script} through {wire}: {seen}");
            assert_eq!(seen["parsed"], city, "{case}");
            assert_eq!(seen["streamed"], city, "{case}");
            if script == "anthropic_client.py" {
                assert_eq!(seen["raw"], city, "{case}");
            }
            // The gateway checks the reply against the schema: a 502 whole,
            // an error event mid-stream; the SDK raises both.
            assert_eq!(seen["broken"][0], "InternalServerError", "{case}");
            assert_eq!(seen["broken"][1], 502, "{case}");
            let message = seen["broken"][2].as_str().unwrap_or_default();
            assert!(message.contains("does not match"), "{case}");
            let message = seen["broken_stream"][1].as_str().unwrap_or_default();
            assert!(message.contains("does not match"), "{case}");
        }
        // Every request carried the SDK's schema in the upstream's own form.
        let sent = upstream.requests();
        assert_eq!(sent.len(), 9, "{wire}");
        for (at, (_, body)) in sent.iter().enumerate() {
            let (schema, name, strict) = schema_sent(wire, body);
            assert_eq!(
                schema["required"],
                json!(["name", "country", "population"]),
                "{wire} {at}: {body}"
            );
            assert_eq!(schema["properties"]["population"]["type"], "integer");
            assert_eq!(schema["additionalProperties"], false, "{wire} {at}");
            if *wire == "openai" {
                // The OpenAI SDK names its schema and asks for strict; an
                // Anthropic client's schema has no name (OpenAI needs one).
                let (expected_name, expected_strict) = match at {
                    0..4 => (json!("City"), json!(true)),
                    _ => (json!("response"), Value::Null),
                };
                assert_eq!((name, strict), (expected_name, expected_strict), "{at}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the official SDKs: .ci/test installs them"]
async fn the_openai_sdks_responses_api_works_on_each_upstream_wire() {
    const WIRES: [&str; 3] = ["openai-responses", "openai", "anthropic"];
    let mut upstreams = Vec::new();
    for wire in WIRES {
        let answers = vec![
            calls_weather(wire),
            says(wire, "Paris: 18°C and sunny."),
            says(wire, "Hello!"),
            says(wire, "Noted."),
            says(wire, "The code is 42."),
        ];
        upstreams.push(Server::start(answers).await);
    }
    let serving = serve_each(&WIRES, &upstreams);
    for (wire, upstream) in WIRES.iter().zip(&upstreams) {
        let (gateway, model) = (serving.base.clone(), wire.to_string());
        let seen = tokio::task::spawn_blocking(move || {
            sdk("openai_client.py", "responses", &gateway, Some(&model))
        })
        .await
        .unwrap();
        let case = format!("through {wire}: {seen}");
        assert_eq!(
            seen["call"],
            json!({"name": "get_weather", "arguments": {"city": "Paris"}}),
            "{case}"
        );
        assert_eq!(seen["answer"], "Paris: 18°C and sunny.", "{case}");
        assert_eq!(
            seen["streamed"],
            json!(["Hello!", "Hello!", "completed"]),
            "{case}"
        );
        assert_eq!(seen["recalled"], "The code is 42.", "{case}");
        assert_eq!(
            seen["unknown_model"],
            json!(["NotFoundError", 404]),
            "{case}"
        );
        assert_eq!(
            seen["unknown_previous"],
            json!(["BadRequestError", 400, "previous_response_not_found"]),
            "{case}"
        );
        // The upstream got the tool's result in its own shape, and the
        // remembered turn before the question that recalls it.
        let sent = upstream.requests();
        assert_eq!(sent.len(), 5, "{case}");
        let result = sent[1].1.to_string();
        assert!(
            result.contains("18°C and sunny in Paris"),
            "{wire}: {result}"
        );
        let shape = match *wire {
            "openai" => r#""role":"tool""#,
            "anthropic" => r#""type":"tool_result""#,
            _ => r#""type":"function_call_output""#,
        };
        assert!(result.contains(shape), "{wire}: {result}");
        let recall = sent[4].1.to_string();
        assert!(
            recall.contains("the code is 42") && recall.contains("Noted."),
            "{wire}: {recall}"
        );
    }
}

#[test]
#[ignore = "needs the official SDKs and llama.cpp's server: .ci/test installs and starts them"]
fn a_text_only_model_behind_the_gateway_gives_the_sdk_native_tool_calls() {
    let llama = std::env::var("LMSTACK_LLAMACPP_URL")
        .expect("LMSTACK_LLAMACPP_URL: llama.cpp's server (.ci/test starts it)");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("lmstack.toml");
    std::fs::write(
        &config,
        format!(
            "[models.smol]\nprovider = \"openai\"\nbase_url = \"{llama}/v1\"\n\
             model = \"smollm2-135m\"\nnatural_tools = \"tagged\"\nread_timeout_secs = 120\n"
        ),
    )
    .unwrap();
    let serving = serve(&["--config", config.to_str().unwrap()]);
    let path = format!(
        "{}/tests/e2e/sdk/openai_client.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let output = Command::new(python())
        .args([
            &path,
            "natural",
            &serving.base,
            "smol",
            common::ADD_CALL_GRAMMAR,
        ])
        .output()
        .expect("python runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap();
    // The model wrote the call as text; the SDK got it as a native call.
    assert_eq!(seen["finish_reason"], "tool_calls", "{seen}");
    assert_eq!(seen["call"]["name"], "add");
    assert!(
        seen["call"]["arguments"]["a"].is_u64() && seen["call"]["arguments"]["b"].is_u64(),
        "{seen}"
    );
    // The result went back as text and the model answered in text.
    assert!(seen["answer"].is_string(), "{seen}");
    assert_eq!(seen["answer_calls"], 0);
}

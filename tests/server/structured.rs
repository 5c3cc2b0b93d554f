//! Structured output and usage across wires, through the gateway over HTTP on
//! loopback: an OpenAI-format client's `response_format` reaches Anthropic and
//! Gemini upstreams in their native forms, a reply that breaks it is an error,
//! and the upstreams' cache and reasoning figures reach each client format,
//! streaming and not.

#![cfg(all(feature = "server", feature = "gemini"))]

use lmstack::provider::anthropic::{Anthropic, AnthropicConfig};
use lmstack::provider::gemini::{Gemini, GeminiConfig};
use lmstack::server::Gateway;
use serde_json::{Value, json};

use crate::common::server::{Answer, Server};
use crate::common::{body_objects, fixture, post_to_gateway};

const SCHEMA: &str = r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}"#;

/// The gateway, serving `claude` from an Anthropic upstream and `gemini`
/// from a Gemini one, on a loopback port; its base URL.
async fn gateway(anthropic: &Server, gemini: &Server) -> String {
    let claude =
        Anthropic::new(AnthropicConfig::new(anthropic.base_url()).model("claude")).unwrap();
    let flash = Gemini::new(GeminiConfig::new(gemini.base_url()).model("gemini")).unwrap();
    let gateway = Gateway::new()
        .model("claude", "anthropic", claude, 4)
        .model("gemini", "gemini", flash, 4);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, gateway.router()).await });
    format!("http://{address}")
}

/// The last `usage` an OpenAI body or stream holds.
fn openai_usage(body: &str) -> Value {
    let objects = body_objects(body);
    let usage = objects.iter().rev().find_map(|object| object.get("usage"));
    let usage = usage.filter(|usage| !usage.is_null()).cloned();
    usage.unwrap_or_else(|| panic!("no usage in {body}"))
}

/// An Anthropic body's usage, or a stream's `message_start` usage with the
/// `message_delta` usage over it.
fn anthropic_usage(body: &str) -> Value {
    let mut usage = serde_json::Map::new();
    for object in body_objects(body) {
        let found = object.get("usage").or(object.pointer("/message/usage"));
        if let Some(Value::Object(found)) = found {
            usage.extend(found.clone());
        }
    }
    Value::Object(usage)
}

fn anthropic_reply(text: &str) -> Answer {
    let body = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 9, "output_tokens": 5}});
    Answer::ok("application/json", body.to_string().as_bytes(), &[7])
}

fn gemini_reply(text: &str) -> Answer {
    let body = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 5,
            "thoughtsTokenCount": 20, "cachedContentTokenCount": 64, "totalTokenCount": 125}});
    Answer::ok("application/json", body.to_string().as_bytes(), &[11])
}

fn openai_request(model: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "Where is the Louvre?"}],
        "response_format": {"type": "json_schema",
            "json_schema": {"name": "place", "strict": true, "schema": serde_json::from_str::<Value>(SCHEMA).unwrap()}}})
}

#[tokio::test]
async fn an_openai_clients_response_format_reaches_anthropic_and_gemini_in_their_forms() {
    for stream in [false, true] {
        let anthropic = Server::start(vec![anthropic_reply(r#"{"city":"Paris"}"#)]).await;
        let gemini = Server::start(vec![gemini_reply(r#"{"city":"Paris"}"#)]).await;
        let base = gateway(&anthropic, &gemini).await;
        for model in ["claude", "gemini"] {
            let (status, body) = post_to_gateway(
                &base,
                "/v1/chat/completions",
                &openai_request(model, stream),
            )
            .await;
            assert_eq!(status, 200, "{model}, stream {stream}: {body}");
            assert!(body.contains(r#"{\"city\":\"Paris\"}"#), "{body}");
        }
        let schema: Value = serde_json::from_str(SCHEMA).unwrap();
        let sent = &anthropic.requests()[0].1;
        assert_eq!(
            sent["output_config"],
            json!({"format": {"type": "json_schema", "schema": schema}})
        );
        assert!(sent.get("response_format").is_none(), "{sent}");
        let sent = &gemini.requests()[0].1;
        assert_eq!(
            sent["generationConfig"],
            json!({"responseMimeType": "application/json", "responseJsonSchema": schema})
        );
        assert!(sent.get("response_format").is_none(), "{sent}");
    }
}

#[tokio::test]
async fn a_reply_that_breaks_the_schema_is_an_error_in_both_modes() {
    for stream in [false, true] {
        let anthropic = Server::start(vec![anthropic_reply("Sure! The Louvre is in Paris.")]).await;
        let gemini = Server::start(vec![gemini_reply(r#"{"town":"Paris"}"#)]).await;
        let base = gateway(&anthropic, &gemini).await;
        for (model, problem) in [("claude", "not the JSON"), ("gemini", "does not match")] {
            let (status, body) = post_to_gateway(
                &base,
                "/v1/chat/completions",
                &openai_request(model, stream),
            )
            .await;
            let error = body_objects(&body)
                .into_iter()
                .find_map(|object| object.get("error").cloned())
                .unwrap_or_else(|| panic!("{model}, stream {stream}: no error in {body}"));
            assert!(error.to_string().contains(problem), "{error}");
            if !stream {
                assert_eq!(status, 502, "{body}");
            }
        }
    }
}

#[tokio::test]
async fn cache_and_reasoning_figures_reach_each_client_format_in_both_modes() {
    // A recorded Anthropic stream: 9 uncached input tokens, 619 written to the
    // cache and 12055 read from it, 732 output tokens.
    let recorded = fixture("anthropic/LmDotnetTools/sample-response-anthropic.sse.txt");
    for stream in [false, true] {
        let answers = || {
            vec![
                Answer::ok("text/event-stream", &recorded, &[97]),
                Answer::ok("text/event-stream", &recorded, &[97]),
            ]
        };
        let anthropic = Server::start(answers()).await;
        let gemini = Server::start(vec![gemini_reply("Paris."), gemini_reply("Paris.")]).await;
        let base = gateway(&anthropic, &gemini).await;
        let openai = |model: &str| {
            json!({"model": model, "stream": stream, "stream_options": {"include_usage": true},
                   "messages": [{"role": "user", "content": "Hi"}]})
        };
        let messages = |model: &str| {
            json!({"model": model, "stream": stream, "max_tokens": 64,
                   "messages": [{"role": "user", "content": "Hi"}]})
        };

        {
            let (_, body) = post_to_gateway(&base, "/v1/chat/completions", &openai("claude")).await;
            let usage = openai_usage(&body);
            assert_eq!(usage["prompt_tokens"], 9 + 619 + 12055, "{usage}");
            assert_eq!(usage["completion_tokens"], 732);
            assert_eq!(
                usage["prompt_tokens_details"],
                json!({"cached_tokens": 12055, "cache_write_tokens": 619})
            );
            let (_, body) = post_to_gateway(&base, "/v1/chat/completions", &openai("gemini")).await;
            let usage = openai_usage(&body);
            let counts = (&usage["prompt_tokens"], &usage["completion_tokens"]);
            assert_eq!(counts, (&json!(100), &json!(25)));
            assert_eq!(usage["prompt_tokens_details"], json!({"cached_tokens": 64}));
            assert_eq!(
                usage["completion_tokens_details"],
                json!({"reasoning_tokens": 20})
            );
        }
        let (_, body) = post_to_gateway(&base, "/v1/messages", &messages("claude")).await;
        let usage = anthropic_usage(&body);
        assert_eq!(
            (&usage["input_tokens"], &usage["cache_read_input_tokens"]),
            (&json!(9), &json!(12055)),
            "{usage}"
        );
        assert_eq!(usage["cache_creation_input_tokens"], 619);
        assert_eq!(usage["output_tokens"], 732);

        // Gemini: 100 prompt tokens, 64 of them cached; 5 + 20 thinking out.
        let (_, body) = post_to_gateway(&base, "/v1/messages", &messages("gemini")).await;
        let usage = anthropic_usage(&body);
        assert_eq!(
            (
                &usage["input_tokens"],
                &usage["cache_read_input_tokens"],
                &usage["output_tokens"]
            ),
            (&json!(36), &json!(64), &json!(25)),
            "{usage}"
        );
        assert_eq!(
            usage["output_tokens_details"],
            json!({"thinking_tokens": 20})
        );
    }
}

//! Same wire, nothing lost, in the reply, through the gateway over HTTP on
//! loopback: an upstream's fields that lmstack does not know reach a client of
//! the same wire, whatever the modes of the upstream and of the client, and
//! however the upstream's body is cut; a client of the other wire sees none
//! of them.
//!
//! - OpenAI Chat: unknown fields of a streamed `delta` (on a delta with no
//!   content, on text, on a delta of calls only), of a call's first and later
//!   fragments, and of a whole body's message and calls;
//! - Anthropic Messages: `message_start.message`'s (`container`),
//!   `message_delta.delta`'s (`container`) and `message_delta`'s own
//!   (`context_management`), and a whole body's top-level ones.

#![cfg(all(feature = "server", feature = "openai", feature = "anthropic"))]

use crate::common;

use common::server::{Answer, Server};
use common::{body_objects, post_to_gateway};
use lmstack::provider::anthropic::{Anthropic, AnthropicConfig};
use lmstack::provider::openai_chat::{OpenAi, OpenAiConfig};
use lmstack::server::Gateway;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Serves a gateway whose model `up` is `provider` (named `kind`) over an
/// upstream answering once with `body` (SSE when `stream`), cut at `sizes`.
async fn gateway<S>(kind: &str, stream: bool, body: &[u8], sizes: &[usize]) -> (Server, String)
where
    S: FromUpstream,
{
    let content_type = if stream {
        "text/event-stream"
    } else {
        "application/json"
    };
    let upstream = Server::start(vec![Answer::ok(content_type, body, sizes)]).await;
    let gateway = S::served(Gateway::new(), kind, &upstream.base_url());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, gateway.router()).await });
    (upstream, format!("http://{address}"))
}

/// A provider a test serves as model `up`.
trait FromUpstream {
    fn served(gateway: Gateway, kind: &str, base: &str) -> Gateway;
}

struct OpenAiUpstream;
struct AnthropicUpstream;

impl FromUpstream for OpenAiUpstream {
    fn served(gateway: Gateway, kind: &str, base: &str) -> Gateway {
        let provider = OpenAi::new(OpenAiConfig::new(base).model("m")).unwrap();
        gateway.model("up", kind, provider, 4)
    }
}

impl FromUpstream for AnthropicUpstream {
    fn served(gateway: Gateway, kind: &str, base: &str) -> Gateway {
        let provider = Anthropic::new(AnthropicConfig::new(base).model("m")).unwrap();
        gateway.model("up", kind, provider, 4)
    }
}

/// The answer of a gateway serving `body` to a client of `path`, asking in
/// its mode `client_stream`.
fn served<S: FromUpstream>(
    kind: &str,
    upstream_stream: bool,
    body: &[u8],
    sizes: &[usize],
    path: &str,
    client_stream: bool,
) -> String {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (_upstream, base) = gateway::<S>(kind, upstream_stream, body, sizes).await;
        let request = match path {
            "/v1/messages" => json!({"model": "up", "max_tokens": 64, "stream": client_stream,
                "messages": [{"role": "user", "content": "Go"}]}),
            _ => json!({"model": "up", "stream": client_stream,
                "messages": [{"role": "user", "content": "Go"}]}),
        };
        let (status, answer) = post_to_gateway(&base, path, &request).await;
        assert_eq!(status, 200, "{answer}");
        answer
    })
}

/// The fields of `object` whose names start with `x_probe_`, or are
/// `container` or `context_management`.
fn probes(object: Option<&Value>) -> Map<String, Value> {
    object
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(name, _)| {
            name.starts_with("x_probe_") || *name == "container" || *name == "context_management"
        })
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

/// What an OpenAI reply says beyond what lmstack knows: the message's
/// unknown fields, and each call's, by the call's place (of every delta
/// of a stream, or of the body's message).
fn openai_probes(answer: &str) -> (Map<String, Value>, Vec<Map<String, Value>>) {
    let mut message = Map::new();
    let mut calls: Vec<Map<String, Value>> = Vec::new();
    for object in body_objects(answer) {
        let Some(delta) = object
            .pointer("/choices/0/delta")
            .or(object.pointer("/choices/0/message"))
        else {
            continue;
        };
        message.extend(probes(Some(delta)));
        for (n, call) in delta["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let at = call["index"].as_u64().map_or(n, |index| index as usize);
            if calls.len() <= at {
                calls.resize_with(at + 1, Map::new);
            }
            calls[at].extend(probes(Some(call)));
        }
    }
    (message, calls)
}

/// An OpenAI stream with unknown fields everywhere a delta may have them:
/// a first delta with no content, text, a delta of calls only, a call's
/// first and later fragments.
fn openai_stream() -> Vec<Value> {
    let chunk = |delta: Value| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
    };
    vec![
        chunk(json!({"role": "assistant", "content": "", "x_probe_first": {"a": [1, null]}})),
        chunk(json!({"content": "Hel", "x_probe_text": 1})),
        chunk(json!({"content": "lo", "x_probe_more": "s"})),
        chunk(
            json!({"x_probe_calls": true, "tool_calls": [{"index": 0, "id": "call_a",
            "type": "function", "function": {"name": "f", "arguments": ""}, "x_probe_call": "c"}]}),
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"a\":"},
            "x_probe_later": [2]}]}),
        ),
        chunk(json!({"x_probe_between": null})),
        chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]})),
        json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ]
}

/// The OpenAI fields `openai_stream` sends: the message's, and the call's.
fn openai_stream_probes() -> (Map<String, Value>, Vec<Map<String, Value>>) {
    let mut message = Map::new();
    let mut call = Map::new();
    for chunk in openai_stream() {
        let delta = &chunk["choices"][0]["delta"];
        message.extend(probes(Some(delta)));
        for fragment in delta["tool_calls"].as_array().into_iter().flatten() {
            call.extend(probes(Some(fragment)));
        }
    }
    (message, vec![call])
}

/// A whole OpenAI body of calls only, with unknown fields on the message
/// and the call.
fn openai_body() -> Value {
    json!({"id": "chatcmpl-2", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "x_probe_message": {"k": "v"},
            "tool_calls": [{"id": "call_b", "type": "function", "x_probe_call": 3,
                "function": {"name": "g", "arguments": "{}"}}]}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})
}

/// An Anthropic stream with `message_start`'s, `message_delta.delta`'s and
/// `message_delta`'s own unknown fields.
fn anthropic_stream() -> Vec<Value> {
    let container = json!({"id": "container_1", "expires_at": "2025-01-01T00:00:00Z"});
    vec![
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": "claude", "content": [], "stop_reason": null,
            "stop_sequence": null, "container": container, "x_probe_start": [1],
            "usage": {"input_tokens": 3, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "Hi"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn",
            "stop_sequence": null, "container": container, "x_probe_delta": "d"},
            "usage": {"output_tokens": 2},
            "context_management": {"applied_edits": []}, "x_probe_top": {"n": 1}}),
        json!({"type": "message_stop"}),
    ]
}

/// A whole Anthropic body with top-level unknown fields.
fn anthropic_body() -> Value {
    json!({"id": "msg_2", "type": "message", "role": "assistant", "model": "claude",
        "content": [{"type": "text", "text": "Hi"}], "stop_reason": "end_turn",
        "stop_sequence": null, "usage": {"input_tokens": 3, "output_tokens": 2},
        "container": {"id": "container_2", "expires_at": "2025-01-01T00:00:00Z"},
        "context_management": {"applied_edits": []}, "x_probe_body": false})
}

/// What an Anthropic reply says beyond what lmstack knows: the
/// message's fields (a stream: `message_start.message`'s), the fields
/// `message_delta` and its `delta` carry (a body: none).
fn anthropic_probes(answer: &str) -> [Map<String, Value>; 3] {
    let objects = body_objects(answer);
    let Some(start) = objects.iter().find(|o| o["type"] == "message_start") else {
        return [probes(objects.first()), Map::new(), Map::new()];
    };
    let delta = objects.iter().find(|o| o["type"] == "message_delta");
    [
        probes(start.get("message")),
        probes(delta.and_then(|delta| delta.get("delta"))),
        probes(delta),
    ]
}

/// Cuts of an upstream's body: 1 to 40 bytes each.
fn cuts() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..40, 1..12)
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(6)))]

    /// An OpenAI upstream's unknown fields reach an OpenAI client, streamed
    /// or whole (of a streamed or a whole upstream body), and never an
    /// Anthropic client.
    #[test]
    fn an_openai_upstreams_unknown_fields_reach_an_openai_client_only(sizes in cuts()) {
        let sse = common::sse(&openai_stream());
        let body = openai_body().to_string().into_bytes();
        let expected_body = (
            probes(openai_body().pointer("/choices/0/message")),
            vec![probes(openai_body().pointer("/choices/0/message/tool_calls/0"))],
        );
        for (upstream_stream, sent, expected) in
            [(true, &sse, openai_stream_probes()), (false, &body, expected_body)]
        {
            for client_stream in [true, false] {
                let what = format!("upstream stream {upstream_stream}, client stream {client_stream}");
                let answer = served::<OpenAiUpstream>(
                    "openai", upstream_stream, sent, &sizes, "/v1/chat/completions", client_stream,
                );
                prop_assert_eq!(&openai_probes(&answer), &expected, "{}: {}", what, answer);
                let other = served::<OpenAiUpstream>(
                    "openai", upstream_stream, sent, &sizes, "/v1/messages", client_stream,
                );
                prop_assert!(!other.contains("x_probe_"), "{}: {}", what, other);
            }
        }
    }

    /// An Anthropic upstream's message-level unknown fields reach an
    /// Anthropic client in their places, streamed or whole, and never an
    /// OpenAI client.
    #[test]
    fn an_anthropic_upstreams_unknown_fields_reach_an_anthropic_client_only(sizes in cuts()) {
        let stream = anthropic_stream();
        let sse = common::typed_sse(&stream);
        let start = probes(stream[0].get("message"));
        let delta = probes(stream[4].get("delta"));
        let top = probes(stream.get(4));
        let body = anthropic_body();
        for upstream_stream in [true, false] {
            for client_stream in [true, false] {
                let what = format!("upstream stream {upstream_stream}, client stream {client_stream}");
                let sent = if upstream_stream { sse.clone() } else { body.to_string().into_bytes() };
                let answer = served::<AnthropicUpstream>(
                    "anthropic", upstream_stream, &sent, &sizes, "/v1/messages", client_stream,
                );
                let got = anthropic_probes(&answer);
                let expected = match (upstream_stream, client_stream) {
                    // The stream's places, as they came.
                    (true, true) => [start.clone(), delta.clone(), top.clone()],
                    // A body holds them all at its top, as a client folds a stream.
                    (true, false) => {
                        let mut all = start.clone();
                        all.extend(delta.clone());
                        all.extend(top.clone());
                        [all, Map::new(), Map::new()]
                    }
                    // A body's fields: `message_start`'s in a stream.
                    (false, true) => [probes(Some(&body)), Map::new(), Map::new()],
                    (false, false) => [probes(Some(&body)), Map::new(), Map::new()],
                };
                prop_assert_eq!(&got, &expected, "{}: {}", what, answer);
                let other = served::<AnthropicUpstream>(
                    "anthropic", upstream_stream, &sent, &sizes, "/v1/chat/completions", client_stream,
                );
                for name in ["x_probe_", "container", "context_management"] {
                    prop_assert!(!other.contains(name), "{}: {}", what, other);
                }
            }
        }
    }
}

//! An MCP tool's image through the whole stack, to each provider over real HTTP:
//! `ToolLoop → FunctionCall` (a registry whose only source is the real MCP server
//! `@modelcontextprotocol/server-everything`, over stdio) `→` the OpenAI,
//! Anthropic and Gemini providers, each pointed at a scripted server on loopback
//! that speaks its wire format, streaming and not.
//!
//! Round one: the registry's tools reach the wire request, and the scripted
//! upstream answers with a call of `get-tiny-image`, which runs on the MCP server.
//! Round two: the request carries the PNG the server returned — byte for byte, in
//! the shape each provider takes (Anthropic inside `tool_result`, Chat
//! Completions in an injected user message, Gemini 3 in `functionResponse.parts`,
//! Gemini 2.5 as a part after the responses) — and the upstream's answer reaches
//! the caller.
//!
//! The MCP server comes from `.ci/test`, which installs it and sets
//! `LMSTACK_MCP_EVERYTHING_DIR`; a plain `cargo test` lists these tests as ignored.

#![cfg(all(
    feature = "mcp",
    feature = "openai",
    feature = "anthropic",
    feature = "gemini"
))]

use crate::common;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use common::mcp::everything;
use common::server::{Answer, Server};
use lmstack::function::mcp::McpServer;
use lmstack::function::{CallContext, FunctionCallLayer, MediaPolicy, ToolLoopLayer, ToolRegistry};
use lmstack::provider::anthropic::AnthropicConfig;
use lmstack::provider::gemini::GeminiConfig;
use lmstack::provider::openai_chat::OpenAiConfig;
use lmstack::provider::{Provider, ProviderConfig, Wire};
use lmstack::{ChatRequest, ContentBlock, Message, Role};
use serde_json::{Value, json};
use tower::{ServiceBuilder, ServiceExt};

/// The MCP tool the scripted upstream calls.
const TOOL: &str = "get-tiny-image";
/// What the scripted upstream says in round two.
const FINAL: &str = "A tiny image: the MCP logo.";
/// The first bytes of every PNG.
const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";

/// What server-everything's `get-tiny-image` returns, called directly: its
/// texts, in order, and the PNG's bytes.
struct TinyImage {
    texts: Vec<String>,
    png: Vec<u8>,
}

async fn tiny_image(server: &McpServer) -> TinyImage {
    let output = server
        .call(TOOL, json!({}), &CallContext::new("x"))
        .await
        .unwrap();
    let result = output.into_result("x", TOOL, &MediaPolicy::new());
    assert!(!result.is_error, "{result:?}");
    let kinds: Vec<&str> = result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text { .. } => "text",
            ContentBlock::Image(_) => "image",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["text", "image", "text"], "{result:?}");
    let png = result.content[1]
        .as_media()
        .unwrap()
        .decode()
        .unwrap()
        .unwrap();
    assert!(
        png.starts_with(PNG_MAGIC),
        "server-everything's image is a PNG"
    );
    let texts = result
        .content
        .iter()
        .filter_map(ContentBlock::as_text)
        .map(str::to_owned)
        .collect();
    TinyImage { texts, png }
}

/// The base64 in a request is a PNG, and the very one the MCP server returned.
fn same_png(data: &Value, image: &TinyImage, what: &str) {
    let data = data
        .as_str()
        .unwrap_or_else(|| panic!("{what}: base64 data"));
    let bytes = STANDARD.decode(data).unwrap();
    assert!(bytes.starts_with(PNG_MAGIC), "{what}: a PNG");
    assert_eq!(
        bytes, image.png,
        "{what}: the bytes server-everything returned"
    );
}

/// One provider, as the scripted upstream speaks it and as its requests are
/// checked.
#[derive(Clone, Copy, Debug)]
enum Case {
    OpenAi,
    Anthropic,
    Gemini3,
    Gemini25,
}

impl Case {
    fn model(self) -> &'static str {
        match self {
            Case::OpenAi => "gpt-4o",
            Case::Anthropic => "claude-sonnet-4-5",
            Case::Gemini3 => "gemini-3-pro-preview",
            Case::Gemini25 => "gemini-2.5-flash",
        }
    }

    /// The upstream's answer: a call of `get-tiny-image` in round one, `FINAL`
    /// in round two.
    fn answer(self, round: usize, stream: bool) -> Answer {
        let events: Vec<(&str, Value)> = match (self, round) {
            (Case::OpenAi, 0) => {
                let chunk = |delta: Value, finish: Value| {
                    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
                        "model": "gpt-4o", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
                };
                if stream {
                    vec![
                        (
                            "",
                            chunk(
                                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1",
                            "type": "function", "function": {"name": TOOL, "arguments": ""}}]}),
                                Value::Null,
                            ),
                        ),
                        (
                            "",
                            chunk(
                                json!({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}),
                                Value::Null,
                            ),
                        ),
                        ("", chunk(json!({}), json!("tool_calls"))),
                    ]
                } else {
                    vec![(
                        "",
                        json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 0,
                        "model": "gpt-4o", "choices": [{"index": 0, "message": {"role": "assistant",
                        "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": TOOL, "arguments": "{}"}}]}, "finish_reason": "tool_calls"}]}),
                    )]
                }
            }
            (Case::OpenAi, _) => {
                if stream {
                    let chunk = |delta: Value, finish: Value| {
                        json!({"id": "chatcmpl-2", "object": "chat.completion.chunk", "created": 0,
                            "model": "gpt-4o", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
                    };
                    vec![
                        (
                            "",
                            chunk(json!({"role": "assistant", "content": ""}), Value::Null),
                        ),
                        ("", chunk(json!({"content": FINAL}), Value::Null)),
                        ("", chunk(json!({}), json!("stop"))),
                    ]
                } else {
                    vec![(
                        "",
                        json!({"id": "chatcmpl-2", "object": "chat.completion", "created": 0,
                        "model": "gpt-4o", "choices": [{"index": 0, "message": {"role": "assistant",
                        "content": FINAL}, "finish_reason": "stop"}]}),
                    )]
                }
            }
            (Case::Anthropic, round) => {
                let (id, block, delta, stop) = if round == 0 {
                    (
                        "msg_1",
                        json!({"type": "tool_use", "id": "toolu_1", "name": TOOL, "input": {}}),
                        json!({"type": "input_json_delta", "partial_json": "{}"}),
                        "tool_use",
                    )
                } else {
                    (
                        "msg_2",
                        json!({"type": "text", "text": FINAL}),
                        json!({"type": "text_delta", "text": FINAL}),
                        "end_turn",
                    )
                };
                let usage = json!({"input_tokens": 10, "output_tokens": 5});
                if stream {
                    let mut start = block.clone();
                    match start["type"].as_str() {
                        Some("tool_use") => start["input"] = json!({}),
                        _ => start["text"] = json!(""),
                    }
                    vec![
                        (
                            "message_start",
                            json!({"type": "message_start", "message": {"id": id,
                            "type": "message", "role": "assistant", "model": self.model(),
                            "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage}}),
                        ),
                        (
                            "content_block_start",
                            json!({"type": "content_block_start", "index": 0,
                            "content_block": start}),
                        ),
                        (
                            "content_block_delta",
                            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
                        ),
                        (
                            "content_block_stop",
                            json!({"type": "content_block_stop", "index": 0}),
                        ),
                        (
                            "message_delta",
                            json!({"type": "message_delta",
                            "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 5}}),
                        ),
                        ("message_stop", json!({"type": "message_stop"})),
                    ]
                } else {
                    vec![(
                        "",
                        json!({"id": id, "type": "message", "role": "assistant",
                        "model": self.model(), "content": [block], "stop_reason": stop,
                        "stop_sequence": null, "usage": usage}),
                    )]
                }
            }
            (Case::Gemini3 | Case::Gemini25, round) => {
                let part = if round == 0 {
                    json!({"functionCall": {"name": TOOL, "args": {}}, "thoughtSignature": "c2lnLTE="})
                } else {
                    json!({"text": FINAL})
                };
                let response = json!({"candidates": [{"content": {"role": "model", "parts": [part]},
                    "finishReason": "STOP", "index": 0}],
                    "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
                    "modelVersion": self.model()});
                vec![("", response)]
            }
        };
        if !stream {
            let [(_, body)] = &events[..] else {
                unreachable!("one body")
            };
            return Answer::ok("application/json", body.to_string().as_bytes(), &[7, 64]);
        }
        let mut body = String::new();
        for (event, data) in &events {
            if !event.is_empty() {
                body.push_str(&format!("event: {event}\n"));
            }
            body.push_str(&format!("data: {data}\n\n"));
        }
        if matches!(self, Case::OpenAi) {
            body.push_str("data: [DONE]\n\n");
        }
        Answer::ok("text/event-stream", body.as_bytes(), &[5, 31, 2])
    }

    /// The path and query of each round's request.
    fn path(self, stream: bool) -> String {
        match (self, stream) {
            (Case::OpenAi, _) => "/v1/chat/completions".into(),
            (Case::Anthropic, _) => "/v1/messages".into(),
            (_, false) => format!("/v1/models/{}:generateContent", self.model()),
            (_, true) => format!("/v1/models/{}:streamGenerateContent?alt=sse", self.model()),
        }
    }

    /// The names of the tools declared in a request.
    fn declared_tools(self, body: &Value) -> Vec<String> {
        let tools = body["tools"].as_array().cloned().unwrap_or_default();
        let names: Vec<&Value> = match self {
            Case::OpenAi => tools.iter().map(|t| &t["function"]["name"]).collect(),
            Case::Anthropic => tools.iter().map(|t| &t["name"]).collect(),
            Case::Gemini3 | Case::Gemini25 => tools
                .iter()
                .flat_map(|t| t["functionDeclarations"].as_array().into_iter().flatten())
                .map(|d| &d["name"])
                .collect(),
        };
        names
            .into_iter()
            .map(|name| name.as_str().unwrap().to_owned())
            .collect()
    }

    /// Checks round two's request: the history (`messages` or `contents`) is
    /// exactly the question, the call and its result, with the image where this
    /// provider takes it. The image's data (checked to be the MCP server's PNG)
    /// and the texts the library writes around it (checked by `texts_in_order`) stand as
    /// `<png>` and `<texts>`.
    fn check_result(self, body: &Value, image: &TinyImage, what: &str) {
        let (texts, note) = (&image.texts, format!("\n\n{NOTE}"));
        let (key, expected) = match self {
            Case::Anthropic => (
                "messages",
                json!([
                    {"role": "user", "content": "Show me the tiny image."},
                    {"role": "assistant", "content": [
                        {"type": "tool_use", "id": "toolu_1", "name": TOOL, "input": {}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                        "content": [
                            {"type": "text", "text": texts[0]},
                            {"type": "image", "source": {"type": "base64",
                                "media_type": "image/png", "data": "<png>"}},
                            {"type": "text", "text": texts[1]},
                        ]}]},
                ]),
            ),
            Case::OpenAi => (
                "messages",
                json!([
                    {"role": "user", "content": "Show me the tiny image."},
                    {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": TOOL, "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "<texts>"},
                    {"role": "user", "content": [
                        {"type": "text", "text": format!("Attachments from tool call `call_1` ({TOOL}):")},
                        {"type": "image_url", "image_url": {"url": "<png>"}},
                    ]},
                ]),
            ),
            Case::Gemini3 => (
                "contents",
                json!([
                    {"role": "user", "parts": [{"text": "Show me the tiny image."}]},
                    {"role": "model", "parts": [{"functionCall": {"name": TOOL, "args": {}},
                        "thoughtSignature": "c2lnLTE="}]},
                    {"role": "user", "parts": [{"functionResponse": {"name": TOOL,
                        "parts": [{"inlineData": {"mimeType": "image/png", "data": "<png>"}}],
                        "response": {"result": "<texts>"}}}]},
                ]),
            ),
            Case::Gemini25 => (
                "contents",
                json!([
                    {"role": "user", "parts": [{"text": "Show me the tiny image."}]},
                    {"role": "model", "parts": [{"functionCall": {"name": TOOL, "args": {}},
                        "thoughtSignature": "c2lnLTE="}]},
                    // The image follows the response in the same user turn, under
                    // a heading.
                    {"role": "user", "parts": [
                        {"functionResponse": {"name": TOOL, "response": {"result": "<texts>"}}},
                        {"text": "<heading>"},
                        {"inlineData": {"mimeType": "image/png", "data": "<png>"}},
                    ]},
                ]),
            ),
        };
        let mut history = body[key].clone();
        let (data, texts_at, tail) = match self {
            Case::Anthropic => ("/2/content/0/content/1/source/data", None, ""),
            Case::OpenAi => ("/3/content/1/image_url/url", Some("/2/content"), &*note),
            Case::Gemini3 => (
                "/2/parts/0/functionResponse/parts/0/inlineData/data",
                Some("/2/parts/0/functionResponse/response/result"),
                "",
            ),
            Case::Gemini25 => (
                "/2/parts/2/inlineData/data",
                Some("/2/parts/0/functionResponse/response/result"),
                &*note,
            ),
        };
        let data = history
            .pointer_mut(data)
            .unwrap_or_else(|| panic!("{what}: {body}"));
        let png = std::mem::replace(data, json!("<png>"));
        let png = match self {
            Case::OpenAi => json!(
                png.as_str()
                    .and_then(|url| url.strip_prefix("data:image/png;base64,"))
                    .unwrap_or_else(|| panic!("{what}: a PNG data URI: {png}"))
            ),
            _ => png,
        };
        same_png(&png, image, what);
        if let Some(at) = texts_at {
            let text = history
                .pointer_mut(at)
                .unwrap_or_else(|| panic!("{what}: {body}"));
            let text = std::mem::replace(text, json!("<texts>"));
            texts_in_order(text.as_str().unwrap(), image, tail, what);
        }
        if let Case::Gemini25 = self {
            let heading = history.pointer_mut("/2/parts/1/text").unwrap();
            let heading = std::mem::replace(heading, json!("<heading>"));
            let heading = heading.as_str().unwrap();
            // Gemini 2.5 sent no call id: the heading names the tool alone.
            assert_eq!(
                heading,
                format!("Attachments from the call of `{TOOL}`:"),
                "{what}"
            );
        }
        assert_eq!(history, expected, "{what}: {body}");
    }
}

/// The note that says a tool's image follows in the next message.
const NOTE: &str = "(The tool returned 1 image; it follows in the next message.)";

/// `text` holds the tool's texts in order, ends with `tail`, and does not hold
/// the image.
fn texts_in_order(text: &str, image: &TinyImage, tail: &str, what: &str) {
    let mut rest = text;
    for part in &image.texts {
        let at = rest
            .find(part.as_str())
            .unwrap_or_else(|| panic!("{what}: {part:?}, in order, in {text:?}"));
        rest = &rest[at + part.len()..];
    }
    assert!(rest.ends_with(tail), "{what}: {text:?} ends with {tail:?}");
    let png = STANDARD.encode(&image.png);
    assert!(
        !text.contains(&png[..24]),
        "{what}: no image bytes in text: {text:?}"
    );
}

/// Runs the two rounds through the stack on a provider over wire `W`, whose
/// configuration `config` makes for the scripted server's base URL.
async fn two_rounds<W: Wire>(case: Case, config: impl Fn(String) -> ProviderConfig<W>) {
    let mcp = McpServer::connect(everything()).await.unwrap();
    let image = tiny_image(&mcp).await;
    let registry = ToolRegistry::builder().source(mcp).build().unwrap();
    for stream in [false, true] {
        let what = format!("{case:?}, stream: {stream}");
        let upstream = Server::start(vec![case.answer(0, stream), case.answer(1, stream)]).await;
        let provider = Provider::new(config(upstream.base_url()).model(case.model())).unwrap();
        let stack = ServiceBuilder::new()
            .layer(ToolLoopLayer::new())
            .layer(FunctionCallLayer::new(registry.clone()))
            .service(provider);
        let request =
            ChatRequest::new(vec![Message::user("Show me the tiny image.")]).streaming(stream);
        let messages = stack
            .oneshot(request)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();

        // The final answer reaches the caller, after the call and its result.
        let last = messages
            .iter()
            .rfind(|m| !matches!(m, Message::Usage(_)))
            .unwrap();
        assert_eq!(last.role(), Role::Assistant, "{what}: {messages:?}");
        assert_eq!(last.as_text(), Some(FINAL), "{what}: {messages:?}");
        let results: Vec<_> = messages.iter().flat_map(Message::results).collect();
        assert_eq!(results.len(), 1, "{what}: {messages:?}");
        assert_eq!(results[0].name, TOOL);
        assert!(!results[0].is_error, "{what}: {:?}", results[0]);

        let requests = upstream.requests();
        assert_eq!(requests.len(), 2, "{what}: two rounds");
        assert_eq!(
            upstream.uris(),
            [case.path(stream), case.path(stream)],
            "{what}"
        );
        let declared = case.declared_tools(&requests[0].1);
        assert!(
            declared.iter().any(|name| name == TOOL) && declared.len() > 1,
            "{what}: server-everything's tools declared in round one: {declared:?}"
        );
        case.check_result(&requests[1].1, &image, &what);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs server-everything: .ci/test installs it"]
async fn anthropic_carries_the_mcp_image_inside_tool_result() {
    two_rounds(Case::Anthropic, AnthropicConfig::new).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs server-everything: .ci/test installs it"]
async fn openai_injects_the_mcp_image_in_a_user_message_after_the_tool_message() {
    two_rounds(Case::OpenAi, OpenAiConfig::new).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs server-everything: .ci/test installs it"]
async fn gemini_3_carries_the_mcp_image_in_function_response_parts() {
    two_rounds(Case::Gemini3, GeminiConfig::new).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs server-everything: .ci/test installs it"]
async fn gemini_2_5_carries_the_mcp_image_as_a_part_after_the_function_response() {
    two_rounds(Case::Gemini25, GeminiConfig::new).await;
}

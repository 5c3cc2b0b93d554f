//! Scripted upstreams of each wire for the coding agents' tests: the model's
//! first answer calls one of the agent's own tools, its second is a text made
//! of the tool result it received (which the agent prints, so a test sees that
//! the result came through). Both answers are streamed, as the agents ask.
//!
//! ```ignore
//! let upstream = Wire::Anthropic.upstream("Read", &json!({"file_path": "/tmp/a.txt"})).await;
//! ```

use crate::common;

use base64::Engine;
use common::server::{Answer, Server};
use lmstack::config::ModelConfig;
use lmstack::natural::{Dialect, NaturalToolUseParser, NaturalToolUseTransformer};
use lmstack::provider::{ApiKey, Kind};
use lmstack::{ChatRequest, ContentBlock, Message, ToolCall, ToolResult};
use serde_json::{Value, json};

/// An upstream's wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// OpenAI Chat Completions.
    Chat,
    /// Anthropic Messages.
    Anthropic,
    /// Gemini `streamGenerateContent?alt=sse`.
    Gemini,
    /// OpenAI Responses.
    Responses,
    /// OpenAI Chat Completions from a model without native tool calls: it
    /// writes its calls in its text, in the Hermes form, and reads the tools
    /// and their results as text (served with `natural_tools = "hermes"`).
    TextOnly,
}

/// The model name the scripted answers carry.
const MODEL: &str = "scripted";

/// The ids of the scripted call, where a wire has them.
pub const CHAT_CALL_ID: &str = "call_e2e";
const ANTHROPIC_CALL_ID: &str = "toolu_e2e";

impl Wire {
    /// Every wire with native tool calls.
    pub const ALL: [Wire; 4] = [Wire::Chat, Wire::Anthropic, Wire::Gemini, Wire::Responses];

    /// Its name as `lmstack serve`'s `provider`.
    pub fn provider(self) -> &'static str {
        match self {
            Wire::Chat | Wire::TextOnly => "openai",
            Wire::Anthropic => "anthropic",
            Wire::Gemini => "gemini",
            Wire::Responses => "openai-responses",
        }
    }

    /// The `natural_tools` dialect the gateway serves it with, if it has no
    /// native tool calls.
    pub fn natural_tools(self) -> Option<&'static str> {
        (self == Wire::TextOnly).then_some("hermes")
    }

    /// Whether the request `body` offers the model the tool named `tool`: in
    /// the wire's own `tools`, or for a text-only model as a section of the
    /// system (or developer) messages, and no native tools.
    pub fn offers(self, body: &Value, tool: &str) -> bool {
        match self {
            Wire::TextOnly => {
                let heading = format!("\n## {tool}\n");
                let described = items(&body["messages"])
                    .filter(|m| m["role"] == "system" || m["role"] == "developer")
                    .any(|m| text_of(&m["content"]).contains(&heading));
                body.get("tools").is_none() && described
            }
            _ => body["tools"].to_string().contains(&format!("\"{tool}\"")),
        }
    }

    /// A scripted upstream of this wire whose model calls `tool` with
    /// `arguments`, then answers from the result ([`Wire::turns`]), and
    /// which counts tokens where the wire can ([`Wire::counting`]).
    pub async fn upstream(self, tool: &str, arguments: &Value) -> Server {
        let standing = self.counting().map(|(path, answer)| vec![(path, answer)]);
        Server::start_with_standing(self.turns(tool, arguments), standing.unwrap_or_default()).await
    }

    /// The fragment of the wire's token count path, and the answer to it (ten
    /// tokens): Gemini's `:countTokens` (which Gemini CLI asks before it sends
    /// a file's content), Anthropic's `/count_tokens`.
    pub fn counting(self) -> Option<(&'static str, Answer)> {
        let (path, body) = match self {
            Wire::Gemini => (":countTokens", json!({"totalTokens": 10})),
            Wire::Anthropic => ("/count_tokens", json!({"input_tokens": 10})),
            _ => return None,
        };
        let answer = Answer::ok(
            "application/json",
            body.to_string().as_bytes(),
            &[usize::MAX],
        );
        Some((path, answer))
    }

    /// The two answers of a turn: a call of `tool` with `arguments`, then a
    /// text made of the result the second request holds ([`Wire::reply_to`]).
    pub fn turns(self, tool: &str, arguments: &Value) -> Vec<Answer> {
        let reply: fn(&Value) -> Vec<u8> = match self {
            Wire::Chat => |body| Wire::Chat.reply_to(body),
            Wire::TextOnly => |body| Wire::TextOnly.reply_to(body),
            Wire::Anthropic => |body| Wire::Anthropic.reply_to(body),
            Wire::Gemini => |body| Wire::Gemini.reply_to(body),
            Wire::Responses => |body| Wire::Responses.reply_to(body),
        };
        vec![
            Answer::ok("text/event-stream", &self.call(tool, arguments), &[61]),
            Answer::made_of("text/event-stream", reply),
        ]
    }

    /// The stream of a turn that says what the request's last tool result
    /// held: its images (each one's media type and size) if it has any in
    /// this wire's own shape, else its text.
    pub fn reply_to(self, body: &Value) -> Vec<u8> {
        let images = self.result_images(body);
        let text = if images.is_empty() {
            format!("The tool said: {}", self.result_text(body).trim())
        } else {
            let seen: Vec<String> = images.iter().map(|(kind, data)| seen(kind, data)).collect();
            format!("The tool showed {}.", seen.join(", "))
        };
        self.says(&text)
    }

    /// A stream that calls `tool` with `arguments`.
    pub fn call(self, tool: &str, arguments: &Value) -> Vec<u8> {
        let arguments_text = arguments.to_string();
        match self {
            Wire::TextOnly => {
                // As a Qwen model writes it, cut inside the markup.
                let call = json!({"name": tool, "arguments": arguments});
                let text = format!("Let me look.\n<tool_call>\n{call}\n</tool_call>");
                let (head, tail) = text.split_at(text.find("ool_call>").unwrap());
                common::sse(&[
                    chat_chunk(json!({"role": "assistant", "content": head}), Value::Null),
                    chat_chunk(json!({"content": tail}), Value::Null),
                    chat_chunk(json!({}), json!("stop")),
                ])
            }
            Wire::Chat => common::sse(&[
                chat_chunk(
                    json!({"role": "assistant", "tool_calls": [{"index": 0, "id": CHAT_CALL_ID,
                        "type": "function", "function": {"name": tool, "arguments": ""}}]}),
                    Value::Null,
                ),
                chat_chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": arguments_text}}]}),
                    Value::Null,
                ),
                chat_chunk(json!({}), json!("tool_calls")),
            ]),
            Wire::Anthropic => anthropic_block(
                json!({"type": "tool_use", "id": ANTHROPIC_CALL_ID, "name": tool, "input": {}}),
                json!({"type": "input_json_delta", "partial_json": arguments_text}),
                "tool_use",
            ),
            Wire::Gemini => gemini_sse(json!({"functionCall": {"name": tool, "args": arguments}})),
            Wire::Responses => {
                let item = json!({"type": "function_call", "id": "fc_e2e", "call_id": "call_e2e",
                    "name": tool, "arguments": arguments_text, "status": "completed"});
                let mut added = item.clone();
                added["arguments"] = json!("");
                added["status"] = json!("in_progress");
                responses_sse(&[
                    json!({"type": "response.created", "response": response("resp_e2e", json!([]), "in_progress")}),
                    json!({"type": "response.output_item.added", "output_index": 0, "item": added}),
                    json!({"type": "response.function_call_arguments.delta", "output_index": 0,
                        "item_id": "fc_e2e", "delta": arguments_text}),
                    json!({"type": "response.function_call_arguments.done", "output_index": 0,
                        "item_id": "fc_e2e", "arguments": arguments_text}),
                    json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
                    json!({"type": "response.completed", "response": response("resp_e2e", json!([item]), "completed")}),
                ])
            }
        }
    }

    /// A stream that says `text`.
    pub fn says(self, text: &str) -> Vec<u8> {
        match self {
            Wire::Chat | Wire::TextOnly => common::sse(&[
                chat_chunk(json!({"role": "assistant", "content": text}), Value::Null),
                chat_chunk(json!({}), json!("stop")),
            ]),
            Wire::Anthropic => anthropic_block(
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": text}),
                "end_turn",
            ),
            Wire::Gemini => gemini_sse(json!({"text": text})),
            Wire::Responses => {
                let part = json!({"type": "output_text", "text": text, "annotations": []});
                let message = json!({"type": "message", "id": "msg_e2e", "role": "assistant",
                    "status": "completed", "content": [part]});
                let mut added = message.clone();
                added["content"] = json!([]);
                added["status"] = json!("in_progress");
                let at = json!({"output_index": 0, "item_id": "msg_e2e", "content_index": 0});
                let with = |mut event: Value| {
                    event
                        .as_object_mut()
                        .unwrap()
                        .extend(at.as_object().unwrap().clone());
                    event
                };
                responses_sse(&[
                    json!({"type": "response.created", "response": response("resp_e2e2", json!([]), "in_progress")}),
                    json!({"type": "response.output_item.added", "output_index": 0, "item": added}),
                    with(json!({"type": "response.content_part.added",
                        "part": {"type": "output_text", "text": "", "annotations": []}})),
                    with(json!({"type": "response.output_text.delta", "delta": text})),
                    with(json!({"type": "response.output_text.done", "text": text})),
                    with(json!({"type": "response.content_part.done", "part": part})),
                    json!({"type": "response.output_item.done", "output_index": 0, "item": message}),
                    json!({"type": "response.completed", "response": response("resp_e2e2", json!([message]), "completed")}),
                ])
            }
        }
    }

    /// The text of the request's last tool result.
    pub fn result_text(self, body: &Value) -> String {
        let result = match self {
            Wire::Chat => last(&body["messages"], |m| m["role"] == "tool").map(|m| &m["content"]),
            Wire::Anthropic => last(&body["messages"], |m| m["role"] == "user")
                .and_then(|m| last(&m["content"], |b| b["type"] == "tool_result"))
                .map(|block| &block["content"]),
            Wire::Gemini => gemini_responses(body).last().map(|response| {
                // The gateway's `result`, Gemini CLI's `output`.
                let response = &response["response"];
                (response.get("result"))
                    .or(response.get("output"))
                    .unwrap_or(response)
            }),
            Wire::Responses => last(&body["input"], |item| {
                item["type"] == "function_call_output"
            })
            .map(|item| &item["output"]),
            Wire::TextOnly => return hermes_response(body).unwrap_or_default(),
        };
        result.map(text_of).unwrap_or_default()
    }

    /// The images of the request's last tool result, each its media type and
    /// bytes, found only where this wire puts them: Anthropic, an `image`
    /// block inside the `tool_result`; OpenAI Chat, `image_url` parts of user
    /// messages after the results (its tool messages hold text); Gemini,
    /// `inlineData` in the function response's `parts` or after it;
    /// Responses, `input_image` parts of the `function_call_output`; a
    /// text-only model, `image_url` parts of the user messages after the
    /// last assistant message, each after a placeholder line in the text.
    pub fn result_images(self, body: &Value) -> Vec<(String, Vec<u8>)> {
        let parts: Vec<&Value> = match self {
            Wire::Chat => {
                let messages = body["messages"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or(&[]);
                let first_result = messages.iter().position(|m| m["role"] == "tool");
                messages[first_result.unwrap_or(messages.len())..]
                    .iter()
                    .filter(|m| m["role"] == "user")
                    .flat_map(|m| items(&m["content"]))
                    .collect()
            }
            Wire::TextOnly => {
                let messages = body["messages"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or(&[]);
                let answer = messages.iter().rposition(|m| m["role"] == "assistant");
                let results = &messages[answer.map_or(messages.len(), |i| i + 1)..];
                let parts: Vec<&Value> = results
                    .iter()
                    .filter(|m| m["role"] == "user")
                    .flat_map(|m| items(&m["content"]))
                    .collect();
                // The n-th image follows its placeholder `[image n: TYPE]`.
                let mut images = 0;
                parts
                    .into_iter()
                    .filter(|part| {
                        if part["type"] != "image_url" {
                            return false;
                        }
                        images += 1;
                        let placeholder = format!("[image {images}: ");
                        results
                            .iter()
                            .any(|m| text_of(&m["content"]).contains(&placeholder))
                    })
                    .collect()
            }
            Wire::Anthropic => last(&body["messages"], |m| m["role"] == "user")
                .into_iter()
                .flat_map(|m| items(&m["content"]))
                .filter(|block| block["type"] == "tool_result")
                .flat_map(|block| items(&block["content"]))
                .collect(),
            Wire::Gemini => {
                let contents = body["contents"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or(&[]);
                let call = contents.iter().rposition(|c| {
                    items(&c["parts"]).any(|part| part.get("functionCall").is_some())
                });
                contents[call.map_or(contents.len(), |i| i + 1)..]
                    .iter()
                    .flat_map(|c| items(&c["parts"]))
                    .flat_map(|part| {
                        let inside = items(&part["functionResponse"]["parts"]);
                        std::iter::once(part).chain(inside)
                    })
                    .collect()
            }
            Wire::Responses => last(&body["input"], |item| {
                item["type"] == "function_call_output"
            })
            .into_iter()
            .flat_map(|item| items(&item["output"]))
            .collect(),
        };
        parts
            .into_iter()
            .filter_map(|part| match self {
                Wire::Chat | Wire::TextOnly if part["type"] == "image_url" => {
                    data_url(&part["image_url"]["url"])
                }
                Wire::Responses if part["type"] == "input_image" => data_url(&part["image_url"]),
                Wire::Anthropic if part["type"] == "image" => {
                    let source = &part["source"];
                    decoded(&source["media_type"], &source["data"])
                }
                Wire::Gemini => {
                    let blob = part.get("inlineData")?;
                    decoded(&blob["mimeType"], &blob["data"])
                }
                _ => None,
            })
            .collect()
    }
}

/// How a reply names an image it was shown.
pub fn seen(media_type: &str, data: &[u8]) -> String {
    format!("{media_type} of {} bytes", data.len())
}

/// The text of a message's content or a tool's result: a string, the text
/// parts of an array, or any other value's JSON.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The content of the last Hermes `<tool_response>` in the request's last
/// user message.
fn hermes_response(body: &Value) -> Option<String> {
    let text = text_of(&last(&body["messages"], |m| m["role"] == "user")?["content"]);
    let (_, after) = text.rsplit_once("<tool_response>")?;
    let (inside, _) = after.split_once("</tool_response>")?;
    let response: Value = serde_json::from_str(inside.trim()).ok()?;
    Some(text_of(&response["content"]))
}

/// The elements of an array, none for anything else.
fn items(value: &Value) -> impl Iterator<Item = &Value> {
    value.as_array().into_iter().flatten()
}

/// The last element of an array that `keep` keeps.
fn last(array: &Value, keep: impl Fn(&Value) -> bool) -> Option<&Value> {
    items(array).filter(|item| keep(item)).last()
}

/// Gemini's function responses, in order.
fn gemini_responses(body: &Value) -> Vec<&Value> {
    items(&body["contents"])
        .flat_map(|content| items(&content["parts"]))
        .filter_map(|part| part.get("functionResponse"))
        .collect()
}

/// A `data:` URL's media type and bytes.
fn data_url(url: &Value) -> Option<(String, Vec<u8>)> {
    let (kind, data) = url
        .as_str()?
        .strip_prefix("data:")?
        .split_once(";base64,")?;
    decoded(&json!(kind), &json!(data))
}

/// A media type and base64 data, decoded.
fn decoded(media_type: &Value, data: &Value) -> Option<(String, Vec<u8>)> {
    let data = base64::engine::general_purpose::STANDARD
        .decode(data.as_str()?)
        .ok()?;
    Some((media_type.as_str()?.to_owned(), data))
}

fn chat_chunk(delta: Value, finish: Value) -> Value {
    json!({"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "created": 1, "model": MODEL,
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

/// An Anthropic message of one content block, started as `start` and
/// completed by `delta`.
fn anthropic_block(start: Value, delta: Value, stop_reason: &str) -> Vec<u8> {
    common::typed_sse(&[
        json!({"type": "message_start", "message": {"id": "msg_e2e", "type": "message",
            "role": "assistant", "model": MODEL, "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": start}),
        json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason,
            "stop_sequence": null}, "usage": {"output_tokens": 5}}),
        json!({"type": "message_stop"}),
    ])
}

/// One `alt=sse` event holding `part`, the whole answer.
fn gemini_sse(part: Value) -> Vec<u8> {
    let chunk = json!({"candidates": [{"content": {"role": "model", "parts": [part]},
        "finishReason": "STOP", "index": 0}], "modelVersion": MODEL,
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}});
    format!("data: {chunk}\r\n\r\n").into_bytes()
}

/// A Responses `response` object.
fn response(id: &str, output: Value, status: &str) -> Value {
    json!({"id": id, "object": "response", "created_at": 1, "status": status, "model": MODEL,
        "output": output, "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}})
}

/// Responses stream events, numbered (`sequence_number`) and framed with their
/// `event:` names.
fn responses_sse(events: &[Value]) -> Vec<u8> {
    let numbered: Vec<Value> = events
        .iter()
        .enumerate()
        .map(|(i, event)| {
            let mut event = event.clone();
            event["sequence_number"] = json!(i);
            event
        })
        .collect();
    common::typed_sse(&numbered)
}

#[test]
fn each_wires_scripted_streams_lift_to_the_call_and_the_text_they_script() {
    for wire in Wire::ALL {
        let arguments = json!({"cmd": "cat secret.txt"});
        let call = lifted(wire, &wire.call("exec_command", &arguments));
        assert_eq!(call.len(), 1, "{wire:?}: {call:?}");
        let calls = &call[0]["calls"];
        assert_eq!(calls.as_array().map(Vec::len), Some(1), "{wire:?}: {calls}");
        assert_eq!(calls[0]["name"], "exec_command", "{wire:?}");
        assert_eq!(calls[0]["arguments"], arguments, "{wire:?}");
        let text = lifted(wire, &wire.says("The tool said: 42"));
        assert_eq!(text.len(), 1, "{wire:?}: {text:?}");
        assert_eq!(text[0]["role"], "assistant", "{wire:?}");
        assert_eq!(text[0]["text"], "The tool said: 42", "{wire:?}");
    }
}

#[test]
fn the_text_only_models_call_is_text_that_its_dialect_reads_as_the_call() {
    let arguments = json!({"file_path": "/tmp/work/secret.txt"});
    let text = lifted(
        Wire::TextOnly,
        &Wire::TextOnly.call("read_file", &arguments),
    );
    assert_eq!(text.len(), 1, "{text:?}");
    assert_eq!(
        text[0]["text"].as_str().map(|t| t.contains("<tool_call>")),
        Some(true)
    );
    let dialect: Dialect = Wire::TextOnly.natural_tools().unwrap().parse().unwrap();
    let parser = NaturalToolUseParser::new().dialect(dialect);
    let read = parser
        .parse(text[0]["text"].as_str().unwrap(), &[])
        .unwrap();
    let calls: Vec<&ToolCall> = read.iter().flat_map(Message::calls).collect();
    assert_eq!(calls.len(), 1, "{read:?}");
    assert_eq!(
        (calls[0].name.as_str(), &calls[0].arguments),
        ("read_file", &arguments)
    );
}

#[test]
fn each_wire_finds_a_tool_result_where_the_gateways_lowering_puts_it() {
    let image = vec![0x89, b'P', b'N', b'G', 13, 10, 26, 10, 0, 1, 2, 3];
    for wire in Wire::ALL.into_iter().chain([Wire::TextOnly]) {
        let body = lowered(
            wire,
            ToolResult::text("call_1", "exec_command", "Output:\nsecret\n"),
        );
        assert_eq!(
            wire.result_text(&body),
            "Output:\nsecret\n",
            "{wire:?}: {body}"
        );
        assert_eq!(wire.result_images(&body), [], "{wire:?}: {body}");
        let reply = String::from_utf8(wire.reply_to(&body)).unwrap();
        assert!(
            reply.contains("The tool said: Output:\\nsecret"),
            "{wire:?}: {reply}"
        );

        let block = ContentBlock::image_bytes("image/png", &image);
        let body = lowered(wire, ToolResult::new("call_1", "view_image", vec![block]));
        let found = wire.result_images(&body);
        assert_eq!(
            found,
            [("image/png".to_owned(), image.clone())],
            "{wire:?}: {body}"
        );
        let reply = String::from_utf8(wire.reply_to(&body)).unwrap();
        assert!(
            reply.contains(&seen("image/png", &image)),
            "{wire:?}: {reply}"
        );
    }
}

/// What `lmstack lift --stream` makes of a stream of `wire`: its messages,
/// usage left out.
fn lifted(wire: Wire, stream: &[u8]) -> Vec<Value> {
    let output = common::cli::lmstack(&["lift", "--provider", wire.provider(), "--stream"], stream);
    assert!(output.status.success(), "{wire:?}: {output:?}");
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|message| message["type"] != "usage")
        .collect()
}

/// The body the gateway sends an upstream of `wire` for a call answered by
/// `result` (written as text first where the wire has no native tools).
fn lowered(wire: Wire, result: ToolResult) -> Value {
    let call = ToolCall::new(result.call_id.clone(), result.name.clone(), json!({}));
    let mut messages = vec![
        Message::user("Go"),
        Message::tool_calls(vec![call]),
        Message::tool_results(vec![result]),
    ];
    if let Some(dialect) = wire.natural_tools() {
        let transformer = NaturalToolUseTransformer::new().dialect(dialect.parse().unwrap());
        messages = transformer.render(messages).unwrap();
    }
    let request = ChatRequest::new(messages);
    let kind: Kind = wire.provider().parse().unwrap();
    let config = ModelConfig::new(kind)
        .base_url("http://127.0.0.1:9/v1")
        .model("codex-e2e")
        .api_key(ApiKey::new("k"));
    let (provider, _) = config.provider().unwrap();
    let sent = provider.http_request(request).unwrap();
    serde_json::from_slice(sent.body()).unwrap()
}

//! The server half, outward: canonical events → the Responses stream's SSE
//! events or the `response` body ([`ReplyEncoder`]), an [`Error`] → the
//! error body ([`error_body`]).
//!
//! No IO, no clock, no randomness: the response id and `created_at` come
//! from the caller; item ids are the upstream's (kept under [`EXTRA_KEY`]) or
//! made from the response id.

use bytes::Bytes;
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::keys::{EXTRA_KEY, ITEM_KEY};
use super::tools::ClientTools;
use super::types::{
    ContentPart, FunctionCallItem, Item, MessageContent, MessageItem, MessageRole, OutputText,
    ReasoningItem, Refusal, Response, ResponseUsage, SummaryPart,
};
use crate::message::{Metadata, ReasoningMessage, Usage};
use crate::provider::EncodeReply;
use crate::provider::openai_shared::{
    self, CompletionTokensDetails, PromptTokensDetails, REFUSAL_KEY, lower_url_citation,
};
use crate::provider::sealed::seal_reasoning;
use crate::provider::sse::encode_event;
use crate::provider::wire_extra;
use crate::service::Output;
use crate::{
    ChatRequest, ContentBlock, Error, Event, FinishReason, Message, Role, ToolCall, ToolCallDelta,
};

/// Writes a reply in the Responses format: the stream OpenAI sends
/// (streaming), or the `response` object (non-streaming), from the same
/// output items.
///
/// - the stream opens with `response.created` and `response.in_progress`;
///   each output item is `response.output_item.added` … `.done` at its
///   `output_index`, and ends with `response.completed` — or
///   `response.incomplete` (`incomplete_details.reason`: `max_output_tokens`
///   after a `length` finish, `content_filter`) — holding the whole response:
///   its output and usage (`input_tokens_details.cached_tokens`,
///   `output_tokens_details.reasoning_tokens`). Every event has its
///   `sequence_number`;
/// - text → a `message` item (`msg_…`) with an `output_text` part
///   (`response.content_part.added`, `response.output_text.delta` … `.done`,
///   web-page citations as `url_citation` annotations with
///   `response.output_text.annotation.added`); text marked [`REFUSAL_KEY`] →
///   a `refusal` part (`response.refusal.delta` … `.done`);
/// - a tool call → a `function_call` item (`fc_…`, `call_id` the call's id,
///   `response.function_call_arguments.delta` … `.done`), with its
///   `namespace` when the request's tool was in one; a call of a custom tool
///   the request offered → a `custom_tool_call` item
///   (`response.custom_tool_call_input.delta` … `.done`) whose `input` is the
///   call's `input` argument; calls the provider ran are left out;
/// - reasoning → a `reasoning` item (`rs_…`): its text as a summary part
///   (`response.reasoning_summary_part.added`,
///   `response.reasoning_summary_text.delta` … `.done`). Reasoning from this
///   wire keeps its own `encrypted_content`; any other (Anthropic's signed or
///   redacted thinking, Gemini's thought signatures) is sealed whole into it
///   ([`seal_reasoning`]), which the decoder opens on the next turn;
/// - an item a Responses upstream sent that the canonical model has no place
///   for ([`ITEM_KEY`]: a built-in tool's call) goes as it came; the fields
///   kept under [`EXTRA_KEY`] go back on their items;
/// - an error ends a stream with an `error` event and `response.failed`; a
///   whole reply becomes [`error_body`]'s body.
///
/// ```
/// use lmstack::provider::openai_responses::ReplyEncoder;
/// use lmstack::service::{Machine, Output};
/// use lmstack::{ChatRequest, Event, FinishReason, Message};
///
/// let request = ChatRequest::new(vec![Message::user("Hi")]);
/// let mut encoder = ReplyEncoder::new("resp_1", 1_700_000_000, "gpt-5", &request);
/// let mut out = Output::new();
/// for event in [Event::text("Hel"), Event::text("lo"), Event::finish(FinishReason::Stop)] {
///     encoder.push(Ok(event), &mut out).unwrap();
/// }
/// encoder.finish(&mut out).unwrap();
/// let body: serde_json::Value = serde_json::from_slice(&out.pop().unwrap()).unwrap();
/// assert_eq!(body["status"], "completed");
/// assert_eq!(body["output"][0]["content"][0]["text"], "Hello");
/// ```
#[derive(Debug)]
pub struct ReplyEncoder {
    id: String,
    created_at: u64,
    model: String,
    stream: bool,
    tools: ClientTools,
    sequence: u64,
    started: bool,
    /// The items done, in order.
    output: Vec<Item>,
    open: Option<Open>,
    /// Items made so far (for the ids made up).
    made: u32,
    usage: Option<Usage>,
    finish: Option<FinishReason>,
    ended: bool,
    status: u16,
}

/// The output item being written.
#[derive(Debug)]
enum Open {
    Message {
        id: String,
        parts: Vec<ContentPart>,
        /// The part being written: a refusal or text, and its text.
        part: Option<(bool, String, Vec<Value>)>,
        extra: Map<String, Value>,
    },
    Reasoning {
        id: String,
        /// Whether its summary part was added.
        summary: bool,
        reasoning: ReasoningMessage,
    },
    Call {
        id: String,
        index: u32,
        call_id: String,
        name: String,
        arguments: String,
        custom: bool,
        extra: Map<String, Value>,
    },
    /// A call the provider ran: its fragments are left out.
    Skipped { index: u32 },
}

impl ReplyEncoder {
    /// An encoder of the reply to `request` (whose tools say which calls are
    /// custom or namespaced), non-streaming unless the request streams, for
    /// response `id`, created at `created_at` (seconds since the Unix epoch),
    /// answered by `model`.
    pub fn new(
        id: impl Into<String>,
        created_at: u64,
        model: impl Into<String>,
        request: &ChatRequest,
    ) -> Self {
        ReplyEncoder {
            id: id.into(),
            created_at,
            model: model.into(),
            stream: request.options.stream,
            tools: ClientTools::new(&request.options.tools),
            sequence: 0,
            started: false,
            output: Vec::new(),
            open: None,
            made: 0,
            usage: None,
            finish: None,
            ended: false,
            status: 200,
        }
    }

    /// The response's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The HTTP status for the reply: 200, or once an error was encoded,
    /// [`error_body`]'s status for it.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The reply's `Content-Type`: `text/event-stream` or `application/json`.
    pub fn content_type(&self) -> &'static str {
        if self.stream {
            "text/event-stream"
        } else {
            "application/json"
        }
    }

    /// Writes one stream event (nothing in non-streaming mode), numbered.
    fn send(&mut self, kind: &str, mut fields: Value, out: &mut Output<Bytes>) {
        if !self.stream {
            return;
        }
        if let Value::Object(fields) = &mut fields {
            fields.insert("sequence_number".into(), self.sequence.into());
        }
        self.sequence += 1;
        let mut event = Map::new();
        event.insert("type".into(), kind.into());
        if let Value::Object(fields) = fields {
            event.extend(fields);
        }
        let mut frame = Vec::with_capacity(256);
        encode_event(&mut frame, Some(kind), &Value::Object(event).to_string());
        out.push(frame.into());
    }

    fn start(&mut self, out: &mut Output<Bytes>) {
        if std::mem::replace(&mut self.started, true) {
            return;
        }
        let response = self.response("in_progress", false);
        self.send("response.created", json!({ "response": response }), out);
        let response = self.response("in_progress", false);
        self.send("response.in_progress", json!({ "response": response }), out);
    }

    /// The response object as it stands.
    fn response(&self, status: &str, whole: bool) -> Value {
        let mut extra = Map::new();
        extra.insert("object".into(), "response".into());
        extra.insert("created_at".into(), self.created_at.into());
        extra.insert("model".into(), self.model.clone().into());
        let response = Response {
            id: self.id.clone(),
            status: Some(status.into()),
            output: if whole {
                self.output.clone()
            } else {
                Vec::new()
            },
            usage: self.usage.as_ref().filter(|_| whole).map(wire_usage),
            incomplete_details: None,
            error: Some(Value::Null),
            extra,
        };
        to_value(&response)
    }

    fn output_index(&self) -> usize {
        self.output.len()
    }

    fn next_id(&mut self, prefix: &str) -> String {
        self.made += 1;
        let base = self.id.strip_prefix("resp_").unwrap_or(&self.id);
        format!("{prefix}_{base}_{}", self.made)
    }

    /// The item id kept in `metadata` ([`EXTRA_KEY`]) and its other fields, or
    /// a new id.
    fn item_fields(&mut self, metadata: &Metadata, prefix: &str) -> (String, Map<String, Value>) {
        let mut fields = wire_extra::kept(metadata, EXTRA_KEY);
        fields.remove("status");
        fields.remove(super::keys::ARGUMENTS);
        let id = match fields.remove("id") {
            Some(Value::String(id)) => id,
            _ => self.next_id(prefix),
        };
        (id, fields)
    }

    fn added(&mut self, item: &Item, out: &mut Output<Bytes>) {
        let index = self.output_index();
        let item = to_value(item);
        self.send(
            "response.output_item.added",
            json!({"output_index": index, "item": item}),
            out,
        );
    }

    fn done(&mut self, item: Item, out: &mut Output<Bytes>) {
        let index = self.output_index();
        let value = to_value(&item);
        self.send(
            "response.output_item.done",
            json!({"output_index": index, "item": value}),
            out,
        );
        self.output.push(item);
    }

    /// Text (or a refusal) with its metadata.
    fn text(&mut self, text: String, metadata: &Metadata, out: &mut Output<Bytes>) {
        let kept_id = wire_extra::kept(metadata, EXTRA_KEY)
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let same = matches!(&self.open, Some(Open::Message { id, .. })
            if kept_id.as_deref().is_none_or(|kept| kept == id));
        if !same {
            self.close(out);
            let (id, extra) = self.item_fields(metadata, "msg");
            let item = message_item(&id, Vec::new(), "in_progress", &extra);
            self.added(&item, out);
            self.open = Some(Open::Message {
                id,
                parts: Vec::new(),
                part: None,
                extra,
            });
        }
        let index = self.output_index();
        let Some(Open::Message {
            id, parts, part, ..
        }) = &mut self.open
        else {
            return;
        };
        let id = id.clone();
        let refusal = match (metadata.get(REFUSAL_KEY), &part) {
            (Some(Value::Bool(refusal)), _) => *refusal,
            (_, Some((refusal, _, _))) if metadata.is_empty() => *refusal,
            _ => false,
        };
        let mut events = Vec::new();
        if part.as_ref().is_some_and(|(kind, _, _)| *kind != refusal) {
            let (kind, text, annotations) = part.take().unwrap_or_default();
            let content_index = parts.len();
            let done = content_part(kind, text, annotations);
            events.extend(part_done(&id, index, content_index, &done));
            parts.push(done);
        }
        let content_index = parts.len();
        if part.is_none() {
            *part = Some((refusal, String::new(), Vec::new()));
            let empty = content_part(refusal, String::new(), Vec::new());
            events.push((
                "response.content_part.added",
                json!({"item_id": id, "output_index": index, "content_index": content_index,
                       "part": to_value(&empty)}),
            ));
        }
        let Some((_, written, annotations)) = part else {
            return;
        };
        let offset = written.chars().count();
        for citation in metadata.citations() {
            if let Some(payload) = lower_url_citation(&citation, offset) {
                let mut annotation = Map::new();
                annotation.insert("type".into(), "url_citation".into());
                annotation.extend(payload);
                let annotation = Value::Object(annotation);
                events.push((
                    "response.output_text.annotation.added",
                    json!({"item_id": id, "output_index": index, "content_index": content_index,
                           "annotation_index": annotations.len(), "annotation": annotation}),
                ));
                annotations.push(annotation);
            }
        }
        if !text.is_empty() {
            written.push_str(&text);
            let kind = if refusal {
                "response.refusal.delta"
            } else {
                "response.output_text.delta"
            };
            let mut delta = json!({"item_id": id, "output_index": index,
                                   "content_index": content_index, "delta": text});
            if !refusal {
                delta["logprobs"] = json!([]);
            }
            events.push((kind, delta));
        }
        for (kind, fields) in events {
            self.send(kind, fields, out);
        }
    }

    fn reasoning(&mut self, piece: ReasoningMessage, out: &mut Output<Bytes>) {
        let continues = matches!(&self.open, Some(Open::Reasoning { reasoning, .. })
            if reasoning.signature.is_none() || piece.text.is_empty());
        if !continues {
            self.close(out);
            let (id, _) = self.item_fields(&piece.metadata, "rs");
            let item = Item::Reasoning(ReasoningItem {
                id: Some(id.clone()),
                ..ReasoningItem::default()
            });
            self.added(&item, out);
            self.open = Some(Open::Reasoning {
                id,
                summary: false,
                reasoning: ReasoningMessage {
                    text: String::new(),
                    signature: None,
                    redacted: piece.redacted,
                    metadata: Metadata::new(),
                },
            });
        }
        let index = self.output_index();
        let Some(Open::Reasoning {
            id,
            summary,
            reasoning,
        }) = &mut self.open
        else {
            return;
        };
        let id = id.clone();
        reasoning.metadata.merge_missing(&piece.metadata);
        reasoning.redacted |= piece.redacted;
        if let Some(signature) = piece.signature {
            reasoning
                .signature
                .get_or_insert_default()
                .push_str(&signature);
        }
        if piece.text.is_empty() || piece.redacted {
            return;
        }
        reasoning.text.push_str(&piece.text);
        let added = !std::mem::replace(summary, true);
        if added {
            self.send(
                "response.reasoning_summary_part.added",
                json!({"item_id": id, "output_index": index, "summary_index": 0,
                       "part": {"type": "summary_text", "text": ""}}),
                out,
            );
        }
        self.send(
            "response.reasoning_summary_text.delta",
            json!({"item_id": id, "output_index": index, "summary_index": 0,
                   "delta": piece.text}),
            out,
        );
    }

    /// A call's fragment: the first (with its id) opens its item.
    fn call(&mut self, fragment: ToolCallDelta, out: &mut Output<Bytes>) {
        let continued = match &self.open {
            Some(Open::Call { index, call_id, .. }) => {
                *index == fragment.index && fragment.id().is_none_or(|id| id == call_id)
            }
            Some(Open::Skipped { index }) => *index == fragment.index && fragment.id().is_none(),
            _ => false,
        };
        if !continued {
            self.close(out);
            if fragment.provider_executed() {
                self.open = Some(Open::Skipped {
                    index: fragment.index,
                });
                return;
            }
            let call_id = fragment.id().unwrap_or_default().to_owned();
            let name = fragment.name().unwrap_or_default().to_owned();
            self.open_call(fragment.index, call_id, name, &fragment.metadata, out);
        }
        let index = self.output_index();
        let Some(Open::Call {
            id,
            arguments,
            custom,
            ..
        }) = &mut self.open
        else {
            return;
        };
        if fragment.arguments_delta.is_empty() {
            return;
        }
        arguments.push_str(&fragment.arguments_delta);
        if !*custom {
            let id = id.clone();
            self.send(
                "response.function_call_arguments.delta",
                json!({"item_id": id, "output_index": index, "delta": fragment.arguments_delta}),
                out,
            );
        }
    }

    fn open_call(
        &mut self,
        index: u32,
        call_id: String,
        name: String,
        metadata: &Metadata,
        out: &mut Output<Bytes>,
    ) {
        let tool = self.tools.get(&name).cloned().unwrap_or_default();
        let (id, mut extra) = self.item_fields(metadata, if tool.custom { "ctc" } else { "fc" });
        if let Some(namespace) = tool.namespace {
            extra.insert("namespace".into(), namespace.into());
        }
        let mut open = Open::Call {
            id,
            index,
            call_id,
            name,
            arguments: String::new(),
            custom: tool.custom,
            extra,
        };
        let item = call_item(&open, "in_progress");
        self.added(&item, out);
        if let Open::Call { arguments, .. } = &mut open {
            arguments.clear();
        }
        self.open = Some(open);
    }

    /// A whole message of the reply.
    fn message(&mut self, message: Message, out: &mut Output<Bytes>) -> Result<(), Error> {
        match message {
            Message::Text(text) if text.role == Role::Assistant => {
                if let Some(Value::Object(item)) = text.metadata.get(ITEM_KEY) {
                    self.close(out);
                    let item = Item::Other(item.clone());
                    self.added(&item, out);
                    self.done(item, out);
                } else {
                    self.text(text.text, &text.metadata, out);
                    self.close(out);
                }
            }
            Message::Multimodal(multimodal) if multimodal.role == Role::Assistant => {
                let mut text = String::new();
                for block in &multimodal.content {
                    match block {
                        ContentBlock::Text { text: piece, .. } => text.push_str(piece),
                        _ => {
                            return Err(Error::stage(
                                "responses server",
                                "a Responses message has no place for images, documents or audio",
                            ));
                        }
                    }
                }
                self.text(text, &multimodal.metadata, out);
                self.close(out);
            }
            Message::Reasoning(reasoning) => {
                self.close(out);
                self.reasoning(reasoning, out);
                self.close(out);
            }
            Message::ToolCalls(message) => {
                for call in message.calls {
                    self.whole_call(call, out);
                }
            }
            Message::Usage(usage) => self.add_usage(usage),
            // Tool results, a tool loop's aggregates, user and system
            // messages are not part of the reply.
            _ => {}
        }
        Ok(())
    }

    fn whole_call(&mut self, call: ToolCall, out: &mut Output<Bytes>) {
        self.close(out);
        if call.provider_executed {
            return;
        }
        let arguments = match (&call.invalid, &call.arguments) {
            (Some(invalid), _) if invalid.raw.is_some() => invalid.raw.clone().unwrap_or_default(),
            (_, Value::String(text)) => text.clone(),
            (_, arguments) => arguments.to_string(),
        };
        let mut fragment = ToolCallDelta::start(u32::MAX, call.id, call.name);
        fragment.arguments_delta = arguments;
        fragment.metadata = call.metadata;
        self.call(fragment, out);
        self.close(out);
    }

    fn add_usage(&mut self, usage: Usage) {
        match &mut self.usage {
            None => self.usage = Some(usage),
            Some(total) => total.add(&usage),
        }
    }

    /// Ends the open item: its done events, and it joins the output.
    fn close(&mut self, out: &mut Output<Bytes>) {
        let index = self.output_index();
        match self.open.take() {
            None | Some(Open::Skipped { .. }) => {}
            Some(Open::Message {
                id,
                mut parts,
                part,
                extra,
            }) => {
                if let Some((refusal, text, annotations)) = part {
                    let done = content_part(refusal, text, annotations);
                    for (kind, fields) in part_done(&id, index, parts.len(), &done) {
                        self.send(kind, fields, out);
                    }
                    parts.push(done);
                }
                self.done(message_item(&id, parts, "completed", &extra), out);
            }
            Some(Open::Reasoning {
                id,
                summary,
                reasoning,
            }) => {
                if summary {
                    let text = reasoning.text.clone();
                    let part = json!({"type": "summary_text", "text": text});
                    self.send(
                        "response.reasoning_summary_text.done",
                        json!({"item_id": id, "output_index": index, "summary_index": 0, "text": text}),
                        out,
                    );
                    self.send(
                        "response.reasoning_summary_part.done",
                        json!({"item_id": id, "output_index": index, "summary_index": 0, "part": part}),
                        out,
                    );
                }
                self.done(reasoning_item(id, reasoning), out);
            }
            Some(open @ Open::Call { .. }) => {
                let Open::Call {
                    id,
                    arguments,
                    custom,
                    ..
                } = &open
                else {
                    return;
                };
                let item = call_item(&open, "completed");
                if *custom {
                    let input = match &item {
                        Item::Other(fields) => fields.get("input").cloned().unwrap_or_default(),
                        _ => Value::Null,
                    };
                    self.send(
                        "response.custom_tool_call_input.delta",
                        json!({"item_id": id, "output_index": index, "delta": input}),
                        out,
                    );
                    self.send(
                        "response.custom_tool_call_input.done",
                        json!({"item_id": id, "output_index": index, "input": input}),
                        out,
                    );
                } else {
                    self.send(
                        "response.function_call_arguments.done",
                        json!({"item_id": id, "output_index": index, "arguments": arguments}),
                        out,
                    );
                }
                self.done(item, out);
            }
        }
    }

    /// The status the reply ends with, and why it is incomplete.
    fn ending(&self) -> (&'static str, Option<&'static str>) {
        match &self.finish {
            Some(FinishReason::Length) => ("incomplete", Some("max_output_tokens")),
            Some(FinishReason::ContentFilter) => ("incomplete", Some("content_filter")),
            _ => ("completed", None),
        }
    }
}

fn to_value(value: &impl Serialize) -> Value {
    serde_json::to_value(value).unwrap_or_default()
}

fn content_part(refusal: bool, text: String, annotations: Vec<Value>) -> ContentPart {
    if refusal {
        ContentPart::Refusal(Refusal {
            refusal: text,
            extra: Map::new(),
        })
    } else {
        let mut extra = Map::new();
        extra.insert("logprobs".into(), json!([]));
        ContentPart::OutputText(OutputText {
            text,
            annotations,
            extra,
        })
    }
}

/// The events that end a content part: its text's `done`, and the part's.
fn part_done(
    id: &str,
    index: usize,
    content_index: usize,
    part: &ContentPart,
) -> Vec<(&'static str, Value)> {
    let at = json!({"item_id": id, "output_index": index, "content_index": content_index});
    let mut text_done = at.clone();
    let kind = match part {
        ContentPart::Refusal(refusal) => {
            text_done["refusal"] = refusal.refusal.clone().into();
            "response.refusal.done"
        }
        ContentPart::OutputText(text) => {
            text_done["text"] = text.text.clone().into();
            text_done["logprobs"] = json!([]);
            "response.output_text.done"
        }
        _ => return Vec::new(),
    };
    let mut part_done = at;
    part_done["part"] = to_value(part);
    vec![(kind, text_done), ("response.content_part.done", part_done)]
}

fn message_item(
    id: &str,
    parts: Vec<ContentPart>,
    status: &str,
    extra: &Map<String, Value>,
) -> Item {
    Item::Message(MessageItem {
        id: Some(id.to_owned()),
        status: Some(status.into()),
        extra: extra.clone(),
        ..MessageItem::new(MessageRole::Assistant, MessageContent::Parts(parts))
    })
}

/// A call's item: a `function_call`, or a `custom_tool_call` whose `input` is
/// the call's `input` argument.
fn call_item(open: &Open, status: &str) -> Item {
    let Open::Call {
        id,
        call_id,
        name,
        arguments,
        custom,
        extra,
        ..
    } = open
    else {
        return Item::Other(Map::new());
    };
    if *custom {
        let input = serde_json::from_str::<Value>(arguments)
            .map(|arguments| super::tools::custom_input(&arguments))
            .unwrap_or_else(|_| arguments.clone());
        let mut fields = Map::new();
        fields.insert("type".into(), super::tools::CUSTOM_CALL.into());
        fields.insert("id".into(), id.clone().into());
        fields.insert("status".into(), status.into());
        fields.insert("call_id".into(), call_id.clone().into());
        fields.insert("name".into(), name.clone().into());
        fields.insert("input".into(), input.into());
        fields.extend(extra.clone());
        return Item::Other(fields);
    }
    Item::FunctionCall(FunctionCallItem {
        id: Some(id.clone()),
        call_id: call_id.clone(),
        name: name.clone(),
        arguments: arguments.clone(),
        status: Some(status.into()),
        extra: extra.clone(),
    })
}

/// A reasoning item: this wire's with its own encrypted content and fields,
/// another wire's sealed whole.
fn reasoning_item(id: String, reasoning: ReasoningMessage) -> Item {
    let own = reasoning.metadata.get(EXTRA_KEY).is_some();
    let summary = (!reasoning.text.is_empty() && !reasoning.redacted)
        .then(|| SummaryPart {
            kind: "summary_text".into(),
            text: reasoning.text.clone(),
        })
        .into_iter()
        .collect();
    let (encrypted_content, extra) = if own {
        let mut extra = wire_extra::kept(&reasoning.metadata, EXTRA_KEY);
        extra.remove("id");
        extra.remove("status");
        (reasoning.signature.clone(), extra)
    } else {
        (Some(seal_reasoning(&reasoning)), Map::new())
    };
    Item::Reasoning(ReasoningItem {
        id: Some(id),
        summary,
        encrypted_content,
        extra,
        ..ReasoningItem::default()
    })
}

fn wire_usage(usage: &Usage) -> ResponseUsage {
    ResponseUsage {
        input_tokens: usage.input_tokens,
        input_tokens_details: PromptTokensDetails::new(
            Some(usage.cached_input_tokens.unwrap_or(0)),
            usage.cache_write_input_tokens(),
        ),
        output_tokens: usage.output_tokens,
        output_tokens_details: Some(CompletionTokensDetails {
            reasoning_tokens: usage.reasoning_tokens.unwrap_or(0),
        }),
        total_tokens: usage.input_tokens.saturating_add(usage.output_tokens),
    }
}

impl EncodeReply for ReplyEncoder {
    fn ended(&self) -> bool {
        self.ended
    }

    fn event(&mut self, event: Event, out: &mut Output<Bytes>) -> Result<(), Error> {
        self.start(out);
        match event {
            Event::TextDelta(delta) => self.text(delta.text, &delta.metadata, out),
            Event::ReasoningDelta(delta) => {
                let piece = ReasoningMessage {
                    text: delta.text,
                    signature: delta.signature,
                    redacted: false,
                    metadata: delta.metadata,
                };
                self.reasoning(piece, out);
            }
            Event::ToolCallDelta(fragment) => self.call(fragment, out),
            Event::Message { message } => self.message(message, out)?,
            Event::Usage(usage) => self.add_usage(usage),
            Event::Finish { reason } => self.finish = Some(reason),
        }
        Ok(())
    }

    /// Ends a reply that failed with `error`: a stream with an `error` event
    /// and `response.failed`; a whole reply becomes [`error_body`]'s body.
    fn fail(&mut self, error: &Error, out: &mut Output<Bytes>) {
        self.ended = true;
        let (status, body) = error_body(error);
        self.status = status;
        if !self.stream {
            out.push(body.to_string().into_bytes().into());
            return;
        }
        self.start(out);
        self.close(out);
        let object = body.get("error").cloned().unwrap_or_default();
        let code = object
            .get("code")
            .filter(|code| !code.is_null())
            .or_else(|| object.get("type"))
            .cloned()
            .unwrap_or_default();
        let message = object.get("message").cloned().unwrap_or_default();
        let param = object.get("param").cloned().unwrap_or_default();
        self.send(
            "error",
            json!({"code": code, "message": message, "param": param}),
            out,
        );
        let mut response = self.response("failed", true);
        response["error"] = json!({"code": code, "message": message});
        self.send("response.failed", json!({ "response": response }), out);
    }

    /// Writes the end: the open item's, then `response.completed` (or
    /// `.incomplete`) with the whole response (streaming), or the response
    /// object (non-streaming).
    fn end(&mut self, out: &mut Output<Bytes>) -> Result<(), Error> {
        self.start(out);
        self.close(out);
        self.ended = true;
        let (status, reason) = self.ending();
        let mut response = self.response(status, true);
        if let Some(reason) = reason {
            response["incomplete_details"] = json!({ "reason": reason });
        }
        if self.stream {
            let kind = if reason.is_some() {
                "response.incomplete"
            } else {
                "response.completed"
            };
            self.send(kind, json!({ "response": response }), out);
        } else {
            out.push(response.to_string().into_bytes().into());
        }
        Ok(())
    }
}

/// The HTTP status and the OpenAI error body for `error` — the same as Chat
/// Completions' (see [`openai_chat::error_body`](crate::provider::openai_chat::error_body)).
///
/// ```
/// use lmstack::Error;
/// use lmstack::provider::openai_responses::error_body;
///
/// let (status, body) = error_body(&Error::InvalidRequest("input[0].role: unknown variant".into()));
/// assert_eq!(status, 400);
/// assert_eq!(body["error"]["type"], "invalid_request_error");
/// ```
pub fn error_body(error: &Error) -> (u16, Value) {
    openai_shared::error_body(error)
}

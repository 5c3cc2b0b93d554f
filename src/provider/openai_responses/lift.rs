//! Lifting: Responses API responses → canonical events (see [`Lifter`]).

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::keys::{EXTRA_KEY, ITEM_KEY, PROVIDER};
use super::types::{
    ContentPart, DeltaEvent, DoneEvent, FunctionCallItem, Item, ItemEvent, MessageContent,
    MessageItem, ReasoningItem, Response, ResponseUsage, StreamEvent,
};
use crate::Error;
use crate::message::{
    Event, FinishReason, Message, Metadata, ReasoningDelta, Role, TextDelta, TextMessage,
    ToolCallDelta, Usage,
};
use crate::provider::body::{Lift, malformed, parse, truncated};
use crate::provider::call_order::CallOrder;
use crate::provider::error::ProviderError;
use crate::provider::openai_shared::{REFUSAL_KEY, lift_url_citation, lift_usage};
use crate::provider::sse::SseEvent;
use crate::provider::wire_extra;
use crate::service::Output;

/// What separates the parts of a reasoning summary in the reasoning's text.
const PART_BREAK: &str = "\n\n";

/// Lifts Responses API responses — a stream of typed events, or a whole
/// `response` body — into canonical events.
///
/// One pure state machine serves both wire modes: each output item of a whole
/// body goes through the code that lifts a streamed item's
/// `response.output_item.added` and `.done`, and the body through that of
/// `response.completed`. Output items are keyed by `output_index`, so deltas of
/// several items may interleave. What it makes of the wire:
///
/// - the response's `id` becomes the `generation_id` of the messages' metadata;
/// - a `message` item → assistant text (`output_text.delta`, or the item's
///   `output_text` parts when nothing streamed); its `url_citation`
///   annotations → [`Citation`](crate::Citation)s on an empty text delta after
///   its text; `refusal` parts and `refusal.delta` → text marked
///   [`REFUSAL_KEY`];
/// - a `function_call` item → a tool call whose id is its `call_id`; its
///   arguments stream as `function_call_arguments.delta` (or come whole in
///   `.done` or the done item). Parallel calls come out whole and in start
///   order, each contiguous, a call held while the one before is open (see the
///   event model in `docs/design.md`);
/// - a `reasoning` item → reasoning: its summary (`reasoning_summary_text.delta`,
///   parts separated by a blank line) or its `reasoning_text`, and its
///   `encrypted_content` (read from the done item) as the signature — so each
///   item is one reasoning message, which lowering sends back;
/// - each item's fields with no canonical place — its `id`, `phase`,
///   `namespace`… — are kept under [`EXTRA_KEY`] on its first event (a
///   reasoning item's always, its `id` at least: what marks reasoning as this
///   wire's);
/// - items of other types (`web_search_call`, `custom_tool_call`,
///   `image_generation_call`…) → an assistant text message with empty text,
///   the done item whole under [`ITEM_KEY`], which lowering sends back;
/// - `response.completed` → `stop` (`tool_calls` when the reply holds calls,
///   `refusal` when it refused); `response.incomplete` → `length`
///   (`max_output_tokens`), `content_filter`, or the reason as it came; its
///   usage → `input_tokens` (cache reads and writes included: the details'
///   `cached_tokens`, `cache_write_tokens`), `output_tokens` (reasoning
///   included: `reasoning_tokens`);
/// - `response.failed`, an `error` event, and an error body →
///   [`Error::Provider`](crate::Error::Provider);
/// - `content_part`, `*.done`, `reasoning_summary_part.done` and unknown events
///   carry nothing new and are ignored;
/// - a stream that ends before its response completed is
///   [`TransportErrorKind::Truncated`](crate::provider::TransportErrorKind::Truncated).
///
/// ```
/// use lmstack::provider::body::Lift;
/// use lmstack::provider::openai_responses::Lifter;
/// use lmstack::service::Output;
/// use lmstack::Joiner;
///
/// let mut lifter = Lifter::new();
/// let mut events = Output::new();
/// let body = br#"{"id":"resp_1","status":"completed","output":[{"type":"function_call",
///     "id":"fc_1","call_id":"call_1","name":"add","arguments":"{\"a\":2}"}]}"#;
/// lifter.body(body, &mut events).unwrap();
/// lifter.finish(&mut events).unwrap();
/// let messages = Joiner::join(events.drain());
/// let calls = messages[0].calls();
/// assert_eq!((calls[0].id.as_str(), calls[0].arguments["a"].as_u64()), ("call_1", Some(2)));
/// ```
#[derive(Debug, Default)]
pub struct Lifter {
    generation_id: Option<String>,
    /// The output items open, by `output_index`.
    items: HashMap<u32, Open>,
    /// The calls' deltas, each call's contiguous, in start order.
    order: CallOrder,
    function_calls: bool,
    refusal: bool,
    usage: Option<Usage>,
    finish: Option<FinishReason>,
    events: usize,
}

/// An output item being lifted.
#[derive(Debug)]
enum Open {
    /// A message: the metadata its first event carries (until sent), whether
    /// any text streamed, and the kind of the last text sent.
    Message {
        metadata: Option<Metadata>,
        streamed: bool,
        refusing: bool,
    },
    /// Reasoning: the metadata its first event carries, whether text
    /// streamed, and whether a summary part waits for its break.
    Reasoning {
        metadata: Option<Metadata>,
        streamed: bool,
        part_break: bool,
    },
    /// A function call: its number, and whether its arguments came.
    Call { ordinal: u32, streamed: bool },
    /// An item kept whole when it is done.
    Other,
}

impl Lifter {
    /// A lifter for one response.
    pub fn new() -> Self {
        Self::default()
    }

    /// Lifts one streamed event (the JSON text of one SSE `data:` field).
    pub fn push_event(&mut self, data: &[u8], out: &mut Output) -> Result<(), Error> {
        self.events += 1;
        let what = format_args!("event {}", self.events);
        let event: StreamEvent = parse(PROVIDER, data, what, "a JSON Responses stream event")?;
        match event {
            StreamEvent::Created(event)
            | StreamEvent::Queued(event)
            | StreamEvent::InProgress(event) => self.started(&event.response),
            StreamEvent::Completed(event)
            | StreamEvent::Incomplete(event)
            | StreamEvent::Failed(event) => self.ended(event.response, out)?,
            StreamEvent::OutputItemAdded(ItemEvent {
                output_index, item, ..
            }) => self.added(output_index, item, out)?,
            StreamEvent::OutputItemDone(ItemEvent {
                output_index, item, ..
            }) => self.done(output_index, item, out)?,
            StreamEvent::OutputTextDelta(delta) => self.text(delta, false, out),
            StreamEvent::RefusalDelta(delta) => self.text(delta, true, out),
            StreamEvent::FunctionCallArgumentsDelta(delta) => {
                self.arguments(delta.output_index, delta.delta, out)?
            }
            StreamEvent::FunctionCallArgumentsDone(DoneEvent {
                output_index,
                arguments: Some(arguments),
                ..
            }) => {
                if let Some(Open::Call {
                    streamed: false, ..
                }) = self.items.get(&output_index)
                {
                    self.arguments(output_index, arguments, out)?;
                }
            }
            StreamEvent::ReasoningSummaryPartAdded(event) => {
                if let Some(Open::Reasoning {
                    streamed: true,
                    part_break,
                    ..
                }) = self.items.get_mut(&event.output_index)
                {
                    *part_break = true;
                }
            }
            StreamEvent::ReasoningSummaryTextDelta(delta)
            | StreamEvent::ReasoningTextDelta(delta) => {
                self.reasoning(delta.output_index, delta.delta, None, out)
            }
            StreamEvent::Error(error) => {
                let value = error.error.clone().unwrap_or_else(|| {
                    let mut object = serde_json::to_value(&error).unwrap_or_default();
                    if let Value::Object(fields) = &mut object {
                        fields.remove("sequence_number");
                    }
                    object
                });
                return Err(ProviderError::in_stream(PROVIDER, &value).into());
            }
            _ => {}
        }
        Ok(())
    }

    fn started(&mut self, response: &Response) {
        if self.generation_id.is_none() && !response.id.is_empty() {
            self.generation_id = Some(response.id.clone());
        }
    }

    /// A response that ended: completed, incomplete or failed.
    fn ended(&mut self, response: Response, out: &mut Output) -> Result<(), Error> {
        self.started(&response);
        if let Some(usage) = response.usage {
            self.usage = Some(self.lift_usage(usage));
        }
        let status = response.status.as_deref().unwrap_or("completed");
        if status == "failed" || response.error.as_ref().is_some_and(|e| !e.is_null()) {
            self.order.flush(out);
            let error = response.error.unwrap_or_default();
            return Err(ProviderError::in_stream(PROVIDER, &error).into());
        }
        self.finish = Some(match status {
            "incomplete" => {
                let reason = response.incomplete_details.and_then(|d| d.reason);
                match reason.as_deref() {
                    Some("max_output_tokens") => FinishReason::Length,
                    Some("content_filter") => FinishReason::ContentFilter,
                    Some(other) => FinishReason::from(other.to_owned()),
                    None => FinishReason::from("incomplete".to_owned()),
                }
            }
            "completed" if self.function_calls => FinishReason::ToolCalls,
            "completed" if self.refusal => FinishReason::Refusal,
            "completed" => FinishReason::Stop,
            other => FinishReason::from(other.to_owned()),
        });
        Ok(())
    }

    fn lift_usage(&self, usage: ResponseUsage) -> Usage {
        lift_usage(
            usage.input_tokens,
            usage.output_tokens,
            usage.input_tokens_details,
            usage.output_tokens_details,
            self.metadata(),
        )
    }

    fn metadata(&self) -> Metadata {
        self.generation_id
            .as_ref()
            .map(Metadata::generation)
            .unwrap_or_default()
    }

    /// The metadata of an item's first event: the response id and the item's
    /// fields to keep.
    fn item_metadata(&self, id: Option<String>, mut fields: Map<String, Value>) -> Metadata {
        let mut metadata = self.metadata();
        fields.remove("status");
        if let Some(id) = id {
            fields.insert("id".into(), id.into());
        }
        wire_extra::keep(&mut metadata, EXTRA_KEY, fields);
        metadata
    }

    fn added(&mut self, index: u32, item: Item, out: &mut Output) -> Result<(), Error> {
        // An item left open at this index (no done before the next added).
        if self.items.contains_key(&index) {
            self.close(index, out);
        }
        let open = match item {
            Item::Message(MessageItem { id, extra, .. }) => Open::Message {
                metadata: Some(self.item_metadata(id, extra)),
                streamed: false,
                refusing: false,
            },
            Item::Reasoning(ReasoningItem { id, extra, .. }) => {
                let mut metadata = self.item_metadata(id, extra);
                if metadata.get(EXTRA_KEY).is_none() {
                    metadata.insert(EXTRA_KEY, Value::Object(Map::new()));
                }
                Open::Reasoning {
                    metadata: Some(metadata),
                    streamed: false,
                    part_break: false,
                }
            }
            Item::FunctionCall(call) => self.start_call(call, out)?,
            Item::FunctionCallOutput(_) | Item::Other(_) => Open::Other,
        };
        self.items.insert(index, open);
        Ok(())
    }

    fn start_call(&mut self, call: FunctionCallItem, out: &mut Output) -> Result<Open, Error> {
        let FunctionCallItem {
            id,
            call_id,
            name,
            arguments,
            extra,
            ..
        } = call;
        if call_id.is_empty() || name.is_empty() {
            return Err(malformed(
                PROVIDER,
                "a `function_call` item came without its `call_id` or `name`",
            ));
        }
        self.function_calls = true;
        let ordinal = self.order.next();
        let mut delta = ToolCallDelta::start(ordinal, call_id, name);
        let mut fields = extra;
        fields.remove("status");
        if let Some(id) = id {
            fields.insert("id".into(), id.into());
        }
        wire_extra::keep(&mut delta.metadata, EXTRA_KEY, fields);
        let streamed = !arguments.is_empty();
        delta.arguments_delta = arguments;
        self.order.start(delta, out);
        Ok(Open::Call { ordinal, streamed })
    }

    fn arguments(&mut self, index: u32, fragment: String, out: &mut Output) -> Result<(), Error> {
        let Some(Open::Call { ordinal, streamed }) = self.items.get_mut(&index) else {
            return Err(malformed(
                PROVIDER,
                format!("arguments came for output item {index}, which is no open function call"),
            ));
        };
        *streamed = true;
        let delta = ToolCallDelta::arguments(*ordinal, fragment);
        self.order
            .fragment(delta, out)
            .map_err(|late| malformed(PROVIDER, late.to_string()))
    }

    /// A piece of a message's text (or refusal).
    fn text(&mut self, delta: DeltaEvent, refusal: bool, out: &mut Output) {
        if delta.delta.is_empty() {
            return;
        }
        let Some(Open::Message {
            metadata,
            streamed,
            refusing,
        }) = self.items.get_mut(&delta.output_index)
        else {
            return; // text for no open message: nothing to put it in
        };
        *streamed = true;
        let mut metadata = metadata.take().unwrap_or_default();
        if refusal && !*refusing {
            metadata.insert(REFUSAL_KEY, true.into());
        }
        *refusing = refusal;
        self.refusal |= refusal;
        self.order.flush(out);
        out.push(Event::TextDelta(TextDelta {
            text: delta.delta,
            metadata,
        }));
    }

    /// A piece of reasoning (its summary or text), or its signature.
    fn reasoning(&mut self, index: u32, text: String, signature: Option<String>, out: &mut Output) {
        let Some(Open::Reasoning {
            metadata,
            streamed,
            part_break,
        }) = self.items.get_mut(&index)
        else {
            return;
        };
        if text.is_empty() && signature.is_none() && metadata.is_none() {
            return; // nothing new: the item's message already began
        }
        let text = if std::mem::take(part_break) && !text.is_empty() {
            format!("{PART_BREAK}{text}")
        } else {
            text
        };
        *streamed |= !text.is_empty();
        let metadata = metadata.take().unwrap_or_default();
        self.order.flush(out);
        out.push(Event::ReasoningDelta(ReasoningDelta {
            text,
            signature,
            metadata,
        }));
    }

    /// An item is complete: what did not stream comes from the whole item.
    fn done(&mut self, index: u32, item: Item, out: &mut Output) -> Result<(), Error> {
        if !self.items.contains_key(&index) {
            self.added(index, item.clone(), out)?;
        }
        match (self.items.get(&index), item) {
            (Some(Open::Message { streamed, .. }), Item::Message(message)) => {
                let streamed = *streamed;
                self.message_done(index, message, streamed, out);
            }
            (Some(Open::Reasoning { streamed, .. }), Item::Reasoning(reasoning)) => {
                if !*streamed {
                    let parts = if reasoning.summary.is_empty() {
                        reasoning.content.unwrap_or_default()
                    } else {
                        reasoning.summary
                    };
                    let texts: Vec<String> = parts.into_iter().map(|part| part.text).collect();
                    self.reasoning(index, texts.join(PART_BREAK), None, out);
                }
                let signature = reasoning.encrypted_content.filter(|s| !s.is_empty());
                self.reasoning(index, String::new(), signature, out);
            }
            (
                Some(Open::Call {
                    streamed: false, ..
                }),
                Item::FunctionCall(call),
            ) if !call.arguments.is_empty() => self.arguments(index, call.arguments, out)?,
            (Some(Open::Other), Item::Other(item)) => {
                let mut metadata = self.metadata();
                metadata.insert(ITEM_KEY, Value::Object(item));
                self.order.flush(out);
                out.push(Event::message(Message::Text(TextMessage {
                    role: Role::Assistant,
                    text: String::new(),
                    metadata,
                })));
            }
            _ => {}
        }
        self.close(index, out);
        Ok(())
    }

    fn message_done(&mut self, index: u32, message: MessageItem, streamed: bool, out: &mut Output) {
        let parts = match message.content {
            MessageContent::Parts(parts) => parts,
            MessageContent::Text(text) => vec![ContentPart::OutputText(super::types::OutputText {
                text,
                ..Default::default()
            })],
        };
        let mut citations = Vec::new();
        let mut offset = 0;
        for part in parts {
            let (text, refusal) = match part {
                ContentPart::OutputText(text) => {
                    citations.extend(
                        text.annotations
                            .iter()
                            .filter(|a| {
                                a.get("type").and_then(Value::as_str) == Some("url_citation")
                            })
                            .filter_map(|a| lift_url_citation(a, 0))
                            .map(|citation| match citation.span {
                                Some(span) => {
                                    let (start, end) = (span.start + offset, span.end + offset);
                                    citation.with_span(start, end)
                                }
                                None => citation,
                            }),
                    );
                    (text.text, false)
                }
                ContentPart::Refusal(refusal) => (refusal.refusal, true),
                _ => continue,
            };
            offset += text.chars().count();
            if !streamed {
                let delta = DeltaEvent {
                    output_index: index,
                    delta: text,
                    ..DeltaEvent::default()
                };
                self.text(delta, refusal, out);
            }
        }
        let mut metadata = match self.items.get_mut(&index) {
            Some(Open::Message { metadata, .. }) => metadata.take().unwrap_or_default(),
            _ => Metadata::new(),
        };
        metadata.add_citations(citations);
        if !metadata.is_empty() {
            self.order.flush(out);
            out.push(Event::TextDelta(TextDelta {
                text: String::new(),
                metadata,
            }));
        }
    }

    /// Closes the item at `index`: a call is over (the one held after it may go).
    fn close(&mut self, index: u32, out: &mut Output) {
        if let Some(Open::Call { ordinal, .. }) = self.items.remove(&index) {
            self.order.end(ordinal, out);
        }
    }
}

impl Lift for Lifter {
    const PROVIDER: &'static str = PROVIDER;

    fn event(&mut self, event: &SseEvent, out: &mut Output) -> Result<(), Error> {
        let lifted = self.push_event(event.data.as_bytes(), out);
        self.order.keep_on_error(lifted, out)
    }

    /// Lifts a whole non-streaming body (a `response` object, or an error).
    fn body(&mut self, body: &[u8], out: &mut Output) -> Result<(), Error> {
        let value: Value = parse(PROVIDER, body, "the body", "a JSON response")?;
        if value.get("error").is_some_and(|error| !error.is_null()) && value.get("output").is_none()
        {
            return Err(ProviderError::in_stream(PROVIDER, &value).into());
        }
        let response: Response = serde_json::from_value(value).map_err(|error| {
            malformed(
                PROVIDER,
                format!("the body is not a Responses `response` ({error})"),
            )
        })?;
        self.started(&response);
        let mut response = response;
        let output = std::mem::take(&mut response.output);
        for (index, item) in (0u32..).zip(output) {
            self.added(index, item.clone(), out)?;
            self.done(index, item, out)?;
        }
        self.ended(response, out)
    }

    /// Ends the response: the calls held, the usage and the finish reason. A
    /// response that never ended is an error.
    fn finish(&mut self, out: &mut Output) -> Result<(), Error> {
        self.order.flush(out);
        if let Some(usage) = self.usage.take() {
            out.push(Event::Usage(usage));
        }
        match self.finish.take() {
            Some(reason) => out.push(Event::finish(reason)),
            None => {
                return Err(truncated(
                    PROVIDER,
                    format!(
                        "the stream ended after {} events before the response completed",
                        self.events
                    ),
                ));
            }
        }
        Ok(())
    }
}

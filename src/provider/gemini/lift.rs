//! Lifting: `generateContent` responses → canonical events (see [`Lifter`]).

use serde_json::{Map, Value};

use super::grounding;
use super::lower::{GENERATED_ID_KEY, PROVIDER, THOUGHT_SIGNATURE_KEY};
use super::types::{FunctionCall, GenerateContentResponse as Response, Part, PartialArg};
use crate::Error;
use crate::message::{
    Event, FinishReason, Metadata, ReasoningDelta, TextDelta, ToolCallDelta, Usage,
};
use crate::provider::body::{Lift, excerpt, malformed, parse, token_count, truncated};
use crate::provider::error::ProviderError;
use crate::provider::sse::{STRAY_EVENT, SseEvent};
use crate::service::Output;

/// Lifts `generateContent` responses — streamed (`alt=sse`) or whole — into
/// canonical events.
///
/// Each SSE event is a whole `GenerateContentResponse`, the same object as a
/// non-streaming body (or each element of the JSON array `streamGenerateContent`
/// answers without `alt=sse`), so both modes go through the same code. Of the
/// first candidate's parts:
///
/// - `text` becomes assistant text; with `thought: true`, reasoning (a thought
///   summary). A `thoughtSignature` on a thought goes to the reasoning's
///   signature; on text, to the text message's metadata under
///   [`THOUGHT_SIGNATURE_KEY`]; on an empty text part (Gemini 3 ends a turn so),
///   to a reasoning message with no text and that signature — so that lowering
///   puts each back on the part it came on;
/// - each `functionCall` is one tool call, with its arguments object; its `id`
///   (Gemini 3) is the call's id, else one is made up (`<responseId>_call_<n>`,
///   the same in both modes) and marked with [`GENERATED_ID_KEY`]; its
///   `thoughtSignature` goes to the call's metadata under
///   [`THOUGHT_SIGNATURE_KEY`];
/// - Vertex's streamed arguments (`streamFunctionCallArguments`): a
///   `functionCall` with a `name` and `willContinue: true` opens a call,
///   `partialArgs` (`jsonPath`, a `stringValue` continued while `willContinue`,
///   or a `numberValue`/`boolValue`/`nullValue`) build its arguments, and an
///   empty `functionCall` (or any other part) closes it — its arguments are sent
///   then, whole;
/// - `groundingMetadata` (the last one sent) → [`Citation`](crate::Citation)s
///   of web pages (see [`grounding`](super::grounding)), on an empty text
///   delta at the end, when the reply ends in text;
/// - `usageMetadata` is cumulative: the last one is emitted once, at the end
///   (output = candidates + thoughts tokens; `thoughtsTokenCount` is
///   `reasoning_tokens`, `cachedContentTokenCount` `cached_input_tokens`);
/// - `finishReason`: `STOP` (`tool_calls` when the reply holds calls),
///   `MAX_TOKENS` → `length`, `SAFETY`, `RECITATION`, `BLOCKLIST`,
///   `PROHIBITED_CONTENT`, `SPII`, `IMAGE_SAFETY` → `content_filter`; others
///   lowercased (`malformed_function_call`); a prompt blocked
///   (`promptFeedback.blockReason`) → `content_filter`;
/// - an `error` object in the body or in an event, or appended to the stream as
///   raw JSON outside any event (Vertex), becomes
///   [`Error::Provider`](crate::Error::Provider); other text outside the events
///   is [`TransportErrorKind::Malformed`](crate::provider::TransportErrorKind::Malformed);
/// - a stream that ends without a finish reason is
///   [`TransportErrorKind::Truncated`](crate::provider::TransportErrorKind::Truncated).
///
/// Other parts (`inlineData` output, `executableCode`, `codeExecutionResult`)
/// and other candidates are not lifted.
///
/// ```
/// use lmstack::provider::body::Lift;
/// use lmstack::provider::gemini::Lifter;
/// use lmstack::service::Output;
/// use lmstack::Joiner;
///
/// let mut lifter = Lifter::new();
/// let mut events = Output::new();
/// let body = br#"{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"add","args":{"a":2},"id":"x1"}}]},"finishReason":"STOP"}]}"#;
/// lifter.body(body, &mut events).unwrap();
/// lifter.finish(&mut events).unwrap();
/// let messages = Joiner::join(events.drain());
/// let calls = messages[0].calls();
/// assert_eq!((calls[0].id.as_str(), calls[0].arguments["a"].as_u64()), ("x1", Some(2)));
/// ```
#[derive(Debug, Default)]
pub struct Lifter {
    generation_id: Option<String>,
    last: Last,
    calls: u32,
    /// A call whose arguments are being streamed (`partialArgs`).
    streamed: Option<(u32, Value)>,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    done: bool,
    responses: usize,
    /// The text of the text message being lifted, and the last grounding
    /// metadata, whose offsets count in it.
    text: String,
    grounding: Option<Value>,
}

#[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
enum Last {
    #[default]
    Nothing,
    Text,
    Reasoning,
    Call,
}

impl Lifter {
    /// A lifter for one response.
    pub fn new() -> Self {
        Self::default()
    }

    fn parse<T: serde::de::DeserializeOwned>(
        &mut self,
        data: &[u8],
        what: &str,
    ) -> Result<T, Error> {
        self.responses += 1;
        parse(PROVIDER, data, what, "a JSON GenerateContentResponse")
    }

    fn lift(&mut self, response: Response, out: &mut Output) -> Result<(), Error> {
        if let Some(error) = response.error {
            return Err(ProviderError::in_stream(PROVIDER, &error).into());
        }
        if self.generation_id.is_none() {
            self.generation_id = response.response_id.filter(|id| !id.is_empty());
        }
        let candidate = response
            .candidates
            .unwrap_or_default()
            .into_iter()
            .find(|candidate| candidate.index.unwrap_or(0) == 0);
        if let Some(candidate) = candidate {
            let parts = candidate.content.and_then(|content| content.parts);
            for part in parts.unwrap_or_default() {
                self.lift_part(part, out)?;
            }
            if let Some(reason) = candidate.finish_reason {
                self.finish_reason = Some(reason);
            }
            if candidate.grounding_metadata.is_some() {
                self.grounding = candidate.grounding_metadata;
            }
        }
        if let Some(reason) = response
            .prompt_feedback
            .and_then(|feedback| feedback.block_reason)
        {
            self.finish_reason
                .get_or_insert(format!("BLOCKED_{reason}"));
        }
        if let Some(usage) = response.usage_metadata.as_ref().and_then(lift_usage) {
            self.usage = Some(usage);
        }
        Ok(())
    }

    fn lift_part(&mut self, part: Part, out: &mut Output) -> Result<(), Error> {
        if let Some(call) = part.function_call {
            return self.lift_call(call, part.thought_signature, out);
        }
        self.close_streamed(out);
        let text = part.text.unwrap_or_default();
        if part.thought == Some(true) || (text.is_empty() && part.thought_signature.is_some()) {
            let metadata = self.starting(Last::Reasoning).unwrap_or_default();
            out.push(Event::ReasoningDelta(ReasoningDelta {
                text,
                signature: part.thought_signature,
                metadata,
            }));
        } else if !text.is_empty() {
            let starting = self.starting(Last::Text);
            if starting.is_some() {
                self.text.clear();
            }
            self.text.push_str(&text);
            let mut metadata = starting.unwrap_or_default();
            if let Some(signature) = part.thought_signature {
                metadata.insert(THOUGHT_SIGNATURE_KEY, signature.into());
            }
            out.push(Event::TextDelta(TextDelta { text, metadata }));
        }
        Ok(())
    }

    /// The metadata for an event of kind `kind`: the response id when the event
    /// starts a new message (`Some`), nothing when it continues one (`None`).
    fn starting(&mut self, kind: Last) -> Option<Metadata> {
        (std::mem::replace(&mut self.last, kind) != kind).then(|| {
            self.generation_id
                .as_ref()
                .map(Metadata::generation)
                .unwrap_or_default()
        })
    }

    fn lift_call(
        &mut self,
        call: FunctionCall,
        signature: Option<String>,
        out: &mut Output,
    ) -> Result<(), Error> {
        let Some(name) = call.name.filter(|name| !name.is_empty()) else {
            // A piece of a streamed call, or its end.
            let Some((_, arguments)) = &mut self.streamed else {
                if call.partial_args.is_some() {
                    return Err(malformed(
                        PROVIDER,
                        "`partialArgs` came with no streamed call open",
                    ));
                }
                return Ok(()); // an empty `functionCall` with nothing open
            };
            for piece in call.partial_args.iter().flatten() {
                apply_partial(arguments, piece)?;
            }
            if call.partial_args.is_none() || call.will_continue != Some(true) {
                self.close_streamed(out);
            }
            return Ok(());
        };
        self.close_streamed(out);
        let ordinal = self.calls;
        self.calls += 1;
        let mut delta = ToolCallDelta::new(ordinal);
        let id = match call.id.filter(|id| !id.is_empty()) {
            Some(id) => id,
            None => {
                delta.metadata.insert(GENERATED_ID_KEY, true.into());
                match &self.generation_id {
                    Some(generation) => format!("{generation}_call_{ordinal}"),
                    None => format!("call_{ordinal}"),
                }
            }
        };
        let details = delta.details_mut();
        details.name = Some(name);
        details.id = Some(id);
        if let Some(signature) = signature {
            delta
                .metadata
                .insert(THOUGHT_SIGNATURE_KEY, signature.into());
        }
        self.last = Last::Call;
        if call.will_continue == Some(true) {
            self.streamed = Some((ordinal, Value::Object(Map::new())));
        } else {
            delta.arguments_delta = match call.args {
                Some(Value::Null) | None => String::new(),
                Some(arguments) => arguments.to_string(),
            };
        }
        out.push(Event::from(delta));
        Ok(())
    }

    /// Sends the arguments of the streamed call, if one is open.
    fn close_streamed(&mut self, out: &mut Output) {
        if let Some((ordinal, arguments)) = self.streamed.take() {
            out.push(Event::call_arguments(ordinal, arguments.to_string()));
        }
    }

    fn map_finish(&self, reason: &str) -> FinishReason {
        match reason {
            "STOP" if self.calls > 0 => FinishReason::ToolCalls,
            "STOP" => FinishReason::Stop,
            "MAX_TOKENS" => FinishReason::Length,
            "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII"
            | "IMAGE_SAFETY" => FinishReason::ContentFilter,
            blocked if blocked.starts_with("BLOCKED_") => FinishReason::ContentFilter,
            other => FinishReason::from(other.to_ascii_lowercase()),
        }
    }
}

impl Lift for Lifter {
    const PROVIDER: &'static str = PROVIDER;
    const STRAY_LINES: bool = true;

    /// Lifts one event; text outside the event grammar is an error object
    /// appended to the stream (a provider error), or else malformed.
    fn event(&mut self, event: &SseEvent, out: &mut Output) -> Result<(), Error> {
        if event.event.as_deref() == Some(STRAY_EVENT) {
            let error = serde_json::from_str::<Value>(&event.data)
                .ok()
                .and_then(|value| ProviderError::from_body(PROVIDER, 200, &value));
            return Err(match error {
                Some(error) => error.into(),
                None => malformed(
                    PROVIDER,
                    format!(
                        "text outside the event stream: {}",
                        excerpt(event.data.as_bytes())
                    ),
                ),
            });
        }
        let response: Response = self.parse(event.data.as_bytes(), "an event")?;
        self.lift(response, out)
    }

    /// Lifts a whole non-streaming body: one response, or the JSON array of
    /// responses `streamGenerateContent` answers without `alt=sse`.
    fn body(&mut self, body: &[u8], out: &mut Output) -> Result<(), Error> {
        let array = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
        let responses: Vec<Response> = if array {
            self.parse(body, "the body")?
        } else {
            vec![self.parse(body, "the body")?]
        };
        for response in responses {
            self.lift(response, out)?;
        }
        self.done = true;
        Ok(())
    }

    /// Ends the response: closes a streamed call, emits the usage and the finish
    /// reason. A stream that ended without a finish reason is an error.
    fn finish(&mut self, out: &mut Output) -> Result<(), Error> {
        self.close_streamed(out);
        if let Some(metadata) = self.grounding.take().filter(|_| self.last == Last::Text) {
            let mut cited = Metadata::new();
            cited.add_citations(grounding::citations(&metadata, &self.text));
            if !cited.is_empty() {
                out.push(Event::TextDelta(TextDelta {
                    text: String::new(),
                    metadata: cited,
                }));
            }
        }
        if let Some(usage) = self.usage.take() {
            out.push(Event::Usage(usage));
        }
        match self.finish_reason.take() {
            Some(reason) => out.push(Event::finish(self.map_finish(&reason))),
            None if !self.done => {
                return Err(truncated(
                    PROVIDER,
                    format!(
                        "the stream ended after {} responses without a finish reason",
                        self.responses
                    ),
                ));
            }
            None => {}
        }
        Ok(())
    }
}

/// Applies one `partialArgs` piece to the arguments being built: a
/// `stringValue` is appended to the string already at its path.
fn apply_partial(arguments: &mut Value, piece: &PartialArg) -> Result<(), Error> {
    let path = piece.json_path.as_deref().unwrap_or("$");
    let slot = slot(arguments, path).ok_or_else(|| {
        malformed(
            PROVIDER,
            format!(
                "`partialArgs` path `{}` cannot be followed",
                excerpt(path.as_bytes())
            ),
        )
    })?;
    if let Some(text) = &piece.string_value {
        match slot {
            Value::String(held) => held.push_str(text),
            other => *other = Value::String(text.clone()),
        }
    } else if let Some(number) = &piece.number_value {
        *slot = number.clone();
    } else if let Some(flag) = piece.bool_value {
        *slot = flag.into();
    } else {
        *slot = Value::Null;
    }
    Ok(())
}

/// The value at a JSON path such as `$.a.b[0]`, created (as objects, arrays
/// and nulls) as the path needs; `None` when the path contradicts what is there.
fn slot<'a>(mut value: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    let mut rest = path.strip_prefix('$')?;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let (key, tail) = after.split_at(end);
            if value.is_null() {
                *value = Value::Object(Map::new());
            }
            value = value.as_object_mut()?.entry(key).or_insert(Value::Null);
            rest = tail;
        } else if let Some(after) = rest.strip_prefix('[') {
            let (index, tail) = after.split_once(']')?;
            let index: usize = index.parse().ok()?;
            if value.is_null() {
                *value = Value::Array(Vec::new());
            }
            let array = value.as_array_mut()?;
            // Pieces come in order: an index at most one past the end.
            if index > array.len() {
                return None;
            }
            if index == array.len() {
                array.push(Value::Null);
            }
            value = &mut array[index];
            rest = tail;
        } else {
            return None;
        }
    }
    Some(value)
}

/// Reads `usageMetadata`; `None` when it holds no token counts.
fn lift_usage(usage: &Value) -> Option<Usage> {
    // Read leniently, as every wire's counts are (a string counts as absent).
    let count = |path: &str| token_count(usage, path);
    let input = count("/promptTokenCount");
    let candidates = count("/candidatesTokenCount");
    let thoughts = count("/thoughtsTokenCount");
    if input.is_none() && candidates.is_none() && thoughts.is_none() {
        return None; // Vertex sends `{"trafficType": …}` alone mid-stream
    }
    Some(Usage {
        input_tokens: input.unwrap_or_default(),
        output_tokens: candidates
            .unwrap_or_default()
            .saturating_add(thoughts.unwrap_or_default()),
        cached_input_tokens: count("/cachedContentTokenCount"),
        reasoning_tokens: thoughts,
        metadata: Metadata::default(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Joiner;

    fn lift(responses: &[Value]) -> Result<Vec<crate::Message>, Error> {
        let mut lifter = Lifter::new();
        let mut out = Output::new();
        for response in responses {
            let data = response.to_string();
            lifter.event(
                &SseEvent {
                    data,
                    ..SseEvent::default()
                },
                &mut out,
            )?;
        }
        lifter.finish(&mut out)?;
        Ok(Joiner::join(out.drain()))
    }

    fn call_part(call: Value) -> Value {
        json!({"candidates": [{"content": {"parts": [{"functionCall": call}]}}]})
    }

    #[test]
    fn partial_arguments_of_every_kind_build_nested_values() {
        let piece = |path: &str, value: Value| {
            let mut piece = json!({"jsonPath": path});
            piece
                .as_object_mut()
                .unwrap()
                .extend(value.as_object().unwrap().clone());
            call_part(json!({"partialArgs": [piece], "willContinue": true}))
        };
        let messages = lift(&[
            call_part(json!({"name": "plan", "willContinue": true})),
            piece(
                "$.trip.city",
                json!({"stringValue": "Par", "willContinue": true}),
            ),
            piece("$.trip.city", json!({"stringValue": "is"})),
            piece("$.days[0]", json!({"numberValue": 3})),
            piece("$.days[1]", json!({"numberValue": 4.5})),
            piece("$.flexible", json!({"boolValue": true})),
            piece("$.note", json!({"nullValue": "NULL_VALUE"})),
            call_part(json!({})),
            json!({"candidates": [{"finishReason": "STOP"}]}),
        ])
        .unwrap();
        assert_eq!(
            messages[0].calls()[0].arguments,
            json!({"trip": {"city": "Paris"}, "days": [3, 4.5], "flexible": true, "note": null})
        );
    }

    #[test]
    fn partial_arguments_that_do_not_fit_are_malformed() {
        for path in ["$.a[5]", "a", "$[x]", "$.a[0"] {
            let result = lift(&[
                call_part(json!({"name": "f", "willContinue": true})),
                call_part(json!({"partialArgs": [{"jsonPath": path, "stringValue": "x"}]})),
            ]);
            let error = result.unwrap_err();
            assert!(error.transport_error().is_some(), "{path}: {error}");
        }
        let stray = lift(&[call_part(
            json!({"partialArgs": [{"jsonPath": "$.a", "stringValue": "x"}]}),
        )]);
        assert!(
            stray
                .unwrap_err()
                .to_string()
                .contains("no streamed call open")
        );
    }

    #[test]
    fn a_streamed_call_is_closed_by_the_next_part_or_the_end() {
        let messages = lift(&[
            call_part(json!({"name": "f", "willContinue": true})),
            call_part(json!({"partialArgs": [{"jsonPath": "$.a", "stringValue": "x"}], "willContinue": true})),
            json!({"candidates": [{"content": {"parts": [{"text": "done"}]}, "finishReason": "STOP"}]}),
        ])
        .unwrap();
        assert_eq!(messages[0].calls()[0].arguments, json!({"a": "x"}));
        assert_eq!(messages[1].as_text(), Some("done"));
        let messages = lift(&[
            call_part(json!({"name": "f", "willContinue": true})),
            json!({"candidates": [{"finishReason": "STOP"}]}),
        ])
        .unwrap();
        assert_eq!(messages[0].calls()[0].arguments, json!({}));
    }
}

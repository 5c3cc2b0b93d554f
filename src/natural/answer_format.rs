//! Structured output for a text-only model: the system-prompt section that
//! asks for the request's [`ResponseFormat`], and the reading of the JSON out
//! of a final answer the model wrapped in a fence or prose.

use serde_json::Value;

use super::reply_json::json_in_reply;
use crate::message::{Event, Message, Role, TextDelta};
use crate::service::{Output, OutputCheck};
use crate::{Error, ResponseFormat};

/// How the section starts: also how an earlier one is found.
pub(crate) const START: &str = "# Response format";
/// How the section ends.
pub(crate) const END: &str = "Write the JSON alone: no code fence, no words before or after it.";

/// The stage named in the layer's own check's errors.
const STAGE: &str = "natural tool use";

/// The section asking for `format`: only a JSON value (an object, for
/// `json_object`) matching the schema, shown as pretty JSON.
pub(crate) fn section(format: &ResponseFormat) -> String {
    let mut text = format!("{START}\n\nWhen you answer (rather than call a tool), answer with ");
    match format.schema() {
        None => text.push_str("only a JSON object."),
        Some(schema) => {
            text.push_str("only a JSON value that matches this JSON Schema:\n\n");
            let pretty =
                serde_json::to_string_pretty(schema).unwrap_or_else(|_| schema.to_string());
            text.push_str(&pretty);
        }
    }
    text.push_str("\n\n");
    text.push_str(END);
    text
}

/// The final answer of one reply, held until the reply ends so that the JSON
/// in it can replace it: text (and every event after the first text, to keep
/// their order) is held; a tool call hands everything held out as it was and
/// ends the holding; at the end, a text that is not JSON itself but holds a
/// JSON value ([`json_in_reply`]) becomes that value, compact, in the place
/// of the first text. A text without JSON is left as it is. With `check`, the
/// answer is then checked against the format too (the layer's own check, for
/// a request that was sent on without its format).
#[derive(Debug)]
pub(crate) struct AnswerJson {
    /// The most bytes of answer text held ([`ANSWER_LIMIT`] unless a test
    /// says otherwise).
    limit: usize,
    check: Option<OutputCheck>,
    held: Vec<Event>,
    /// The text of the held events.
    text: String,
    /// A tool call went out, or the answer outgrew the limit: nothing more is
    /// held.
    called: bool,
}

/// The most bytes of answer text held for its JSON (16 MiB): past it, what is
/// held goes out as it came and the reply ends with
/// [`Error::LimitExceeded`].
pub(crate) const ANSWER_LIMIT: usize = 16 << 20;

impl AnswerJson {
    /// The holder for `format`, checking the answer itself when `check`; a
    /// schema that is not one is [`Error::InvalidRequest`].
    pub(crate) fn new(format: &ResponseFormat, check: bool) -> Result<Self, Error> {
        Ok(AnswerJson {
            limit: ANSWER_LIMIT,
            check: check.then(|| OutputCheck::new(format)).transpose()?,
            held: Vec::new(),
            text: String::new(),
            called: false,
        })
    }

    /// Takes one event of the reply (after the parser). An answer past the
    /// limit is [`Error::LimitExceeded`], after everything held and `event`.
    pub(crate) fn push(&mut self, event: Event, out: &mut Output) -> Result<(), Error> {
        if self.called {
            out.push(event);
            return Ok(());
        }
        let text = match &event {
            Event::TextDelta(delta) => Some(delta.text.as_str()),
            Event::Message {
                message: Message::Text(text),
            } if text.role == Role::Assistant => Some(text.text.as_str()),
            _ => None,
        };
        let calls = match &event {
            Event::ToolCallDelta(_) => true,
            Event::Message { message } => !message.calls().is_empty(),
            _ => false,
        };
        if calls {
            self.called = true;
            self.release(out);
            out.push(event);
        } else if let Some(text) = text {
            if self.text.len() + text.len() > self.limit {
                self.called = true;
                self.release(out);
                out.push(event);
                return Err(Error::LimitExceeded {
                    stage: "natural tool use",
                    what: "the answer held for its JSON",
                    limit: self.limit,
                });
            }
            self.text.push_str(text);
            self.held.push(event);
        } else if self.held.is_empty() {
            out.push(event);
        } else {
            self.held.push(event);
        }
        Ok(())
    }

    /// The reply failed: what is held goes out as it came.
    pub(crate) fn release(&mut self, out: &mut Output) {
        self.text.clear();
        self.held.drain(..).for_each(|held| out.push(held));
    }

    /// The reply ended: hands out what is held, the answer's JSON in place of
    /// its text, and checks it when asked to.
    pub(crate) fn finish(&mut self, out: &mut Output) -> Result<(), Error> {
        let text = std::mem::take(&mut self.text);
        let found = serde_json::from_str::<Value>(text.trim())
            .is_err()
            .then(|| json_in_reply(&text))
            .flatten()
            .map(|value| value.to_string());
        let mut first = true;
        for event in self.held.drain(..) {
            match (event, &found) {
                (Event::TextDelta(delta), Some(json)) => {
                    if std::mem::take(&mut first) {
                        out.push(Event::TextDelta(TextDelta {
                            text: json.clone(),
                            metadata: delta.metadata,
                        }));
                    }
                }
                (
                    Event::Message {
                        message: Message::Text(mut message),
                    },
                    Some(json),
                ) if message.role == Role::Assistant => {
                    if std::mem::take(&mut first) {
                        message.text = json.clone();
                        out.push(Event::Message {
                            message: Message::Text(message),
                        });
                    }
                }
                (event, _) => out.push(event),
            }
        }
        match &self.check {
            Some(check) if !self.called => {
                check.check(STAGE, found.as_deref().unwrap_or(&text))?;
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(
        format: &ResponseFormat,
        check: bool,
        events: Vec<Event>,
    ) -> (Vec<Event>, Result<(), Error>) {
        let mut answer = AnswerJson::new(format, check).unwrap();
        let mut out = Output::new();
        for event in events {
            answer.push(event, &mut out).unwrap();
        }
        let ended = answer.finish(&mut out);
        (std::iter::from_fn(|| out.pop()).collect(), ended)
    }

    #[test]
    fn an_answer_past_the_limit_goes_out_as_it_came_then_fails() {
        let mut answer = AnswerJson::new(&ResponseFormat::JsonObject, false).unwrap();
        answer.limit = 12;
        let mut out = Output::new();
        answer.push(Event::text("Here: {\"a\""), &mut out).unwrap();
        let error = answer.push(Event::text(": 1}"), &mut out).unwrap_err();
        assert!(
            matches!(error, Error::LimitExceeded { limit: 12, .. }),
            "{error}"
        );
        answer.push(Event::text(" more"), &mut out).unwrap();
        let texts: Vec<Event> = std::iter::from_fn(|| out.pop()).collect();
        let expected = ["Here: {\"a\"", ": 1}", " more"].map(Event::text);
        assert_eq!(texts, expected);
    }

    #[test]
    fn the_section_shows_the_schema_pretty() {
        let format = ResponseFormat::json_schema(json!({"type": "object", "required": ["a"]}));
        let text = section(&format);
        assert!(text.starts_with(START) && text.ends_with(END), "{text}");
        assert!(text.contains("\"required\": [\n    \"a\"\n  ]"), "{text}");
        assert!(section(&ResponseFormat::JsonObject).contains("only a JSON object."));
    }

    #[test]
    fn a_fenced_answer_becomes_its_json_in_place_of_the_first_text() {
        let format = ResponseFormat::JsonObject;
        let events = vec![
            Event::reasoning("think"),
            Event::text("Here it is:\n```json\n{\"a\""),
            Event::text(": 1}\n```"),
        ];
        let (out, ended) = run(&format, true, events);
        assert!(ended.is_ok());
        assert_eq!(
            out,
            vec![Event::reasoning("think"), Event::text("{\"a\":1}")]
        );
    }

    #[test]
    fn json_already_and_text_without_json_are_left_as_they_are() {
        let format = ResponseFormat::JsonObject;
        let pieces = vec![Event::text(" {\"a\": "), Event::text("1} ")];
        assert_eq!(run(&format, true, pieces.clone()).0, pieces);
        let prose = vec![Event::text("I cannot.")];
        let (out, ended) = run(&format, false, prose.clone());
        assert_eq!((out, ended.is_ok()), (prose.clone(), true));
        let (_, checked) = run(&format, true, prose);
        assert!(matches!(checked, Err(Error::InvalidOutput { .. })));
    }

    #[test]
    fn a_tool_call_hands_out_what_is_held_in_order_and_is_no_answer() {
        let format = ResponseFormat::json_schema(json!({"type": "object"}));
        let events = vec![
            Event::text("Let me look. {\"x\": 1}"),
            Event::call_start(0, "c", "f"),
            Event::text("done"),
        ];
        let (out, ended) = run(&format, true, events.clone());
        assert!(ended.is_ok());
        assert_eq!(out, events);
    }
}

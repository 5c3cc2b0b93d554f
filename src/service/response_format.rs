//! Structured output: the format a request asks the reply's text to take
//! ([`ResponseFormat`]), and the check of a reply against it
//! ([`OutputCheck`], pure: events in, a verdict at the end).

use jsonschema::Validator;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Error;
#[cfg(feature = "http")]
use crate::message::{Event, Message, Role};

/// The form the model's reply text must take: JSON, and (for `json_schema`)
/// JSON that matches a schema. Each wire lowers it natively (OpenAI
/// `response_format`, Anthropic `output_config.format`, Gemini
/// `generationConfig.responseMimeType` + `responseJsonSchema`), and the
/// providers check the reply against it: a final text that is not JSON, or
/// does not match the schema, ends the reply with [`Error::InvalidOutput`].
///
/// JSON: `{"type":"json_object"}` or
/// `{"type":"json_schema","name":"N","schema":{…},"strict":true}` (`name` and
/// `strict` optional).
///
/// ```
/// use lmstack::ResponseFormat;
/// use serde_json::json;
///
/// let format: ResponseFormat = serde_json::from_value(json!({
///     "type": "json_schema", "name": "city",
///     "schema": {"type": "object", "required": ["name"]},
/// })).unwrap();
/// assert!(format.check_text(r#"{"name": "Paris"}"#).is_ok());
/// assert!(format.check_text(r#"{"town": "Paris"}"#).is_err());
/// assert!(ResponseFormat::JsonObject.check_text("Paris").is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormat {
    /// Any JSON object.
    JsonObject,
    /// JSON that matches `schema`.
    JsonSchema {
        /// The schema's name (OpenAI requires one; `response` when absent).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// The JSON Schema.
        schema: Value,
        /// Whether the provider must follow the schema exactly (OpenAI's
        /// `strict`), where the wire has the choice.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        strict: Option<bool>,
    },
}

impl ResponseFormat {
    /// A `json_schema` format without a name or `strict`.
    pub fn json_schema(schema: Value) -> Self {
        ResponseFormat::JsonSchema {
            name: None,
            schema,
            strict: None,
        }
    }

    /// The schema, for `json_schema`.
    pub fn schema(&self) -> Option<&Value> {
        match self {
            ResponseFormat::JsonObject => None,
            ResponseFormat::JsonSchema { schema, .. } => Some(schema),
        }
    }

    /// Checks `text` against this format, compiling the schema for this one
    /// check; the error says what is wrong.
    pub fn check_text(&self, text: &str) -> Result<Value, Error> {
        OutputCheck::new(self)?.check("response format", text)
    }
}

/// The check of one model reply against a [`ResponseFormat`]: it sees the
/// reply's events as they pass ([`see`](Self::see)), gathering the
/// assistant's text, and gives its verdict when the reply ends
/// ([`verdict`](Self::verdict)). A reply that calls a tool is a round of a
/// tool loop, not the answer: it is not checked. The schema is compiled once,
/// in [`new`](Self::new).
#[derive(Debug)]
pub(crate) struct OutputCheck {
    /// `None` for `json_object`.
    validator: Option<Validator>,
    #[cfg(feature = "http")]
    text: String,
    #[cfg(feature = "http")]
    called: bool,
}

impl OutputCheck {
    /// The check of `format`; a schema that is not one is
    /// [`Error::InvalidRequest`].
    pub(crate) fn new(format: &ResponseFormat) -> Result<Self, Error> {
        let validator = match format.schema() {
            None => None,
            Some(schema) => Some(jsonschema::validator_for(schema).map_err(|error| {
                Error::InvalidRequest(format!(
                    "the response format's JSON Schema is not valid: {error}"
                ))
            })?),
        };
        Ok(OutputCheck {
            validator,
            #[cfg(feature = "http")]
            text: String::new(),
            #[cfg(feature = "http")]
            called: false,
        })
    }

    /// Takes note of one event of the reply.
    #[cfg(feature = "http")]
    pub(crate) fn see(&mut self, event: &Event) {
        match event {
            Event::TextDelta(delta) => self.text.push_str(&delta.text),
            Event::ToolCallDelta(_) => self.called = true,
            Event::Message { message } => self.see_message(message),
            Event::ReasoningDelta(_) | Event::Usage(_) | Event::Finish { .. } => {}
        }
    }

    #[cfg(feature = "http")]
    fn see_message(&mut self, message: &Message) {
        self.called |= !message.calls().is_empty();
        match message {
            Message::Text(text) if text.role == Role::Assistant => self.text.push_str(&text.text),
            Message::Multimodal(multimodal) if multimodal.role == Role::Assistant => {
                let texts = multimodal
                    .content
                    .iter()
                    .filter_map(|block| block.as_text());
                self.text.extend(texts);
            }
            _ => {}
        }
    }

    /// The verdict on the reply seen: the JSON it holds, `None` when it
    /// called a tool, or [`Error::InvalidOutput`] from `stage`.
    #[cfg(feature = "http")]
    pub(crate) fn verdict(&mut self, stage: &'static str) -> Result<Option<Value>, Error> {
        if self.called {
            return Ok(None);
        }
        let text = std::mem::take(&mut self.text);
        self.check(stage, &text).map(Some)
    }

    /// Checks `text`: the JSON it is, or [`Error::InvalidOutput`] from `stage`.
    pub(crate) fn check(&self, stage: &'static str, text: &str) -> Result<Value, Error> {
        let invalid = |message: String| Error::InvalidOutput { stage, message };
        let value: Value = serde_json::from_str(text.trim()).map_err(|error| {
            invalid(format!(
                "the reply is not the JSON the response format asks for ({error}): {}",
                &text[..crate::text::floor_char_boundary(text, 200)]
            ))
        })?;
        match &self.validator {
            None if !value.is_object() => Err(invalid(
                "the reply is JSON but not the object the response format asks for".into(),
            )),
            None => Ok(value),
            Some(validator) => crate::validation::violations(validator, &value)
                .map(|()| value)
                .map_err(|problems| {
                    invalid(format!(
                        "the reply does not match the response format's schema: {problems}"
                    ))
                }),
        }
    }
}

// The tests read replies as the providers do (feature `http`).
#[cfg(all(test, feature = "http"))]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(format: &ResponseFormat, events: &[Event]) -> Result<Option<Value>, Error> {
        let mut check = OutputCheck::new(format)?;
        events.iter().for_each(|event| check.see(event));
        check.verdict("test")
    }

    #[test]
    fn the_serde_form_is_stable() {
        let format = ResponseFormat::JsonSchema {
            name: Some("n".into()),
            schema: json!({"type": "object"}),
            strict: Some(true),
        };
        let text = r#"{"type":"json_schema","name":"n","schema":{"type":"object"},"strict":true}"#;
        assert_eq!(serde_json::to_string(&format).unwrap(), text);
        assert_eq!(
            serde_json::from_str::<ResponseFormat>(text).unwrap(),
            format
        );
        let object = serde_json::to_string(&ResponseFormat::JsonObject).unwrap();
        assert_eq!(object, r#"{"type":"json_object"}"#);
    }

    #[test]
    fn text_in_pieces_and_whole_is_checked_at_the_end() {
        let format = ResponseFormat::json_schema(json!({"required": ["a"]}));
        let pieces = [Event::text("{\"a\""), Event::text(": 1}")];
        assert_eq!(check(&format, &pieces).unwrap(), Some(json!({"a": 1})));
        let whole = [Event::Message {
            message: Message::assistant(" {\"b\": 1}\n"),
        }];
        let Err(Error::InvalidOutput { message, .. }) = check(&format, &whole) else {
            panic!("a violation")
        };
        assert!(message.contains("\"a\""), "{message}");
    }

    #[test]
    fn prose_is_an_error_and_a_tool_call_is_no_answer() {
        let format = ResponseFormat::JsonObject;
        assert!(matches!(
            check(&format, &[Event::text("Sure! Here it is.")]),
            Err(Error::InvalidOutput { .. })
        ));
        assert!(check(&format, &[Event::text("[1]")]).is_err());
        let call = [Event::text("let me look"), Event::call_start(0, "c", "f")];
        assert_eq!(check(&format, &call).unwrap(), None);
    }

    #[test]
    fn a_schema_that_is_none_is_refused() {
        let format = ResponseFormat::json_schema(json!({"type": 7}));
        assert!(matches!(
            OutputCheck::new(&format),
            Err(Error::InvalidRequest(_))
        ));
    }
}

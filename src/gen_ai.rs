//! The OpenTelemetry GenAI semantic conventions on `tracing` spans, shared by
//! the gateway's request span and the providers' attempt spans: what a model
//! call's span records of its reply ([`Observed`]), how an error is named
//! ([`error_type`]), and the conversation's text, recorded only where the
//! operator opted in ([`capture_content`]).
//!
//! The attributes are `tracing` fields named as the conventions name them
//! (`gen_ai.usage.input_tokens`, `error.type`…); `tracing-opentelemetry`
//! exports them as they are. The conventions' arrays
//! (`gen_ai.response.finish_reasons`) are fields holding a JSON array.

use std::borrow::Cow;
#[cfg(feature = "server")]
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::{ContentBlock, Error, Event, FinishReason, Message};

/// The environment variable by which an operator opts in to the
/// conversation's text on spans (`true`), as every OpenTelemetry GenAI
/// instrumentation reads it (by the gateway: the request span holds the text).
#[cfg(feature = "server")]
const CAPTURE_CONTENT: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";

/// The most distinct finish reasons a span keeps (a tool loop's rounds each
/// end with one).
const MAX_FINISH_REASONS: usize = 8;

/// Whether spans record the conversation's text: [`CAPTURE_CONTENT`] is
/// `true` (read once per process).
#[cfg(feature = "server")]
pub(crate) fn capture_content() -> bool {
    static CAPTURE: OnceLock<bool> = OnceLock::new();
    *CAPTURE.get_or_init(|| {
        std::env::var(CAPTURE_CONTENT).is_ok_and(|value| value.trim().eq_ignore_ascii_case("true"))
    })
}

/// What a reply said that its GenAI span records: the tokens, the finish
/// reasons, the error that ended it and (where [capturing](capture_content))
/// its text.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    pub(crate) input_tokens: u64,
    pub(crate) output_tokens: u64,
    /// Whether the reply reported its usage.
    pub(crate) usage: bool,
    /// The distinct finish reasons, in order, at most [`MAX_FINISH_REASONS`].
    pub(crate) finish_reasons: Vec<FinishReason>,
    /// The [`error_type`] of the error that ended the reply.
    pub(crate) error_type: Option<Cow<'static, str>>,
    /// The reply's output, kept only when capturing.
    output: Option<Output>,
}

/// A reply's output as captured: its complete messages and the text of its
/// deltas.
#[derive(Debug, Default)]
struct Output {
    messages: Vec<Message>,
    text: String,
}

impl Observed {
    /// Nothing observed yet; the output kept when `capture` is set.
    pub(crate) fn new(capture: bool) -> Self {
        Observed {
            output: capture.then(Output::default),
            ..Observed::default()
        }
    }

    /// Takes in one item of a reply.
    pub(crate) fn observe(&mut self, item: &Result<Event, Error>) {
        match item {
            Ok(
                Event::Usage(usage)
                | Event::Message {
                    message: Message::Usage(usage),
                },
            ) => {
                self.usage = true;
                self.input_tokens = self.input_tokens.saturating_add(usage.input_tokens);
                self.output_tokens = self.output_tokens.saturating_add(usage.output_tokens);
            }
            Ok(Event::Finish { reason }) => {
                if !self.finish_reasons.contains(reason)
                    && self.finish_reasons.len() < MAX_FINISH_REASONS
                {
                    self.finish_reasons.push(reason.clone());
                }
            }
            Ok(Event::TextDelta(delta)) => {
                if let Some(output) = &mut self.output {
                    output.text.push_str(&delta.text);
                }
            }
            Ok(Event::Message { message }) => {
                if let Some(output) = &mut self.output {
                    output.messages.push(message.clone());
                }
            }
            Ok(_) => {}
            Err(error) => self.error_type = Some(error_type(error)),
        }
    }

    /// Records what was observed on `span`, whose fields were declared
    /// `Empty` (see [`gen_ai_span!`]).
    pub(crate) fn record(&self, span: &tracing::Span) {
        if self.usage {
            span.record("gen_ai.usage.input_tokens", int(self.input_tokens));
            span.record("gen_ai.usage.output_tokens", int(self.output_tokens));
        }
        if !self.finish_reasons.is_empty() {
            let reasons: Vec<&str> = self.finish_reasons.iter().map(|r| r.as_str()).collect();
            span.record(
                "gen_ai.response.finish_reasons",
                json!(reasons).to_string().as_str(),
            );
        }
        if let Some(error_type) = &self.error_type {
            record_error(span, error_type);
        }
        if let Some(output) = &self.output {
            let mut messages = output.messages.clone();
            if !output.text.is_empty() {
                messages.push(Message::assistant(output.text.clone()));
            }
            span.record("gen_ai.output.messages", messages_json(&messages).as_str());
        }
    }
}

/// `value` as a span's integer: OpenTelemetry's are `i64` (`tracing-opentelemetry`
/// writes a `u64` as text).
fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Marks `span` failed with the error named `error_type`.
pub(crate) fn record_error(span: &tracing::Span, error_type: &str) {
    span.record("error.type", error_type);
    span.record("otel.status_code", "ERROR");
}

/// The conventions' `error.type` of `error`, from a small set of names: the
/// upstream's HTTP status (`"429"`), a transport failure's kind
/// (`"timeout"`), or the error's kind (`"invalid_request"`).
pub(crate) fn error_type(error: &Error) -> Cow<'static, str> {
    if let Some(upstream) = error.provider_error() {
        return match upstream.status {
            200..=299 => Cow::Borrowed("stream_error"),
            status => Cow::Owned(status.to_string()),
        };
    }
    if let Some(transport) = error.transport_error() {
        return Cow::Borrowed(transport.kind.short_name());
    }
    Cow::Borrowed(match error {
        Error::InvalidRequest(_) => "invalid_request",
        Error::Refused { status, .. } => return Cow::Owned(status.to_string()),
        Error::LimitExceeded { .. } => "limit_exceeded",
        Error::ToolCallLimit { .. } | Error::ToolLoopLimit { .. } => "tool_limit",
        Error::InvalidToolCall { .. } => "invalid_tool_call",
        Error::InvalidOutput { .. } => "invalid_output",
        Error::ToolPairing { .. } => "tool_pairing",
        Error::Json { .. } => "json",
        _ => "_OTHER",
    })
}

/// `messages` in the conventions' shape (`gen_ai.input.messages`): a JSON
/// array of `{"role", "parts": [{"type": "text", "content"}, {"type":
/// "tool_call", …}, …]}`.
pub(crate) fn messages_json(messages: &[Message]) -> String {
    let messages: Vec<Value> = messages
        .iter()
        .filter(|message| !matches!(message, Message::Usage(_)))
        .map(|message| json!({"role": message.role(), "parts": parts(message)}))
        .collect();
    Value::Array(messages).to_string()
}

/// A message's parts in the conventions' shape.
fn parts(message: &Message) -> Vec<Value> {
    let text = |text: &str| json!({"type": "text", "content": text});
    let blocks = |content: &[ContentBlock]| -> Vec<Value> {
        content
            .iter()
            .map(|block| match block {
                ContentBlock::Text { text: said, .. } => text(said),
                ContentBlock::Image(_) => json!({"type": "image"}),
                ContentBlock::Document(_) => json!({"type": "document"}),
                ContentBlock::Audio(_) => json!({"type": "audio"}),
            })
            .collect()
    };
    let calls = message.calls().iter().map(|call| {
        json!({"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments})
    });
    let results = message.results().iter().map(|result| {
        json!({"type": "tool_call_response", "id": result.call_id, "response": blocks(&result.content)})
    });
    let mut parts: Vec<Value> = match message {
        Message::Text(message) => vec![text(&message.text)],
        Message::Multimodal(message) => blocks(&message.content),
        Message::Reasoning(message) => vec![json!({"type": "reasoning", "content": message.text})],
        _ => Vec::new(),
    };
    parts.extend(calls.chain(results));
    parts
}

/// A GenAI span of the operation `chat`: `tracing`'s `info_span!` named
/// `chat` (exported as `chat {model}`, `otel.name`) with the conventions'
/// fields, those recorded later declared `Empty`. Extra `field = value`
/// pairs follow the model.
macro_rules! gen_ai_span {
    ($kind:literal, $provider:expr, $model:expr $(, $($field:tt)+)?) => {
        tracing::info_span!(
            "chat",
            otel.name = %format_args!("chat {}", $model),
            otel.kind = $kind,
            otel.status_code = tracing::field::Empty,
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = %$provider,
            gen_ai.request.model = %$model,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            gen_ai.response.finish_reasons = tracing::field::Empty,
            gen_ai.input.messages = tracing::field::Empty,
            gen_ai.output.messages = tracing::field::Empty,
            error.type = tracing::field::Empty,
            $($($field)+)?
        )
    };
}
pub(crate) use gen_ai_span;

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    use crate::provider::{ProviderError, TransportError, TransportErrorKind};

    #[test]
    fn errors_are_named_from_a_small_set() {
        let body = br#"{"error": {"message": "slow down"}}"#;
        let upstream = ProviderError::from_response("openai", 429, &[], body, SystemTime::now());
        let upstream = Error::from(upstream);
        assert_eq!(error_type(&upstream), "429");
        let broken = Error::from(TransportError::new(
            "openai",
            TransportErrorKind::Timeout,
            "took too long: secret-ish words",
        ));
        assert_eq!(error_type(&broken), "timeout");
        let invalid = Error::InvalidRequest("anything a client wrote".into());
        assert_eq!(error_type(&invalid), "invalid_request");
    }

    fn usage(input_tokens: u64, output_tokens: u64) -> crate::Usage {
        crate::Usage {
            input_tokens,
            output_tokens,
            ..crate::Usage::default()
        }
    }

    #[test]
    fn observes_tokens_distinct_reasons_and_the_ending_error() {
        let mut observed = Observed::new(false);
        for item in [
            Ok(Event::text("hi")),
            Ok(Event::Usage(usage(3, 4))),
            Ok(Event::finish(FinishReason::ToolCalls)),
            Ok(Event::Usage(usage(5, 6))),
            Ok(Event::finish(FinishReason::ToolCalls)),
            Ok(Event::finish(FinishReason::Stop)),
            Err(Error::InvalidRequest("x".into())),
        ] {
            observed.observe(&item);
        }
        assert_eq!((observed.input_tokens, observed.output_tokens), (8, 10));
        assert_eq!(
            observed.finish_reasons,
            [FinishReason::ToolCalls, FinishReason::Stop]
        );
        assert_eq!(observed.error_type.as_deref(), Some("invalid_request"));
        assert!(observed.output.is_none(), "no text kept without the opt-in");
    }

    #[test]
    fn messages_take_the_conventions_shape() {
        let call = crate::ToolCall::new("c1", "add", json!({"a": 1}));
        let messages = [
            Message::user("what is 1+1?"),
            Message::tool_calls(vec![call]),
        ];
        let shaped: Value = serde_json::from_str(&messages_json(&messages)).unwrap();
        assert_eq!(
            shaped,
            json!([
                {"role": "user", "parts": [{"type": "text", "content": "what is 1+1?"}]},
                {"role": "assistant", "parts": [
                    {"type": "tool_call", "id": "c1", "name": "add", "arguments": {"a": 1}}
                ]}
            ])
        );
    }
}

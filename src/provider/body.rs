//! Response bodies → events: the framing every provider shares (SSE or one JSON
//! body, each within its limit) around a provider's own pure lifting.
//!
//! A provider describes its wire format once, as a [`Lift`]. [`BodyDecoder`]
//! frames the body's bytes for it and is a [`Machine`]: the providers run it
//! over an HTTP body with [`MachineStream`](crate::service::MachineStream), the
//! streaming reply, and join that same stream with
//! [`Reply::complete`](crate::Reply::complete) for the non-streaming one.
//!
//! Every byte a decoder takes counts towards one body limit, whatever the
//! framing and the mode: a server that streams without end, or answers a
//! non-streaming request with an endless event stream, is cut off there.

use crate::text::floor_char_boundary;
use std::fmt;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::Value;

use super::error::{TransportError, TransportErrorKind};
use super::redact::Secrets;
use super::sse::{EachEvent, SseDecoder, SseEvent};
use crate::Error;
use crate::message::Event;
use crate::service::{Machine, Output, OutputCheck};

/// The default limit on a response body, streamed or whole: 64 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 << 20;

/// The default limit on the tool calls of one reply: 1024. A model's parallel
/// calls number a handful, and OpenAI takes at most 128 tools per request.
pub const DEFAULT_MAX_TOOL_CALLS: usize = 1024;

/// A provider's lifting: its responses, streamed or whole, → canonical events.
/// One pure state machine per response serves both wire modes.
pub trait Lift: Send + 'static {
    /// The provider's name, carried by the decoder's errors (`openai`).
    const PROVIDER: &'static str;

    /// Whether the lines of a stream that are not SSE fields reach
    /// [`event`](Lift::event), as an event named
    /// [`STRAY_EVENT`](super::sse::STRAY_EVENT) (Gemini appends its error object
    /// to a stream as raw JSON). Off by default: the grammar ignores them.
    const STRAY_LINES: bool = false;

    /// How this wire frames a streamed body into events: SSE (honouring
    /// [`STRAY_LINES`](Lift::STRAY_LINES)) unless the wire brings its own.
    fn frames() -> Box<dyn Frames>
    where
        Self: Sized,
    {
        let sse = SseDecoder::new();
        Box::new(if Self::STRAY_LINES {
            sse.with_stray_lines()
        } else {
            sse
        })
    }

    /// One event of a streamed response, lent by the framing (which reuses
    /// its buffers for the next one).
    fn event(&mut self, event: &SseEvent, out: &mut Output) -> Result<(), Error>;

    /// A whole non-streaming body.
    fn body(&mut self, body: &[u8], out: &mut Output) -> Result<(), Error>;

    /// The response ended: hands out what is still held, or says what is
    /// missing (a stream cut before its end marker).
    fn finish(&mut self, out: &mut Output) -> Result<(), Error>;
}

/// How a wire frames a streamed body into events, each a name and its data
/// (an [`SseEvent`]): SSE for the wires so far; another framing, such as AWS's
/// binary event stream (each message's `:event-type` header and its JSON
/// payload), is one implementation that a wire's [`Lift::frames`] returns.
///
/// Each event is lent to `each` as soon as it is complete, so that a framing
/// can build the next one in the same buffers; the first error `each`
/// returns stops the framing and is returned.
pub trait Frames: fmt::Debug + Send + 'static {
    /// Frames `bytes`, the next piece of the body, lending each complete
    /// event to `each`.
    fn push(&mut self, bytes: &[u8], each: &mut EachEvent<'_>) -> Result<(), Error>;
    /// The body ended: lends what is held; a cut frame is an error.
    fn finish(&mut self, each: &mut EachEvent<'_>) -> Result<(), Error>;
    /// Sets the largest event; past it, framing fails with
    /// [`Error::LimitExceeded`].
    fn set_max_event_bytes(&mut self, limit: usize);
}

impl Frames for SseDecoder {
    fn push(&mut self, bytes: &[u8], each: &mut EachEvent<'_>) -> Result<(), Error> {
        self.push_each(bytes, each)
    }

    fn finish(&mut self, each: &mut EachEvent<'_>) -> Result<(), Error> {
        self.finish_each(each)
    }

    fn set_max_event_bytes(&mut self, limit: usize) {
        *self = std::mem::take(self).with_max_event_bytes(limit);
    }
}

/// The start of a piece of a response that could not be read, for an error
/// message: at most 200 bytes, cut at a character boundary. For a [`Lift`]'s
/// errors (see [`parse`]).
///
/// ```
/// assert_eq!(lmstack::provider::body::excerpt(b"{oops"), "{oops");
/// ```
pub fn excerpt(data: &[u8]) -> String {
    let text = String::from_utf8_lossy(data);
    let end = floor_char_boundary(&text, 200);
    if end < text.len() {
        format!("{}…", &text[..end])
    } else {
        text.into_owned()
    }
}

/// Reads `data`, a piece of a response named `what` (`chunk 3`, `the body`),
/// as JSON of type `T`; when it is not, a [`TransportErrorKind::Malformed`]
/// error that says what was `expected`, why, and how the piece began.
///
/// ```
/// use lmstack::provider::body::parse;
/// let error = parse::<u32>("openai", b"{oops", "chunk 1", "a number").unwrap_err();
/// assert!(error.to_string().contains("chunk 1 is not a number ("), "{error}");
/// assert!(error.to_string().ends_with("): {oops"), "{error}");
/// ```
pub fn parse<'a, T: Deserialize<'a>>(
    provider: &'static str,
    data: &'a [u8],
    what: impl fmt::Display,
    expected: &str,
) -> Result<T, Error> {
    serde_json::from_slice(data).map_err(|error| not_read(provider, data, what, expected, &error))
}

/// [`parse`] for text (an SSE event's data): the same reading and errors,
/// without checking again that the text is UTF-8.
///
/// ```
/// use lmstack::provider::body::parse_text;
/// assert_eq!(parse_text::<u32>("openai", "7", "chunk 1", "a number").unwrap(), 7);
/// ```
pub fn parse_text<'a, T: Deserialize<'a>>(
    provider: &'static str,
    data: &'a str,
    what: impl fmt::Display,
    expected: &str,
) -> Result<T, Error> {
    serde_json::from_str(data)
        .map_err(|error| not_read(provider, data.as_bytes(), what, expected, &error))
}

/// The error of a piece `data` that [`parse`] could not read.
fn not_read(
    provider: &'static str,
    data: &[u8],
    what: impl fmt::Display,
    expected: &str,
    error: &serde_json::Error,
) -> Error {
    malformed(
        provider,
        format!("{what} is not {expected} ({error}): {}", excerpt(data)),
    )
}

/// A response that breaks its wire's rules:
/// [`TransportErrorKind::Malformed`], for a [`Lift`].
pub fn malformed(provider: &'static str, message: impl Into<String>) -> Error {
    TransportError::new(provider, TransportErrorKind::Malformed, message).into()
}

/// A stream that ended before its end: [`TransportErrorKind::Truncated`], for
/// a [`Lift`]'s [`finish`](Lift::finish).
pub fn truncated(provider: &'static str, message: impl Into<String>) -> Error {
    TransportError::new(provider, TransportErrorKind::Truncated, message).into()
}

/// Decodes a response body, streamed (SSE) or whole (JSON), into events
/// through a provider's [`Lift`]. Pure: bytes in, events out.
///
/// It holds the reply to its tool-call limit ([`with_max_tool_calls`](Self::with_max_tool_calls)),
/// whatever the wire: past it, [`Error::ToolCallLimit`], before the extra
/// call's first event is handed out.
///
/// ```
/// use bytes::Bytes;
/// use lmstack::provider::body::BodyDecoder;
/// use lmstack::provider::openai_chat::Lifter;
/// use lmstack::service::{Machine, Output};
/// use lmstack::{Joiner, Message};
///
/// let body = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n";
/// let mut decoder = BodyDecoder::sse(Lifter::new());
/// let mut events = Output::new();
/// for piece in body.chunks(3) {
///     decoder.push(Bytes::copy_from_slice(piece), &mut events).unwrap();
/// }
/// decoder.finish(&mut events).unwrap();
/// assert_eq!(Joiner::join(events.drain()), vec![Message::assistant("Hi")]);
/// ```
#[derive(Debug)]
pub struct BodyDecoder<L> {
    framing: Framing,
    lifter: L,
    /// The bytes taken so far, of any framing.
    read: usize,
    max_body_bytes: usize,
    counted: Counted,
    secrets: Secrets,
}

/// What a [`BodyDecoder`] holds the lifted events to: the tool-call limit and
/// the request's response format.
#[derive(Debug)]
struct Counted {
    /// How many tool calls the lifted events have started so far.
    calls: usize,
    max_tool_calls: usize,
    /// The check of the reply against the request's response format.
    check: Option<OutputCheck>,
}

#[derive(Debug)]
enum Framing {
    /// A stream, framed as the wire frames it.
    Stream(Box<dyn Frames>),
    /// The body so far (within the body limit).
    Json(Vec<u8>),
}

const STAGE: &str = "response body decoder";

/// Whether a response with this `Content-Type` is read as a stream, as
/// [`BodyDecoder::for_content_type`] reads it.
pub(crate) fn is_stream(content_type: Option<&str>, streaming: bool) -> bool {
    let content_type = content_type.unwrap_or("").to_ascii_lowercase();
    if content_type.starts_with("text/event-stream") {
        true
    } else {
        !content_type.starts_with("application/json") && streaming
    }
}

impl<L: Lift> BodyDecoder<L> {
    /// A decoder for a streamed body (`text/event-stream`), framed as the
    /// wire frames its streams ([`Lift::frames`]: SSE unless it brings its
    /// own).
    pub fn sse(lifter: L) -> Self {
        Self::new(Framing::Stream(L::frames()), lifter)
    }

    /// A decoder for a whole JSON body (`application/json`).
    pub fn json(lifter: L) -> Self {
        Self::new(Framing::Json(Vec::new()), lifter)
    }

    /// The decoder for a response with this `Content-Type`: a stream for
    /// `text/event-stream`, JSON for `application/json` (what a server sends for
    /// either mode when it ignores `stream`), else what was asked for (a
    /// stream of the wire's own framing, such as
    /// `application/vnd.amazon.eventstream`, when streaming).
    pub fn for_content_type(lifter: L, content_type: Option<&str>, streaming: bool) -> Self {
        match is_stream(content_type, streaming) {
            true => Self::sse(lifter),
            false => Self::json(lifter),
        }
    }

    /// Sets the limits: the largest SSE event, and the largest body, streamed
    /// or whole ([`DEFAULT_MAX_BODY_BYTES`] by default); past either, the
    /// decoder fails with [`Error::LimitExceeded`].
    pub fn with_limits(mut self, max_event_bytes: usize, max_body_bytes: usize) -> Self {
        if let Framing::Stream(frames) = &mut self.framing {
            frames.set_max_event_bytes(max_event_bytes);
        }
        self.max_body_bytes = max_body_bytes;
        self
    }

    /// Sets the most tool calls one reply may hold ([`DEFAULT_MAX_TOOL_CALLS`]
    /// by default; at most `u32::MAX`, the event model's numbering): one more
    /// is [`Error::ToolCallLimit`].
    pub fn with_max_tool_calls(mut self, limit: usize) -> Self {
        self.counted.max_tool_calls = limit.min(u32::MAX as usize);
        self
    }

    /// Sets the credentials scrubbed from the decoder's errors
    /// ([`Secrets::scrub_error`]): an error object inside a response, such as a
    /// stream's error event, may quote the request's key, as may a piece of a
    /// response that could not be read. None by default.
    pub fn with_secrets(mut self, secrets: Secrets) -> Self {
        self.secrets = secrets;
        self
    }

    /// Checks the reply against the request's response format: a final text
    /// that does not match it ends the reply with [`Error::InvalidOutput`]
    /// (after every event, so the caller sees what the model wrote).
    pub(crate) fn with_output_check(mut self, check: Option<OutputCheck>) -> Self {
        self.counted.check = check;
        self
    }

    fn new(framing: Framing, lifter: L) -> Self {
        BodyDecoder {
            framing,
            lifter,
            read: 0,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            counted: Counted {
                calls: 0,
                max_tool_calls: DEFAULT_MAX_TOOL_CALLS,
                check: None,
            },
            secrets: Secrets::new(),
        }
    }

    /// [`Machine::push`], before its errors are scrubbed.
    fn decode(&mut self, bytes: Bytes, out: &mut Output) -> Result<(), Error> {
        self.read = self.read.saturating_add(bytes.len());
        if self.read > self.max_body_bytes {
            return Err(Error::LimitExceeded {
                stage: STAGE,
                what: "the response body",
                limit: self.max_body_bytes,
            });
        }
        let (lifter, counted) = (&mut self.lifter, &mut self.counted);
        match &mut self.framing {
            Framing::Stream(frames) => frames.push(&bytes, &mut lift_each(lifter, counted, out)),
            Framing::Json(body) => {
                body.extend_from_slice(&bytes);
                Ok(())
            }
        }
    }

    /// [`Machine::finish`], before its errors are scrubbed.
    fn end(&mut self, out: &mut Output) -> Result<(), Error> {
        let (lifter, counted) = (&mut self.lifter, &mut self.counted);
        match &mut self.framing {
            Framing::Stream(frames) => frames.finish(&mut lift_each(lifter, counted, out))?,
            Framing::Json(body) => {
                let body = std::mem::take(body);
                let start = out.len();
                let lifted = lifter.body(&body, out);
                counted.count::<L>(out, start, lifted)?;
            }
        }
        let start = out.len();
        let lifted = self.lifter.finish(out);
        self.counted.count::<L>(out, start, lifted)?;
        match &mut self.counted.check {
            Some(check) => check.verdict(L::PROVIDER).map(drop),
            None => Ok(()),
        }
    }
}

/// Lifts each event a framing lends, and counts what it gives.
fn lift_each<'a, L: Lift>(
    lifter: &'a mut L,
    counted: &'a mut Counted,
    out: &'a mut Output,
) -> impl FnMut(&SseEvent) -> Result<(), Error> + 'a {
    move |event| {
        let start = out.len();
        let lifted = lifter.event(event, out);
        counted.count::<L>(out, start, lifted)
    }
}

impl Counted {
    /// Counts the calls started by the events the lifter put in `out` from
    /// `start` on (a lifter numbers its calls 0, 1, … in the order they
    /// start); the first event past the limit, and those after it, are taken
    /// back and the limit is the error. Else the lifter's own outcome.
    fn count<L: Lift>(
        &mut self,
        out: &mut Output,
        start: usize,
        lifted: Result<(), Error>,
    ) -> Result<(), Error> {
        let mut over = None;
        for (at, event) in (start..).zip(out.iter_from(start)) {
            if let Some(check) = &mut self.check {
                check.see(event);
            }
            let calls = match event {
                Event::ToolCallDelta(delta) => self.calls.max(delta.index as usize + 1),
                Event::Message { message } => self.calls + message.calls().len(),
                _ => continue,
            };
            if calls > self.max_tool_calls {
                over = Some(at);
                break;
            }
            self.calls = calls;
        }
        match over {
            Some(at) => {
                out.truncate(at);
                Err(Error::ToolCallLimit {
                    stage: L::PROVIDER,
                    limit: self.max_tool_calls,
                })
            }
            None => lifted,
        }
    }
}

impl<L: Lift> Machine for BodyDecoder<L> {
    type In = Bytes;
    type Out = Event;

    fn push(&mut self, bytes: Bytes, out: &mut Output) -> Result<(), Error> {
        self.decode(bytes, out)
            .map_err(|error| self.secrets.scrub_error(error))
    }

    fn finish(&mut self, out: &mut Output) -> Result<(), Error> {
        self.end(out)
            .map_err(|error| self.secrets.scrub_error(error))
    }
}

/// A token count at the JSON pointer `path` of a usage object, read leniently:
/// a value that is not a non-negative number (a string, say) counts as absent;
/// a float counts as its whole part (`12.0` is 12). For a [`Lift`]'s usage.
///
/// ```
/// use lmstack::provider::body::token_count;
/// let usage = serde_json::json!({"input": 12.0, "output": "7"});
/// assert_eq!(token_count(&usage, "/input"), Some(12));
/// assert_eq!(token_count(&usage, "/output"), None);
/// ```
pub fn token_count(usage: &Value, path: &str) -> Option<u64> {
    let value = member(usage, path)?;
    value.as_u64().or_else(|| {
        value
            .as_f64()
            .filter(|n| n.is_finite() && *n >= 0.0)
            .map(|n| n as u64)
    })
}

/// The value at the JSON pointer `path` in `value`, as [`Value::pointer`]
/// finds it, but without the copy of each segment that `pointer` makes to
/// unescape it (a request's usage is read on every reply): objects are walked
/// by their keys, and a path with escapes (`~`) or through an array is left
/// to `pointer`.
fn member<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    let Some(segments) = path.strip_prefix('/').filter(|_| !path.contains('~')) else {
        return value.pointer(path);
    };
    let mut at = value;
    for segment in segments.split('/') {
        at = match at {
            Value::Object(members) => members.get(segment)?,
            Value::Array(_) => return value.pointer(path),
            _ => return None,
        };
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Joiner, Message};

    #[test]
    fn members_are_found_as_a_json_pointer_finds_them() {
        let value = serde_json::json!({
            "a": {"b": 1, "c/d": 2, "e~f": 3, "": 4},
            "l": [{"x": 5}],
            "n": null
        });
        let paths = [
            "", "/", "/a", "/a/b", "/a/b/c", "/a/c~1d", "/a/e~0f", "/a/", "/l/0/x", "/l/1",
            "/l/01", "/n", "/n/x", "a", "/missing",
        ];
        for path in paths {
            assert_eq!(member(&value, path), value.pointer(path), "{path}");
        }
    }

    /// A framing of its own: each event is one length byte, then its data.
    #[derive(Debug, Default)]
    struct LengthPrefixed {
        held: Vec<u8>,
        max: usize,
    }

    impl Frames for LengthPrefixed {
        fn push(&mut self, bytes: &[u8], each: &mut EachEvent<'_>) -> Result<(), Error> {
            self.held.extend_from_slice(bytes);
            while let Some(&len) = self.held.first() {
                let len = usize::from(len);
                if len > self.max {
                    return Err(Error::LimitExceeded {
                        stage: "test",
                        what: "an event",
                        limit: self.max,
                    });
                }
                if self.held.len() <= len {
                    break;
                }
                let frame: Vec<u8> = self.held.drain(..=len).skip(1).collect();
                each(&SseEvent {
                    event: None,
                    data: String::from_utf8_lossy(&frame).into_owned(),
                    ..SseEvent::default()
                })?;
            }
            Ok(())
        }

        fn finish(&mut self, _each: &mut EachEvent<'_>) -> Result<(), Error> {
            match self.held.is_empty() {
                true => Ok(()),
                false => Err(truncated("test", "a frame was cut")),
            }
        }

        fn set_max_event_bytes(&mut self, limit: usize) {
            self.max = limit;
        }
    }

    /// Each event's data is assistant text.
    #[derive(Default)]
    struct Texts;

    impl Lift for Texts {
        const PROVIDER: &'static str = "test";

        fn frames() -> Box<dyn Frames> {
            Box::new(LengthPrefixed::default())
        }

        fn event(&mut self, event: &SseEvent, out: &mut Output) -> Result<(), Error> {
            out.push(Event::text(event.data.as_str()));
            Ok(())
        }

        fn body(&mut self, _body: &[u8], _out: &mut Output) -> Result<(), Error> {
            Ok(())
        }

        fn finish(&mut self, _out: &mut Output) -> Result<(), Error> {
            Ok(())
        }
    }

    fn decode(body: &[u8], piece: usize, max_event: usize) -> Result<Vec<Message>, Error> {
        let mut decoder =
            BodyDecoder::for_content_type(Texts, Some("application/vnd.amazon.eventstream"), true)
                .with_limits(max_event, DEFAULT_MAX_BODY_BYTES);
        let mut events = Output::new();
        for piece in body.chunks(piece) {
            decoder.push(Bytes::copy_from_slice(piece), &mut events)?;
        }
        decoder.finish(&mut events)?;
        Ok(Joiner::join(events.drain()))
    }

    #[test]
    fn a_wire_brings_its_own_framing_with_the_decoders_limits() {
        let body = b"\x03Hel\x02lo";
        for piece in 1..=body.len() {
            assert_eq!(
                decode(body, piece, 16).unwrap(),
                vec![Message::assistant("Hello")]
            );
        }
        let cut = decode(&body[..5], 1, 16).unwrap_err().to_string();
        assert!(cut.contains("a frame was cut"), "{cut}");
        let big = decode(body, 1, 2).unwrap_err();
        assert!(
            matches!(big, Error::LimitExceeded { limit: 2, .. }),
            "{big}"
        );
    }
}

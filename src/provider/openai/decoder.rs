//! The response body decoder: SSE or JSON bytes → events, through the one
//! [`Lifter`].

use super::Lifter;
use crate::provider::decode::Decode;
use crate::provider::sse::{SseDecoder, SseEvent};
use crate::{Error, Event};

/// The default limit on a non-streaming body: 64 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 << 20;

/// Decodes a Chat Completions response body, streamed (SSE) or whole (JSON),
/// into events. Pure; both forms go through the same [`Lifter`].
///
/// ```
/// use lmstack::provider::decode::Decode;
/// use lmstack::provider::openai::ResponseDecoder;
/// use lmstack::{Joiner, Message};
///
/// let body = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n";
/// let mut decoder = ResponseDecoder::sse();
/// let mut events = Vec::new();
/// for byte in body.chunks(3) {
///     decoder.push(byte, &mut events).unwrap();
/// }
/// decoder.finish(&mut events).unwrap();
/// assert_eq!(Joiner::join(events), vec![Message::assistant("Hi")]);
/// ```
#[derive(Debug)]
pub struct ResponseDecoder {
    format: Format,
    lifter: Lifter,
    events: Vec<SseEvent>,
}

#[derive(Debug)]
enum Format {
    Sse(SseDecoder),
    Json { body: Vec<u8>, limit: usize },
}

impl ResponseDecoder {
    /// A decoder for a streamed body (`text/event-stream`).
    pub fn sse() -> Self {
        Self::new(Format::Sse(SseDecoder::new()))
    }

    /// A decoder for a whole JSON body (`application/json`).
    pub fn json() -> Self {
        Self::new(Format::Json {
            body: Vec::new(),
            limit: DEFAULT_MAX_BODY_BYTES,
        })
    }

    /// The decoder for a response with this `Content-Type`: SSE for
    /// `text/event-stream`, JSON for `application/json` (what a server sends for
    /// either mode when it ignores `stream`), else what was asked for.
    pub fn for_content_type(content_type: Option<&str>, streaming: bool) -> Self {
        let content_type = content_type.unwrap_or("").to_ascii_lowercase();
        if content_type.starts_with("text/event-stream") {
            Self::sse()
        } else if content_type.starts_with("application/json") || !streaming {
            Self::json()
        } else {
            Self::sse()
        }
    }

    /// Sets the limits: the largest SSE event, and the largest JSON body.
    pub fn with_limits(mut self, max_event_bytes: usize, max_body_bytes: usize) -> Self {
        self.format = match self.format {
            Format::Sse(_) => Format::Sse(SseDecoder::new().with_max_event_bytes(max_event_bytes)),
            Format::Json { body, .. } => Format::Json {
                body,
                limit: max_body_bytes,
            },
        };
        self
    }

    fn new(format: Format) -> Self {
        ResponseDecoder {
            format,
            lifter: Lifter::new(),
            events: Vec::new(),
        }
    }

    fn lift_events(&mut self, out: &mut Vec<Event>) -> Result<(), Error> {
        for event in self.events.drain(..) {
            if event.is_done() {
                self.lifter.push_done();
            } else {
                self.lifter.push_chunk(event.data.as_bytes(), out)?;
            }
        }
        Ok(())
    }
}

impl Default for ResponseDecoder {
    fn default() -> Self {
        Self::sse()
    }
}

impl Decode for ResponseDecoder {
    fn push(&mut self, bytes: &[u8], out: &mut Vec<Event>) -> Result<(), Error> {
        match &mut self.format {
            Format::Sse(sse) => sse.push(bytes, &mut self.events)?,
            Format::Json { body, limit } => {
                if body.len() + bytes.len() > *limit {
                    return Err(Error::LimitExceeded {
                        stage: "openai response decoder",
                        what: "the response body",
                        limit: *limit,
                    });
                }
                body.extend_from_slice(bytes);
            }
        }
        self.lift_events(out)
    }

    fn finish(&mut self, out: &mut Vec<Event>) -> Result<(), Error> {
        match &mut self.format {
            Format::Sse(sse) => {
                sse.finish(&mut self.events)?;
                self.lift_events(out)?;
            }
            Format::Json { body, .. } => {
                let body = std::mem::take(body);
                self.lifter.push_body(&body, out)?;
            }
        }
        self.lifter.finish(out)
    }
}

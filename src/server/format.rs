//! The wire formats the gateway serves, each through its provider's server
//! codecs: one small trait, so that the handler is written once.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::HeaderMap;
use bytes::Bytes;
use serde_json::Value;

#[cfg(feature = "openai-responses")]
use crate::provider::openai_responses;
use crate::provider::{Kind, anthropic, openai_chat};
use crate::service::Machine;
use crate::{ChatRequest, Error, Event};

/// How a request of a served route is read: its body, and the headers that
/// carry part of it.
pub(crate) trait Decode: Send + Sync + 'static {
    /// Its wire (named in metrics and logs).
    const KIND: Kind;

    /// A client's request body → the canonical request.
    fn decode(body: &[u8]) -> Result<ChatRequest, Error>;

    /// What the client's headers add to its decoded `request` (none by
    /// default).
    fn decode_headers(_headers: &HeaderMap, _request: &mut ChatRequest) {}

    /// The model a request body names, read without decoding the rest (so
    /// that the model's place is taken before the body is decoded); `None`
    /// when it cannot be read so, and [`decode`](Self::decode) will say why.
    fn model(body: &[u8]) -> Option<String> {
        #[derive(serde::Deserialize)]
        struct Named {
            model: String,
        }
        serde_json::from_slice::<Named>(body)
            .ok()
            .map(|named| named.model)
    }
}

/// A wire format served: how a request is read, a reply and an error written.
pub(crate) trait Format: Decode {
    /// A frame that keeps a silent stream open, which clients skip.
    const KEEP_ALIVE: &'static [u8];
    /// Whether a request of this format may be forwarded as it came to an
    /// upstream of its wire (the same-wire fast path: `super::forward`): the
    /// format is the upstream's own, framed as the upstream frames it.
    const FORWARDS: bool = false;
    /// The machine that writes a reply.
    type Encoder: Machine<In = Result<Event, Error>, Out = Bytes>;

    /// The encoder of the reply to `request`, answered by `model` at `now`.
    fn encoder(request: &ChatRequest, model: &str, now: SystemTime) -> Self::Encoder;

    /// The status of the reply (200, or that of the error it wrote).
    fn status(encoder: &Self::Encoder) -> u16;

    /// The reply's `Content-Type`.
    fn content_type(encoder: &Self::Encoder) -> &'static str;

    /// An error answer: its status and body.
    fn error(error: &Error) -> (u16, Value);
}

/// OpenAI Chat Completions (`POST /v1/chat/completions`).
pub(crate) struct ChatCompletions;

impl Decode for ChatCompletions {
    const KIND: Kind = Kind::OpenAiChat;

    fn decode(body: &[u8]) -> Result<ChatRequest, Error> {
        openai_chat::decode_request(body)
    }
}

impl Format for ChatCompletions {
    const KEEP_ALIVE: &'static [u8] = b": keep-alive\n\n";
    const FORWARDS: bool = true;
    type Encoder = openai_chat::ReplyEncoder;

    fn encoder(request: &ChatRequest, model: &str, now: SystemTime) -> openai_chat::ReplyEncoder {
        let created = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let id = format!("chatcmpl-{:016x}", fastrand::u64(..));
        let encoder = openai_chat::ReplyEncoder::new(id, created, model);
        if request.options.stream {
            encoder.streaming(openai_chat::include_usage(request))
        } else {
            encoder
        }
    }

    fn status(encoder: &openai_chat::ReplyEncoder) -> u16 {
        encoder.status()
    }

    fn content_type(encoder: &openai_chat::ReplyEncoder) -> &'static str {
        encoder.content_type()
    }

    fn error(error: &Error) -> (u16, Value) {
        openai_chat::error_body(error)
    }
}

/// Anthropic Messages (`POST /v1/messages`): the beta flags of its
/// `anthropic-beta` headers go in `options.extra`
/// ([`BETA_KEY`](anthropic::BETA_KEY)).
pub(crate) struct Messages;

impl Decode for Messages {
    const KIND: Kind = Kind::Anthropic;

    fn decode(body: &[u8]) -> Result<ChatRequest, Error> {
        anthropic::decode_request(body)
    }

    fn decode_headers(headers: &HeaderMap, request: &mut ChatRequest) {
        anthropic::decode_headers(headers, &mut request.options.extra);
    }
}

/// Anthropic's token count (`POST /v1/messages/count_tokens`): a Messages
/// request without `max_tokens`, read as [`Messages`] reads one; answered in
/// its format.
pub(crate) struct MessagesCount;

impl Decode for MessagesCount {
    const KIND: Kind = Kind::Anthropic;

    fn decode(body: &[u8]) -> Result<ChatRequest, Error> {
        anthropic::decode_count_request(body)
    }

    fn decode_headers(headers: &HeaderMap, request: &mut ChatRequest) {
        Messages::decode_headers(headers, request);
    }
}

impl Format for Messages {
    const KEEP_ALIVE: &'static [u8] = b"event: ping\ndata: {\"type\": \"ping\"}\n\n";
    const FORWARDS: bool = true;
    type Encoder = anthropic::ReplyEncoder;

    fn encoder(request: &ChatRequest, model: &str, _now: SystemTime) -> anthropic::ReplyEncoder {
        let id = format!("msg_{:016x}{:08x}", fastrand::u64(..), fastrand::u32(..));
        anthropic::ReplyEncoder::new(id, model, request.options.stream)
    }

    fn status(encoder: &anthropic::ReplyEncoder) -> u16 {
        encoder.status()
    }

    fn content_type(encoder: &anthropic::ReplyEncoder) -> &'static str {
        encoder.content_type()
    }

    fn error(error: &Error) -> (u16, Value) {
        anthropic::error_body(error)
    }
}

/// OpenAI Responses (`POST /v1/responses`).
#[cfg(feature = "openai-responses")]
pub(crate) struct Responses;

#[cfg(feature = "openai-responses")]
impl Decode for Responses {
    const KIND: Kind = Kind::OpenAiResponses;

    fn decode(body: &[u8]) -> Result<ChatRequest, Error> {
        openai_responses::decode_request(body)
    }
}

#[cfg(feature = "openai-responses")]
impl Format for Responses {
    const KEEP_ALIVE: &'static [u8] = b": keep-alive\n\n";
    type Encoder = openai_responses::ReplyEncoder;

    fn encoder(request: &ChatRequest, model: &str, now: SystemTime) -> Self::Encoder {
        let created = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let id = format!("resp_{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
        openai_responses::ReplyEncoder::new(id, created, model, request)
    }

    fn status(encoder: &Self::Encoder) -> u16 {
        encoder.status()
    }

    fn content_type(encoder: &Self::Encoder) -> &'static str {
        encoder.content_type()
    }

    fn error(error: &Error) -> (u16, Value) {
        openai_responses::error_body(error)
    }
}

/// Gemini's `generateContent` (`POST /v1beta/models/{model}:generateContent`,
/// and `:streamGenerateContent?alt=sse`): the model and the mode come from
/// the path, the body is read by [`gemini::decode_request`]. Its keep-alive
/// is an empty response (`data: {}`), which clients skip as one without
/// candidates: Google's SDKs read an SSE comment as the start of an event
/// that never ends.
#[cfg(feature = "gemini")]
pub(crate) struct GenerateContent;

/// [`GenerateContent`] streamed as a JSON array (`:streamGenerateContent`
/// without `alt=sse`), kept alive with whitespace between its elements.
#[cfg(feature = "gemini")]
pub(crate) struct GenerateContentArray;

/// Gemini's token count (`POST /v1beta/models/{model}:countTokens`), read by
/// [`gemini::decode_count_request`]; answered in Gemini's format.
#[cfg(feature = "gemini")]
pub(crate) struct CountTokens;

#[cfg(feature = "gemini")]
mod gemini_formats {
    use super::*;
    use crate::provider::gemini::{self, ReplyEncoder, StreamMode};

    /// A Gemini route's model is its path's: the body names none.
    macro_rules! gemini_decode {
        ($format:ty, $decode:path) => {
            impl Decode for $format {
                const KIND: Kind = Kind::Gemini;

                fn decode(body: &[u8]) -> Result<ChatRequest, Error> {
                    $decode(body, "")
                }

                fn model(_body: &[u8]) -> Option<String> {
                    None
                }
            }
        };
    }

    gemini_decode!(GenerateContent, gemini::decode_request);
    gemini_decode!(GenerateContentArray, gemini::decode_request);
    gemini_decode!(CountTokens, gemini::decode_count_request);

    /// A response id, as Gemini's look.
    fn response_id() -> String {
        format!("{:016x}{:08x}", fastrand::u64(..), fastrand::u32(..))
    }

    impl Format for GenerateContent {
        const KEEP_ALIVE: &'static [u8] = b"data: {}\n\n";
        const FORWARDS: bool = true;
        type Encoder = ReplyEncoder;

        fn encoder(request: &ChatRequest, model: &str, _now: SystemTime) -> ReplyEncoder {
            let mode = match request.options.stream {
                true => StreamMode::Sse,
                false => StreamMode::Whole,
            };
            ReplyEncoder::new(response_id(), model, mode)
        }

        fn status(encoder: &ReplyEncoder) -> u16 {
            encoder.status()
        }

        fn content_type(encoder: &ReplyEncoder) -> &'static str {
            encoder.content_type()
        }

        fn error(error: &Error) -> (u16, Value) {
            gemini::error_body(error)
        }
    }

    impl Format for GenerateContentArray {
        const KEEP_ALIVE: &'static [u8] = b"\n";
        type Encoder = ReplyEncoder;

        fn encoder(_request: &ChatRequest, model: &str, _now: SystemTime) -> ReplyEncoder {
            ReplyEncoder::new(response_id(), model, StreamMode::JsonArray)
        }

        fn status(encoder: &ReplyEncoder) -> u16 {
            encoder.status()
        }

        fn content_type(encoder: &ReplyEncoder) -> &'static str {
            encoder.content_type()
        }

        fn error(error: &Error) -> (u16, Value) {
            gemini::error_body(error)
        }
    }
}

//! The wire formats the gateway serves, each through its provider's server
//! codecs: one small trait, so that the handler is written once.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde_json::Value;

use crate::provider::{Kind, anthropic, openai_chat};
use crate::service::Machine;
use crate::{ChatRequest, Error, Event};

/// A wire format served: how a request is read, a reply and an error written.
pub(crate) trait Format: Send + Sync + 'static {
    /// Its wire (named in metrics and logs).
    const KIND: Kind;
    /// A frame that keeps a silent stream open, which clients skip.
    const KEEP_ALIVE: &'static [u8];
    /// The machine that writes a reply.
    type Encoder: Machine<In = Result<Event, Error>, Out = Bytes>;

    /// A client's request body → the canonical request.
    fn decode(body: &[u8]) -> Result<ChatRequest, Error>;

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

impl Format for ChatCompletions {
    const KIND: Kind = Kind::OpenAiChat;
    const KEEP_ALIVE: &'static [u8] = b": keep-alive\n\n";
    type Encoder = openai_chat::ReplyEncoder;

    fn decode(body: &[u8]) -> Result<ChatRequest, Error> {
        openai_chat::decode_request(body)
    }

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

/// Anthropic Messages (`POST /v1/messages`).
pub(crate) struct Messages;

impl Format for Messages {
    const KIND: Kind = Kind::Anthropic;
    const KEEP_ALIVE: &'static [u8] = b"event: ping\ndata: {\"type\": \"ping\"}\n\n";
    type Encoder = anthropic::ReplyEncoder;

    fn decode(body: &[u8]) -> Result<ChatRequest, Error> {
        anthropic::decode_request(body)
    }

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

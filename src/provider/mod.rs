//! Providers: the wire layer and the adapters built on it.
//!
//! The wire layer is shared by every provider:
//!
//! - [`sse`]: a server-sent events decoder, a pure state machine;
//! - [`transport`]: the HTTP transport, a tower service on `reqwest` with rustls,
//!   connect and read timeouts (feature `http`);
//! - [`body`]: the body decoder every provider shares — SSE or JSON framing,
//!   with limits, around the provider's own [`Lift`](body::Lift) (feature
//!   `http`);
//! - [`ProviderError`] and [`TransportError`]: what went wrong, and where (read
//!   from an [`Error`](crate::Error) with `provider_error()` and
//!   `transport_error()`);
//! - [`ApiKey`]: a key from the environment or configuration that never prints;
//!   [`redact_url`]: a URL as errors, logs and `Debug` output show it, without
//!   the user-info, query and fragment that may hold credentials; [`Secrets`]:
//!   credentials scrubbed from any text, such as an upstream's error message
//!   that quotes the key it refused.
//!
//! - [`Provider`]: the one HTTP provider service, generic over a [`Wire`] — a
//!   provider's endpoint, auth header, lowering and lifter — with the settings
//!   every provider shares in a [`ProviderConfig`] (feature `http`); it also
//!   counts a request's input tokens where its wire can ([`TokenCounter`]).
//!
//! Each adapter is then one folder: a pure lowering (canonical request → wire
//! request), a pure lifting (wire response → canonical events) and its `Wire`:
//!
//! - [`openai_chat`]: OpenAI Chat Completions and compatible servers — vLLM, llama.cpp,
//!   Ollama, GLM (Z.AI), Groq (feature `openai`);
//! - [`openai_responses`]: OpenAI Responses (feature `openai-responses`);
//! - [`anthropic`]: Anthropic Messages (feature `anthropic`).
//! - [`gemini`]: Google Gemini's `generateContent` (feature `gemini`).
//!
//! Chosen at run time, by a [`Kind`]: [`AnyProvider`] holds the provider of
//! any wire built in, [`Kind::with_wire`] runs work written once for every
//! wire (a [`WithWire`]) over the one it names (`lmstack::config::ModelConfig`
//! builds either from a configuration).

#[cfg(any(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic",
    feature = "gemini"
))]
pub(crate) mod any;
mod error;
#[cfg(any(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic",
    feature = "gemini"
))]
mod history;
mod key;
mod kind;
pub mod media;
#[cfg(feature = "server")]
pub(crate) mod portable;
mod redact;
#[cfg(any(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic",
    feature = "gemini"
))]
mod reply_encoding;
pub(crate) mod sealed;
pub mod sse;

#[cfg(feature = "anthropic")]
pub mod anthropic;
#[cfg(feature = "http")]
pub mod body;
#[cfg(any(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic"
))]
mod call_order;
#[cfg(feature = "http")]
mod config;
#[cfg(feature = "http")]
mod counter;
#[cfg(feature = "gemini")]
pub mod gemini;
#[cfg(feature = "openai")]
pub mod openai_chat;
#[cfg(feature = "openai-responses")]
pub mod openai_responses;
#[cfg(any(feature = "openai", feature = "openai-responses"))]
mod openai_shared;
#[cfg(any(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic",
    feature = "gemini"
))]
pub(crate) mod server_tool;
#[cfg(feature = "http")]
mod service;
#[cfg(any(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic"
))]
mod text_or_list;
#[cfg(feature = "http")]
pub(crate) mod traced;
#[cfg(feature = "http")]
pub mod transport;
#[cfg(feature = "http")]
mod unanswered;
#[cfg(feature = "http")]
pub mod wire;
#[cfg(any(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic",
    feature = "gemini"
))]
mod wire_extra;

#[cfg(any(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic",
    feature = "gemini"
))]
pub use any::{AnyFuture, AnyProvider, Lowering, WithWire};
pub use error::{ProviderError, TransportError, TransportErrorKind};
pub use key::ApiKey;
pub use kind::Kind;
pub use media::ToolResultMedia;
pub use redact::{REDACTED, Secrets, redact_url};
#[cfg(any(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic",
    feature = "gemini"
))]
pub use reply_encoding::EncodeReply;
#[cfg(feature = "http")]
pub use {
    config::ProviderConfig, counter::TokenCounter, service::Provider, service::ReadBody,
    traced::Traced, wire::CountRequest, wire::Wire,
};

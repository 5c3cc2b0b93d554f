//! OpenAI Chat Completions, and the servers that speak it: vLLM, llama.cpp,
//! Ollama, GLM (Z.AI), Groq and others, each by its base URL.
//!
//! Four parts, the first three pure, all on one typed wire ([`types`]):
//!
//! - [`lower`]: a canonical [`ChatRequest`] → the request body
//!   ([`LowerOptions`] says how to write what servers spell differently:
//!   images in tool results, reasoning echo, the token limit's field);
//! - [`Lifter`]: the response, streamed (SSE chunks) or whole (JSON), →
//!   canonical events, through the same code in both modes (framed by the
//!   shared [`BodyDecoder`](super::body::BodyDecoder));
//! - the server direction, the inverse of the two: [`decode_request`] (a
//!   client's request body → a canonical request), the reply [`ReplyEncoder`]
//!   (canonical events → SSE chunks or one `chat.completion` body),
//!   [`error_body`] and [`models_body`];
//! - [`ChatCompletions`]: the [`Wire`] that gives them to the shared
//!   [`Provider`] service; [`OpenAi`] and [`OpenAiConfig`] name it over this wire.
//!
//! ```no_run
//! use lmstack::provider::openai_chat::{OpenAi, OpenAiConfig};
//! use lmstack::retry::RetryLayer;
//! use lmstack::{ChatRequest, Message};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # async fn run() -> Result<(), lmstack::Error> {
//! // A local llama.cpp or vLLM server; `OpenAiConfig::openai()` reads OPENAI_API_KEY.
//! let config = OpenAiConfig::new("http://127.0.0.1:8080/v1").model("local");
//! let model = ServiceBuilder::new()
//!     .layer(RetryLayer::default())
//!     .service(OpenAi::new(config)?);
//! let request = ChatRequest::new(vec![Message::user("What is 2 + 3?")]).streaming(true);
//! let messages = model.oneshot(request).await?.collect().await?;
//! println!("{messages:?}");
//! # Ok(()) }
//! ```

pub mod annotation;
mod decode;
mod encode;
mod lift;
mod lower;
#[cfg(feature = "server")]
pub(crate) mod portable;
mod response_format;
mod server_tool;
pub mod types;

/// The media policy every provider shares, here for the paths written before it was.
pub use super::media::ToolResultMedia;
pub use decode::decode_request;
pub use encode::{ReplyEncoder, error_body, include_usage, model_body, models_body};
pub use lift::Lifter;
pub use lower::{
    DEVELOPER_KEY, EXTRA_KEY, LowerOptions, MESSAGE_KEY, MaxTokensField, PARTS_KEY,
    REASONING_FIELD_KEY, REFUSAL_KEY, ReasoningEcho, lower, lower_request,
};

use serde_json::Value;

use super::config::ProviderConfig;
use super::kind::Kind;
use super::service::Provider;
use super::transport::HttpTransport;
use super::wire::Wire;
use crate::{ChatRequest, Error};

/// The Chat Completions wire (`POST {base_url}/chat/completions`, the key as
/// `Authorization: Bearer`), with its options: how requests are written.
#[derive(Clone, Debug, Default)]
pub struct ChatCompletions {
    /// How requests are written (see [`LowerOptions`]).
    pub lowering: LowerOptions,
}

impl Wire for ChatCompletions {
    const KIND: Kind = Kind::OpenAiChat;
    const KEY_ENV: &'static str = "OPENAI_API_KEY";
    const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";
    type Lifter = Lifter;

    fn path(&self, _request: &ChatRequest) -> String {
        "/chat/completions".into()
    }

    fn lower(&self, request: &ChatRequest) -> Result<Value, Error> {
        lower(request, &self.lowering)
    }
}

/// The configuration of an [`OpenAi`] provider: the shared settings, and the
/// wire's [`LowerOptions`] in `wire.lowering`.
pub type OpenAiConfig = ProviderConfig<ChatCompletions>;

/// The Chat Completions provider: the shared [`Provider`] over the
/// [`ChatCompletions`] wire.
pub type OpenAi<T = HttpTransport> = Provider<ChatCompletions, T>;

impl ProviderConfig<ChatCompletions> {
    /// api.openai.com, with the key in `OPENAI_API_KEY`, `max_completion_tokens`
    /// for the token limit.
    pub fn openai() -> Result<Self, Error> {
        let mut config = Self::hosted()?;
        config.wire.lowering.max_tokens_field = MaxTokensField::MaxCompletionTokens;
        Ok(config)
    }

    /// Sets how requests are written.
    pub fn lowering(mut self, lowering: LowerOptions) -> Self {
        self.wire.lowering = lowering;
        self
    }

    /// Sets the policy for images and documents in tool results.
    pub fn tool_result_media(mut self, policy: ToolResultMedia) -> Self {
        self.wire.lowering.tool_result_media = policy;
        self
    }
}

//! Anthropic Messages (`POST {base_url}/messages`).
//!
//! The wire is written once, as typed serde structs ([`types`]), for both
//! directions. As a client, three parts, the first two pure:
//!
//! - [`lower`] / [`lower_request`]: a canonical [`ChatRequest`] → the request
//!   body ([`LowerOptions`]: the default `max_tokens`, the policy for images in
//!   tool results);
//! - [`Lifter`]: the response, streamed (SSE events) or whole (JSON), →
//!   canonical events, through the same code in both modes;
//! - [`Messages`]: the [`Wire`] that gives them to the shared [`Provider`]
//!   service; [`Anthropic`] and [`AnthropicConfig`] name it over this wire.
//!
//! As a server (a gateway answering Messages clients), pure as well:
//! [`decode_request`] (a client's body → a canonical request), [`ReplyEncoder`]
//! (canonical events → the SSE stream or one `message` body) and
//! [`error_body`] (an error → its status and error body); see `docs/serve.md`.
//!
//! ```no_run
//! use lmstack::provider::anthropic::{Anthropic, AnthropicConfig};
//! use lmstack::retry::RetryLayer;
//! use lmstack::{ChatRequest, Message};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # async fn run() -> Result<(), lmstack::Error> {
//! // api.anthropic.com, with the key in ANTHROPIC_API_KEY.
//! let config = AnthropicConfig::anthropic()?.model("claude-sonnet-4-5");
//! let model = ServiceBuilder::new()
//!     .layer(RetryLayer::default())
//!     .service(Anthropic::new(config)?);
//! let request = ChatRequest::new(vec![Message::user("What is 2 + 3?")]).streaming(true);
//! let messages = model.oneshot(request).await?.collect().await?;
//! println!("{messages:?}");
//! # Ok(()) }
//! ```

mod beta;
mod cache;
pub mod citation;
mod count;
mod decode;
mod encode;
mod lift;
mod lower;
mod output_format;
#[cfg(feature = "server")]
pub(crate) mod portable;
mod server_tool;
pub mod types;

pub use beta::BETA_KEY;
#[cfg(feature = "server")]
pub(crate) use beta::decode_headers;
pub use count::{lift_count, lower_count};
pub use decode::{decode_count_request, decode_request};
pub use encode::{ReplyEncoder, error_body, model_body, models_body};
pub use lift::{CACHE_CREATION_KEY, Lifter, MESSAGE_DELTA_KEY, MESSAGE_START_KEY};
pub use lower::{
    BLOCK_KEY, BLOCKS_KEY, DEFAULT_MAX_TOKENS, EXTRA_KEY, LowerOptions, MESSAGE_KEY,
    TOOL_CHOICE_KEY, lower, lower_request,
};
pub use server_tool::{CODE_EXECUTION_BETA, CODE_EXECUTION_TYPE, WEB_SEARCH_TYPE};

use ::http::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use super::config::ProviderConfig;
use super::kind::Kind;
use super::media::ToolResultMedia;
use super::service::Provider;
use super::transport::HttpTransport;
use super::wire::{CountRequest, Wire};
use crate::{ChatRequest, Error};

/// The API version every request names (`anthropic-version`): the one its
/// lowering and lifting are written for. A configuration's own
/// `anthropic-version` header wins over it; a gateway's client's does not
/// (the upstream's answer is read by this wire's lifter, not by the client).
pub const API_VERSION: &str = "2023-06-01";

/// The Messages wire (`POST {base_url}/messages`, the key in `x-api-key`,
/// `anthropic-version: 2023-06-01`, the beta flags of a request's
/// [`BETA_KEY`] in `anthropic-beta`; token counts at `/messages/count_tokens`),
/// with its options: how requests are written.
#[derive(Clone, Debug, Default)]
pub struct Messages {
    /// How requests are written (see [`LowerOptions`]).
    pub lowering: LowerOptions,
}

impl Wire for Messages {
    const KIND: Kind = Kind::Anthropic;
    const KEY_ENV: &'static str = "ANTHROPIC_API_KEY";
    const DEFAULT_BASE_URL: &'static str = "https://api.anthropic.com/v1";
    const KEY_HEADER: Option<&'static str> = Some("x-api-key");
    const NEEDS_MODEL: bool = true;
    type Lifter = Lifter;

    fn path(&self, _request: &ChatRequest) -> String {
        "/messages".into()
    }

    fn headers(&self, request: &ChatRequest, headers: &mut HeaderMap) -> Result<(), Error> {
        headers
            .entry(HeaderName::from_static("anthropic-version"))
            .or_insert(HeaderValue::from_static(API_VERSION));
        let needed = server_tool::needs_code_execution_beta(&request.options.server_tools)
            .then_some(server_tool::CODE_EXECUTION_BETA);
        beta::write_header(&request.options.extra, needed, headers)
    }

    fn lower(&self, request: &ChatRequest) -> Result<Value, Error> {
        lower(request, &self.lowering)
    }

    fn lower_count(&self, request: &ChatRequest) -> Option<Result<CountRequest, Error>> {
        Some(
            lower_count(request, &self.lowering).map(|body| CountRequest {
                path: "/messages/count_tokens".into(),
                body,
                lift: lift_count,
            }),
        )
    }
}

/// The configuration of an [`Anthropic`] provider: the shared settings, and the
/// wire's [`LowerOptions`] in `wire.lowering`.
pub type AnthropicConfig = ProviderConfig<Messages>;

/// The Messages provider: the shared [`Provider`] over the [`Messages`] wire.
pub type Anthropic<T = HttpTransport> = Provider<Messages, T>;

impl ProviderConfig<Messages> {
    /// api.anthropic.com, with the key in `ANTHROPIC_API_KEY`.
    pub fn anthropic() -> Result<Self, Error> {
        Self::hosted()
    }

    /// Sets how requests are written.
    pub fn lowering(mut self, lowering: LowerOptions) -> Self {
        self.wire.lowering = lowering;
        self
    }

    /// Sets the policy for images and documents in tool results (`Native` by
    /// default).
    pub fn tool_result_media(mut self, policy: ToolResultMedia) -> Self {
        self.wire.lowering.tool_result_media = policy;
        self
    }
}

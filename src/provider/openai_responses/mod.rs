//! OpenAI's Responses API (`POST /v1/responses`): the wire of OpenAI's newest
//! models and tools — reasoning carried between turns as encrypted items,
//! tool outputs that hold images, built-in tools.
//!
//! The request, its items, the response and the stream events are typed in
//! [`types`], for both directions. Three parts, the first two pure:
//!
//! - [`lower`] ([`lower_request`] for the typed body): a canonical
//!   [`ChatRequest`] → the request body ([`LowerOptions`]);
//! - [`Lifter`]: the response, streamed (typed SSE events) or whole (JSON), →
//!   canonical events, through the same code in both modes;
//! - [`Responses`]: the [`Wire`] that gives them to the shared [`Provider`]
//!   service; [`OpenAiResponses`] and [`OpenAiResponsesConfig`] name it over
//!   this wire.
//!
//! Built-in tools (`web_search`…) and custom (free-form) tools pass through
//! `options.extra["tools"]`, and the items they make come back whole
//! ([`ITEM_KEY`]); they do not cross to other wires yet.
//!
//! ```no_run
//! use lmstack::provider::openai_responses::{OpenAiResponses, OpenAiResponsesConfig};
//! use lmstack::{ChatRequest, Message};
//! use serde_json::json;
//! use tower::ServiceExt;
//!
//! # async fn run() -> Result<(), lmstack::Error> {
//! let model = OpenAiResponses::new(OpenAiResponsesConfig::openai()?.model("gpt-5"))?; // OPENAI_API_KEY
//! let mut request = ChatRequest::new(vec![Message::user("What is 2 + 3?")]).streaming(true);
//! // Nothing kept on OpenAI's side: the reasoning comes back encrypted.
//! request.options.extra.insert("store".into(), json!(false));
//! request.options.extra.insert("reasoning".into(), json!({"effort": "low", "summary": "auto"}));
//! let messages = model.oneshot(request).await?.collect().await?;
//! println!("{messages:?}");
//! # Ok(()) }
//! ```

mod decode;
mod encode;
mod keys;
mod lift;
mod lower;
#[cfg(feature = "server")]
pub(crate) mod portable;
mod server_tool;
pub(crate) mod tools;
pub mod types;

pub use super::media::ToolResultMedia;
pub use super::openai_shared::{DEVELOPER_KEY, REFUSAL_KEY};
pub use decode::{decode_request, request_from_wire};
pub use encode::{ReplyEncoder, error_body};
pub use keys::{EXTRA_KEY, INSTRUCTIONS_KEY, ITEM_KEY, PARTS_KEY};
pub use lift::Lifter;
pub use lower::{LowerOptions, lower, lower_request};

use serde_json::Value;

use super::config::ProviderConfig;
use super::kind::Kind;
use super::service::Provider;
use super::transport::HttpTransport;
use super::wire::Wire;
use crate::{ChatRequest, Error};

/// The Responses wire (`POST {base_url}/responses`, the key as
/// `Authorization: Bearer`), with its options: how requests are written.
#[derive(Clone, Debug, Default)]
pub struct Responses {
    /// How requests are written (see [`LowerOptions`]).
    pub lowering: LowerOptions,
}

impl Wire for Responses {
    const KIND: Kind = Kind::OpenAiResponses;
    const KEY_ENV: &'static str = "OPENAI_API_KEY";
    const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";
    type Lifter = Lifter;

    fn path(&self, _request: &ChatRequest) -> String {
        "/responses".into()
    }

    fn lower(&self, request: &ChatRequest) -> Result<Value, Error> {
        lower(request, &self.lowering)
    }
}

/// The configuration of an [`OpenAiResponses`] provider: the shared settings,
/// and the wire's [`LowerOptions`] in `wire.lowering`.
pub type OpenAiResponsesConfig = ProviderConfig<Responses>;

/// The Responses provider: the shared [`Provider`] over the [`Responses`] wire.
pub type OpenAiResponses<T = HttpTransport> = Provider<Responses, T>;

impl ProviderConfig<Responses> {
    /// api.openai.com, with the key in `OPENAI_API_KEY`.
    pub fn openai() -> Result<Self, Error> {
        Self::hosted()
    }

    /// Sets the policy for images and documents in tool results (native by
    /// default).
    pub fn tool_result_media(mut self, policy: ToolResultMedia) -> Self {
        self.wire.lowering.tool_result_media = policy;
        self
    }
}

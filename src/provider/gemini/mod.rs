//! Google Gemini's `generateContent` API (the Gemini API and Vertex AI's
//! `generateContent`, by base URL).
//!
//! The request and the response are typed in [`types`]. Three parts, the first
//! two pure:
//!
//! - [`lower`] ([`lower_request`] for the typed body): a canonical
//!   [`ChatRequest`] → the request body ([`LowerOptions`] says how images in
//!   tool results are sent);
//! - [`Lifter`]: the response, streamed (`alt=sse`, each event a whole
//!   `GenerateContentResponse`) or whole (JSON), → canonical events, through the
//!   same code in both modes;
//! - [`GenerateContent`]: the [`Wire`] that gives them to the shared
//!   [`Provider`] service; [`Gemini`] and [`GeminiConfig`] name it over this wire.
//!
//! ```no_run
//! use lmstack::provider::gemini::{Gemini, GeminiConfig};
//! use lmstack::{ChatRequest, Message};
//! use tower::ServiceExt;
//!
//! # async fn run() -> Result<(), lmstack::Error> {
//! let gemini = Gemini::new(GeminiConfig::gemini()?.model("gemini-2.5-flash"))?; // GEMINI_API_KEY
//! let request = ChatRequest::new(vec![Message::user("What is 2 + 3?")]).streaming(true);
//! let messages = gemini.oneshot(request).await?.collect().await?;
//! println!("{messages:?}");
//! # Ok(()) }
//! ```

mod count;
mod decode;
mod encode;
pub mod grounding;
mod lift;
mod lower;
#[cfg(feature = "server")]
pub(crate) mod portable;
pub mod server_tool;
pub mod types;

pub use super::media::ToolResultMedia;
pub use count::{lift_count, lower_count};
pub use decode::{decode_count_request, decode_request};
pub use encode::{ReplyEncoder, StreamMode, error_body, models_body};
pub use lift::Lifter;
pub use lower::{
    BLOCKS_KEY, CONTENT_KEY, EXTRA_KEY, FOLLOWING_KEY, GENERATED_ID_KEY, LowerOptions, PART_KEY,
    SYSTEM_NOTE_END, SYSTEM_NOTE_START, THOUGHT_SIGNATURE_KEY, TOOL_KEY, lower, lower_request,
};

use serde_json::Value;

use super::config::ProviderConfig;
use super::kind::Kind;
use super::service::Provider;
use super::transport::HttpTransport;
use super::wire::{CountRequest, Wire};
use crate::{ChatRequest, Error};

/// The `generateContent` wire (`POST {base_url}/models/{model}:generateContent`,
/// or `:streamGenerateContent?alt=sse` in streaming mode; the key in
/// `x-goog-api-key`; token counts at `…:countTokens`), with its options: how
/// requests are written.
#[derive(Clone, Debug, Default)]
pub struct GenerateContent {
    /// How requests are written (see [`LowerOptions`]).
    pub lowering: LowerOptions,
}

impl Wire for GenerateContent {
    const KIND: Kind = Kind::Gemini;
    const KEY_ENV: &'static str = "GEMINI_API_KEY";
    const DEFAULT_BASE_URL: &'static str = "https://generativelanguage.googleapis.com/v1beta";
    const KEY_HEADER: Option<&'static str> = Some("x-goog-api-key");
    const NEEDS_MODEL: bool = true;
    const COUNTS_UNANSWERED_RESULTS: bool = true;
    type Lifter = Lifter;

    fn path(&self, request: &ChatRequest) -> String {
        let model = model_path(request);
        if request.options.stream {
            format!("{model}:streamGenerateContent?alt=sse")
        } else {
            format!("{model}:generateContent")
        }
    }

    fn lower(&self, request: &ChatRequest) -> Result<Value, Error> {
        lower(request, &self.lowering)
    }

    fn lower_count(&self, request: &ChatRequest) -> Option<Result<CountRequest, Error>> {
        Some(
            lower_count(request, &self.lowering).map(|body| CountRequest {
                path: format!("{}:countTokens", model_path(request)),
                body,
                lift: lift_count,
            }),
        )
    }
}

/// The path of the model `request` names (`/models/{model}`), its name
/// escaped.
fn model_path(request: &ChatRequest) -> String {
    let model = request.options.model.as_deref().unwrap_or_default();
    let model = model.strip_prefix("models/").unwrap_or(model);
    format!(
        "/models/{}",
        percent_encoding::utf8_percent_encode(model, MODEL_NAME)
    )
}

/// What a model name may hold as it is in the path: everything but what would
/// end or re-shape the path segment.
const MODEL_NAME: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'/')
    .add(b'?')
    .add(b'#')
    .add(b'%')
    .add(b':');

/// The configuration of a [`Gemini`] provider: the shared settings, and the
/// wire's [`LowerOptions`] in `wire.lowering`.
pub type GeminiConfig = ProviderConfig<GenerateContent>;

/// The Gemini provider: the shared [`Provider`] over the [`GenerateContent`] wire.
pub type Gemini<T = HttpTransport> = Provider<GenerateContent, T>;

impl ProviderConfig<GenerateContent> {
    /// generativelanguage.googleapis.com, with the key in `GEMINI_API_KEY`.
    pub fn gemini() -> Result<Self, Error> {
        Self::hosted()
    }

    /// Sets the policy for images and documents in tool results (by default
    /// chosen by model: see [`LowerOptions::tool_result_media`]).
    pub fn tool_result_media(mut self, policy: ToolResultMedia) -> Self {
        self.wire.lowering.tool_result_media = Some(policy);
        self
    }
}

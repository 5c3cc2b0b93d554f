//! What a provider's wire format brings to the generic [`Provider`](super::Provider):
//! its endpoint, how the key is sent, its lowering and its lifting. Everything
//! else — HTTP, SSE and JSON framing with limits, error mapping, retry — is
//! shared, written once.

use std::fmt;

use ::http::header::{HeaderMap, HeaderName};
use serde_json::Value;

use super::body::Lift;
use super::key::ApiKey;
use super::kind::Kind;
use crate::{ChatRequest, Error};

/// One provider's wire format: the small part of a provider that is its own.
///
/// A type implementing it is also the wire's options (how requests are
/// written; `Default` gives the usual ones), held in
/// [`ProviderConfig::wire`](super::ProviderConfig::wire).
pub trait Wire: Clone + Default + fmt::Debug + Send + Sync + 'static {
    /// Which wire it is; its name is carried by its errors (`openai`).
    const KIND: Kind;
    /// The environment variable its key is read from by default
    /// (`OPENAI_API_KEY`).
    const KEY_ENV: &'static str;
    /// The API root of the provider's own service.
    const DEFAULT_BASE_URL: &'static str;

    /// Its lifting: responses, streamed or whole, → canonical events.
    type Lifter: Lift;

    /// The endpoint's path for `request`, joined to the base URL (it may
    /// depend on the model and the mode, and may hold a query).
    fn path(&self, request: &ChatRequest) -> String;

    /// The header that carries `key`, and its value.
    fn auth(&self, key: &ApiKey) -> (HeaderName, String);

    /// Headers the wire always sends (a version header); none by default.
    fn headers(&self, _headers: &mut HeaderMap) {}

    /// The request body for `request` (its model already filled in from the
    /// configuration when it named none).
    fn lower(&self, request: &ChatRequest) -> Result<Value, Error>;

    /// A lifter for one reply that accepts at most `max_tool_calls` calls.
    fn lifter(&self, max_tool_calls: usize) -> Self::Lifter;
}

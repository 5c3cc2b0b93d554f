//! What a provider's wire format brings to the generic [`Provider`](super::Provider):
//! its endpoint, how the key is sent, its lowering and its lifting. Everything
//! else — HTTP, SSE and JSON framing with limits, error mapping, retry — is
//! shared, written once.

use std::fmt;

use std::time::SystemTime;

use ::http::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use super::body::Lift;
use super::key::ApiKey;
use super::kind::Kind;
use super::transport::HttpRequest;
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
    type Lifter: Lift + Default;

    /// The endpoint's path for `request`, joined to the base URL (it may
    /// depend on the model and the mode, and may hold a query).
    fn path(&self, request: &ChatRequest) -> String;

    /// The header the key travels in as it is (`x-api-key`), for the default
    /// [`authorize`](Wire::authorize); `None` (the default) sends it as
    /// `Authorization: Bearer`, as OpenAI and most servers take it.
    const KEY_HEADER: Option<&'static str> = None;

    /// Whether every request must name a model (Anthropic's body, Gemini's
    /// URL); a request without one is refused before it is sent. `false` by
    /// default: compatible servers that serve one model take none.
    const NEEDS_MODEL: bool = false;

    /// Whether the wire's token count ([`lower_count`](Wire::lower_count))
    /// takes a tool result whose call the request does not hold, as Gemini's
    /// `countTokens` does (Gemini CLI counts a function response alone
    /// before it sends it). `false` by default: a count for such a wire
    /// counts that result as a user message of its content
    /// ([`TokenCounter`](super::TokenCounter)).
    const COUNTS_UNANSWERED_RESULTS: bool = false;

    /// Authorizes `request` with `key` at `now`: over the whole request
    /// (method, URL, headers, body), so that a key sent as a header
    /// ([`key_header`]) and a signature over the request (AWS SigV4) are each
    /// one implementation. Runs before the configuration's headers (which win
    /// over a header set here) and the wire's. By default it
    /// sends the key as [`KEY_HEADER`](Wire::KEY_HEADER) says.
    fn authorize(
        &self,
        key: &ApiKey,
        request: &mut HttpRequest,
        _now: SystemTime,
    ) -> Result<(), Error> {
        let provider = Self::KIND.name();
        match Self::KEY_HEADER {
            Some(name) => {
                let name = HeaderName::try_from(name).map_err(|_| {
                    Error::InvalidRequest(format!("{provider}: `{name}` is not a header name"))
                })?;
                key_header(request, name, key.expose(), provider)
            }
            None => {
                let bearer = format!("Bearer {}", key.expose());
                key_header(request, AUTHORIZATION, &bearer, provider)
            }
        }
    }

    /// Sets the headers the wire sends with `request` (a version header;
    /// headers a request carries in `options.extra`, such as Anthropic's beta
    /// flags) among `headers`, which already hold the configuration's: it
    /// keeps those or merges with them. None by default.
    fn headers(&self, _request: &ChatRequest, _headers: &mut HeaderMap) -> Result<(), Error> {
        Ok(())
    }

    /// The request that asks the provider to count `request`'s input tokens
    /// without running it, lowered as [`lower`](Self::lower) lowers a chat
    /// request; `None` (the default) where the provider has no such endpoint.
    fn lower_count(&self, _request: &ChatRequest) -> Option<Result<CountRequest, Error>> {
        None
    }

    /// The request body for `request` (its model already filled in from the
    /// configuration when it named none).
    fn lower(&self, request: &ChatRequest) -> Result<Value, Error>;

    /// A lifter for one reply (the body decoder holds it to the tool-call
    /// limit).
    fn lifter(&self) -> Self::Lifter {
        Self::Lifter::default()
    }
}

/// A request to count input tokens, as a wire lowers it ([`Wire::lower_count`]):
/// where it is posted, its body, and how the count is read from the answer.
#[derive(Clone, Debug)]
pub struct CountRequest {
    /// The endpoint's path, joined to the base URL.
    pub path: String,
    /// The request body.
    pub body: Value,
    /// Reads the count from the answer's body.
    pub lift: LiftCount,
}

/// How a wire reads the count from a count endpoint's answer body.
pub type LiftCount = fn(&[u8]) -> Result<u64, Error>;

/// Sends `value` (the key, or a token made of it) in the header `name`,
/// marked sensitive so that no log shows it: how most wires authorize.
///
/// ```
/// use lmstack::provider::wire::key_header;
/// use http::header::AUTHORIZATION;
///
/// let mut request = http::Request::post("https://api.example.com/v1").body(bytes::Bytes::new()).unwrap();
/// key_header(&mut request, AUTHORIZATION, "Bearer sk-1", "openai").unwrap();
/// assert_eq!(request.headers()["authorization"], "Bearer sk-1");
/// assert!(request.headers()["authorization"].is_sensitive());
/// ```
pub fn key_header(
    request: &mut HttpRequest,
    name: HeaderName,
    value: &str,
    provider: &str,
) -> Result<(), Error> {
    let mut value = HeaderValue::try_from(value).map_err(|_| {
        Error::InvalidRequest(format!(
            "{provider}: the API key is not a valid header value"
        ))
    })?;
    value.set_sensitive(true);
    request.headers_mut().insert(name, value);
    Ok(())
}

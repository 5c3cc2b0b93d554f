//! What every HTTP provider is configured with: where the server is, the key,
//! the default model, extra headers, timeouts and limits — and the wire's own
//! options.

use std::fmt;
use std::sync::Arc;

use ::http::header::{HeaderMap, HeaderName, HeaderValue};

use super::body::{DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_TOOL_CALLS};
use super::key::ApiKey;
use super::redact::{Secrets, redact_url};
use super::sse::DEFAULT_MAX_EVENT_BYTES;
use super::transport::HttpConfig;
use super::wire::Wire;
use crate::store::MediaStore;

/// The configuration of a [`Provider`](super::Provider) speaking the wire `W`:
/// the settings every provider shares, and `wire`, the wire's own (how requests
/// are written).
///
/// Its `Debug` output shows neither the key nor the credentials a base URL may
/// carry ([`redact_url`]).
#[derive(Clone)]
pub struct ProviderConfig<W> {
    /// The API root, such as `https://api.openai.com/v1`; the wire adds its
    /// endpoint's path (before the base URL's query, if it has one). A user and
    /// password in it are sent as `Authorization: Basic` when there is no API
    /// key. Errors and `Debug` show it redacted.
    pub base_url: String,
    /// The key, sent in the header the wire names; local servers need none.
    pub api_key: Option<ApiKey>,
    /// The model used when a request names none.
    pub model: Option<String>,
    /// Extra headers sent with every request.
    pub headers: HeaderMap,
    /// Timeouts of the default transport.
    pub http: HttpConfig,
    /// The largest SSE event accepted.
    pub max_event_bytes: usize,
    /// The largest response body accepted, streamed or whole, whatever its
    /// content type: every byte read counts.
    pub max_body_bytes: usize,
    /// The most tool calls one reply may hold.
    pub max_tool_calls: usize,
    /// Where media by reference (`MediaSource::Ref`) is read from before a
    /// request is lowered; without one, a request holding a reference fails.
    pub media_store: Option<Arc<dyn MediaStore>>,
    /// The wire's own options.
    pub wire: W,
}

impl<W: Default> ProviderConfig<W> {
    /// A server at `base_url`, without a key, with the wire's default options.
    pub fn new(base_url: impl Into<String>) -> Self {
        ProviderConfig {
            base_url: base_url.into(),
            api_key: None,
            model: None,
            headers: HeaderMap::new(),
            http: HttpConfig::default(),
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_tool_calls: DEFAULT_MAX_TOOL_CALLS,
            media_store: None,
            wire: W::default(),
        }
    }
}

impl<W: Wire> ProviderConfig<W> {
    /// The provider's own service (`W::DEFAULT_BASE_URL`), with the key read
    /// from `W::KEY_ENV`; an error when that variable is not set.
    pub fn hosted() -> Result<Self, crate::Error> {
        Ok(Self::new(W::DEFAULT_BASE_URL).api_key(ApiKey::from_env(W::KEY_ENV)?))
    }
}

impl<W> ProviderConfig<W> {
    /// Sets the API key.
    pub fn api_key(mut self, key: ApiKey) -> Self {
        self.api_key = Some(key);
        self
    }

    /// Sets the model used when a request names none.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Adds a header sent with every request. Its value is marked sensitive, so
    /// `Debug` output of the configuration and of requests does not show it.
    pub fn header(mut self, name: HeaderName, mut value: HeaderValue) -> Self {
        value.set_sensitive(true);
        self.headers.insert(name, value);
        self
    }

    /// Sets the timeouts of the default transport.
    pub fn http(mut self, http: HttpConfig) -> Self {
        self.http = http;
        self
    }

    /// Sets the largest SSE event accepted (16 MiB by default).
    pub fn max_event_bytes(mut self, bytes: usize) -> Self {
        self.max_event_bytes = bytes;
        self
    }

    /// Sets the largest response body accepted, streamed or whole (64 MiB by
    /// default).
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Sets the most tool calls one reply may hold (1024 by default); a reply
    /// with more fails with [`Error::ToolCallLimit`](crate::Error::ToolCallLimit).
    pub fn max_tool_calls(mut self, calls: usize) -> Self {
        self.max_tool_calls = calls;
        self
    }

    /// Sets the store that media by reference is read from.
    ///
    /// Before a request is lowered, every image, document and audio block by
    /// reference (`{"ref":"sha256:…"}`, as a stored conversation holds them) is
    /// replaced by its bytes from the store, inline, checked against their
    /// digest; a reference the store cannot give fails the request with
    /// [`Error::InvalidRequest`](crate::Error::InvalidRequest), naming it,
    /// before anything is sent. The store is read while the request is built
    /// (blocking IO, for a [`FileStore`](crate::store::FileStore)), and only
    /// for requests that hold references.
    pub fn media_store(mut self, store: Arc<dyn MediaStore>) -> Self {
        self.media_store = Some(store);
        self
    }

    /// Sets the wire's own options.
    pub fn wire(mut self, wire: W) -> Self {
        self.wire = wire;
        self
    }

    /// The credentials this configuration sends: the API key, the values of
    /// the headers marked sensitive (as [`header`](Self::header) marks them)
    /// and of the credential headers, and the credentials of the base URL — as
    /// [`Secrets::of_request`] reads them from a request. A provider scrubs
    /// them from the errors inside its replies; a server joins those of all its
    /// upstreams to scrub what it tells its clients.
    ///
    /// ```
    /// use lmstack::provider::openai_chat::OpenAiConfig;
    /// use lmstack::provider::ApiKey;
    /// let config = OpenAiConfig::new("http://me:pa55word@10.0.0.7/v1").api_key(ApiKey::new("sk-abcdefgh"));
    /// let secrets = config.secrets();
    /// assert_eq!(secrets.scrub("sk-abcdefgh, pa55word"), "[redacted], [redacted]");
    /// ```
    pub fn secrets(&self) -> Secrets {
        let mut secrets = Secrets::new();
        if let Some(key) = &self.api_key {
            secrets = secrets.key(key);
        }
        secrets.add_headers(&self.headers);
        if let Ok(uri) = self.base_url.parse() {
            secrets.add_uri(&uri);
        }
        secrets
    }

    /// `{base_url}{path}`: `path` joined to the base URL's path, its query (a
    /// key, an `api-version`) after it — merged with one `path` may bring — and
    /// its fragment not sent.
    pub fn url(&self, path: &str) -> String {
        let base = match self.base_url.find('#') {
            Some(fragment) => &self.base_url[..fragment],
            None => &self.base_url,
        };
        let (base_path, query) = base.split_at(base.find('?').unwrap_or(base.len()));
        let base_path = base_path.trim_end_matches('/');
        match (path.split_once('?'), query.strip_prefix('?')) {
            (Some((path, own)), Some(query)) => format!("{base_path}{path}?{own}&{query}"),
            _ => format!("{base_path}{path}{query}"),
        }
    }
}

impl<W: fmt::Debug> fmt::Debug for ProviderConfig<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ProviderConfig {
            base_url,
            api_key,
            model,
            headers,
            http,
            max_event_bytes,
            max_body_bytes,
            max_tool_calls,
            media_store,
            wire,
        } = self;
        f.debug_struct("ProviderConfig")
            .field("base_url", &redact_url(base_url))
            .field("api_key", api_key)
            .field("model", model)
            .field("headers", headers)
            .field("http", http)
            .field("max_event_bytes", max_event_bytes)
            .field("max_body_bytes", max_body_bytes)
            .field("max_tool_calls", max_tool_calls)
            .field("media_store", &media_store.as_ref().map(|_| "…"))
            .field("wire", wire)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::ProviderConfig;

    #[test]
    fn the_path_goes_before_the_query_and_the_fragment_is_not_sent() {
        let url = |base: &str, path: &str| ProviderConfig::<()>::new(base).url(path);
        assert_eq!(url("http://h/v1/", "/chat"), "http://h/v1/chat");
        assert_eq!(
            url("http://h/v1?key=K#x", "/chat"),
            "http://h/v1/chat?key=K"
        );
        assert_eq!(
            url("http://h/v1?key=K", "/m:stream?alt=sse"),
            "http://h/v1/m:stream?alt=sse&key=K"
        );
        assert_eq!(
            url("http://h/v1", "/m:stream?alt=sse"),
            "http://h/v1/m:stream?alt=sse"
        );
    }
}

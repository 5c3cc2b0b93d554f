//! OpenAI Chat Completions, and the servers that speak it: vLLM, llama.cpp,
//! Ollama, GLM (Z.AI), Groq and others, each by its base URL.
//!
//! Three parts, the first two pure:
//!
//! - [`lower`]: a canonical [`ChatRequest`] → the request body
//!   ([`LowerOptions`] says how to write what servers spell differently:
//!   images in tool results, reasoning echo, the token limit's field);
//! - [`Lifter`]: the response, streamed (SSE chunks) or whole (JSON), →
//!   canonical events, through the same code in both modes (framed by the
//!   shared [`BodyDecoder`]);
//! - [`OpenAi`]: the tower service that joins them to an HTTP transport.
//!
//! ```no_run
//! use lmstack::provider::openai::{OpenAi, OpenAiConfig};
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

mod lift;
mod lower;

pub use lift::Lifter;
pub use lower::{
    LowerOptions, MaxTokensField, PROVIDER, REASONING_FIELD_KEY, REFUSAL_KEY, ReasoningEcho,
    ToolResultMedia, lower,
};

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use ::http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use bytes::Bytes;
use tower::Service;

use super::body::{BodyDecoder, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_TOOL_CALLS};
use super::sse::DEFAULT_MAX_EVENT_BYTES;
use super::transport::{
    ByteStream, HttpConfig, HttpRequest, HttpResponse, HttpTransport, move_url_credentials,
};
use super::{ApiKey, TransportError, TransportErrorKind, redact_url};
use crate::service::{IntoEvents, MachineStream, ReplyFuture};
use crate::{ChatRequest, Error, Reply};

/// Where the server is and how to talk to it.
///
/// Its `Debug` output shows neither the key nor the credentials a base URL may
/// carry ([`redact_url`]).
#[derive(Clone)]
pub struct OpenAiConfig {
    /// The API root, such as `https://api.openai.com/v1` or
    /// `http://127.0.0.1:8080/v1`; requests go to `{base_url}/chat/completions`
    /// (before the base URL's query, if it has one). A user and password in it
    /// are sent as `Authorization: Basic` when there is no API key. Errors and
    /// `Debug` show it redacted.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …`; local servers need none.
    pub api_key: Option<ApiKey>,
    /// The model used when a request names none.
    pub model: Option<String>,
    /// Extra headers sent with every request (`OpenAI-Organization`, …).
    pub headers: HeaderMap,
    /// How requests are written.
    pub lowering: LowerOptions,
    /// Timeouts of the default transport.
    pub http: HttpConfig,
    /// The largest SSE event accepted.
    pub max_event_bytes: usize,
    /// The largest response body accepted, streamed or whole, whatever its
    /// content type: every byte read counts.
    pub max_body_bytes: usize,
    /// The most tool calls one reply may hold.
    pub max_tool_calls: usize,
}

impl OpenAiConfig {
    /// A compatible server at `base_url`, without a key.
    pub fn new(base_url: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            api_key: None,
            model: None,
            headers: HeaderMap::new(),
            lowering: LowerOptions::default(),
            http: HttpConfig::default(),
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_tool_calls: DEFAULT_MAX_TOOL_CALLS,
        }
    }

    /// api.openai.com, with the key in `OPENAI_API_KEY`, `max_completion_tokens`
    /// for the token limit.
    pub fn openai() -> Result<Self, Error> {
        let mut config =
            Self::new("https://api.openai.com/v1").api_key(ApiKey::from_env("OPENAI_API_KEY")?);
        config.lowering.max_tokens_field = MaxTokensField::MaxCompletionTokens;
        Ok(config)
    }

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

    /// Sets how requests are written.
    pub fn lowering(mut self, lowering: LowerOptions) -> Self {
        self.lowering = lowering;
        self
    }

    /// Sets the policy for images and documents in tool results.
    pub fn tool_result_media(mut self, policy: ToolResultMedia) -> Self {
        self.lowering.tool_result_media = policy;
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
    /// with more fails with [`Error::ToolCallLimit`].
    pub fn max_tool_calls(mut self, calls: usize) -> Self {
        self.max_tool_calls = calls;
        self
    }

    /// `{base_url}/chat/completions`, joined to the base URL's path: its query
    /// (a key, an `api-version`) follows, its fragment is not sent.
    fn endpoint(&self) -> String {
        let base = match self.base_url.find('#') {
            Some(fragment) => &self.base_url[..fragment],
            None => &self.base_url,
        };
        let (path, query) = base.split_at(base.find('?').unwrap_or(base.len()));
        format!("{}/chat/completions{query}", path.trim_end_matches('/'))
    }
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let OpenAiConfig {
            base_url,
            api_key,
            model,
            headers,
            lowering,
            http,
            max_event_bytes,
            max_body_bytes,
            max_tool_calls,
        } = self;
        f.debug_struct("OpenAiConfig")
            .field("base_url", &redact_url(base_url))
            .field("api_key", api_key)
            .field("model", model)
            .field("headers", headers)
            .field("lowering", lowering)
            .field("http", http)
            .field("max_event_bytes", max_event_bytes)
            .field("max_body_bytes", max_body_bytes)
            .field("max_tool_calls", max_tool_calls)
            .finish()
    }
}

/// The Chat Completions provider: a `Service<ChatRequest, Response = Reply>` over
/// an HTTP transport `T`.
///
/// In streaming mode the call resolves when the response headers arrive and the
/// reply streams deltas; in non-streaming mode it resolves with the whole reply
/// as complete messages. HTTP errors fail the call with
/// [`Error::Provider`]; a stream that breaks ends the
/// reply with [`Error::Transport`] (or `Provider` for an
/// error object inside the stream). Wrap it in a
/// `lmstack::retry::RetryLayer` (feature `retry`) to retry calls that fail
/// before their first event.
#[derive(Clone, Debug)]
pub struct OpenAi<T = HttpTransport> {
    config: Arc<OpenAiConfig>,
    transport: T,
}

impl OpenAi<HttpTransport> {
    /// The provider on its own HTTP transport.
    pub fn new(config: OpenAiConfig) -> Result<Self, Error> {
        let transport = HttpTransport::new(PROVIDER, config.http.clone())?;
        Ok(Self::with_transport(config, transport))
    }
}

impl<T> OpenAi<T> {
    /// The provider on the given transport (any `Service<HttpRequest>`).
    pub fn with_transport(config: OpenAiConfig, transport: T) -> Self {
        OpenAi {
            config: Arc::new(config),
            transport,
        }
    }

    crate::service::inner_service_accessors!(transport: T);

    /// The configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The HTTP request for `request`: lowered body, endpoint and headers (the
    /// base URL's user and password moved to a header: [`move_url_credentials`]).
    pub fn http_request(&self, mut request: ChatRequest) -> Result<HttpRequest, Error> {
        if request.options.model.is_none() {
            request.options.model.clone_from(&self.config.model);
        }
        let body = lower(&request, &self.config.lowering)?;
        let body = serde_json::to_vec(&body).map_err(|e| Error::json("openai request body", e))?;
        let mut builder = ::http::Request::post(self.config.endpoint())
            .header(CONTENT_TYPE, "application/json")
            .header(
                ACCEPT,
                if request.options.stream {
                    "text/event-stream"
                } else {
                    "application/json"
                },
            );
        if let Some(key) = &self.config.api_key {
            let mut value =
                HeaderValue::try_from(format!("Bearer {}", key.expose())).map_err(|_| {
                    Error::InvalidRequest("openai: the API key is not a valid header value".into())
                })?;
            value.set_sensitive(true);
            builder = builder.header(AUTHORIZATION, value);
        }
        if let Some(headers) = builder.headers_mut() {
            headers.extend(self.config.headers.clone());
        }
        let mut http_request = builder.body(Bytes::from(body)).map_err(|error| {
            TransportError::new(
                PROVIDER,
                TransportErrorKind::Request,
                format!("invalid request to {}", redact_url(&self.config.endpoint())),
            )
            .with_source(error)
        })?;
        move_url_credentials(PROVIDER, &mut http_request)?;
        Ok(http_request)
    }
}

impl<T> Service<ChatRequest> for OpenAi<T>
where
    T: Service<HttpRequest, Response = HttpResponse, Error = Error>,
{
    type Response = Reply;
    type Error = Error;
    type Future = ReplyFuture<T::Future, ReadBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.transport.poll_ready(cx)
    }

    fn call(&mut self, request: ChatRequest) -> Self::Future {
        let streaming = request.options.stream;
        let read = ReadBody {
            streaming,
            max_event_bytes: self.config.max_event_bytes,
            max_body_bytes: self.config.max_body_bytes,
            max_tool_calls: self.config.max_tool_calls,
        };
        match self.http_request(request) {
            Ok(http_request) => {
                ReplyFuture::new(self.transport.call(http_request), read, streaming)
            }
            Err(error) => ReplyFuture::failed(error),
        }
    }
}

/// How the provider makes its reply of the HTTP response: the body, decoded as
/// it arrives by the decoder its `Content-Type` calls for, within the limits.
/// (Public only as a part of [`ReplyFuture`]'s type.)
pub struct ReadBody {
    streaming: bool,
    max_event_bytes: usize,
    max_body_bytes: usize,
    max_tool_calls: usize,
}

impl IntoEvents for ReadBody {
    type Response = HttpResponse;
    type Events = MachineStream<ByteStream, BodyDecoder<Lifter>>;

    fn into_events(self, response: HttpResponse) -> Self::Events {
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok());
        let lifter = Lifter::new().with_max_tool_calls(self.max_tool_calls);
        let decoder = BodyDecoder::for_content_type(lifter, content_type, self.streaming)
            .with_limits(self.max_event_bytes, self.max_body_bytes);
        MachineStream::new(response.into_body(), decoder)
    }
}

//! The HTTP transport: a tower [`Service`] from `http::Request<Bytes>` to
//! `http::Response<ByteStream>`, on [`reqwest`], with the TLS backend of the
//! features (the crate's "Features"; with none, https URLs are refused).
//!
//! Providers are generic over their transport, so any tower middleware that
//! speaks `http` (tracing, rate limits, a test double) can sit between a provider
//! and the network. The transport
//!
//! - bounds each exchange by the timeouts of [`HttpConfig`] — the connection,
//!   each wait for data, and the whole of a non-streaming exchange (a request
//!   marked [`Streaming`] has no overall deadline) — a [`TransportError`] of kind
//!   `Timeout` naming the limit that fired;
//! - turns an error status into [`ProviderError`] (status, provider error type,
//!   code and message, request id, `Retry-After`), reading at most
//!   [`HttpConfig::max_error_body`] bytes of the body;
//! - hands a successful body over as a stream of byte chunks, as they arrive;
//! - sends a URL's user and password (`http://user:pass@host/…`) as an
//!   `Authorization: Basic` header ([`move_url_credentials`]), and shows URLs in
//!   its errors redacted ([`redact_url`]): no credential reaches an error, a log
//!   or reqwest and hyper, whose connection pool logs its keys;
//! - scrubs the credentials the request carried ([`Secrets::of_request`]) from
//!   every error it makes of the answer, since an upstream may quote the key it
//!   refuses, masked or whole.
//!
//! ```no_run
//! use bytes::Bytes;
//! use lmstack::provider::transport::{HttpConfig, HttpTransport};
//! use tower::ServiceExt;
//!
//! # async fn run() -> Result<(), lmstack::Error> {
//! let transport = HttpTransport::new("openai", HttpConfig::default())?;
//! let request = http::Request::post("http://127.0.0.1:8080/v1/chat/completions")
//!     .header("content-type", "application/json")
//!     .body(Bytes::from_static(br#"{"messages":[{"role":"user","content":"Hi"}]}"#))
//!     .unwrap();
//! let response = transport.oneshot(request).await?;
//! assert!(response.status().is_success());
//! # Ok(()) }
//! ```

use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::{BoxStream, Stream, StreamExt};
use http::header::{AUTHORIZATION, HeaderValue};
use tower::Service;

use super::error::{ProviderError, TransportError, TransportErrorKind};
use super::redact::{Secrets, basic_token, redact_url};
use crate::Error;

/// A request to a provider: method, URL, headers and a body in memory.
pub type HttpRequest = http::Request<Bytes>;

/// A provider's answer: status, headers and the body as a stream of chunks.
pub type HttpResponse = http::Response<ByteStream>;

/// The body of an [`HttpResponse`]: byte chunks as they arrive; an `Err` ends it.
pub struct ByteStream(BoxStream<'static, Result<Bytes, Error>>);

impl ByteStream {
    /// A body from any stream of chunks.
    pub fn new<S>(stream: S) -> Self
    where
        S: Stream<Item = Result<Bytes, Error>> + Send + 'static,
    {
        ByteStream(stream.boxed())
    }

    /// A body already in memory.
    pub fn from_bytes(bytes: impl Into<Bytes>) -> Self {
        Self::new(futures::stream::iter([Ok(bytes.into())]))
    }
}

impl Stream for ByteStream {
    type Item = Result<Bytes, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_next_unpin(cx)
    }
}

impl fmt::Debug for ByteStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ByteStream")
    }
}

/// Timeouts and limits of an [`HttpTransport`]. Each bound holds for one
/// attempt (a retry layer's next attempt starts afresh), and a bound that
/// fires fails it with a [`TransportError`] of kind `Timeout` (a gateway's
/// 504, which a retry layer retries) whose message names it, such as
/// `reading the response: not done within the request_timeout of 600s`.
///
/// | bound             | non-streaming request                  | streaming request ([`Streaming`]) |
/// |-------------------|----------------------------------------|-----------------------------------|
/// | `connect_timeout` | the TCP and TLS connection             | the same                          |
/// | `read_timeout`    | each wait for data: the response head, then each next piece of the body | the same: the time to the head, and each silence of the stream |
/// | `request_timeout` | the whole exchange, from its start (connecting included) to the body's last byte | none: a stream may run as long as it keeps talking |
///
/// So a non-streaming answer that a server trickles, a byte now and then,
/// ends at the `request_timeout`, while a long stream is never cut for its
/// length.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// The longest wait for a connection (TCP and TLS), in either mode.
    pub connect_timeout: Duration,
    /// The longest wait for data, in either mode: for the response head, then
    /// for each next piece of the body. It bounds a silence, not a whole
    /// answer.
    pub read_timeout: Duration,
    /// The longest a non-streaming exchange may take, from its start to the
    /// last byte of its body; streaming requests have no such bound.
    pub request_timeout: Duration,
    /// How much of an error body is read to explain the error.
    pub max_error_body: usize,
}

impl Default for HttpConfig {
    /// Connect within 10 s; no wait for data longer than 300 s; a non-streaming
    /// exchange done within 600 s (as the official OpenAI SDKs); 64 KiB of an
    /// error body.
    fn default() -> Self {
        HttpConfig {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(300),
            request_timeout: Duration::from_secs(600),
            max_error_body: 64 << 10,
        }
    }
}

impl HttpConfig {
    /// Sets the connect timeout.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets the read timeout.
    pub fn read_timeout(mut self, timeout: Duration) -> Self {
        self.read_timeout = timeout;
        self
    }

    /// Sets the request timeout of non-streaming requests.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }
}

/// Marks a request whose answer streams (server-sent events), as a request
/// extension: the [`HttpTransport`] gives it no overall deadline
/// ([`HttpConfig::request_timeout`]), and takes the mark out before it sends
/// the request. [`Provider`](super::Provider) marks its streaming requests.
///
/// ```
/// use lmstack::provider::transport::Streaming;
/// let mut request = http::Request::post("http://127.0.0.1:8080/v1/chat/completions")
///     .body(bytes::Bytes::new())
///     .unwrap();
/// request.extensions_mut().insert(Streaming);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Streaming;

/// The HTTP transport. Cheap to clone (the connection pool is shared).
#[derive(Clone, Debug)]
pub struct HttpTransport {
    client: reqwest::Client,
    provider: &'static str,
    max_error_body: usize,
    /// The timeouts the client was built with, to name the one that fired and
    /// to give non-streaming requests their deadline; `None` for a client built
    /// elsewhere, whose own timeouts apply.
    timeouts: Option<HttpConfig>,
    last_url: LastUrl,
}

impl HttpTransport {
    /// A transport for `provider` (the name errors carry), with its own client.
    pub fn new(provider: &'static str, config: HttpConfig) -> Result<Self, Error> {
        let client = crate::tls::client_builder()
            .connect_timeout(config.connect_timeout)
            .read_timeout(config.read_timeout)
            .user_agent(concat!("lmstack/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| {
                TransportError::new(
                    provider,
                    TransportErrorKind::Request,
                    "could not build the HTTP client",
                )
                .with_source(error)
            })?;
        Ok(HttpTransport {
            timeouts: Some(config.clone()),
            ..Self::from_client(provider, client, config.max_error_body)
        })
    }

    /// A transport on a client built elsewhere: its own timeouts apply, and no
    /// [`HttpConfig::request_timeout`].
    pub fn from_client(
        provider: &'static str,
        client: reqwest::Client,
        max_error_body: usize,
    ) -> Self {
        HttpTransport {
            client,
            provider,
            max_error_body,
            timeouts: None,
            last_url: LastUrl::default(),
        }
    }
}

impl Service<HttpRequest> for HttpTransport {
    type Response = HttpResponse;
    type Error = Error;
    type Future = BoxFuture<'static, Result<HttpResponse, Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: HttpRequest) -> Self::Future {
        if let Err(error) = move_url_credentials(self.provider, &mut request) {
            return Box::pin(futures::future::ready(Err(error)));
        }
        if request
            .uri()
            .scheme_str()
            .is_some_and(crate::tls::unreachable)
        {
            let error = TransportError::new(
                self.provider,
                TransportErrorKind::Request,
                crate::tls::MISSING,
            )
            .with_target(Target::of(&request).to_string());
            return Box::pin(futures::future::ready(Err(error.into())));
        }
        // Taken out before the conversion, whose fast path takes requests
        // without extensions.
        let streaming = request.extensions_mut().remove::<Streaming>().is_some();
        let exchange = Exchange {
            provider: self.provider,
            target: Target::of(&request),
            secrets: Secrets::of_request(&request),
            max_error_body: self.max_error_body,
            deadline: match &self.timeouts {
                Some(timeouts) if !streaming => Some(timeouts.request_timeout),
                _ => None,
            },
            timeouts: self.timeouts.clone(),
        };
        let request = self.last_url.request(request).map(|mut request| {
            *request.timeout_mut() = exchange.deadline;
            request
        });
        Box::pin(exchange.run(self.client.clone(), request))
    }
}

/// The method and URL of a request, written out (redacted) only for an error.
struct Target {
    method: http::Method,
    uri: http::Uri,
}

impl Target {
    fn of(request: &HttpRequest) -> Self {
        Target {
            method: request.method().clone(),
            uri: request.uri().clone(),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method, redact_url(&self.uri.to_string()))
    }
}

/// The URL of the last request, as the `Uri` it came as and as reqwest's
/// parsed `Url`: a transport sends to one endpoint, or a few, and reqwest's own
/// conversion of an `http::Request` writes out and parses its URL afresh on
/// every request. Shared by a transport's clones; its `Debug` shows nothing (a
/// URL's query may hold a key).
#[derive(Clone, Default)]
struct LastUrl(Arc<Mutex<Option<(http::Uri, reqwest::Url)>>>);

impl LastUrl {
    /// `request` as reqwest's, with its URL parsed once for a run of requests
    /// to the same URL. A request with extensions, or whose URL reqwest does not
    /// take, goes through reqwest's own conversion (which keeps the extensions,
    /// and says what is wrong with the URL).
    fn request(&self, request: HttpRequest) -> Result<reqwest::Request, reqwest::Error> {
        if !request.extensions().is_empty() {
            return reqwest::Request::try_from(request);
        }
        let Some(url) = self.url(request.uri()) else {
            return reqwest::Request::try_from(request);
        };
        let (parts, body) = request.into_parts();
        let mut converted = reqwest::Request::new(parts.method, url);
        *converted.headers_mut() = parts.headers;
        *converted.version_mut() = parts.version;
        *converted.body_mut() = Some(body.into());
        Ok(converted)
    }

    /// `uri` parsed, from the last request's if it is the same.
    fn url(&self, uri: &http::Uri) -> Option<reqwest::Url> {
        {
            let last = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((last_uri, url)) = &*last
                && last_uri == uri
            {
                return Some(url.clone());
            }
        }
        let url = reqwest::Url::parse(&uri.to_string()).ok()?;
        let mut last = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *last = Some((uri.clone(), url.clone()));
        Some(url)
    }
}

impl fmt::Debug for LastUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LastUrl")
    }
}

/// Moves the user-info of `request`'s URL (`http://user:pass@host/…`) into an
/// `Authorization: Basic` header, marked sensitive, unless the request carries an
/// `Authorization` header already (an API key wins); the URL keeps its host and
/// port only. Credentials in a base URL are then sent as HTTP means them, and
/// never travel on, or show, as part of a URL. `provider` names the errors.
///
/// ```
/// use lmstack::provider::transport::move_url_credentials;
/// let mut request = http::Request::post("http://me:p%40ss@127.0.0.1:8080/v1")
///     .body(bytes::Bytes::new())
///     .unwrap();
/// move_url_credentials("openai", &mut request).unwrap();
/// assert_eq!(request.uri(), "http://127.0.0.1:8080/v1");
/// // "me:p@ss", base64.
/// assert_eq!(request.headers()["authorization"], "Basic bWU6cEBzcw==");
/// ```
pub fn move_url_credentials(
    provider: &'static str,
    request: &mut HttpRequest,
) -> Result<(), Error> {
    let Some((user_info, host)) = request
        .uri()
        .authority()
        .and_then(|authority| authority.as_str().rsplit_once('@'))
    else {
        return Ok(());
    };
    let invalid = || -> Error {
        TransportError::new(provider, TransportErrorKind::Request, "invalid URL")
            .with_target(Target::of(request).to_string())
            .into()
    };
    let mut parts = request.uri().clone().into_parts();
    parts.authority = Some(host.parse().map_err(|_| invalid())?);
    let uri = http::Uri::from_parts(parts).map_err(|_| invalid())?;
    if !request.headers().contains_key(AUTHORIZATION) {
        let token = basic_token(user_info);
        let mut value = HeaderValue::try_from(format!("Basic {token}")).map_err(|_| invalid())?;
        value.set_sensitive(true);
        request.headers_mut().insert(AUTHORIZATION, value);
    }
    *request.uri_mut() = uri;
    Ok(())
}

/// One request's exchange: what its errors are made with.
struct Exchange {
    provider: &'static str,
    target: Target,
    /// The credentials the request carries, scrubbed from the errors.
    secrets: Secrets,
    max_error_body: usize,
    /// The overall deadline: the request timeout, for a non-streaming request.
    deadline: Option<Duration>,
    timeouts: Option<HttpConfig>,
}

impl Exchange {
    async fn run(
        self,
        client: reqwest::Client,
        request: Result<reqwest::Request, reqwest::Error>,
    ) -> Result<HttpResponse, Error> {
        let started = Instant::now();
        let request = request.map_err(|error| self.error("reading the URL", error, started))?;
        let mut response = client
            .execute(request)
            .await
            .map_err(|error| self.error("sending the request", error, started))?;
        let status = response.status();
        if !status.is_success() {
            let mut body = Vec::new();
            while body.len() < self.max_error_body {
                match response.chunk().await {
                    Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                    // What arrived is enough to explain the error.
                    Ok(None) | Err(_) => break,
                }
            }
            body.truncate(self.max_error_body);
            let headers: Vec<(&str, &str)> = response
                .headers()
                .iter()
                .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)))
                .collect();
            // The answer's time, for a `Retry-After` given as a date: the IO side
            // reads the clock, `from_response` does not.
            let now = std::time::SystemTime::now();
            let error =
                ProviderError::from_response(self.provider, status.as_u16(), &headers, &body, now);
            return Err(self.secrets.scrub_error(error.into()));
        }
        let mut builder = http::Response::builder()
            .status(status)
            .version(response.version());
        if let Some(headers) = builder.headers_mut() {
            headers.extend(
                response
                    .headers()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
        }
        let provider = self.provider;
        let body = response.bytes_stream().map(move |chunk| {
            chunk.map_err(|error| self.error("reading the response", error, started))
        });
        builder.body(ByteStream::new(body)).map_err(|error| {
            TransportError::new(
                provider,
                TransportErrorKind::Malformed,
                "unusable response head",
            )
            .with_source(error)
            .into()
        })
    }

    /// The one way a reqwest error met while `doing` something, in an
    /// exchange that began at `started`, becomes an [`Error`]. reqwest's own
    /// copy of the URL, which may hold credentials, is dropped before the error
    /// is read or kept; the redacted URL is the error's target, and the message
    /// does not name the host (a TLS error may), so that a server's client
    /// learns nothing of where its upstream lives
    /// ([`TransportError::client_message`]).
    fn error(&self, doing: &str, error: reqwest::Error, started: Instant) -> Error {
        let error = error.without_url();
        let kind = if error.is_timeout() {
            TransportErrorKind::Timeout
        } else if error.is_connect() {
            TransportErrorKind::Connect
        } else if error.is_builder() {
            TransportErrorKind::Request
        } else {
            // The connection closed or broke before or while the response came.
            TransportErrorKind::Interrupted
        };
        let detail = match kind {
            TransportErrorKind::Timeout => self.timeout_fired(&error, started),
            _ => None,
        }
        .unwrap_or_else(|| causes(&error));
        let detail = match self.target.uri.host() {
            Some(host) if !host.is_empty() => detail.replace(host, "the upstream host"),
            _ => detail,
        };
        let error = TransportError::new(self.provider, kind, format!("{doing}: {detail}"))
            .with_target(self.target.to_string())
            .with_source(error);
        self.secrets.scrub_error(error.into())
    }

    /// Which of the configured timeouts fired: the connect timeout while
    /// connecting, else the deadline once it has passed, else the read timeout.
    /// `None` for a client built elsewhere, whose timeouts are unknown.
    fn timeout_fired(&self, error: &reqwest::Error, started: Instant) -> Option<String> {
        let timeouts = self.timeouts.as_ref()?;
        Some(match self.deadline {
            _ if error.is_connect() => format!(
                "no connection within the connect_timeout of {:?}",
                timeouts.connect_timeout
            ),
            Some(deadline) if started.elapsed() >= deadline => {
                format!("not done within the request_timeout of {deadline:?}")
            }
            _ => format!(
                "no data within the read_timeout of {:?}",
                timeouts.read_timeout
            ),
        })
    }
}

/// What `error` says, with its causes: reqwest's own words say little.
fn causes(error: &reqwest::Error) -> String {
    let mut causes = Vec::new();
    let mut cause: Option<&dyn std::error::Error> = std::error::Error::source(error);
    while let Some(inner) = cause {
        causes.push(inner.to_string());
        cause = inner.source();
    }
    if causes.is_empty() {
        error.to_string()
    } else {
        causes.join(": ")
    }
}

//! The one HTTP provider service: a [`Wire`]'s lowering and lifting joined to a
//! transport, with the shared configuration, headers and body decoding.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use ::http::header::{ACCEPT, CONTENT_TYPE};
use bytes::Bytes;
use futures::StreamExt;
use tower::{Service, ServiceExt};

use super::body::BodyDecoder;
use super::config::ProviderConfig;
use super::error::{TransportError, TransportErrorKind};
use super::media;
use super::redact::{Secrets, redact_url};
use super::traced::{Traced, attempt_span, forwarded};
use super::transport::{
    ByteStream, HttpRequest, HttpResponse, HttpTransport, Streaming, move_url_credentials,
};
use super::unanswered::unanswered_as_user;
use super::wire::{LiftCount, Wire};
use crate::service::{IntoEvents, MachineStream, OutputCheck, ReplyFuture};
use crate::store::{self, MediaStore};
use crate::{ChatRequest, Error, Message, Reply};

/// A model provider over HTTP: a `Service<ChatRequest, Response = Reply>`
/// speaking the wire `W` over the transport `T`.
///
/// In streaming mode the call resolves when the response headers arrive and the
/// reply streams deltas; in non-streaming mode it resolves with the whole reply
/// as complete messages. HTTP errors fail the call with [`Error::Provider`]; a
/// stream that breaks ends the reply with [`Error::Transport`] (or `Provider`
/// for an error object inside the stream). Errors made of the upstream's words
/// show none of the credentials of the configuration
/// ([`ProviderConfig::secrets`], scrubbed from an error inside a reply; the
/// [`HttpTransport`] scrubs those of each request from the errors it makes).
/// Wrap it in a
/// `lmstack::retry::RetryLayer` (feature `retry`) to retry calls that fail
/// before their first event.
#[derive(Clone, Debug)]
pub struct Provider<W, T = HttpTransport> {
    config: Arc<ProviderConfig<W>>,
    /// The configuration's credentials, scrubbed from the errors of replies.
    secrets: Secrets,
    transport: T,
}

impl<W: Wire> Provider<W, HttpTransport> {
    /// The provider on its own HTTP transport.
    pub fn new(config: ProviderConfig<W>) -> Result<Self, Error> {
        let transport = HttpTransport::new(W::KIND.name(), config.http.clone())?;
        Ok(Self::with_transport(config, transport))
    }
}

impl<W: Wire, T> Provider<W, T> {
    /// The provider on the given transport (any `Service<HttpRequest>`).
    pub fn with_transport(config: ProviderConfig<W>, transport: T) -> Self {
        Provider {
            secrets: config.secrets(),
            config: Arc::new(config),
            transport,
        }
    }

    crate::service::inner_service_accessors!(transport: T);

    /// The configuration.
    pub fn config(&self) -> &ProviderConfig<W> {
        &self.config
    }

    /// The HTTP request for `request`: lowered body, endpoint and headers (the
    /// base URL's user and password moved to a header: [`move_url_credentials`]),
    /// marked [`Streaming`] in streaming mode. Media by reference is resolved
    /// first, through [`ProviderConfig::media_store`].
    pub fn http_request(&self, request: ChatRequest) -> Result<HttpRequest, Error> {
        self.http_request_at(request, SystemTime::now())
    }

    /// [`http_request`](Self::http_request), authorized at `now` (a signature
    /// over the request holds the time it was made).
    pub fn http_request_at(
        &self,
        request: ChatRequest,
        now: SystemTime,
    ) -> Result<HttpRequest, Error> {
        let request = self.sendable(request, Pairing::Checked)?;
        let wire = &self.config.wire;
        let body = wire.lower(&request)?;
        let mut http_request = self.post(&request, &wire.path(&request), &body, now)?;
        if request.options.stream {
            http_request.extensions_mut().insert(Streaming);
        }
        Ok(http_request)
    }

    /// The HTTP request that asks the provider to count `request`'s input
    /// tokens ([`Wire::lower_count`]), authorized at `now`, and how the count
    /// is read from its answer; an error of status 501 where the provider
    /// counts none.
    pub fn count_request_at(
        &self,
        mut request: ChatRequest,
        now: SystemTime,
    ) -> Result<(HttpRequest, LiftCount), Error> {
        request.options.stream = false;
        if !W::COUNTS_UNANSWERED_RESULTS {
            request.messages = unanswered_as_user(request.messages);
        }
        let request = self.sendable(request, Pairing::Loose)?;
        let Some(count) = self.config.wire.lower_count(&request) else {
            return Err(Error::Refused {
                status: 501,
                message: format!(
                    "{}: the provider has no endpoint that counts tokens",
                    W::KIND.name()
                ),
            });
        };
        let count = count?;
        Ok((
            self.post(&request, &count.path, &count.body, now)?,
            count.lift,
        ))
    }

    /// `request` made ready to lower: its model filled in from the
    /// configuration, checked (its tool results as `pairing` says), its media
    /// by reference resolved.
    fn sendable(&self, mut request: ChatRequest, pairing: Pairing) -> Result<ChatRequest, Error> {
        let config = &self.config;
        if request.options.model.is_none() {
            request.options.model.clone_from(&config.model);
        }
        if W::NEEDS_MODEL && request.options.model.as_deref().is_none_or(str::is_empty) {
            return Err(Error::InvalidRequest(format!(
                "{}: the request names no model; name one in the request or with `ProviderConfig::model`",
                W::KIND.name()
            )));
        }
        check_sendable(W::KIND.name(), &request.messages, pairing)?;
        resolve_references(
            W::KIND.name(),
            &mut request.messages,
            config.media_store.as_deref(),
        )?;
        Ok(request)
    }

    /// The POST of `body` to `path` for `request`, with the headers: the key
    /// (the base URL's user and password moved to a header:
    /// [`move_url_credentials`]), the configuration's, the wire's.
    fn post(
        &self,
        request: &ChatRequest,
        path: &str,
        body: &serde_json::Value,
        now: SystemTime,
    ) -> Result<HttpRequest, Error> {
        let body = serde_json::to_vec(body).map_err(|e| Error::json("request body", e))?;
        self.post_bytes(request, path, Bytes::from(body), now)
    }

    /// The HTTP request that forwards `body`, a client's request body written
    /// in this wire already, to the endpoint of `head` (its model and mode;
    /// its messages are not read): the same endpoint, key and headers as
    /// [`http_request_at`](Self::http_request_at) gives, marked [`Streaming`]
    /// in streaming mode — nothing of the body is read or changed.
    ///
    /// ```
    /// use lmstack::ChatRequest;
    /// use lmstack::provider::ApiKey;
    /// use lmstack::provider::openai_chat::{OpenAi, OpenAiConfig};
    ///
    /// let config =
    ///     OpenAiConfig::new("http://127.0.0.1:8080/v1").api_key(ApiKey::new("sk-upstream"));
    /// let provider = OpenAi::new(config)?;
    /// let mut head = ChatRequest::new(vec![]);
    /// head.options.model = Some("qwen3-8b".into());
    /// let body = bytes::Bytes::from_static(br#"{"model":"qwen3-8b","messages":[]}"#);
    /// let request = provider.forward_request(&head, body.clone(), std::time::SystemTime::now())?;
    /// assert_eq!(request.uri(), "http://127.0.0.1:8080/v1/chat/completions");
    /// assert_eq!(request.headers()["authorization"], "Bearer sk-upstream");
    /// assert_eq!(request.body(), &body);
    /// # Ok::<(), lmstack::Error>(())
    /// ```
    pub fn forward_request(
        &self,
        head: &ChatRequest,
        body: Bytes,
        now: SystemTime,
    ) -> Result<HttpRequest, Error> {
        let mut http_request = self.post_bytes(head, &self.config.wire.path(head), body, now)?;
        if head.options.stream {
            http_request.extensions_mut().insert(Streaming);
        }
        Ok(http_request)
    }

    /// Sends `body` as [`forward_request`](Self::forward_request) builds it,
    /// on a clone of the transport: the upstream's answer as it comes (an
    /// error status is an error, as for every call). Each is an attempt span,
    /// as each [`call`](Service::call) is; a failure is recorded there, and
    /// an answer carries the span on (in its extensions), for whoever reads
    /// it to record what it said.
    pub fn forward(
        &self,
        head: &ChatRequest,
        body: Bytes,
    ) -> impl Future<Output = Result<HttpResponse, Error>> + Send + 'static
    where
        T: Service<HttpRequest, Response = HttpResponse, Error = Error> + Clone + Send + 'static,
        T::Future: Send,
    {
        let config = &self.config;
        let model = head.options.model.as_ref().or(config.model.as_ref());
        let span = attempt_span(W::KIND, model.map_or("", String::as_str), &config.base_url);
        let prepared = self.forward_request(head, body, SystemTime::now());
        let transport = self.transport.clone();
        let sending = async move { transport.oneshot(prepared?).await };
        async move { forwarded(span, sending.await) }
    }

    /// The POST of the bytes `body` to `path` for `request`, with the headers
    /// of [`post`](Self::post).
    fn post_bytes(
        &self,
        request: &ChatRequest,
        path: &str,
        body: Bytes,
        now: SystemTime,
    ) -> Result<HttpRequest, Error> {
        let config = &self.config;
        let url = config.url(path);
        let accept = match request.options.stream {
            true => "text/event-stream",
            false => "application/json",
        };
        let mut http_request = ::http::Request::post(&url)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, accept)
            .body(body)
            .map_err(|error| {
                TransportError::new(
                    W::KIND.name(),
                    TransportErrorKind::Request,
                    "invalid request",
                )
                .with_target(format!("POST {}", redact_url(&url)))
                .with_source(error)
            })?;
        if let Some(key) = &config.api_key {
            config.wire.authorize(key, &mut http_request, now)?;
        }
        http_request.headers_mut().extend(config.headers.clone());
        config.wire.headers(request, http_request.headers_mut())?;
        move_url_credentials(W::KIND.name(), &mut http_request)?;
        Ok(http_request)
    }

    /// Counts `request`'s input tokens as the provider does, without running
    /// it: the request of [`count_request_at`](Self::count_request_at), sent
    /// on a clone of the transport, its answer read whole (within
    /// [`ProviderConfig::max_body_bytes`]).
    pub fn count_tokens(
        &self,
        request: ChatRequest,
    ) -> impl Future<Output = Result<u64, Error>> + Send + 'static
    where
        T: Service<HttpRequest, Response = HttpResponse, Error = Error> + Clone + Send + 'static,
        T::Future: Send,
    {
        let prepared = self.count_request_at(request, SystemTime::now());
        let transport = self.transport.clone();
        let limit = self.config.max_body_bytes;
        let secrets = self.secrets.clone();
        async move {
            let (http_request, lift) = prepared?;
            let response = transport.oneshot(http_request).await?;
            let body = read_whole(response.into_body(), limit, W::KIND.name()).await?;
            lift(&body).map_err(|error| secrets.scrub_error(error))
        }
    }
}

/// A body read whole, within `limit` bytes.
async fn read_whole(
    mut body: ByteStream,
    limit: usize,
    stage: &'static str,
) -> Result<Vec<u8>, Error> {
    let mut read = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk?;
        if read.len() + chunk.len() > limit {
            return Err(Error::LimitExceeded {
                stage,
                what: "the response body",
                limit,
            });
        }
        read.extend_from_slice(&chunk);
    }
    Ok(read)
}

impl<W, T> Service<ChatRequest> for Provider<W, T>
where
    W: Wire,
    T: Service<HttpRequest, Response = HttpResponse, Error = Error>,
{
    type Response = Reply;
    type Error = Error;
    type Future = Traced<ReplyFuture<T::Future, ReadBody<W::Lifter>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.transport.poll_ready(cx)
    }

    fn call(&mut self, request: ChatRequest) -> Self::Future {
        let config = &self.config;
        let model = request.options.model.as_ref().or(config.model.as_ref());
        let span = attempt_span(W::KIND, model.map_or("", String::as_str), &config.base_url);
        let streaming = request.options.stream;
        let check = match request
            .options
            .response_format
            .as_ref()
            .map(OutputCheck::new)
        {
            Some(Err(error)) => return Traced::new(ReplyFuture::failed(error), span),
            Some(Ok(check)) => Some(check),
            None => None,
        };
        let read = ReadBody {
            check,
            streaming,
            max_event_bytes: config.max_event_bytes,
            max_body_bytes: config.max_body_bytes,
            max_tool_calls: config.max_tool_calls,
            secrets: self.secrets.clone(),
            lifter: config.wire.lifter(),
        };
        let future = match self.http_request(request) {
            Ok(http_request) => {
                ReplyFuture::new(self.transport.call(http_request), read, streaming)
            }
            Err(error) => ReplyFuture::failed(error),
        };
        Traced::new(future, span)
    }
}

/// Whether a request's tool results must each answer a call before them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pairing {
    /// They must: a request to run.
    Checked,
    /// They need not: a fragment to count, for a wire that counts it so
    /// ([`Wire::COUNTS_UNANSWERED_RESULTS`]; for another, the results that
    /// answer nothing were made user messages: [`unanswered_as_user`]).
    Loose,
}

/// What no wire takes, refused before a byte is sent: a request without
/// messages, and (`Pairing::Checked`) a tool result that answers no call made
/// before it ([`Error::ToolPairing`], naming the message and the call).
fn check_sendable(
    provider: &'static str,
    messages: &[Message],
    pairing: Pairing,
) -> Result<(), Error> {
    if messages.is_empty() {
        return Err(Error::InvalidRequest(format!(
            "{provider}: the request holds no messages"
        )));
    }
    if pairing == Pairing::Loose {
        return Ok(());
    }
    let mut calls = std::collections::HashSet::new();
    for (index, message) in messages.iter().enumerate() {
        calls.extend(message.calls().iter().map(|call| call.id.as_str()));
        let unpaired = message
            .results()
            .iter()
            .find(|result| !calls.contains(result.call_id.as_str()));
        if let Some(result) = unpaired {
            return Err(Error::ToolPairing {
                stage: provider,
                message: index,
                call_id: result.call_id.clone(),
                problem: "a tool result answers no call made before it",
            });
        }
    }
    Ok(())
}

/// Replaces the media by reference in `messages` by their bytes from `store`,
/// inline, so that no wire ever sees a reference: the one place they are
/// resolved for every provider. Without a store, a reference is an error.
fn resolve_references(
    provider: &str,
    messages: &mut [Message],
    media_store: Option<&dyn MediaStore>,
) -> Result<(), Error> {
    match media_store {
        Some(media_store) => store::rehydrate(messages, media_store).map_err(|error| {
            Error::InvalidRequest(format!(
                "{provider}: cannot send media by reference: {error}"
            ))
        }),
        None => match store::first_reference(messages) {
            Some(reference) => Err(media::unresolved(provider, &reference)),
            None => Ok(()),
        },
    }
}

/// How a provider makes its reply of the HTTP response: the body, decoded as it
/// arrives by the decoder its `Content-Type` calls for, within the limits, by
/// the wire's lifter `L`, the configuration's credentials scrubbed from its
/// errors. (Public only as a part of [`ReplyFuture`]'s type.)
pub struct ReadBody<L> {
    streaming: bool,
    max_event_bytes: usize,
    max_body_bytes: usize,
    max_tool_calls: usize,
    secrets: Secrets,
    lifter: L,
    check: Option<OutputCheck>,
}

impl<L: super::body::Lift> IntoEvents for ReadBody<L> {
    type Response = HttpResponse;
    type Events = MachineStream<ByteStream, BodyDecoder<L>>;

    fn into_events(self, response: HttpResponse) -> Self::Events {
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok());
        let decoder = BodyDecoder::for_content_type(self.lifter, content_type, self.streaming)
            .with_limits(self.max_event_bytes, self.max_body_bytes)
            .with_max_tool_calls(self.max_tool_calls)
            .with_secrets(self.secrets)
            .with_output_check(self.check);
        MachineStream::new(response.into_body(), decoder)
    }
}

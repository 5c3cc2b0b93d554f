//! Each call of a provider is one upstream attempt, and one span of the
//! OpenTelemetry GenAI conventions (`chat {model}`, a client span): the wire's
//! provider name, the model sent, the server's address and port, then the
//! tokens, the finish reasons and the error that ended the call. It is a
//! child of the span the call was made in (the gateway's request span), so a
//! retry or a fallback to another deployment is another attempt span under the
//! same request. A call made where no subscriber wants the span costs one
//! check.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;

use crate::gen_ai::{Observed, error_type, gen_ai_span, record_error};
use crate::{Error, Reply};

use super::Kind;
use super::transport::HttpResponse;

pin_project! {
    /// A provider's call and its attempt span: the future of
    /// [`Provider`](super::Provider)'s calls. (Public only as a part of its
    /// type.)
    pub struct Traced<F> {
        #[pin]
        call: F,
        // `None` where no subscriber wants it.
        span: Option<tracing::Span>,
    }
}

/// A new attempt span: a call to the upstream `base_url` of the wire `kind`,
/// for the model `model`; `None` where no subscriber wants it.
pub(crate) fn attempt_span(kind: Kind, model: &str, base_url: &str) -> Option<tracing::Span> {
    let span = gen_ai_span!(
        "client",
        kind.gen_ai_provider_name(),
        model,
        server.address = tracing::field::Empty,
        server.port = tracing::field::Empty,
    );
    if span.is_disabled() {
        return None;
    }
    if let Some((address, port)) = server(base_url) {
        span.record("server.address", address.as_str());
        span.record("server.port", i64::from(port));
    }
    Some(span)
}

impl<F> Traced<F> {
    /// The call `call` in the attempt span `span` (made by [`attempt_span`]).
    pub(crate) fn new(call: F, span: Option<tracing::Span>) -> Self {
        Traced { call, span }
    }
}

impl<F: Future<Output = Result<Reply, Error>>> Future for Traced<F> {
    type Output = Result<Reply, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let called = ready!(this.call.poll(cx));
        let Some(span) = this.span.take() else {
            return Poll::Ready(called);
        };
        Poll::Ready(match called {
            Ok(reply) => {
                let mut attempt = Attempt {
                    span,
                    observed: Observed::new(false),
                };
                Ok(reply.adapt(move |item| {
                    if let Some(item) = &item {
                        attempt.observed.observe(item);
                    }
                    item
                }))
            }
            Err(error) => {
                record_error(&span, &error_type(&error));
                Err(error)
            }
        })
    }
}

/// An attempt's span and what its reply said, recorded when the reply is
/// dropped (read to its end, or given up).
struct Attempt {
    span: tracing::Span,
    observed: Observed,
}

impl Drop for Attempt {
    fn drop(&mut self) {
        self.observed.record(&self.span);
    }
}

/// The attempt span of a forwarded request ([`Provider::forward`](super::Provider::forward)),
/// in its answer's extensions while the attempt succeeded: whoever reads the
/// answer records what it said there, and closes it by dropping it.
/// (Read by the gateway: unread in a build without it.)
#[derive(Clone, Debug)]
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) struct AttemptSpan(pub(crate) tracing::Span);

/// `sent`'s outcome in the attempt span `span`: an error recorded there (and
/// the span closed), or the answer carrying it ([`AttemptSpan`]).
pub(crate) fn forwarded(
    span: Option<tracing::Span>,
    sent: Result<HttpResponse, Error>,
) -> Result<HttpResponse, Error> {
    let Some(span) = span else {
        return sent;
    };
    match sent {
        Ok(mut response) => {
            response.extensions_mut().insert(AttemptSpan(span));
            Ok(response)
        }
        Err(error) => {
            record_error(&span, &error_type(&error));
            Err(error)
        }
    }
}

/// The host and port of `base_url` (the scheme's port where it names none).
fn server(base_url: &str) -> Option<(String, u16)> {
    let uri: ::http::Uri = base_url.parse().ok()?;
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().or(match uri.scheme_str()? {
        "https" => Some(443),
        "http" => Some(80),
        _ => None,
    })?;
    Some((host.to_owned(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_is_the_base_urls_host_and_port() {
        let server = |url| server(url).map(|(host, port)| format!("{host} {port}"));
        assert_eq!(
            server("https://api.openai.com/v1").as_deref(),
            Some("api.openai.com 443")
        );
        assert_eq!(
            server("http://user:pw@127.0.0.1:8000/v1?x=1").as_deref(),
            Some("127.0.0.1 8000")
        );
        assert_eq!(server("http://[::1]/").as_deref(), Some("::1 80"));
        assert_eq!(server("not a url"), None);
    }
}

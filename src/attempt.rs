//! What the layers that make a call again share — the retry layer and the
//! deployments: which failures are worth another attempt ([`is_retryable`]),
//! and [`Attempt`], one call followed until its first event is in hand (or,
//! in non-streaming mode, until it is complete), so that a failure *before*
//! anything was delivered can be told from one after.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::{Stream, StreamExt};
use pin_project_lite::pin_project;

use crate::provider::{ProviderError, TransportErrorKind};
use crate::{Error, Event, Reply};

/// Decides whether a failed call is worth another attempt.
///
/// Implemented for every closure `Fn(&Error) -> bool + Send + Sync + 'static`;
/// [`is_retryable`] is the default.
pub trait Classify: Send + Sync + 'static {
    /// True when a call that failed with `error` (before its first event) may
    /// succeed if made again.
    fn is_retryable(&self, error: &Error) -> bool;
}

impl<F> Classify for F
where
    F: Fn(&Error) -> bool + Send + Sync + 'static,
{
    fn is_retryable(&self, error: &Error) -> bool {
        self(error)
    }
}

/// The default classifier: true for failures worth another attempt.
///
/// - provider errors: the provider's own `x-should-retry` when it sent one;
///   otherwise HTTP 408, 409, 429 and 5xx, an overloaded provider, and a
///   `server_error` sent inside a stream. An error sent inside a stream counts
///   as the HTTP status its numeric `code` names, if it has one (vLLM and Gemini
///   send `"code": 503`);
/// - transport errors: failed connections, timeouts, interrupted and truncated
///   responses (not malformed ones, nor requests that could not be built);
/// - anything else: no.
pub fn is_retryable(error: &Error) -> bool {
    if let Some(error) = error.provider_error() {
        return error.should_retry.unwrap_or_else(|| {
            matches!(status_of(error), 408 | 409 | 429 | 500..=599)
                || error.is_overloaded()
                || error.error_type.as_deref() == Some("server_error")
        });
    }
    error.transport_error().is_some_and(|error| {
        matches!(
            error.kind,
            TransportErrorKind::Connect
                | TransportErrorKind::Timeout
                | TransportErrorKind::Interrupted
                | TransportErrorKind::Truncated
        )
    })
}

/// The HTTP status `error` stands for: its response's, or for an error sent
/// inside a successful stream, the status its numeric `code` names.
fn status_of(error: &ProviderError) -> u16 {
    let named = || error.code.as_deref()?.parse::<u16>().ok();
    match error.status {
        200..=299 => named().unwrap_or(error.status),
        status => status,
    }
}

/// How an [`Attempt`] ended.
pub(crate) enum Outcome {
    /// The reply delivered something: a streaming reply with its first event
    /// put back in front (or one that ended empty), or a complete
    /// non-streaming reply. It is never made again.
    Delivered(Reply),
    /// The call failed before it delivered anything or had any effect; `kept`
    /// is what a non-streaming reply made before its error (no tool result
    /// among it), handed back with the error if the call is not made again.
    Failed {
        error: Error,
        kept: Vec<Result<Event, Error>>,
    },
}

impl Outcome {
    /// The result of a call that is not made again.
    pub(crate) fn into_result(self) -> Result<Reply, Error> {
        match self {
            Outcome::Delivered(reply) => Ok(reply),
            Outcome::Failed { error, kept } if kept.is_empty() => Err(error),
            Outcome::Failed { error, mut kept } => {
                kept.push(Err(error));
                Ok(Reply::from_results(kept))
            }
        }
    }
}

pin_project! {
    /// One call of an inner service, followed until its reply delivered
    /// something ([`Outcome::Delivered`]) or failed before it did
    /// ([`Outcome::Failed`]).
    pub(crate) struct Attempt<F> {
        // Whether the request asked for a streaming reply (for the warning
        // about a broken contract).
        streaming: bool,
        stage: &'static str,
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        // The call is under way.
        Calling { #[pin] call: F },
        // A non-streaming reply is being read (it is in memory: this takes one poll).
        Reading { reply: Reply, items: Vec<Result<Event, Error>> },
        // A streaming reply: waiting for its first event.
        FirstEvent { reply: Reply },
        // The attempt has resolved.
        Done,
    }
}

impl<F> Attempt<F> {
    /// Follows `call`, made for a request whose `stream` option is `streaming`,
    /// by the layer `stage` (named in the warnings).
    pub(crate) fn new(call: F, streaming: bool, stage: &'static str) -> Self {
        Attempt {
            streaming,
            stage,
            state: State::Calling { call },
        }
    }
}

impl<F, E> Future for Attempt<F>
where
    F: Future<Output = Result<Reply, E>>,
    E: Into<Error>,
{
    type Output = Outcome;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome> {
        let mut this = self.project();
        loop {
            let (error, kept) = match this.state.as_mut().project() {
                StateProj::Calling { call } => match ready!(call.poll(cx)) {
                    Err(error) => (error.into(), Vec::new()),
                    Ok(reply) if reply.is_ready() => {
                        let items = Vec::with_capacity(reply.size_hint().0);
                        this.state.set(State::Reading { reply, items });
                        continue;
                    }
                    Ok(reply) => {
                        if !*this.streaming {
                            // Not a panic: the reply is still read, as a stream.
                            tracing::warn!(
                                stage = *this.stage,
                                "a non-streaming request got a streaming reply (a layer \
                                 under this one broke the non-streaming contract; see \
                                 `Reply::map_events`): made again only before its first \
                                 event"
                            );
                        }
                        this.state.set(State::FirstEvent { reply });
                        continue;
                    }
                },
                StateProj::Reading { reply, items } => {
                    while let Some(item) = ready!(reply.poll_next_unpin(cx)) {
                        items.push(item);
                    }
                    let mut items = std::mem::take(items);
                    match failure(&mut items) {
                        Some(error) => (error, items),
                        None => {
                            this.state.set(State::Done);
                            return Poll::Ready(Outcome::Delivered(Reply::from_results(items)));
                        }
                    }
                }
                StateProj::FirstEvent { reply } => match ready!(reply.poll_next_unpin(cx)) {
                    Some(Err(error)) => (error, Vec::new()),
                    Some(Ok(first)) => {
                        let rest = std::mem::replace(reply, Reply::from_events([]));
                        this.state.set(State::Done);
                        return Poll::Ready(Outcome::Delivered(Reply::from_stream(Resumed {
                            first: Some(first),
                            rest,
                        })));
                    }
                    None => {
                        this.state.set(State::Done);
                        return Poll::Ready(Outcome::Delivered(Reply::from_events([])));
                    }
                },
                StateProj::Done => (
                    Error::stage(this.stage, "an attempt was polled after it completed"),
                    Vec::new(),
                ),
            };
            this.state.set(State::Done);
            return Poll::Ready(Outcome::Failed { error, kept });
        }
    }
}

/// The error that failed a non-streaming reply, taken out of its `items`, if the
/// call may be made again for it: the reply ended with an error, and nothing
/// before it had effects — no tool ran (no message holds a tool result). What
/// came before (text, reasoning) had none, and is made again by the next attempt.
fn failure(items: &mut Vec<Result<Event, Error>>) -> Option<Error> {
    let had_effects = items.iter().any(
        |item| matches!(item, Ok(Event::Message { message }) if !message.results().is_empty()),
    );
    match items.last() {
        Some(Err(_)) if !had_effects => items.pop()?.err(),
        _ => None,
    }
}

/// A streaming reply with its first event, read to decide on a retry, put back in
/// front.
struct Resumed {
    first: Option<Event>,
    rest: Reply,
}

impl Stream for Resumed {
    type Item = Result<Event, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        match this.first.take() {
            Some(first) => Poll::Ready(Some(Ok(first))),
            None => this.rest.poll_next_unpin(cx),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let first = usize::from(self.first.is_some());
        let (low, high) = self.rest.size_hint();
        (
            low.saturating_add(first),
            high.and_then(|high| high.checked_add(first)),
        )
    }
}

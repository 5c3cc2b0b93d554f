//! The one future of the layers that make their reply from a response: wait for
//! the response, turn it into the layer's events, then hand them on as they come
//! (streaming) or complete them into the non-streaming form (non-streaming).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project_lite::pin_project;

use super::machine::{Machine, MachineStream};
use super::reply::{Complete, Reply};
use crate::error::Error;
use crate::message::Event;

/// What a layer makes of the response of the call it waits for: the events of its
/// own reply. A machine over events is one (it runs over the inner reply); the
/// function layer, the tool loop and the providers have their own.
pub trait IntoEvents: Send + 'static {
    /// The response waited for (the inner reply, an HTTP response).
    type Response;
    /// The layer's events.
    type Events: Stream<Item = Result<Event, Error>> + Unpin + Send + 'static;

    /// The layer's events, from the response.
    fn into_events(self, response: Self::Response) -> Self::Events;
}

impl<M: Machine<In = Event, Out = Event>> IntoEvents for M {
    type Response = Reply;
    type Events = MachineStream<Reply, M>;

    fn into_events(self, reply: Reply) -> Self::Events {
        MachineStream::new(reply, self)
    }
}

pin_project! {
    /// The future of a layer whose reply is made from a response: resolves, once
    /// the response `F` gives arrives, to a streaming reply of the events `T`
    /// makes of it, or — in non-streaming mode — to those events completed
    /// ([`Complete`]). One piece for every such layer, so both modes come from
    /// the same events everywhere.
    pub struct ReplyFuture<F, T: IntoEvents> {
        #[pin]
        state: State<F, T>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, T: IntoEvents> {
        Waiting { #[pin] response: F, then: Option<T>, stream: bool },
        Completing { complete: Complete<T::Events> },
        Failed { error: Option<Error> },
        Done,
    }
}

impl<F, T: IntoEvents> ReplyFuture<F, T> {
    /// Waits for `response`, then makes the reply with `then`: streamed when
    /// `stream`, complete otherwise.
    pub fn new(response: F, then: T, stream: bool) -> Self {
        ReplyFuture {
            state: State::Waiting {
                response,
                then: Some(then),
                stream,
            },
        }
    }

    /// A future that fails with `error` (the call could not be made).
    pub fn failed(error: Error) -> Self {
        ReplyFuture {
            state: State::Failed { error: Some(error) },
        }
    }
}

impl<F, E, T> Future for ReplyFuture<F, T>
where
    F: Future<Output = Result<T::Response, E>>,
    E: Into<Error>,
    T: IntoEvents,
{
    type Output = Result<Reply, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Waiting {
                    response,
                    then,
                    stream,
                } => {
                    let outcome = ready!(response.poll(cx)).map_err(Into::into);
                    let (then, stream) = (then.take(), *stream);
                    let events = match (outcome, then) {
                        (Ok(response), Some(then)) => then.into_events(response),
                        (Err(error), _) => {
                            state.set(State::Done);
                            return Poll::Ready(Err(error));
                        }
                        (Ok(_), None) => {
                            state.set(State::Done);
                            return Poll::Ready(Err(polled_again()));
                        }
                    };
                    if stream {
                        state.set(State::Done);
                        return Poll::Ready(Ok(Reply::from_stream(events)));
                    }
                    state.set(State::Completing {
                        complete: Complete::new(events),
                    });
                }
                StateProj::Completing { complete } => {
                    let reply = ready!(Pin::new(complete).poll(cx));
                    state.set(State::Done);
                    return Poll::Ready(reply);
                }
                StateProj::Failed { error } => {
                    let error = error.take().unwrap_or_else(polled_again);
                    state.set(State::Done);
                    return Poll::Ready(Err(error));
                }
                StateProj::Done => return Poll::Ready(Err(polled_again())),
            }
        }
    }
}

/// The error of a future polled after it resolved: a caller's mistake, told
/// rather than a panic.
fn polled_again() -> Error {
    Error::stage("reply future", "polled after it resolved")
}

#[cfg(test)]
mod tests {
    use std::future::ready;
    use std::task::Waker;

    use super::*;
    use crate::message::Message;
    use crate::service::Output;

    /// Hands every event on unchanged.
    struct Identity;

    impl Machine for Identity {
        type In = Event;
        type Out = Event;
        fn push(&mut self, event: Event, out: &mut Output) -> Result<(), Error> {
            out.push(event);
            Ok(())
        }
    }

    type Ready = std::future::Ready<Result<Reply, Error>>;

    fn poll(future: &mut ReplyFuture<Ready, Identity>) -> Poll<Result<Reply, Error>> {
        Pin::new(future).poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn both_modes_give_the_same_messages_and_a_second_poll_is_an_error() {
        for stream in [false, true] {
            let reply = Reply::from_events([Event::text("Hel"), Event::text("lo")]);
            let mut future = ReplyFuture::new(ready(Ok(reply)), Identity, stream);
            let Poll::Ready(Ok(reply)) = poll(&mut future) else {
                panic!("a ready response resolves at once")
            };
            assert_eq!(
                reply.is_ready(),
                !stream,
                "complete only when not streaming"
            );
            let messages = futures::executor::block_on(reply.collect()).unwrap();
            assert_eq!(messages, vec![Message::assistant("Hello")]);
            let Poll::Ready(Err(error)) = poll(&mut future) else {
                panic!("polled again: an error, not a panic")
            };
            assert!(
                error.to_string().contains("polled after it resolved"),
                "{error}"
            );
        }
    }

    #[test]
    fn a_failed_start_and_a_failed_response_fail_the_call() {
        let mut failed = ReplyFuture::<Ready, Identity>::failed(Error::stage("start", "no"));
        assert!(matches!(
            poll(&mut failed),
            Poll::Ready(Err(Error::Stage { stage: "start", .. }))
        ));
        let response = ready(Err(Error::stage("inner", "down")));
        let mut future = ReplyFuture::new(response, Identity, true);
        assert!(matches!(
            poll(&mut future),
            Poll::Ready(Err(Error::Stage { stage: "inner", .. }))
        ));
    }
}

//! The generic driver: runs a pure event state machine as a tower [`Layer`] and
//! [`Service`], in streaming and non-streaming mode alike.
//!
//! A layer that rewrites replies is written once, as a [`Machine`]: a synchronous,
//! IO-free state machine that takes the events of the inner service's reply and
//! pushes the events of its own reply, plus a [`finish`](Machine::finish) step at
//! the end. A [`MachineFactory`] starts one machine per request (and may adjust the
//! request on its way in). [`MachineLayer`] does the rest:
//!
//! - **streaming** (`options.stream == true`): every inner event goes through the
//!   machine as it arrives and its output is streamed at once;
//! - **non-streaming**: the whole inner reply goes through the *same* machine, and
//!   the output is joined into complete messages (plus the `finish` event).
//!
//! So both modes give the same messages by construction. When the inner reply
//! fails, the machine is finished first (so held-back output is not lost), then
//! the error is passed on and ends the reply.
//!
//! # Example: a layer that upper-cases assistant text
//!
//! ```
//! use lmstack::service::{Machine, MachineFactory, MachineLayer, Output};
//! use lmstack::testing::ScriptedModel;
//! use lmstack::{ChatRequest, Error, Event, Message};
//! use tower::{Layer, ServiceExt};
//!
//! #[derive(Clone)]
//! struct Uppercase;
//!
//! struct UppercaseMachine;
//!
//! impl MachineFactory for Uppercase {
//!     type Machine = UppercaseMachine;
//!     fn start(&self, _request: &mut ChatRequest) -> Result<UppercaseMachine, Error> {
//!         Ok(UppercaseMachine)
//!     }
//! }
//!
//! impl Machine for UppercaseMachine {
//!     fn push(&mut self, event: Event, out: &mut Output) -> Result<(), Error> {
//!         out.push(match event {
//!             Event::TextDelta(mut delta) => {
//!                 delta.text = delta.text.to_uppercase();
//!                 Event::TextDelta(delta)
//!             }
//!             Event::Message { message: Message::Text(mut text) } => {
//!                 text.text = text.text.to_uppercase();
//!                 Event::message(Message::Text(text))
//!             }
//!             other => other,
//!         });
//!         Ok(())
//!     }
//! }
//!
//! # futures::executor::block_on(async {
//! let model = ScriptedModel::new().reply("hello").reply("hello");
//! let service = MachineLayer::new(Uppercase).layer(model);
//! for stream in [false, true] {
//!     let request = ChatRequest::new(vec![Message::user("hi")]).streaming(stream);
//!     let reply = service.clone().oneshot(request).await.unwrap();
//!     assert_eq!(reply.collect().await.unwrap(), vec![Message::assistant("HELLO")]);
//! }
//! # });
//! ```

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::{Stream, StreamExt};
use pin_project_lite::pin_project;
use tower::{Layer, Service};

use crate::{ChatRequest, Error, Event, Joiner, Reply};

/// A pure state machine over the events of one reply.
pub trait Machine: Send + 'static {
    /// Takes one event of the inner reply and pushes any number of output events.
    ///
    /// An error ends the reply: the events pushed before it are delivered, then the
    /// error.
    fn push(&mut self, event: Event, out: &mut Output) -> Result<(), Error>;

    /// The inner reply ended (or failed): pushes what is still held back.
    fn finish(&mut self, out: &mut Output) -> Result<(), Error> {
        let _ = out;
        Ok(())
    }
}

/// Starts a [`Machine`] for each request; holds the layer's configuration.
pub trait MachineFactory: Clone + Send + Sync + 'static {
    /// The per-reply state machine.
    type Machine: Machine;

    /// Starts the machine for `request`, which it may adjust before the inner
    /// service sees it. An error fails the call without calling the inner service.
    fn start(&self, request: &mut ChatRequest) -> Result<Self::Machine, Error>;
}

/// The events a [`Machine`] hands out, in order.
#[derive(Debug, Default)]
pub struct Output {
    queue: VecDeque<Event>,
}

impl Output {
    /// An empty output queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Hands out one event.
    pub fn push(&mut self, event: Event) {
        self.queue.push_back(event);
    }

    /// Number of events not taken yet.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// True when no event is waiting.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Takes the next event.
    pub fn pop(&mut self) -> Option<Event> {
        self.queue.pop_front()
    }

    /// Takes all waiting events.
    pub fn drain(&mut self) -> impl Iterator<Item = Event> + '_ {
        self.queue.drain(..)
    }
}

impl Extend<Event> for Output {
    fn extend<I: IntoIterator<Item = Event>>(&mut self, events: I) {
        self.queue.extend(events);
    }
}

/// A [`Layer`] that runs the machines of a [`MachineFactory`] over the replies of
/// the service it wraps.
#[derive(Clone, Debug)]
pub struct MachineLayer<F> {
    factory: F,
}

impl<F> MachineLayer<F> {
    /// A layer from a factory.
    pub fn new(factory: F) -> Self {
        MachineLayer { factory }
    }
}

impl<S, F: Clone> Layer<S> for MachineLayer<F> {
    type Service = MachineService<S, F>;

    fn layer(&self, inner: S) -> Self::Service {
        MachineService::new(inner, self.factory.clone())
    }
}

/// The [`Service`] made by [`MachineLayer`].
#[derive(Clone, Debug)]
pub struct MachineService<S, F> {
    inner: S,
    factory: F,
}

impl<S, F> MachineService<S, F> {
    /// Wraps `inner`.
    pub fn new(inner: S, factory: F) -> Self {
        MachineService { inner, factory }
    }

    super::inner_service_accessors!();

    /// The factory (the layer's configuration).
    pub fn factory(&self) -> &F {
        &self.factory
    }
}

impl<S, F> Service<ChatRequest> for MachineService<S, F>
where
    S: Service<ChatRequest, Response = Reply>,
    S::Error: Into<Error>,
    F: MachineFactory,
{
    type Response = Reply;
    type Error = Error;
    type Future = ResponseFuture<S::Future, F::Machine>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut request: ChatRequest) -> Self::Future {
        let stream = request.options.stream;
        let state = match self.factory.start(&mut request) {
            Ok(machine) => State::Calling {
                future: self.inner.call(request),
                machine: Some(machine),
                stream,
            },
            Err(error) => State::Failed { error: Some(error) },
        };
        ResponseFuture { state }
    }
}

pin_project! {
    /// The future of [`MachineService`]: resolves to the rewritten reply. In
    /// non-streaming mode it reads the whole inner reply first.
    pub struct ResponseFuture<Fut, M> {
        #[pin]
        state: State<Fut, M>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<Fut, M> {
        Calling { #[pin] future: Fut, machine: Option<M>, stream: bool },
        Draining { events: MachineStream<M>, joiner: Joiner },
        Failed { error: Option<Error> },
    }
}

impl<Fut, E, M> Future for ResponseFuture<Fut, M>
where
    Fut: Future<Output = Result<Reply, E>>,
    E: Into<Error>,
    M: Machine,
{
    type Output = Result<Reply, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Calling {
                    future,
                    machine,
                    stream,
                } => {
                    let reply = ready!(future.poll(cx)).map_err(Into::into)?;
                    let machine = machine
                        .take()
                        .expect("ResponseFuture polled after completion");
                    let events = MachineStream::new(reply, machine);
                    if *stream {
                        return Poll::Ready(Ok(Reply::from_stream(events)));
                    }
                    state.set(State::Draining {
                        events,
                        joiner: Joiner::new(),
                    });
                }
                StateProj::Draining { events, joiner } => {
                    while let Some(item) = ready!(events.poll_next_unpin(cx)) {
                        joiner.push(item?);
                    }
                    let events = std::mem::take(joiner).finish_events();
                    return Poll::Ready(Ok(Reply::from_events(events)));
                }
                StateProj::Failed { error } => {
                    let error = error
                        .take()
                        .expect("ResponseFuture polled after completion");
                    return Poll::Ready(Err(error));
                }
            }
        }
    }
}

/// A reply run through a machine: the stream behind streaming replies of
/// [`MachineService`], and what its non-streaming mode drains.
pub struct MachineStream<M> {
    inner: Reply,
    machine: M,
    out: Output,
    error: Option<Error>,
    ended: bool,
}

impl<M: Machine> MachineStream<M> {
    /// Runs `reply` through `machine`.
    pub fn new(reply: Reply, machine: M) -> Self {
        MachineStream {
            inner: reply,
            machine,
            out: Output::new(),
            error: None,
            ended: false,
        }
    }

    fn end(&mut self, error: Option<Error>) {
        self.ended = true;
        match (self.machine.finish(&mut self.out), error) {
            (_, Some(error)) => self.error = Some(error),
            (Err(error), None) => self.error = Some(error),
            (Ok(()), None) => {}
        }
    }
}

// Nothing in a `MachineStream` is ever pinned in place.
impl<M> Unpin for MachineStream<M> {}

impl<M: Machine> Stream for MachineStream<M> {
    type Item = Result<Event, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(event) = this.out.pop() {
                return Poll::Ready(Some(Ok(event)));
            }
            if let Some(error) = this.error.take() {
                return Poll::Ready(Some(Err(error)));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            match ready!(this.inner.poll_next_unpin(cx)) {
                Some(Ok(event)) => {
                    if let Err(error) = this.machine.push(event, &mut this.out) {
                        this.ended = true;
                        this.error = Some(error);
                    }
                }
                Some(Err(error)) => this.end(Some(error)),
                None => this.end(None),
            }
        }
    }
}

impl<M> std::fmt::Debug for MachineStream<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MachineStream")
            .field("queued", &self.out.len())
            .field("ended", &self.ended)
            .finish()
    }
}

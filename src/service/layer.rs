//! A [`Machine`] over events as a tower [`Layer`] and [`Service`], in streaming
//! and non-streaming mode alike.
//!
//! A layer that rewrites replies is written once, as a [`Machine`] whose input
//! and output are [`Event`](crate::Event)s, plus a [`MachineFactory`] that
//! starts one machine per request (and may adjust the request on its way in).
//! [`MachineLayer`] does the rest:
//!
//! - **streaming** (`options.stream == true`): the inner reply runs through the
//!   machine in a [`MachineStream`](super::MachineStream), its output streamed
//!   at once;
//! - **non-streaming**: the *same* stream, each run of deltas joined into one
//!   `message` event (`usage` and `finish` as they came) by
//!   [`Complete`](super::Complete); [`ReplyFuture`] does both.
//!
//! So both modes give the same messages by construction. A layer that looks at
//! or rewrites each event on its own needs no machine: a plain tower layer over
//! [`Reply::map_events`](super::Reply::map_events) or
//! [`Reply::inspect`](super::Reply::inspect) keeps the reply's form too; check
//! either kind with
//! [`testing::assert_modes_agree`](crate::testing::assert_modes_agree).
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
//!     type In = Event;
//!     type Out = Event;
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

use std::task::{Context, Poll};

use tower::{Layer, Service};

use super::machine::Machine;
use super::reply::Reply;
use super::reply_future::ReplyFuture;
use super::request::ChatRequest;
use super::stage::ChatService;
use crate::error::Error;
use crate::message::Event;

/// Starts a [`Machine`] for each request; holds the layer's configuration.
pub trait MachineFactory: Clone + Send + Sync + 'static {
    /// The per-reply state machine.
    type Machine: Machine<In = Event, Out = Event>;

    /// Starts the machine for `request`, which it may adjust before the inner
    /// service sees it. An error fails the call without calling the inner service.
    fn start(&self, request: &mut ChatRequest) -> Result<Self::Machine, Error>;
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

/// Makes a [`MachineFactory`] a tower [`Layer`] itself, so that its
/// configuration goes into `ServiceBuilder::layer` as it is; the service is a
/// [`MachineService`]. (A factory of another crate uses [`MachineLayer`].)
macro_rules! factory_layer {
    ($factory:ty) => {
        impl<S> tower::Layer<S> for $factory {
            type Service = $crate::service::MachineService<S, Self>;

            fn layer(&self, inner: S) -> Self::Service {
                $crate::service::MachineService::new(inner, self.clone())
            }
        }
    };
}

pub(crate) use factory_layer;

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

    crate::service::accessors::inner_service_accessors!(inner: S);

    /// The factory (the layer's configuration).
    pub fn factory(&self) -> &F {
        &self.factory
    }
}

impl<S: ChatService, F: MachineFactory> Service<ChatRequest> for MachineService<S, F> {
    type Response = Reply;
    type Error = Error;
    type Future = ReplyFuture<S::Future, F::Machine>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut request: ChatRequest) -> Self::Future {
        let stream = request.options.stream;
        match self.factory.start(&mut request) {
            Ok(machine) => ReplyFuture::new(self.inner.call(request), machine, stream),
            Err(error) => ReplyFuture::failed(error),
        }
    }
}

//! The tool loop: calls the model again with the results of its tool calls until it
//! answers without calling tools.

use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::{Stream, StreamExt};
use tower::{Layer, Service, ServiceExt};

use crate::service::{ChatService, IntoEvents, ReplyFuture};
use crate::{ChatRequest, Error, Event, FinishReason, Joiner, Message, Reply, ToolChoice};

/// Re-invokes the inner service with each reply's tool calls and results appended,
/// until a reply calls no tool or the bound on rounds is reached.
///
/// Put a [`FunctionCallLayer`](super::FunctionCallLayer) inside it: a round
/// continues the loop when its reply holds a `tool_aggregate` (calls with results)
/// and no call left for the caller to answer (a `tool_calls` message with a call the
/// provider did not execute). Each new request is the original one plus every
/// message of the rounds so far — text, reasoning, aggregates; `usage` messages are
/// not sent back. The inner service is cloned for the loop and driven to readiness
/// before every call, as tower requires.
///
/// - **Streaming**: one continuous stream across rounds. Every event of every round
///   passes through as it arrives, including each round's `finish`; where a round
///   that continues the loop sent no `finish`, one with reason `tool_calls` is added,
///   so that the text of two rounds never joins into one message.
/// - **Non-streaming**: the same events, each run of deltas joined into one
///   `message` event: every round's messages, its `usage` and its `finish`, in
///   order. Both modes give the same messages.
/// - **The bound**: at most [`max_iterations`](Self::max_iterations) calls of the
///   inner service (default 10). If the last allowed round still called tools, the
///   [`OnLimit`] policy decides: a typed error ([`Error::ToolLoopLimit`], after the
///   last round's events), a final assistant message, or one more round in which the
///   model may not call tools.
///
/// An error of the inner service ends the loop, after the events of the rounds run
/// so far (the results of tools that ran are never dropped): in non-streaming mode
/// the reply holds their messages, then the error (read both with
/// [`Reply::collect_partial`]); only an error before anything was made fails the
/// call's future.
///
/// See the [module documentation](super) for an example.
#[derive(Clone, Debug)]
pub struct ToolLoopLayer {
    config: Arc<Config>,
}

#[derive(Clone, Debug)]
struct Config {
    max_iterations: usize,
    on_limit: OnLimit,
}

/// What the [`ToolLoopLayer`] does when the model still calls tools in the last
/// round it allows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnLimit {
    /// End with [`Error::ToolLoopLimit`], after the events of every round (in
    /// both modes).
    #[default]
    Error,
    /// End with this assistant text message, after the events of the last round.
    Message(String),
    /// Call the model once more with `tool_choice` set to `none` and the results so
    /// far, so that it answers in text; that round ends the loop whatever it holds.
    /// A call the model writes anyway is not run: the function layer answers it
    /// with an error result (see [`ToolChoice::allows`]).
    FinalAnswer,
}

impl Default for ToolLoopLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl ToolLoopLayer {
    /// The default bound on model calls.
    pub const DEFAULT_MAX_ITERATIONS: usize = 10;

    /// A loop of at most 10 model calls that ends with an error past them.
    pub fn new() -> Self {
        ToolLoopLayer {
            config: Arc::new(Config {
                max_iterations: Self::DEFAULT_MAX_ITERATIONS,
                on_limit: OnLimit::Error,
            }),
        }
    }

    /// Sets the bound on model calls (at least 1).
    pub fn max_iterations(mut self, max_iterations: usize) -> Self {
        Arc::make_mut(&mut self.config).max_iterations = max_iterations.max(1);
        self
    }

    /// Sets what happens when the bound is reached.
    pub fn on_limit(mut self, on_limit: OnLimit) -> Self {
        Arc::make_mut(&mut self.config).on_limit = on_limit;
        self
    }
}

impl<S> Layer<S> for ToolLoopLayer {
    type Service = ToolLoop<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ToolLoop {
            inner,
            config: self.config.clone(),
        }
    }
}

/// The service made by [`ToolLoopLayer`].
#[derive(Clone, Debug)]
pub struct ToolLoop<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S> ToolLoop<S> {
    crate::service::inner_service_accessors!(inner: S);
}

impl<S> Service<ChatRequest> for ToolLoop<S>
where
    S: ChatService + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Reply;
    type Error = Error;
    type Future = ReplyFuture<S::Future, Rounds<S>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: ChatRequest) -> Self::Future {
        // The readied service makes the first call; its clone stays for the next.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let first = inner.call(request.clone());
        let stream = request.options.stream;
        let rounds = Rounds {
            inner,
            request,
            config: self.config.clone(),
        };
        ReplyFuture::new(first, rounds, stream)
    }
}

/// How the tool loop makes its reply of the first round's: the service for the
/// next rounds, the original request and the layer's settings. (Public only as a
/// part of [`ReplyFuture`]'s type.)
pub struct Rounds<S> {
    inner: S,
    request: ChatRequest,
    config: Arc<Config>,
}

impl<S> IntoEvents for Rounds<S>
where
    S: ChatService + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Reply;
    /// The rounds are an `async` stream, whose type has no name: boxed in a reply.
    type Events = Reply;

    fn into_events(self, first: Reply) -> Reply {
        Reply::from_stream(rounds(self.inner, self.request, first, self.config))
    }
}

/// The events of every round, the first one's reply given.
fn rounds<S>(
    mut inner: S,
    request: ChatRequest,
    mut reply: Reply,
    config: Arc<Config>,
) -> impl Stream<Item = Result<Event, Error>> + Send
where
    S: Service<ChatRequest, Response = Reply> + Send + 'static,
    S::Error: Into<Error>,
    S::Future: Send + 'static,
{
    async_stream::try_stream! {
        let mut added: Vec<Message> = Vec::new();
        let mut round = 1;
        let mut final_round = false;
        loop {
            let mut joiner = Joiner::new();
            let mut finished = false;
            while let Some(item) = reply.next().await {
                let event = item?;
                finished = matches!(event, Event::Finish { .. });
                joiner.push(event.clone());
                yield event;
            }
            let messages = joiner.finish();
            if final_round || !continues(&messages) {
                break;
            }
            if round >= config.max_iterations {
                match &config.on_limit {
                    OnLimit::Error => Err(Error::ToolLoopLimit {
                        max_iterations: config.max_iterations,
                    })?,
                    OnLimit::Message(text) => {
                        yield Event::message(Message::assistant(text.clone()));
                        break;
                    }
                    OnLimit::FinalAnswer => final_round = true,
                }
            }
            if !finished {
                yield Event::finish(FinishReason::ToolCalls);
            }
            added.extend(messages.into_iter().filter(|m| !matches!(m, Message::Usage(_))));
            let mut next = request.clone();
            next.messages.extend(added.iter().cloned());
            if final_round {
                next.options.tool_choice = Some(ToolChoice::None);
            }
            let service = inner.ready().await.map_err(Into::into)?;
            reply = service.call(next).await.map_err(Into::into)?;
            round += 1;
        }
    }
}

/// A round continues the loop when it has answered calls and leaves none for the
/// caller.
fn continues(messages: &[Message]) -> bool {
    let answered = messages
        .iter()
        .any(|m| matches!(m, Message::ToolAggregate(_)));
    let unanswered = messages.iter().any(|m| {
        matches!(m, Message::ToolCalls(calls) if calls.calls.iter().any(|c| !c.provider_executed))
    });
    answered && !unanswered
}

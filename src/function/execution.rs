//! The function layer's IO driver: the [`Dispatch`] core run by the one
//! [`MachineStream`], with its jobs run as tokio tasks whose results stream back
//! into it.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures::stream::{FuturesUnordered, Stream, StreamExt};
use tokio::task::{JoinError, JoinHandle};
use tracing::Instrument;

use super::answer;
use super::context::CallContext;
use super::dispatch::{Action, Dispatch, Input, Job, JobId};
use super::media::MediaPolicy;
use super::output::ToolOutput;
use super::tool::{Tool, ToolError};
use crate::message::{Event, ToolCall, ToolResult};
use crate::service::{IntoEvents, MachineStream};
use crate::{Error, Reply};

/// How the calls of a reply run: how many at once, for how long, and the
/// policy their media is checked by.
#[derive(Clone, Debug)]
pub(super) struct RunPolicy {
    pub(super) concurrency: usize,
    pub(super) timeout: Option<Duration>,
    pub(super) media: MediaPolicy,
    pub(super) on_call: Option<CallHook>,
}

/// What is called with each call as it starts running
/// ([`FunctionCallLayer::on_call`](super::FunctionCallLayer::on_call)).
#[derive(Clone)]
pub(super) struct CallHook(pub(super) Arc<dyn Fn(&ToolCall) + Send + Sync>);

impl fmt::Debug for CallHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CallHook")
    }
}

/// How the function layer makes its reply of the inner one: the call's dispatch
/// core, and how its tools run. (Public only as a part of
/// [`ReplyFuture`](crate::service::ReplyFuture)'s type.)
pub struct Execute {
    core: Dispatch,
    policy: Arc<RunPolicy>,
}

impl Execute {
    pub(super) fn new(core: Dispatch, policy: Arc<RunPolicy>) -> Self {
        Execute { core, policy }
    }
}

impl IntoEvents for Execute {
    type Response = Reply;
    type Events = Execution;

    fn into_events(self, reply: Reply) -> Execution {
        Execution::new(reply, self.core, self.policy)
    }
}

/// The layer's reply: the core's events, while the calls it hands out run.
pub struct Execution {
    core: MachineStream<Sources, Dispatch>,
}

impl Execution {
    fn new(reply: Reply, core: Dispatch, policy: Arc<RunPolicy>) -> Self {
        let sources = Sources {
            reply: Some(reply),
            tasks: Tasks {
                policy,
                waiting: VecDeque::new(),
                running: FuturesUnordered::new(),
            },
            paused: false,
        };
        Execution {
            core: MachineStream::new(sources, core),
        }
    }
}

impl Stream for Execution {
    type Item = Result<Event, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            // Backpressure: while many events wait behind a run being answered,
            // the inner reply is not read further.
            let backlogged = self.core.machine().backlogged();
            self.core.input_mut().paused = backlogged;
            match ready!(self.core.poll_next_unpin(cx)) {
                Some(Ok(Action::Emit(event))) => return Poll::Ready(Some(Ok(event))),
                Some(Ok(Action::Run(job))) => self.core.input_mut().tasks.push(*job),
                Some(Err(error)) => return Poll::Ready(Some(Err(error))),
                None => return Poll::Ready(None),
            }
        }
    }
}

/// What the core takes, as it comes: the inner reply's events, its end, and the
/// results of the calls running. It ends when the reply has ended and no call is
/// left; an error of the reply cancels the calls still running.
struct Sources {
    reply: Option<Reply>,
    tasks: Tasks,
    paused: bool,
}

impl Stream for Sources {
    type Item = Result<Input, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if let Poll::Ready(Some((id, result))) = this.tasks.poll_next(cx) {
            return Poll::Ready(Some(Ok(Input::Resolved(id, result))));
        }
        if let Some(reply) = this.reply.as_mut().filter(|_| !this.paused) {
            match reply.poll_next_unpin(cx) {
                Poll::Ready(Some(Ok(event))) => return Poll::Ready(Some(Ok(Input::Event(event)))),
                Poll::Ready(Some(Err(error))) => {
                    this.reply = None;
                    this.tasks.cancel();
                    return Poll::Ready(Some(Err(error)));
                }
                Poll::Ready(None) => {
                    this.reply = None;
                    return Poll::Ready(Some(Ok(Input::Ended)));
                }
                Poll::Pending => {}
            }
        }
        if this.reply.is_none() && this.tasks.is_empty() {
            return Poll::Ready(None);
        }
        Poll::Pending
    }
}

/// The calls of one reply: waiting, and running as tasks (at most the layer's
/// concurrency at a time).
struct Tasks {
    policy: Arc<RunPolicy>,
    waiting: VecDeque<Job>,
    running: FuturesUnordered<Running>,
}

impl Tasks {
    fn push(&mut self, job: Job) {
        self.waiting.push_back(job);
    }

    fn is_empty(&self) -> bool {
        self.waiting.is_empty() && self.running.is_empty()
    }

    /// Drops every call: the running tasks are aborted.
    fn cancel(&mut self) {
        self.waiting.clear();
        self.running.clear();
    }

    /// Starts waiting calls up to the limit, then takes a finished one's result.
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<(JobId, ToolResult)>> {
        while self.running.len() < self.policy.concurrency {
            let Some(job) = self.waiting.pop_front() else {
                break;
            };
            if let Some(CallHook(hook)) = &self.policy.on_call {
                hook(&job.call);
            }
            let timeout = job.tool.time_limit().or(self.policy.timeout);
            let span = tracing::debug_span!("tool", name = %job.call.name, call_id = %job.call.id);
            let (call_id, name) = (job.call.id.clone(), job.call.name.clone());
            let task = run(job.tool, job.call, timeout, self.policy.media.clone());
            self.running.push(Running {
                id: job.id,
                call_id,
                name,
                handle: tokio::spawn(task.instrument(span)),
            });
        }
        self.running.poll_next_unpin(cx)
    }
}

/// Runs one call under its time limit: the tool, then its output made into a
/// result. A slow file counts against the limit as a slow tool does; past it, the
/// call's result says it timed out. A call stopped before it finished — timed out,
/// or its task aborted — has its context cancelled.
async fn run(
    tool: Tool,
    call: ToolCall,
    timeout: Option<Duration>,
    media: MediaPolicy,
) -> ToolResult {
    tracing::debug!("tool call started");
    let limit = timeout.map(|limit| (limit, tokio::time::Instant::now() + limit));
    let context = CallContext::new(call.id.as_str()).with_deadline(limit.map(|(_, at)| at));
    let stop = context.cancel_on_drop();
    let (id, name) = (call.id.clone(), call.name.clone());
    let result = match limit {
        Some((limit, deadline)) => {
            tokio::time::timeout_at(deadline, outcome(tool, call, context, media))
                .await
                .map_err(|_| answer::timed_out(&id, &name, limit))
        }
        None => Ok(outcome(tool, call, context, media).await),
    };
    match result {
        Ok(result) => {
            stop.disarm();
            result
        }
        Err(timed_out) => timed_out,
    }
}

/// Runs the tool and makes its output into a result: media checked and files read
/// on the blocking pool.
async fn outcome(
    tool: Tool,
    call: ToolCall,
    context: CallContext,
    media: MediaPolicy,
) -> ToolResult {
    let ToolCall {
        id,
        name,
        arguments,
        ..
    } = call;
    let output: ToolOutput = match tool.call(arguments, context).await {
        Ok(output) => output,
        Err(error @ ToolError::Arguments(_)) => {
            let schema = &tool.spec().parameters;
            return answer::bad_arguments(&id, &name, &error.to_string(), Some(schema));
        }
        Err(error @ ToolError::Failed(_)) => return answer::failed(&id, &name, &error),
    };
    if !output.has_media() {
        return output.into_result(&id, &name, &media);
    }
    let task = tokio::task::spawn_blocking({
        let (id, name) = (id.clone(), name.clone());
        move || output.into_result(&id, &name, &media)
    });
    task.await
        .unwrap_or_else(|error| outcome_of_task(&id, &name, error))
}

/// A running call: its task, aborted when dropped.
struct Running {
    id: JobId,
    call_id: String,
    name: String,
    handle: JoinHandle<ToolResult>,
}

impl Future for Running {
    type Output = (JobId, ToolResult);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        Pin::new(&mut this.handle).poll(cx).map(|joined| {
            let result =
                joined.unwrap_or_else(|error| outcome_of_task(&this.call_id, &this.name, error));
            (this.id, result)
        })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

impl fmt::Debug for Running {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Running")
            .field("call_id", &self.call_id)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The result of a task that did not return: it panicked or was cancelled. A
/// panic's message is logged, not told to the model: it may hold anything.
fn outcome_of_task(call_id: &str, name: &str, error: JoinError) -> ToolResult {
    if !error.is_panic() {
        return answer::cancelled(call_id, name);
    }
    let payload = error.into_panic();
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message");
    tracing::error!(tool = name, call_id, "tool panicked: {message}");
    answer::panicked(call_id, name)
}

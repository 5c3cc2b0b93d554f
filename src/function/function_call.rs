//! The function layer: runs the model's tool calls and emits `tool_aggregate`s.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, Stream, StreamExt};
use tokio::task::{JoinError, JoinHandle};
use tower::{Layer, Service};
use tracing::Instrument;

use super::dispatch::{Dispatch, Job, JobId};
use super::{MediaPolicy, Tool, ToolError, ToolOutput, ToolRegistry, answer};
use crate::{ChatRequest, Error, Event, Reply, ToolCall, ToolResult};

/// Runs the tool calls of the model's replies with the tools of a [`ToolRegistry`].
///
/// On the way in, the registry's specs are added to `options.tools` (see
/// [`ToolRegistry::inject`]). On the way out, every run of tool calls in the reply
/// becomes a `tool_aggregate` message: the calls with their results, in call order.
///
/// - **When calls run.** A call starts as soon as it is complete — in streaming mode
///   when the next call begins or the run of calls ends, not at the end of the
///   reply. Calls run as tokio tasks, at most [`concurrency`](Self::concurrency) at
///   a time per reply (default 8), each under a time limit
///   ([`timeout`](Self::timeout), default 60 s; a tool may set its own). Dropping the
///   reply aborts the tools still running (their futures are dropped).
/// - **Outcomes are results, never crashes.** A tool's error, panic or time-out, a
///   call of an unknown tool (the result lists the available tools), arguments that
///   fail the tool's JSON Schema (the result quotes the schema so that the model can
///   fix the call), a call marked invalid upstream, media refused by the
///   [`MediaPolicy`]: each becomes an error result (`is_error: true`) the model can
///   read.
/// - **Calls it does not run pass through** as a `tool_calls` message placed before
///   the run's aggregate: calls the provider executed (`provider_executed`), and
///   calls of tools the *request* declared but the registry does not have (the
///   caller runs those).
///
/// **What a streaming consumer sees.** Text, reasoning, usage and other events pass
/// through as they arrive. The deltas of tool calls do not: each run of calls
/// appears once, as one `message` event holding the `tool_aggregate`, when all its
/// results are in. Events that follow a run (more text, usage, `finish`) wait behind
/// its aggregate, so the order of the reply is the model's. Joining the streamed
/// events therefore gives exactly the messages of the non-streaming reply, which
/// runs the same code and joins its output.
///
/// ```
/// use lmstack::function::{FunctionCallLayer, Tool, ToolRegistry};
/// use lmstack::testing::ScriptedModel;
/// use lmstack::{ChatRequest, Message, ToolCall};
/// use serde_json::json;
/// use tower::{Layer, ServiceExt};
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Add { a: i64, b: i64 }
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let add = Tool::typed("add", "Adds two integers", |args: Add| async move {
///     Ok::<_, std::convert::Infallible>((args.a + args.b).to_string())
/// });
/// let layer = FunctionCallLayer::new(ToolRegistry::new([add])?);
/// let model = ScriptedModel::new().reply_messages(vec![Message::tool_calls(vec![
///     ToolCall::new("call_1", "add", json!({"a": 2, "b": 3})),
/// ])]);
/// let service = layer.layer(model.clone());
///
/// let request = ChatRequest::new(vec![Message::user("2 + 3?")]).streaming(true);
/// let messages = service.oneshot(request).await?.collect().await?;
/// assert_eq!(messages[0].results()[0].text_content(), "5");
/// assert_eq!(model.requests()[0].options.tools[0].name, "add"); // the spec was injected
/// # Ok::<(), lmstack::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct FunctionCallLayer {
    config: Arc<Config>,
}

#[derive(Clone, Debug)]
struct Config {
    registry: ToolRegistry,
    concurrency: usize,
    timeout: Option<Duration>,
    media: MediaPolicy,
}

impl FunctionCallLayer {
    /// The default number of calls of one reply that run at once.
    pub const DEFAULT_CONCURRENCY: usize = 8;

    /// The default time limit of one call.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

    /// A layer running the tools of `registry`, with the defaults.
    pub fn new(registry: ToolRegistry) -> Self {
        FunctionCallLayer {
            config: Arc::new(Config {
                registry,
                concurrency: Self::DEFAULT_CONCURRENCY,
                timeout: Some(Self::DEFAULT_TIMEOUT),
                media: MediaPolicy::new(),
            }),
        }
    }

    /// Sets how many calls of one reply may run at once (at least 1).
    pub fn concurrency(mut self, limit: usize) -> Self {
        Arc::make_mut(&mut self.config).concurrency = limit.max(1);
        self
    }

    /// Sets the time limit of one call (`None`: no limit). A tool's own limit
    /// ([`Tool::timeout`](super::Tool::timeout)) takes precedence.
    pub fn timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        Arc::make_mut(&mut self.config).timeout = timeout.into();
        self
    }

    /// Sets the policy for images, documents and files in tool results.
    pub fn media(mut self, policy: MediaPolicy) -> Self {
        Arc::make_mut(&mut self.config).media = policy;
        self
    }

    /// The registry.
    pub fn registry(&self) -> &ToolRegistry {
        &self.config.registry
    }
}

impl<S> Layer<S> for FunctionCallLayer {
    type Service = FunctionCall<S>;

    fn layer(&self, inner: S) -> Self::Service {
        FunctionCall {
            inner,
            config: self.config.clone(),
        }
    }
}

/// The service made by [`FunctionCallLayer`].
#[derive(Clone, Debug)]
pub struct FunctionCall<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S> FunctionCall<S> {
    /// Wraps `inner` with the tools of `registry` and the default settings.
    pub fn new(inner: S, registry: ToolRegistry) -> Self {
        FunctionCallLayer::new(registry).layer(inner)
    }

    crate::service::inner_service_accessors!();
}

impl<S> Service<ChatRequest> for FunctionCall<S>
where
    S: Service<ChatRequest, Response = Reply>,
    S::Error: Into<Error>,
    S::Future: Send + 'static,
{
    type Response = Reply;
    type Error = Error;
    type Future = BoxFuture<'static, Result<Reply, Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut request: ChatRequest) -> Self::Future {
        let config = self.config.clone();
        let dispatch = Dispatch::new(
            config.registry.clone(),
            request.options.tools.iter().map(|tool| tool.name.as_str()),
        );
        config.registry.inject(&mut request.options);
        let stream = request.options.stream;
        let reply = self.inner.call(request);
        Box::pin(async move {
            let reply = reply.await.map_err(Into::into)?;
            let reply = Reply::from_stream(Execution::new(reply, dispatch, config));
            if stream {
                Ok(reply)
            } else {
                reply.complete().await
            }
        })
    }
}

/// The driver: reads the inner reply into the [`Dispatch`] core, runs its jobs as
/// tasks, feeds their results back, and streams the core's output.
struct Execution {
    /// The inner reply; `None` once it ended.
    inner: Option<Reply>,
    core: Dispatch,
    config: Arc<Config>,
    waiting: VecDeque<Job>,
    running: FuturesUnordered<Running>,
    /// The inner reply's error, passed on after the output before it.
    error: Option<Error>,
}

impl Execution {
    fn new(inner: Reply, core: Dispatch, config: Arc<Config>) -> Self {
        Execution {
            inner: Some(inner),
            core,
            config,
            waiting: VecDeque::new(),
            running: FuturesUnordered::new(),
            error: None,
        }
    }

    /// Takes one item of the inner reply; returns false when it is not ready.
    fn read(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(inner) = &mut self.inner else {
            return false;
        };
        if self.core.backlogged() {
            return false;
        }
        let mut jobs = Vec::new();
        match inner.poll_next_unpin(cx) {
            Poll::Pending => return false,
            Poll::Ready(Some(Ok(event))) => self.core.push(event, &mut jobs),
            Poll::Ready(None) => {
                self.inner = None;
                self.core.finish(&mut jobs);
            }
            Poll::Ready(Some(Err(error))) => {
                self.inner = None;
                self.core.abandon();
                self.waiting.clear();
                self.running.clear();
                self.error = Some(error);
            }
        }
        self.waiting.extend(jobs);
        true
    }

    /// Starts waiting jobs up to the concurrency limit.
    fn start(&mut self) {
        while self.running.len() < self.config.concurrency {
            let Some(job) = self.waiting.pop_front() else {
                return;
            };
            let timeout = job.tool.time_limit().or(self.config.timeout);
            let span = tracing::debug_span!("tool", name = %job.call.name, call_id = %job.call.id);
            let (call_id, name) = (job.call.id.clone(), job.call.name.clone());
            let task = run(job.tool, job.call, timeout, self.config.media.clone());
            self.running.push(Running {
                id: job.id,
                call_id,
                name,
                handle: tokio::spawn(task.instrument(span)),
            });
        }
    }
}

impl Stream for Execution {
    type Item = Result<Event, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(event) = this.core.pop() {
                return Poll::Ready(Some(Ok(event)));
            }
            if this.inner.is_none() && this.running.is_empty() && this.waiting.is_empty() {
                return Poll::Ready(this.error.take().map(Err));
            }
            this.start();
            let mut progress = false;
            while let Poll::Ready(Some((id, result))) = this.running.poll_next_unpin(cx) {
                this.core.resolve(id, result);
                progress = true;
            }
            progress |= this.read(cx);
            if !progress {
                return Poll::Pending;
            }
        }
    }
}

/// Runs one call: the tool under its time limit, then its output made into a result
/// (media checked and files read on the blocking pool).
async fn run(
    tool: Tool,
    call: ToolCall,
    timeout: Option<Duration>,
    media: MediaPolicy,
) -> ToolResult {
    tracing::debug!("tool call started");
    let work = tool.call(call.arguments);
    let outcome = match timeout {
        Some(limit) => match tokio::time::timeout(limit, work).await {
            Ok(outcome) => outcome,
            Err(_) => return answer::timed_out(&call.id, &call.name, limit),
        },
        None => work.await,
    };
    let output: ToolOutput = match outcome {
        Ok(output) => output,
        Err(error @ ToolError::Arguments(_)) => {
            let schema = &tool.spec().parameters;
            let problem = error.to_string();
            return answer::bad_arguments(&call.id, &call.name, &problem, Some(schema));
        }
        Err(error @ ToolError::Failed(_)) => return answer::failed(&call.id, &call.name, &error),
    };
    if !output.has_media() {
        return output.into_result(&call.id, &call.name, &media);
    }
    let (id, name) = (call.id.clone(), call.name.clone());
    tokio::task::spawn_blocking(move || output.into_result(&id, &name, &media))
        .await
        .unwrap_or_else(|error| outcome_of_task(&call.id, &call.name, error))
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

/// The result of a task that did not return: it panicked or was cancelled.
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
    tracing::warn!(tool = name, call_id, "tool panicked: {message}");
    answer::panicked(call_id, name, message)
}

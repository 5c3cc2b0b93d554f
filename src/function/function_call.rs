//! The function layer: runs the model's tool calls and emits `tool_aggregate`s.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower::{Layer, Service};

use super::dispatch::{Dispatch, UnknownTools};
use super::execution::{CallHook, Execute, RunPolicy};
use super::media::MediaPolicy;
use super::registry::ToolRegistry;
use crate::service::{ChatService, ReplyFuture};
use crate::{ChatRequest, Error, Reply, ToolCall};

/// Runs the tool calls of the model's replies with the tools of a [`ToolRegistry`].
///
/// On the way in, the registry's specs are added to `options.tools` (see
/// [`ToolSet::inject`](super::ToolSet::inject)); each request works with the
/// registry's tools at that moment (a [tool source](super::ToolSource) whose list
/// changed shows its new tools from the next request on). On the way out, every
/// run of tool calls in the reply becomes a `tool_aggregate` message: the calls
/// with their results, in call order.
///
/// - **When calls run.** A call starts as soon as it is complete — in streaming mode
///   when the next call begins or the run of calls ends, not at the end of the
///   reply. Calls run as tokio tasks, at most [`concurrency`](Self::concurrency) at
///   a time per reply (default 8), each under a time limit
///   ([`timeout`](Self::timeout), default 60 s; a tool may set its own) that covers
///   the tool's run and the reading of the files it returns. Dropping the reply
///   aborts the tools still running (their futures are dropped). Either way the
///   call's [`CallContext`](super::CallContext) is cancelled, which stops the work
///   its future does not own (a remote tool's request is cancelled on its server).
///   A tool that blocks its thread without watching its context cannot be stopped: see
///   [Tools that block](super::Tool#tools-that-block).
/// - **Outcomes are results, never crashes.** A tool's error, panic or time-out, a
///   call of an unknown tool (the result lists the available tools), arguments that
///   fail the tool's JSON Schema (the result quotes the schema so that the model can
///   fix the call), a call marked invalid upstream, media refused by the
///   [`MediaPolicy`]: each becomes an error result (`is_error: true`) the model can
///   read.
/// - **Calls the request did not allow are not run.** Under the request's
///   `tool_choice` `none` (the tool loop's final-answer round), or a choice naming
///   another tool, a call the model writes anyway gets an error result saying so
///   (see [`ToolChoice::allows`](crate::ToolChoice::allows)).
/// - **Calls it does not run pass through** as a `tool_calls` message placed before
///   the run's aggregate: calls the provider executed (`provider_executed`), and
///   calls of tools the *request* declared but the registry does not have (the
///   caller runs those) — and, under [`UnknownTools::PassThrough`], calls of
///   tools nobody declared.
///
/// **What a streaming consumer sees.** Text, reasoning, usage and other events pass
/// through as they arrive. The deltas of tool calls do not: each run of calls
/// appears once, as one `message` event holding the `tool_aggregate`, when all its
/// results are in. Events that follow a run (more text, usage, `finish`) wait behind
/// its aggregate, so the order of the reply is the model's. Joining the streamed
/// events therefore gives exactly the messages of the non-streaming reply, which
/// runs the same code and joins its output. To see a call as it starts running,
/// before its result is in, give the layer a hook ([`on_call`](Self::on_call)):
/// the reply stays the same.
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
///     (args.a + args.b).to_string()
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
    config: Config,
}

/// The layer's settings, shared by its services and their replies.
#[derive(Clone, Debug)]
struct Config {
    registry: ToolRegistry,
    run: Arc<RunPolicy>,
    unknown: UnknownTools,
}

impl FunctionCallLayer {
    /// The default number of calls of one reply that run at once.
    pub const DEFAULT_CONCURRENCY: usize = 8;

    /// The default time limit of one call.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

    /// A layer running the tools of `registry`, with the defaults.
    pub fn new(registry: ToolRegistry) -> Self {
        FunctionCallLayer {
            config: Config {
                registry,
                run: Arc::new(RunPolicy {
                    concurrency: Self::DEFAULT_CONCURRENCY,
                    timeout: Some(Self::DEFAULT_TIMEOUT),
                    media: MediaPolicy::new(),
                    on_call: None,
                }),
                unknown: UnknownTools::Answer,
            },
        }
    }

    /// Sets how many calls of one reply may run at once (at least 1).
    pub fn concurrency(mut self, limit: usize) -> Self {
        Arc::make_mut(&mut self.config.run).concurrency = limit.max(1);
        self
    }

    /// Sets the time limit of one call (`None`: no limit). A tool's own limit
    /// ([`Tool::timeout`](super::Tool::timeout)) takes precedence.
    pub fn timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        Arc::make_mut(&mut self.config.run).timeout = timeout.into();
        self
    }

    /// Sets the policy for images, documents and files in tool results.
    pub fn media(mut self, policy: MediaPolicy) -> Self {
        Arc::make_mut(&mut self.config.run).media = policy;
        self
    }

    /// Sets what becomes of a call of a tool that neither the registry nor the
    /// request declares: an error result listing the tools
    /// ([`UnknownTools::Answer`], the default), or passed through for the caller
    /// to answer ([`UnknownTools::PassThrough`]).
    pub fn unknown_tools(mut self, policy: UnknownTools) -> Self {
        self.config.unknown = policy;
        self
    }

    /// Calls `hook` with each call as it starts running — before its result is
    /// in, in both modes — so that a UI can show "calling add…" while the tool
    /// runs (the reply itself shows a run of calls only as its `tool_aggregate`).
    /// Calls the layer does not run (answered at once with an error result, or
    /// passed through) are not seen. The hook runs inside the reply's `poll`:
    /// keep it quick (send the call to a channel, say), never block in it.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    ///
    /// use lmstack::function::{FunctionCallLayer, Tool, ToolRegistry};
    /// use serde_json::json;
    ///
    /// let add = Tool::dynamic("add", "Adds", json!({"type": "object"}), |_| async { "5" });
    /// let started = Arc::new(Mutex::new(Vec::new()));
    /// let layer = FunctionCallLayer::new(ToolRegistry::new([add])?).on_call({
    ///     let started = started.clone();
    ///     move |call| started.lock().unwrap().push(format!("calling {}…", call.name))
    /// });
    /// # Ok::<(), lmstack::Error>(())
    /// ```
    pub fn on_call(mut self, hook: impl Fn(&ToolCall) + Send + Sync + 'static) -> Self {
        Arc::make_mut(&mut self.config.run).on_call = Some(CallHook(Arc::new(hook)));
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
    config: Config,
}

impl<S> FunctionCall<S> {
    /// Wraps `inner` with the tools of `registry` and the default settings.
    pub fn new(inner: S, registry: ToolRegistry) -> Self {
        FunctionCallLayer::new(registry).layer(inner)
    }

    crate::service::inner_service_accessors!(inner: S);
}

impl<S: ChatService> Service<ChatRequest> for FunctionCall<S> {
    type Response = Reply;
    type Error = Error;
    type Future = ReplyFuture<S::Future, Execute>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut request: ChatRequest) -> Self::Future {
        let config = &self.config;
        let tools = config.registry.tools();
        // The request's own tools, before the registry's join them: the caller runs
        // those the registry lacks.
        let declared = request.options.tools.iter().map(|tool| tool.name.as_str());
        let choice = request.options.tool_choice.clone();
        let dispatch = Dispatch::new(tools.clone(), declared, choice, config.unknown);
        tools.inject(&mut request.options);
        let stream = request.options.stream;
        let execute = Execute::new(dispatch, config.run.clone());
        ReplyFuture::new(self.inner.call(request), execute, stream)
    }
}

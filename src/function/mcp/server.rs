//! An MCP server as a tool source: its tools listed and kept up to date, its
//! calls made and stopped, and the server started again when it stopped.

use std::fmt;
use std::sync::{Arc, Weak};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, RequestId,
    ServerResult, Tool as McpTool,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use serde_json::Value;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::config::McpConfig;
use super::connection::{Connection, Handler};
use super::content;
use super::error::McpError;
use crate::ToolSpec;
use crate::function::{CallContext, Tool, ToolList, ToolOutput, ToolSource};

/// A connection to an MCP server whose tools join a
/// [`ToolRegistry`](crate::function::ToolRegistry) as a [`ToolSource`].
///
/// Each of the server's tools becomes a [`Tool`] with the server's name,
/// description and input schema; calling it calls the server, and its result keeps
/// every content block in order (see the [module docs](super) for the mapping).
///
/// - **The list stays current.** A `notifications/tools/list_changed` from the
///   server has the list read again; requests made after that see the new tools.
/// - **Stopped calls are cancelled on the server.** When the function layer stops a
///   call — its time limit, or the reply dropped — the server is sent
///   `notifications/cancelled` for it.
/// - **A server that stops is started again.** A call under way when the
///   connection closes gets an error result (the model can go on); the next use
///   starts the server again (and reads its tools again), at most
///   [`max_restarts`](McpConfig::max_restarts) times.
///
/// Cloning is cheap; the connection closes, and the server process is stopped,
/// when the last clone (and the last registry holding it) is dropped, or at
/// [`close`](Self::close).
#[derive(Clone)]
pub struct McpServer {
    core: Arc<Core>,
    tools: ToolList,
    _refresher: Arc<Refresher>,
}

/// The connection and what calls need. The server's tools hold it, so that a call
/// under way keeps the server it runs on.
struct Core {
    config: McpConfig,
    tools_changed: Arc<Notify>,
    state: tokio::sync::Mutex<State>,
}

/// The task that reads the tool list again on a change; stopped with the last
/// handle.
struct Refresher(JoinHandle<()>);

/// The current connection and the restarts made so far.
struct State {
    connection: Option<Arc<Connection>>,
    restarts: u32,
}

impl McpServer {
    /// Starts or reaches the server, completes the handshake and lists its tools
    /// (following pagination).
    pub async fn connect(config: McpConfig) -> Result<Self, McpError> {
        let tools_changed = Arc::new(Notify::new());
        let handler = Handler {
            server: config.name.as_str().into(),
            tools_changed: tools_changed.clone(),
        };
        let connection = Arc::new(Connection::open(&config, handler).await?);
        let listed = list(&config, &connection).await?;
        let core = Arc::new(Core {
            config,
            tools_changed,
            state: tokio::sync::Mutex::new(State {
                connection: Some(connection),
                restarts: 0,
            }),
        });
        let tools = ToolList::new(core.config.name.as_str(), tools_of(&core, listed));
        let refresher = tokio::spawn(refresh_on_change(Arc::downgrade(&core), tools.clone()));
        Ok(McpServer {
            core,
            tools,
            _refresher: Arc::new(Refresher(refresher)),
        })
    }

    /// The server's name (from its [`McpConfig`]).
    pub fn name(&self) -> &str {
        &self.core.config.name
    }

    /// Calls the server's tool `name` with `arguments` (a JSON object, or null for
    /// none), in `context`: cancelling the context cancels the call on the server.
    /// A result the server marks as an error is an `Ok` error output; `Err` is a
    /// call that could not be made or finished.
    pub async fn call(
        &self,
        name: &str,
        arguments: Value,
        context: &CallContext,
    ) -> Result<ToolOutput, McpError> {
        self.core.call(name, arguments, context).await
    }

    /// Ends the session and stops the server process (dropping the last clone does
    /// the same without waiting).
    pub async fn close(self) {
        let connection = self.core.state.lock().await.connection.take();
        if let Some(connection) = connection.and_then(|c| Arc::try_unwrap(c).ok()) {
            connection.close().await;
        }
    }
}

impl Core {
    /// The live connection, started again if the last one closed.
    async fn connection(&self) -> Result<Arc<Connection>, McpError> {
        let mut state = self.state.lock().await;
        if let Some(connection) = state.connection.as_ref().filter(|c| c.is_alive()) {
            return Ok(connection.clone());
        }
        if state.restarts >= self.config.max_restarts {
            return Err(McpError::GaveUp {
                server: self.config.name.clone(),
                restarts: state.restarts,
            });
        }
        state.restarts += 1;
        state.connection = None;
        tracing::warn!(server = %self.config.name, restart = state.restarts, "starting the MCP server again");
        let handler = Handler {
            server: self.config.name.as_str().into(),
            tools_changed: self.tools_changed.clone(),
        };
        let connection = Arc::new(Connection::open(&self.config, handler).await?);
        state.connection = Some(connection.clone());
        // A restarted server may offer other tools.
        self.tools_changed.notify_one();
        Ok(connection)
    }

    async fn call(
        &self,
        name: &str,
        arguments: Value,
        context: &CallContext,
    ) -> Result<ToolOutput, McpError> {
        let arguments = match arguments {
            Value::Object(arguments) => Some(arguments),
            Value::Null => None,
            other => {
                return Err(self.failed(format!(
                    "the arguments of `{name}` must be a JSON object, not {other}"
                )));
            }
        };
        let connection = self.connection().await?;
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = arguments;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let sent = connection
            .service
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await;
        let handle = sent.map_err(|error| self.interrupted(name, &connection, error))?;
        // Until the answer is in, dropping this future — the function layer
        // stopped the call — or a cancelled context cancels it on the server.
        let cancel = CancelOnServer::new(&connection, handle.id.clone());
        let answer = tokio::select! {
            answer = handle.await_response() => answer,
            () = context.cancelled() => {
                return Err(self.failed(format!("the call of `{name}` was cancelled")));
            }
        };
        cancel.disarm();
        match answer {
            Ok(ServerResult::CallToolResult(result)) => Ok(content::output(result)),
            Ok(_) => Err(self.failed(format!(
                "`{name}` answered with something other than a tool result (a task, or a \
                 request for input), which lmstack does not support"
            ))),
            Err(error) => Err(self.interrupted(name, &connection, error)),
        }
    }

    /// The error of a call the connection failed.
    fn interrupted(&self, name: &str, connection: &Connection, error: ServiceError) -> McpError {
        match error {
            ServiceError::TransportClosed => self.failed(format!(
                "the connection closed during the call of `{name}` (the server may have \
                 stopped; it is started again on next use){}",
                connection.stderr()
            )),
            error => self.failed(format!("the call of `{name}` failed: {error}")),
        }
    }

    /// Reads the server's tools again into `tools`.
    async fn refresh(self: &Arc<Self>, tools: &ToolList) {
        let listed = match self.connection().await {
            Ok(connection) => list(&self.config, &connection).await,
            Err(error) => Err(error),
        };
        match listed {
            Ok(listed) => tools.replace(tools_of(self, listed)),
            Err(error) => {
                tracing::warn!(server = %self.config.name, "tool list not refreshed: {error}")
            }
        }
    }

    fn failed(&self, message: String) -> McpError {
        McpError::Request {
            server: self.config.name.clone(),
            message,
        }
    }
}

/// The server's tools, all pages.
async fn list(config: &McpConfig, connection: &Connection) -> Result<Vec<McpTool>, McpError> {
    connection
        .service
        .list_all_tools()
        .await
        .map_err(|error| McpError::Request {
            server: config.name.clone(),
            message: format!("listing its tools failed: {error}"),
        })
}

/// The server's tools as [`Tool`]s that call it.
fn tools_of(core: &Arc<Core>, listed: Vec<McpTool>) -> Vec<Tool> {
    listed
        .into_iter()
        .map(|tool| {
            let description = tool
                .description
                .as_deref()
                .or(tool.title.as_deref())
                .unwrap_or_default();
            let schema = Value::Object((*tool.input_schema).clone());
            let spec = ToolSpec::new(tool.name.as_ref(), description, schema);
            let (core, name) = (core.clone(), tool.name.to_string());
            Tool::new(spec, move |arguments, context: CallContext| {
                let (core, name) = (core.clone(), name.clone());
                async move { core.call(&name, arguments, &context).await }
            })
        })
        .collect()
}

/// Sends the server `notifications/cancelled` for a request when dropped, unless
/// disarmed: from a task of its own that keeps the connection open until the
/// notification is out.
struct CancelOnServer {
    armed: Option<(Arc<Connection>, RequestId)>,
}

impl CancelOnServer {
    const REASON: &str = "the call was stopped (time limit, or its reply dropped)";

    fn new(connection: &Arc<Connection>, id: RequestId) -> Self {
        CancelOnServer {
            armed: Some((connection.clone(), id)),
        }
    }

    fn disarm(mut self) {
        self.armed = None;
    }
}

impl Drop for CancelOnServer {
    fn drop(&mut self) {
        let Some((connection, id)) = self.armed.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let reason = Some(Self::REASON.to_owned());
            let cancelled = CancelledNotificationParam::new(Some(id), reason);
            if let Err(error) = connection.service.notify_cancelled(cancelled).await {
                tracing::debug!("notifications/cancelled not sent: {error}");
            }
        });
    }
}

/// Reads the tool list again whenever the server says it changed, for as long as
/// the server is in use.
async fn refresh_on_change(core: Weak<Core>, tools: ToolList) {
    let Some(changed) = core.upgrade().map(|core| core.tools_changed.clone()) else {
        return;
    };
    loop {
        changed.notified().await;
        let Some(core) = core.upgrade() else {
            return;
        };
        core.refresh(&tools).await;
    }
}

impl Drop for Refresher {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl ToolSource for McpServer {
    fn name(&self) -> &str {
        &self.core.config.name
    }

    fn version(&self) -> u64 {
        self.tools.version()
    }

    fn tools(&self) -> Arc<[Tool]> {
        self.tools.tools()
    }
}

impl fmt::Debug for McpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServer")
            .field("config", &self.core.config)
            .field("tools", &self.tools.tools().len())
            .finish_non_exhaustive()
    }
}

//! An MCP server as a tool source: its tools listed and kept up to date, its
//! calls made and stopped, and the server started again when it stopped.

use std::fmt;
use std::sync::{Arc, Mutex, Weak};

use rmcp::model::{CallToolRequestParams, Tool as McpTool};
use rmcp::service::ServiceError;
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
    inner: Arc<Inner>,
}

struct Inner {
    config: McpConfig,
    tools: ToolList,
    tools_changed: Arc<Notify>,
    state: tokio::sync::Mutex<State>,
    refresher: Mutex<Option<JoinHandle<()>>>,
}

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
        let server = McpServer {
            inner: Arc::new(Inner {
                tools: ToolList::new(config.name.as_str(), []),
                config,
                tools_changed,
                state: tokio::sync::Mutex::new(State {
                    connection: Some(connection),
                    restarts: 0,
                }),
                refresher: Mutex::new(None),
            }),
        };
        server.inner.tools.replace(tools_of(&server.inner, listed));
        let refresher = tokio::spawn(refresh_on_change(Arc::downgrade(&server.inner)));
        *server
            .inner
            .refresher
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(refresher);
        Ok(server)
    }

    /// The server's name (from its [`McpConfig`]).
    pub fn name(&self) -> &str {
        &self.inner.config.name
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
        self.inner.call(name, arguments, context).await
    }

    /// Ends the session and stops the server process (dropping the last clone does
    /// the same without waiting).
    pub async fn close(self) {
        let connection = self.inner.state.lock().await.connection.take();
        if let Some(connection) = connection.and_then(|c| Arc::try_unwrap(c).ok()) {
            connection.close().await;
        }
    }
}

impl Inner {
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
        // Dropping the call's future — here when the context is cancelled, or
        // when the caller drops this one — sends the server
        // `notifications/cancelled` for it.
        let outcome = tokio::select! {
            outcome = connection.service.call_tool(params) => outcome,
            () = context.cancelled() => {
                return Err(self.failed(format!("the call of `{name}` was cancelled")));
            }
        };
        match outcome {
            Ok(result)
                if result
                    .result_type
                    .as_ref()
                    .is_some_and(|t| !t.is_complete()) =>
            {
                Err(self.failed(format!(
                    "`{name}` answered with a result of type `{}`, which lmstack does not support",
                    result
                        .result_type
                        .as_ref()
                        .map(|t| t.as_str())
                        .unwrap_or_default()
                )))
            }
            Ok(result) => Ok(content::output(result)),
            Err(ServiceError::TransportClosed) => Err(self.failed(format!(
                "the connection closed during the call of `{name}` (the server may have \
                 stopped; it is started again on next use){}",
                connection.stderr()
            ))),
            Err(error) => Err(self.failed(format!("the call of `{name}` failed: {error}"))),
        }
    }

    /// Reads the server's tools again and replaces the list.
    async fn refresh(self: &Arc<Self>) {
        let listed = match self.connection().await {
            Ok(connection) => list(&self.config, &connection).await,
            Err(error) => Err(error),
        };
        match listed {
            Ok(listed) => self.tools.replace(tools_of(self, listed)),
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

/// The server's tools as [`Tool`]s that call it. They hold the server weakly: the
/// registry holds the server itself.
fn tools_of(inner: &Arc<Inner>, listed: Vec<McpTool>) -> Vec<Tool> {
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
            let (server, name) = (Arc::downgrade(inner), tool.name.to_string());
            Tool::new(spec, move |arguments, context: CallContext| {
                let (server, name) = (server.clone(), name.clone());
                async move {
                    let server = server.upgrade().ok_or("the MCP server was closed")?;
                    Ok::<_, crate::BoxError>(server.call(&name, arguments, &context).await?)
                }
            })
        })
        .collect()
}

/// Reads the tool list again whenever the server says it changed, for as long as
/// the server is in use.
async fn refresh_on_change(server: Weak<Inner>) {
    let Some(changed) = server.upgrade().map(|s| s.tools_changed.clone()) else {
        return;
    };
    loop {
        changed.notified().await;
        let Some(server) = server.upgrade() else {
            return;
        };
        server.refresh().await;
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(refresher) = self.refresher.get_mut().ok().and_then(Option::take) {
            refresher.abort();
        }
    }
}

impl ToolSource for McpServer {
    fn name(&self) -> &str {
        &self.inner.config.name
    }

    fn version(&self) -> u64 {
        self.inner.tools.version()
    }

    fn tools(&self) -> Arc<[Tool]> {
        self.inner.tools.tools()
    }
}

impl fmt::Debug for McpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServer")
            .field("config", &self.inner.config)
            .field("tools", &self.inner.tools.tools().len())
            .finish_non_exhaustive()
    }
}

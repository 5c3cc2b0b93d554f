//! One connection to an MCP server: the transport, the handshake under its time
//! limit, and the client's side of the protocol (its name, and the notifications it
//! listens to).

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::sync::Notify;

use super::child::Child;
use super::config::{McpConfig, Transport};
use super::error::{McpError, StderrTail};

/// How long a server that failed its handshake gets to exit, so that its exit
/// status can be told.
const EXIT_GRACE: Duration = Duration::from_millis(500);

/// A live connection: the protocol service and, for a stdio server, its process
/// (dropped after the service, which kills its process group).
pub(super) struct Connection {
    pub(super) service: RunningService<RoleClient, Handler>,
    child: Option<Child>,
}

/// The client's side of the protocol: a list-changed notification wakes the
/// server's refresher.
#[derive(Clone)]
pub(super) struct Handler {
    pub(super) server: Arc<str>,
    pub(super) tools_changed: Arc<Notify>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        let client = Implementation::new("lmstack", env!("CARGO_PKG_VERSION"));
        ClientConfig::new(ClientCapabilities::default(), client)
    }

    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "notifications/tools/list_changed");
        self.tools_changed.notify_one();
    }
}

impl Connection {
    /// Starts or reaches the server and completes the handshake within the
    /// configured time.
    pub(super) async fn open(config: &McpConfig, handler: Handler) -> Result<Self, McpError> {
        let target = config.target();
        let limit = config.start_timeout;
        match &config.transport {
            Transport::Stdio(command) => {
                let (mut child, stdout, stdin) = Child::spawn(command, &config.name)?;
                match tokio::time::timeout(limit, handler.serve((stdout, stdin))).await {
                    Ok(Ok(service)) => Ok(Connection {
                        service,
                        child: Some(child),
                    }),
                    Ok(Err(error)) => {
                        let exited = child.exited_within(EXIT_GRACE).await;
                        let (status, stderr) = child.stop().await;
                        let reason = match exited.or(status) {
                            Some(status) => format!("it exited ({status}) during the handshake"),
                            None => error.to_string(),
                        };
                        Err(McpError::Start {
                            target,
                            reason,
                            stderr,
                        })
                    }
                    Err(_) => Err(McpError::StartTimeout {
                        target,
                        after: limit,
                        stderr: child.stop().await.1,
                    }),
                }
            }
            Transport::Http { url, bearer } => {
                let mut http = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                if let Some(token) = bearer {
                    http = http.auth_header(token.as_str());
                }
                let client = match url.split_once("://") {
                    Some((scheme, _)) if crate::tls::unreachable(scheme) => {
                        Err(crate::tls::MISSING.to_owned())
                    }
                    _ => crate::tls::client_builder()
                        .build()
                        .map_err(|error| error.to_string()),
                };
                let client = client.map_err(|reason| McpError::Start {
                    target: target.clone(),
                    reason,
                    stderr: StderrTail::default(),
                })?;
                let transport = StreamableHttpClientTransport::with_client(client, http);
                match tokio::time::timeout(limit, handler.serve(transport)).await {
                    Ok(Ok(service)) => Ok(Connection {
                        service,
                        child: None,
                    }),
                    Ok(Err(error)) => Err(McpError::Start {
                        target,
                        reason: error.to_string(),
                        stderr: StderrTail::default(),
                    }),
                    Err(_) => Err(McpError::StartTimeout {
                        target,
                        after: limit,
                        stderr: StderrTail::default(),
                    }),
                }
            }
        }
    }

    /// False once the transport closed (the process ended, the session broke).
    pub(super) fn is_alive(&self) -> bool {
        !self.service.is_transport_closed()
    }

    /// The end of the server's stderr so far (stdio servers).
    pub(super) fn stderr(&self) -> StderrTail {
        self.child.as_ref().map(Child::tail).unwrap_or_default()
    }

    /// Ends the session and stops the process.
    pub(super) async fn close(self) {
        let Connection { service, child } = self;
        let _ = service.cancel().await;
        if let Some(child) = child {
            child.stop().await;
        }
    }
}

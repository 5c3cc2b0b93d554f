//! MCP servers' tools as a [tool source](super::ToolSource), on `rmcp`, the
//! official Rust SDK (feature `mcp`).
//!
//! Connect to a server — a child process speaking MCP on stdio, or a streamable
//! HTTP endpoint — and add it to a registry beside local tools; the function layer
//! then runs its tools like any other, under the same time limits, concurrency
//! and media policy:
//!
//! ```no_run
//! use lmstack::function::mcp::{McpConfig, McpServer};
//! use lmstack::function::{FunctionCallLayer, ToolRegistry};
//!
//! # async fn run(local_tools: Vec<lmstack::function::Tool>) -> Result<(), lmstack::Error> {
//! let everything = McpServer::connect(McpConfig::stdio(
//!     "npx",
//!     ["-y", "@modelcontextprotocol/server-everything@2026.8.31", "stdio"],
//! ))
//! .await?;
//! let registry = ToolRegistry::builder()
//!     .tools(local_tools)
//!     .source_prefixed(everything, "everything") // the model sees `everything__echo`
//!     .build()?;
//! let layer = FunctionCallLayer::new(registry);
//! # let _ = layer; Ok(()) }
//! ```
//!
//! **Results keep every block, in order.** An image stays an image block — checked
//! by the layer's [`MediaPolicy`](super::MediaPolicy) like any tool's image — and
//! each provider then carries it in the shape it accepts (see `docs/mcp.md`):
//!
//! | MCP | canonical |
//! |---|---|
//! | `TextContent` | text block |
//! | `ImageContent` | image block |
//! | `AudioContent` | audio block |
//! | `EmbeddedResource`, text | text block naming the URI |
//! | `EmbeddedResource`, blob | image, audio or document block by its MIME type (text for a `text/*` type) |
//! | `ResourceLink` | text block with its URI, name, type and description |
//! | `structuredContent` | JSON text when there is no content; always in the result's metadata ([`STRUCTURED_CONTENT_KEY`]) |
//! | `isError: true` | an error result with its content |
//!
//! **Failures are results or clear errors, never hangs.** A server that does not
//! start within [`McpConfig::start_timeout`] is stopped, and the error names its
//! command, its exit status and the tail of its stderr. A call under way when the
//! server stops gets an error result, and the server is started again on next use
//! (a bounded number of times). A call the function layer stops is cancelled on
//! the server (`notifications/cancelled`).

mod child;
mod config;
mod connection;
mod content;
mod error;
mod server;

pub use config::McpConfig;
pub use content::{STRUCTURED_CONTENT_KEY, structured_content};
pub use error::{McpError, StderrTail};
pub use server::McpServer;

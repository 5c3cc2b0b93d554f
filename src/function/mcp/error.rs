//! Why an MCP server could not be used.

use std::fmt;
use std::time::Duration;

use crate::Error;

/// Why an MCP server could not be reached, started or used. Its message names the
/// server (its command line or URL) and, for a child process, its exit status and
/// the tail of its stderr.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The command could not be started at all (not found, not executable).
    #[error("could not start the MCP server `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The server did not complete the MCP handshake: it exited, answered
    /// something else, or could not be reached.
    #[error("the MCP server `{target}` did not start: {reason}{stderr}")]
    Start {
        /// The command line or URL.
        target: String,
        /// What happened: its exit status, or the protocol or transport error.
        reason: String,
        /// The tail of its stderr, if any (with a leading line break).
        stderr: StderrTail,
    },
    /// The server did not answer the handshake in time; it was stopped.
    #[error(
        "the MCP server `{target}` did not answer the handshake within {} and was stopped{stderr}",
        humantime::format_duration(*after)
    )]
    StartTimeout {
        /// The command line or URL.
        target: String,
        /// The time it had.
        after: Duration,
        /// The tail of its stderr, if any.
        stderr: StderrTail,
    },
    /// A request to a running server failed (listing its tools, say).
    #[error("the MCP server `{server}`: {message}")]
    Request {
        /// The server's name.
        server: String,
        /// What failed.
        message: String,
    },
    /// The server stopped more often than it may be restarted.
    #[error(
        "the MCP server `{server}` stopped and was restarted {restarts} times; it is not restarted again"
    )]
    GaveUp {
        /// The server's name.
        server: String,
        /// The restarts made.
        restarts: u32,
    },
}

/// The last lines a child process wrote to stderr, shown after an error.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StderrTail(pub String);

impl fmt::Display for StderrTail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tail = self.0.trim_end();
        if tail.is_empty() {
            return Ok(());
        }
        write!(f, "; its stderr ended with:\n{tail}")
    }
}

impl From<McpError> for Error {
    fn from(error: McpError) -> Self {
        Error::stage("mcp", error.to_string())
    }
}

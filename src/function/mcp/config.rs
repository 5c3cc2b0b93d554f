//! How to reach an MCP server: a command to start (stdio) or a URL (streamable
//! HTTP), and the limits of the connection.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// How to reach an MCP server, and how long to wait for it.
///
/// ```
/// use std::time::Duration;
/// use lmstack::function::mcp::McpConfig;
///
/// let files = McpConfig::stdio("npx", ["-y", "@modelcontextprotocol/server-filesystem", "."])
///     .env("NODE_OPTIONS", "--max-old-space-size=256")
///     .start_timeout(Duration::from_secs(60));
/// assert_eq!(files.name(), "server-filesystem");
///
/// let search = McpConfig::http("https://mcp.example.com/mcp").bearer("token").named("search");
/// assert_eq!(search.name(), "search");
/// assert!(!format!("{search:?}").contains("token"), "the token is never printed");
/// ```
#[derive(Clone)]
pub struct McpConfig {
    pub(super) name: String,
    pub(super) transport: Transport,
    pub(super) start_timeout: Duration,
    pub(super) max_restarts: u32,
}

/// Where the server is.
#[derive(Clone)]
pub(super) enum Transport {
    /// A child process speaking MCP on its stdin and stdout.
    Stdio(Command),
    /// A streamable HTTP endpoint.
    Http { url: String, bearer: Option<String> },
}

/// A command line to start a stdio server.
#[derive(Clone, Debug)]
pub(super) struct Command {
    pub(super) program: OsString,
    pub(super) args: Vec<OsString>,
    pub(super) env: Vec<(OsString, OsString)>,
    pub(super) current_dir: Option<PathBuf>,
}

impl McpConfig {
    /// The default time the server has to start and answer the handshake: 30 s
    /// (`npx` may have to install the server first).
    pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(30);

    /// The default number of restarts after the server stopped: 3.
    pub const DEFAULT_MAX_RESTARTS: u32 = 3;

    /// A server started as a child process, speaking MCP on its stdin and stdout
    /// (its stderr goes to the log, and the tail of it into errors). Its name is
    /// the program's, or for a launcher (`npx`, `uvx`, `node`, `python`…) that of
    /// the package or script it runs, without scope, path or version
    /// (`npx -y @scope/server-x@1.2` → `server-x`).
    pub fn stdio<I, A>(program: impl Into<OsString>, args: I) -> Self
    where
        I: IntoIterator<Item = A>,
        A: Into<OsString>,
    {
        let command = Command {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: Vec::new(),
            current_dir: None,
        };
        Self::new(command.default_name(), Transport::Stdio(command))
    }

    /// A server at a streamable HTTP endpoint (its name is the URL's host).
    pub fn http(url: impl Into<String>) -> Self {
        let url = url.into();
        let name = url
            .split("://")
            .nth(1)
            .and_then(|rest| rest.split(['/', ':', '?']).next())
            .filter(|host| !host.is_empty())
            .unwrap_or("mcp")
            .to_owned();
        Self::new(name, Transport::Http { url, bearer: None })
    }

    fn new(name: String, transport: Transport) -> Self {
        McpConfig {
            name,
            transport,
            start_timeout: Self::DEFAULT_START_TIMEOUT,
            max_restarts: Self::DEFAULT_MAX_RESTARTS,
        }
    }

    /// Sets the server's name, used in messages and logs (and a natural choice of
    /// prefix for its tools).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets an environment variable of the child process (stdio servers).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        if let Transport::Stdio(command) = &mut self.transport {
            command.env.push((key.into(), value.into()));
        }
        self
    }

    /// Sets the working directory of the child process (stdio servers).
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        if let Transport::Stdio(command) = &mut self.transport {
            command.current_dir = Some(dir.into());
        }
        self
    }

    /// Sends `Authorization: Bearer <token>` (HTTP servers).
    pub fn bearer(mut self, token: impl Into<String>) -> Self {
        if let Transport::Http { bearer, .. } = &mut self.transport {
            *bearer = Some(token.into());
        }
        self
    }

    /// Sets the time the server has to start and answer the handshake.
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = timeout;
        self
    }

    /// Sets how many times a server that stopped is started again, over the
    /// client's life; past that, its calls get error results.
    pub fn max_restarts(mut self, restarts: u32) -> Self {
        self.max_restarts = restarts;
        self
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The command line or URL, for messages.
    pub(super) fn target(&self) -> String {
        match &self.transport {
            Transport::Stdio(command) => command.to_string(),
            Transport::Http { url, .. } => url.clone(),
        }
    }
}

impl Command {
    /// Programs that run the package or script named by their first argument.
    const LAUNCHERS: &[&str] = &[
        "npx", "pnpx", "bunx", "uvx", "pipx", "node", "bun", "deno", "python", "python3",
    ];

    fn default_name(&self) -> String {
        let program = base_name(&self.program.to_string_lossy()).to_owned();
        if !Self::LAUNCHERS.contains(&program.as_str()) {
            return program;
        }
        let package = self
            .args
            .iter()
            .map(|arg| arg.to_string_lossy())
            .find(|arg| !arg.starts_with('-') && arg != "run");
        match package {
            Some(package) => base_name(&package).to_owned(),
            None => program,
        }
    }
}

/// The last path segment of `word`, without a `@version`.
fn base_name(word: &str) -> &str {
    let last = word
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(word);
    match last.rfind('@') {
        Some(at) if at > 0 => &last[..at],
        _ => last,
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.program.to_string_lossy())?;
        for arg in &self.args {
            write!(f, " {}", arg.to_string_lossy())?;
        }
        Ok(())
    }
}

impl fmt::Debug for McpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("McpConfig");
        debug.field("name", &self.name);
        match &self.transport {
            Transport::Stdio(command) => debug.field("command", command),
            Transport::Http { url, bearer } => debug
                .field("url", url)
                .field("bearer", &bearer.as_ref().map(|_| "<redacted>")),
        };
        debug
            .field("start_timeout", &self.start_timeout)
            .field("max_restarts", &self.max_restarts)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stdio_servers_name_comes_from_its_package_or_program() {
        let name = |program: &str, args: &[&str]| McpConfig::stdio(program, args).name;
        assert_eq!(
            name(
                "npx",
                &[
                    "-y",
                    "@modelcontextprotocol/server-everything@2026.8.31",
                    "stdio"
                ]
            ),
            "server-everything"
        );
        assert_eq!(name("uvx", &["mcp-server-fetch"]), "mcp-server-fetch");
        assert_eq!(
            name("/usr/bin/my-server", &["--verbose", "x/y"]),
            "my-server"
        );
        assert_eq!(
            McpConfig::http("http://127.0.0.1:3001/mcp").name,
            "127.0.0.1"
        );
    }
}

//! The MCP options shared by `lmstack mcp` and `lmstack chat`, and the one place
//! they become an [`McpConfig`]: a command line (`--server`, `--mcp`) split into
//! words, or a URL (`--url`, `--mcp-url`), with the options of [`Options`].

use std::path::PathBuf;
use std::time::Duration;

use lmstack::Error;
use lmstack::function::mcp::{McpConfig, McpServer};
use lmstack::function::{Tool, ToolRegistry};

/// One server for `lmstack mcp`: `--server` or `--url`, and its options.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["server", "url"])))]
pub struct ServerArgs {
    /// Start a server speaking MCP on stdio: its command line, split into words
    /// as a shell would (quotes and backslashes; nothing expanded).
    #[arg(long, value_name = "'CMD ARGS…'")]
    server: Option<String>,
    /// Reach a server at this streamable HTTP endpoint.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    #[command(flatten)]
    options: Options,
}

impl ServerArgs {
    /// Starts or reaches the server.
    pub async fn connect(&self) -> Result<McpServer, Error> {
        let config = match (&self.server, &self.url) {
            (Some(command), _) => self.options.stdio(command)?,
            (None, Some(url)) => self.options.http(url)?,
            (None, None) => unreachable!("clap requires --server or --url"),
        };
        connect(config).await
    }
}

/// How every server a command starts or reaches is started or reached.
#[derive(Debug, Default, clap::Args)]
pub struct Options {
    /// Send the token in this environment variable as `Authorization: Bearer`
    /// (HTTP servers).
    #[arg(long, value_name = "VAR")]
    bearer_env: Option<String>,
    /// The working directory of the stdio servers.
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Set an environment variable of the stdio servers (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = key_value)]
    env: Vec<(String, String)>,
    /// The time a server has to start and answer the MCP handshake [default: 30].
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    start_timeout: Option<Duration>,
}

impl Options {
    /// The server started with the command line `line`.
    pub fn stdio(&self, line: &str) -> Result<McpConfig, Error> {
        let mut config = lmstack::config::mcp_command(line)?;
        for (key, value) in &self.env {
            config = config.env(key, value);
        }
        if let Some(dir) = &self.cwd {
            config = config.current_dir(dir);
        }
        Ok(self.limited(config))
    }

    /// The server at `url`.
    pub fn http(&self, url: &str) -> Result<McpConfig, Error> {
        let mut config = McpConfig::http(url);
        if let Some(var) = &self.bearer_env {
            let token = std::env::var(var).map_err(|_| {
                Error::stage(
                    "lmstack",
                    format!("--bearer-env {var}: the variable is not set (or not UTF-8)"),
                )
            })?;
            config = config.bearer(token);
        }
        Ok(self.limited(config))
    }

    fn limited(&self, config: McpConfig) -> McpConfig {
        match self.start_timeout {
            Some(timeout) => config.start_timeout(timeout),
            None => config,
        }
    }
}

/// The MCP servers whose tools `lmstack chat` offers beside its own.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "MCP servers")]
pub struct ChatServers {
    /// Start an MCP server over stdio and offer its tools (repeatable): its
    /// command line, split into words as for `lmstack mcp --server`.
    #[arg(long = "mcp", value_name = "'CMD ARGS…'")]
    commands: Vec<String>,
    /// Offer the tools of the MCP server at this streamable HTTP endpoint
    /// (repeatable).
    #[arg(long = "mcp-url", value_name = "URL")]
    urls: Vec<String>,
    /// Name every MCP server's tools SERVER__TOOL, SERVER being the package or
    /// program it runs, or the URL's host (other characters than letters,
    /// digits, `_` and `-` written `_`). Without it the tools keep their names,
    /// and a name offered twice is an error.
    #[arg(long)]
    mcp_prefix: bool,
    #[command(flatten)]
    options: Options,
}

impl ChatServers {
    /// A registry of the `local` tools, then each server's (commands, then URLs).
    pub async fn registry(&self, local: Vec<Tool>) -> Result<ToolRegistry, Error> {
        let stdio = self.commands.iter().map(|line| self.options.stdio(line));
        let http = self.urls.iter().map(|url| self.options.http(url));
        let configs = stdio.chain(http).collect::<Result<Vec<_>, _>>()?;
        let mut builder = ToolRegistry::builder().tools(local);
        for config in configs {
            let server = connect(config).await?;
            builder = if self.mcp_prefix {
                let prefix = tool_prefix(server.name());
                builder.source_prefixed(server, prefix)
            } else {
                builder.source(server)
            };
        }
        builder.build().map_err(|error| match error {
            Error::DuplicateTool { name } if !self.mcp_prefix => Error::stage(
                "lmstack",
                format!(
                    "two tools are named `{name}` (an MCP server's and another's); pass \
                     --mcp-prefix to name each MCP server's tools SERVER__TOOL"
                ),
            ),
            other => other,
        })
    }
}

/// A server's name as a prefix of tool names: providers accept letters, digits,
/// `_` and `-` there.
fn tool_prefix(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' => c,
            _ => '_',
        })
        .collect()
}

/// Starts or reaches the server `config` describes.
pub async fn connect(config: McpConfig) -> Result<McpServer, Error> {
    Ok(McpServer::connect(config).await?)
}

/// A number of seconds, such as `1` or `0.5`.
pub fn seconds(text: &str) -> Result<Duration, String> {
    text.parse::<f64>()
        .ok()
        .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
        .ok_or_else(|| format!("`{text}` is not a number of seconds"))
}

/// `KEY=VALUE`.
fn key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("`{text}` is not KEY=VALUE")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_and_key_values_parse_or_say_why_not() {
        assert_eq!(seconds("1.5"), Ok(Duration::from_millis(1500)));
        assert!(
            seconds("-1")
                .unwrap_err()
                .contains("`-1` is not a number of seconds")
        );
        assert_eq!(key_value("A=b=c"), Ok(("A".into(), "b=c".into())));
        assert!(key_value("=x").is_err());
        assert!(key_value("A").is_err());
    }

    #[test]
    fn a_prefix_keeps_only_what_tool_names_allow() {
        assert_eq!(tool_prefix("server-everything"), "server-everything");
        assert_eq!(tool_prefix("127.0.0.1"), "127_0_0_1");
    }
}

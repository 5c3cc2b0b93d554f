//! Reaching the real MCP server `@modelcontextprotocol/server-everything@2026.8.31`
//! (npm), which `.ci/test` installs and, in its streamable HTTP mode, starts.

use std::path::PathBuf;

use lmstack::function::mcp::McpConfig;

/// Why a test needs the server, for its panic messages.
const NEEDS: &str = "needs server-everything: .ci/test installs it and sets \
                     LMSTACK_MCP_EVERYTHING_DIR (and LMSTACK_MCP_EVERYTHING_URL)";

/// The npm prefix server-everything is installed under, from
/// `LMSTACK_MCP_EVERYTHING_DIR`.
pub fn everything_dir() -> PathBuf {
    std::env::var_os("LMSTACK_MCP_EVERYTHING_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("LMSTACK_MCP_EVERYTHING_DIR is not set: this test {NEEDS}"))
}

/// The command line that starts server-everything over stdio with `npx`, from
/// its install directory (no download).
pub fn everything_command() -> (&'static str, Vec<&'static str>) {
    (
        "npx",
        vec!["--no-install", "mcp-server-everything", "stdio"],
    )
}

/// server-everything over stdio, started with `npx`.
pub fn everything() -> McpConfig {
    let (program, args) = everything_command();
    McpConfig::stdio(program, args)
        .current_dir(everything_dir())
        .named("everything")
}

/// server-everything's streamable HTTP endpoint, from `LMSTACK_MCP_EVERYTHING_URL`.
pub fn everything_url() -> String {
    std::env::var("LMSTACK_MCP_EVERYTHING_URL")
        .unwrap_or_else(|_| panic!("LMSTACK_MCP_EVERYTHING_URL is not set: this test {NEEDS}"))
}

/// server-everything over streamable HTTP.
pub fn everything_http() -> McpConfig {
    McpConfig::http(everything_url()).named("everything")
}

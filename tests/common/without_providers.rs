//! The shared helpers that need no provider, for a test binary built without
//! one (`--no-default-features --features mcp`): the scripted server and the
//! MCP server's launch. With a provider, such a binary uses `mod.rs`, which
//! holds these too.

#![allow(dead_code)] // each test uses its own part of the helpers

#[cfg(feature = "mcp")]
#[path = "mcp.rs"]
pub mod mcp;
#[path = "server.rs"]
pub mod server;

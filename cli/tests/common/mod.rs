//! The helpers of this crate's tests: the library's own (`tests/common` at the
//! root of the repository, shared by path, not copied: its fixtures, the
//! scripted HTTP server, llmock, the MCP server's address) and [`cli`], running
//! the `lmstack` binary.
//!
//! The library's helpers gate a few parts on the library's features, which are
//! no features of this crate: those parts (the OpenAI lifter's helpers, the
//! recorded retries) are left out here, and the MCP helpers, which the command
//! line always has, are included on their own.

#![allow(dead_code)] // each test file uses its own part of the helpers

#[allow(unexpected_cfgs)]
#[path = "../../../tests/common/mod.rs"]
mod library;
pub use library::*;

#[path = "../../../tests/common/mcp.rs"]
pub mod mcp;

pub mod cli;

//! The `lmstack` command line as a process: help and every subcommand, the
//! interactive chat, `mcp`, `serve` (and under pressure), the offline demo, and
//! hostile input.
//!
//! One test binary; the modules that need Unix gate themselves on it.
//! `memory.rs` is a test binary of its own (`cli_memory` in Cargo.toml): it
//! compares its children's peak memory with its own, which other tests running
//! beside it would raise.

#[path = "../common/mod.rs"]
mod common;

mod chat;
mod commands;
mod demo;
mod faults;
mod mcp;
#[cfg(all(unix, feature = "otel"))]
mod otel;
mod provider;
mod serve;
mod serve_deployments;
mod serve_limits;
mod serve_redis;

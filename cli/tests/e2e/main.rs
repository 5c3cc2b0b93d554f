//! End to end against real clients and servers that `.ci/test` installs and
//! starts: the official Python SDKs as clients of `lmstack serve` (their scripts
//! in `sdk/`), one of them through the gateway to llama.cpp's own HTTP server,
//! and the real Claude Code. A plain `cargo test` lists these tests as ignored.

#[path = "../common/mod.rs"]
mod common;

mod claude_code;
mod sdk_clients;

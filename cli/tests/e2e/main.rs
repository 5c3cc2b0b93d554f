//! End to end against real clients and servers that `.ci/test` installs and
//! starts: the official Python SDKs as clients of `lmstack serve` (their scripts
//! in `sdk/`), one of them through the gateway to llama.cpp's own HTTP server,
//! and the real coding agents Claude Code, Codex CLI and Gemini CLI, before
//! scripted upstreams of every wire and a text-only one (`upstream`): the
//! matrix of `agent`. A plain `cargo test` lists these tests
//! as ignored; it runs the checks of the scripted upstreams themselves.

#[path = "../common/mod.rs"]
mod common;

mod agent;
mod claude_code;
mod codex;
mod gemini_cli;
mod sdk_clients;
mod upstream;

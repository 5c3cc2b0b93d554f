//! End to end against real servers that `.ci/test` starts: llama.cpp's own HTTP
//! server (SmolLM2-135M, both wires) and the official Python SDKs as clients of
//! `lmstack serve` (their scripts in `sdk/`). A plain `cargo test` lists these
//! tests as ignored.
//!
//! One test binary; the modules that need a feature gate themselves on it.
//! `soak.rs` is a test binary of its own (`soak` in Cargo.toml): it measures
//! its own process's memory, which other tests running beside it would raise.

#[cfg(feature = "http")]
#[path = "../common/mod.rs"]
mod common;

mod llamacpp;
mod llamacpp_anthropic;
mod sdk_clients;

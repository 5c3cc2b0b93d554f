//! End to end against real servers that `.ci/test` starts: llama.cpp's own HTTP
//! server (SmolLM2-135M, both wires). A plain `cargo test` lists these tests as
//! ignored. (The official Python SDKs as clients of `lmstack serve` are the
//! command line's: `cli/tests/e2e/`.)
//!
//! One test binary; the modules that need a feature gate themselves on it.
//! `soak.rs` is a test binary of its own (`soak` in Cargo.toml): it measures
//! its own process's memory, which other tests running beside it would raise.

#[cfg(feature = "http")]
#[path = "../common/mod.rs"]
mod common;

mod llamacpp;
mod llamacpp_anthropic;

//! End to end against real servers that `.ci/test` starts: the official Python
//! SDKs as clients of `lmstack serve` (their scripts in `sdk/`), one of them
//! through the gateway to llama.cpp's own HTTP server. A plain `cargo test`
//! lists these tests as ignored.

#[path = "../common/mod.rs"]
mod common;

mod sdk_clients;

//! `lmstack::server`: the gateway over real HTTP on loopback, with lmstack's own
//! providers as its clients, and under hostile clients, forged browser requests
//! and slow upstreams.
//!
//! One test binary; the modules that need a feature gate themselves on it.
//! `soak.rs` is a test binary of its own (`serve_soak` in Cargo.toml): it
//! measures a gateway's latency and memory, which other tests running beside it
//! would disturb.

#[cfg(feature = "http")]
#[path = "../common/mod.rs"]
mod common;

mod gateway;
mod limits;
mod mounted;

//! `lmstack::server`: the gateway over real HTTP on loopback, with lmstack's own
//! providers as its clients, and under hostile clients, forged browser requests
//! and slow upstreams.
//!
//! One test binary; the modules that need a feature gate themselves on it.
//! The soak of `lmstack serve` as a process is the command line's
//! (`cli/tests/server/soak.rs`, the test binary `serve_soak`).

#[cfg(feature = "http")]
#[path = "../common/mod.rs"]
mod common;
#[cfg(feature = "http")]
#[path = "../common/regressions.rs"]
mod regressions;

mod anthropic_clients;
mod caching;
mod citations;
#[cfg(feature = "http")]
mod forward;
mod gateway;
mod gemini_clients;
#[cfg(feature = "http")]
mod interleaved;
mod limits;
mod mounted;
#[cfg(feature = "http")]
mod reply_extras;
#[cfg(feature = "http")]
mod responses;
mod structured;

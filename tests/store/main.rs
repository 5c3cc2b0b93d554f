//! `lmstack::store`: media stores and stored conversations, and a stored
//! conversation continued with every wire over loopback.
//!
//! One test binary; the modules that need a feature gate themselves on it.

#[path = "../common/regressions.rs"]
mod regressions;

#[cfg(all(feature = "openai", feature = "anthropic", feature = "gemini"))]
#[path = "../common/mod.rs"]
mod common;

mod http;
mod stores;

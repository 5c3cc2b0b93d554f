//! Faults the crate must survive: hostile input, faults and load, one module
//! per class of fault. Each test fails if its defence is taken away.
//!
//! The modules that need a feature gate themselves on it.

#[cfg(feature = "openai")]
#[path = "../common/mod.rs"]
mod common;

mod tools;

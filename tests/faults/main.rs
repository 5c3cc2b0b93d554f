//! Faults the crate must survive: hostile input, faults and load, one module
//! per class of fault. Each test fails if its defence is taken away.
//!
//! The modules that need a feature gate themselves on it.

#[cfg(feature = "openai")]
#[path = "../common/mod.rs"]
mod common;

#[cfg(feature = "function")]
mod effects;

mod parser;

#[cfg(feature = "openai")]
mod secrets;

#[cfg(all(feature = "cli", feature = "demo"))]
mod cli;

#[cfg(feature = "openai")]
mod fuzz;
#[cfg(feature = "openai")]
mod provider;

mod tools;

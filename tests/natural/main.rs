//! `lmstack::natural`: natural tool use for text-only models — the parser (every
//! dialect, hostile text, arbitrary text), the transformer, the families' own
//! dialects, and the layer with the function layer and the tool loop.
//!
//! One test binary; the modules that need a feature gate themselves on it.

#[path = "../common/regressions.rs"]
mod regressions;

mod answer_format;
mod dialects;
mod parser;
mod parser_faults;
mod parser_fuzz;
mod parser_incremental;
mod tool_use;
mod tools;
mod transformer;

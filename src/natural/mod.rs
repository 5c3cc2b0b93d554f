//! Natural tool use: tool calls written as text, for models without native tool
//! calling.
//!
//! - [`NaturalToolUseParser`]: model text → tool calls, in the dialects of
//!   [`Dialect`];
//! - [`NaturalToolUseTransformer`]: tool calls and results → text, the reverse,
//!   in the dialects of [`Dialect::RENDERED`];
//! - [`NaturalToolUse`]: both, plus a system-prompt section describing the
//!   tools: the one layer that makes a text-only model tool-capable;
//! - [`json_in_reply`]: the JSON value in a reply, for tools that ask a model
//!   for JSON.

mod answer_format;
mod dialect;
mod history;
mod json_text;
mod markers;
mod metadata;
mod parser;
mod prompt;
mod reply_json;
mod result_text;
mod scan;
mod tool_use;
mod transformer;

pub use dialect::Dialect;
pub use history::HistoryReader;
pub use metadata::{TOOL_AGGREGATES_KEY, TOOL_CALL_IDS_KEY, TOOL_METADATA_KEY};
pub use parser::{IncrementalParser, NaturalToolUseParser, OnInvalid, ParserMachine};
pub use reply_json::json_in_reply;
pub use tool_use::{NaturalToolUse, NaturalToolUseMachine};
pub use transformer::{Consolidation, NaturalToolUseTransformer, TransformerMachine};

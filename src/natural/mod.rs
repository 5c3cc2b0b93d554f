//! Natural tool use: tool calls written as text, for models without native tool
//! calling.
//!
//! - [`NaturalToolUseParser`]: model text → tool calls, in the dialects of
//!   [`Dialect`];
//! - [`NaturalToolUseTransformer`]: tool calls and results → text, the reverse;
//! - [`NaturalToolUse`]: both, plus a system-prompt section describing the
//!   tools: the one layer that makes a text-only model tool-capable;
//! - [`json_in_reply`]: the JSON value in a reply, for tools that ask a model
//!   for JSON.

mod dialect;
mod format;
mod history;
mod parser;
mod prompt;
mod reply_json;
mod scan;
mod tool_use;
mod transformer;
mod turn;

pub use dialect::Dialect;
pub use format::{RenderDialect, TOOL_AGGREGATES_KEY, TOOL_CALL_IDS_KEY, TOOL_METADATA_KEY};
pub use history::HistoryReader;
pub use parser::{NaturalToolUseParser, OnInvalid, ParserMachine};
pub use reply_json::json_in_reply;
pub use tool_use::NaturalToolUse;
pub use transformer::{Consolidation, NaturalToolUseTransformer, TransformerMachine};

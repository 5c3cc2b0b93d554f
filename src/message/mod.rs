//! The canonical message model, streaming events and the joiner that folds events
//! into messages.
//!
//! Every type here has a stable serde JSON form: a public contract that the CLI
//! prints, tests compare and users store. Messages and events are internally
//! tagged objects (`"type"`, snake_case):
//!
//! ```json
//! {"type":"text","role":"assistant","text":"…","metadata":{"generation_id":"gen-1"}}
//! {"type":"multimodal","role":"user","content":[{"type":"text","text":"…"},{"type":"image","media_type":"image/png","data":"…"}]}
//! {"type":"multimodal","role":"user","content":[{"type":"image","media_type":"image/png","ref":"sha256:…"}]}
//! {"type":"reasoning","text":"…","signature":"…"}
//! {"type":"tool_calls","calls":[{"id":"call_1","name":"get_weather","arguments":{"city":"Paris"}}]}
//! {"type":"tool_results","results":[{"call_id":"call_1","name":"get_weather","content":[{"type":"text","text":"18°C"}],"is_error":false}]}
//! {"type":"tool_aggregate","calls":[…],"results":[…]}
//! {"type":"usage","input_tokens":12,"output_tokens":40}
//! ```

mod cache;
mod citation;
mod content;
mod event;
mod joiner;
mod messages;
mod metadata;
mod reference;
mod tool;

pub use cache::{CACHE_CONTROL_KEY, CacheControl, CacheTtl};
pub use citation::{Citation, CitationSource, DocumentLocation, LocationUnit, TextSpan};
#[cfg(any(feature = "function", feature = "openai"))]
pub(crate) use content::mime_essence;
pub use content::{ContentBlock, Media, MediaSource};
pub use event::{CallDetails, Event, FinishReason, ReasoningDelta, TextDelta, ToolCallDelta};
pub use joiner::Joiner;
pub use messages::{
    Message, MultimodalMessage, ReasoningMessage, Role, TextMessage, ToolAggregateMessage,
    ToolCallsMessage, ToolResultsMessage, Usage,
};
pub use metadata::Metadata;
pub use reference::{InvalidRef, MediaRef};
pub use tool::{InvalidCall, InvalidCallKind, ToolCall, ToolResult};

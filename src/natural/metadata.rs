//! The metadata keys under which a rendered message keeps what its text has no
//! place for, and the call and result data kept under [`TOOL_METADATA_KEY`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{InvalidCall, Metadata, ToolCall, ToolResult};

/// The metadata key under which call and result data that has no place in the
/// text (their own metadata, `provider_executed`, `invalid`) is kept.
pub const TOOL_METADATA_KEY: &str = "tool_metadata";

/// The metadata key of a single-form message holding several aggregates, or
/// other sources' metadata: each aggregate's pair count and own metadata, in
/// order (`[{"pairs": 2, "metadata": {…}}]`).
pub const TOOL_AGGREGATES_KEY: &str = "tool_aggregates";

/// The metadata key that keeps the call ids the text leaves out (see
/// [`NaturalToolUseTransformer::call_ids`](super::NaturalToolUseTransformer::call_ids)):
/// the call id of every call and response block of the message, in order.
pub const TOOL_CALL_IDS_KEY: &str = "tool_call_ids";

/// The metadata key of a result read back whose content holds placeholder
/// lines: the indexes of the text blocks that stand for media.
pub(crate) const PLACEHOLDERS_KEY: &str = "media_placeholders";

/// One aggregate of a message in the single form, as kept under
/// [`TOOL_AGGREGATES_KEY`]: how many call/response pairs of the message are
/// its, and its own metadata.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Part {
    pub(crate) pairs: usize,
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub(crate) metadata: Metadata,
}

/// The data of a call and its result that has no place in the text.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Extras {
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    call_metadata: Metadata,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    provider_executed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    invalid: Option<InvalidCall>,
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    result_metadata: Metadata,
}

/// The extras of `calls` and their `results` (in call order, or none), by call
/// id, as kept under [`TOOL_METADATA_KEY`]; `None` when there are none.
pub(crate) fn extras(calls: &[ToolCall], results: &[ToolResult]) -> Option<Value> {
    let mut by_id = serde_json::Map::new();
    for (i, call) in calls.iter().enumerate() {
        let extras = Extras {
            call_metadata: call.metadata.clone(),
            provider_executed: call.provider_executed,
            invalid: call.invalid.clone(),
            result_metadata: results
                .get(i)
                .map(|r| r.metadata.clone())
                .unwrap_or_default(),
        };
        let value = serde_json::to_value(extras).expect("extras serialise");
        if value.as_object().is_some_and(|object| !object.is_empty()) {
            by_id.insert(call.id.clone(), value);
        }
    }
    (!by_id.is_empty()).then_some(Value::Object(by_id))
}

/// Puts the extras written by [`extras`] back on the calls and results they
/// belong to.
pub(crate) fn apply_extras(extras: &Value, calls: &mut [ToolCall], results: &mut [ToolResult]) {
    let Some(by_id) = extras.as_object() else {
        return;
    };
    for call in calls {
        let Some(extras) = by_id.get(&call.id) else {
            continue;
        };
        let Ok(extras) = Extras::deserialize(extras) else {
            continue;
        };
        call.metadata = extras.call_metadata;
        call.provider_executed = extras.provider_executed;
        call.invalid = extras.invalid;
        if let Some(result) = results.iter_mut().find(|r| r.call_id == call.id) {
            result.metadata = extras.result_metadata;
        }
    }
}

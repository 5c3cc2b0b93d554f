//! The names this wire keeps its fields under, in canonical metadata: what its
//! lifter and decoder write and its lowering and encoder read.

use crate::provider::Kind;

/// The name errors from this provider carry.
pub(crate) const PROVIDER: &str = Kind::OpenAiResponses.name();

/// The metadata key under which this wire keeps an item's fields the
/// canonical model has no place for, as they came — the item's `id` (`msg_…`,
/// `fc_…`, `rs_…`), an assistant message's `phase`, a call's `namespace` —
/// on the message, call, result or reasoning the item became; the lowering
/// writes them back on the item (the `id` only when `store` is not `false`).
/// Other wires leave it out. On a [`ToolSpec`](crate::ToolSpec)'s `extra`, the tool's fields
/// (`strict` among them).
///
/// ```
/// use lmstack::provider::openai_responses::{EXTRA_KEY, LowerOptions, lower};
/// use lmstack::{ChatRequest, Message, ToolCall};
/// use serde_json::json;
///
/// let mut call = ToolCall::new("call_1", "add", json!({"a": 2}));
/// call.metadata.insert(EXTRA_KEY, json!({"id": "fc_1"}));
/// let request = ChatRequest::new(vec![Message::tool_calls(vec![call])]);
/// let body = lower(&request, &LowerOptions::default()).unwrap();
/// assert_eq!(body["input"][0], json!({"type": "function_call", "id": "fc_1",
///     "call_id": "call_1", "name": "add", "arguments": "{\"a\":2}"}));
/// ```
pub const EXTRA_KEY: &str = "openai_responses_extra";

/// The metadata key, on an assistant text message with empty text, under
/// which the lifter keeps an output item it does not lift — a built-in tool's
/// call (`web_search_call`), a custom tool call, an image generation — whole;
/// the lowering sends it back as it came.
pub const ITEM_KEY: &str = "openai_responses_item";

/// The metadata key under which this wire keeps the fields of each content
/// part of a message or a function call's output that it has no place for,
/// one object per content block, in order (an image's `detail` among them).
pub const PARTS_KEY: &str = "openai_responses_parts";

/// The field of an item's kept fields ([`EXTRA_KEY`]) that holds the `id` a
/// client sent with it (Codex sends its own, with `store: false` too), which
/// goes back even when nothing is stored.
pub(crate) const CLIENT_ID: &str = "client_id";

/// The field of a call's kept fields ([`EXTRA_KEY`]) that holds its
/// arguments' text as a client wrote it, when not compact JSON.
pub(crate) const ARGUMENTS: &str = "arguments";

/// The metadata key that marks system text as the request's `instructions`
/// (`true`) rather than a system message of the input.
pub const INSTRUCTIONS_KEY: &str = "openai_instructions";

//! Function execution: tools, the [`FunctionCallLayer`] that runs the model's calls,
//! multimodal tool results, and the [`ToolLoopLayer`] that feeds results back to the
//! model until it answers.
//!
//! A typical stack is `ToolLoop → FunctionCall → model`: the function layer runs
//! each reply's calls and emits `tool_aggregate` messages; the loop appends them to
//! the conversation and calls the model again, until a reply calls no tool.
//!
//! ```
//! use lmstack::function::{FunctionCallLayer, Tool, ToolLoopLayer, ToolRegistry};
//! use lmstack::testing::ScriptedModel;
//! use lmstack::{ChatRequest, Message, ToolCall};
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use serde_json::json;
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! /// Arguments of `weather`.
//! #[derive(Deserialize, JsonSchema)]
//! struct City {
//!     /// The city's name.
//!     city: String,
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let weather = Tool::typed("weather", "Current weather in a city", |args: City| async move {
//!     format!("18°C and sunny in {}", args.city)
//! });
//! // The model calls the tool, then answers with what it learnt.
//! let model = ScriptedModel::new()
//!     .reply_messages(vec![Message::tool_calls(vec![ToolCall::new(
//!         "call_1",
//!         "weather",
//!         json!({"city": "Paris"}),
//!     )])])
//!     .reply("It is 18°C and sunny in Paris.");
//! let stack = ServiceBuilder::new()
//!     .layer(ToolLoopLayer::new())
//!     .layer(FunctionCallLayer::new(ToolRegistry::new([weather])?))
//!     .service(model.clone());
//!
//! let request = ChatRequest::new(vec![Message::user("Weather in Paris?")]).streaming(true);
//! let messages = stack.oneshot(request).await?.collect().await?;
//! assert_eq!(messages[0].results()[0].text_content(), "18°C and sunny in Paris");
//! assert_eq!(messages[1], Message::assistant("It is 18°C and sunny in Paris."));
//! // The second request carried the call and its result.
//! assert_eq!(model.requests()[1].messages[1], messages[0]);
//! # Ok::<(), lmstack::Error>(())
//! # }).unwrap();
//! ```
//!
//! Tools run as tokio tasks: the layers need a tokio runtime (with its time driver
//! enabled, for the time limits).

mod answer;
mod context;
mod dispatch;
mod execution;
mod function_call;
#[cfg(feature = "mcp")]
pub mod mcp;
mod media;
mod output;
mod registry;
mod source;
mod tool;
mod tool_loop;

pub use context::CallContext;
pub use dispatch::UnknownTools;
pub use function_call::{FunctionCall, FunctionCallLayer};
pub use media::{MediaError, MediaPolicy, sniff};
pub use output::{Json, ToolOutput};
pub use registry::{ToolRegistry, ToolRegistryBuilder, ToolSet};
pub use source::{ToolList, ToolSource};
pub use tool::{Tool, ToolError, ToolReturn};
pub use tool_loop::{OnLimit, ToolLoop, ToolLoopLayer};

/// The `schemars` version the typed tools use, for deriving `JsonSchema` without a
/// direct dependency (`#[schemars(crate = "lmstack::function::schemars")]`).
pub use schemars;

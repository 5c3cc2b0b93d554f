//! The service contract — [`ChatRequest`] in, [`Reply`] out — and the one
//! driver of pure cores: a [`Machine`] run over a stream by [`MachineStream`],
//! and [`MachineLayer`], which makes a machine over events a tower layer.

mod accessors;
mod layer;
mod machine;
mod reply;
mod reply_future;
mod request;
mod response_format;
mod server_tool;
mod stage;

pub(crate) use accessors::inner_service_accessors;
pub(crate) use layer::factory_layer;
pub use layer::{MachineFactory, MachineLayer, MachineService};
pub use machine::{Machine, MachineStream, Output};
pub use reply::{Complete, Reply};
pub use reply_future::{IntoEvents, ReplyFuture};
pub use request::{ChatOptions, ChatRequest, SessionKey, ToolChoice, ToolSpec};
pub(crate) use response_format::OutputCheck;
pub use response_format::ResponseFormat;
pub use server_tool::{CodeExecution, NativeTool, ServerTool, UserLocation, WebSearch};
pub use stage::{BoxChatService, ChatService};

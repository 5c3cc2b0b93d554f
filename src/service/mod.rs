//! The service contract: [`ChatRequest`] in, [`Reply`] out, and the generic
//! driver that turns a pure state machine into a layer.

pub mod machine;
mod reply;
mod request;

pub use machine::{Machine, MachineFactory, MachineLayer, MachineService, Output};
pub use reply::Reply;
pub use request::{ChatOptions, ChatRequest, ToolChoice, ToolSpec};

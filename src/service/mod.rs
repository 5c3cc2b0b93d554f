//! The service contract: [`ChatRequest`] in, [`Reply`] out, and the generic
//! driver that turns a pure state machine into a layer.

mod accessors;
mod machine;
mod reply;
mod request;

pub(crate) use accessors::inner_service_accessors;
pub use machine::{
    Machine, MachineFactory, MachineLayer, MachineService, MachineStream, Output, ResponseFuture,
};
pub use reply::Reply;
pub use request::{ChatOptions, ChatRequest, ToolChoice, ToolSpec};

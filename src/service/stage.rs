//! The contract every stage of a stack keeps, as one bound.

use tower::Service;

use super::reply::Reply;
use super::request::ChatRequest;
use crate::error::Error;

/// A stage of a stack: a `Service<ChatRequest, Response = Reply>` whose error
/// converts into [`Error`] (so that tower's own middleware, which boxes its
/// errors, composes anywhere). Every service with that shape is one; layers take
/// their inner service as `S: ChatService`.
///
/// ```
/// use lmstack::service::ChatService;
/// use lmstack::testing::ScriptedModel;
///
/// fn takes_a_stage(_: impl ChatService) {}
/// takes_a_stage(ScriptedModel::new());
/// ```
pub trait ChatService: Service<ChatRequest, Response = Reply, Error: Into<Error>> {}

impl<S> ChatService for S where S: Service<ChatRequest, Response = Reply, Error: Into<Error>> {}

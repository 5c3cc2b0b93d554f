//! The contract every stage of a stack keeps, as one bound.

use tower::Service;
use tower::util::BoxCloneSyncService;

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

/// A whole stack behind one type: any [`ChatService`] that is `Clone + Send +
/// Sync`, boxed (one box per call). What to hold when the stack is chosen at
/// run time (a provider by configuration, layers or not), and what a
/// [`Gateway`](crate::server) serves.
///
/// ```
/// use lmstack::BoxChatService;
/// use lmstack::testing::ScriptedModel;
///
/// let stack: BoxChatService = BoxChatService::new(ScriptedModel::new().reply("Hi"));
/// # let _ = stack;
/// ```
pub type BoxChatService = BoxCloneSyncService<ChatRequest, Reply, Error>;

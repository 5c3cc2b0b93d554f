//! Limits and budgets per client key: requests and tokens per minute, and a
//! spend budget from the models' prices — counted in a [`LimitStore`] that
//! gateway replicas may share (feature `server`; Redis with feature `redis`).
//!
//! - [`Caller`]: who calls, put in a request's
//!   [`extensions`](crate::ChatRequest::extensions) by the gateway (the name
//!   of the key the client presented);
//! - [`LimitLayer`] / [`Limits`]: the tower layer that enforces each key's
//!   [`KeyLimits`], answering 429 with the wait past a limit; its admission
//!   and settlement alone ([`LimitLayer::admit`], [`Admitted`]) for a server
//!   that answers without the layer;
//! - [`LimitStore`]: the counters' atomic steps, each over several counters
//!   ([`Take`]s all or nothing, [`Add`]s); [`MemoryLimitStore`] in this
//!   process, `RedisLimitStore` (feature `redis`) shared;
//! - [`Window`], [`Period`], [`fits`]: the pure arithmetic of the windows;
//!   [`Price`]: what tokens cost.

mod layer;
mod price;
#[cfg(feature = "redis")]
mod redis;
mod store;
mod window;

use std::sync::Arc;

pub use layer::{Admitted, KeyLimits, LimitLayer, Limits, OnStoreError};
pub use price::Price;
#[cfg(feature = "redis")]
pub use redis::RedisLimitStore;
pub use store::{Add, Admission, Counter, LimitFuture, LimitStore, MemoryLimitStore, Take};
pub use window::{Period, Window, fits};

/// Who calls: the name of the key a client presented to the gateway, in a
/// request's [`extensions`](crate::ChatRequest::extensions) for the layers
/// below (the [`LimitLayer`]) and in the request's log line.
///
/// ```
/// use lmstack::limit::Caller;
/// use lmstack::{ChatRequest, Message};
///
/// let mut request = ChatRequest::new(vec![Message::user("hi")]);
/// request.extensions.insert(Caller::new("alice"));
/// assert_eq!(request.extensions.get::<Caller>().map(Caller::name), Some("alice"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Caller(Arc<str>);

impl Caller {
    /// The caller of the key `name`.
    pub fn new(name: impl AsRef<str>) -> Self {
        Caller(Arc::from(name.as_ref()))
    }

    /// Its key's name.
    pub fn name(&self) -> &str {
        &self.0
    }
}

//! What a tool learns about the call it runs: the call's id, its deadline, and
//! whether it has been stopped.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The context of one tool call, handed to tools made with [`Tool::new`](super::Tool::new).
///
/// The function layer stops a call when its time limit passes or when the reply
/// it belongs to is dropped. Either way the tool's future is dropped and the
/// context is **cancelled**: work the future does not own — a blocking thread, a
/// request to a remote tool server — can watch for that and stop too.
///
/// ```
/// use lmstack::function::{CallContext, Tool};
/// use lmstack::ToolSpec;
/// use serde_json::json;
///
/// let spec = ToolSpec::new("crunch", "Crunches numbers", json!({"type": "object"}));
/// let crunch = Tool::new(spec, |_args, context: CallContext| async move {
///     // Blocking work on its own thread, stopped between pieces once the call is.
///     let work = tokio::task::spawn_blocking(move || {
///         let mut total = 0u64;
///         for piece in 0..1_000u64 {
///             if context.is_cancelled() {
///                 return Err("stopped");
///             }
///             total += piece;
///         }
///         Ok(total)
///     });
///     Ok::<_, lmstack::BoxError>(work.await??.to_string())
/// });
/// # let _ = crunch;
/// ```
#[derive(Clone, Debug)]
pub struct CallContext {
    call_id: Arc<str>,
    deadline: Option<Instant>,
    cancellation: CancellationToken,
}

impl CallContext {
    /// The context of call `call_id`, with no deadline and not cancelled: for
    /// running a tool by hand, in tests for example.
    pub fn new(call_id: impl Into<Arc<str>>) -> Self {
        CallContext {
            call_id: call_id.into(),
            deadline: None,
            cancellation: CancellationToken::new(),
        }
    }

    /// Sets the instant past which the call is stopped.
    pub fn with_deadline(mut self, deadline: impl Into<Option<Instant>>) -> Self {
        self.deadline = deadline.into();
        self
    }

    /// The id of the call, as the model wrote it.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The instant past which the call is stopped, if it has a time limit.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The time left before the deadline (zero once it has passed).
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|deadline| deadline.saturating_duration_since(Instant::now()))
    }

    /// True once the call has been stopped.
    pub fn is_cancelled(&self) -> bool {
        self.cancellation.is_cancelled()
    }

    /// Completes when the call is stopped.
    pub fn cancelled(&self) -> impl Future<Output = ()> + Send + '_ {
        self.cancellation.cancelled()
    }

    /// Stops the call: what watches this context (or its clones) sees it cancelled.
    pub fn cancel(&self) {
        self.cancellation.cancel();
    }

    /// A guard that cancels the context when dropped, unless it is
    /// [disarmed](CancelOnDrop::disarm) first: held by whatever runs the call, so
    /// that dropping it — a time-out, an aborted task — stops the call's other work.
    pub(crate) fn cancel_on_drop(&self) -> CancelOnDrop {
        CancelOnDrop(Some(self.cancellation.clone()))
    }
}

/// Cancels a [`CallContext`] when dropped, unless disarmed.
pub(crate) struct CancelOnDrop(Option<CancellationToken>);

impl CancelOnDrop {
    /// The call finished: dropping the guard no longer cancels it.
    pub(crate) fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(token) = self.0.take() {
            token.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropping_the_guard_cancels_every_clone_and_disarming_it_does_not() {
        let context = CallContext::new("call_1");
        let seen = context.clone();
        context.cancel_on_drop().disarm();
        assert!(!seen.is_cancelled());
        drop(context.cancel_on_drop());
        assert!(seen.is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn the_time_left_counts_down_to_zero() {
        let context = CallContext::new("c").with_deadline(Instant::now() + Duration::from_secs(2));
        assert_eq!(context.remaining(), Some(Duration::from_secs(2)));
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(context.remaining(), Some(Duration::ZERO));
        assert_eq!(CallContext::new("c").remaining(), None);
    }
}

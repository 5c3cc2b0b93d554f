//! A model's fallbacks: other models served by the gateway that answer a
//! request, in order, when the model's own upstreams (all its deployments)
//! failed before the reply's first event with an error worth another attempt
//! ([`is_retryable`]: 429, 5xx, failed connections, timeouts) — never after
//! it. Each gets the client's request as it came, fitted to its own upstream,
//! and takes one of its own places (`max_concurrent`; one with none free is
//! passed over).

use futures::future::BoxFuture;
use tower::ServiceExt;

use super::fit::fit_to_named;
use super::gateway::Served;
use crate::attempt::{Attempt, Outcome, is_retryable};
use crate::provider::Secrets;
use crate::{ChatRequest, Error, Reply};

/// A stack's call, boxed so that it can wait on inside a stream's body.
pub(super) type Call = BoxFuture<'static, Result<Reply, Error>>;

/// A model another one falls back to.
#[derive(Clone, Debug)]
pub(super) struct Fallback {
    pub(super) name: String,
    pub(super) served: Served,
}

/// The call of `request` for the model `name`, served by `served`: its stack
/// called with the request fitted to its upstream; then, if it has fallbacks
/// and fails before its first event with a retryable error, each fallback in
/// turn, until one delivers something or fails otherwise. `answered` is told
/// the name of a fallback that answered. Logged errors are scrubbed of
/// `secrets`.
pub(super) fn call(
    mut request: ChatRequest,
    name: &str,
    served: &Served,
    secrets: &Secrets,
    answered: impl FnOnce(&str) + Send + 'static,
) -> Call {
    if served.fallbacks.is_empty() {
        fit_to_named(&mut request, &served.provider, name);
        return Box::pin(served.stack.clone().oneshot(request));
    }
    let primary = Fallback {
        name: name.to_owned(),
        served: served.clone(),
    };
    let chain: Vec<Fallback> = std::iter::once(primary)
        .chain(served.fallbacks.iter().cloned())
        .collect();
    let secrets = secrets.clone();
    Box::pin(async move {
        let stream = request.options.stream;
        let mut last = None;
        let count = chain.len();
        for (index, Fallback { name, served }) in chain.into_iter().enumerate() {
            // The model asked for holds its place already.
            let permit = match index {
                0 => None,
                _ => match served.limit.clone().try_acquire_owned() {
                    Ok(permit) => Some(permit),
                    Err(_) => {
                        tracing::warn!(
                            "the fallback `{name}` is answering its limit of requests at once: \
                             passed over"
                        );
                        continue;
                    }
                },
            };
            let mut sent = request.clone();
            fit_to_named(&mut sent, &served.provider, &name);
            let outcome = Attempt::new(served.stack.oneshot(sent), stream, "fallbacks").await;
            match outcome {
                Outcome::Delivered(reply) => {
                    if index > 0 {
                        answered(&name);
                    }
                    return Ok(match permit {
                        Some(permit) => reply.on_end(move |_| drop(permit)),
                        None => reply,
                    });
                }
                Outcome::Failed { ref error, .. } if is_retryable(error) && index + 1 < count => {
                    let said = secrets.scrub(&error.to_string()).into_owned();
                    tracing::warn!(
                        "`{name}` failed before its first event ({said}); trying its fallback"
                    );
                    last = Some(outcome);
                }
                outcome => return outcome.into_result(),
            }
        }
        // The last fallbacks were passed over: the last failure stands.
        last.map_or_else(
            || Err(Error::stage("fallbacks", "no model was called")),
            Outcome::into_result,
        )
    })
}

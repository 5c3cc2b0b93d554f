//! A scripted model for the layers that make a call again (retry,
//! deployments): each call plays one [`Outcome`] — a failure, a streaming or a
//! non-streaming reply — and the model checks tower's readiness contract
//! (a call on a service `poll_ready` did not make ready is counted).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use lmstack::provider::{ProviderError, TransportError, TransportErrorKind};
use lmstack::{ChatRequest, Error, Event, Reply};
use tower::Service;

/// A fixed time for `Retry-After` dates (none of these tests sends one).
pub fn now() -> std::time::SystemTime {
    std::time::SystemTime::UNIX_EPOCH
}

pub fn answered(status: u16, headers: &[(&str, &str)], body: &str) -> Error {
    ProviderError::from_response("openai", status, headers, body.as_bytes(), now()).into()
}

pub fn transport(kind: TransportErrorKind) -> Error {
    TransportError::new("openai", kind, "test").into()
}

/// What one call of [`Model`] does.
pub enum Outcome {
    /// The call fails.
    Fail(Error),
    /// The call gives a streaming reply of these items.
    Stream(Vec<Result<Event, Error>>),
    /// The call gives a non-streaming reply of these items.
    Complete(Vec<Result<Event, Error>>),
}

#[derive(Default)]
pub struct Script {
    pub outcomes: VecDeque<Outcome>,
    /// What `poll_ready` answers, in order; ready once this runs out.
    pub readiness: VecDeque<Poll<Result<(), Error>>>,
    pub requests: Vec<ChatRequest>,
    /// Calls made on a service that `poll_ready` had not made ready.
    pub unready_calls: usize,
}

/// A model that plays scripted outcomes and checks tower's readiness contract.
pub struct Model {
    script: Arc<Mutex<Script>>,
    made_ready: bool,
}

impl Clone for Model {
    fn clone(&self) -> Self {
        // A clone has not been made ready.
        Model {
            script: self.script.clone(),
            made_ready: false,
        }
    }
}

impl Model {
    pub fn new(outcomes: impl IntoIterator<Item = Outcome>) -> Self {
        let script = Script {
            outcomes: outcomes.into_iter().collect(),
            ..Script::default()
        };
        Model {
            script: Arc::new(Mutex::new(script)),
            made_ready: false,
        }
    }

    pub fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock().unwrap()
    }

    pub fn calls(&self) -> usize {
        self.script().requests.len()
    }
}

impl Service<ChatRequest> for Model {
    type Response = Reply;
    type Error = Error;
    type Future = std::future::Ready<Result<Reply, Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        let answer = self
            .script()
            .readiness
            .pop_front()
            .unwrap_or(Poll::Ready(Ok(())));
        match answer {
            Poll::Pending => cx.waker().wake_by_ref(),
            Poll::Ready(Ok(())) => self.made_ready = true,
            Poll::Ready(Err(_)) => {}
        }
        answer
    }

    fn call(&mut self, request: ChatRequest) -> Self::Future {
        let made_ready = std::mem::take(&mut self.made_ready);
        let mut script = self.script();
        if !made_ready {
            script.unready_calls += 1;
        }
        script.requests.push(request);
        let outcome = script.outcomes.pop_front().expect("a scripted outcome");
        std::future::ready(match outcome {
            Outcome::Fail(error) => Err(error),
            Outcome::Stream(items) => Ok(Reply::from_stream(futures::stream::iter(items))),
            Outcome::Complete(items) => Ok(Reply::from_results(items)),
        })
    }
}

//! [`TokenCounter`]: a request's input tokens counted as a model's provider
//! counts them, without running it — what a gateway answers Anthropic's
//! `POST /v1/messages/count_tokens` with.

use futures::future::BoxFuture;
use tower::Service;

use super::service::Provider;
use super::transport::{HttpRequest, HttpResponse};
use super::wire::Wire;
use crate::{ChatRequest, Error};

/// Counts a request's input tokens, as the provider that would answer it
/// does. [`Provider`] and [`AnyProvider`](super::AnyProvider) count through
/// their wire's own endpoint ([`Wire::lower_count`]: Anthropic's
/// `count_tokens`, Gemini's `countTokens`), and fail with status 501 where the
/// wire has none (OpenAI Chat Completions): never a made-up number.
///
/// A count may be of a fragment of a conversation: a tool result whose call
/// it does not hold (Gemini CLI counts a function response and the file it
/// read before it sends them) is counted as it came where the wire's count
/// takes it ([`Wire::COUNTS_UNANSWERED_RESULTS`]: Gemini), else as a user
/// message of its content, text and files, in its place (Anthropic, which
/// refuses a `tool_result` without its `tool_use`).
///
/// ```
/// use lmstack::provider::TokenCounter;
/// use lmstack::provider::openai_chat::{OpenAi, OpenAiConfig};
/// use lmstack::{ChatRequest, Message};
///
/// # async fn run() {
/// let openai = OpenAi::new(OpenAiConfig::new("http://127.0.0.1:1/v1")).unwrap();
/// let counted = TokenCounter::count_tokens(&openai, ChatRequest::new(vec![Message::user("Hi")]));
/// assert_eq!(counted.await.unwrap_err().http_status(), 501);
/// # }
/// ```
pub trait TokenCounter: Send + Sync + 'static {
    /// The input tokens of `request`.
    fn count_tokens(&self, request: ChatRequest) -> BoxFuture<'static, Result<u64, Error>>;
}

impl<W, T> TokenCounter for Provider<W, T>
where
    W: Wire,
    T: Service<HttpRequest, Response = HttpResponse, Error = Error> + Clone + Send + Sync + 'static,
    T::Future: Send,
{
    fn count_tokens(&self, request: ChatRequest) -> BoxFuture<'static, Result<u64, Error>> {
        Box::pin(Provider::count_tokens(self, request))
    }
}

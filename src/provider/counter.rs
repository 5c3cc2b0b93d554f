//! [`TokenCounter`]: a request's input tokens counted as a model's provider
//! counts them, without running it — what a gateway answers Anthropic's
//! `POST /v1/messages/count_tokens` with.

use std::collections::HashSet;
use std::mem;

use futures::future::BoxFuture;
use tower::Service;

use super::service::Provider;
use super::transport::{HttpRequest, HttpResponse};
use super::wire::Wire;
use crate::{ChatRequest, Error, Message, Role};

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

/// `messages` with each tool result that answers no call before it made a
/// user message of its content (text and files) in its place, after the
/// results of its message that do answer one; a result of no content is
/// left out. What a count of a fragment asks of a wire that refuses such a
/// result.
pub(super) fn unanswered_as_user(messages: Vec<Message>) -> Vec<Message> {
    let mut calls = HashSet::new();
    let mut kept = Vec::with_capacity(messages.len());
    for message in messages {
        calls.extend(message.calls().iter().map(|call| call.id.clone()));
        let Message::ToolResults(mut results) = message else {
            kept.push(message);
            continue;
        };
        let (answered, unanswered): (Vec<_>, Vec<_>) = mem::take(&mut results.results)
            .into_iter()
            .partition(|result| calls.contains(&result.call_id));
        if !answered.is_empty() {
            results.results = answered;
            kept.push(Message::ToolResults(results));
        }
        kept.extend(
            unanswered
                .into_iter()
                .filter(|result| !result.content.is_empty())
                .map(|result| Message::multimodal(Role::User, result.content)),
        );
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ContentBlock, ToolCall, ToolResult};

    #[test]
    fn results_that_answer_no_call_become_user_content_in_their_place() {
        let call = ToolCall::new("a", "read", serde_json::json!({}));
        let answered = ToolResult::new("a", "read", vec![ContentBlock::text("one")]);
        let orphan = ToolResult::new("b", "read", vec![ContentBlock::text("two")]);
        let empty = ToolResult::new("c", "read", Vec::new());
        let messages = vec![
            Message::tool_results(vec![orphan.clone()]),
            Message::tool_calls(vec![call.clone()]),
            Message::tool_results(vec![answered.clone(), orphan, empty]),
        ];
        let two = || Message::multimodal(Role::User, vec![ContentBlock::text("two")]);
        assert_eq!(
            unanswered_as_user(messages),
            vec![
                two(),
                Message::tool_calls(vec![call]),
                Message::tool_results(vec![answered]),
                two(),
            ]
        );
    }
}

//! The walk every lowering makes over a canonical history: one method per kind
//! of message, and the order they are visited in, in one place.

use crate::Error;
use crate::message::{
    Message, MultimodalMessage, ReasoningMessage, TextMessage, ToolAggregateMessage, ToolCall,
    ToolCallsMessage, ToolResult, ToolResultsMessage,
};

/// A wire's lowering of a history, message kind by message kind. A
/// `tool_aggregate` is visited as its calls, then its results; usage is not sent.
pub(crate) trait LowerHistory {
    /// A text message.
    fn text(&mut self, message: &TextMessage) -> Result<(), Error>;
    /// A multimodal message.
    fn multimodal(&mut self, message: &MultimodalMessage) -> Result<(), Error>;
    /// A reasoning message.
    fn reasoning(&mut self, message: &ReasoningMessage);
    /// The model's tool calls.
    fn calls(&mut self, calls: &[ToolCall]);
    /// Tool results.
    fn results(&mut self, results: &[ToolResult]) -> Result<(), Error>;

    /// Visits every message of `messages`, in order.
    fn walk(&mut self, messages: &[Message]) -> Result<(), Error> {
        for message in messages {
            match message {
                Message::Text(text) => self.text(text)?,
                Message::Multimodal(multimodal) => self.multimodal(multimodal)?,
                Message::Reasoning(reasoning) => self.reasoning(reasoning),
                Message::ToolCalls(ToolCallsMessage { calls, .. }) => self.calls(calls),
                Message::ToolResults(ToolResultsMessage { results, .. }) => {
                    self.results(results)?
                }
                Message::ToolAggregate(ToolAggregateMessage { calls, results, .. }) => {
                    self.calls(calls);
                    self.results(results)?;
                }
                Message::Usage(_) => {}
            }
        }
        Ok(())
    }
}

/// The error of a `text` or `multimodal` message (`kind`) with role `tool`:
/// tool output goes in `tool_results`, which name their call.
pub(crate) fn tool_role(provider: &str, kind: &str) -> Error {
    Error::InvalidRequest(format!(
        "{provider}: a `{kind}` message with role `tool` names no call; send tool output as `tool_results`"
    ))
}

#[cfg(any(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic"
))]
/// The text of a system or assistant `message`, which this wire takes as text
/// only: a file in it is an error naming `what` takes files (`"Chat
/// Completions takes images, documents and audio"`) and from whom it came.
pub(crate) fn text_only(
    provider: &str,
    what: &str,
    message: &MultimodalMessage,
) -> Result<String, Error> {
    let mut text = String::new();
    for block in &message.content {
        match block.as_text() {
            Some(piece) => text.push_str(piece),
            None => {
                use crate::message::Role;
                let role = match message.role {
                    Role::System => "system",
                    Role::User => "user",
                    Role::Assistant => "assistant",
                    Role::Tool => "tool",
                };
                return Err(Error::InvalidRequest(format!(
                    "{provider}: {what} only from the user, not the {role}"
                )));
            }
        }
    }
    Ok(text)
}

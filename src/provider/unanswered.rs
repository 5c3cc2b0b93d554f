//! A conversation fragment made acceptable to a wire that refuses tool
//! results without their calls: what a token count of a fragment (Gemini
//! CLI's, before it sends a tool's image) asks of Anthropic or OpenAI. Pure.

use std::collections::HashSet;
use std::mem;

use crate::{Message, Role};

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

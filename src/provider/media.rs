//! Images and documents in tool results: the policy every provider's lowering
//! follows, and the texts the policy writes, in one place.
//!
//! Providers differ in where a tool's files may go: Anthropic takes them inside
//! `tool_result`, Gemini 3 inside `functionResponse.parts`, Chat Completions
//! and Gemini 2.x only in a user message. Media bytes are never turned into
//! text, whatever the policy.

use crate::Error;
use crate::message::{ContentBlock, ToolResult};

/// What a provider's lowering does with images and documents in tool results.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ToolResultMedia {
    /// The tool result keeps its text plus a note that the files follow
    /// ([`text_with_note`]); a synthetic user message with the files
    /// ([`attachments_heading`], then the files) comes right after the run of
    /// results.
    #[default]
    Inject,
    /// The files go inside the tool result, for providers and servers that
    /// accept it (Anthropic, Gemini 3, llama.cpp, vLLM with vision models).
    Native,
    /// A tool result with a file is an error ([`rejected`]).
    Reject,
}

/// The error of a tool result refused under [`ToolResultMedia::Reject`]: it
/// names the call and the media types.
pub fn rejected(provider: &str, result: &ToolResult) -> Error {
    let types: Vec<&str> = result
        .content
        .iter()
        .filter_map(|block| block.as_media())
        .map(|media| media.media_type().unwrap_or("a file of unknown type"))
        .collect();
    Error::InvalidRequest(format!(
        "{provider}: the result of tool call `{}` ({}) holds {} (tool result media policy: reject)",
        result.call_id,
        result.name,
        types.join(", ")
    ))
}

/// The text of a tool result whose files are injected after it: its text,
/// then a note saying what follows in the next message.
pub fn text_with_note(result: &ToolResult) -> String {
    let mut text = result.text_content();
    if !text.is_empty() {
        text.push_str("\n\n");
    }
    text.push_str(&attachment_note(&result.content));
    text
}

/// The text that opens the injected files of one tool result.
pub fn attachments_heading(result: &ToolResult) -> String {
    format!(
        "Attachments from tool call `{}` ({}):",
        result.call_id, result.name
    )
}

/// "(The tool returned 1 image and 2 documents; they follow in the next
/// message.)"
fn attachment_note(content: &[ContentBlock]) -> String {
    let images = content
        .iter()
        .filter(|block| matches!(block, ContentBlock::Image(_)))
        .count();
    let documents = content
        .iter()
        .filter(|block| matches!(block, ContentBlock::Document(_)))
        .count();
    let count = |n: usize, what: &str| match n {
        0 => None,
        1 => Some(format!("1 {what}")),
        n => Some(format!("{n} {what}s")),
    };
    let what: Vec<String> = [count(images, "image"), count(documents, "document")]
        .into_iter()
        .flatten()
        .collect();
    let pronoun = if images + documents == 1 {
        "it follows"
    } else {
        "they follow"
    };
    format!(
        "(The tool returned {}; {pronoun} in the next message.)",
        what.join(" and ")
    )
}

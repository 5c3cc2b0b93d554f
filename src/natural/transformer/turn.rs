//! The single form: one turn — assistant text, tool calls and their results —
//! written as one message, each call followed directly by its response.

use serde_json::{Map, Value};

use super::call_writer::write_calls;
use crate::message::{MultimodalMessage, TextMessage};
use crate::natural::dialect::Dialect;
use crate::natural::markers::SEPARATOR;
use crate::natural::metadata::{
    Part, TOOL_AGGREGATES_KEY, TOOL_CALL_IDS_KEY, TOOL_METADATA_KEY, extras,
};
use crate::natural::result_text::{interleave, write_result};
use crate::{ContentBlock, Message, Metadata, Role, ToolCall, ToolResult};

/// How calls and results are written: the dialect, and whether with their ids
/// (never in a form without a place for them).
#[derive(Clone, Copy, Debug)]
pub(super) struct Style {
    pub(super) dialect: Dialect,
    pub(super) ids: bool,
}

/// A turn being written as one message.
#[derive(Debug, Default)]
pub(super) struct Turn {
    /// The assistant message that opened the turn, while nothing has joined it:
    /// handed out unchanged.
    opening: Option<Message>,
    text: String,
    /// Media blocks and the offsets in `text` where they belong.
    media: Vec<(usize, ContentBlock)>,
    /// Every source's metadata, earliest first.
    metadata: Metadata,
    /// A response went in.
    answered: bool,
    /// The text ends with a tool block.
    after_block: bool,
    /// Tool blocks went in.
    tools: bool,
    /// Each aggregate's pairs and metadata.
    parts: Vec<Part>,
    /// Call and result data without a place in the text, by call id.
    extras: Map<String, Value>,
    /// The call id of every block, in order, when the text leaves them out.
    ids: Vec<Value>,
}

impl Turn {
    /// A turn opened by an assistant text or multimodal message.
    pub(super) fn opened_by(message: Message) -> Turn {
        let mut turn = Turn::default();
        turn.say(&message);
        turn.opening = Some(message);
        turn
    }

    /// Whether tool blocks are in it: assistant text then joins it rather than
    /// opening a turn of its own.
    pub(super) fn has_tools(&self) -> bool {
        self.tools
    }

    /// Adds an assistant text or multimodal message (other messages add
    /// nothing).
    pub(super) fn say(&mut self, message: &Message) {
        self.opening = None;
        match message {
            Message::Text(TextMessage { text, .. }) => self.push_text(text),
            Message::Multimodal(MultimodalMessage { content, .. }) => {
                content.iter().for_each(|block| self.push_block(block));
            }
            _ => {}
        }
        self.metadata.merge_missing(message.metadata());
    }

    /// Adds a piece of streamed assistant text, as the joiner would.
    pub(super) fn delta(&mut self, text: &str, metadata: &Metadata) {
        if text.is_empty() && metadata.is_empty() {
            return;
        }
        self.opening = None;
        self.push_text(text);
        self.metadata.merge_missing(metadata);
    }

    /// Adds the pairs of an aggregate: each call directly followed by its
    /// result (`results` are in call order); `first` is the first call's number
    /// in the conversation.
    pub(super) fn pairs(
        &mut self,
        calls: &[ToolCall],
        results: &[ToolResult],
        metadata: Metadata,
        style: Style,
        first: usize,
    ) {
        for (number, (call, result)) in (first..).zip(calls.iter().zip(results)) {
            self.open_block();
            let call = std::slice::from_ref(call);
            write_calls(&mut self.text, call, style.dialect, style.ids, number);
            self.text.push('\n');
            self.write_result(result, style);
        }
        self.parts.push(Part {
            pairs: calls.len(),
            metadata: metadata.clone(),
        });
        self.tool_source(metadata, extras(calls, results));
        self.keep_ids(calls.iter().flat_map(|c| [&c.id, &c.id]), style);
    }

    /// Adds the calls of a `tool_calls` message, joined as the dialect joins
    /// several calls; `first` is the first call's number in the conversation.
    pub(super) fn calls(
        &mut self,
        calls: &[ToolCall],
        metadata: Metadata,
        style: Style,
        first: usize,
    ) {
        if !calls.is_empty() {
            self.open_block();
            write_calls(&mut self.text, calls, style.dialect, style.ids, first);
            self.after_block = true;
        }
        self.tool_source(metadata, extras(calls, &[]));
        self.keep_ids(calls.iter().map(|c| &c.id), style);
    }

    /// Adds the results of a `tool_results` message.
    pub(super) fn results(&mut self, results: &[ToolResult], metadata: Metadata, style: Style) {
        for result in results {
            self.open_block();
            self.write_result(result, style);
        }
        self.tool_source(metadata, None);
        self.keep_ids(results.iter().map(|r| &r.call_id), style);
    }

    /// The message: `user` when it holds a response, else `assistant`.
    pub(super) fn into_message(self) -> Message {
        if let Some(message) = self.opening {
            return message;
        }
        let role = if self.answered {
            Role::User
        } else {
            Role::Assistant
        };
        let metadata = self.metadata_written();
        if self.media.is_empty() {
            Message::Text(TextMessage {
                role,
                text: self.text,
                metadata,
            })
        } else {
            Message::Multimodal(MultimodalMessage {
                role,
                content: interleave(&self.text, self.media),
                metadata,
            })
        }
    }

    /// The merged metadata, with the data the text has no place for: extras,
    /// each aggregate's own metadata when the merged one would not give it
    /// back, and the ids the text leaves out.
    fn metadata_written(&self) -> Metadata {
        let mut metadata = self.metadata.clone();
        let whole = match self.parts.as_slice() {
            [] => true,
            [part] => part.metadata == metadata,
            _ => false,
        };
        if !self.extras.is_empty() {
            metadata.insert(TOOL_METADATA_KEY, Value::Object(self.extras.clone()));
        }
        if !whole && let Ok(parts) = serde_json::to_value(&self.parts) {
            metadata.insert(TOOL_AGGREGATES_KEY, parts);
        }
        if !self.ids.is_empty() {
            metadata.insert(TOOL_CALL_IDS_KEY, Value::Array(self.ids.clone()));
        }
        metadata
    }

    fn write_result(&mut self, result: &ToolResult, style: Style) {
        write_result(
            &mut self.text,
            result,
            style.dialect,
            style.ids,
            &mut self.media,
        );
        self.answered = true;
        self.after_block = true;
    }

    /// Merges a tool message's metadata and extras.
    fn tool_source(&mut self, metadata: Metadata, extras: Option<Value>) {
        self.opening = None;
        self.tools = true;
        self.metadata.merge_missing(&metadata);
        if let Some(Value::Object(extras)) = extras {
            self.extras.extend(extras);
        }
    }

    /// Keeps the ids of the blocks just written when the text leaves them out.
    fn keep_ids<'a>(&mut self, ids: impl Iterator<Item = &'a String>, style: Style) {
        if !style.ids {
            self.ids.extend(ids.map(|id| Value::String(id.clone())));
        }
    }

    /// Starts a tool block: after another block, a `---` line; after text, a
    /// line of its own.
    fn open_block(&mut self) {
        if self.after_block {
            self.text.push_str(SEPARATOR);
        } else if !self.text.is_empty() && !self.text.ends_with('\n') {
            self.text.push('\n');
        }
        self.after_block = false;
    }

    /// Text after a tool block starts on a line of its own.
    fn end_block_line(&mut self) {
        if self.after_block {
            self.text.push('\n');
            self.after_block = false;
        }
    }

    fn push_text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.end_block_line();
        self.text.push_str(text);
    }

    fn push_block(&mut self, block: &ContentBlock) {
        match block {
            ContentBlock::Text { text, .. } => self.push_text(text),
            media => {
                self.end_block_line();
                self.media.push((self.text.len(), media.clone()));
            }
        }
    }
}

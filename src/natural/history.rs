//! Reading a history written in the transformer's format back into canonical
//! messages: the parser in transcript mode over every text message, media put
//! back in place of their placeholders, and calls paired with their results.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::Value;

use super::metadata::{
    PLACEHOLDERS_KEY, Part, TOOL_AGGREGATES_KEY, TOOL_CALL_IDS_KEY, TOOL_METADATA_KEY, apply_extras,
};
use super::result_text::{MediaKind, placeholder};
use super::{NaturalToolUseParser, ParserMachine};
use crate::message::{
    MultimodalMessage, TextMessage, ToolAggregateMessage, ToolCallsMessage, ToolResultsMessage,
};
use crate::service::{Machine, Output};
use crate::{
    ContentBlock, Error, Event, Joiner, Message, Metadata, Role, ToolCall, ToolResult, ToolSpec,
};

/// Reads a history written in the transformer's format back into canonical
/// messages, one message at a time (see
/// [`NaturalToolUseParser::read_history`], which reads a whole one): what is
/// read goes out as soon as what follows cannot change it, a run of calls and
/// results once it has been paired. Made by
/// [`NaturalToolUseParser::history_reader`].
#[derive(Debug)]
pub struct HistoryReader {
    /// The parser, in transcript mode.
    parser: NaturalToolUseParser,
    tools: Vec<ToolSpec>,
    /// The calls read so far: a text's calls are numbered after them.
    calls: usize,
    /// The run being paired: `tool_calls` messages, then the `tool_results`
    /// messages that follow them.
    run_calls: Vec<ToolCallsMessage>,
    run_results: Vec<ToolResultsMessage>,
}

impl HistoryReader {
    /// Reads with `parser` (in transcript mode) and `tools`.
    pub(super) fn new(parser: NaturalToolUseParser, tools: Vec<ToolSpec>) -> Self {
        HistoryReader {
            parser,
            tools,
            calls: 0,
            run_calls: Vec::new(),
            run_results: Vec::new(),
        }
    }

    /// A parser machine for the next text.
    fn machine(&self) -> Result<ParserMachine, Error> {
        self.parser.machine(&self.tools, self.calls)
    }

    /// Takes a message read: into the run being paired, or out once that run
    /// is closed.
    fn take(&mut self, message: Message, out: &mut Output<Message>) {
        self.calls += message.calls().len();
        match message {
            Message::ToolCalls(calls) => {
                if !self.run_results.is_empty() {
                    self.close_run(out);
                }
                self.run_calls.push(calls);
            }
            Message::ToolResults(results) if !self.run_calls.is_empty() => {
                self.run_results.push(results)
            }
            other => {
                self.close_run(out);
                out.push(other);
            }
        }
    }

    fn close_run(&mut self, out: &mut Output<Message>) {
        let results = std::mem::take(&mut self.run_results);
        if !self.run_calls.is_empty() {
            pair(std::mem::take(&mut self.run_calls), results, out);
        }
    }
}

impl Machine for HistoryReader {
    type In = Message;
    type Out = Message;

    fn push(&mut self, message: Message, out: &mut Output<Message>) -> Result<(), Error> {
        let read = match message {
            Message::Text(TextMessage {
                role: role @ (Role::Assistant | Role::User),
                text,
                metadata,
            }) => {
                let parsed = parse(self.machine()?, role, text, metadata.clone())?;
                restore(parsed, &metadata)
            }
            Message::Multimodal(message)
                if matches!(message.role, Role::Assistant | Role::User) =>
            {
                let metadata = message.metadata.clone();
                restore(multimodal(self.machine()?, message)?, &metadata)
            }
            other => vec![other],
        };
        for message in read {
            self.take(message, out);
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Output<Message>) -> Result<(), Error> {
        self.close_run(out);
        Ok(())
    }
}

/// Parses one message's text, whose plain text keeps the message's role
/// (assistant when the text holds calls).
fn parse(
    mut machine: impl Machine<In = Event, Out = Event>,
    role: Role,
    text: String,
    metadata: Metadata,
) -> Result<Vec<Message>, Error> {
    let mut out = Output::new();
    let message = Message::Text(TextMessage {
        role: Role::Assistant,
        text,
        metadata,
    });
    machine.push(Event::message(message), &mut out)?;
    machine.finish(&mut out)?;
    let mut messages = Joiner::join(out.drain());
    // Text beside calls is what the model said, whatever the role of the message
    // that holds it (the single form puts a turn with responses in a user message).
    let role = if messages.iter().any(|m| matches!(m, Message::ToolCalls(_))) {
        Role::Assistant
    } else {
        role
    };
    for message in &mut messages {
        if let Message::Text(text) = message {
            text.role = role;
        }
    }
    Ok(messages)
}

/// A multimodal message: its text is parsed, and each placeholder in a result
/// takes back its media block. A message without tool markup stays as it was;
/// media no placeholder claimed follow in a message of their own.
fn multimodal(
    machine: impl Machine<In = Event, Out = Event>,
    message: MultimodalMessage,
) -> Result<Vec<Message>, Error> {
    let text: String = message
        .content
        .iter()
        .filter_map(ContentBlock::as_text)
        .collect();
    let mut parsed = parse(machine, message.role, text, message.metadata.clone())?;
    if parsed.iter().all(|m| matches!(m, Message::Text(_))) {
        return Ok(vec![Message::Multimodal(message)]);
    }
    let mut media: Vec<Option<ContentBlock>> = message
        .content
        .into_iter()
        .filter(|block| block.as_text().is_none())
        .map(Some)
        .collect();
    for parsed in &mut parsed {
        if let Message::ToolResults(results) = parsed {
            for result in &mut results.results {
                let Some(Value::Array(indexes)) = result.metadata.remove(PLACEHOLDERS_KEY) else {
                    continue;
                };
                for index in indexes
                    .iter()
                    .filter_map(|i| usize::try_from(i.as_u64()?).ok())
                {
                    let block = result.content.get_mut(index);
                    if let Some(block) = block
                        && let Some(taken) = claim(block, &mut media)
                    {
                        *block = taken;
                    }
                }
            }
        }
    }
    let left: Vec<ContentBlock> = media.into_iter().flatten().collect();
    if !left.is_empty() {
        let role = if parsed.iter().any(|m| matches!(m, Message::ToolCalls(_))) {
            Role::Assistant
        } else {
            message.role
        };
        parsed.push(Message::multimodal(role, left));
    }
    Ok(parsed)
}

/// Gives the messages read from one message what its metadata keeps for them:
/// the call ids its text left out, and, when it holds calls with their results
/// (the single form), the aggregates they form.
fn restore(mut parsed: Vec<Message>, metadata: &Metadata) -> Vec<Message> {
    let calls = parsed.iter().any(|m| matches!(m, Message::ToolCalls(_)));
    let results = parsed.iter().any(|m| matches!(m, Message::ToolResults(_)));
    if !calls && !results {
        return parsed;
    }
    for message in &mut parsed {
        forget_keys(message.metadata_mut());
        if let Message::ToolCalls(m) = message {
            m.calls
                .iter_mut()
                .for_each(|c| forget_keys(&mut c.metadata));
        }
    }
    if let Some(Value::Array(ids)) = metadata.get(TOOL_CALL_IDS_KEY) {
        give_ids(&mut parsed, ids);
    }
    if !(calls && results) {
        return parsed;
    }
    let parts = metadata
        .get(TOOL_AGGREGATES_KEY)
        .and_then(|parts| Vec::<Part>::deserialize(parts).ok())
        .unwrap_or_default();
    regroup(parsed, parts, metadata)
}

/// Removes the keys [`restore`] acts on (the parser hands a message's metadata
/// on with what it reads).
fn forget_keys(metadata: &mut Metadata) {
    metadata.remove(TOOL_CALL_IDS_KEY);
    metadata.remove(TOOL_AGGREGATES_KEY);
}

/// Gives the call and response blocks, in order, the ids listed.
fn give_ids(parsed: &mut [Message], ids: &[Value]) {
    let mut ids = ids.iter().filter_map(Value::as_str);
    for message in parsed {
        let slots: Vec<&mut String> = match message {
            Message::ToolCalls(m) => m.calls.iter_mut().map(|c| &mut c.id).collect(),
            Message::ToolResults(m) => m.results.iter_mut().map(|r| &mut r.call_id).collect(),
            _ => continue,
        };
        for (slot, id) in slots.into_iter().zip(ids.by_ref()) {
            id.clone_into(slot);
        }
    }
}

/// A message of the single form: its texts take the message's metadata, and
/// its pairs become one `tool_calls` + `tool_results` couple per aggregate —
/// cut as `parts` says, else at each text — which [`pair`] joins.
fn regroup(parsed: Vec<Message>, parts: Vec<Part>, metadata: &Metadata) -> Vec<Message> {
    let mut own = metadata.clone();
    forget_keys(&mut own);
    own.remove(TOOL_METADATA_KEY);
    let extras = metadata.get(TOOL_METADATA_KEY);
    let mut parts = parts.into_iter().peekable();
    let mut out = Vec::new();
    let mut group = Group::default();
    let mut after_block = false;
    for message in parsed {
        let block = matches!(message, Message::ToolCalls(_) | Message::ToolResults(_));
        match message {
            Message::ToolCalls(m) => group.calls.extend(m.calls),
            Message::ToolResults(m) => group.results.extend(m.results),
            mut other => {
                group.close(parts.next_if(|p| group.fits(p)), &own, extras, &mut out);
                if let Message::Text(text) = &mut other
                    && after_block
                    && text.text.starts_with('\n')
                {
                    // The line break the transformer writes after a block.
                    text.text.remove(0);
                }
                *other.metadata_mut() = own.clone();
                out.push(other);
            }
        }
        after_block = block;
        if let Some(part) = parts.next_if(|p| group.fits(p)) {
            group.close(Some(part), &own, extras, &mut out);
        }
    }
    group.close(parts.next_if(|p| group.fits(p)), &own, extras, &mut out);
    out
}

/// The calls and results of one aggregate being read.
#[derive(Default)]
struct Group {
    calls: Vec<ToolCall>,
    results: Vec<ToolResult>,
}

impl Group {
    /// Whether it holds exactly the pairs of `part`.
    fn fits(&self, part: &Part) -> bool {
        self.calls.len() == part.pairs && self.results.len() == part.pairs
    }

    /// Hands out what it holds as a `tool_calls` and a `tool_results` message,
    /// the metadata of its `part` (else the message's own) and the extras on the
    /// latter.
    fn close(
        &mut self,
        part: Option<Part>,
        own: &Metadata,
        extras: Option<&Value>,
        out: &mut Vec<Message>,
    ) {
        let mut calls = std::mem::take(&mut self.calls);
        calls
            .iter_mut()
            .for_each(|call| call.metadata = Metadata::new());
        let mut metadata = part.map_or_else(|| own.clone(), |part| part.metadata);
        if let Some(extras) = extras {
            metadata.insert(TOOL_METADATA_KEY, extras.clone());
        }
        if !calls.is_empty() {
            out.push(Message::ToolCalls(ToolCallsMessage {
                calls,
                metadata: Metadata::new(),
            }));
        }
        if !self.results.is_empty() {
            out.push(Message::ToolResults(ToolResultsMessage {
                results: std::mem::take(&mut self.results),
                metadata,
            }));
        }
    }
}

/// The media block a placeholder text block stands for, if it is still there.
fn claim(block: &ContentBlock, media: &mut [Option<ContentBlock>]) -> Option<ContentBlock> {
    let (kind, number) = placeholder(block.as_text()?)?;
    let slot = media.get_mut(number - 1)?;
    let fits = MediaKind::of(slot.as_ref()?) == Some(kind);
    fits.then(|| slot.take()).flatten()
}

/// Turns a run of `tool_calls` messages followed by `tool_results` messages
/// into one `tool_aggregate` when the results answer exactly those calls, and
/// hands it out (else the run as it was). A result without an id (a bare
/// `<tool_response>`) answers the call in its place.
fn pair(
    calls_messages: Vec<ToolCallsMessage>,
    results_messages: Vec<ToolResultsMessage>,
    out: &mut Output<Message>,
) {
    let calls: Vec<_> = calls_messages
        .iter()
        .flat_map(|m| m.calls.clone())
        .collect();
    let mut results: Vec<_> = results_messages
        .iter()
        .flat_map(|m| m.results.clone())
        .collect();
    for (call, result) in calls.iter().zip(&mut results) {
        if result.call_id.is_empty() {
            result.call_id.clone_from(&call.id);
        }
        if result.name.is_empty() {
            result.name.clone_from(&call.name);
        }
    }
    // Distinct ids, each answered once: a transcript may repeat an id.
    let distinct = calls.iter().map(|c| &c.id).collect::<HashSet<_>>().len() == calls.len();
    let answered = distinct
        && calls.len() == results.len()
        && calls
            .iter()
            .all(|call| results.iter().filter(|r| r.call_id == call.id).count() == 1);
    if !answered {
        out.extend(calls_messages.into_iter().map(Message::ToolCalls));
        out.extend(results_messages.into_iter().map(Message::ToolResults));
        return;
    }
    let mut calls = calls;
    let mut ordered: Vec<_> = calls
        .iter()
        .map(|call| {
            let at = results.iter().position(|r| r.call_id == call.id);
            results.swap_remove(at.expect("every call is answered"))
        })
        .collect();
    let mut metadata = Metadata::default();
    for m in &results_messages {
        metadata.merge_missing(&m.metadata);
    }
    for m in &calls_messages {
        metadata.merge_missing(&m.metadata);
    }
    // The text of a call holds no metadata of its own: what the parser put on
    // a call came from its message.
    for call in &mut calls {
        metadata.merge_missing(&std::mem::take(&mut call.metadata));
    }
    if let Some(extras) = metadata.remove(TOOL_METADATA_KEY) {
        apply_extras(&extras, &mut calls, &mut ordered);
    }
    out.push(Message::ToolAggregate(ToolAggregateMessage {
        calls,
        results: ordered,
        metadata,
    }));
}

//! Reading a history written in the transformer's format back into canonical
//! messages: the parser in transcript mode over every text message, media put
//! back in place of their placeholders, and calls paired with their results.

use serde_json::Value;

use super::format::{self, MediaKind, PLACEHOLDERS_KEY};
use super::transformer::TOOL_METADATA_KEY;
use crate::message::{MultimodalMessage, TextMessage, ToolAggregateMessage};
use crate::service::{Machine, Output};
use crate::{ContentBlock, Error, Event, Joiner, Message, Metadata, Role};

/// Reads `messages` with parser machines in transcript mode from `machine`,
/// which makes one for a text after `id_base` calls.
pub(super) fn read<M, F>(messages: Vec<Message>, machine: F) -> Result<Vec<Message>, Error>
where
    M: Machine<In = Event, Out = Event>,
    F: Fn(usize) -> Result<M, Error>,
{
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    for message in messages {
        let id_base = out.iter().map(|m| m.calls().len()).sum();
        match message {
            Message::Text(TextMessage {
                role: role @ (Role::Assistant | Role::User),
                text,
                metadata,
            }) => out.extend(parse(machine(id_base)?, role, text, metadata)?),
            Message::Multimodal(message)
                if matches!(message.role, Role::Assistant | Role::User) =>
            {
                out.extend(multimodal(machine(id_base)?, message)?);
            }
            other => out.push(other),
        }
    }
    Ok(pair(out))
}

/// Parses one message's text, whose plain text keeps the message's role.
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
        parsed.push(Message::multimodal(message.role, left));
    }
    Ok(parsed)
}

/// The media block a placeholder text block stands for, if it is still there.
fn claim(block: &ContentBlock, media: &mut [Option<ContentBlock>]) -> Option<ContentBlock> {
    let (kind, number) = format::placeholder(block.as_text()?)?;
    let slot = media.get_mut(number - 1)?;
    let fits = MediaKind::of(slot.as_ref()?) == Some(kind);
    fits.then(|| slot.take()).flatten()
}

/// Turns each run of `tool_calls` messages followed by `tool_results` messages
/// that answer exactly those calls into one `tool_aggregate`. A result without
/// an id (a bare `<tool_response>`) answers the call in its place.
fn pair(messages: Vec<Message>) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len());
    let mut messages = messages.into_iter().peekable();
    while let Some(message) = messages.next() {
        let Message::ToolCalls(first) = message else {
            out.push(message);
            continue;
        };
        let mut calls_messages = vec![first];
        while let Some(Message::ToolCalls(_)) = messages.peek() {
            if let Some(Message::ToolCalls(next)) = messages.next() {
                calls_messages.push(next);
            }
        }
        let mut results_messages = Vec::new();
        while let Some(Message::ToolResults(_)) = messages.peek() {
            if let Some(Message::ToolResults(next)) = messages.next() {
                results_messages.push(next);
            }
        }
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
        let answered = calls.len() == results.len()
            && calls
                .iter()
                .all(|call| results.iter().filter(|r| r.call_id == call.id).count() == 1);
        if !answered {
            out.extend(calls_messages.into_iter().map(Message::ToolCalls));
            out.extend(results_messages.into_iter().map(Message::ToolResults));
            continue;
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
            format::apply_extras(&extras, &mut calls, &mut ordered);
        }
        out.push(Message::ToolAggregate(ToolAggregateMessage {
            calls,
            results: ordered,
            metadata,
        }));
    }
    out
}

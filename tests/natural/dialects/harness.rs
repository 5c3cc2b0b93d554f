//! What every family's tests check with: the tools, parsing whole and in
//! pieces, and the agreement of the two.

use std::collections::BTreeMap;

use lmstack::natural::{Dialect, NaturalToolUseParser, OnInvalid};
use lmstack::service::{Machine, Output};
use lmstack::testing::Chunking;
use lmstack::{Event, InvalidCallKind, Joiner, Message, ToolCall, ToolSpec};
use serde_json::{Value, json};

/// The request's tools: `get_weather(city, days?, units?)`,
/// `write_file(path, content?, mode?, tags?, options?, force?)` and `now()`.
pub fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "get_weather",
            "Current weather",
            json!({"type": "object", "properties": {
                "city": {"type": "string"}, "days": {"type": "integer"}, "units": {"type": "string"}
            }, "required": ["city"]}),
        ),
        ToolSpec::new(
            "write_file",
            "Writes a file",
            json!({"type": "object", "properties": {
                "path": {"type": "string"}, "content": {"type": "string"},
                "mode": {"type": "integer"}, "tags": {"type": "array"}, "options": {"type": "object"},
                "force": {"type": "boolean"}
            }, "required": ["path"]}),
        ),
        ToolSpec::new(
            "now",
            "The time",
            json!({"type": "object", "properties": {}}),
        ),
    ]
}

/// A parser of `dialect`, bad calls marked (so that their faults show).
pub fn marking(dialect: Dialect) -> NaturalToolUseParser {
    NaturalToolUseParser::new()
        .dialect(dialect)
        .on_invalid(OnInvalid::Mark)
}

/// Streams `text` in `pieces` through a machine of `parser`.
pub fn stream(parser: &NaturalToolUseParser, pieces: &[&str]) -> Vec<Event> {
    let mut machine = parser.machine(&tools(), 0).unwrap();
    let mut out = Output::new();
    let mut events = Vec::new();
    for piece in pieces {
        machine.push(Event::text(*piece), &mut out).unwrap();
        events.extend(out.drain());
    }
    machine.finish(&mut out).unwrap();
    events.extend(out.drain());
    events
}

/// Parses `text` whole with `dialect` (bad calls kept as text, the default),
/// after checking that every way of cutting it gives the same messages — two
/// pieces cut at every character boundary (so every marker is split at every
/// prefix length), one piece per character, random pieces — and that the
/// argument deltas of each call concatenate to its arguments.
#[track_caller]
pub fn parse(dialect: Dialect, text: &str) -> Vec<Message> {
    checked(&NaturalToolUseParser::new().dialect(dialect), text)
}

/// [`parse`] with `parser`.
#[track_caller]
pub fn checked(parser: &NaturalToolUseParser, text: &str) -> Vec<Message> {
    let want = parser.parse(text, &tools()).unwrap();
    let mut cuts: Vec<Vec<&str>> = text
        .char_indices()
        .map(|(at, _)| vec![&text[..at], &text[at..]])
        .collect();
    for chunking in [
        Chunking::Chars,
        Chunking::Bytes(4),
        Chunking::Random { seed: 7, max: 9 },
    ] {
        cuts.push(chunking.split(text));
    }
    for pieces in cuts {
        let events = stream(parser, &pieces);
        assert_eq!(Joiner::join(events.clone()), want, "cut as {pieces:?}");
        assert_deltas_concatenate(&events, &want);
    }
    want
}

/// Each call's streamed argument deltas concatenate to its arguments.
#[track_caller]
pub fn assert_deltas_concatenate(events: &[Event], messages: &[Message]) {
    let mut by_index: BTreeMap<u32, (String, String)> = BTreeMap::new();
    for event in events {
        if let Event::ToolCallDelta(delta) = event {
            let entry = by_index.entry(delta.index).or_default();
            if let Some(id) = delta.id() {
                entry.0 = id.to_owned();
            }
            entry.1.push_str(&delta.arguments_delta);
        }
    }
    for call in calls(messages).into_iter().filter(|c| c.invalid.is_none()) {
        let (_, text) = by_index
            .values()
            .find(|(id, _)| *id == call.id)
            .expect("a streamed call");
        let streamed: Value = if text.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(text).unwrap()
        };
        assert_eq!(streamed, call.arguments, "deltas of {}", call.id);
    }
}

/// A call.
pub fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall::new(id, name, arguments)
}

/// The calls of `messages`, in order.
pub fn calls(messages: &[Message]) -> Vec<ToolCall> {
    messages.iter().flat_map(|m| m.calls().to_vec()).collect()
}

/// The text of `messages`, joined.
pub fn text_of(messages: &[Message]) -> String {
    messages.iter().filter_map(Message::as_text).collect()
}

/// The kind of each invalid call of `messages`.
pub fn faults(messages: &[Message]) -> Vec<InvalidCallKind> {
    calls(messages)
        .into_iter()
        .filter_map(|call| call.invalid.map(|invalid| invalid.kind))
        .collect()
}

/// `text` parses (whole and in every cut) to itself as one text message: a
/// near miss is kept exactly.
#[track_caller]
pub fn assert_kept(dialect: Dialect, text: &str) {
    assert_eq!(
        parse(dialect, text),
        vec![Message::assistant(text)],
        "{text:?}"
    );
}

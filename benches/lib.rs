//! lmstack's benchmarks live in the `benches` of this crate (`parser.rs`,
//! `dialects.rs`, `sse.rs`, `translate.rs`); run them with `cargo bench -p
//! lmstack-benches`.
//! This library holds what the parser benchmarks share: the tools, and the
//! drivers that stream pieces through lmstack's parser and through a peer.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use lmstack::natural::NaturalToolUseParser;
use lmstack::service::{Machine, Output};
use lmstack::{Event, ToolSpec};
use openai_protocol::common::Tool;
use serde_json::{Value, json};
use tool_parser::ToolParser;

/// Cities for the calls' arguments, some not ASCII.
pub const CITIES: [&str; 6] = [
    "Paris",
    "Tokyo",
    "São Paulo",
    "Nairobi",
    "Reykjavík",
    "Lima",
];

/// The benchmarks' tools, as name, description and JSON Schema:
/// `get_weather(city, days?, units?)` and `write_file(path, content)`.
pub fn schemas() -> [(&'static str, &'static str, Value); 2] {
    [
        (
            "get_weather",
            "Current weather for a city",
            json!({"type": "object", "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer", "minimum": 1, "maximum": 14},
                "units": {"type": "string", "enum": ["celsius", "fahrenheit"]}
            }, "required": ["city"]}),
        ),
        (
            "write_file",
            "Writes a text file",
            json!({"type": "object", "properties": {
                "path": {"type": "string"}, "content": {"type": "string"}
            }, "required": ["path", "content"]}),
        ),
    ]
}

/// The tools for lmstack and for the peer, the same on both sides.
pub struct Tools {
    /// lmstack's.
    pub lmstack: Vec<ToolSpec>,
    /// The peer's (OpenAI function tools).
    pub peer: Vec<Tool>,
}

impl Tools {
    /// The [`schemas`] on both sides.
    pub fn new() -> Self {
        let peer = schemas().map(|(name, description, schema)| {
            json!({"type": "function", "function": {"name": name, "description": description, "parameters": schema}})
        });
        Tools {
            lmstack: schemas()
                .into_iter()
                .map(|(name, description, schema)| ToolSpec::new(name, description, schema))
                .collect(),
            peer: serde_json::from_value(Value::from(peer.to_vec())).expect("tools"),
        }
    }
}

impl Default for Tools {
    fn default() -> Self {
        Self::new()
    }
}

/// Streams `pieces` through `parser`, taking every event out as it comes;
/// returns the number of tool calls. An invalid call is a bug in the input.
pub fn lmstack_calls(parser: &NaturalToolUseParser, tools: &[ToolSpec], pieces: &[&str]) -> usize {
    let mut machine = parser.machine(tools, 0).expect("tools");
    let mut out = Output::new();
    let mut calls = 0;
    let mut take = |out: &mut Output| {
        while let Some(event) = out.pop() {
            if let Event::ToolCallDelta(delta) = &event {
                assert!(delta.invalid().is_none(), "an invalid call: {delta:?}");
                calls += usize::from(delta.name().is_some());
            }
            black_box(&event);
        }
    };
    for piece in pieces {
        machine
            .push(Event::text(*piece), &mut out)
            .expect("no error");
        take(&mut out);
    }
    machine.finish(&mut out).expect("no error");
    take(&mut out);
    calls
}

/// The floor of lmstack's event API: each piece goes in as a `TextDelta` (its
/// `String` allocated) and comes out as the same event, taken and dropped — what
/// any machine costs per piece before it does any work.
pub fn event_floor(pieces: &[&str]) {
    struct Identity;
    impl Machine for Identity {
        type In = Event;
        type Out = Event;
        fn push(&mut self, event: Event, out: &mut Output) -> Result<(), lmstack::Error> {
            out.push(event);
            Ok(())
        }
    }
    let mut out = Output::new();
    for piece in pieces {
        Identity
            .push(Event::text(*piece), &mut out)
            .expect("no error");
        while let Some(event) = out.pop() {
            black_box(&event);
        }
    }
}

/// Streams `pieces` through a peer parser; returns the number of tool calls.
pub fn peer_calls(mut parser: impl ToolParser, tools: &[Tool], pieces: &[&str]) -> usize {
    peer_calls_dyn(&mut parser, tools, pieces)
}

/// [`peer_calls`] for a parser chosen at run time.
pub fn peer_calls_dyn(parser: &mut dyn ToolParser, tools: &[Tool], pieces: &[&str]) -> usize {
    let mut calls = 0;
    for piece in pieces {
        let result = ready(parser.parse_incremental(piece, tools)).expect("no error");
        calls += result.calls.iter().filter(|c| c.name.is_some()).count();
        black_box(result);
    }
    black_box(parser.get_unstreamed_tool_args());
    black_box(parser.take_unstreamed_normal_text());
    calls
}

/// The result of a future that never waits (the peer's async methods).
pub fn ready<T>(future: impl Future<Output = T>) -> T {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(value) => value,
        Poll::Pending => unreachable!("the peer's parsers never wait"),
    }
}

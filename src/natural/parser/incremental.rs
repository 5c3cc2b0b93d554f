//! The parser fed by hand: text in piece by piece, events out, without a tower
//! stack or the [`Machine`] plumbing.

use std::iter;

use super::machine::ParserMachine;
use crate::Error;
use crate::message::Event;
use crate::service::{Machine, Output};

/// A parse of one reply fed text piece by piece — text streamed from anywhere —
/// made by [`NaturalToolUseParser::incremental`](super::NaturalToolUseParser::incremental).
///
/// [`feed`](Self::feed) takes the next piece and gives the events it completes;
/// [`finish`](Self::finish) ends the text and gives what was held back. The
/// events are those of the parser layer over the same pieces, items of a
/// [`Reply`](crate::Reply): `Ok(event)`s, and at most one `Err`, which ends the
/// parse (under [`OnInvalid::Error`](super::OnInvalid::Error), or past the
/// [`call_limit`](super::NaturalToolUseParser::call_limit)) after the events
/// before it; later pieces give nothing. Joined
/// ([`Joiner::join`](crate::Joiner::join)), the events of any cutting of a text
/// are the messages [`parse`](super::NaturalToolUseParser::parse) gives for it,
/// and its error is the one `parse` fails with.
///
/// ```
/// use lmstack::natural::NaturalToolUseParser;
/// use lmstack::{Event, Joiner, Message, ToolCall, ToolSpec};
/// use serde_json::json;
///
/// let tools = [ToolSpec::new("get_weather", "", json!({"type": "object"}))];
/// let mut parse = NaturalToolUseParser::new().incremental(&tools)?;
/// let mut events = Vec::new();
/// for piece in ["Let me check.\n<tool_ca", "ll name=\"get_weather\">{\"city\": ", "\"Paris\"}</tool_call>"] {
///     for event in parse.feed(piece) {
///         events.push(event?); // show it: the text at once, the call as it streams
///     }
/// }
/// events.extend(parse.finish().collect::<Result<Vec<_>, _>>()?);
///
/// assert_eq!(events[0], Event::text("Let me check.\n"));
/// assert_eq!(events[1], Event::call_start(0, "call_1", "get_weather"));
/// assert_eq!(Joiner::join(events), vec![
///     Message::assistant("Let me check.\n"),
///     Message::tool_calls(vec![ToolCall::new("call_1", "get_weather", json!({"city": "Paris"}))]),
/// ]);
/// # Ok::<(), lmstack::Error>(())
/// ```
#[derive(Debug)]
pub struct IncrementalParser {
    machine: ParserMachine,
    out: Output,
    /// The parse failed: nothing more goes in.
    ended: bool,
}

impl IncrementalParser {
    pub(super) fn new(machine: ParserMachine) -> Self {
        IncrementalParser {
            machine,
            out: Output::new(),
            ended: false,
        }
    }

    /// Takes the next piece of the text; gives the events it completes, then the
    /// error that ended the parse, if it did. Text that could still begin a marker
    /// is held back until the next piece (or [`finish`](Self::finish)) shows what
    /// it is.
    pub fn feed(
        &mut self,
        text: impl Into<String>,
    ) -> impl Iterator<Item = Result<Event, Error>> + '_ {
        let error = if self.ended {
            None
        } else {
            let pushed = self.machine.push(Event::text(text), &mut self.out);
            self.ended = pushed.is_err();
            pushed.err()
        };
        self.out.drain().map(Ok).chain(error.map(Err))
    }

    /// Ends the text: gives what was held back (text, an unclosed call completed
    /// or marked, a call cut off), then the error that ended the parse, if it did.
    pub fn finish(mut self) -> impl Iterator<Item = Result<Event, Error>> {
        let error = if self.ended {
            None
        } else {
            self.machine.finish(&mut self.out).err()
        };
        let mut out = self.out;
        iter::from_fn(move || out.pop())
            .map(Ok)
            .chain(error.map(Err))
    }
}

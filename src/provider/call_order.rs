//! Parallel tool calls in any order → each call's deltas contiguous, as the
//! event model wants (see [`CallOrder`]).

use std::collections::VecDeque;
use std::fmt;

use crate::message::{Event, ToolCallDelta};
use crate::service::Output;

/// Puts the fragments of parallel tool calls, in whatever order a wire sends
/// them, into the order of the event model: calls numbered 0, 1, … in the order
/// they start, the deltas of each call contiguous.
///
/// Wires key a call's fragments (OpenAI Chat by `index`, Anthropic by content
/// block index), and nothing in them makes one call end before the next begins.
/// The first call streams as it comes. A call that starts while the one
/// streaming is not yet whole is held, its fragments joined; once the call
/// before it is whole — its arguments so far are a whole JSON object or array,
/// or the wire said it ended ([`end`](Self::end)) — the held call is sent as one
/// delta and streams from then on. What is still held is sent when the run of
/// calls ends ([`flush`](Self::flush): before any other event, and at the end of
/// the reply). Calls sent one after another, as every server known sends them,
/// are never held: the next starts when the one before is whole.
///
/// What is held is part of the body, within the body limit. Pure; each
/// fragment's cost is linear in its own text.
///
/// A fragment for a call already sent whole is [`Late`]; one that carries
/// nothing but whitespace (and metadata) changes nothing and is dropped.
#[derive(Debug, Default)]
pub(crate) struct CallOrder {
    /// Calls started: the number the next one takes.
    started: u32,
    /// The call streaming; those below it are complete. Equal to `started`
    /// when none streams.
    head: u32,
    /// Whether the call streaming is whole yet.
    head_whole: Whole,
    /// The calls after `head`, in order, each its fragments joined.
    held: VecDeque<Held>,
}

#[derive(Debug)]
struct Held {
    delta: ToolCallDelta,
    ended: bool,
}

/// A fragment for a call that was complete already: its arguments were whole
/// and the next call had begun, or other output had followed the calls.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Late(pub u32);

impl fmt::Display for Late {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a fragment of tool call {} came after the call was complete \
             (its arguments were whole JSON and another call had begun, or other output followed)",
            self.0
        )
    }
}

impl CallOrder {
    /// The number the next call to start takes.
    pub(crate) fn next(&self) -> u32 {
        self.started
    }

    /// Starts the next call with its first delta, whose `index` becomes
    /// [`next`](Self::next).
    pub(crate) fn start(&mut self, mut delta: ToolCallDelta, out: &mut Output) {
        delta.index = self.started;
        self.started = self.started.saturating_add(1);
        if self.head == delta.index {
            self.head_whole = Whole::default();
            self.head_whole.feed(&delta.arguments_delta);
            out.push(Event::from(delta));
        } else {
            self.held.push_back(Held {
                delta,
                ended: false,
            });
            self.advance(out);
        }
    }

    /// A later fragment of the call numbered `delta.index`.
    pub(crate) fn fragment(&mut self, delta: ToolCallDelta, out: &mut Output) -> Result<(), Late> {
        let index = delta.index;
        if index < self.head || index >= self.started {
            // Its metadata (a wire's unknown fields) has no call left to go to.
            let empty = delta.arguments_delta.trim().is_empty() && delta.details.is_none();
            return if empty { Ok(()) } else { Err(Late(index)) };
        }
        match (index - self.head).checked_sub(1) {
            None => {
                self.head_whole.feed(&delta.arguments_delta);
                out.push(Event::from(delta));
            }
            Some(at) => {
                let held = &mut self.held[at as usize].delta;
                held.arguments_delta.push_str(&delta.arguments_delta);
                if let Some(details) = delta.details {
                    held.details_mut().absorb(*details);
                }
                held.metadata.merge_missing(&delta.metadata);
            }
        }
        self.advance(out);
        Ok(())
    }

    /// The wire says the call numbered `index` ended: no fragment follows
    /// (Anthropic's `content_block_stop`).
    #[cfg(any(feature = "anthropic", feature = "openai-responses"))]
    pub(crate) fn end(&mut self, index: u32, out: &mut Output) {
        if index == self.head && index < self.started {
            self.head_whole.ended = true;
            self.advance(out);
        } else if let Some(held) = index
            .checked_sub(self.head.saturating_add(1))
            .and_then(|at| self.held.get_mut(at as usize))
        {
            held.ended = true;
        }
    }

    /// Ends the run of calls: sends every call held, in order.
    pub(crate) fn flush(&mut self, out: &mut Output) {
        out.extend(self.held.drain(..).map(|held| Event::from(held.delta)));
        self.head = self.started;
        self.head_whole = Whole::default();
    }

    /// A lifter's outcome, with every call held sent first when it is an error:
    /// what came before an error is kept.
    pub(crate) fn keep_on_error<T>(
        &mut self,
        lifted: Result<T, crate::Error>,
        out: &mut Output,
    ) -> Result<T, crate::Error> {
        if lifted.is_err() {
            self.flush(out);
        }
        lifted
    }

    /// Sends held calls while the one streaming is whole.
    fn advance(&mut self, out: &mut Output) {
        while self.head_whole.is_whole()
            && let Some(Held { delta, ended }) = self.held.pop_front()
        {
            self.head += 1;
            self.head_whole = Whole {
                ended,
                ..Whole::default()
            };
            self.head_whole.feed(&delta.arguments_delta);
            out.push(Event::from(delta));
        }
    }
}

/// Whether a call's arguments text so far is whole: a JSON object or array
/// closed, or the wire said the call ended. One pass over the text, a few
/// bytes of state.
#[derive(Debug, Default)]
struct Whole {
    depth: u32,
    in_string: bool,
    escaped: bool,
    closed: bool,
    ended: bool,
}

impl Whole {
    fn feed(&mut self, text: &str) {
        if self.closed {
            return;
        }
        for byte in text.bytes() {
            if self.in_string {
                match byte {
                    _ if self.escaped => self.escaped = false,
                    b'\\' => self.escaped = true,
                    b'"' => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match byte {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth = self.depth.saturating_add(1),
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        self.closed = true;
                        return;
                    }
                }
                _ => {}
            }
        }
    }

    fn is_whole(&self) -> bool {
        self.closed || self.ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Joiner;
    use serde_json::json;

    fn start(order: &mut CallOrder, id: &str, arguments: &str, out: &mut Output) -> u32 {
        let index = order.next();
        let mut delta = ToolCallDelta::start(index, id, "f");
        delta.arguments_delta = arguments.into();
        order.start(delta, out);
        index
    }

    fn indexes(out: &mut Output) -> Vec<u32> {
        out.drain()
            .map(|event| match event {
                Event::ToolCallDelta(delta) => delta.index,
                other => panic!("not a call delta: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn calls_one_after_another_are_never_held() {
        let (mut order, mut out) = (CallOrder::default(), Output::new());
        let a = start(&mut order, "a", "{\"x\":", &mut out);
        order
            .fragment(ToolCallDelta::arguments(a, "1}"), &mut out)
            .unwrap();
        start(&mut order, "b", "{}", &mut out);
        assert_eq!(indexes(&mut out), [0, 0, 1]);
    }

    #[test]
    fn a_call_that_starts_before_the_one_streaming_is_whole_waits_for_it() {
        let (mut order, mut out) = (CallOrder::default(), Output::new());
        let a = start(&mut order, "a", "{\"s\":\"}", &mut out);
        let b = start(&mut order, "b", "{\"y\":", &mut out);
        order
            .fragment(ToolCallDelta::arguments(b, "2}"), &mut out)
            .unwrap();
        assert_eq!(
            indexes(&mut out),
            [0],
            "a brace inside a string closes nothing"
        );
        order
            .fragment(ToolCallDelta::arguments(a, "\"}"), &mut out)
            .unwrap();
        let events: Vec<Event> = out.drain().collect();
        assert_eq!(events.len(), 2, "a's fragment, then b joined in one delta");
        let mut all = vec![
            Event::call_start(0, "a", "f"),
            Event::call_arguments(0, "{\"s\":\"}"),
        ];
        all.extend(events);
        let calls = Joiner::join(all);
        let calls = calls[0].calls();
        assert_eq!(calls[0].arguments, json!({"s": "}"}));
        assert_eq!(
            (calls[1].id.as_str(), &calls[1].arguments),
            ("b", &json!({"y": 2}))
        );
    }

    #[test]
    #[cfg(feature = "anthropic")]
    fn held_calls_go_out_at_the_end_of_the_run_or_when_the_wire_ends_the_one_before() {
        let (mut order, mut out) = (CallOrder::default(), Output::new());
        let a = start(&mut order, "a", "", &mut out);
        start(&mut order, "b", "", &mut out);
        start(&mut order, "c", "", &mut out);
        order.end(a, &mut out);
        assert_eq!(indexes(&mut out), [0, 1]);
        order.flush(&mut out);
        assert_eq!(indexes(&mut out), [2]);
        assert_eq!(start(&mut order, "d", "", &mut out), 3);
        assert_eq!(indexes(&mut out), [3]);
    }

    #[test]
    fn a_fragment_for_a_complete_call_is_late_unless_it_is_only_whitespace() {
        let (mut order, mut out) = (CallOrder::default(), Output::new());
        let a = start(&mut order, "a", "{}", &mut out);
        start(&mut order, "b", "{", &mut out);
        assert_eq!(
            order.fragment(ToolCallDelta::arguments(a, " \n"), &mut out),
            Ok(())
        );
        assert_eq!(
            order.fragment(ToolCallDelta::arguments(a, "x"), &mut out),
            Err(Late(a))
        );
        assert_eq!(
            order.fragment(ToolCallDelta::arguments(7, "x"), &mut out),
            Err(Late(7)),
            "a call never started"
        );
    }
}

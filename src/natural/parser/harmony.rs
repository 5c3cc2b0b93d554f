//! Harmony, the format of OpenAI's gpt-oss models: a reply is a run of messages
//! `<|start|>assistant<|channel|>C[ to=R][ <|constrain|>T | T]<|message|>…<|end|>`,
//! the first without its `<|start|>assistant` (the prompt ends with it), the
//! last ended by `<|return|>` or `<|call|>`. The recipient may stand in the
//! role part instead: `<|start|>assistant to=R<|channel|>C…`.
//!
//! A header is read as a block, bounded like a tag; what it opens follows the
//! recipient, then the channel, as vLLM reads them:
//! - `to=functions.F`, on any channel: a call of `F`, its body JSON arguments
//!   ended by `<|call|>` (or `<|end|>`, `<|return|>`, or the next message's
//!   header where the terminator was left out), kept as a block;
//! - `analysis` (also to a built-in tool, `browser.search`, `python`):
//!   reasoning, streamed up to the next Harmony marker;
//! - `commentary` (a preamble for the user), `final`: text, read as prose.
//!
//! A header that is none of these (an unknown channel, another role, a broken
//! line) is text exactly as written.

use super::calls::{BlockContext, BlockStep, Body, Step};
use super::json_block::{Ends, Tagged};
use crate::Error;
use crate::natural::markers::HARMONY;
use crate::natural::scan::marker::{MarkerMatch, Matched};
use crate::natural::scan::tag::TAG_LIMIT;

const CHANNEL: &str = HARMONY.channel;
const START: &str = HARMONY.start;
const MESSAGE: &str = HARMONY.message;

/// What ends a reasoning body: any of the markers Harmony reads in the prose
/// (see [`special`](super::special)).
const REASONING_ENDS: &[&str] = &[CHANNEL, START, HARMONY.end, HARMONY.ret, HARMONY.call];

/// The markers inside a header.
const HEADER_MARKERS: &[&str] = &[CHANNEL, HARMONY.constrain, MESSAGE];

/// What ends a call's arguments: its terminators, or the header of the next
/// message where a terminator was left out (read again as prose).
const CALL_ENDS: Ends = Ends::then(&[HARMONY.call, HARMONY.end, HARMONY.ret, START, CHANNEL], 3);

/// The channels a header may name.
const CHANNELS: &[&str] = &["analysis", "commentary", "final"];

/// A message being read: its header, then a call's arguments.
#[derive(Debug)]
pub(super) enum Harmony {
    Header(Header),
    Call(Tagged),
}

/// A message's header, read up to `<|message|>`.
#[derive(Debug)]
pub(super) struct Header {
    /// The marker that opened it: `<|channel|>`, or `<|start|>` (then a role
    /// comes first).
    opened_by: &'static str,
    /// The header after that marker, so far; at most [`TAG_LIMIT`] bytes.
    text: String,
    /// A marker being read in the header.
    marker: Option<MarkerMatch>,
}

/// What [`Header::feed`] found.
enum Read {
    More,
    /// Not a header: see [`BlockStep::NotACall`].
    Not(usize),
    /// The header ended after this many bytes; the body is read as `Body`.
    Body(usize, Body),
    /// A call's header ended after this many bytes; the call is begun and named.
    Call(usize),
}

impl Harmony {
    /// The header that `marker` (`<|channel|>`, or `<|start|>`) opens.
    pub(super) fn header(marker: &'static str) -> Harmony {
        Harmony::Header(Header {
            opened_by: marker,
            text: String::new(),
            marker: None,
        })
    }

    pub(super) fn feed(&mut self, input: &str, ctx: &mut BlockContext<'_>) -> Step {
        let header = match self {
            Harmony::Call(arguments) => return arguments.feed(input, ctx),
            Harmony::Header(header) => header,
        };
        Ok(match header.feed(input, ctx) {
            Read::More => BlockStep::More,
            Read::Not(at) => BlockStep::NotACall {
                at,
                replay_from: header.opened_by.len(),
            },
            Read::Body(used, body) => BlockStep::Body { used, body },
            Read::Call(used) => {
                *self = Harmony::Call(Tagged::ended_by(CALL_ENDS));
                ctx.base += used;
                let step = self.feed(&input[used..], ctx);
                ctx.base -= used;
                step?.after(used)
            }
        })
    }

    /// The text ended inside the message; false when it was still in the
    /// header (which is then text).
    pub(super) fn end(&mut self, ctx: &mut BlockContext<'_>) -> Result<bool, Error> {
        match self {
            Harmony::Header(_) => Ok(false),
            Harmony::Call(arguments) => arguments.end(ctx).map(|()| true),
        }
    }
}

impl Header {
    /// Reads on up to `<|message|>`: a line of words and header markers, at
    /// most [`TAG_LIMIT`] bytes.
    fn feed(&mut self, input: &str, ctx: &mut BlockContext<'_>) -> Read {
        let bytes = input.as_bytes();
        let mut pos = 0;
        while pos < bytes.len() {
            if self.text.len() + pos > TAG_LIMIT && input.is_char_boundary(pos) {
                return Read::Not(pos);
            }
            if let Some(marker) = &mut self.marker {
                match marker.feed(&input[pos..], HEADER_MARKERS) {
                    Matched::More => pos = bytes.len(),
                    Matched::Not { .. } => return Read::Not(pos),
                    Matched::Marker { index, end } => {
                        pos += end;
                        self.marker = None;
                        if HEADER_MARKERS[index] == MESSAGE {
                            self.text.push_str(&input[..pos]);
                            return self.read(pos, ctx);
                        }
                    }
                }
                continue;
            }
            match bytes[pos] {
                b'<' => {
                    let marker = self.marker.insert(MarkerMatch::default());
                    marker.start("<");
                }
                byte if byte.is_ascii_control() => return Read::Not(pos),
                _ => {}
            }
            pos += 1;
        }
        self.text.push_str(input);
        Read::More
    }

    /// The whole header, read: what it opens.
    fn read(&self, used: usize, ctx: &mut BlockContext<'_>) -> Read {
        let Some((channel, recipient)) = parse(self.opened_by == START, &self.text) else {
            return Read::Not(used);
        };
        match recipient.and_then(|to| to.strip_prefix(HARMONY.functions)) {
            Some(name) => {
                ctx.begin(0);
                ctx.name(name);
                Read::Call(used)
            }
            None if channel == "analysis" => Read::Body(used, Body::Reasoning(REASONING_ENDS)),
            None => Read::Body(used, Body::Text),
        }
    }
}

/// The channel and recipient of a header (`text`, after its opening marker, up
/// to and with `<|message|>`); `None` when it is not one. After `<|start|>` the
/// role `assistant` comes first, perhaps with the recipient.
fn parse(start: bool, text: &str) -> Option<(&str, Option<&str>)> {
    let text = text.strip_suffix(MESSAGE)?;
    let mut recipient = None;
    let text = if start {
        let (role, rest) = text.split_once(CHANNEL)?;
        let mut words = role.split_ascii_whitespace();
        if words.next()? != "assistant" {
            return None;
        }
        if let Some(word) = words.next() {
            recipient = Some(to(word)?);
        }
        if words.next().is_some() {
            return None;
        }
        rest
    } else {
        text
    };
    let (meta, constraint) = match text.split_once(HARMONY.constrain) {
        Some((meta, constraint)) => (meta, Some(constraint)),
        None => (text, None),
    };
    if meta.contains("<|") || constraint.is_some_and(|c| c.contains("<|")) {
        return None;
    }
    let mut words = meta.split_ascii_whitespace();
    let channel = words.next().filter(|channel| CHANNELS.contains(channel))?;
    let mut next = words.next();
    if recipient.is_none()
        && let Some(to) = next.and_then(to)
    {
        recipient = Some(to);
        next = words.next();
    }
    // At most one content type: a word after `<|constrain|>`, or in its place.
    let mut types = next
        .into_iter()
        .chain(constraint.into_iter().flat_map(str::split_ascii_whitespace));
    let typed = types.next().is_none_or(|word| !word.starts_with("to="));
    (typed && types.next().is_none() && words.next().is_none()).then_some((channel, recipient))
}

/// The recipient in a `to=R` word.
fn to(word: &str) -> Option<&str> {
    word.strip_prefix("to=").filter(|to| !to.is_empty())
}

//! One call between a family's special tokens:
//!
//! - Kimi K2: `<|tool_call_begin|>functions.F:0<|tool_call_argument_begin|>{…}<|tool_call_end|>`;
//! - DeepSeek V3 / R1: `<｜tool▁call▁begin｜>function<｜tool▁sep｜>F\n```json\n{…}\n```<｜tool▁call▁end｜>`;
//! - DeepSeek V3.1: `<｜tool▁call▁begin｜>F<｜tool▁sep｜>{…}<｜tool▁call▁end｜>`.
//!
//! A section marker (`<|tool_calls_section_begin|>`, `<｜tool▁calls▁begin｜>`)
//! opens the first call of a run; the calls after it open with their own call
//! marker in the prose, and the section's end marker is dropped after them (see
//! [`special`](super::special)). The arguments are read by
//! [`Tagged::closed_by`] the call's end marker. Until the separator after the
//! header, a broken call is not a call: its opening marker is text and the rest
//! is read again as prose.

use crate::text::floor_char_boundary;
use memchr::memchr;

use super::calls::{BlockContext, BlockStep, Step};
use super::json_block::{Expect, Expected, Tagged};
use crate::natural::markers::{DEEPSEEK, KIMI_K2, Section};
use crate::natural::scan::skip_space;
use crate::natural::scan::tag::TAG_LIMIT;
use crate::{Error, InvalidCallKind};

/// The family whose special tokens a call is written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Family {
    KimiK2,
    DeepSeek,
}

impl Family {
    /// The family's special tokens.
    fn markers(self) -> &'static Section {
        match self {
            Family::KimiK2 => &KIMI_K2,
            Family::DeepSeek => &DEEPSEEK,
        }
    }
}

/// A call written with a family's special tokens, from its section or call
/// marker to its end marker.
#[derive(Debug)]
pub(super) struct TokenCall {
    family: Family,
    /// The end of the block's opening marker in its raw text: a near miss is
    /// text up to here, and read again as prose after it.
    opener: usize,
    state: State,
}

#[derive(Debug)]
enum State {
    /// After a section marker: whitespace, then the call marker, matched from
    /// its `<` (whose raw offset is kept).
    Section(Option<(Expect, usize)>),
    /// The header (Kimi's id, DeepSeek's type or name) up to the separator;
    /// the call starts at `start` in the raw text.
    Header { text: String, start: usize },
    /// The separator after the header.
    Separator {
        expect: Expect,
        header: String,
        start: usize,
    },
    /// DeepSeek V3: the tool's name, on the line after `function<｜tool▁sep｜>`.
    NameLine(String),
    /// The arguments, up to the call's end marker.
    Args(Tagged),
}

impl TokenCall {
    /// After a section marker, which `ctx`'s piece follows.
    pub(super) fn section(family: Family, ctx: &BlockContext<'_>) -> Self {
        TokenCall {
            family,
            opener: ctx.pos(0),
            state: State::Section(None),
        }
    }

    /// After a call marker, which `ctx`'s piece follows.
    pub(super) fn call(family: Family, ctx: &BlockContext<'_>) -> Self {
        TokenCall {
            family,
            opener: ctx.pos(0),
            state: State::Header {
                text: String::new(),
                start: 0,
            },
        }
    }

    pub(super) fn feed(&mut self, input: &str, ctx: &mut BlockContext<'_>) -> Step {
        let bytes = input.as_bytes();
        let mut pos = 0;
        loop {
            match &mut self.state {
                State::Section(None) => {
                    pos = match ctx.skip_space(bytes, pos, 0, |at| self.not_a_call(input, at)) {
                        Ok(pos) => pos,
                        Err(step) => return Ok(step),
                    };
                    let expect =
                        Expect::new(std::slice::from_ref(&self.family.markers().call_begin));
                    self.state = State::Section(Some((expect, ctx.pos(pos))));
                }
                State::Section(Some((expect, start))) => match expect.feed(&input[pos..]) {
                    Expected::More => return Ok(BlockStep::More),
                    Expected::Mismatch(at) => return Ok(self.not_a_call(input, pos + at)),
                    Expected::Done(used) => {
                        pos += used;
                        self.state = State::Header {
                            text: String::new(),
                            start: *start,
                        };
                    }
                },
                State::Header { text, start } => {
                    let end = memchr(b'<', &bytes[pos..]).map_or(bytes.len(), |at| pos + at);
                    text.push_str(&input[pos..end]);
                    pos = end;
                    if text.len() > TAG_LIMIT {
                        return Ok(self.not_a_call(input, pos));
                    }
                    if pos == bytes.len() {
                        return Ok(BlockStep::More);
                    }
                    self.state = State::Separator {
                        expect: Expect::new(std::slice::from_ref(&self.family.markers().separator)),
                        header: std::mem::take(text),
                        start: *start,
                    };
                }
                State::Separator {
                    expect,
                    header,
                    start,
                } => match expect.feed(&input[pos..]) {
                    Expected::More => return Ok(BlockStep::More),
                    Expected::Mismatch(at) => return Ok(self.not_a_call(input, pos + at)),
                    Expected::Done(used) => {
                        pos += used;
                        ctx.begin(*start);
                        let header = std::mem::take(header);
                        self.state = self.after_header(header.trim(), ctx);
                    }
                },
                State::NameLine(name) => {
                    if name.is_empty() {
                        let Some(next) = skip_space(bytes, pos) else {
                            return Ok(BlockStep::More);
                        };
                        pos = next;
                    }
                    let stop = bytes[pos..]
                        .iter()
                        .position(|&b| matches!(b, b'\n' | b'{' | b'`' | b'<'));
                    let end = stop.map_or(bytes.len(), |at| pos + at);
                    name.push_str(&input[pos..end]);
                    pos = end;
                    if stop.is_none() && name.len() <= TAG_LIMIT {
                        return Ok(BlockStep::More);
                    }
                    if name.len() > TAG_LIMIT {
                        ctx.fault(
                            InvalidCallKind::MalformedArguments,
                            "the tool's name is too long",
                        );
                    }
                    if bytes.get(pos) == Some(&b'\n') {
                        pos += 1;
                    }
                    // No name before the arguments: V3.1's form, for a tool
                    // named `function`.
                    match name.trim() {
                        "" => ctx.name("function"),
                        name => ctx.name(name),
                    }
                    self.state = State::Args(Tagged::closed_by(std::slice::from_ref(
                        &self.family.markers().call_end,
                    )));
                }
                State::Args(tagged) => {
                    ctx.base += pos;
                    let step = tagged.feed(&input[pos..], ctx);
                    ctx.base -= pos;
                    return Ok(match step? {
                        BlockStep::Done(used) => BlockStep::Done(pos + used),
                        step => step,
                    });
                }
            }
        }
    }

    /// The state after the header, once the separator is read: the call is
    /// named from it, or (DeepSeek V3) its name follows on the next line.
    fn after_header(&self, header: &str, ctx: &mut BlockContext<'_>) -> State {
        match self.family {
            Family::DeepSeek if header == "function" => return State::NameLine(String::new()),
            Family::DeepSeek => ctx.name(header),
            Family::KimiK2 => {
                let (name, indexed) = kimi_name(header);
                if indexed {
                    ctx.model_id(header);
                }
                ctx.name(name);
            }
        }
        State::Args(Tagged::closed_by(std::slice::from_ref(
            &self.family.markers().call_end,
        )))
    }

    /// Not a call: the opening marker is text, and what follows it up to byte
    /// `at` of the piece (or the last character boundary before it) is read
    /// again as prose.
    fn not_a_call(&self, input: &str, at: usize) -> BlockStep {
        let at = floor_char_boundary(input, at);
        BlockStep::NotACall {
            at,
            replay_from: self.opener,
        }
    }

    /// The text ended inside the block; false when no call had begun (its raw
    /// text is then text).
    pub(super) fn end(&mut self, ctx: &mut BlockContext<'_>) -> Result<bool, Error> {
        match &mut self.state {
            State::Section(_) | State::Header { .. } | State::Separator { .. } => Ok(false),
            State::NameLine(name) => {
                ctx.fault(
                    InvalidCallKind::Truncated,
                    "the text ended before the arguments",
                );
                ctx.name(name);
                ctx.end(ctx.raw_end())?;
                Ok(true)
            }
            State::Args(tagged) => tagged.end(ctx).map(|()| true),
        }
    }
}

/// The tool's name in a Kimi K2 call id `functions.F:0`, and whether the id
/// ends in an index (then it is the call's id); the `functions.` prefix and the
/// index may be missing.
fn kimi_name(id: &str) -> (&str, bool) {
    let name = id.strip_prefix("functions.").unwrap_or(id);
    match name.rsplit_once(':') {
        Some((name, index)) if !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()) => {
            (name, true)
        }
        _ => (name, false),
    }
}

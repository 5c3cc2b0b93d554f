//! Pythonic calls (Llama 4, Llama 3.2 1B/3B): a list of Python calls with
//! keyword arguments, `[get_weather(city="Paris"), now()]`, at the start of a
//! line or after `<|python_start|>`, maybe followed by `<|python_end|>`.
//!
//! An element is a call once `name(` is read; until then the list gives
//! nothing out, and a list whose first element is not a call (`[1, 2]`,
//! `[link](url)`, `[Note] x`) is text exactly as written. Argument values are
//! Python literals, written out as JSON as they arrive
//! ([`PyLiteral`]). A positional argument or a bad literal is a fault, and the
//! call runs to its `)`.

use super::calls::{BlockContext, BlockStep, PENDING_LIMIT, Step};
use super::json_block::{Expect, Expected};
use crate::natural::scan::python::{BadLiteral, PyLiteral, Read};
use crate::natural::scan::{NAME_LIMIT, is_space};
use crate::{Error, InvalidCallKind};

/// The marker that may close the list.
const PYTHON_END: &str = "<|python_end|>";

/// A pythonic list of calls.
#[derive(Debug)]
pub(super) struct Pythonic {
    state: State,
    literal: PyLiteral,
    /// The tool or argument name being read.
    name: String,
    /// The block's raw offset of the tool name being read.
    name_start: usize,
    /// Arguments written to the current call.
    args: usize,
    /// The block's raw offset of the value being read.
    value_start: usize,
    /// The block's raw offset of the end of the last call, once there is one.
    last: Option<usize>,
}

#[derive(Debug)]
enum State {
    /// Whitespace, then `[`.
    Open,
    /// After `[` or a `,` between calls: whitespace, then a tool name (or,
    /// after a comma, `]`).
    BeforeName {
        comma: bool,
    },
    Name,
    /// After a tool name: whitespace, then `(`.
    BeforeParen,
    /// Inside a call: whitespace, then an argument name or `)`.
    BeforeArg,
    ArgName,
    /// After an argument name: whitespace, then `=`.
    BeforeEquals,
    Value,
    /// After a value: whitespace, then `,` or `)`.
    AfterValue,
    /// A faulty call, skipped to its `)`.
    Skip(Skip),
    /// After a call: whitespace, then `,` or `]`.
    AfterCall,
    /// After the list: whitespace, then maybe `<|python_end|>`.
    Tail(Option<Expect>),
}

/// Skips the rest of a faulty call: brackets and strings are followed, so
/// that the `)` that ends the call is found.
#[derive(Debug, Default)]
struct Skip {
    depth: usize,
    quote: Option<u8>,
    escaped: bool,
}

impl Skip {
    /// Skips from the start of the value at `start` in the block's raw text
    /// (whatever the cuts, the same bytes are skipped) up to byte `at` of the
    /// piece.
    fn from(start: usize, at: usize, ctx: &BlockContext<'_>) -> Self {
        let mut skip = Skip::default();
        for byte in ctx.raw(start, ctx.pos(at)).bytes() {
            skip.step(byte);
        }
        skip
    }

    /// Reads `bytes`; the offset after the call's `)`, once found.
    fn feed(&mut self, bytes: &[u8]) -> Option<usize> {
        bytes
            .iter()
            .position(|&byte| self.step(byte))
            .map(|at| at + 1)
    }

    /// Reads one byte; true when it is the call's `)`.
    fn step(&mut self, byte: u8) -> bool {
        match self.quote {
            Some(_) if self.escaped => self.escaped = false,
            Some(_) if byte == b'\\' => self.escaped = true,
            Some(quote) if byte == quote => self.quote = None,
            Some(_) => {}
            None => match byte {
                b'\'' | b'"' => self.quote = Some(byte),
                b'(' | b'[' | b'{' => self.depth += 1,
                b')' if self.depth == 0 => return true,
                b')' | b']' | b'}' => self.depth = self.depth.saturating_sub(1),
                _ => {}
            },
        }
        false
    }
}

impl Pythonic {
    /// A list from its `[`, or from whitespace before it (after
    /// `<|python_start|>`).
    pub(super) fn new() -> Self {
        Pythonic {
            state: State::Open,
            literal: PyLiteral::default(),
            name: String::new(),
            name_start: 0,
            args: 0,
            value_start: 0,
            last: None,
        }
    }

    pub(super) fn feed(&mut self, input: &str, ctx: &mut BlockContext<'_>) -> Step {
        let bytes = input.as_bytes();
        let mut pos = 0;
        while pos < bytes.len() {
            let byte = bytes[pos];
            match &mut self.state {
                State::Value => {
                    let mut sink = |piece: &str| ctx.args(piece);
                    let mut failed = Ok(());
                    let read = self.literal.feed(&input[pos..], &mut |piece| {
                        if failed.is_ok() {
                            failed = sink(piece);
                        }
                    });
                    failed?;
                    match read {
                        Ok(Read::More) => return Ok(BlockStep::More),
                        Ok(Read::Done(used)) => {
                            pos += used;
                            self.state = State::AfterValue;
                        }
                        Err(BadLiteral(message)) => {
                            let message = format!("a bad argument value: {message}");
                            ctx.fault(InvalidCallKind::MalformedArguments, message);
                            self.state = State::Skip(Skip::from(self.value_start, pos, ctx));
                        }
                    }
                    continue;
                }
                State::Name | State::ArgName => {
                    let run = bytes[pos..]
                        .iter()
                        .position(|&b| !is_name_byte(b))
                        .unwrap_or(bytes.len() - pos);
                    self.name.push_str(&input[pos..pos + run]);
                    pos += run;
                    if self.name.len() > NAME_LIMIT {
                        return Ok(self.not_a_call(pos, ctx));
                    }
                    if pos < bytes.len() {
                        self.state = match self.state {
                            State::Name => State::BeforeParen,
                            _ => State::BeforeEquals,
                        };
                    }
                    continue;
                }
                State::Skip(skip) => match skip.feed(&bytes[pos..]) {
                    None => return Ok(BlockStep::More),
                    Some(used) => {
                        pos += used;
                        self.end_call(pos, ctx)?;
                        continue;
                    }
                },
                State::Tail(Some(expect)) => match expect.feed(&input[pos..]) {
                    Expected::More => return Ok(BlockStep::More),
                    Expected::Done(used) => return Ok(BlockStep::Done(pos + used)),
                    Expected::Mismatch(_) => return Ok(self.not_a_call(pos, ctx)),
                },
                _ if is_space(byte) => {
                    let spaces = bytes[pos..].iter().take_while(|&&b| is_space(b)).count();
                    pos += spaces;
                    // Outside calls, whitespace is bounded like the space
                    // after a marker.
                    let in_call = matches!(
                        self.state,
                        State::BeforeArg | State::BeforeEquals | State::AfterValue
                    );
                    if !in_call && ctx.pos(pos) - self.last.unwrap_or(0) > PENDING_LIMIT {
                        return Ok(self.not_a_call(pos, ctx));
                    }
                    continue;
                }
                State::Open if byte == b'[' => self.state = State::BeforeName { comma: false },
                State::BeforeName { .. } if is_name_start(byte) => {
                    self.name.clear();
                    self.name_start = ctx.pos(pos);
                    self.state = State::Name;
                    continue;
                }
                State::BeforeName { comma: true } if byte == b']' => self.end_list(pos, ctx),
                State::BeforeParen if byte == b'(' => {
                    ctx.begin(self.name_start);
                    ctx.name(&self.name);
                    self.args = 0;
                    self.state = State::BeforeArg;
                }
                State::BeforeArg if byte == b')' => {
                    self.end_call(pos + 1, ctx)?;
                }
                State::BeforeArg if is_name_start(byte) => {
                    self.name.clear();
                    self.state = State::ArgName;
                    continue;
                }
                State::BeforeEquals if byte == b'=' => {
                    let separator = if self.args == 0 { "{\"" } else { ", \"" };
                    ctx.args(separator)?;
                    ctx.args(&self.name)?;
                    ctx.args("\": ")?;
                    self.args += 1;
                    self.literal.reset();
                    self.value_start = ctx.pos(pos + 1);
                    self.state = State::Value;
                }
                State::BeforeArg | State::BeforeEquals => {
                    let message = "a positional argument: write each argument as `name=value`";
                    self.skip(ctx, message.into());
                    continue;
                }
                State::AfterValue if byte == b',' => self.state = State::BeforeArg,
                State::AfterValue if byte == b')' => self.end_call(pos + 1, ctx)?,
                State::AfterValue => {
                    self.skip(ctx, "expected `,` or `)` after an argument".into());
                    continue;
                }
                State::AfterCall if byte == b',' => self.state = State::BeforeName { comma: true },
                State::AfterCall if byte == b']' => self.end_list(pos, ctx),
                State::Tail(None) if byte == b'<' => {
                    self.state = State::Tail(Some(Expect::new(&[PYTHON_END])));
                    continue;
                }
                _ => return Ok(self.not_a_call(pos, ctx)),
            }
            pos += 1;
        }
        Ok(BlockStep::More)
    }

    /// The text ended inside the block; false when it held no call (its raw
    /// text is then text).
    pub(super) fn end(&mut self, ctx: &mut BlockContext<'_>) -> Result<bool, Error> {
        match self.state {
            State::BeforeArg
            | State::ArgName
            | State::BeforeEquals
            | State::Value
            | State::AfterValue => {
                ctx.fault(InvalidCallKind::Truncated, "the call is cut off");
                ctx.end(ctx.raw_end())?;
                Ok(true)
            }
            State::Skip(_) => ctx.end(ctx.raw_end()).map(|()| true),
            _ => match self.last {
                None => Ok(false),
                Some(last) => {
                    ctx.give_back(last);
                    Ok(true)
                }
            },
        }
    }

    /// The current call is faulty: the rest of it is skipped.
    fn skip(&mut self, ctx: &mut BlockContext<'_>, message: String) {
        ctx.fault(InvalidCallKind::MalformedArguments, message);
        self.state = State::Skip(Skip::default());
    }

    /// The current call's `)` ends before byte `end` of the piece.
    fn end_call(&mut self, end: usize, ctx: &mut BlockContext<'_>) -> Result<(), Error> {
        ctx.args(if self.args == 0 { "{}" } else { "}" })?;
        ctx.end(ctx.pos(end))?;
        self.last = Some(ctx.pos(end));
        self.state = State::AfterCall;
        Ok(())
    }

    /// The list's `]` is byte `at` of the piece.
    fn end_list(&mut self, at: usize, ctx: &BlockContext<'_>) {
        self.last = Some(ctx.pos(at + 1));
        self.state = State::Tail(None);
    }

    /// What was read from byte `at` of the piece on is not a call: see
    /// [`BlockContext::not_a_call`].
    fn not_a_call(&self, at: usize, ctx: &BlockContext<'_>) -> BlockStep {
        ctx.not_a_call(at, self.last)
    }
}

/// True when `byte` may start a Python name.
fn is_name_start(byte: u8) -> bool {
    byte.is_ascii_alphabetic() || byte == b'_'
}

/// True when `byte` may go on with a Python name.
fn is_name_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

//! Mistral's calls after `[TOOL_CALLS]`, in either of its tokenizers' forms:
//! the v0.3 list `[TOOL_CALLS][{"name": F, "arguments": {…}}, …]` (read by
//! [`CallList`]), or one call per marker, `[TOOL_CALLS]F[ARGS]{…}`, with the
//! call's id as `[TOOL_CALLS]F[CALL_ID]id[ARGS]{…}` in tokenizer v11. The first
//! byte after the marker decides: `[` a list, a name character a named call.
//! A named call's arguments end when their object closes; prose follows.

use super::call_list::CallList;
use super::calls::{BlockContext, BlockStep, Step};
use super::json_block::{close_arguments, with_args};
use crate::natural::markers::MISTRAL;
use crate::natural::scan::json::{Scanned, Verbatim};
use crate::natural::scan::marker::{MarkerMatch, Matched};
use crate::natural::scan::tag::name_byte;
use crate::natural::scan::{NAME_LIMIT, skip_space};
use crate::{Error, InvalidCallKind};

/// The control tokens after a call's name: its arguments, or its id first.
const TOKENS: [&str; 2] = [MISTRAL.args, MISTRAL.call_id];

/// What follows `[TOOL_CALLS]`.
#[derive(Debug, Default)]
pub(super) enum Mistral {
    /// Before the first byte after the marker and its whitespace.
    #[default]
    Start,
    /// The v0.3 list of calls.
    List(CallList),
    /// One call, named before its arguments.
    Named(NamedCall),
}

impl Mistral {
    pub(super) fn feed(&mut self, input: &str, ctx: &mut BlockContext<'_>) -> Step {
        match self {
            Mistral::List(list) => list.feed(input, ctx),
            Mistral::Named(call) => call.feed(input, 0, ctx),
            Mistral::Start => {
                let pos =
                    match ctx.skip_space(input.as_bytes(), 0, 0, |at| ctx.not_a_call(at, None)) {
                        Ok(pos) => pos,
                        Err(step) => return Ok(step),
                    };
                match input.as_bytes()[pos] {
                    b'[' => {
                        // The list reads from the whitespace on, as after any marker.
                        *self = Mistral::List(CallList::default());
                        self.feed(input, ctx)
                    }
                    byte if name_byte(byte) => {
                        let mut call = NamedCall::default();
                        let step = call.feed(input, pos, ctx);
                        *self = Mistral::Named(call);
                        step
                    }
                    _ => Ok(ctx.not_a_call(pos, None)),
                }
            }
        }
    }

    /// The text ended inside the block; false when no call had begun (what was
    /// read is then text).
    pub(super) fn end(&mut self, ctx: &mut BlockContext<'_>) -> Result<bool, Error> {
        match self {
            Mistral::Start => Ok(false),
            Mistral::List(list) => list.end(ctx),
            Mistral::Named(call) => call.end(ctx),
        }
    }
}

/// `F[ARGS]{…}` or `F[CALL_ID]id[ARGS]{…}`, after the marker.
#[derive(Debug, Default)]
pub(super) struct NamedCall {
    state: Named,
    name: String,
    id: String,
}

#[derive(Debug, Default)]
enum Named {
    /// The tool's name, up to a control token.
    #[default]
    Name,
    /// A control token after the name (or after the id), from its `[` at
    /// `start` in the block's raw text.
    Token {
        matcher: MarkerMatch,
        start: usize,
        after_id: bool,
    },
    /// The call's id, up to `[ARGS]`.
    Id,
    /// After `[ARGS]`, before the arguments' `{`.
    BeforeArgs,
    /// The arguments' object, passed on as it arrives.
    Args(Verbatim),
}

impl NamedCall {
    /// Reads from byte `pos` of the piece.
    fn feed(&mut self, input: &str, mut pos: usize, ctx: &mut BlockContext<'_>) -> Step {
        let bytes = input.as_bytes();
        while pos < bytes.len() {
            match &mut self.state {
                Named::Name | Named::Id => {
                    let after_id = matches!(self.state, Named::Id);
                    let field = if after_id {
                        &mut self.id
                    } else {
                        &mut self.name
                    };
                    let run = bytes[pos..].iter().take_while(|&&b| name_byte(b)).count();
                    if field.len() + run > NAME_LIMIT {
                        return Ok(ctx.not_a_call(pos + run, None));
                    }
                    field.push_str(&input[pos..pos + run]);
                    pos += run;
                    match bytes.get(pos) {
                        None => return Ok(BlockStep::More),
                        Some(b'[') => {
                            let mut matcher = MarkerMatch::default();
                            matcher.start("[");
                            self.state = Named::Token {
                                matcher,
                                start: ctx.pos(pos),
                                after_id,
                            };
                            pos += 1;
                        }
                        // A name without `[ARGS]`: it is text.
                        Some(_) => return Ok(ctx.not_a_call(pos, None)),
                    }
                }
                Named::Token {
                    matcher,
                    start,
                    after_id,
                } => {
                    let tokens = if *after_id { &TOKENS[..1] } else { &TOKENS };
                    match matcher.feed(&input[pos..], tokens) {
                        Matched::More => return Ok(BlockStep::More),
                        // Not a control token: the call so far is text, and the
                        // `[` is read again (it may start another marker).
                        Matched::Not { at } => {
                            return Ok(BlockStep::NotACall {
                                at: pos + at,
                                replay_from: *start,
                            });
                        }
                        Matched::Marker { index, end } => {
                            pos += end;
                            self.state = if index == 1 {
                                Named::Id
                            } else {
                                self.begin(ctx);
                                Named::BeforeArgs
                            };
                        }
                    }
                }
                Named::BeforeArgs => {
                    let Some(next) = skip_space(bytes, pos) else {
                        return Ok(BlockStep::More);
                    };
                    pos = next;
                    if bytes[pos] != b'{' {
                        // The call ends here; what follows is prose again.
                        ctx.fault(
                            InvalidCallKind::MalformedArguments,
                            "expected a JSON object after `[ARGS]`",
                        );
                        ctx.end(ctx.pos(pos))?;
                        return Ok(BlockStep::Done(pos));
                    }
                    self.state = Named::Args(Verbatim::default());
                }
                Named::Args(verbatim) => {
                    let step =
                        with_args(ctx, |sink| verbatim.feed(&input[pos..], &mut |p| sink(p)))?;
                    match step {
                        Scanned::More => return Ok(BlockStep::More),
                        Scanned::Done(used) => pos += used,
                        // A tag cut the arguments short: completed if one
                        // bracket is missing; the tag is prose.
                        Scanned::Stray(at) => {
                            pos += at;
                            close_arguments(verbatim.unclosed(), ctx)?;
                        }
                        Scanned::Invalid(at, message) => {
                            pos += at;
                            ctx.fault(InvalidCallKind::MalformedArguments, message);
                        }
                    }
                    ctx.end(ctx.pos(pos))?;
                    return Ok(BlockStep::Done(pos));
                }
            }
        }
        Ok(BlockStep::More)
    }

    /// `[ARGS]` came: the call begins, named.
    fn begin(&self, ctx: &mut BlockContext<'_>) {
        ctx.begin(0);
        if !self.id.is_empty() {
            ctx.written_id(&self.id);
        }
        ctx.name(&self.name);
    }

    /// The text ended inside the call; false before `[ARGS]` (the marker and
    /// the name are then text).
    fn end(&mut self, ctx: &mut BlockContext<'_>) -> Result<bool, Error> {
        match &self.state {
            Named::Name | Named::Id | Named::Token { .. } => return Ok(false),
            Named::BeforeArgs => ctx.fault(
                InvalidCallKind::Truncated,
                "the text ended before the arguments",
            ),
            Named::Args(verbatim) => close_arguments(verbatim.unclosed(), ctx)?,
        }
        ctx.end(ctx.raw_end())?;
        Ok(true)
    }
}

//! Llama 3.x JSON calls: `{"name": F, "parameters": {…}}` (or `"arguments"`)
//! at the start of a line or after `<|python_tag|>`, several separated by `;`
//! or whitespace.
//!
//! An object is a call once its `name` has a string value; until then it gives
//! nothing out, and one that ends (or breaks) before is text exactly as
//! written. After a call, whitespace and one `;` may lead to another object;
//! anything else ends the block, and what was read past the last call is read
//! again as prose.

use super::calls::{BlockContext, BlockStep, Step};
use super::json_block::{CallVisitor, Fields, close_json};
use crate::natural::scan::json::{Sax, Scanned};
use crate::{Error, InvalidCallKind};

/// A block of Llama JSON calls.
#[derive(Debug, Default)]
pub(super) struct LlamaJson {
    state: State,
    sax: Sax,
    fields: Fields,
    /// The block's raw offset of the current object's `{`.
    start: usize,
    /// The block's raw offset of the end of its last call, once there is one.
    last: Option<usize>,
}

#[derive(Debug, Default, Clone, Copy)]
enum State {
    /// Whitespace, then `{`.
    #[default]
    Start,
    Object,
    /// After a call: whitespace and at most one `;`, then another object.
    Between {
        semicolon: bool,
    },
}

impl LlamaJson {
    pub(super) fn feed(&mut self, input: &str, ctx: &mut BlockContext<'_>) -> Step {
        let bytes = input.as_bytes();
        let mut pos = 0;
        while pos < bytes.len() {
            match self.state {
                State::Start | State::Between { .. } => {
                    let since = self.last.unwrap_or(0);
                    pos = match ctx.skip_space(bytes, pos, since, |at| self.not_a_call(at, ctx)) {
                        Ok(pos) => pos,
                        Err(step) => return Ok(step),
                    };
                    match (self.state, bytes[pos]) {
                        (State::Between { semicolon: false }, b';') => {
                            self.state = State::Between { semicolon: true };
                            pos += 1;
                        }
                        (_, b'{') => {
                            self.start = ctx.pos(pos);
                            ctx.begin(self.start);
                            self.sax.reset();
                            self.fields.reset();
                            self.state = State::Object;
                        }
                        _ => return Ok(self.not_a_call(pos, ctx)),
                    }
                }
                State::Object => {
                    let sax = &mut self.sax;
                    let step = CallVisitor::run(&mut self.fields, ctx, false, self.start, |v| {
                        sax.feed(&input[pos..], v)
                    })?;
                    let at = match step {
                        Scanned::More => return Ok(BlockStep::More),
                        Scanned::Invalid(used, _) if !ctx.named() && self.last.is_none() => {
                            // Where the scanner notices bad JSON depends on the
                            // cuts: all after the `{` is read again as prose.
                            ctx.abandon_call();
                            return Ok(BlockStep::NotACall {
                                at: pos + used,
                                replay_from: self.start + 1,
                            });
                        }
                        Scanned::Done(used) | Scanned::Stray(used) | Scanned::Invalid(used, _)
                            if !ctx.named() =>
                        {
                            ctx.abandon_call();
                            return Ok(self.not_a_call(pos + used, ctx));
                        }
                        Scanned::Done(used) => pos + used,
                        Scanned::Stray(used) => {
                            close_json(&mut self.sax, &mut self.fields, ctx)?;
                            pos + used
                        }
                        Scanned::Invalid(used, message) => {
                            let message = format!("the call is not valid JSON: {message}");
                            ctx.fault(InvalidCallKind::MalformedArguments, message);
                            ctx.end(ctx.pos(pos + used))?;
                            return Ok(BlockStep::Done(pos + used));
                        }
                    };
                    pos = at;
                    ctx.end(ctx.pos(pos))?;
                    self.last = Some(ctx.pos(pos));
                    self.state = State::Between { semicolon: false };
                }
            }
        }
        Ok(BlockStep::More)
    }

    /// The text ended inside the block; false when it held no call (its raw
    /// text is then text).
    pub(super) fn end(&mut self, ctx: &mut BlockContext<'_>) -> Result<bool, Error> {
        if let State::Object = self.state {
            if ctx.named() {
                close_json(&mut self.sax, &mut self.fields, ctx)?;
                ctx.end(ctx.raw_end())?;
                return Ok(true);
            }
            ctx.abandon_call();
        }
        match self.last {
            None => Ok(false),
            Some(last) => {
                ctx.give_back(last);
                Ok(true)
            }
        }
    }

    /// What was read from byte `at` of the piece on is not a call: see
    /// [`BlockContext::not_a_call`].
    fn not_a_call(&self, at: usize, ctx: &BlockContext<'_>) -> BlockStep {
        ctx.not_a_call(at, self.last)
    }
}

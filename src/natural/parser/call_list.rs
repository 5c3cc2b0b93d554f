//! A JSON array of calls after a family's marker: Granite's
//! `<|tool_call|>[{"name": F, "arguments": {…}}, …]`, Mistral v0.3's
//! `[TOOL_CALLS][…]`. Each element streams as its own call; the block ends with
//! the array.

use super::calls::{BlockContext, BlockStep, Step};
use super::json_block::{CallVisitor, Fields};
use crate::natural::scan::json::{Sax, Scanned};
use crate::{Error, InvalidCallKind};

/// The array of calls after a marker.
#[derive(Debug, Default)]
pub(super) struct CallList {
    sax: Sax,
    fields: Fields,
    /// The block's raw offset of the `[`, once read.
    start: Option<usize>,
}

impl CallList {
    pub(super) fn feed(&mut self, input: &str, ctx: &mut BlockContext<'_>) -> Step {
        let bytes = input.as_bytes();
        let mut pos = 0;
        let start = match self.start {
            Some(start) => start,
            None => {
                pos = match ctx.skip_space(bytes, 0, 0, |at| ctx.not_a_call(at, None)) {
                    Ok(pos) => pos,
                    Err(step) => return Ok(step),
                };
                if bytes[pos] != b'[' {
                    return Ok(ctx.not_a_call(pos, None));
                }
                *self.start.insert(ctx.pos(pos))
            }
        };
        let sax = &mut self.sax;
        let step = CallVisitor::run(&mut self.fields, ctx, true, start, |visitor| {
            sax.feed(&input[pos..], visitor)
        })?;
        match step {
            Scanned::More => Ok(BlockStep::More),
            // A list that held no call (`[]`, `[1, 2]`) is text.
            Scanned::Done(used) if self.fields.begun == 0 => Ok(ctx.not_a_call(pos + used, None)),
            Scanned::Done(used) => Ok(BlockStep::Done(pos + used)),
            Scanned::Stray(at) | Scanned::Invalid(at, _) if self.fields.begun == 0 => {
                // Not a list of calls: the marker and the list so far are text.
                Ok(ctx.not_a_call(pos + at, None))
            }
            Scanned::Stray(at) | Scanned::Invalid(at, _) if !ctx.in_call() => {
                // Broken between calls: the calls before it stand, the rest is
                // text again.
                Ok(BlockStep::Done(pos + at))
            }
            Scanned::Stray(at) | Scanned::Invalid(at, _) => {
                ctx.fault(
                    InvalidCallKind::MalformedArguments,
                    "the list of calls is not valid JSON",
                );
                ctx.end(ctx.pos(pos + at))?;
                Ok(BlockStep::Done(pos + at))
            }
        }
    }

    /// The text ended inside the block; false when no call had begun (the
    /// marker and the list so far are then text).
    pub(super) fn end(&mut self, ctx: &mut BlockContext<'_>) -> Result<bool, Error> {
        let Some(start) = self.start.filter(|_| self.fields.begun > 0) else {
            return Ok(false);
        };
        // The list's `]` and one `}` may be missing.
        let sax = &mut self.sax;
        let closed = CallVisitor::run(&mut self.fields, ctx, true, start, |visitor| {
            sax.close(2, visitor)
        })?;
        if let Err(why) = closed {
            ctx.fault(
                InvalidCallKind::Truncated,
                format!("the call is cut off: {why}"),
            );
        }
        ctx.end(ctx.raw_end())?;
        Ok(true)
    }
}

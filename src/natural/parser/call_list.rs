//! A JSON array of calls after a family's marker: Granite's
//! `<|tool_call|>[{"name": F, "arguments": {…}}, …]`, Mistral v0.3's
//! `[TOOL_CALLS][…]`. Each element streams as its own call; the block ends with
//! the array.

use super::calls::{BlockContext, BlockStep, PENDING_LIMIT};
use super::json_block::{CallVisitor, Fields};
use crate::natural::scan::is_space;
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
    pub(super) fn feed(
        &mut self,
        input: &str,
        ctx: &mut BlockContext<'_>,
    ) -> Result<BlockStep, Error> {
        let bytes = input.as_bytes();
        let mut pos = 0;
        let start = match self.start {
            Some(start) => start,
            None => {
                pos = match skip_space(bytes, ctx) {
                    Ok(pos) => pos,
                    Err(step) => return Ok(step),
                };
                if bytes[pos] != b'[' {
                    return Ok(ctx.not_a_call(pos, None));
                }
                *self.start.insert(ctx.pos(pos))
            }
        };
        let mut visitor = CallVisitor {
            fields: &mut self.fields,
            ctx,
            list: true,
            base: start,
            failed: None,
        };
        let step = self.sax.feed(&input[pos..], &mut visitor);
        if let Some(error) = visitor.failed {
            return Err(error);
        }
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
        let mut visitor = CallVisitor {
            fields: &mut self.fields,
            ctx,
            list: true,
            base: start,
            failed: None,
        };
        // The list's `]` and one `}` may be missing.
        let closed = self.sax.close(2, &mut visitor);
        if let Some(error) = visitor.failed {
            return Err(error);
        }
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

/// The first byte after the whitespace that follows a marker, or the step to
/// answer while there is none: more, or not a call once the whitespace passes
/// [`PENDING_LIMIT`].
pub(super) fn skip_space(bytes: &[u8], ctx: &BlockContext<'_>) -> Result<usize, BlockStep> {
    match bytes.iter().position(|&b| !is_space(b)) {
        Some(offset) => Ok(offset),
        None if ctx.pos(bytes.len()) > PENDING_LIMIT => Err(ctx.not_a_call(bytes.len(), None)),
        None => Err(BlockStep::More),
    }
}

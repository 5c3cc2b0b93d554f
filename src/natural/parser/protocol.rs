//! The JSON protocol dialect: a reply that is (or holds) an object
//! `{"type": "tool_use", "tool_uses": [{"name": F, "params": {…}}]}` or
//! `{"type": "text", "text": "…"}`, bare or in a ```` ```json ```` fence.
//!
//! Any `{` in the prose, or a code fence whose body starts with `{`, is a
//! candidate. While its `type` is not known, its output is held back; once
//! `type` says `tool_use` or `text`, the held output goes out and the rest
//! streams. A candidate that ends without such a `type`, or is not JSON, is text
//! as it was written. (Models write `type` first; when they do not, the object is
//! handed out when it ends.)

use crate::text::floor_char_boundary;
use memchr::memchr;

use super::calls::{BlockContext, BlockStep, Step};
use crate::natural::scan::is_space;
use crate::natural::scan::json::{Path, Sax, Scanned, Visit, Visitor};
use crate::{Error, InvalidCallKind};

/// The longest fence info line (` ```json `).
const INFO_LIMIT: usize = 64;

/// A JSON-protocol candidate.
#[derive(Debug)]
pub(super) struct Protocol {
    state: State,
    sax: Sax,
    fields: Fields,
    fenced: bool,
    /// Where the object starts in the block's raw text.
    object_start: usize,
}

#[derive(Debug)]
enum State {
    /// Counting the opening fence's backticks.
    FenceOpen {
        ticks: usize,
    },
    /// The rest of the fence's first line.
    FenceInfo {
        length: usize,
    },
    /// Between the fence line and the object.
    BeforeObject,
    Object,
    /// After a fenced object: whitespace, then the closing backticks.
    FenceClose {
        ticks: usize,
    },
}

#[derive(Debug, Default)]
struct Fields {
    /// The decoded `type`, once complete.
    kind: Option<String>,
    decoding: Option<Field>,
    partial: String,
    confirmed: bool,
    /// A call began or text came out of this object.
    produced: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Kind,
    Text,
    Name,
    Params,
}

impl Protocol {
    /// A candidate starting at a `{`.
    pub(super) fn bare() -> Self {
        Self::with(State::Object, false)
    }

    /// A candidate starting at a code fence's first backtick.
    pub(super) fn fenced() -> Self {
        Self::with(State::FenceOpen { ticks: 0 }, true)
    }

    fn with(state: State, fenced: bool) -> Self {
        Protocol {
            state,
            sax: Sax::default(),
            fields: Fields::default(),
            fenced,
            object_start: 0,
        }
    }

    pub(super) fn feed(&mut self, input: &str, ctx: &mut BlockContext<'_>) -> Step {
        let bytes = input.as_bytes();
        let mut pos = 0;
        while pos < bytes.len() {
            match &mut self.state {
                State::FenceOpen { ticks } => {
                    let run = bytes[pos..].iter().take_while(|&&b| b == b'`').count();
                    *ticks += run;
                    pos += run;
                    if pos == bytes.len() {
                        return Ok(BlockStep::More);
                    }
                    if *ticks < 3 {
                        return Ok(self.reject(pos, ctx));
                    }
                    self.state = State::FenceInfo { length: 0 };
                }
                State::FenceInfo { length } => {
                    let line_end = memchr(b'\n', &bytes[pos..]);
                    let taken = line_end.unwrap_or(bytes.len() - pos);
                    // The info line ends at a backtick or past its limit: not a
                    // fence. The cut falls on the same byte however the text
                    // arrived.
                    let room = INFO_LIMIT.saturating_sub(*length);
                    let backtick = memchr(b'`', &bytes[pos..pos + taken]);
                    if let Some(bad) = backtick
                        .filter(|&b| b <= room)
                        .or((taken > room).then_some(room))
                    {
                        let at = floor_char_boundary(input, pos + bad);
                        return Ok(self.reject(at, ctx));
                    }
                    *length += taken;
                    pos += taken;
                    if line_end.is_some() {
                        pos += 1;
                        self.state = State::BeforeObject;
                    }
                }
                State::BeforeObject => {
                    let spaces = bytes[pos..].iter().take_while(|&&b| is_space(b)).count();
                    pos += spaces;
                    if pos == bytes.len() {
                        return Ok(BlockStep::More);
                    }
                    if bytes[pos] != b'{' {
                        return Ok(self.reject(pos, ctx));
                    }
                    self.object_start = ctx.pos(pos);
                    self.state = State::Object;
                }
                State::Object => {
                    let mut visitor = ProtocolVisitor {
                        fields: &mut self.fields,
                        ctx,
                        base: self.object_start,
                        failed: None,
                    };
                    let step = self.sax.feed(&input[pos..], &mut visitor);
                    if let Some(error) = visitor.failed {
                        return Err(error);
                    }
                    match step {
                        Scanned::More => return Ok(BlockStep::More),
                        Scanned::Done(used) => {
                            pos += used;
                            if !self.fields.confirmed {
                                return Ok(self.reject(pos, ctx));
                            }
                            if !self.fenced {
                                return Ok(BlockStep::Done(pos));
                            }
                            self.state = State::FenceClose { ticks: 0 };
                        }
                        Scanned::Stray(at) | Scanned::Invalid(at, _) if !self.fields.confirmed => {
                            return Ok(self.reject(pos + at, ctx));
                        }
                        Scanned::Stray(at) | Scanned::Invalid(at, _) => {
                            // A confirmed object that breaks off: end it here.
                            pos += at;
                            ctx.fault(
                                InvalidCallKind::MalformedArguments,
                                "the protocol object is not valid JSON",
                            );
                            ctx.end(ctx.pos(pos))?;
                            return Ok(BlockStep::Done(pos));
                        }
                    }
                }
                State::FenceClose { ticks } => {
                    if *ticks == 0 {
                        let spaces = bytes[pos..].iter().take_while(|&&b| is_space(b)).count();
                        pos += spaces;
                        if pos == bytes.len() {
                            return Ok(BlockStep::More);
                        }
                    }
                    let run = bytes[pos..].iter().take_while(|&&b| b == b'`').count();
                    *ticks += run;
                    pos += run;
                    if pos == bytes.len() && *ticks < 3 {
                        return Ok(BlockStep::More);
                    }
                    return Ok(BlockStep::Done(pos));
                }
            }
        }
        Ok(BlockStep::More)
    }

    /// The text ended inside the candidate; false when it was not a protocol
    /// object (its raw text is then text).
    pub(super) fn end(&mut self, ctx: &mut BlockContext<'_>) -> Result<bool, Error> {
        if let State::Object = self.state {
            let mut visitor = ProtocolVisitor {
                fields: &mut self.fields,
                ctx,
                base: self.object_start,
                failed: None,
            };
            let closed = self.sax.close(1, &mut visitor);
            if let Some(error) = visitor.failed {
                return Err(error);
            }
            if closed.is_err() && !self.fields.produced {
                // Cut off before it said anything: it stays text.
                self.fields.confirmed = false;
            } else if closed.is_err() {
                ctx.fault(InvalidCallKind::Truncated, "the protocol object is cut off");
                ctx.end(ctx.raw_end())?;
            }
        }
        let accepted = self.fields.confirmed;
        if accepted {
            ctx.emit.release(ctx.out);
        } else {
            ctx.emit.discard();
            ctx.abandon_call();
        }
        Ok(accepted)
    }

    /// Not a protocol object: everything held back is dropped and the raw text
    /// up to byte `at` is text.
    fn reject(&mut self, at: usize, ctx: &mut BlockContext<'_>) -> BlockStep {
        ctx.emit.discard();
        ctx.abandon_call();
        BlockStep::NotACall {
            at,
            replay_from: ctx.pos(at),
        }
    }
}

struct ProtocolVisitor<'a, 'b> {
    fields: &'a mut Fields,
    ctx: &'a mut BlockContext<'b>,
    /// The block's raw offset of the object's byte 0.
    base: usize,
    failed: Option<Error>,
}

impl ProtocolVisitor<'_, '_> {
    fn field(&self, path: Path<'_>) -> Option<Field> {
        match (path.depth(), path.key(1), path.key(3)) {
            (1, Some("type"), _) => Some(Field::Kind),
            (1, Some("text"), _) => Some(Field::Text),
            (3, Some("tool_uses"), Some("name")) => Some(Field::Name),
            (3, Some("tool_uses"), Some("params" | "parameters" | "arguments" | "input")) => {
                Some(Field::Params)
            }
            _ => None,
        }
    }

    fn confirm(&mut self) {
        if !self.fields.confirmed
            && matches!(self.fields.kind.as_deref(), Some("tool_use" | "text"))
        {
            self.fields.confirmed = true;
            self.ctx.emit.release(self.ctx.out);
        }
    }
}

impl Visitor for ProtocolVisitor<'_, '_> {
    fn value(&mut self, path: Path<'_>, first: u8, at: usize) -> Visit {
        let call_item = path.depth() == 2 && path.key(1) == Some("tool_uses");
        if path.depth() == 0 || (path.depth() == 1 && path.key(1) == Some("tool_uses")) || call_item
        {
            if call_item && first == b'{' {
                self.fields.produced = true;
                self.ctx.begin(self.base + at);
            }
            return Visit::Descend;
        }
        let field = self.field(path);
        self.fields.decoding = field;
        self.fields.partial.clear();
        match field {
            Some(Field::Kind | Field::Name) if first == b'"' => Visit::Decode,
            Some(Field::Text) if first == b'"' => Visit::Decode,
            Some(Field::Params) => Visit::Decode,
            _ => {
                self.fields.decoding = None;
                Visit::Skip
            }
        }
    }

    fn captured(&mut self, piece: &str) {
        self.decoded(piece);
    }

    fn decoded(&mut self, piece: &str) {
        match self.fields.decoding {
            Some(Field::Kind | Field::Name) if self.fields.partial.len() < 1024 => {
                self.fields.partial.push_str(piece)
            }
            Some(Field::Text) => {
                self.fields.produced = true;
                self.ctx.text(piece);
            }
            Some(Field::Params) if self.failed.is_none() => {
                if let Err(error) = self.ctx.args(piece) {
                    self.failed = Some(error);
                }
            }
            _ => {}
        }
    }

    fn ended(&mut self, path: Path<'_>, at: usize) {
        match self.fields.decoding.take() {
            Some(Field::Kind) => {
                self.fields.kind = Some(std::mem::take(&mut self.fields.partial));
                self.confirm();
            }
            Some(Field::Name) => {
                let name = std::mem::take(&mut self.fields.partial);
                self.ctx.name(&name);
            }
            Some(_) => {}
            None if path.depth() == 2 && path.key(1) == Some("tool_uses") => {
                if let Err(error) = self.ctx.end(self.base + at) {
                    self.failed.get_or_insert(error);
                }
            }
            None => {}
        }
    }
}

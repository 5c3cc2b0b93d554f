//! Blocks whose arguments are JSON: the tagged form `<tool_call name="F">{…}`
//! (bare or fenced), whose reader also reads the arguments of the families'
//! special-token calls up to their end marker, and the Hermes form
//! `<tool_call>{"name": F, "arguments": …}`.

use memchr::memchr;

use super::calls::{BlockContext, BlockStep, Step};
use crate::natural::markers::TAGGED;
use crate::natural::scan::json::{Path, Sax, Scanned, Verbatim, Visit, Visitor};
use crate::natural::scan::marker::{Found, MarkerFinder};
use crate::natural::scan::skip_space;
use crate::{Error, InvalidCallKind};

/// What ends a tagged or Hermes block.
const CLOSE: Ends = Ends::own(&[TAGGED.call_close]);

/// The markers that end a block's arguments: its own closing markers first,
/// then markers that start what follows (Harmony's next header), which end the
/// block and are read again as prose.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ends {
    markers: &'static [&'static str],
    /// How many of `markers`, from the first, are the block's own.
    own: usize,
}

impl Ends {
    /// Closing markers, all the block's own.
    pub(super) const fn own(markers: &'static [&'static str]) -> Self {
        Ends {
            markers,
            own: markers.len(),
        }
    }

    /// The first `own` of `markers` close the block; the others start what
    /// follows it.
    pub(super) const fn then(markers: &'static [&'static str], own: usize) -> Self {
        Ends { markers, own }
    }

    /// The step after marker `index`, which ends at byte `end` of the piece:
    /// the block is done with it, or ends before it (the call's markup ends
    /// there too) and it is read again.
    fn step(self, index: usize, end: usize, ctx: &mut BlockContext<'_>) -> Step {
        if index < self.own {
            ctx.end(ctx.pos(end))?;
            return Ok(BlockStep::Done(end));
        }
        let start = ctx.pos(end) - self.markers[index].len();
        ctx.end(start)?;
        Ok(BlockStep::Ended {
            at: end,
            replay_from: start,
        })
    }
}

/// Matches one of a few expected literals, byte by byte, across pieces.
#[derive(Debug)]
pub(super) struct Expect {
    literals: &'static [&'static str],
    /// A literal whose first `matched` bytes were read; every literal still
    /// possible shares them.
    index: usize,
    matched: usize,
}

pub(super) enum Expected {
    More,
    Done(usize),
    /// The byte at this offset does not match.
    Mismatch(usize),
}

impl Expect {
    pub(super) fn new(literals: &'static [&'static str]) -> Self {
        Expect {
            literals,
            index: 0,
            matched: 0,
        }
    }

    /// The literal matched so far (the one matched, after [`Expected::Done`]).
    pub(super) fn literal(&self) -> usize {
        self.index
    }

    pub(super) fn feed(&mut self, input: &str) -> Expected {
        let have = input.as_bytes();
        let mut pos = 0;
        loop {
            let literal = self.literals[self.index].as_bytes();
            let want = &literal[self.matched..];
            let rest = &have[pos..];
            let n = want.len().min(rest.len());
            let same = (0..n).find(|&i| want[i] != rest[i]).unwrap_or(n);
            self.matched += same;
            pos += same;
            if self.matched == literal.len() {
                return Expected::Done(pos);
            }
            let Some(&next) = have.get(pos) else {
                return Expected::More;
            };
            // Another literal may go on where this one broke off.
            let read = &literal[..self.matched];
            match self.literals.iter().position(|other| {
                let other = other.as_bytes();
                other.starts_with(read) && other.get(read.len()) == Some(&next)
            }) {
                Some(index) => self.index = index,
                None => return Expected::Mismatch(pos),
            }
        }
    }
}

/// Runs `scan` with a sink that passes argument text to the call, then reports
/// the first error the call raised (an arguments limit).
pub(super) fn with_args<T>(
    ctx: &mut BlockContext<'_>,
    scan: impl FnOnce(&mut dyn FnMut(&str)) -> T,
) -> Result<T, Error> {
    let mut failed = None;
    let result = scan(&mut |piece: &str| {
        if failed.is_none()
            && let Err(error) = ctx.args(piece)
        {
            failed = Some(error);
        }
    });
    failed.map_or(Ok(result), Err)
}

/// Completes arguments cut short by at most one missing bracket, else marks the
/// call truncated.
pub(super) fn close_arguments(
    closers: Result<Vec<u8>, &'static str>,
    ctx: &mut BlockContext<'_>,
) -> Result<(), Error> {
    match closers {
        Ok(closers) if closers.len() <= 1 => {
            ctx.args(std::str::from_utf8(&closers).expect("closers are ASCII"))
        }
        Ok(closers) => {
            let message = format!(
                "the arguments are cut off: {} closing brackets are missing",
                closers.len()
            );
            ctx.fault(InvalidCallKind::Truncated, message);
            Ok(())
        }
        Err(why) => {
            ctx.fault(
                InvalidCallKind::Truncated,
                format!("the arguments are cut off: {why}"),
            );
            Ok(())
        }
    }
}

/// After the JSON: optional whitespace, then one of the block's closing markers
/// (`</tool_call>`); anything else is a fault, and the block runs to the next
/// closing marker.
#[derive(Debug)]
enum Tail {
    Space,
    Close(Expect),
    Junk(MarkerFinder),
}

impl Tail {
    fn junk(ctx: &mut BlockContext<'_>, message: &str, ends: Ends) -> Tail {
        ctx.fault(InvalidCallKind::MalformedArguments, message);
        Tail::Junk(MarkerFinder::new(ends.markers.iter().copied()))
    }

    /// Reads the tail from byte `pos` of the piece, up to one of `ends`;
    /// `Done` (or `Ended`) when the block closed.
    fn feed(
        &mut self,
        input: &str,
        mut pos: usize,
        ctx: &mut BlockContext<'_>,
        ends: Ends,
        on_close: &mut dyn FnMut(&mut BlockContext<'_>) -> Result<(), Error>,
    ) -> Step {
        let bytes = input.as_bytes();
        while pos < bytes.len() {
            match self {
                Tail::Space => match skip_space(bytes, pos) {
                    None => pos = bytes.len(),
                    Some(next) => {
                        pos = next;
                        *self = if bytes[pos] == b'<' {
                            Tail::Close(Expect::new(ends.markers))
                        } else {
                            Tail::junk(ctx, "unexpected text after the arguments", ends)
                        };
                    }
                },
                Tail::Close(expect) => match expect.feed(&input[pos..]) {
                    Expected::More => pos = bytes.len(),
                    Expected::Done(used) => {
                        on_close(ctx)?;
                        return ends.step(expect.literal(), pos + used, ctx);
                    }
                    Expected::Mismatch(at) => {
                        pos += at;
                        let message = format!("expected `{}`", ends.markers[0]);
                        *self = Tail::junk(ctx, &message, ends);
                    }
                },
                Tail::Junk(finder) => match finder.find(&input[pos..], &mut |_| {}) {
                    Found::More => pos = bytes.len(),
                    Found::Marker { index, end } => return ends.step(index, pos + end, ctx),
                },
            }
        }
        Ok(BlockStep::More)
    }
}

/// `<tool_call name="F">` followed by JSON arguments, bare or in a fence, then
/// `</tool_call>` (or another family's closing markers).
#[derive(Debug)]
pub(super) struct Tagged {
    state: TaggedState,
    fenced: bool,
    /// The markers that close the block.
    ends: Ends,
}

#[derive(Debug)]
enum TaggedState {
    /// Before the body: a fence, JSON, or a closing marker.
    Start,
    /// Counting the backticks of a fence.
    Fence {
        ticks: usize,
        closing: bool,
    },
    /// The rest of the fence's first line (` ```json`).
    FenceInfo,
    /// After the fence line, before the JSON.
    BeforeJson,
    Json(Verbatim),
    /// After the JSON: a closing fence, whitespace, a closing marker.
    After(Tail),
    /// A closing marker came before the JSON closed.
    Cut(Verbatim, Tail),
}

impl Tagged {
    /// The arguments of `<tool_call name="F">`, closed by `</tool_call>`.
    pub(super) fn new() -> Self {
        Tagged::ended_by(CLOSE)
    }

    /// JSON arguments closed by one of `closes`.
    pub(super) fn closed_by(closes: &'static [&'static str]) -> Self {
        Tagged::ended_by(Ends::own(closes))
    }

    /// JSON arguments ended by one of `ends`.
    pub(super) fn ended_by(ends: Ends) -> Self {
        Tagged {
            state: TaggedState::Start,
            fenced: false,
            ends,
        }
    }

    pub(super) fn feed(&mut self, input: &str, ctx: &mut BlockContext<'_>) -> Step {
        let bytes = input.as_bytes();
        let mut pos = 0;
        while pos < bytes.len() {
            match &mut self.state {
                TaggedState::Start | TaggedState::BeforeJson => {
                    let Some(next) = skip_space(bytes, pos) else {
                        return Ok(BlockStep::More);
                    };
                    pos = next;
                    let start = matches!(self.state, TaggedState::Start);
                    self.state = match bytes[pos] {
                        b'{' | b'[' => TaggedState::Json(Verbatim::default()),
                        b'`' if start => TaggedState::Fence {
                            ticks: 0,
                            closing: false,
                        },
                        b'<' if start => {
                            TaggedState::After(Tail::Close(Expect::new(self.ends.markers)))
                        }
                        _ => TaggedState::After(Tail::junk(
                            ctx,
                            "expected JSON arguments",
                            self.ends,
                        )),
                    };
                }
                TaggedState::Fence { ticks, closing } => {
                    let run = bytes[pos..].iter().take_while(|&&b| b == b'`').count();
                    *ticks += run;
                    pos += run;
                    if pos == bytes.len() {
                        return Ok(BlockStep::More);
                    }
                    self.state = match (*ticks >= 3, *closing) {
                        (true, false) => {
                            self.fenced = true;
                            TaggedState::FenceInfo
                        }
                        (true, true) => {
                            self.fenced = false;
                            TaggedState::After(Tail::Space)
                        }
                        (false, _) => {
                            TaggedState::After(Tail::junk(ctx, "a broken code fence", self.ends))
                        }
                    };
                }
                TaggedState::FenceInfo => match memchr(b'\n', &bytes[pos..]) {
                    None => return Ok(BlockStep::More),
                    Some(offset) => {
                        pos += offset + 1;
                        self.state = TaggedState::BeforeJson;
                    }
                },
                TaggedState::Json(verbatim) => {
                    match with_args(ctx, |sink| verbatim.feed(&input[pos..], &mut |p| sink(p)))? {
                        Scanned::More => return Ok(BlockStep::More),
                        Scanned::Done(used) => {
                            pos += used;
                            self.state = TaggedState::After(Tail::Space);
                        }
                        Scanned::Stray(at) => {
                            pos += at;
                            let verbatim = std::mem::take(verbatim);
                            self.state = TaggedState::Cut(
                                verbatim,
                                Tail::Close(Expect::new(self.ends.markers)),
                            );
                        }
                        Scanned::Invalid(_, message) => {
                            self.state = TaggedState::After(Tail::junk(ctx, &message, self.ends));
                        }
                    }
                }
                TaggedState::After(tail) => {
                    if self.fenced && matches!(tail, Tail::Space) {
                        match skip_space(bytes, pos) {
                            None => return Ok(BlockStep::More),
                            Some(next) if bytes[next] == b'`' => {
                                pos = next;
                                self.state = TaggedState::Fence {
                                    ticks: 0,
                                    closing: true,
                                };
                                continue;
                            }
                            Some(_) => {}
                        }
                    }
                    return tail.feed(input, pos, ctx, self.ends, &mut |_| Ok(()));
                }
                TaggedState::Cut(verbatim, tail) => {
                    let closers = verbatim.unclosed();
                    let mut repair =
                        |ctx: &mut BlockContext<'_>| close_arguments(closers.clone(), ctx);
                    return tail.feed(input, pos, ctx, self.ends, &mut repair);
                }
            }
        }
        Ok(BlockStep::More)
    }

    /// The text ended inside the block.
    pub(super) fn end(&mut self, ctx: &mut BlockContext<'_>) -> Result<(), Error> {
        match &self.state {
            TaggedState::Start
            | TaggedState::Fence { closing: false, .. }
            | TaggedState::FenceInfo
            | TaggedState::BeforeJson => {
                ctx.fault(
                    InvalidCallKind::Truncated,
                    "the text ended before the arguments",
                );
            }
            TaggedState::Json(verbatim) | TaggedState::Cut(verbatim, _) => {
                close_arguments(verbatim.unclosed(), ctx)?
            }
            TaggedState::Fence { closing: true, .. } | TaggedState::After(_) => {}
        }
        ctx.end(ctx.raw_end())
    }
}

/// `<tool_call>{"name": F, "arguments": {…}}</tool_call>`, in any key order,
/// with `parameters` for `arguments`, and arguments given as a JSON-encoded
/// string decoded once.
#[derive(Debug, Default)]
pub(super) struct Hermes {
    sax: Sax,
    fields: Fields,
    tail: Option<Tail>,
}

/// The fields of the call object being read.
#[derive(Debug, Default)]
pub(super) struct Fields {
    current: Field,
    /// Calls begun, in a list.
    pub(super) begun: usize,
    name: String,
    id: String,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Field {
    #[default]
    Other,
    Name,
    Id,
    Arguments,
}

/// Reads call objects `{"name": F, "id": …, "arguments": {…}}` with a JSON
/// scanner: one object at the root (Hermes), or each object of a root array
/// (a list of calls, [`CallList`](super::call_list::CallList)), each then begun
/// and ended as a call.
pub(super) struct CallVisitor<'a, 'b> {
    fields: &'a mut Fields,
    ctx: &'a mut BlockContext<'b>,
    /// Calls are the elements of a root array.
    list: bool,
    /// The block's raw offset of the scanned text's byte 0.
    base: usize,
    failed: Option<Error>,
}

impl<'a, 'b> CallVisitor<'a, 'b> {
    /// Runs `scan` with a visitor that reads calls into `fields` (the elements
    /// of a root array when `list`), the scanned text starting at the block's
    /// raw offset `base`; the visitor's failure wins over what `scan` gives.
    pub(super) fn run<T>(
        fields: &'a mut Fields,
        ctx: &'a mut BlockContext<'b>,
        list: bool,
        base: usize,
        scan: impl FnOnce(&mut Self) -> T,
    ) -> Result<T, Error> {
        let mut visitor = CallVisitor {
            fields,
            ctx,
            list,
            base,
            failed: None,
        };
        let scanned = scan(&mut visitor);
        visitor.failed.map_or(Ok(scanned), Err)
    }

    /// The depth of a call's fields.
    fn field_depth(&self) -> usize {
        usize::from(self.list) + 1
    }
}

impl Visitor for CallVisitor<'_, '_> {
    fn value(&mut self, path: Path<'_>, first: u8, at: usize) -> Visit {
        self.fields.current = Field::Other;
        let depth = self.field_depth();
        match path.depth() {
            0 if self.list && first != b'[' => Visit::Skip,
            0 => Visit::Descend,
            1 if self.list && first == b'{' => {
                self.fields.begun += 1;
                self.ctx.begin(self.base + at);
                Visit::Descend
            }
            d if d == depth => match path.key(depth) {
                Some("name") if first == b'"' => {
                    self.fields.current = Field::Name;
                    Visit::Decode
                }
                Some("id") if first == b'"' => {
                    self.fields.current = Field::Id;
                    Visit::Decode
                }
                Some("arguments" | "parameters") => {
                    self.fields.current = Field::Arguments;
                    Visit::Decode
                }
                _ => Visit::Skip,
            },
            _ => Visit::Skip,
        }
    }

    fn captured(&mut self, piece: &str) {
        self.decoded(piece);
    }

    fn decoded(&mut self, piece: &str) {
        match self.fields.current {
            Field::Name if self.fields.name.len() < 1024 => self.fields.name.push_str(piece),
            Field::Id if self.fields.id.len() < 1024 => self.fields.id.push_str(piece),
            Field::Arguments if self.failed.is_none() => {
                if let Err(error) = self.ctx.args(piece) {
                    self.failed = Some(error);
                }
            }
            _ => {}
        }
    }

    fn ended(&mut self, path: Path<'_>, at: usize) {
        match self.fields.current {
            Field::Name => self.ctx.name(&self.fields.name),
            Field::Id => self.ctx.written_id(&self.fields.id),
            _ if self.list && path.depth() == 1 => {
                self.fields.name.clear();
                self.fields.id.clear();
                if let Err(error) = self.ctx.end(self.base + at) {
                    self.failed.get_or_insert(error);
                }
            }
            _ => {}
        }
        self.fields.current = Field::Other;
    }
}

impl Fields {
    /// Ready for a new call object, its memory kept.
    pub(super) fn reset(&mut self) {
        self.current = Field::Other;
        self.name.clear();
        self.id.clear();
    }
}

impl Hermes {
    /// The reader ready for a new block, its memory kept.
    pub(super) fn reset(mut self) -> Self {
        self.sax.reset();
        self.fields.reset();
        self.tail = None;
        self
    }

    pub(super) fn feed(&mut self, input: &str, ctx: &mut BlockContext<'_>) -> Step {
        let mut pos = 0;
        if self.tail.is_none() {
            let sax = &mut self.sax;
            let step = CallVisitor::run(&mut self.fields, ctx, false, 0, |v| sax.feed(input, v))?;
            match step {
                Scanned::More => return Ok(BlockStep::More),
                Scanned::Done(used) => {
                    pos = used;
                    self.tail = Some(Tail::Space);
                }
                Scanned::Stray(at) => {
                    pos = at;
                    self.tail = Some(Tail::Close(Expect::new(CLOSE.markers)));
                }
                Scanned::Invalid(_, message) => self.tail = Some(Tail::junk(ctx, &message, CLOSE)),
            }
        }
        let Hermes { sax, fields, tail } = self;
        let tail = tail.as_mut().expect("set above");
        let mut close = |ctx: &mut BlockContext<'_>| close_json(sax, fields, ctx);
        tail.feed(input, pos, ctx, CLOSE, &mut close)
    }

    /// The text ended inside the block.
    pub(super) fn end(&mut self, ctx: &mut BlockContext<'_>) -> Result<(), Error> {
        if !matches!(self.tail, Some(Tail::Junk(_))) {
            close_json(&mut self.sax, &mut self.fields, ctx)?;
        }
        ctx.end(ctx.raw_end())
    }
}

/// Completes a call object cut short by at most one missing bracket, else
/// marks the call truncated.
pub(super) fn close_json(
    sax: &mut Sax,
    fields: &mut Fields,
    ctx: &mut BlockContext<'_>,
) -> Result<(), Error> {
    let closed = CallVisitor::run(fields, ctx, false, 0, |visitor| sax.close(1, visitor))?;
    if let Err(why) = closed {
        ctx.fault(
            InvalidCallKind::Truncated,
            format!("the call is cut off: {why}"),
        );
    }
    Ok(())
}

//! The parser's scanner: one pass over the model's text, finding the markup of
//! every dialect it reads and handing blocks to their readers.

use crate::text::floor_char_boundary;
use memchr::{memchr, memchr2, memchr3, memrchr};

use super::block::{Block, Bodies, Pending};
use super::calls::{BlockContext, BlockStep, Body, Calls, PENDING_LIMIT, STAGE};
use super::emit::Emitter;
use super::json_block::{Hermes, Tagged};
use super::protocol::Protocol;
use super::response::Response;
use super::special::{self, Opened, Special};
use super::tools::ToolTable;
use super::xml_block::Xml;
use crate::Error;
use crate::message::{Event, Message, Role};
use crate::natural::dialect::Dialect;
use crate::natural::markers::{MINIMAX, TAGGED};
use crate::natural::scan::is_space;
use crate::natural::scan::marker::{Found, MarkerFinder, MarkerMatch, Matched};
use crate::natural::scan::tag::{self, Tag, TagReader, TagStep};
use crate::service::{Machine, Output};

/// The parser's state machine for one reply: assistant text in (deltas or whole
/// messages), text, reasoning and tool-call events out. Other events pass
/// through, each ending the text before it.
#[derive(Debug)]
pub struct ParserMachine {
    tools: ToolTable,
    dialect: Dialect,
    /// The dialect's special-token markers, read beside the tags.
    special: &'static [Special],
    /// Some of them start with `[`.
    bracket: bool,
    /// The byte that opens the dialect's calls at the start of a line.
    opener: Option<u8>,
    /// The bytes at which the dialect's prose may stop being plain text.
    stops: &'static Stops,
    transcript: bool,
    calls: Calls,
    emit: Emitter,
    mode: Mode,
    /// Reads the tags found in the prose; one reader, kept with its memory.
    tags: TagReader,
    line: LineState,
    /// Right after a tool-call block: the whitespace that follows it is held
    /// in `space`.
    after_block: bool,
    /// Whitespace after a tool-call block, dropped if another block follows
    /// (so that consecutive calls stay one run) or the text ends. One buffer,
    /// kept with its memory.
    space: String,
    /// The reader of the last Hermes block, kept for the next one with its
    /// memory.
    spare_hermes: Option<Hermes>,
}

#[derive(Debug, Default)]
#[expect(
    clippy::large_enum_variant,
    reason = "one per parser, held in place: a block is not boxed per block"
)]
enum Mode {
    /// Text, watching for markers.
    #[default]
    Prose,
    /// Inside a code fence of `ticks` backticks: text, watching for its end.
    Fence { ticks: usize },
    /// A tag that started in the prose.
    Tag,
    /// A special-token marker that started in the prose.
    Special(MarkerMatch),
    /// Reasoning, up to the first of the finder's markers: inside `<think>`, or
    /// the body of a message on a reasoning channel.
    Think(MarkerFinder),
    /// Inside a tool-call block.
    Block(Block),
}

/// Where the prose stands relative to the start of a line, for code fences.
#[derive(Debug, Clone, Copy)]
struct LineState {
    /// `Some(n)`: at the start of a line after `n` spaces (at most 3).
    indent: Option<usize>,
    /// Backticks of a run that started a line, still going at the end of a piece.
    ticks: usize,
}

impl LineState {
    const START: LineState = LineState {
        indent: Some(0),
        ticks: 0,
    };
    const MID_LINE: LineState = LineState {
        indent: None,
        ticks: 0,
    };

    /// The indent after `text`.
    fn after(&self, text: &str) -> Option<usize> {
        let bytes = text.as_bytes();
        let newline = if bytes.len() < SHORT {
            bytes.iter().rposition(|&b| b == b'\n')
        } else {
            memrchr(b'\n', bytes)
        };
        self.after_newline(text, newline)
    }

    /// The indent after `text`, whose last newline is at `newline`.
    fn after_newline(&self, text: &str, newline: Option<usize>) -> Option<usize> {
        let spaces =
            |tail: &str| (tail.len() <= 3 && tail.bytes().all(|b| b == b' ')).then_some(tail.len());
        match newline {
            Some(newline) => spaces(&text[newline + 1..]),
            None => {
                let indent = self.indent? + spaces(text)?;
                (indent <= 3).then_some(indent)
            }
        }
    }
}

impl Machine for ParserMachine {
    type In = Event;
    type Out = Event;

    fn push(&mut self, event: Event, out: &mut Output) -> Result<(), Error> {
        let pushed = self.push_event(event, out);
        self.flush_before_error(&pushed, out);
        pushed
    }

    fn finish(&mut self, out: &mut Output) -> Result<(), Error> {
        let ended = self.end_text(out);
        self.flush_before_error(&ended, out);
        ended
    }
}

impl ParserMachine {
    fn push_event(&mut self, event: Event, out: &mut Output) -> Result<(), Error> {
        match event {
            Event::TextDelta(delta) if self.passes_through(&delta.text) => {
                self.emit.pass(delta, out);
            }
            Event::TextDelta(delta) => {
                self.emit.add_metadata(&delta.metadata);
                self.feed(&delta.text, out)?;
                let unused = self.calls.flush_args(delta.text, &mut self.emit, out);
                self.emit.flush(out);
                if let Some(text) = unused {
                    self.emit.recycle(text);
                }
            }
            Event::Message {
                message: Message::Text(text),
            } if text.role == Role::Assistant => {
                self.emit.add_metadata(&text.metadata);
                self.feed(&text.text, out)?;
                self.end_text(out)?;
            }
            other => {
                self.end_text(out)?;
                out.push(other);
            }
        }
        Ok(())
    }

    /// The reply fails after everything before the fault: the text gathered
    /// before it goes out.
    fn flush_before_error(&mut self, outcome: &Result<(), Error>, out: &mut Output) {
        if outcome.is_err() {
            self.emit.flush(out);
        }
    }

    /// A machine reading `dialect` with `tools`, its calls numbered and checked
    /// by `calls`.
    pub(super) fn new(
        tools: ToolTable,
        dialect: Dialect,
        code_fences: bool,
        transcript: bool,
        calls: Calls,
    ) -> Self {
        let special = special::markers(dialect);
        let bracket = special::uses_bracket(special);
        let opener = special::line_opener(dialect);
        let stops = match (code_fences, bracket || opener == Some(b'['), opener) {
            _ if dialect == Dialect::Json => &JSON_PROSE,
            (true, _, Some(b'{')) => &JSON_PROSE,
            (false, _, Some(b'{')) => &OBJECT_PROSE_WITHOUT_FENCES,
            (true, true, _) => &PROSE_AND_BRACKET,
            (false, true, _) => &PROSE_AND_BRACKET_WITHOUT_FENCES,
            (true, false, _) => &PROSE,
            (false, false, _) => &PROSE_WITHOUT_FENCES,
        };
        ParserMachine {
            tools,
            dialect,
            special,
            bracket,
            opener,
            stops,
            transcript,
            calls,
            emit: Emitter::default(),
            mode: Mode::Prose,
            tags: TagReader::default(),
            line: LineState::START,
            after_block: false,
            space: String::new(),
            spare_hermes: None,
        }
    }

    /// True when `text` is plain text where the scanner stands: nothing is
    /// gathered or held, and no byte of it could start markup. Its line state is
    /// then taken as [`prose`](Self::prose) would, and the piece can go out as it
    /// came, without a copy.
    fn passes_through(&mut self, text: &str) -> bool {
        if text.is_empty() || self.after_block || self.line.ticks > 0 || !self.emit.is_idle() {
            return false;
        }
        let stops = match self.mode {
            Mode::Prose => self.stops,
            Mode::Fence { .. } => &FENCE,
            _ => return false,
        };
        let bytes = text.as_bytes();
        let newline = if bytes.len() < SHORT {
            // One pass over a token-sized piece: its stops and its last newline.
            let mut newline = None;
            for (at, &byte) in bytes.iter().enumerate() {
                if stops.holds(byte) {
                    return false;
                }
                if byte == b'\n' {
                    newline = Some(at);
                }
            }
            newline
        } else {
            if stops.found_in(bytes) {
                return false;
            }
            memrchr(b'\n', bytes)
        };
        self.line.indent = self.line.after_newline(text, newline);
        true
    }

    fn feed(&mut self, mut input: &str, out: &mut Output) -> Result<(), Error> {
        // A step may use no input only when it changes mode; a few in a row
        // would be a loop, so they end the reply with an error instead.
        let mut idle = 0;
        while !input.is_empty() {
            let used = match self.mode {
                Mode::Prose if self.after_block => self.space_after_block(input)?,
                Mode::Prose | Mode::Fence { .. } => self.prose(input, out)?,
                Mode::Tag => self.tag(input, out)?,
                Mode::Special(_) => self.special_marker(input, out)?,
                Mode::Think(_) => self.think(input, out)?,
                Mode::Block(_) => self.block(input, out)?,
            };
            idle = if used == 0 { idle + 1 } else { 0 };
            if idle > 3 {
                return Err(Error::stage(
                    STAGE,
                    "internal error: the parser made no progress",
                ));
            }
            input = &input[used..];
        }
        Ok(())
    }

    /// Whitespace after a block, with at most one `---` line in it: held until a
    /// tag, or a candidate at the start of a line, shows whether another block
    /// follows (then it is a separator, and dropped) or not (then it is text).
    fn space_after_block(&mut self, input: &str) -> Result<usize, Error> {
        let space = &mut self.space;
        let bytes = input.as_bytes();
        let mut used = 0;
        while let Some(&byte) = bytes.get(used) {
            if !(is_space(byte) || (byte == b'-' && separator_grows(space))) {
                break;
            }
            space.push(char::from(byte));
            used += 1;
        }
        let within = space.len() <= PENDING_LIMIT;
        let line_start = space.ends_with('\n');
        Ok(match bytes.get(used) {
            None if within => used,
            Some(&byte)
                if within && line_start && Some(byte) == self.opener && separator_done(space) =>
            {
                // The space leads the candidate's raw text: dropped if it is a
                // call, given back as text if not.
                let space = std::mem::take(&mut self.space);
                self.after_block = false;
                self.calls.start_block(&space)?;
                self.mode = Mode::Block(special::open_at_line(self.dialect));
                self.line = LineState::MID_LINE;
                used
            }
            Some(b'<') if within && self.dialect != Dialect::Json && separator_done(space) => {
                self.start_tag();
                used + 1
            }
            Some(b'[') if within && self.bracket && separator_done(space) => {
                self.start_special("[");
                used + 1
            }
            _ => {
                self.line.indent = self.line.after(&self.space);
                self.release_space();
                used
            }
        })
    }

    /// The whitespace held after a block is text after all.
    fn release_space(&mut self) {
        if std::mem::take(&mut self.after_block) {
            self.emit.text(&self.space);
            self.space.clear();
        }
    }

    /// The whitespace held after a block is dropped.
    fn drop_space(&mut self) {
        self.after_block = false;
        self.space.clear();
    }

    /// Text outside any markup: finds the next tag, and follows code fences.
    fn prose(&mut self, input: &str, out: &mut Output) -> Result<usize, Error> {
        if self.dialect == Dialect::Json {
            return self.json_prose(input, out);
        }
        let bytes = input.as_bytes();
        let mut pos = 0;
        let mut noted = 0;
        if self.line.ticks > 0 {
            let run = bytes.iter().take_while(|&&b| b == b'`').count();
            self.line.ticks += run;
            pos = run;
            noted = run;
            if pos == bytes.len() {
                self.emit.text(input);
                return Ok(input.len());
            }
            self.end_tick_run();
        }
        loop {
            let next = match self.mode {
                Mode::Fence { .. } => memchr(b'`', &bytes[pos..]),
                _ => self.stops.find(&bytes[pos..]),
            };
            let Some(offset) = next else {
                self.line.indent = self.line.after(&input[noted..]);
                self.emit.text(input);
                return Ok(input.len());
            };
            let at = pos + offset;
            if Some(bytes[at]) == self.opener {
                if self.line.after(&input[noted..at]).is_some() {
                    // A candidate at the start of a line: read from its first byte.
                    self.emit.text(&input[..at]);
                    self.calls.start_block("")?;
                    self.mode = Mode::Block(special::open_at_line(self.dialect));
                    self.line = LineState::MID_LINE;
                    return Ok(at);
                }
                self.line = LineState::MID_LINE;
                pos = at + 1;
                noted = pos;
                continue;
            }
            if (bytes[at] == b'[' && self.bracket)
                || (bytes[at] == b'<' && self.opens_special(bytes, at))
            {
                self.emit.text(&input[..at]);
                self.start_special(&input[at..at + 1]);
                return Ok(at + 1);
            }
            if bytes[at] == b'<' {
                if !opens_tag(bytes, at) {
                    self.line = LineState::MID_LINE;
                    pos = at + 1;
                    noted = pos;
                    continue;
                }
                self.emit.text(&input[..at]);
                self.start_tag();
                return Ok(at + 1);
            }
            let run = bytes[at..].iter().take_while(|&&b| b == b'`').count();
            let indent = self.line.after(&input[noted..at]);
            self.line.indent = indent;
            pos = at + run;
            noted = pos;
            if indent.is_none() {
                self.line.indent = None;
                continue;
            }
            self.line.ticks = run;
            if pos == bytes.len() {
                self.emit.text(input);
                return Ok(input.len());
            }
            self.end_tick_run();
        }
    }

    /// Prose of the JSON protocol dialect: `<think>` and protocol candidates — a
    /// `{`, or a code fence at the start of a line.
    fn json_prose(&mut self, input: &str, out: &mut Output) -> Result<usize, Error> {
        let bytes = input.as_bytes();
        let mut pos = 0;
        let mut noted = 0;
        loop {
            let Some(offset) = memchr3(b'<', b'{', b'`', &bytes[pos..]) else {
                self.line.indent = self.line.after(&input[noted..]);
                self.emit.text(input);
                return Ok(input.len());
            };
            let at = pos + offset;
            let candidate = match bytes[at] {
                b'<' if !opens_tag(bytes, at) => {
                    self.line = LineState::MID_LINE;
                    pos = at + 1;
                    noted = pos;
                    continue;
                }
                b'<' => {
                    self.emit.text(&input[..at]);
                    self.start_tag();
                    return Ok(at + 1);
                }
                b'{' => Protocol::bare(),
                _ => {
                    self.line.indent = self.line.after(&input[noted..at]);
                    noted = at;
                    if self.line.indent.is_none() {
                        pos = at + bytes[at..].iter().take_while(|&&b| b == b'`').count();
                        continue;
                    }
                    Protocol::fenced()
                }
            };
            self.emit.text(&input[..at]);
            self.emit.hold(out);
            self.calls.start_block("")?;
            self.mode = Mode::Block(Block::Protocol(candidate));
            self.line = LineState::MID_LINE;
            return Ok(at);
        }
    }

    /// A run of backticks that started a line ended: it may open or close a fence.
    fn end_tick_run(&mut self) {
        let ticks = std::mem::take(&mut self.line.ticks);
        self.line.indent = None;
        if ticks < 3 {
            return;
        }
        self.mode = match self.mode {
            Mode::Fence { ticks: open } if ticks >= open => Mode::Prose,
            Mode::Prose => Mode::Fence { ticks },
            _ => return,
        };
    }

    /// Starts reading a tag whose `<` was just read in the prose.
    fn start_tag(&mut self) {
        self.tags.restart();
        self.mode = Mode::Tag;
        self.line = LineState::MID_LINE;
    }

    /// A tag that started in the prose.
    fn tag(&mut self, input: &str, out: &mut Output) -> Result<usize, Error> {
        match self.tags.feed(input) {
            TagStep::More => Ok(input.len()),
            TagStep::NotATag(at)
                if self.tags.raw() == "<" && self.continues_special(input.as_bytes().get(at)) =>
            {
                self.start_special("<");
                Ok(at)
            }
            TagStep::NotATag(at) => {
                self.release_space();
                self.emit.text(self.tags.raw());
                self.mode = Mode::Prose;
                Ok(at)
            }
            TagStep::Done(used) => {
                self.mode = Mode::Prose;
                // The reader is lent out while its tag is acted on, then kept for
                // the next tag with its memory.
                let tags = std::mem::take(&mut self.tags);
                let opened = self.open(tags.tag(), tags.raw(), out);
                self.tags = tags;
                opened.map(|()| used)
            }
        }
    }

    /// True when the `<` at `at` of `bytes` may start a special marker: the
    /// byte after it is in the piece and may go on into one.
    fn opens_special(&self, bytes: &[u8], at: usize) -> bool {
        self.continues_special(bytes.get(at + 1))
    }

    /// True when `next`, the byte after a `<`, may go on into a special marker.
    fn continues_special(&self, next: Option<&u8>) -> bool {
        next.is_some_and(|&byte| special::may_follow_angle(self.special, byte))
    }

    /// Starts reading a special marker whose first character, `first`, was
    /// just read.
    fn start_special(&mut self, first: &str) {
        let mut matcher = MarkerMatch::default();
        matcher.start(first);
        self.mode = Mode::Special(matcher);
        self.line = LineState::MID_LINE;
    }

    /// A special marker that started in the prose.
    fn special_marker(&mut self, input: &str, out: &mut Output) -> Result<usize, Error> {
        let Mode::Special(matcher) = &mut self.mode else {
            unreachable!("called in special mode")
        };
        match matcher.feed(input, self.special) {
            Matched::More => Ok(input.len()),
            Matched::Not { at } => {
                let Mode::Special(matcher) = std::mem::take(&mut self.mode) else {
                    unreachable!("called in special mode")
                };
                self.release_space();
                self.emit.text(matcher.held());
                Ok(at)
            }
            Matched::Marker { index, end } => {
                self.mode = Mode::Prose;
                let after_block = self.after_block;
                self.drop_space();
                self.open_special(index, after_block, out)?;
                Ok(end)
            }
        }
    }

    /// Opens what the dialect's special marker `index`, just read, opens.
    fn open_special(
        &mut self,
        index: usize,
        after_block: bool,
        out: &mut Output,
    ) -> Result<(), Error> {
        let special = &self.special[index];
        let marker = special.marker;
        self.calls.start_block(marker)?;
        let mut ctx = self.ctx(out, marker.len());
        match special::open(special, &mut ctx) {
            Opened::Block(block) => self.mode = Mode::Block(block),
            Opened::Nothing => self.calls.raw.clear(),
            Opened::Reasoning(ends) => {
                self.calls.raw.clear();
                self.emit.flush(out);
                self.mode = Mode::Think(MarkerFinder::new(ends.iter().copied()));
            }
            Opened::Closer => {
                self.calls.raw.clear();
                // Part of the run of calls: the space after it is held as
                // after the block.
                self.after_block = after_block;
                if !after_block {
                    self.emit.text(marker);
                }
            }
        }
        Ok(())
    }

    /// Acts on a complete tag read in the prose.
    fn open(&mut self, tag: &Tag, raw: &str, out: &mut Output) -> Result<(), Error> {
        let bare = tag.attrs.is_empty() && tag.inline.is_none() && !tag.closing;
        let dialect = self.dialect;
        let response = self.transcript.then(|| Response::open(tag)).flatten();
        let opens_block = tag.opens(TAGGED.call)
            || (bare && tag.name.ends_with("function_calls"))
            || (bare && tag.name == MINIMAX.block)
            || response.is_some();
        if opens_block {
            self.drop_space();
        } else {
            self.release_space();
        }
        if bare && tag.name == "think" {
            self.emit.flush(out);
            self.mode = Mode::Think(MarkerFinder::new(["</think>"]));
            return Ok(());
        }
        let tagged_attrs = tag
            .attrs
            .iter()
            .all(|(key, _)| key == "name" || key == "id");
        let block = if let Some(response) = response {
            Some(Block::Response(response))
        } else if tag.opens(TAGGED.call) && tag.inline.is_none() {
            match (tag.attrs.as_slice(), tag.attr("name")) {
                (_, Some(name)) if tagged_attrs && dialect.reads(Dialect::Tagged) => {
                    self.calls.start_block(raw)?;
                    let mut ctx = self.ctx(out, 0);
                    ctx.begin(0);
                    if let Some(id) = tag.attr("id") {
                        ctx.written_id(id);
                    }
                    ctx.name(name);
                    Some(Block::Tagged(Tagged::new()))
                }
                ([], _)
                    if dialect.reads(Dialect::Hermes)
                        || dialect.reads(Dialect::Qwen3Coder)
                        || dialect.reads(Dialect::Glm) =>
                {
                    self.calls.start_block(raw)?;
                    let bodies = Bodies {
                        hermes: dialect.reads(Dialect::Hermes),
                        qwen3: dialect.reads(Dialect::Qwen3Coder),
                        glm: dialect.reads(Dialect::Glm),
                    };
                    Some(Block::Pending(Pending::new(
                        bodies,
                        self.spare_hermes.take(),
                    )))
                }
                _ => None,
            }
        } else if bare && tag.name == MINIMAX.block && dialect.reads(Dialect::MiniMax) {
            Some(Block::Xml(Xml::minimax()))
        } else if bare && dialect.reads(Dialect::ClaudeXml) {
            tag.name
                .strip_suffix("function_calls")
                .filter(|prefix| prefix.is_empty() || prefix.ends_with(':'))
                .map(|prefix| Block::Xml(Xml::claude(prefix)))
        } else {
            None
        };
        match block {
            Some(block) => {
                if self.calls.raw.is_empty() {
                    self.calls.start_block(raw)?;
                }
                self.mode = Mode::Block(block);
            }
            None => self.emit.text(raw),
        }
        Ok(())
    }

    /// Reasoning until the finder's marker (`</think>`); a marker that the
    /// dialect reads in the prose then opens what it opens there.
    fn think(&mut self, input: &str, out: &mut Output) -> Result<usize, Error> {
        let Mode::Think(finder) = &mut self.mode else {
            unreachable!("called in think mode")
        };
        let emit = &mut self.emit;
        match finder.find(input, &mut |text| emit.reasoning(text, out)) {
            Found::More => Ok(input.len()),
            Found::Marker { index, end } => {
                let marker = finder.marker(index);
                let special = self.special.iter().position(|s| s.marker == marker);
                self.mode = Mode::Prose;
                if let Some(index) = special {
                    self.open_special(index, false, out)?;
                }
                Ok(end)
            }
        }
    }

    /// Inside a tool-call block. The block parser is shown no byte past the
    /// block's limit: a block that goes on past it fails with the limit's error
    /// before a fault found further on (a bad call ending there) can, however
    /// the text is cut.
    fn block(&mut self, input: &str, out: &mut Output) -> Result<usize, Error> {
        let Mode::Block(block) = &mut self.mode else {
            unreachable!("called in block mode")
        };
        let room = self.calls.limit.saturating_sub(self.calls.raw.len());
        let within = floor_char_boundary(input, room);
        if within == 0 {
            return Err(self.calls.over_limit());
        }
        let piece = &input[..within];
        let mut ctx = BlockContext {
            base: self.calls.raw.len(),
            calls: &mut self.calls,
            emit: &mut self.emit,
            out,
            tools: &self.tools,
            piece,
        };
        let step = block.feed(piece, &mut ctx)?;
        let used = match step {
            BlockStep::More if within < input.len() => return Err(self.calls.over_limit()),
            BlockStep::More => within,
            BlockStep::Done(used)
            | BlockStep::NotACall { at: used, .. }
            | BlockStep::Body { used, .. }
            | BlockStep::Ended { at: used, .. } => used,
        };
        self.calls.raw.push_str(&input[..used]);
        match step {
            BlockStep::More => {}
            BlockStep::Done(_) => {
                self.calls.raw.clear();
                self.end_block();
            }
            BlockStep::Ended { replay_from, .. } => {
                let raw = std::mem::take(&mut self.calls.raw);
                self.end_block();
                self.feed(&raw[replay_from..], out)?;
            }
            BlockStep::Body { body, .. } => {
                self.calls.raw.clear();
                self.mode = match body {
                    Body::Text => Mode::Prose,
                    Body::Reasoning(ends) => Mode::Think(MarkerFinder::new(ends.iter().copied())),
                };
            }
            BlockStep::NotACall { replay_from, .. } => {
                let raw = std::mem::take(&mut self.calls.raw);
                self.emit.text(&raw[..replay_from]);
                self.mode = Mode::Prose;
                self.feed(&raw[replay_from..], out)?;
            }
        }
        Ok(used)
    }

    /// A block ended: prose resumes, its whitespace held.
    fn end_block(&mut self) {
        if let Mode::Block(Block::Hermes(hermes)) = std::mem::take(&mut self.mode) {
            self.spare_hermes = Some(hermes);
        }
        self.drop_space();
        self.after_block = true;
    }

    fn ctx<'a>(&'a mut self, out: &'a mut Output, base: usize) -> BlockContext<'a> {
        BlockContext {
            calls: &mut self.calls,
            emit: &mut self.emit,
            out,
            tools: &self.tools,
            piece: "",
            base,
        }
    }

    /// The text ended (end of reply, or another kind of event): completes or
    /// releases whatever is open.
    fn end_text(&mut self, out: &mut Output) -> Result<(), Error> {
        // Trailing whitespace goes; a separator line with nothing after it stays.
        if self.space.contains('-') {
            self.release_space();
        }
        self.drop_space();
        match std::mem::take(&mut self.mode) {
            Mode::Prose | Mode::Fence { .. } => {}
            Mode::Tag => self.emit.text(self.tags.raw()),
            Mode::Special(matcher) => self.emit.text(matcher.held()),
            Mode::Think(mut finder) => {
                let emit = &mut self.emit;
                finder.flush(&mut |text| emit.reasoning(text, out));
            }
            Mode::Block(mut block) => {
                let base = self.calls.raw.len();
                let mut ctx = self.ctx(out, base);
                let was_block = block.end(&mut ctx)?;
                let raw = std::mem::take(&mut self.calls.raw);
                if !was_block {
                    self.emit.text(&raw);
                }
            }
        }
        self.line = LineState::START;
        self.emit.flush_metadata(out);
        Ok(())
    }
}

/// Below this length a piece is scanned byte by byte: for token-sized pieces
/// the call into `memchr` costs more than the scan.
const SHORT: usize = 16;

/// The bytes at which prose may stop being plain text, in one scanner state.
#[derive(Debug)]
struct Stops {
    bytes: &'static [u8],
    /// `bytes` as a table, for token-sized pieces.
    table: [bool; 256],
}

impl Stops {
    const fn new(bytes: &'static [u8]) -> Self {
        let mut table = [false; 256];
        let mut at = 0;
        while at < bytes.len() {
            table[bytes[at] as usize] = true;
            at += 1;
        }
        Stops { bytes, table }
    }

    fn holds(&self, byte: u8) -> bool {
        self.table[usize::from(byte)]
    }

    fn found_in(&self, haystack: &[u8]) -> bool {
        self.find(haystack).is_some()
    }

    /// The first of the bytes in `haystack`.
    fn find(&self, haystack: &[u8]) -> Option<usize> {
        match *self.bytes {
            [a] => memchr(a, haystack),
            [a, b] => memchr2(a, b, haystack),
            [a, b, c] => memchr3(a, b, c, haystack),
            _ => haystack.iter().position(|&byte| self.holds(byte)),
        }
    }
}

/// Prose: a tag or a code fence may start.
const PROSE: Stops = Stops::new(b"<`");
/// Prose of a dialect with markers that start with `[`.
const PROSE_AND_BRACKET: Stops = Stops::new(b"<`[");
/// The same when code fences are not followed.
const PROSE_AND_BRACKET_WITHOUT_FENCES: Stops = Stops::new(b"<[");
/// Prose when code fences are not followed.
const PROSE_WITHOUT_FENCES: Stops = Stops::new(b"<");
/// Prose of the JSON protocol dialect, or of a dialect whose calls open with
/// `{` at the start of a line: a tag, an object, a fence.
const JSON_PROSE: Stops = Stops::new(b"<{`");
/// The latter when code fences are not followed.
const OBJECT_PROSE_WITHOUT_FENCES: Stops = Stops::new(b"<{");
/// Inside a code fence: its end may come.
const FENCE: Stops = Stops::new(b"`");

/// True when a `-` may extend the space held after a block: the space may hold
/// one line of three dashes.
fn separator_grows(space: &str) -> bool {
    match space.bytes().filter(|&b| b == b'-').count() {
        0 => space.ends_with('\n'),
        1 | 2 => space.ends_with('-'),
        _ => false,
    }
}

/// True when the space held after a block is whitespace, or holds a whole `---`
/// line.
fn separator_done(space: &str) -> bool {
    match space.find('-') {
        None => true,
        Some(at) => space[at..].starts_with("---") && space[at + 3..].contains('\n'),
    }
}

/// False when the `<` at `at` is text for sure: the next byte is in the piece and
/// starts no tag (`a < b`, `<=`), so reading a tag would only give it back.
fn opens_tag(bytes: &[u8], at: usize) -> bool {
    bytes.get(at + 1).is_none_or(|&byte| tag::may_open(byte))
}

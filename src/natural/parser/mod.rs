//! The natural tool use parser: model text with `<tool_call>`-style markup →
//! tool calls, in one linear pass, streaming or not.

mod emit;
mod json_block;
mod protocol;
mod response;
mod tools;
mod xml_block;

use std::sync::Arc;

use memchr::{memchr, memchr2, memchr3, memrchr};

use self::emit::{Calls, Ctx, Emitter};
use self::json_block::{Hermes, Tagged, is_space};
use self::protocol::Protocol;
use self::response::Response;
use self::tools::ToolTable;
use self::xml_block::Xml;
use super::Dialect;
use super::scan::marker::{Found, MarkerFinder};
use super::scan::tag::{self, Tag, TagReader, TagStep};
use crate::schema::SchemaCache;
use crate::service::{Machine, MachineFactory, MachineLayer, Output};
use crate::{ChatRequest, Error, Event, Joiner, Message, Role, ToolSpec};

/// The longest tag read in prose; a longer one is text.
const TAG_LIMIT: usize = 1024;
/// The most whitespace between `<tool_call>` and its body.
const PENDING_LIMIT: usize = 4096;

/// What the parser does with a tool call it cannot accept: an unknown tool,
/// arguments that are not JSON or break the tool's schema, a block cut short.
///
/// A call is *streamed* once its tool name is known and good: its arguments go
/// out as `tool_call_delta`s as they arrive, and what has gone out is never taken
/// back. So the policy applies fully to faults found before that point (an
/// unknown tool, a missing name, a body that is not a call). A fault found after
/// it (malformed JSON, a schema violation, a block cut off) under `Text` or
/// `Mark` marks the streamed call [`invalid`](crate::ToolCall::invalid), with the
/// raw text in `invalid.raw` — nothing is lost either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnInvalid {
    /// The raw text stays in the output as an assistant text message whose
    /// metadata holds `parse_error: {kind, message}`.
    #[default]
    Text,
    /// The call is handed out marked invalid; the function layer answers it with
    /// an error result, so that the model can retry.
    Mark,
    /// The reply fails with [`Error::InvalidToolCall`] after everything before
    /// the call.
    Error,
}

/// The natural tool use parser: turns `<tool_call>`-style text from the model
/// into tool calls. It is the configuration (a [`MachineFactory`]); use
/// [`layer`](NaturalToolUseParser::layer) for the tower layer, or
/// [`parse`](NaturalToolUseParser::parse) / [`machine`](NaturalToolUseParser::machine)
/// directly.
///
/// Streaming: text before, between and after calls goes out at once, except the
/// shortest tail that could still begin a marker; a call's arguments go out as
/// `tool_call_delta`s as they arrive; `<think>…</think>` goes out as reasoning
/// (tool syntax in it is not a call); a tag inside a code fence opened in the
/// prose is text; whitespace between and after call blocks is dropped, so that
/// consecutive calls form one `tool_calls` message. Names match the request's tools case-insensitively (the tool's
/// own spelling is used) and arguments are checked against the tool's JSON Schema
/// (validators are compiled once and shared by clones). With no tools in the
/// request, any name goes and nothing is checked. Call ids are `call_N`, numbered
/// after the calls already in the conversation.
///
/// ```
/// use lmstack::natural::NaturalToolUseParser;
/// use lmstack::{Message, ToolCall, ToolSpec};
/// use serde_json::json;
///
/// let tools = [ToolSpec::new("get_weather", "", json!({"type": "object"}))];
/// let text = "Let me check.\n<tool_call name=\"get_weather\">\n{\"city\": \"Paris\"}\n</tool_call>";
/// let messages = NaturalToolUseParser::new().parse(text, &tools).unwrap();
/// assert_eq!(messages, vec![
///     Message::assistant("Let me check.\n"),
///     Message::tool_calls(vec![ToolCall::new("call_1", "get_weather", json!({"city": "Paris"}))]),
/// ]);
/// ```
#[derive(Clone, Debug)]
pub struct NaturalToolUseParser {
    dialect: Dialect,
    on_invalid: OnInvalid,
    call_limit: usize,
    code_fences: bool,
    transcript: bool,
    schemas: Arc<SchemaCache>,
}

/// The tower layer of the parser.
pub type NaturalToolUseParserLayer = MachineLayer<NaturalToolUseParser>;

impl Default for NaturalToolUseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl NaturalToolUseParser {
    /// All four XML dialects, bad calls kept as text, 8 MiB per call, code fences
    /// respected.
    pub fn new() -> Self {
        NaturalToolUseParser {
            dialect: Dialect::Auto,
            on_invalid: OnInvalid::Text,
            call_limit: 8 << 20,
            code_fences: true,
            transcript: false,
            schemas: Arc::default(),
        }
    }

    /// Which dialect to read.
    pub fn dialect(mut self, dialect: Dialect) -> Self {
        self.dialect = dialect;
        self
    }

    /// What to do with calls that cannot be accepted.
    pub fn on_invalid(mut self, policy: OnInvalid) -> Self {
        self.on_invalid = policy;
        self
    }

    /// The most bytes one tool-call block may take; past it the reply fails
    /// with [`Error::LimitExceeded`].
    pub fn call_limit(mut self, bytes: usize) -> Self {
        self.call_limit = bytes;
        self
    }

    /// Whether tags inside a markdown code fence opened in the prose are text
    /// (on by default).
    pub fn code_fences(mut self, respected: bool) -> Self {
        self.code_fences = respected;
        self
    }

    /// Transcript mode (off by default): reads text written in the
    /// transformer's format back — `<tool_response>` blocks become `tool_results`
    /// messages and the ids written in calls are kept. Off for model replies, so
    /// that a model cannot forge tool results or choose call ids; see
    /// [`read_history`](NaturalToolUseParser::read_history) for whole histories.
    pub fn transcript(mut self, on: bool) -> Self {
        self.transcript = on;
        self
    }

    /// The tower layer.
    pub fn layer(&self) -> NaturalToolUseParserLayer {
        MachineLayer::new(self.clone())
    }

    /// A parser state machine for one reply, with `tools` (see
    /// [`Machine`]); `id_base` calls came before in the conversation.
    pub fn machine(&self, tools: &[ToolSpec], id_base: usize) -> Result<ParserMachine, Error> {
        Ok(ParserMachine {
            tools: ToolTable::new(tools, &self.schemas)?,
            dialect: self.dialect,
            code_fences: self.code_fences,
            transcript: self.transcript,
            calls: Calls::new(id_base, self.call_limit, self.on_invalid, self.transcript),
            emit: Emitter::default(),
            mode: Mode::Prose,
            line: LineState::START,
            space: None,
        })
    }

    /// Reads a whole history written in the transformer's format (by
    /// [`NaturalToolUseTransformer::render`](super::NaturalToolUseTransformer::render),
    /// or by hand) back into canonical messages: every assistant and user text
    /// is parsed in [transcript mode](NaturalToolUseParser::transcript), media
    /// blocks go back in place of their placeholders, and each run of calls
    /// followed by the results that answer them becomes a `tool_aggregate` (a
    /// result without an id answers the call in its place, as Qwen chat
    /// templates write them). Other messages stay as they are.
    ///
    /// ```
    /// use lmstack::natural::{NaturalToolUseParser, NaturalToolUseTransformer};
    /// use lmstack::{Message, ToolCall, ToolResult};
    /// use serde_json::json;
    ///
    /// let history = vec![
    ///     Message::user("Weather in Paris?"),
    ///     Message::tool_aggregate(
    ///         vec![ToolCall::new("toolu_1", "get_weather", json!({"city": "Paris"}))],
    ///         vec![ToolResult::text("toolu_1", "get_weather", "18°C")],
    ///     ),
    ///     Message::assistant("It is 18°C."),
    /// ];
    /// let text = NaturalToolUseTransformer::new().render(history.clone()).unwrap();
    /// let read = NaturalToolUseParser::new().read_history(text, &[]).unwrap();
    /// assert_eq!(read, history);
    /// ```
    pub fn read_history(
        &self,
        messages: Vec<Message>,
        tools: &[ToolSpec],
    ) -> Result<Vec<Message>, Error> {
        super::history::read(self, messages, tools)
    }

    /// Parses a whole text into messages.
    pub fn parse(&self, text: &str, tools: &[ToolSpec]) -> Result<Vec<Message>, Error> {
        let mut machine = self.machine(tools, 0)?;
        let mut out = Output::new();
        machine.push(Event::message(Message::assistant(text)), &mut out)?;
        machine.finish(&mut out)?;
        Ok(Joiner::join(out.drain()))
    }
}

impl MachineFactory for NaturalToolUseParser {
    type Machine = ParserMachine;

    fn start(&self, request: &mut ChatRequest) -> Result<ParserMachine, Error> {
        let id_base = request.messages.iter().map(|m| m.calls().len()).sum();
        self.machine(&request.options.tools, id_base)
    }
}

/// The parser's state machine for one reply: assistant text in (deltas or whole
/// messages), text, reasoning and tool-call events out. Other events pass
/// through, each ending the text before it.
#[derive(Debug)]
pub struct ParserMachine {
    tools: ToolTable,
    dialect: Dialect,
    code_fences: bool,
    transcript: bool,
    calls: Calls,
    emit: Emitter,
    mode: Mode,
    line: LineState,
    /// Whitespace after a tool-call block, dropped if another block follows
    /// (so that consecutive calls stay one run) or the text ends.
    space: Option<String>,
}

#[derive(Debug, Default)]
enum Mode {
    /// Text, watching for markers.
    #[default]
    Prose,
    /// Inside a code fence of `ticks` backticks: text, watching for its end.
    Fence { ticks: usize },
    /// A tag that started in the prose.
    Tag(TagReader),
    /// Inside `<think>`.
    Think(MarkerFinder),
    /// Inside a tool-call block.
    Block(Box<Block>),
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
        let spaces =
            |tail: &str| (tail.len() <= 3 && tail.bytes().all(|b| b == b' ')).then_some(tail.len());
        match memrchr(b'\n', text.as_bytes()) {
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
        match event {
            Event::TextDelta(delta) => {
                self.emit.add_metadata(&delta.metadata);
                self.feed(&delta.text, out)?;
                self.emit.flush(out);
                self.emit.recycle(delta.text);
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

    fn finish(&mut self, out: &mut Output) -> Result<(), Error> {
        self.end_text(out)
    }
}

impl ParserMachine {
    fn feed(&mut self, mut input: &str, out: &mut Output) -> Result<(), Error> {
        // A step may use no input only when it changes mode; a few in a row
        // would be a loop, so they end the reply with an error instead.
        let mut idle = 0;
        while !input.is_empty() {
            let used = match self.mode {
                Mode::Prose if self.space.is_some() => self.space_after_block(input),
                Mode::Prose | Mode::Fence { .. } => self.prose(input, out)?,
                Mode::Tag(_) => self.tag(input, out)?,
                Mode::Think(_) => self.think(input, out),
                Mode::Block(_) => self.block(input, out)?,
            };
            idle = if used == 0 { idle + 1 } else { 0 };
            if idle > 3 {
                return Err(Error::stage(
                    emit::STAGE,
                    "internal error: the parser made no progress",
                ));
            }
            input = &input[used..];
        }
        Ok(())
    }

    /// Whitespace after a block, with at most one `---` line in it: held until a
    /// tag shows whether another block follows (then it is a separator, and
    /// dropped) or not (then it is text).
    fn space_after_block(&mut self, input: &str) -> usize {
        let space = self.space.as_mut().expect("called after a block");
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
        match bytes.get(used) {
            None if within => used,
            Some(b'<') if within && self.dialect != Dialect::Json && separator_done(space) => {
                self.mode = Mode::Tag(TagReader::new(TAG_LIMIT));
                self.line = LineState::MID_LINE;
                used + 1
            }
            _ => {
                let space = self.space.take().unwrap_or_default();
                self.line.indent = self.line.after(&space);
                self.emit.text(&space);
                used
            }
        }
    }

    /// The whitespace held after a block is text after all.
    fn release_space(&mut self) {
        if let Some(space) = self.space.take() {
            self.emit.text(&space);
        }
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
            let fenced = matches!(self.mode, Mode::Fence { .. });
            let next = match (fenced, self.code_fences) {
                (true, _) => memchr(b'`', &bytes[pos..]),
                (false, true) => memchr2(b'<', b'`', &bytes[pos..]),
                (false, false) => memchr(b'<', &bytes[pos..]),
            };
            let Some(offset) = next else {
                self.line.indent = self.line.after(&input[noted..]);
                self.emit.text(input);
                return Ok(input.len());
            };
            let at = pos + offset;
            if bytes[at] == b'<' {
                if !opens_tag(bytes, at) {
                    self.line = LineState::MID_LINE;
                    pos = at + 1;
                    noted = pos;
                    continue;
                }
                self.emit.text(&input[..at]);
                self.mode = Mode::Tag(TagReader::new(TAG_LIMIT));
                self.line = LineState::MID_LINE;
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
                    self.mode = Mode::Tag(TagReader::new(TAG_LIMIT));
                    self.line = LineState::MID_LINE;
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
            self.mode = Mode::Block(Box::new(Block::Protocol(candidate)));
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

    /// A tag that started in the prose.
    fn tag(&mut self, input: &str, out: &mut Output) -> Result<usize, Error> {
        let Mode::Tag(reader) = &mut self.mode else {
            unreachable!("called in tag mode")
        };
        match reader.feed(input) {
            TagStep::More => Ok(input.len()),
            TagStep::NotATag(at) => {
                let raw = reader.raw().to_owned();
                self.release_space();
                self.emit.text(&raw);
                self.mode = Mode::Prose;
                Ok(at)
            }
            TagStep::Done(used) => {
                let Mode::Tag(reader) = std::mem::take(&mut self.mode) else {
                    unreachable!()
                };
                let (tag, raw) = reader.finish();
                self.open(tag, raw, out)?;
                Ok(used)
            }
        }
    }

    /// Acts on a complete tag read in the prose.
    fn open(&mut self, tag: Tag, raw: String, out: &mut Output) -> Result<(), Error> {
        let bare = tag.attrs.is_empty() && tag.inline.is_none() && !tag.closing;
        let dialect = self.dialect;
        let response = self.transcript.then(|| Response::open(&tag)).flatten();
        let opens_block = tag.opens("tool_call")
            || (bare && tag.name.ends_with("function_calls"))
            || response.is_some();
        if opens_block {
            self.space = None;
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
        } else if tag.opens("tool_call") && tag.inline.is_none() {
            match (tag.attrs.as_slice(), tag.attr("name")) {
                (_, Some(name)) if tagged_attrs && dialect.reads(Dialect::Tagged) => {
                    self.calls.start_block(&raw)?;
                    let mut ctx = self.ctx(out, 0);
                    ctx.begin(0);
                    if let Some(id) = tag.attr("id") {
                        ctx.written_id(id);
                    }
                    ctx.name(name);
                    Some(Block::Tagged(Tagged::new()))
                }
                ([], _) if dialect.reads(Dialect::Hermes) || dialect.reads(Dialect::Qwen3Coder) => {
                    self.calls.start_block(&raw)?;
                    Some(Block::Pending(Pending {
                        reader: None,
                        hermes: dialect.reads(Dialect::Hermes),
                        qwen3: dialect.reads(Dialect::Qwen3Coder),
                    }))
                }
                _ => None,
            }
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
                    self.calls.start_block(&raw)?;
                }
                self.mode = Mode::Block(Box::new(block));
            }
            None => self.emit.text(&raw),
        }
        Ok(())
    }

    /// Inside `<think>`: reasoning until `</think>`.
    fn think(&mut self, input: &str, out: &mut Output) -> usize {
        let Mode::Think(finder) = &mut self.mode else {
            unreachable!("called in think mode")
        };
        let emit = &mut self.emit;
        match finder.find(input, &mut |text| emit.reasoning(text, out)) {
            Found::More => input.len(),
            Found::Marker { end, .. } => {
                self.mode = Mode::Prose;
                end
            }
        }
    }

    /// Inside a tool-call block.
    fn block(&mut self, input: &str, out: &mut Output) -> Result<usize, Error> {
        let Mode::Block(block) = &mut self.mode else {
            unreachable!("called in block mode")
        };
        let mut ctx = Ctx {
            base: self.calls.raw.len(),
            calls: &mut self.calls,
            emit: &mut self.emit,
            out,
            tools: &self.tools,
            piece: input,
        };
        let step = block.feed(input, &mut ctx)?;
        let used = match step {
            BlockStep::More => input.len(),
            BlockStep::Done(used) | BlockStep::NotACall { at: used, .. } => used,
        };
        self.calls.raw.push_str(&input[..used]);
        if self.calls.raw.len() > self.calls.limit {
            return Err(Error::LimitExceeded {
                stage: emit::STAGE,
                what: "a tool-call block",
                limit: self.calls.limit,
            });
        }
        match step {
            BlockStep::More => {}
            BlockStep::Done(_) => {
                self.calls.raw.clear();
                self.mode = Mode::Prose;
                self.space = Some(String::new());
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

    fn ctx<'a>(&'a mut self, out: &'a mut Output, base: usize) -> Ctx<'a> {
        Ctx {
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
        if let Some(space) = self.space.take().filter(|space| space.contains('-')) {
            self.emit.text(&space);
        }
        match std::mem::take(&mut self.mode) {
            Mode::Prose | Mode::Fence { .. } => {}
            Mode::Tag(reader) => self.emit.text(reader.raw()),
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

/// A tool-call block being read.
#[derive(Debug)]
#[expect(clippy::large_enum_variant, reason = "always boxed, as a whole")]
enum Block {
    /// After a bare `<tool_call>`: Hermes JSON or a Qwen3-Coder function follows,
    /// or it was not a call.
    Pending(Pending),
    Tagged(Tagged),
    Hermes(Hermes),
    Xml(Xml),
    Protocol(Protocol),
    /// A result, in transcript mode.
    Response(Response),
}

#[derive(Debug)]
enum BlockStep {
    More,
    Done(usize),
    /// Not a call after all: the block's raw text up to `replay_from` is text, the
    /// rest up to byte `at` of the piece is read again as prose.
    NotACall {
        at: usize,
        replay_from: usize,
    },
}

#[derive(Debug)]
struct Pending {
    /// A tag after `<tool_call>`, and where it started in the block.
    reader: Option<(TagReader, usize)>,
    hermes: bool,
    qwen3: bool,
}

impl Block {
    fn feed(&mut self, input: &str, ctx: &mut Ctx<'_>) -> Result<BlockStep, Error> {
        let step = match self {
            Block::Pending(pending) => match pending.decide(input, ctx) {
                Decision::More => return Ok(BlockStep::More),
                Decision::NotACall { at, replay_from } => {
                    return Ok(BlockStep::NotACall { at, replay_from });
                }
                Decision::Become(block, used) => {
                    *self = *block;
                    ctx.base += used;
                    let step = self.feed(&input[used..], ctx);
                    ctx.base -= used;
                    return Ok(match step? {
                        BlockStep::Done(n) => BlockStep::Done(used + n),
                        BlockStep::NotACall { at, replay_from } => BlockStep::NotACall {
                            at: used + at,
                            replay_from,
                        },
                        BlockStep::More => BlockStep::More,
                    });
                }
            },
            Block::Tagged(block) => block.feed(input, ctx)?,
            Block::Hermes(block) => block.feed(input, ctx)?,
            Block::Xml(block) => block.feed(input, ctx)?,
            Block::Protocol(block) => block.feed(input, ctx)?,
            Block::Response(block) => block.feed(input, ctx),
        };
        Ok(match step {
            json_block::Step::More => BlockStep::More,
            json_block::Step::Done(used) => BlockStep::Done(used),
            json_block::Step::NotACall { at, replay_from } => {
                BlockStep::NotACall { at, replay_from }
            }
        })
    }

    /// The text ended inside the block; false when it was not a block after all
    /// (its raw text is then text).
    fn end(&mut self, ctx: &mut Ctx<'_>) -> Result<bool, Error> {
        match self {
            Block::Pending(_) | Block::Response(_) => Ok(false),
            Block::Tagged(block) => block.end(ctx).map(|()| true),
            Block::Hermes(block) => block.end(ctx).map(|()| true),
            Block::Xml(block) => block.end(ctx),
            Block::Protocol(block) => block.end(ctx),
        }
    }
}

/// What [`Pending::decide`] found.
enum Decision {
    More,
    /// The body is this block's, from byte `used` of the piece on.
    Become(Box<Block>, usize),
    /// Not a call: see [`BlockStep::NotACall`].
    NotACall {
        at: usize,
        replay_from: usize,
    },
}

impl Pending {
    /// Reads on until the body shows which dialect it is.
    fn decide(&mut self, input: &str, ctx: &mut Ctx<'_>) -> Decision {
        let bytes = input.as_bytes();
        let mut pos = 0;
        loop {
            if let Some((reader, start)) = &mut self.reader {
                let start = *start;
                return match reader.feed(&input[pos..]) {
                    TagStep::More => Decision::More,
                    TagStep::Done(used) => {
                        let (reader, _) = self.reader.take().expect("reading a tag");
                        let (tag, _) = reader.finish();
                        match tag.inline.as_deref() {
                            Some(name) if self.qwen3 && tag.opens("function") => Decision::Become(
                                Box::new(Block::Xml(Xml::qwen3(name, ctx))),
                                pos + used,
                            ),
                            // Another tag: it is read again as prose.
                            _ => Decision::NotACall {
                                at: pos + used,
                                replay_from: start,
                            },
                        }
                    }
                    TagStep::NotATag(at) => Decision::NotACall {
                        at: pos + at,
                        replay_from: start,
                    },
                };
            }
            let Some(offset) = bytes[pos..].iter().position(|&b| !is_space(b)) else {
                if ctx.pos(bytes.len()) > PENDING_LIMIT {
                    return Decision::NotACall {
                        at: bytes.len(),
                        replay_from: ctx.pos(bytes.len()),
                    };
                }
                return Decision::More;
            };
            pos += offset;
            match bytes[pos] {
                b'{' if self.hermes => {
                    ctx.begin(0);
                    return Decision::Become(Box::new(Block::Hermes(Hermes::default())), pos);
                }
                b'<' if self.qwen3 => {
                    self.reader = Some((TagReader::new(TAG_LIMIT), ctx.pos(pos)));
                    pos += 1;
                }
                _ => {
                    return Decision::NotACall {
                        at: pos,
                        replay_from: ctx.pos(pos),
                    };
                }
            }
        }
    }
}

//! Blocks whose arguments are XML-like parameters with raw-text values:
//! Qwen3-Coder `<function=F><parameter=p>v</parameter></function>`, Claude-style
//! `<function_calls><invoke name="F"><parameter name="p">v</parameter></invoke>`
//! (and MiniMax's `<minimax:tool_call>` block of the same invokes), and GLM's
//! `<tool_call>F<arg_key>p</arg_key><arg_value>v</arg_value></tool_call>`.
//!
//! Values are raw text, read by [`ValueScan`] (where a value ends, in
//! `scan::xml_value`). They are typed by the tool's schema: strings stay strings
//! and stream as they arrive; other types are read as JSON when the value ends.

use memchr::memchr;

use super::calls::{BlockContext, BlockStep, STAGE, Step};
use crate::natural::markers::GLM_KEY;
use crate::natural::scan::string::escape_with;
use crate::natural::scan::tag::{Tag, TagReader, TagStep};
use crate::natural::scan::xml_value::{Names, Style, ValueScan, ValueStep, is_bare};
use crate::natural::scan::{NAME_LIMIT, is_space};
use crate::schema::ParamKind;
use crate::{Error, InvalidCallKind};

/// A Qwen3-Coder or Claude-style block.
#[derive(Debug)]
pub(super) struct Xml {
    names: Names,
    state: State,
    /// A call was seen: until then, anything but a call means this is not a block.
    seen_call: bool,
    /// Whitespace between calls, dropped unless text follows it.
    space: String,
    /// The current call's arguments are complete (Qwen3-Coder: `</function>` came,
    /// the call's markup runs on to `</tool_call>`).
    args_closed: bool,
    /// GLM: the key read for the next value.
    key: Option<String>,
    /// Reads the tags of the block; one reader, kept with its memory.
    tags: TagReader,
    /// The raw text of a value typed other than string, converted when it
    /// ends; kept with its memory, as is `held`.
    buffer: String,
    /// A value's `</parameter>` and the whitespace after it, until what
    /// follows shows whether it ended the value.
    held: String,
}

#[derive(Debug)]
enum State {
    /// Between calls.
    Between,
    /// GLM: the call's name, up to the end of its line or the first tag.
    Name(String),
    /// In a call, between parameters.
    InCall,
    /// GLM: the text of an `<arg_key>`.
    Key(String),
    /// Reading a tag (in `tags`); `in_call` says where it started.
    Tag {
        raw_start: usize,
        in_call: bool,
    },
    Param(Param),
}

/// The parameter being read.
#[derive(Debug)]
struct Param {
    kind: ParamKind,
    scan: ValueScan,
}

impl Xml {
    /// A Qwen3-Coder block whose call `<function=name>` was read: the call has begun.
    pub(super) fn qwen3(name: &str, ctx: &mut BlockContext<'_>) -> Self {
        ctx.begin(0);
        ctx.name(name);
        let mut block = Self::with(Names::qwen3());
        block.state = State::InCall;
        block.seen_call = true;
        block
    }

    /// A Claude-style block opened by `<{prefix}function_calls>`.
    pub(super) fn claude(prefix: &str) -> Self {
        Self::with(Names::claude(prefix))
    }

    /// A MiniMax block opened by `<minimax:tool_call>`: Claude-style invokes.
    pub(super) fn minimax() -> Self {
        Self::with(Names::minimax())
    }

    /// A GLM block whose `<tool_call>` was read and whose name starts here: the
    /// call has begun.
    pub(super) fn glm(ctx: &mut BlockContext<'_>) -> Self {
        ctx.begin(0);
        let mut block = Self::with(Names::glm());
        block.state = State::Name(String::new());
        block.seen_call = true;
        block
    }

    fn with(names: Names) -> Self {
        Xml {
            names,
            state: State::Between,
            seen_call: false,
            space: String::new(),
            args_closed: false,
            key: None,
            tags: TagReader::default(),
            buffer: String::new(),
            held: String::new(),
        }
    }

    pub(super) fn feed(&mut self, input: &str, ctx: &mut BlockContext<'_>) -> Step {
        let bytes = input.as_bytes();
        let mut pos = 0;
        while pos < bytes.len() {
            match &mut self.state {
                State::Name(name) => {
                    let end = bytes[pos..]
                        .iter()
                        .position(|&b| b == b'\n' || b == b'<')
                        .map(|offset| pos + offset);
                    name.push_str(&input[pos..end.unwrap_or(bytes.len())]);
                    if name.len() > NAME_LIMIT {
                        return Ok(not_glm(end.unwrap_or(bytes.len()), ctx));
                    }
                    let Some(end) = end else {
                        return Ok(BlockStep::More);
                    };
                    let name = std::mem::take(name);
                    if !valid_name(name.trim()) {
                        // `<tool_call>` followed by prose: not a call.
                        return Ok(not_glm(end, ctx));
                    }
                    ctx.name(&name);
                    pos = end;
                    self.state = State::InCall;
                }
                State::Key(key) => {
                    let end = memchr(b'<', &bytes[pos..]).map(|offset| pos + offset);
                    key.push_str(&input[pos..end.unwrap_or(bytes.len())]);
                    if key.len() > NAME_LIMIT {
                        ctx.fault(
                            InvalidCallKind::MalformedArguments,
                            "an argument key is too long",
                        );
                        key.clear();
                    }
                    let Some(end) = end else {
                        return Ok(BlockStep::More);
                    };
                    self.key = Some(std::mem::take(key));
                    pos = end + 1;
                    self.tags.restart();
                    self.state = State::Tag {
                        raw_start: ctx.pos(end),
                        in_call: true,
                    };
                }
                State::InCall => {
                    let found = memchr(b'<', &bytes[pos..]).map(|offset| pos + offset);
                    let end = found.unwrap_or(bytes.len());
                    if !input[pos..end].trim().is_empty() {
                        ctx.fault(
                            InvalidCallKind::MalformedArguments,
                            "unexpected text between parameters",
                        );
                    }
                    let Some(at) = found else {
                        return Ok(BlockStep::More);
                    };
                    pos = at + 1;
                    self.tags.restart();
                    self.state = State::Tag {
                        raw_start: ctx.pos(at),
                        in_call: true,
                    };
                }
                State::Between => {
                    let spaces = bytes[pos..].iter().take_while(|&&b| is_space(b)).count();
                    self.space.push_str(&input[pos..pos + spaces]);
                    pos += spaces;
                    if pos == bytes.len() {
                        return Ok(BlockStep::More);
                    }
                    if bytes[pos] != b'<' {
                        if !self.seen_call {
                            return Ok(BlockStep::NotACall {
                                at: pos,
                                replay_from: ctx.pos(pos),
                            });
                        }
                        let end =
                            memchr(b'<', &bytes[pos..]).map_or(bytes.len(), |offset| pos + offset);
                        // Its trailing whitespace is held like the space
                        // between calls, however the text was cut.
                        let text = input[pos..end].trim_end_matches([' ', '\t', '\n', '\r']);
                        ctx.text(&std::mem::take(&mut self.space));
                        ctx.text(text);
                        pos += text.len();
                        continue;
                    }
                    self.tags.restart();
                    self.state = State::Tag {
                        raw_start: ctx.pos(pos),
                        in_call: false,
                    };
                    pos += 1;
                }
                State::Tag { raw_start, in_call } => match self.tags.feed(&input[pos..]) {
                    TagStep::More => return Ok(BlockStep::More),
                    TagStep::NotATag(at) => {
                        pos += at;
                        let (in_call, raw_start) = (*in_call, *raw_start);
                        let raw = self.tags.raw();
                        if in_call {
                            ctx.fault(
                                InvalidCallKind::MalformedArguments,
                                format!("malformed markup `{raw}`"),
                            );
                            self.state = State::InCall;
                        } else if !self.seen_call {
                            return Ok(BlockStep::NotACall {
                                at: pos,
                                replay_from: raw_start,
                            });
                        } else {
                            ctx.text(&std::mem::take(&mut self.space));
                            ctx.text(raw);
                            self.state = State::Between;
                        }
                    }
                    TagStep::Done(used) => {
                        pos += used;
                        let (in_call, raw_start) = (*in_call, *raw_start);
                        let back = if in_call {
                            State::InCall
                        } else {
                            State::Between
                        };
                        self.state = back;
                        // The reader is lent out while its tag is acted on.
                        let tags = std::mem::take(&mut self.tags);
                        let tag = tags.tag();
                        if !in_call
                            && !self.seen_call
                            && !self.opens_call(tag)
                            && !tag.closes(&self.names.block)
                        {
                            // The first thing in the block is not a call: it is not a block.
                            return Ok(BlockStep::NotACall {
                                at: pos,
                                replay_from: raw_start,
                            });
                        }
                        let ended =
                            self.structure(tag, tags.raw(), raw_start, in_call, ctx.pos(pos), ctx);
                        self.tags = tags;
                        if ended? {
                            return Ok(BlockStep::Done(pos));
                        }
                    }
                },
                State::Param(param) => {
                    let Param { kind, scan } = param;
                    let kind = *kind;
                    let buffer = &mut self.buffer;
                    let limit = ctx.calls.limit;
                    let mut failed = None;
                    let step = scan.feed(
                        &self.names,
                        &mut self.tags,
                        &mut self.held,
                        &input[pos..],
                        &mut |piece| {
                            if failed.is_some() {
                                return;
                            }
                            let result = if kind == ParamKind::String {
                                let mut result = Ok(());
                                escape_with(piece, &mut |run| {
                                    if result.is_ok() {
                                        result = ctx.args(run);
                                    }
                                });
                                result
                            } else if buffer.len() + piece.len() > limit {
                                Err(Error::LimitExceeded {
                                    stage: STAGE,
                                    what: "a parameter value",
                                    limit,
                                })
                            } else {
                                buffer.push_str(piece);
                                Ok(())
                            };
                            if let Err(error) = result {
                                failed = Some(error);
                            }
                        },
                    );
                    if let Some(error) = failed {
                        return Err(error);
                    }
                    match step {
                        ValueStep::More => return Ok(BlockStep::More),
                        ValueStep::End { used, tag } => {
                            pos += used;
                            self.end_value(ctx)?;
                            self.state = State::InCall;
                            if tag {
                                // Inside a call a tag never starts a call: no
                                // start offset. The reader is lent out meanwhile.
                                let tags = std::mem::take(&mut self.tags);
                                let ended = self.structure(
                                    tags.tag(),
                                    tags.raw(),
                                    0,
                                    true,
                                    ctx.pos(pos),
                                    ctx,
                                );
                                self.tags = tags;
                                if ended? {
                                    return Ok(BlockStep::Done(pos));
                                }
                            }
                        }
                    }
                }
            }
        }
        Ok(BlockStep::More)
    }

    /// Acts on a tag read between calls or parameters; true when the block ended.
    fn structure(
        &mut self,
        tag: &Tag,
        raw: &str,
        raw_start: usize,
        in_call: bool,
        raw_end: usize,
        ctx: &mut BlockContext<'_>,
    ) -> Result<bool, Error> {
        let names = &self.names;
        let ends_block = tag.closes(&names.block);
        if in_call {
            let keyed = names.style == Style::Keyed;
            if keyed && names.opens_param(tag) {
                self.state = State::Key(String::new());
            } else if keyed && is_bare(tag) && tag.opens(&names.param) {
                match self.key.take() {
                    Some(key) => self.start_keyed_value(key.trim(), raw, ctx)?,
                    None => ctx.fault(
                        InvalidCallKind::MalformedArguments,
                        "an `<arg_value>` without an `<arg_key>`",
                    ),
                }
            } else if keyed && tag.closes(GLM_KEY) {
                if self.key.is_none() {
                    ctx.fault(InvalidCallKind::MalformedArguments, "a stray `</arg_key>`");
                }
            } else if let Some(param) = names.name_of(tag, &names.param) {
                if !valid_name(param) {
                    ctx.fault(
                        InvalidCallKind::MalformedArguments,
                        format!("malformed parameter name in `{raw}`"),
                    );
                }
                let kind = ctx.param_kind(param);
                self.start_value(param, kind, ctx)?;
            } else if ends_block || (tag.closes(&names.call) && names.style != Style::Inline) {
                self.end_call(raw_end, ctx)?;
                self.state = State::Between;
                return Ok(ends_block);
            } else if tag.closes(&names.call) {
                self.close_args(ctx)?;
                self.state = State::Between;
            } else if !tag.closes(&names.param) {
                ctx.fault(
                    InvalidCallKind::MalformedArguments,
                    format!("unexpected `{raw}` in a call"),
                );
            }
            return Ok(false);
        }
        if let Some(name) = names.name_of(tag, &names.call) {
            self.space.clear();
            self.seen_call = true;
            self.end_call(raw_start, ctx)?;
            ctx.begin(raw_start);
            ctx.name(name);
            self.state = State::InCall;
        } else if ends_block {
            self.space.clear();
            self.end_call(raw_end, ctx)?;
        } else {
            ctx.text(&std::mem::take(&mut self.space));
            ctx.text(raw);
        }
        Ok(ends_block)
    }

    fn opens_call(&self, tag: &Tag) -> bool {
        self.names.name_of(tag, &self.names.call).is_some()
    }

    /// Starts the GLM value of `key`, read from an `<arg_key>`.
    fn start_keyed_value(
        &mut self,
        key: &str,
        raw: &str,
        ctx: &mut BlockContext<'_>,
    ) -> Result<(), Error> {
        if !valid_name(key) {
            ctx.fault(
                InvalidCallKind::MalformedArguments,
                format!("malformed argument key before `{raw}`"),
            );
        }
        let kind = ctx.param_kind(key);
        self.start_value(key, kind, ctx)
    }

    fn start_value(
        &mut self,
        param: &str,
        kind: ParamKind,
        ctx: &mut BlockContext<'_>,
    ) -> Result<(), Error> {
        // The member's start, written straight into the arguments.
        ctx.args(if ctx.args_empty() { "{\"" } else { ", \"" })?;
        let mut result = Ok(());
        escape_with(param, &mut |run| {
            if result.is_ok() {
                result = ctx.args(run);
            }
        });
        result?;
        ctx.args(if kind == ParamKind::String {
            "\": \""
        } else {
            "\": "
        })?;
        self.buffer.clear();
        self.state = State::Param(Param {
            kind,
            scan: ValueScan::new(),
        });
        Ok(())
    }

    fn end_value(&mut self, ctx: &mut BlockContext<'_>) -> Result<(), Error> {
        let State::Param(param) = &mut self.state else {
            return Ok(());
        };
        if param.kind == ParamKind::String {
            return ctx.args("\"");
        }
        ctx.args(&param.kind.json(&self.buffer))
    }

    /// The text ended inside the block; false when it held no call (it was not
    /// a block: its raw text is text).
    pub(super) fn end(&mut self, ctx: &mut BlockContext<'_>) -> Result<bool, Error> {
        if !self.seen_call {
            return Ok(false);
        }
        match &self.state {
            State::Param(param) if !param.scan.closed() => {
                ctx.fault(
                    InvalidCallKind::Truncated,
                    "the text ended inside a parameter",
                );
            }
            State::Param(_) => self.end_value(ctx)?,
            State::Name(name) => {
                let name = name.trim().to_owned();
                if !valid_name(&name) {
                    ctx.abandon_call();
                    return Ok(false);
                }
                ctx.name(&name);
            }
            State::Key(_) => {
                ctx.fault(InvalidCallKind::Truncated, "the text ended inside a key");
            }
            State::Between | State::InCall | State::Tag { .. } => {}
        }
        self.end_call(ctx.raw_end(), ctx)?;
        Ok(true)
    }

    /// Completes the current call's arguments.
    fn close_args(&mut self, ctx: &mut BlockContext<'_>) -> Result<(), Error> {
        if ctx.in_call() && !self.args_closed {
            self.args_closed = true;
            ctx.args(if ctx.args_empty() { "{}" } else { "}" })?;
        }
        Ok(())
    }

    /// Ends the current call, if any, its markup ending at `raw_end`.
    fn end_call(&mut self, raw_end: usize, ctx: &mut BlockContext<'_>) -> Result<(), Error> {
        self.close_args(ctx)?;
        self.args_closed = false;
        if ctx.in_call() {
            ctx.end(raw_end)?;
        }
        Ok(())
    }
}

/// A GLM block whose first line is not a name: its raw text up to byte `at` of
/// the piece is text, and the call begun for it is dropped.
fn not_glm(at: usize, ctx: &mut BlockContext<'_>) -> BlockStep {
    ctx.abandon_call();
    BlockStep::NotACall {
        at,
        replay_from: ctx.pos(at),
    }
}

/// A parameter name as the dialects write them: no spaces, quotes or markup.
fn valid_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(|c: char| c.is_whitespace() || "=<>\"'/".contains(c))
}

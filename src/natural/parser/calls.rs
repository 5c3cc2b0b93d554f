//! The calls of one reply as the block parsers build them: numbering, the call
//! being read and the bad-output policy; [`BlockContext`], what a block parser
//! reads a piece with, and [`BlockStep`], what it answers.

use std::mem;

use super::emit::Emitter;
use super::tools::{Lookup, ToolTable};
use crate::Error;
use crate::message::ToolCallDelta;
use crate::message::{Event, InvalidCall, InvalidCallKind, Message, Metadata, Role, TextMessage};
use crate::natural::scan::skip_space;
use crate::schema::ParamKind;
use crate::service::Output;

/// The stage name in errors.
pub(super) const STAGE: &str = "natural tool use parser";

/// The most whitespace (or other waiting) between a block's opening markup and
/// its body.
pub(super) const PENDING_LIMIT: usize = 4096;

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

/// What a block parser did with a piece.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum BlockStep {
    /// Used it all; the block goes on.
    More,
    /// The block ended after this many bytes.
    Done(usize),
    /// Not a call after all: the block's raw text up to `replay_from` is text;
    /// the rest, up to byte `at` of the piece, is read again as prose.
    NotACall { at: usize, replay_from: usize },
    /// The block was a message's header and ended after `used` bytes; the
    /// message's body follows, read as `body` says.
    Body { used: usize, body: Body },
    /// The block ended at `replay_from` in its raw text, which it read past
    /// looking for more calls: the rest, up to byte `at` of the piece, is read
    /// again as prose.
    Ended { at: usize, replay_from: usize },
}

/// What feeding a block a piece gives: its step, or a fatal error.
pub(super) type Step = Result<BlockStep, Error>;

impl BlockStep {
    /// The step of a reader that was handed the piece from byte `used` on, as a
    /// step over the whole piece.
    pub(super) fn after(self, used: usize) -> BlockStep {
        match self {
            BlockStep::More => BlockStep::More,
            BlockStep::Done(n) => BlockStep::Done(used + n),
            BlockStep::NotACall { at, replay_from } => BlockStep::NotACall {
                at: used + at,
                replay_from,
            },
            BlockStep::Body { used: n, body } => BlockStep::Body {
                used: used + n,
                body,
            },
            BlockStep::Ended { at, replay_from } => BlockStep::Ended {
                at: used + at,
                replay_from,
            },
        }
    }
}

/// How a message's body is read after its header.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Body {
    /// As prose: text, and any markup in it.
    Text,
    /// As reasoning, up to the first of these markers; one that the dialect
    /// reads in the prose then opens what it opens there.
    Reasoning(&'static [&'static str]),
}

/// The calls of one reply: numbering, the call being read, and the raw text of
/// the current block (kept so that nothing of a bad call is lost).
#[derive(Debug)]
pub(super) struct Calls {
    next_index: u32,
    id_base: usize,
    current: Option<Current>,
    /// The raw text of the current block before the piece being read (which
    /// [`BlockContext::piece`] holds).
    pub(super) raw: String,
    pub(super) limit: usize,
    policy: OnInvalid,
    /// Transcript mode: ids written in calls are kept, so a call goes out whole
    /// when it ends (its id may come after its name).
    keep_ids: bool,
}

#[derive(Debug)]
struct Current {
    index: u32,
    /// Moved into the call's first delta when it starts streaming.
    id: String,
    /// The tool's own spelling once the name is known and good; moved into the
    /// call's first delta when it starts streaming.
    name: Option<String>,
    tool: Option<usize>,
    /// The name as written, kept when it names no known tool.
    written_name: String,
    /// The call named its tool (well or not).
    named: bool,
    args: String,
    /// How much of `args` has gone out in deltas.
    streamed: usize,
    started: bool,
    fault: Option<(InvalidCallKind, String)>,
    raw_start: usize,
}

impl Calls {
    /// Numbering starts after the `id_base` calls already in the conversation.
    pub(super) fn new(id_base: usize, limit: usize, policy: OnInvalid, keep_ids: bool) -> Self {
        Calls {
            next_index: 0,
            id_base,
            current: None,
            raw: String::new(),
            limit,
            policy,
            keep_ids,
        }
    }

    /// Starts a block whose opening tag was `tag`.
    pub(super) fn start_block(&mut self, tag: &str) -> Result<(), Error> {
        self.raw.clear();
        self.current = None;
        self.grow_raw(tag)
    }

    /// Adds block text, within the limit.
    pub(super) fn grow_raw(&mut self, text: &str) -> Result<(), Error> {
        if self.raw.len() + text.len() > self.limit {
            return Err(self.over_limit());
        }
        self.raw.push_str(text);
        Ok(())
    }

    /// The error of a block that goes on past the limit.
    pub(super) fn over_limit(&self) -> Error {
        Error::LimitExceeded {
            stage: STAGE,
            what: "a tool-call block",
            limit: self.limit,
        }
    }

    /// Hands out what the streaming call's arguments gained from the input
    /// piece `piece`, as one delta: one per call and piece, however the block
    /// parser cut the text. When the arguments gained the whole piece as it
    /// was, its `String` is moved into the delta; otherwise it is handed back.
    pub(super) fn flush_args(
        &mut self,
        piece: String,
        emit: &mut Emitter,
        out: &mut Output,
    ) -> Option<String> {
        let Some(call) = self.current.as_mut().filter(|call| call.started) else {
            return Some(piece);
        };
        let gained = &call.args[call.streamed..];
        if gained.is_empty() {
            return Some(piece);
        }
        let (delta, unused) = if gained == piece {
            (piece, None)
        } else {
            (gained.to_owned(), Some(piece))
        };
        call.streamed = call.args.len();
        emit.event(Event::call_arguments(call.index, delta), out);
        unused
    }
}

/// What a block parser reads one piece of input with: the calls, the output,
/// the request's tools, and where the piece starts in the block's raw text.
pub(super) struct BlockContext<'a> {
    pub(super) calls: &'a mut Calls,
    pub(super) emit: &'a mut Emitter,
    pub(super) out: &'a mut Output,
    pub(super) tools: &'a ToolTable,
    /// The piece being read, all of it: the block's raw text is `calls.raw`
    /// followed by it. Only the part the block uses joins `calls.raw`, so that
    /// a piece holding many blocks is not copied once per block.
    pub(super) piece: &'a str,
    /// Offset in the block's raw text of the part of the piece being read.
    pub(super) base: usize,
}

impl BlockContext<'_> {
    /// The offset in the block's raw text of byte `at` of the current piece.
    pub(super) fn pos(&self, at: usize) -> usize {
        self.base + at
    }

    /// The end of the block's raw text so far.
    pub(super) fn raw_end(&self) -> usize {
        self.calls.raw.len() + self.piece.len()
    }

    /// The block's raw text from `start` to `end`.
    pub(super) fn raw(&self, start: usize, end: usize) -> String {
        let kept = self.calls.raw.len();
        let mut raw = self.calls.raw[start.min(kept)..end.min(kept)].to_owned();
        raw.push_str(&self.piece[start.max(kept) - kept..end.max(kept) - kept]);
        raw
    }

    /// How the schema of the current call's tool types `param` (unknown
    /// without a known tool).
    pub(super) fn param_kind(&self, param: &str) -> ParamKind {
        match self.calls.current.as_ref().and_then(|call| call.tool) {
            Some(tool) => self.tools.param_kind(tool, param),
            None => ParamKind::Unknown,
        }
    }

    /// True when the current call has no argument text yet.
    pub(super) fn args_empty(&self) -> bool {
        self.calls
            .current
            .as_ref()
            .is_none_or(|call| call.args.is_empty())
    }

    /// Forgets the current call without handing anything out; its number goes
    /// to the next call.
    pub(super) fn abandon_call(&mut self) {
        if let Some(call) = self.calls.current.take() {
            self.calls.next_index = call.index;
        }
    }

    /// The first byte of `bytes` from `pos` on that is not whitespace, or the
    /// step to answer while there is none: more, or `give_up(bytes.len())`
    /// once the block's raw text from `since` on is longer than
    /// [`PENDING_LIMIT`].
    pub(super) fn skip_space(
        &self,
        bytes: &[u8],
        pos: usize,
        since: usize,
        give_up: impl FnOnce(usize) -> BlockStep,
    ) -> Result<usize, BlockStep> {
        match skip_space(bytes, pos) {
            Some(pos) => Ok(pos),
            None if self.pos(bytes.len()) - since > PENDING_LIMIT => Err(give_up(bytes.len())),
            None => Err(BlockStep::More),
        }
    }

    /// What a block read from byte `at` of the piece on is not a call. Before
    /// any call (`last` is `None`) the block is text up to there; after calls,
    /// the block ended at `last`, the end of its last call, and what it read
    /// past it is read again as prose.
    pub(super) fn not_a_call(&self, at: usize, last: Option<usize>) -> BlockStep {
        match last {
            None => BlockStep::NotACall {
                at,
                replay_from: self.pos(at),
            },
            Some(replay_from) => BlockStep::Ended { at, replay_from },
        }
    }

    /// True when the current call has named its tool (well or not).
    pub(super) fn named(&self) -> bool {
        self.calls.current.as_ref().is_some_and(|call| call.named)
    }

    /// The text ended inside the block: its raw text from `from` on, read past
    /// the block's last call, is text — unless it is only whitespace, which
    /// goes as it does after any block.
    pub(super) fn give_back(&mut self, from: usize) {
        let rest = self.raw(from, self.raw_end());
        if !rest.bytes().all(crate::natural::scan::is_space) {
            self.emit.text(&rest);
        }
    }

    /// True while a call is being read.
    pub(super) fn in_call(&self) -> bool {
        self.calls.current.is_some()
    }

    /// A call starts at `raw_start` in the block's raw text.
    pub(super) fn begin(&mut self, raw_start: usize) {
        let index = self.calls.next_index;
        self.calls.next_index += 1;
        self.calls.current = Some(Current {
            index,
            id: call_id(self.calls.id_base + index as usize + 1),
            name: None,
            tool: None,
            written_name: String::new(),
            named: false,
            args: String::new(),
            streamed: 0,
            started: false,
            fault: None,
            raw_start,
        });
    }

    /// The call gives its own id: kept in transcript mode, ignored otherwise.
    pub(super) fn written_id(&mut self, id: &str) {
        if self.calls.keep_ids {
            self.model_id(id);
        }
    }

    /// The call's id is part of the model's format (Kimi K2's `functions.F:0`,
    /// which the model reads back in the conversation): kept in every mode.
    /// Given before [`name`](Self::name), which may start the call's streaming.
    pub(super) fn model_id(&mut self, id: &str) {
        if let Some(call) = self.calls.current.as_mut()
            && !call.started
        {
            id.clone_into(&mut call.id);
        }
    }

    /// The call names its tool. Unknown names are faults; a known name starts
    /// the call's streaming (in transcript mode the call goes out when it ends).
    pub(super) fn name(&mut self, written: &str) {
        let tools = self.tools;
        let Some(call) = self.calls.current.as_mut() else {
            return;
        };
        if call.named {
            return;
        }
        call.named = true;
        let written = written.trim();
        match tools.lookup(written) {
            _ if written.is_empty() => {
                set_fault(
                    call,
                    InvalidCallKind::MalformedArguments,
                    "the call names no tool".into(),
                );
            }
            Lookup::Known(index) => {
                call.name = Some(tools.entry(index).spec.name.clone());
                call.tool = Some(index);
            }
            Lookup::Any => call.name = Some(written.to_owned()),
            Lookup::Unknown => {
                let message = format!(
                    "there is no tool named `{written}`; the tools are: {}",
                    tools.names()
                );
                written.clone_into(&mut call.written_name);
                set_fault(call, InvalidCallKind::UnknownTool, message);
            }
            Lookup::NotAllowed => {
                written.clone_into(&mut call.written_name);
                let message =
                    format!("the request's tool_choice does not allow calling `{written}`");
                set_fault(call, InvalidCallKind::NotAllowed, message);
            }
        }
        self.start_streaming();
    }

    /// A piece of the arguments' JSON text. It goes out with the rest of the
    /// input piece's arguments (see [`Calls::flush_args`]), or when the call
    /// ends.
    pub(super) fn args(&mut self, piece: &str) -> Result<(), Error> {
        let limit = self.calls.limit;
        let Some(call) = self.calls.current.as_mut() else {
            return Ok(());
        };
        if call.args.len() + piece.len() > limit {
            return Err(Error::LimitExceeded {
                stage: STAGE,
                what: "a tool call's arguments",
                limit,
            });
        }
        if call.args.capacity() == 0 {
            // Most arguments are short: one allocation, not a growth per piece.
            call.args.reserve(piece.len().max(64));
        }
        call.args.push_str(piece);
        Ok(())
    }

    /// The current call is bad; the first fault found is kept.
    pub(super) fn fault(&mut self, kind: InvalidCallKind, message: impl Into<String>) {
        if let Some(call) = self.calls.current.as_mut() {
            set_fault(call, kind, message.into());
        }
    }

    /// Text found inside a block but outside any call.
    pub(super) fn text(&mut self, text: &str) {
        self.emit.text(text);
    }

    /// The current call's markup ended at `raw_end` in the block's raw text:
    /// checks it and hands it out by the policy.
    pub(super) fn end(&mut self, raw_end: usize) -> Result<(), Error> {
        let Some(mut call) = self.calls.current.take() else {
            return Ok(());
        };
        if call.fault.is_none() {
            if !call.started && call.name.is_none() {
                set_fault(
                    &mut call,
                    InvalidCallKind::MalformedArguments,
                    "the call names no tool".into(),
                );
            } else if let Err((kind, message)) = self.tools.check(call.tool, &call.args) {
                set_fault(&mut call, kind, message);
            }
        }
        if call.started && call.streamed < call.args.len() {
            // What is left of a streaming call's arguments goes out before the
            // verdict; all of them, moved, when none went out before.
            let rest = match call.streamed {
                0 => mem::take(&mut call.args),
                streamed => call.args[streamed..].to_owned(),
            };
            self.emit
                .event(Event::call_arguments(call.index, rest), self.out);
        }
        let Some((kind, message)) = call.fault.take() else {
            if !call.started {
                let name = call.name.take().unwrap_or_default();
                self.emit_whole(call.index, mem::take(&mut call.id), name, call.args);
            }
            return Ok(());
        };
        let raw = self.raw(call.raw_start.min(raw_end), raw_end);
        let invalid = InvalidCall {
            kind,
            message,
            raw: Some(raw),
        };
        match self.calls.policy {
            OnInvalid::Error => Err(Error::InvalidToolCall {
                stage: STAGE,
                invalid,
            }),
            _ if call.started => {
                self.emit_invalid(call.index, invalid);
                Ok(())
            }
            OnInvalid::Text => {
                let mut metadata = Metadata::new();
                let error = serde_json::json!({"kind": invalid.kind, "message": invalid.message});
                metadata.insert("parse_error", error);
                let message = Message::Text(TextMessage {
                    role: Role::Assistant,
                    text: invalid.raw.unwrap_or_default(),
                    metadata,
                });
                self.emit.event(Event::message(message), self.out);
                Ok(())
            }
            OnInvalid::Mark => {
                let name = call
                    .name
                    .take()
                    .unwrap_or_else(|| mem::take(&mut call.written_name));
                self.emit_whole(call.index, mem::take(&mut call.id), name, call.args);
                self.emit_invalid(call.index, invalid);
                Ok(())
            }
        }
    }

    /// Starts streaming the current call once its name is known and good.
    fn start_streaming(&mut self) {
        let Some(call) = self.calls.current.as_mut() else {
            return;
        };
        if self.calls.keep_ids || call.started || call.fault.is_some() {
            return;
        }
        let Some(name) = call.name.take() else {
            return;
        };
        call.started = true;
        let start = Event::call_start(call.index, mem::take(&mut call.id), name);
        self.emit.event(start, self.out);
    }

    /// A call that did not stream: its first delta, then its arguments.
    fn emit_whole(&mut self, index: u32, id: String, name: String, args: String) {
        self.emit
            .event(Event::call_start(index, id, name), self.out);
        if !args.is_empty() {
            self.emit
                .event(Event::call_arguments(index, args), self.out);
        }
    }

    fn emit_invalid(&mut self, index: u32, invalid: InvalidCall) {
        let mut delta = ToolCallDelta::new(index);
        delta.details_mut().invalid = Some(invalid);
        self.emit.event(Event::from(delta), self.out);
    }
}

/// `call_N`, written without `format!`'s machinery: it runs once per call.
fn call_id(n: usize) -> String {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let mut id = String::with_capacity(5 + digits.len() - at);
    id.push_str("call_");
    id.extend(digits[at..].iter().map(|&digit| char::from(digit)));
    id
}

fn set_fault(call: &mut Current, kind: InvalidCallKind, message: String) {
    call.fault.get_or_insert((kind, message));
}

#[cfg(test)]
mod tests {
    #[test]
    fn call_ids_are_call_and_the_number() {
        for n in [0, 1, 9, 10, 42, 1_000_007, usize::MAX] {
            assert_eq!(super::call_id(n), format!("call_{n}"));
        }
    }
}

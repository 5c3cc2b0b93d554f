//! What the parser hands out: text (coalesced per input piece), reasoning, and
//! tool calls with their validation and the bad-output policy.

use std::mem;

use serde_json::Value;

use super::OnInvalid;
use super::tools::{Lookup, ToolTable};
use crate::message::TextMessage;
use crate::service::Output;
use crate::{
    Error, Event, InvalidCall, InvalidCallKind, Message, Metadata, ReasoningDelta, Role, TextDelta,
    ToolCallDelta,
};

/// The stage name in errors.
pub(super) const STAGE: &str = "natural tool use parser";

/// Queues the parser's output: text is gathered and handed out as one delta per
/// input piece; metadata that arrived with the input rides on the first event
/// handed out after it.
#[derive(Debug, Default)]
pub(super) struct Emitter {
    text: String,
    metadata: Metadata,
    /// While set, events wait here (a JSON-protocol candidate not known yet).
    held: Option<Held>,
}

#[derive(Debug)]
struct Held {
    events: Vec<Event>,
    metadata: Metadata,
}

impl Emitter {
    /// Metadata that came with the input.
    pub(super) fn add_metadata(&mut self, metadata: &Metadata) {
        self.metadata.merge_missing(metadata);
    }

    /// Text for the output.
    pub(super) fn text(&mut self, text: &str) {
        self.text.push_str(text);
    }

    /// Reasoning for the output.
    pub(super) fn reasoning(&mut self, text: &str, out: &mut Output) {
        if !text.is_empty() {
            self.event(Event::reasoning(text), out);
        }
    }

    /// Hands out the gathered text.
    pub(super) fn flush(&mut self, out: &mut Output) {
        if !self.text.is_empty() {
            let delta = TextDelta {
                text: mem::take(&mut self.text),
                metadata: mem::take(&mut self.metadata),
            };
            self.push(Event::TextDelta(delta), out);
        }
    }

    /// Keeps `buffer`'s memory for the text to come when the gathered text has
    /// none (it was just handed out): one allocation less per input piece.
    pub(super) fn recycle(&mut self, mut buffer: String) {
        if self.text.capacity() == 0 {
            buffer.clear();
            self.text = buffer;
        }
    }

    /// Hands out pending metadata on an empty text delta, so that it is not lost
    /// when the input produced nothing to carry it.
    pub(super) fn flush_metadata(&mut self, out: &mut Output) {
        self.flush(out);
        if !self.metadata.is_empty() {
            let delta = TextDelta {
                text: String::new(),
                metadata: mem::take(&mut self.metadata),
            };
            self.push(Event::TextDelta(delta), out);
        }
    }

    /// Hands out an event after the gathered text, with pending metadata.
    pub(super) fn event(&mut self, mut event: Event, out: &mut Output) {
        self.flush(out);
        if !self.metadata.is_empty() {
            let metadata = mem::take(&mut self.metadata);
            match &mut event {
                Event::TextDelta(TextDelta { metadata: m, .. })
                | Event::ReasoningDelta(ReasoningDelta { metadata: m, .. }) => {
                    m.merge_missing(&metadata)
                }
                Event::ToolCallDelta(delta) => delta.metadata.merge_missing(&metadata),
                Event::Message { message } => message.metadata_mut().merge_missing(&metadata),
                Event::Usage(_) | Event::Finish { .. } => self.metadata = metadata,
            }
        }
        self.push(event, out);
    }

    /// From now on, keeps events back until [`release`](Emitter::release) or
    /// [`discard`](Emitter::discard).
    pub(super) fn hold(&mut self, out: &mut Output) {
        self.flush(out);
        self.held = Some(Held {
            events: Vec::new(),
            metadata: self.metadata.clone(),
        });
    }

    /// Hands out the events kept back.
    pub(super) fn release(&mut self, out: &mut Output) {
        self.flush(out);
        if let Some(held) = self.held.take() {
            out.extend(held.events);
        }
    }

    /// Forgets the events kept back (and restores the metadata they took).
    pub(super) fn discard(&mut self) {
        self.text.clear();
        if let Some(held) = self.held.take() {
            self.metadata = held.metadata;
        }
    }

    fn push(&mut self, event: Event, out: &mut Output) {
        match &mut self.held {
            Some(held) => held.events.push(event),
            None => out.push(event),
        }
    }
}

/// The calls of one reply: numbering, the call being read, and the raw text of
/// the current block (kept so that nothing of a bad call is lost).
#[derive(Debug)]
pub(super) struct Calls {
    next_index: u32,
    id_base: usize,
    current: Option<Current>,
    /// The raw text of the current block before the piece being read (which
    /// [`Ctx::piece`] holds).
    pub(super) raw: String,
    pub(super) limit: usize,
    pub(super) policy: OnInvalid,
    /// Transcript mode: ids written in calls are kept, so a call goes out whole
    /// when it ends (its id may come after its name).
    keep_ids: bool,
}

#[derive(Debug)]
struct Current {
    index: u32,
    id: String,
    name: Option<String>,
    tool: Option<usize>,
    written_name: String,
    args: String,
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
            return Err(Error::LimitExceeded {
                stage: STAGE,
                what: "a tool-call block",
                limit: self.limit,
            });
        }
        self.raw.push_str(text);
        Ok(())
    }
}

/// What a block parser uses while it reads one piece of input: the calls, the
/// output, the request's tools, and where the piece starts in the block's raw
/// text.
pub(super) struct Ctx<'a> {
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

impl Ctx<'_> {
    /// The offset in the block's raw text of byte `at` of the current piece.
    pub(super) fn pos(&self, at: usize) -> usize {
        self.base + at
    }

    /// The end of the block's raw text so far.
    pub(super) fn raw_end(&self) -> usize {
        self.calls.raw.len() + self.piece.len()
    }

    /// The block's raw text from `start` to `end`.
    fn raw(&self, start: usize, end: usize) -> String {
        let kept = self.calls.raw.len();
        let mut raw = self.calls.raw[start.min(kept)..end.min(kept)].to_owned();
        raw.push_str(&self.piece[start.max(kept) - kept..end.max(kept) - kept]);
        raw
    }

    /// The schema of the current call's tool, when it has one.
    pub(super) fn schema(&self) -> Option<&Value> {
        let tool = self.calls.current.as_ref()?.tool?;
        Some(&self.tools.entry(tool).spec.parameters)
    }

    /// True when the current call has no argument text yet.
    pub(super) fn args_empty(&self) -> bool {
        self.calls
            .current
            .as_ref()
            .is_none_or(|call| call.args.is_empty())
    }

    /// Forgets the current call without handing anything out.
    pub(super) fn abandon_call(&mut self) {
        self.calls.current = None;
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
            id: format!("call_{}", self.calls.id_base + index as usize + 1),
            name: None,
            tool: None,
            written_name: String::new(),
            args: String::new(),
            started: false,
            fault: None,
            raw_start,
        });
    }

    /// The call gives its own id: kept in transcript mode, ignored otherwise.
    pub(super) fn written_id(&mut self, id: &str) {
        if let Some(call) = self.calls.current.as_mut()
            && self.calls.keep_ids
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
        if call.name.is_some() || !call.written_name.is_empty() {
            return;
        }
        let written = written.trim();
        call.written_name = written.to_owned();
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
                set_fault(call, InvalidCallKind::UnknownTool, message);
            }
        }
        self.start_streaming();
    }

    /// A piece of the arguments' JSON text.
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
        call.args.push_str(piece);
        if call.started && !piece.is_empty() {
            let event = Event::call_arguments(call.index, piece);
            self.emit.event(event, self.out);
        }
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
            if call.name.is_none() {
                set_fault(
                    &mut call,
                    InvalidCallKind::MalformedArguments,
                    "the call names no tool".into(),
                );
            } else if let Err((kind, message)) = self.check(&call) {
                set_fault(&mut call, kind, message);
            }
        }
        let Some((kind, message)) = call.fault.take() else {
            if !call.started {
                self.emit_start(&call);
                if !call.args.is_empty() {
                    self.emit
                        .event(Event::call_arguments(call.index, call.args), self.out);
                }
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
                let mut metadata = Metadata::default();
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
                    .clone()
                    .unwrap_or_else(|| call.written_name.clone());
                self.emit.event(
                    Event::call_start(call.index, call.id.clone(), name),
                    self.out,
                );
                if !call.args.is_empty() {
                    self.emit
                        .event(Event::call_arguments(call.index, call.args), self.out);
                }
                self.emit_invalid(call.index, invalid);
                Ok(())
            }
        }
    }

    fn check(&self, call: &Current) -> Result<(), (InvalidCallKind, String)> {
        let arguments = if call.args.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            serde_json::from_str(&call.args).map_err(|error| {
                (
                    InvalidCallKind::MalformedArguments,
                    format!("the arguments are not valid JSON: {error}"),
                )
            })?
        };
        if !arguments.is_object() {
            return Err((
                InvalidCallKind::MalformedArguments,
                "the arguments are not a JSON object".into(),
            ));
        }
        let Some(tool) = call.tool else {
            return Ok(());
        };
        let entry = self.tools.entry(tool);
        match &entry.validator {
            Some(validator) => crate::schema::check(validator, &entry.spec.name, &arguments)
                .map_err(|message| (InvalidCallKind::SchemaViolation, message)),
            None => Ok(()),
        }
    }

    /// Starts streaming the current call once its name is known and good.
    fn start_streaming(&mut self) {
        let Some(call) = self.calls.current.as_mut() else {
            return;
        };
        if self.calls.keep_ids || call.started || call.fault.is_some() || call.name.is_none() {
            return;
        }
        call.started = true;
        let (index, args) = (call.index, call.args.clone());
        let call = self.calls.current.as_ref().expect("checked above");
        let start = Event::call_start(
            index,
            call.id.clone(),
            call.name.clone().unwrap_or_default(),
        );
        self.emit.event(start, self.out);
        if !args.is_empty() {
            self.emit
                .event(Event::call_arguments(index, args), self.out);
        }
    }

    fn emit_start(&mut self, call: &Current) {
        let name = call.name.clone().unwrap_or_default();
        self.emit.event(
            Event::call_start(call.index, call.id.clone(), name),
            self.out,
        );
    }

    fn emit_invalid(&mut self, index: u32, invalid: InvalidCall) {
        let delta = ToolCallDelta {
            invalid: Some(invalid),
            ..ToolCallDelta::new(index)
        };
        self.emit.event(Event::from(delta), self.out);
    }
}

fn set_fault(call: &mut Current, kind: InvalidCallKind, message: String) {
    call.fault.get_or_insert((kind, message));
}

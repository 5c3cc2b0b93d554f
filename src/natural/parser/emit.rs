//! How the parser hands its output out: text coalesced per input piece, or
//! passed through whole; metadata riding on the next event; events held back
//! while a candidate block is undecided.

use std::mem;

use crate::message::{Event, Metadata, ReasoningDelta, TextDelta};
use crate::service::Output;

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

    /// True when nothing is gathered or held: a piece of plain text may then go
    /// out as it came ([`pass`](Emitter::pass)).
    pub(super) fn is_idle(&self) -> bool {
        self.text.is_empty() && self.held.is_none()
    }

    /// Hands out a piece of plain text as it came, its `String` moved, not
    /// copied; pending metadata takes precedence over its own.
    pub(super) fn pass(&mut self, mut delta: TextDelta, out: &mut Output) {
        debug_assert!(self.is_idle());
        if !self.metadata.is_empty() {
            let mut metadata = mem::take(&mut self.metadata);
            metadata.merge_missing(&delta.metadata);
            delta.metadata = metadata;
        }
        self.push(Event::TextDelta(delta), out);
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

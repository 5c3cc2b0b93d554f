//! The fast path's tap: what the gateway needs of an upstream answer that it
//! forwards unchanged — the usage, the finish reason, an error — read from the
//! bytes as they pass, without decoding or re-encoding them; and what of
//! them goes on to the client. Pure: bytes in, bytes out and [`Tapped`].
//!
//! A stream is scanned line by line, in place, and only its whole lines go on
//! to the client ([`Tap::push`]): the start of a line not yet ended is held
//! back until its end comes (at most [`DEFAULT_MAX_EVENT_BYTES`], as the full
//! path's decoder), so that an error line is scrubbed of the gateway's
//! secrets whole, wherever the upstream's pieces cut it; and the usage the
//! gateway asked for, that the client did not, is left out (OpenAI's usage
//! chunk, or a `usage` beside the choices). Only the few SSE lines that
//! carry what is wanted are kept, one of each kind (the last: OpenAI's
//! chunks with a `finish_reason` or a `usage` and its `[DONE]`, Anthropic's
//! `message_start`, `message_delta` and `message_stop`, Gemini's chunks with
//! `usageMetadata` or a `finishReason`; every error), and whether the model
//! called a function (OpenAI and Gemini name a call's end `stop`, which the
//! lifters read as `tool_calls`). When the answer ends, those lines — their
//! content left out, a call stood for by one of a fixed shape — are read by
//! the wire's own decoder ([`BodyDecoder`]) and lifter, so that the tokens and
//! the reason are the full path's. A whole body is kept and read the same
//! way. What goes on is slices of the upstream's pieces: a piece of whole
//! lines costs no allocation, a line cut by a piece's end one (it goes on
//! whole), a scrubbed or rewritten line one.

use std::sync::LazyLock;

use bytes::Bytes;
use memchr::memmem::Finder;

use crate::provider::body::{BodyDecoder, is_stream};
use crate::provider::sse::DEFAULT_MAX_EVENT_BYTES;
use crate::provider::{Kind, Lowering, Secrets, Wire, WithWire};
use crate::service::{Machine, Output};
use crate::{Error, Event};

/// The most bytes of a whole body kept to read its usage: the providers'
/// default body limit.
const MAX_BODY: usize = crate::provider::body::DEFAULT_MAX_BODY_BYTES;

/// The most bytes of error lines kept.
const MAX_ERRORS: usize = 64 << 10;

/// What a forwarded answer said that the gateway keeps: its usage and finish
/// events and an error it carried, as the wire's lifter reads them.
#[derive(Debug, Default)]
pub(crate) struct Tapped {
    /// The `usage` and `finish` events, and an error, in their order.
    pub(crate) items: Vec<Result<Event, Error>>,
}

/// The tap on one forwarded answer.
#[derive(Debug)]
pub(crate) struct Tap {
    kind: Kind,
    reading: Reading,
    /// Scrubbed from a stream's error lines.
    secrets: Secrets,
    /// Whether an OpenAI stream's usage chunk is left out (the client did not
    /// ask for it).
    without_usage: bool,
}

#[derive(Debug)]
enum Reading {
    Stream(Box<Lines>),
    /// A whole body, kept (`None` once past [`MAX_BODY`]).
    Whole(Option<Vec<u8>>),
}

impl Tap {
    /// The tap on an answer of the wire `kind` with this `Content-Type`, to a
    /// request that streams or not (read as [`BodyDecoder::for_content_type`]
    /// reads it).
    pub(crate) fn new(kind: Kind, content_type: Option<&str>, streaming: bool) -> Self {
        let reading = match is_stream(content_type, streaming) {
            true => Reading::Stream(Box::default()),
            false => Reading::Whole(Some(Vec::new())),
        };
        Tap {
            kind,
            reading,
            secrets: Secrets::new(),
            without_usage: false,
        }
    }

    /// Scrubs `secrets` from a stream's error lines before they go on.
    pub(crate) fn scrubbing(mut self, secrets: Secrets) -> Self {
        self.secrets = secrets;
        self
    }

    /// Leaves an OpenAI stream's usage chunk (`choices: []` with a `usage`)
    /// out of what goes on, still counting it: for a client that did not ask
    /// for it (`stream_options.include_usage`).
    pub(crate) fn without_usage_chunk(mut self) -> Self {
        self.without_usage = true;
        self
    }

    /// What a whole answer `body` said, read as [`new`](Self::new) reads it
    /// (a JSON body without a copy).
    pub(crate) fn read(
        kind: Kind,
        content_type: Option<&str>,
        streaming: bool,
        body: Bytes,
    ) -> Tapped {
        let mut tap = Tap::new(kind, content_type, streaming);
        if let Reading::Whole(_) = tap.reading {
            return replay(kind, body, false);
        }
        match tap.push(body, &mut Vec::new()) {
            Ok(()) => tap.finish(),
            Err(error) => Tapped {
                items: vec![Err(error)],
            },
        }
    }

    /// Reads the next piece of the answer, and adds to `out` what of it goes
    /// on to the client now: of a stream, the lines it ends (the start of
    /// one held back from an earlier piece first), error lines scrubbed, a
    /// usage chunk left out as told; of a whole body, the piece. Slices of
    /// `chunk` but for a line cut by a piece's end or scrubbed. An error when
    /// a line passes [`DEFAULT_MAX_EVENT_BYTES`] (the full path's decoder
    /// fails there too): nothing more may go on.
    pub(crate) fn push(&mut self, chunk: Bytes, out: &mut Vec<Bytes>) -> Result<(), Error> {
        let Tap {
            kind,
            reading,
            secrets,
            without_usage,
        } = self;
        match reading {
            Reading::Stream(lines) => {
                let told = Told {
                    kind: *kind,
                    secrets,
                    without_usage: *without_usage,
                };
                lines.push(&told, chunk, out)
            }
            Reading::Whole(kept) => {
                if let Some(body) = kept {
                    match body.len() + chunk.len() > MAX_BODY {
                        true => *kept = None,
                        false => body.extend_from_slice(&chunk),
                    }
                }
                out.push(chunk);
                Ok(())
            }
        }
    }

    /// What of the stream is still held back when it ends without a line's
    /// end, scrubbed: the client gets it as the upstream's last bytes.
    pub(crate) fn rest(&mut self) -> Option<Bytes> {
        let Reading::Stream(lines) = &mut self.reading else {
            return None;
        };
        let rest = std::mem::take(&mut lines.partial);
        (!rest.is_empty()).then(|| scrubbed(&self.secrets, Bytes::from(rest)))
    }

    /// Whether what passed so far ends between two events of a stream, where
    /// a keep-alive or an error event may go.
    pub(crate) fn between_events(&self) -> bool {
        match &self.reading {
            Reading::Stream(lines) => lines.partial.is_empty() && !lines.in_event,
            Reading::Whole(_) => false,
        }
    }

    /// The answer ended: what it said.
    pub(crate) fn finish(self) -> Tapped {
        let (body, streamed) = match self.reading {
            Reading::Stream(lines) => (lines.kept(self.kind), true),
            Reading::Whole(Some(body)) => (body, false),
            Reading::Whole(None) => return Tapped::default(),
        };
        replay(self.kind, Bytes::from(body), streamed)
    }
}

/// What the wire `kind`'s decoder reads in `body`: kept lines of a stream, or
/// a whole body.
fn replay(kind: Kind, body: Bytes, streamed: bool) -> Tapped {
    let replay = Replay { body, streamed };
    let items = kind
        .with_wire(Lowering::default(), replay)
        .unwrap_or_default();
    Tapped { items }
}

/// The kept lines (or body) read by a wire's decoder.
struct Replay {
    body: Bytes,
    streamed: bool,
}

impl WithWire for Replay {
    type Output = Vec<Result<Event, Error>>;

    fn run<W: Wire>(self, wire: W) -> Self::Output {
        let lifter = wire.lifter();
        let mut decoder = match self.streamed {
            true => BodyDecoder::sse(lifter),
            false => BodyDecoder::json(lifter),
        };
        let mut out = Output::new();
        let mut items = Vec::new();
        let pushed = decoder.push(self.body, &mut out);
        let ended = pushed.and_then(|()| decoder.finish(&mut out));
        items.extend(out.drain().filter(wanted).map(Ok));
        if let Err(error) = ended {
            items.push(Err(error));
        }
        items
    }
}

/// Whether an event is one the gateway keeps.
fn wanted(event: &Event) -> bool {
    matches!(event, Event::Usage(_) | Event::Finish { .. })
}

/// What a kept line is, one slot each (errors are all kept).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// The first call of a function, replayed as one of a fixed shape.
    Call,
    /// The first piece of a refusal (OpenAI), replayed as one of a fixed
    /// shape.
    Refusal,
    Start,
    Usage,
    Finish,
    End,
    Error,
}

const SLOTS: usize = 7;

/// What a tap was told to do with the lines that go on.
struct Told<'a> {
    kind: Kind,
    secrets: &'a Secrets,
    without_usage: bool,
}

/// What becomes of a line.
#[derive(Debug, PartialEq, Eq)]
enum Fate {
    /// It goes on as it came.
    Passed,
    /// It goes on scrubbed (it carries an error).
    Scrubbed,
    /// It is left out.
    LeftOut,
    /// This goes on in its place (its end of line included).
    Replaced(Vec<u8>),
}

/// A stream's lines: the line cut by the last piece's end, and the lines kept.
#[derive(Debug, Default)]
struct Lines {
    /// The start of a line cut by the end of a piece, held back.
    partial: Vec<u8>,
    /// Whether an event is open (a field line came since the last blank line).
    in_event: bool,
    /// Whether the open event is left out (a usage chunk).
    leaving_out: bool,
    /// The kept lines, each with the order it came in.
    kept: [(u64, Vec<u8>); SLOTS],
    count: u64,
}

impl Lines {
    /// Reads a piece of the stream: what goes on of it into `out`.
    fn push(&mut self, told: &Told, chunk: Bytes, out: &mut Vec<Bytes>) -> Result<(), Error> {
        // The piece's bytes from `from` on go on, unless a line stops them.
        let mut from = 0;
        let mut start = 0;
        let pass = |out: &mut Vec<Bytes>, range: std::ops::Range<usize>| {
            if !range.is_empty() {
                out.push(chunk.slice(range));
            }
        };
        while let Some(end) = memchr::memchr(b'\n', &chunk[start..]).map(|at| start + at) {
            let next = end + 1;
            if self.partial.is_empty() {
                let fate = self.line(told, &chunk[start..end]);
                if fate != Fate::Passed {
                    pass(out, from..start);
                    from = next;
                }
                match fate {
                    Fate::Passed | Fate::LeftOut => {}
                    Fate::Scrubbed => out.push(scrubbed(told.secrets, chunk.slice(start..next))),
                    Fate::Replaced(line) => out.push(Bytes::from(line)),
                }
            } else {
                let mut whole = std::mem::take(&mut self.partial);
                whole.extend_from_slice(&chunk[start..next]);
                let fate = self.line(told, &whole[..whole.len() - 1]);
                let whole = Bytes::from(whole);
                match fate {
                    Fate::Passed => out.push(whole),
                    Fate::Scrubbed => out.push(scrubbed(told.secrets, whole)),
                    Fate::LeftOut => {}
                    Fate::Replaced(line) => out.push(Bytes::from(line)),
                }
                from = next;
            }
            start = next;
        }
        pass(out, from..start);
        let rest = &chunk[start..];
        if self.partial.len() + rest.len() > DEFAULT_MAX_EVENT_BYTES {
            self.partial = Vec::new();
            return Err(Error::LimitExceeded {
                stage: "sse",
                what: "an event",
                limit: DEFAULT_MAX_EVENT_BYTES,
            });
        }
        self.partial.extend_from_slice(rest);
        Ok(())
    }

    /// Reads one whole line (its `\n` taken off): what becomes of it.
    fn line(&mut self, told: &Told, line: &[u8]) -> Fate {
        let kind = told.kind;
        let ended = line.strip_suffix(b"\r");
        let line = ended.unwrap_or(line);
        self.in_event = !line.is_empty();
        if let Some((slot, standing)) = marks(kind, line) {
            let (order, kept) = &mut self.kept[slot as usize];
            if kept.is_empty() {
                self.count += 1;
                *order = self.count;
                kept.extend_from_slice(standing);
            }
        }
        let left_out = self.leaving_out;
        self.leaving_out &= self.in_event;
        let Some(slot) = classify(kind, line) else {
            return match left_out {
                true => Fate::LeftOut,
                false => Fate::Passed,
            };
        };
        self.count += 1;
        let (order, kept) = &mut self.kept[slot as usize];
        if slot != Slot::Error {
            kept.clear();
        } else if kept.len() + line.len() > MAX_ERRORS {
            return Fate::Scrubbed;
        }
        *order = self.count;
        kept.extend_from_slice(line);
        kept.extend_from_slice(b"\n\n");
        match slot {
            Slot::Error => Fate::Scrubbed,
            _ if left_out => Fate::LeftOut,
            Slot::Usage | Slot::Finish if told.without_usage && kind == Kind::OpenAiChat => {
                match without_usage(line) {
                    // A usage chunk.
                    Some(None) => {
                        self.leaving_out = true;
                        Fate::LeftOut
                    }
                    // A chunk with a usage beside its choices.
                    Some(Some(mut line)) => {
                        let end: &[u8] = if ended.is_some() { b"\r\n" } else { b"\n" };
                        line.extend_from_slice(end);
                        Fate::Replaced(line)
                    }
                    None => Fate::Passed,
                }
            }
            _ => Fate::Passed,
        }
    }

    /// The kept lines in the order they came, as a stream: their content
    /// left out ([`without_content`]).
    fn kept(mut self, kind: Kind) -> Vec<u8> {
        let content = [Slot::Usage as usize, Slot::Finish as usize];
        for slot in content {
            let kept = &mut self.kept[slot].1;
            if let Some(trimmed) = without_content(kind, kept) {
                *kept = trimmed;
            }
        }
        self.kept.sort_by_key(|(order, _)| *order);
        self.kept.into_iter().flat_map(|(_, line)| line).collect()
    }
}

/// `bytes` scrubbed of `secrets` (as text; bytes that are not UTF-8 as
/// [`String::from_utf8_lossy`] reads them); themselves when none shows.
fn scrubbed(secrets: &Secrets, bytes: Bytes) -> Bytes {
    let text = String::from_utf8_lossy(&bytes);
    match secrets.scrub(&text) {
        std::borrow::Cow::Owned(scrubbed) => Bytes::from(scrubbed),
        std::borrow::Cow::Borrowed(_) => bytes,
    }
}

/// An OpenAI chunk's `data:` line without the usage its lifter reads (an
/// object in `usage` or in Groq's `x_groq.usage`): `None` when it has none,
/// `Some(None)` when it is a usage chunk (`choices` empty), else the line with
/// those members taken out, the rest as it came.
fn without_usage(line: &[u8]) -> Option<Option<Vec<u8>>> {
    use serde_json::value::RawValue;
    /// A chunk's `usage`, `choices` and `x_groq`, read in place.
    #[derive(serde::Deserialize)]
    struct Chunk<'a> {
        #[serde(borrow)]
        usage: Option<&'a RawValue>,
        #[serde(borrow)]
        choices: Option<Vec<&'a RawValue>>,
        #[serde(borrow)]
        x_groq: Option<Groq<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct Groq<'a> {
        #[serde(borrow)]
        usage: Option<&'a RawValue>,
    }
    let data = line.strip_prefix(b"data:")?;
    let chunk: Chunk = serde_json::from_slice(data).ok()?;
    let groq = chunk.x_groq.and_then(|groq| groq.usage);
    let mut members: Vec<_> = [chunk.usage, groq]
        .into_iter()
        .flatten()
        .filter(|usage| usage.get().starts_with('{'))
        .map(|usage| member(line, usage.get()))
        .collect::<Option<_>>()?;
    if members.is_empty() {
        return None;
    }
    if chunk.choices.is_none_or(|choices| choices.is_empty()) {
        return Some(None);
    }
    members.sort_by_key(|member| member.start);
    let mut kept = Vec::with_capacity(line.len());
    let mut copied = 0;
    for member in members {
        kept.extend_from_slice(&line[copied..member.start]);
        copied = member.end;
    }
    kept.extend_from_slice(&line[copied..]);
    Some(Some(kept))
}

/// The bytes of `text` (a JSON object's) that make the member whose value is
/// `value`, a slice of it: its key and value and one comma beside them, with
/// the blanks between.
fn member(text: &[u8], value: &str) -> Option<std::ops::Range<usize>> {
    let value_at = value.as_ptr() as usize - text.as_ptr() as usize;
    let value_end = value_at + value.len();
    // Only blanks and `:` lie between a member's key and its value.
    let key_at = memchr::memmem::rfind(&text[..value_at], b"\"usage\"")?;
    let before = text[..key_at].trim_ascii_end();
    if let Some(kept) = before.strip_suffix(b",") {
        return Some(kept.len()..value_end);
    }
    let after = text[value_end..].trim_ascii_start();
    Some(match after.strip_prefix(b",") {
        Some(rest) => key_at..text.len() - rest.trim_ascii_start().len(),
        None => key_at..value_end,
    })
}

/// A Gemini call of a function, as the tap replays a stream's first.
const GEMINI_CALL: &[u8] = b"data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":{}}}]}}]}\n\n";

/// An OpenAI call of a function, as the tap replays a stream's first.
const OPENAI_CALL: &[u8] = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}}]}\n\n";

/// An OpenAI refusal, as the tap replays a stream's first piece of one.
const OPENAI_REFUSAL: &[u8] =
    b"data: {\"choices\":[{\"index\":0,\"delta\":{\"refusal\":\"r\"}}]}\n\n";

/// What `line`, of a stream of the wire `kind`, says that changes how its
/// lifter reads the end of the turn (OpenAI and Gemini name a call's end, and
/// OpenAI a refusal's, `stop`): its slot, and the line of a fixed shape that
/// stands for it.
fn marks(kind: Kind, line: &[u8]) -> Option<(Slot, &'static [u8])> {
    let data = line.strip_prefix(b"data:")?;
    match kind {
        Kind::OpenAiChat if TOOL_CALLS.with(data, b'[') => Some((Slot::Call, OPENAI_CALL)),
        Kind::OpenAiChat if REFUSAL.with_text(data) => Some((Slot::Refusal, OPENAI_REFUSAL)),
        Kind::Gemini if FUNCTION_CALL.with(data, b'{') => Some((Slot::Call, GEMINI_CALL)),
        _ => None,
    }
}

/// A kept `data:` line (and its blank line) with what the model said left
/// out — OpenAI's `delta`s, Gemini's `content`s — so that a piece of a
/// message read alone (the rest of a call's arguments) does not fail the
/// reading; `None` to keep it as it is.
fn without_content(kind: Kind, kept: &[u8]) -> Option<Vec<u8>> {
    let data = kept.strip_prefix(b"data:")?.trim_ascii();
    if kind == Kind::OpenAiChat {
        return without_deltas(kept, data);
    }
    if kind != Kind::Gemini {
        return None;
    }
    let mut json: serde_json::Value = serde_json::from_slice(data).ok()?;
    for item in json.get_mut("candidates")?.as_array_mut()? {
        item.as_object_mut()?.remove("content");
    }
    Some(format!("data: {json}\n\n").into_bytes())
}

/// An OpenAI chunk's kept line `kept`, whose JSON is `data`, with each
/// `delta` emptied (`{}`) in place and the rest as it came; `None` when
/// `data` is not JSON, or has no `delta`. (Read as a `Value` and written
/// again, a line cost the stream more than all its other lines' reading.)
fn without_deltas(kept: &[u8], data: &[u8]) -> Option<Vec<u8>> {
    use serde::de::{Deserialize, IgnoredAny};
    use serde_json::value::RawValue;
    serde_json::from_slice::<IgnoredAny>(data).ok()?;
    let mut trimmed = Vec::with_capacity(kept.len());
    let mut copied = 0;
    for value in DELTA.values(kept) {
        let mut reader = serde_json::Deserializer::from_slice(value);
        // Not a member's value (a string's text, once the line is JSON).
        let Ok(value) = <&RawValue>::deserialize(&mut reader) else {
            continue;
        };
        let value = span_of(kept, value.get().as_bytes());
        if value.start < copied {
            // Inside a delta emptied already.
            continue;
        }
        trimmed.extend_from_slice(&kept[copied..value.start]);
        trimmed.extend_from_slice(b"{}");
        copied = value.end;
    }
    if copied == 0 {
        return None;
    }
    trimmed.extend_from_slice(&kept[copied..]);
    Some(trimmed)
}

/// Where `part`, a slice of `whole`, lies in it.
pub(super) fn span_of(whole: &[u8], part: &[u8]) -> std::ops::Range<usize> {
    let start = part.as_ptr() as usize - whole.as_ptr() as usize;
    start..start + part.len()
}

/// A JSON key, found fast.
struct Key(LazyLock<Finder<'static>>);

macro_rules! key {
    ($name:ident, $key:literal) => {
        static $name: Key = Key(LazyLock::new(|| Finder::new($key)));
    };
}

key!(ERROR, "\"error\"");
key!(USAGE, "\"usage\"");
key!(FINISH_REASON, "\"finish_reason\"");
key!(TYPE, "\"type\"");
key!(USAGE_METADATA, "\"usageMetadata\"");
key!(GEMINI_FINISH, "\"finishReason\"");
key!(TOOL_CALLS, "\"tool_calls\"");
key!(DELTA, "\"delta\"");
key!(REFUSAL, "\"refusal\"");
key!(FUNCTION_CALL, "\"functionCall\"");

impl Key {
    /// Whether `json` holds this key with a value that starts with `first`
    /// (`{` for an object, `"` for a string: not `null`).
    fn with(&self, json: &[u8], first: u8) -> bool {
        self.values(json).any(|value| value.first() == Some(&first))
    }

    /// Whether `json` holds this key with a string value that is not empty.
    fn with_text(&self, json: &[u8]) -> bool {
        self.values(json)
            .any(|value| value.len() > 1 && value[0] == b'"' && value[1] != b'"')
    }

    /// What follows each of this key's places in `json`, from its value on
    /// ([`value_at`]). Found by [`Finder::find`] from each place on: a
    /// [`Finder::find_iter`] copies the searcher, which costs more than a
    /// search of a short line (several a line, on every line of a stream).
    fn values<'a>(&'a self, json: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
        let needle = self.0.needle().len();
        let mut from = 0;
        std::iter::from_fn(move || {
            let at = from + self.0.find(json.get(from..)?)?;
            from = at + needle;
            Some(value_at(json, from))
        })
    }

    /// The first string value of this key in `json`.
    fn string<'a>(&self, json: &'a [u8]) -> Option<&'a [u8]> {
        let at = self.0.find(json)?;
        let value = value_at(json, at + self.0.needle().len()).strip_prefix(b"\"")?;
        let end = memchr::memchr(b'"', value)?;
        Some(&value[..end])
    }
}

/// The value after a key that ends at `at`: past blanks, `:` and blanks (empty
/// where none follows).
fn value_at(json: &[u8], at: usize) -> &[u8] {
    let rest = json.get(at..).unwrap_or_default().trim_ascii_start();
    match rest.strip_prefix(b":") {
        Some(value) => value.trim_ascii_start(),
        None => &[],
    }
}

/// Which slot a line of a stream of the wire `kind` is kept in, if any.
fn classify(kind: Kind, line: &[u8]) -> Option<Slot> {
    let Some(data) = line.strip_prefix(b"data:") else {
        // Gemini appends an error object to a stream as raw JSON lines.
        let field = line.is_empty() || line.starts_with(b":") || field_line(line);
        return (kind == Kind::Gemini && !field).then_some(Slot::Error);
    };
    let data = data.strip_prefix(b" ").unwrap_or(data);
    match kind {
        Kind::OpenAiChat => {
            if data == b"[DONE]" {
                Some(Slot::End)
            } else if ERROR.with(data, b'{') {
                Some(Slot::Error)
            } else if FINISH_REASON.with(data, b'"') {
                Some(Slot::Finish)
            } else if USAGE.with(data, b'{') {
                Some(Slot::Usage)
            } else {
                None
            }
        }
        Kind::Anthropic => match TYPE.string(data)? {
            b"message_start" => Some(Slot::Start),
            b"message_delta" => Some(Slot::Finish),
            b"message_stop" => Some(Slot::End),
            b"error" => Some(Slot::Error),
            _ => None,
        },
        Kind::Gemini => {
            if ERROR.with(data, b'{') {
                Some(Slot::Error)
            } else if GEMINI_FINISH.with(data, b'"') {
                Some(Slot::Finish)
            } else if USAGE_METADATA.with(data, b'{') {
                Some(Slot::Usage)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Whether `line` is an SSE field other than `data` (`event:`, `id:`,
/// `retry:`).
fn field_line(line: &[u8]) -> bool {
    [&b"event"[..], b"id", b"retry"].iter().any(|name| {
        line.strip_prefix(*name)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(b":"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FinishReason;

    fn tapped(kind: Kind, pieces: &[&[u8]]) -> Vec<Result<Event, Error>> {
        let mut tap = Tap::new(kind, Some("text/event-stream"), true);
        for piece in pieces {
            push(&mut tap, piece);
        }
        tap.finish().items
    }

    /// Pushes `piece` into `tap`: what goes on of it, joined.
    fn push(tap: &mut Tap, piece: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        tap.push(Bytes::copy_from_slice(piece), &mut out).unwrap();
        out.concat()
    }

    #[test]
    fn an_openai_lines_deltas_are_emptied_in_place() {
        let trimmed = |line: &str| {
            without_content(Kind::OpenAiChat, line.as_bytes())
                .map(|line| String::from_utf8(line).unwrap())
        };
        let line = concat!(
            r#"data: {"choices":[{"index":0,"delta" : {"content":"a \"delta\": {}","#,
            r#""tool_calls":[{"delta":{"x":1}}]},"finish_reason":"stop"},"#,
            r#"{"delta":null,"index":1}],"usage":{"delta":"any"}}"#,
            "\n\n"
        );
        assert_eq!(
            trimmed(line).as_deref(),
            Some(concat!(
                r#"data: {"choices":[{"index":0,"delta" : {},"finish_reason":"stop"},"#,
                r#"{"delta":{},"index":1}],"usage":{"delta":{}}}"#,
                "\n\n"
            ))
        );
        assert_eq!(trimmed("data: {\"choices\":[],\"usage\":{}}\n\n"), None);
        assert_eq!(trimmed("data: {\"delta\":{\n\n"), None);
    }

    #[test]
    fn keys_are_found_with_values_of_their_kind_only() {
        assert!(USAGE.with(br#"{"usage": {"a":1}}"#, b'{'));
        assert!(!USAGE.with(br#"{"usage":null}"#, b'{'));
        assert!(!USAGE.with(br#"{"text":"\"usage\":{"}"#, b'{'));
        assert!(FINISH_REASON.with(
            br#"{"finish_reason":null,"x":{"finish_reason" : "stop"}}"#,
            b'"'
        ));
        assert_eq!(
            TYPE.string(br#"{"type": "message_delta"}"#),
            Some(&b"message_delta"[..])
        );
        assert_eq!(TYPE.string(br#"{"type":"#), None);
    }

    #[test]
    fn an_openai_stream_cut_anywhere_gives_its_usage_and_finish() {
        let stream: &[u8] = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n\
            data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
            data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7}}\n\n\
            data: [DONE]\n\n";
        for cut in 0..stream.len() {
            let items = tapped(Kind::OpenAiChat, &[&stream[..cut], &stream[cut..]]);
            let usage = items.iter().find_map(|item| match item {
                Ok(Event::Usage(usage)) => Some((usage.input_tokens, usage.output_tokens)),
                _ => None,
            });
            assert_eq!(usage, Some((5, 2)), "cut at {cut}: {items:?}");
            assert!(
                items.iter().any(|item| matches!(item, Ok(Event::Finish { reason }) if *reason == FinishReason::Stop)),
                "cut at {cut}: {items:?}"
            );
            assert!(items.iter().all(Result::is_ok), "cut at {cut}: {items:?}");
        }
    }

    #[test]
    fn a_stream_without_its_end_is_an_error_and_between_events_is_tracked() {
        let mut tap = Tap::new(Kind::OpenAiChat, Some("text/event-stream"), true);
        assert!(tap.between_events());
        assert_eq!(push(&mut tap, b"data: {\"choices\":[]"), b"", "held back");
        assert!(!tap.between_events());
        assert_eq!(push(&mut tap, b"}\n"), b"data: {\"choices\":[]}\n");
        assert!(!tap.between_events());
        push(&mut tap, b"\n");
        assert!(tap.between_events());
        let items = tap.finish().items;
        assert!(matches!(items.last(), Some(Err(_))), "{items:?}");
    }

    #[test]
    fn an_error_line_is_flagged_and_kept() {
        let mut tap = Tap::new(Kind::Anthropic, Some("text/event-stream"), true);
        let ping = b"event: ping\ndata: {\"type\": \"ping\"}\n\n";
        assert_eq!(push(&mut tap, ping), ping);
        let error = b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        assert_eq!(push(&mut tap, error), error);
        let items = tap.finish().items;
        let error = items.iter().find_map(|item| item.as_ref().err());
        assert!(
            error.is_some_and(
                |error| error.http_status() == 529 || error.to_string().contains("Overloaded")
            ),
            "{items:?}"
        );
    }

    #[test]
    fn an_endless_line_fails_in_bounded_memory() {
        let mut tap = Tap::new(Kind::OpenAiChat, Some("text/event-stream"), true);
        let piece = Bytes::from(vec![b'x'; 1 << 20]);
        let mut out = Vec::new();
        let failed = (0..20).find_map(|_| tap.push(piece.clone(), &mut out).err());
        assert!(
            matches!(failed, Some(Error::LimitExceeded { .. })),
            "{failed:?}"
        );
        assert!(out.is_empty(), "nothing of the line went on");
        let Reading::Stream(lines) = &tap.reading else {
            unreachable!()
        };
        assert!(lines.partial.capacity() <= DEFAULT_MAX_EVENT_BYTES);
    }

    #[test]
    fn a_usage_chunk_not_asked_for_is_left_out_and_still_counted() {
        let stream: &[u8] = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n\
            data: {\"choices\": [ ],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7}}\n\n\
            data: [DONE]\n\n";
        let without = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n\
            data: [DONE]\n\n";
        for cut in 0..stream.len() {
            let mut tap =
                Tap::new(Kind::OpenAiChat, Some("text/event-stream"), true).without_usage_chunk();
            let mut out = push(&mut tap, &stream[..cut]);
            out.extend(push(&mut tap, &stream[cut..]));
            assert_eq!(out, without, "cut at {cut}");
            let items = tap.finish().items;
            assert!(
                items.iter().any(
                    |item| matches!(item, Ok(Event::Usage(usage)) if usage.output_tokens == 2)
                ),
                "cut at {cut}: {items:?}"
            );
        }
    }

    #[test]
    fn a_usage_beside_the_choices_is_taken_out_and_the_rest_kept() {
        /// A line, and what [`without_usage`] makes of it.
        type Case = (&'static [u8], Option<Option<&'static [u8]>>);
        let cases: [Case; 6] = [
            (
                br#"data: {"id":"c","choices":[{"index":0,"finish_reason":"stop"}], "usage" : {"prompt_tokens":1} ,"x":1}"#,
                Some(Some(br#"data: {"id":"c","choices":[{"index":0,"finish_reason":"stop"}] ,"x":1}"#)),
            ),
            (
                br#"data: {"usage":{"prompt_tokens":1},  "choices":[{"index":0}]}"#,
                Some(Some(br#"data: {"choices":[{"index":0}]}"#)),
            ),
            (
                br#"data: {"choices":[{"index":0}],"usage":{"a":{"usage":1}}}"#,
                Some(Some(br#"data: {"choices":[{"index":0}]}"#)),
            ),
            (br#"data: {"choices":[],"usage":{"prompt_tokens":1}}"#, Some(None)),
            (br#"data: {"choices":[{"index":0}],"usage":null}"#, None),
            (
                br#"data: {"choices":[{"index":0}],"x_groq":{"id":"r","usage":{"a":1}},"usage":{"a":1}}"#,
                Some(Some(br#"data: {"choices":[{"index":0}],"x_groq":{"id":"r"}}"#)),
            ),
        ];
        for (line, expected) in cases {
            let taken = without_usage(line);
            assert_eq!(
                taken.as_ref().map(|line| line.as_deref()),
                expected,
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    /// An error event of `kind` that quotes `secret` where `at` (0 to 1) says.
    fn error_event(kind: Kind, secret: &str, at: f64) -> String {
        let message = "Incorrect API key provided: you may find it in your settings";
        let cut = (message.len() as f64 * at) as usize;
        let message = format!("{}{secret}{}", &message[..cut], &message[cut..]);
        match kind {
            Kind::Anthropic => format!(
                "event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"authentication_error\",\"message\":\"{message}\"}}}}\n\n"
            ),
            _ => format!(
                "data: {{\"error\":{{\"message\":\"{message}\",\"type\":\"invalid_request_error\"}}}}\n\n"
            ),
        }
    }

    proptest::proptest! {
        #[test]
        fn a_secret_in_an_error_event_never_goes_on_and_the_rest_goes_on_as_it_came(
            anthropic in proptest::prelude::any::<bool>(),
            at in 0.0f64..=1.0,
            cuts in proptest::collection::vec(proptest::prelude::any::<proptest::sample::Index>(), 0..12),
        ) {
            const SECRET: &str = "sk-upstream-9876543210";
            let kind = if anthropic { Kind::Anthropic } else { Kind::OpenAiChat };
            let before: &[u8] = match kind {
                Kind::Anthropic => b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\n",
                _ => b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n",
            };
            let error = error_event(kind, SECRET, at);
            let stream = [before, error.as_bytes(), b": after\n\n"].concat();
            let mut cuts: Vec<usize> = cuts.iter().map(|cut| cut.index(stream.len() + 1)).collect();
            cuts.sort_unstable();
            let mut tap = Tap::new(kind, Some("text/event-stream"), true)
                .scrubbing(Secrets::new().secret(SECRET));
            let mut out = Vec::new();
            let mut last = 0;
            for cut in cuts.into_iter().chain([stream.len()]) {
                tap.push(Bytes::copy_from_slice(&stream[last..cut]), &mut out).unwrap();
                last = cut;
            }
            out.extend(tap.rest());
            let out = out.concat();
            let expected = [before, error_event(kind, "[redacted]", at).as_bytes(), b": after\n\n"].concat();
            proptest::prop_assert_eq!(String::from_utf8_lossy(&out), String::from_utf8_lossy(&expected));
        }

        #[test]
        fn every_byte_goes_on_in_order_at_any_chunking(
            which in proptest::prelude::any::<proptest::sample::Index>(),
            sizes in proptest::collection::vec(1usize..300, 1..8),
        ) {
            let streams = recorded();
            let (kind, name, stream) = &streams[which.index(streams.len())];
            let mut tap = Tap::new(*kind, Some("text/event-stream"), true)
                .scrubbing(Secrets::new().secret("not-in-any-stream-0123"));
            let mut out = Vec::new();
            let mut rest = &stream[..];
            for size in sizes.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (piece, after) = rest.split_at((*size).min(rest.len()));
                tap.push(Bytes::copy_from_slice(piece), &mut out).unwrap();
                rest = after;
            }
            out.extend(tap.rest());
            proptest::prop_assert!(out.concat() == *stream, "{}", name);
        }
    }

    /// Recorded streams of each wire (SSE, or a chunk's JSON a line).
    fn recorded() -> Vec<(Kind, String, Vec<u8>)> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/");
        let read = |name: &str| std::fs::read(format!("{dir}{name}")).unwrap();
        let framed = |name: &str| {
            let text = String::from_utf8(read(name)).unwrap();
            let lines = text.lines().filter(|line| !line.trim().is_empty());
            lines
                .map(|line| format!("data: {line}\n\n"))
                .collect::<String>()
                .into_bytes()
        };
        let mut streams = Vec::new();
        for name in [
            "refusal",
            "max_tokens_reached",
            "strict_tool",
            "parallel_tools",
        ] {
            let name = format!("openai/openai-python/{name}.sse");
            streams.push((Kind::OpenAiChat, name.clone(), read(&name)));
        }
        let name = "openai_compat/vercel-ai/groq-tool-call.chunks.txt";
        streams.push((Kind::OpenAiChat, name.into(), framed(name)));
        let name = "anthropic/LmDotnetTools/sample-response-anthropic.sse.txt";
        streams.push((Kind::Anthropic, name.into(), read(name)));
        for name in [
            "anthropic/vercel-ai/anthropic-clear-thinking.1.chunks.txt",
            "anthropic/vercel-ai/anthropic-tool-no-args.chunks.txt",
        ] {
            streams.push((Kind::Anthropic, name.into(), framed(name)));
        }
        #[cfg(feature = "gemini")]
        {
            for name in [
                "google/hand-made/grounding.sse",
                "google/vertexai-sdk-test-data/vertexai/streaming-failure-error-mid-stream.txt",
                "google/vertexai-sdk-test-data/googleai/streaming-success-thinking-function-call-thought-summary-signature.txt",
            ] {
                streams.push((Kind::Gemini, name.into(), read(name)));
            }
            for name in [
                "google/vercel-ai/google-stream-tool-call-arguments.chunks.txt",
                "google/vercel-ai/google-tool-call-gemini3.chunks.txt",
            ] {
                streams.push((Kind::Gemini, name.into(), framed(name)));
            }
        }
        streams
    }

    /// What the full path reads of a stream: its usage and finish events, and
    /// whether it failed.
    fn lifted(kind: Kind, stream: &[u8]) -> (Vec<Event>, bool) {
        summed(replay(kind, Bytes::copy_from_slice(stream), true).items)
    }

    fn summed(items: Vec<Result<Event, Error>>) -> (Vec<Event>, bool) {
        let failed = items.iter().any(Result::is_err);
        (items.into_iter().filter_map(Result::ok).collect(), failed)
    }

    proptest::proptest! {
        #[test]
        fn the_taps_usage_and_finish_are_the_full_paths_at_any_chunking(
            which in proptest::prelude::any::<proptest::sample::Index>(),
            sizes in proptest::collection::vec(1usize..300, 1..8),
        ) {
            let streams = recorded();
            let (kind, name, stream) = &streams[which.index(streams.len())];
            let mut tap = Tap::new(*kind, Some("text/event-stream"), true);
            let mut rest = &stream[..];
            for size in sizes.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (piece, after) = rest.split_at((*size).min(rest.len()));
                push(&mut tap, piece);
                rest = after;
            }
            let tapped = summed(tap.finish().items);
            let full = lifted(*kind, stream);
            proptest::prop_assert!(!full.0.is_empty() || full.1, "{name}: nothing to compare");
            proptest::prop_assert_eq!(tapped, full, "{}", name);
        }
    }

    #[test]
    fn a_whole_body_gives_its_usage() {
        let body = br#"{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#;
        let mut tap = Tap::new(Kind::OpenAiChat, Some("application/json"), false);
        push(&mut tap, &body[..10]);
        push(&mut tap, &body[10..]);
        let items = tap.finish().items;
        assert!(
            items
                .iter()
                .any(|item| matches!(item, Ok(Event::Usage(usage)) if usage.input_tokens == 3)),
            "{items:?}"
        );
        assert!(items.iter().any(|item| matches!(item, Ok(Event::Finish { reason }) if *reason == FinishReason::Length)), "{items:?}");
    }
}

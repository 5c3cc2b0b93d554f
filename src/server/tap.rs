//! The fast path's tap: what the gateway needs of an upstream answer that it
//! forwards unchanged — the usage, the finish reason, an error — read from the
//! bytes as they pass, without decoding or re-encoding them. Pure: bytes in,
//! [`Tapped`] out.
//!
//! A stream is scanned line by line, in place; only the few SSE lines that
//! carry what is wanted are kept, one of each kind (the last: OpenAI's
//! chunks with a `finish_reason` or a `usage` and its `[DONE]`, Anthropic's
//! `message_start`, `message_delta` and `message_stop`, Gemini's chunks with
//! `usageMetadata` or a `finishReason`; every error), and whether the model
//! called a function (OpenAI and Gemini name a call's end `stop`, which the
//! lifters read as `tool_calls`). When the answer ends, those lines — their
//! content left out, a call stood for by one of a fixed shape — are read by
//! the wire's own decoder ([`BodyDecoder`]) and lifter, so that the tokens and
//! the reason are the full path's. A whole body is kept and read the same
//! way. The buffers are the tap's own, reused: no allocation per chunk once
//! they have grown.

use std::sync::LazyLock;

use bytes::Bytes;
use memchr::memmem::Finder;

use crate::provider::body::{BodyDecoder, is_stream};
use crate::provider::sse::DEFAULT_MAX_EVENT_BYTES;
use crate::provider::{Kind, Lowering, Wire, WithWire};
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
        Tap { kind, reading }
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
        tap.push(&body);
        tap.finish()
    }

    /// Reads the next piece of the answer. True when it completed a line that
    /// carries an error (whose bytes the caller may want to scrub).
    pub(crate) fn push(&mut self, bytes: &[u8]) -> bool {
        match &mut self.reading {
            Reading::Stream(lines) => lines.push(self.kind, bytes),
            Reading::Whole(kept) => {
                if let Some(body) = kept {
                    match body.len() + bytes.len() > MAX_BODY {
                        true => *kept = None,
                        false => body.extend_from_slice(bytes),
                    }
                }
                false
            }
        }
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

/// A stream's lines: the line cut by the last piece's end, and the lines kept.
#[derive(Debug, Default)]
struct Lines {
    /// The start of a line cut by the end of a piece.
    partial: Vec<u8>,
    /// The cut line passed [`DEFAULT_MAX_EVENT_BYTES`]: skipped to its end.
    skipping: bool,
    /// Whether an event is open (a field line came since the last blank line).
    in_event: bool,
    /// The kept lines, each with the order it came in.
    kept: [(u64, Vec<u8>); SLOTS],
    count: u64,
}

impl Lines {
    /// Reads a piece of the stream; true when a line carrying an error
    /// completed in it.
    fn push(&mut self, kind: Kind, mut bytes: &[u8]) -> bool {
        let mut error = false;
        while let Some(end) = memchr::memchr(b'\n', bytes) {
            let (line, rest) = (&bytes[..end], &bytes[end + 1..]);
            bytes = rest;
            if self.partial.is_empty() && !self.skipping {
                error |= self.line(kind, line);
                continue;
            }
            let skipped = std::mem::take(&mut self.skipping);
            let mut whole = std::mem::take(&mut self.partial);
            if !skipped {
                whole.extend_from_slice(line);
                error |= self.line(kind, &whole);
            }
            whole.clear();
            self.partial = whole;
        }
        if !bytes.is_empty() && !self.skipping {
            match self.partial.len() + bytes.len() > DEFAULT_MAX_EVENT_BYTES {
                true => {
                    self.partial.clear();
                    self.skipping = true;
                }
                false => self.partial.extend_from_slice(bytes),
            }
        }
        error
    }

    /// Reads one whole line (its `\n` taken off); true when it carries an
    /// error.
    fn line(&mut self, kind: Kind, line: &[u8]) -> bool {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        self.in_event = !line.is_empty();
        if let Some((slot, standing)) = marks(kind, line) {
            let (order, kept) = &mut self.kept[slot as usize];
            if kept.is_empty() {
                self.count += 1;
                *order = self.count;
                kept.extend_from_slice(standing);
            }
        }
        let Some(slot) = classify(kind, line) else {
            return false;
        };
        self.count += 1;
        let (order, kept) = &mut self.kept[slot as usize];
        if slot != Slot::Error {
            kept.clear();
        } else if kept.len() + line.len() > MAX_ERRORS {
            return true;
        }
        *order = self.count;
        kept.extend_from_slice(line);
        kept.extend_from_slice(b"\n\n");
        slot == Slot::Error
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
    let (field, key) = match kind {
        Kind::OpenAiChat => ("choices", "delta"),
        Kind::Gemini => ("candidates", "content"),
        _ => return None,
    };
    let data = kept.strip_prefix(b"data:")?.trim_ascii();
    let mut json: serde_json::Value = serde_json::from_slice(data).ok()?;
    for item in json.get_mut(field)?.as_array_mut()? {
        let item = item.as_object_mut()?;
        if item.remove(key).is_some() && kind == Kind::OpenAiChat {
            item.insert(key.to_owned(), serde_json::json!({}));
        }
    }
    Some(format!("data: {json}\n\n").into_bytes())
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
key!(REFUSAL, "\"refusal\"");
key!(FUNCTION_CALL, "\"functionCall\"");

impl Key {
    /// Whether `json` holds this key with a value that starts with `first`
    /// (`{` for an object, `"` for a string: not `null`).
    fn with(&self, json: &[u8], first: u8) -> bool {
        self.0
            .find_iter(json)
            .any(|at| value_at(json, at + self.0.needle().len()).first() == Some(&first))
    }

    /// Whether `json` holds this key with a string value that is not empty.
    fn with_text(&self, json: &[u8]) -> bool {
        self.0.find_iter(json).any(|at| {
            let value = value_at(json, at + self.0.needle().len());
            value.len() > 1 && value[0] == b'"' && value[1] != b'"'
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
            tap.push(piece);
        }
        tap.finish().items
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
        tap.push(b"data: {\"choices\":[]");
        assert!(!tap.between_events());
        tap.push(b"}\n");
        assert!(!tap.between_events());
        tap.push(b"\n");
        assert!(tap.between_events());
        let items = tap.finish().items;
        assert!(matches!(items.last(), Some(Err(_))), "{items:?}");
    }

    #[test]
    fn an_error_line_is_flagged_and_kept() {
        let mut tap = Tap::new(Kind::Anthropic, Some("text/event-stream"), true);
        assert!(!tap.push(b"event: ping\ndata: {\"type\": \"ping\"}\n\n"));
        let error = b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        assert!(tap.push(error));
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
    fn an_endless_line_is_skipped_in_bounded_memory() {
        let mut tap = Tap::new(Kind::OpenAiChat, Some("text/event-stream"), true);
        let piece = vec![b'x'; 1 << 20];
        for _ in 0..20 {
            tap.push(&piece);
        }
        let Reading::Stream(lines) = &tap.reading else {
            unreachable!()
        };
        assert!(lines.partial.capacity() <= DEFAULT_MAX_EVENT_BYTES + (1 << 20));
        assert!(lines.partial.is_empty() && lines.skipping);
        tap.push(b"\ndata: [DONE]\n\n");
        assert!(tap.between_events());
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
                tap.push(piece);
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
        tap.push(&body[..10]);
        tap.push(&body[10..]);
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

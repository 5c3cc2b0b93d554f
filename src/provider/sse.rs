//! Server-sent events (SSE): a decoder — a pure state machine, bytes in, events
//! out — and, beside it, the encoder a server writes events with
//! ([`encode_event`]).
//!
//! It follows the WHATWG event-stream grammar: lines end with LF, CRLF or CR (a
//! CRLF split between two chunks is one line end); `data:` lines of one event are
//! joined with `\n`; `event:` names the event; `id:` sets the last event id, which
//! later events keep; `retry:` sets the reconnection time; lines starting with
//! `:` are comments; one space after the colon is dropped; a leading byte-order
//! mark is skipped. Two deliberate departures, for LLM traffic:
//!
//! - an event whose blank line never came (the body ended right after its last
//!   line) is still delivered by [`finish`](SseDecoder::finish);
//! - one event may hold at most [`max_event_bytes`](SseDecoder::with_max_event_bytes)
//!   (a line being read counts too); past that, [`Error::LimitExceeded`].
//!
//! Input may be cut at any byte; each byte is looked at a bounded number of
//! times, so decoding is linear in the input whatever the cutting.
//!
//! ```
//! use lmstack::provider::sse::SseDecoder;
//! use lmstack::service::Output;
//!
//! let mut decoder = SseDecoder::new();
//! let mut events = Output::new();
//! decoder.push(b"event: ping\r\ndata: {\"a\":", &mut events).unwrap();
//! decoder.push(b"1}\r\n\r\ndata: [DONE]", &mut events).unwrap();
//! decoder.finish(&mut events).unwrap();
//! let events: Vec<_> = events.drain().collect();
//! assert_eq!(events[0].event.as_deref(), Some("ping"));
//! assert_eq!(events[0].data, "{\"a\":1}");
//! assert_eq!(events[1].data, "[DONE]");
//! ```

use std::time::Duration;

use crate::Error;
use crate::service::Output;

/// One decoded event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` name; `None` means the default type, `message`.
    pub event: Option<String>,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
    /// The last event id seen in the stream so far (ids persist across events).
    pub id: Option<String>,
}

/// The name of the event that carries the lines of a stream that are not SSE
/// fields, when the decoder is asked for them
/// ([`with_stray_lines`](SseDecoder::with_stray_lines)).
pub const STRAY_EVENT: &str = "lmstack.stray-lines";

/// The default limit on one event's size: 16 MiB.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 << 20;

/// The decoder. See the [module docs](self).
///
/// [`push`](Self::push) hands out each event as a value of its own;
/// [`push_each`](Self::push_each) lends each to a function instead, so that
/// a reader that only looks at them (a provider's lifting) costs no
/// allocation per event: the decoder reuses its buffers.
#[derive(Debug)]
pub struct SseDecoder {
    /// The start of a line whose end has not arrived yet.
    line: Vec<u8>,
    /// The event being built: its data, its name, the last id.
    frame: SseEvent,
    has_data: bool,
    /// The buffer of the last event's name, for the next one.
    spare_name: String,
    retry: Option<Duration>,
    /// The last chunk ended with CR: a LF at the start of the next one belongs to it.
    after_cr: bool,
    /// Still at the very start of the stream (a byte-order mark may come).
    at_start: bool,
    max_event_bytes: usize,
    /// Lines that are not SSE fields, when they are kept.
    stray: Option<String>,
}

/// What [`SseDecoder::push_each`] lends each event to: a reader of the event,
/// which may stop the decoding with an error.
pub type EachEvent<'a> = dyn FnMut(&SseEvent) -> Result<(), Error> + 'a;

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

const STAGE: &str = "sse decoder";
const BOM: &[u8] = b"\xEF\xBB\xBF";

impl SseDecoder {
    /// A decoder with the default event size limit.
    pub fn new() -> Self {
        SseDecoder {
            line: Vec::new(),
            frame: SseEvent::default(),
            has_data: false,
            spare_name: String::new(),
            retry: None,
            after_cr: false,
            at_start: true,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            stray: None,
        }
    }

    /// Keeps the lines that are not SSE fields (the grammar ignores them): at the
    /// next blank line or the end they are delivered, joined with `\n`, as an
    /// event named [`STRAY_EVENT`] — for servers that append a raw JSON error
    /// object to a stream (Gemini). They count towards the event limit.
    pub fn with_stray_lines(mut self) -> Self {
        self.stray = Some(String::new());
        self
    }

    /// Sets the largest event (and line) accepted, in bytes.
    pub fn with_max_event_bytes(mut self, limit: usize) -> Self {
        self.max_event_bytes = limit;
        self
    }

    /// The reconnection time the server asked for with `retry:`, if any.
    pub fn retry(&self) -> Option<Duration> {
        self.retry
    }

    /// Decodes `chunk` and appends the events it completes to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Output<SseEvent>) -> Result<(), Error> {
        self.push_each(chunk, &mut |event| {
            out.push(event.clone());
            Ok(())
        })
    }

    /// Decodes `chunk` and lends each event it completes to `each`, in
    /// order; the first error `each` returns stops decoding and is returned.
    ///
    /// ```
    /// use lmstack::provider::sse::SseDecoder;
    ///
    /// let mut decoder = SseDecoder::new();
    /// let mut seen = Vec::new();
    /// let mut each = |event: &lmstack::provider::sse::SseEvent| {
    ///     seen.push(event.data.len());
    ///     Ok(())
    /// };
    /// decoder.push_each(b"data: abc\n\ndata: de", &mut each).unwrap();
    /// decoder.finish_each(&mut each).unwrap();
    /// assert_eq!(seen, [3, 2]);
    /// ```
    pub fn push_each(&mut self, mut chunk: &[u8], each: &mut EachEvent<'_>) -> Result<(), Error> {
        if self.at_start {
            // The byte-order mark may itself arrive cut into pieces.
            let seen = self.line.len();
            let take = chunk.len().min(BOM.len() - seen);
            if BOM[seen..seen + take] == chunk[..take] {
                if seen + take < BOM.len() {
                    self.line.extend_from_slice(&chunk[..take]);
                    return Ok(());
                }
                self.line.clear();
                chunk = &chunk[take..];
            } else {
                // Not a byte-order mark: what was held is ordinary text.
                let held = std::mem::take(&mut self.line);
                self.at_start = false;
                self.push_each(&held, each)?;
            }
            self.at_start = false;
        }
        if self.after_cr && !chunk.is_empty() {
            self.after_cr = false;
            if chunk[0] == b'\n' {
                chunk = &chunk[1..];
            }
        }
        while let Some(end) = line_end(chunk) {
            if self.line.is_empty() {
                self.line_complete(&chunk[..end], each)?;
            } else {
                self.check_limit(self.line.len() + end)?;
                self.line.extend_from_slice(&chunk[..end]);
                let line = std::mem::take(&mut self.line);
                self.line_complete(&line, each)?;
                self.line = line;
                self.line.clear();
            }
            let crlf = chunk[end] == b'\r';
            chunk = &chunk[end + 1..];
            if crlf {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        if !chunk.is_empty() {
            self.check_limit(self.line.len() + chunk.len())?;
            self.line.extend_from_slice(chunk);
        }
        Ok(())
    }

    /// Ends the input: delivers the last event even when its blank line is missing.
    pub fn finish(&mut self, out: &mut Output<SseEvent>) -> Result<(), Error> {
        self.finish_each(&mut |event| {
            out.push(event.clone());
            Ok(())
        })
    }

    /// Ends the input as [`finish`](Self::finish) does, lending the last
    /// events to `each` as [`push_each`](Self::push_each) does.
    pub fn finish_each(&mut self, each: &mut EachEvent<'_>) -> Result<(), Error> {
        if self.at_start && !self.line.is_empty() && BOM.starts_with(&self.line) {
            // Only part of a byte-order mark arrived: it is text after all.
            let held = std::mem::take(&mut self.line);
            self.at_start = false;
            self.push_each(&held, each)?;
        }
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.line_complete(&line, each)?;
        }
        self.dispatch(each)
    }

    fn check_limit(&self, line_bytes: usize) -> Result<(), Error> {
        if line_bytes + self.frame.data.len() > self.max_event_bytes {
            return Err(Error::LimitExceeded {
                stage: STAGE,
                what: "one event",
                limit: self.max_event_bytes,
            });
        }
        Ok(())
    }

    fn line_complete(&mut self, line: &[u8], each: &mut EachEvent<'_>) -> Result<(), Error> {
        if line.is_empty() {
            return self.dispatch(each);
        }
        if line[0] == b':' {
            return Ok(()); // a comment
        }
        let (name, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match name {
            b"data" => {
                self.check_limit(value.len() + 1)?;
                let data = &mut self.frame.data;
                if self.has_data {
                    data.push('\n');
                }
                push_lossy(data, value);
                self.has_data = true;
            }
            b"event" => {
                let mut name = match self.frame.event.take() {
                    Some(name) => name,
                    None => std::mem::take(&mut self.spare_name),
                };
                name.clear();
                push_lossy(&mut name, value);
                self.frame.event = Some(name);
            }
            b"id" if !value.contains(&0) => {
                self.frame.id = Some(String::from_utf8_lossy(value).into_owned());
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                if let Ok(millis) = std::str::from_utf8(value).unwrap_or("").parse() {
                    self.retry = Some(Duration::from_millis(millis));
                }
            }
            _ => {
                // Unknown fields are ignored, unless stray lines are kept.
                if let Some(stray) = &mut self.stray {
                    if stray.len() + line.len() + 1 > self.max_event_bytes {
                        return Err(Error::LimitExceeded {
                            stage: STAGE,
                            what: "one event",
                            limit: self.max_event_bytes,
                        });
                    }
                    stray.push_str(&String::from_utf8_lossy(line));
                    stray.push('\n');
                }
            }
        }
        Ok(())
    }

    /// Ends the event being built: lends it to `each` when it has data, and
    /// starts the next one in the same buffers.
    fn dispatch(&mut self, each: &mut EachEvent<'_>) -> Result<(), Error> {
        if let Some(stray) = self.stray.as_mut().filter(|stray| !stray.is_empty()) {
            each(&SseEvent {
                event: Some(STRAY_EVENT.into()),
                data: std::mem::take(stray),
                id: self.frame.id.clone(),
            })?;
        }
        if self.frame.event.as_ref().is_some_and(String::is_empty) {
            self.end_name();
        }
        let lent = match std::mem::take(&mut self.has_data) {
            true => each(&self.frame),
            false => Ok(()),
        };
        self.frame.data.clear();
        self.end_name();
        lent
    }

    /// Drops the event's name, keeping its buffer for the next one.
    fn end_name(&mut self) {
        if let Some(name) = self.frame.event.take() {
            self.spare_name = name;
        }
    }
}

/// Appends `bytes` to `text`, invalid UTF-8 replaced (valid UTF-8, nearly
/// always, is checked the fast way).
fn push_lossy(text: &mut String, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(valid) => text.push_str(valid),
        Err(_) => text.push_str(&String::from_utf8_lossy(bytes)),
    }
}

/// The first CR or LF. Token-sized chunks are scanned directly: for them the
/// call into `memchr` costs more than the scan.
fn line_end(bytes: &[u8]) -> Option<usize> {
    if bytes.len() < 16 {
        bytes.iter().position(|&b| b == b'\n' || b == b'\r')
    } else {
        memchr::memchr2(b'\n', b'\r', bytes)
    }
}

/// Writes one event in the SSE format the [`SseDecoder`] reads back: `event: NAME`
/// when it is named, then `data` one `data:` line per line (a line break in it —
/// LF, CRLF or CR — starts a new `data:` line, so it decodes as LF), then the
/// blank line that ends it. Line breaks in `event` would end the field early, so
/// they are written as spaces.
///
/// ```
/// use lmstack::provider::sse::encode_event;
///
/// let mut out = Vec::new();
/// encode_event(&mut out, Some("content_block_delta"), "{\"a\":1}");
/// encode_event(&mut out, None, "two\nlines");
/// assert_eq!(
///     out,
///     b"event: content_block_delta\ndata: {\"a\":1}\n\ndata: two\ndata: lines\n\n"
/// );
/// ```
pub fn encode_event(out: &mut Vec<u8>, event: Option<&str>, data: &str) {
    write_name(out, event);
    let mut rest = data;
    loop {
        out.extend_from_slice(b"data: ");
        match memchr::memchr2(b'\n', b'\r', rest.as_bytes()) {
            Some(at) => {
                out.extend_from_slice(&rest.as_bytes()[..at]);
                out.push(b'\n');
                let skip = if rest[at..].starts_with("\r\n") { 2 } else { 1 };
                rest = &rest[at + skip..];
            }
            None => {
                out.extend_from_slice(rest.as_bytes());
                out.extend_from_slice(b"\n\n");
                return;
            }
        }
    }
}

/// The `event:` line of a named event, its line breaks written as spaces.
fn write_name(out: &mut Vec<u8>, event: Option<&str>) {
    let Some(name) = event else { return };
    out.extend_from_slice(b"event: ");
    let start = out.len();
    out.extend_from_slice(name.as_bytes());
    for byte in &mut out[start..] {
        if *byte == b'\n' || *byte == b'\r' {
            *byte = b' ';
        }
    }
    out.push(b'\n');
}

#[cfg(feature = "http")]
pub use writer::SseWriter;

#[cfg(feature = "http")]
mod writer {
    use bytes::{Bytes, BytesMut};
    use serde::Serialize;

    use super::{encode_event, write_name};

    /// The room a writer's buffer starts with, and takes again when a
    /// frame does not fit: a stream's frames share it, and once the
    /// frames handed out are dropped, the next ones reuse it.
    const BUFFER_BYTES: usize = 4 << 10;

    /// SSE frames written into buffers reused from frame to frame, for a
    /// reply encoder: [`event`](Self::event) and [`json`](Self::json) write
    /// frames, [`take`](Self::take) hands out those written since the last
    /// take, as one [`Bytes`] cut from a shared buffer. Once the frames
    /// handed out are dropped (written to the client), their room is written
    /// again: a stream costs no allocation per frame.
    ///
    /// ```
    /// use lmstack::provider::sse::SseWriter;
    ///
    /// let mut writer = SseWriter::new();
    /// writer.json(Some("ping"), &serde_json::json!({"type": "ping"}));
    /// writer.event(None, "[DONE]");
    /// let frames = writer.take().unwrap();
    /// assert_eq!(&frames[..], b"event: ping\ndata: {\"type\":\"ping\"}\n\ndata: [DONE]\n\n");
    /// assert_eq!(writer.take(), None);
    /// ```
    #[derive(Debug, Default)]
    pub struct SseWriter {
        /// The frames written since the last take (and the room after them).
        buffer: BytesMut,
        /// The frame being written: a plain `Vec`, the fastest to write JSON
        /// into piece by piece.
        frame: Vec<u8>,
    }

    impl SseWriter {
        /// A writer with nothing written (and no buffer yet).
        pub fn new() -> Self {
            Self::default()
        }

        /// Writes an event as [`encode_event`] does.
        pub fn event(&mut self, event: Option<&str>, data: &str) {
            self.frame.clear();
            encode_event(&mut self.frame, event, data);
            self.keep_frame();
        }

        /// Writes an event whose data is `value` as compact JSON: one `data:`
        /// line (compact JSON holds no line break; one in a string is
        /// escaped). A value that cannot be written (a map with keys that are
        /// not strings) leaves the data empty.
        pub fn json(&mut self, event: Option<&str>, value: &impl Serialize) {
            self.frame.clear();
            write_name(&mut self.frame, event);
            self.frame.extend_from_slice(b"data: ");
            let start = self.frame.len();
            if serde_json::to_writer(&mut self.frame, value).is_err() {
                self.frame.truncate(start);
            }
            self.frame.extend_from_slice(b"\n\n");
            self.keep_frame();
        }

        /// Whether no frame was written since the last take.
        pub fn is_empty(&self) -> bool {
            self.buffer.is_empty()
        }

        /// The frames written since the last take, if any.
        pub fn take(&mut self) -> Option<Bytes> {
            (!self.buffer.is_empty()).then(|| self.buffer.split().freeze())
        }

        /// Moves the frame written into the buffer: into its own room,
        /// reclaimed once the frames cut from it are dropped, or a new one.
        fn keep_frame(&mut self) {
            if self.buffer.capacity() - self.buffer.len() < self.frame.len() {
                self.buffer.reserve(self.frame.len().max(BUFFER_BYTES));
            }
            self.buffer.extend_from_slice(&self.frame);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stray_lines_are_kept_only_when_asked_for() {
        let body: &[u8] = b"data: a\n\n{\n  \"error\": {\"code\": 1}\n}\n";
        let decode = |decoder: SseDecoder| {
            let mut decoder = decoder;
            let mut out = Output::new();
            decoder.push(body, &mut out).unwrap();
            decoder.finish(&mut out).unwrap();
            out.drain().collect::<Vec<_>>()
        };
        assert_eq!(decode(SseDecoder::new()).len(), 1);
        let events = decode(SseDecoder::new().with_stray_lines());
        assert_eq!(events[1].event.as_deref(), Some(STRAY_EVENT));
        assert_eq!(events[1].data, "{\n  \"error\": {\"code\": 1}\n}\n");
        let mut small = SseDecoder::new().with_stray_lines().with_max_event_bytes(8);
        assert!(small.push(b"0123456789\n", &mut Output::new()).is_err());
    }

    fn decode(pieces: &[&[u8]]) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::new();
        let mut out = Output::new();
        for piece in pieces {
            decoder.push(piece, &mut out).unwrap();
        }
        decoder.finish(&mut out).unwrap();
        out.drain().collect()
    }

    fn data(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|event| event.data.as_str()).collect()
    }

    #[test]
    fn all_three_line_ends_and_multi_line_data() {
        let events =
            decode(&[b"data: a\ndata: b\n\ndata: c\r\ndata: d\r\n\r\ndata: e\rdata: f\r\r"]);
        assert_eq!(data(&events), ["a\nb", "c\nd", "e\nf"]);
    }

    #[test]
    fn a_crlf_cut_between_chunks_is_one_line_end() {
        let events = decode(&[b"data: a\r", b"\n", b"\r", b"\ndata: b\r\n\r\n"]);
        assert_eq!(data(&events), ["a", "b"]);
    }

    #[test]
    fn comments_ids_and_event_names() {
        let events = decode(&[b": keep-alive\nid: 7\nevent: delta\ndata:x\n\ndata: y\n\n"]);
        assert_eq!(events[0].event.as_deref(), Some("delta"));
        assert_eq!(events[0].data, "x");
        assert_eq!(events[0].id.as_deref(), Some("7"));
        assert_eq!(events[1].event, None);
        assert_eq!(events[1].id.as_deref(), Some("7"), "ids persist");
    }

    #[test]
    fn an_event_without_data_is_not_dispatched_and_empty_data_is() {
        let events = decode(&[b"event: lonely\n\ndata\n\n"]);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data, "");
        assert_eq!(
            events[0].event, None,
            "the event name is reset at each blank line"
        );
    }

    #[test]
    fn the_last_event_needs_no_blank_line() {
        assert_eq!(data(&decode(&[b"data: [DONE]"])), ["[DONE]"]);
        assert_eq!(data(&decode(&[b"data: [DONE]\n"])), ["[DONE]"]);
    }

    #[test]
    fn a_byte_order_mark_is_skipped_even_when_cut() {
        assert_eq!(data(&decode(&[b"\xEF\xBB", b"\xBFdata: x\n\n"])), ["x"]);
        // A lone first byte of a mark is kept as text: the field is `\xEFdata`.
        assert_eq!(decode(&[b"\xEF", b"data: y\n\n"]).len(), 0);
        assert_eq!(data(&decode(&[b"\xEF", b"\ndata: y\n\n"])), ["y"]);
    }

    #[test]
    fn retry_is_read() {
        let mut decoder = SseDecoder::new();
        decoder.push(b"retry: 1500\n", &mut Output::new()).unwrap();
        assert_eq!(decoder.retry(), Some(Duration::from_millis(1500)));
    }

    #[test]
    fn an_event_past_the_limit_is_an_error() {
        let mut decoder = SseDecoder::new().with_max_event_bytes(12);
        let mut out = Output::new();
        decoder.push(b"data: 1234", &mut out).unwrap();
        let error = decoder.push(b"56789", &mut out).unwrap_err();
        assert!(error.to_string().contains("sse decoder"), "{error}");
        let mut decoder = SseDecoder::new().with_max_event_bytes(12);
        decoder.push(b"data: 123456\n", &mut out).unwrap();
        assert!(decoder.push(b"data: 789012\n", &mut out).is_err());
    }
}

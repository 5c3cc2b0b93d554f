//! Incremental JSON scanning: [`Verbatim`] passes a container's text on as it
//! arrives (dropping trailing commas), and [`Sax`] follows an object's structure to
//! hand chosen values to a [`Visitor`] — captured verbatim, decoded, or skipped.
//!
//! Neither validates JSON fully (the final text is parsed by `serde_json` once);
//! they find where values start and end, respecting strings, so that an end
//! marker inside a string never ends a value.

use super::string::{BadEscape, Decoded, StringDecoder};
use super::{find_quote_or_escape, is_space};

/// What a scanner found in a piece of input.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Scanned {
    /// The piece was used up; the value goes on.
    More,
    /// The value ended: this many bytes of the piece belong to it.
    Done(usize),
    /// A byte that cannot continue the value (outside strings), at this offset:
    /// usually the start of an end tag. Nothing from it on was used.
    Stray(usize),
    /// The text is not JSON, at the byte at this offset of the piece (the same
    /// byte of the text, however it was cut into pieces).
    Invalid(usize, String),
}

/// Reads one JSON object, array or string from its opening byte, passing its
/// text on verbatim except for trailing commas (`[1, 2,]`), which it drops.
#[derive(Debug, Default)]
pub(crate) struct Verbatim {
    /// The closers the open containers expect, innermost last.
    closers: Vec<u8>,
    in_string: bool,
    escaped: bool,
    /// A comma, and the whitespace after it, that ended an earlier piece: not
    /// passed on yet.
    held: String,
    /// The last significant byte outside strings.
    last: u8,
}

impl Verbatim {
    /// Ready for a new value, its memory kept.
    fn reset(mut self) -> Self {
        self.closers.clear();
        self.in_string = false;
        self.escaped = false;
        self.held.clear();
        self.last = 0;
        self
    }

    /// Scans `input`, passing the value's text to `emit`: one piece per run of
    /// text, cut only where a trailing comma is left out.
    pub(crate) fn feed(&mut self, input: &str, emit: &mut impl FnMut(&str)) -> Scanned {
        let bytes = input.as_bytes();
        let mut pos = 0;
        let mut from = 0;
        // Where a comma, and the whitespace after it, started in this piece: it
        // is passed on if something other than a closer follows. A comma held
        // from an earlier piece starts the piece so.
        let mut comma = (!self.held.is_empty()).then_some(0);
        while pos < bytes.len() {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                    pos += 1;
                    continue;
                }
                match find_quote_or_escape(&bytes[pos..]) {
                    None => pos = bytes.len(),
                    Some(offset) => {
                        let at = pos + offset;
                        pos = at + 1;
                        if bytes[at] == b'\\' {
                            self.escaped = true;
                        } else {
                            self.in_string = false;
                            self.last = b'"';
                            if self.closers.is_empty() {
                                emit(&input[from..pos]);
                                return Scanned::Done(pos);
                            }
                        }
                    }
                }
                continue;
            }
            let byte = bytes[pos];
            match byte {
                _ if is_space(byte) => {}
                b'}' | b']' | b'<' => {
                    if let Some(at) = comma.take() {
                        // A trailing comma (or one cut off by a tag): left out.
                        emit(&input[from..at]);
                        self.held.clear();
                        from = pos;
                    }
                    if byte == b'<' {
                        emit(&input[from..pos]);
                        return Scanned::Stray(pos);
                    }
                    if self.closers.pop() != Some(byte) {
                        emit(&input[from..pos]);
                        return Scanned::Invalid(pos, format!("unexpected `{}`", byte as char));
                    }
                    self.last = byte;
                    if self.closers.is_empty() {
                        emit(&input[from..=pos]);
                        return Scanned::Done(pos + 1);
                    }
                }
                _ => {
                    if comma.take().is_some() {
                        self.release(emit);
                    }
                    match byte {
                        b',' => comma = Some(pos),
                        b'"' => self.in_string = true,
                        b'{' => self.closers.push(b'}'),
                        b'[' => self.closers.push(b']'),
                        _ => {}
                    }
                    self.last = byte;
                }
            }
            pos += 1;
        }
        match comma {
            Some(at) => {
                emit(&input[from..at]);
                self.held.push_str(&input[at..]);
            }
            None => emit(&input[from..]),
        }
        Scanned::More
    }

    /// The closers that would complete the value now, innermost first, or why it
    /// cannot be completed.
    pub(crate) fn unclosed(&self) -> Result<Vec<u8>, &'static str> {
        if self.in_string {
            return Err("it ends inside a string");
        }
        if self.last == b':' {
            return Err("it ends after a key, before its value");
        }
        Ok(self.closers.iter().rev().copied().collect())
    }

    /// Passes on a comma held from an earlier piece: something other than a
    /// closer follows it.
    fn release(&mut self, emit: &mut impl FnMut(&str)) {
        if !self.held.is_empty() {
            emit(&self.held);
            self.held.clear();
        }
    }
}

/// How a [`Visitor`] wants a value treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Visit {
    /// Look inside it (objects and arrays; anything else is skipped).
    Descend,
    /// A string: pass its decoded contents on (to [`Visitor::decoded`]);
    /// anything else: pass its text on verbatim (to [`Visitor::captured`]).
    Decode,
    /// Ignore it.
    Skip,
}

/// Where a value stands: the keys and indexes from the root.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Path<'a>(&'a [Frame]);

impl Path<'_> {
    /// How deep the value is (the root's fields are at depth 1).
    pub(crate) fn depth(&self) -> usize {
        self.0.len()
    }

    /// The key at `depth` (1-based), when that level is an object.
    pub(crate) fn key(&self, depth: usize) -> Option<&str> {
        let frame = self.0.get(depth.checked_sub(1)?)?;
        frame.object.then_some(frame.key.as_str())
    }
}

/// Receives the values a [`Sax`] finds.
pub(crate) trait Visitor {
    /// A value starts at `path`, at byte `at` of the scanned text; `first` is its
    /// first byte.
    fn value(&mut self, path: Path<'_>, first: u8, at: usize) -> Visit;
    /// Text of a captured value.
    fn captured(&mut self, piece: &str);
    /// Decoded text of a decoded string.
    fn decoded(&mut self, piece: &str);
    /// A captured or decoded value, or an object or array looked inside, ended
    /// at `path`, before byte `at` of the scanned text.
    fn ended(&mut self, path: Path<'_>, at: usize);
}

/// One open container.
#[derive(Debug, Clone, Default)]
pub(crate) struct Frame {
    object: bool,
    key: String,
    index: usize,
}

#[derive(Debug)]
enum State {
    /// Expecting a value.
    Value,
    /// After `{`: a key or `}`.
    FirstKey,
    /// After a comma in an object: a key (or `}`: a trailing comma).
    NextKey,
    /// After `[`: a value or `]`.
    FirstItem,
    /// After a comma in an array: a value (or `]`: a trailing comma).
    NextItem,
    Key(StringDecoder),
    Colon,
    /// Inside a container or string, passed on (`capture`) or skipped.
    Verbatim {
        verbatim: Verbatim,
        capture: bool,
    },
    CaptureScalar,
    String {
        decoder: StringDecoder,
        decode: bool,
    },
    SkipScalar,
    /// After a value: a comma or a closer.
    After,
    Done,
}

/// The open containers, innermost last. A closed container's frame keeps its
/// memory (its key's buffer) for the next container opened at its depth.
#[derive(Debug, Default)]
struct Frames {
    all: Vec<Frame>,
    open: usize,
}

impl Frames {
    fn path(&self) -> Path<'_> {
        Path(&self.all[..self.open])
    }

    fn push(&mut self, object: bool) {
        if self.open == self.all.len() {
            self.all.push(Frame::default());
        }
        let frame = &mut self.all[self.open];
        frame.object = object;
        frame.key.clear();
        frame.index = 0;
        self.open += 1;
    }

    fn pop(&mut self) {
        self.open = self.open.saturating_sub(1);
    }

    fn last(&self) -> Option<&Frame> {
        self.all[..self.open].last()
    }

    fn last_mut(&mut self) -> Option<&mut Frame> {
        self.all[..self.open].last_mut()
    }

    fn len(&self) -> usize {
        self.open
    }

    fn is_empty(&self) -> bool {
        self.open == 0
    }
}

/// Follows the structure of a JSON value, handing values to a [`Visitor`].
#[derive(Debug)]
pub(crate) struct Sax {
    frames: Frames,
    state: State,
    /// Bytes scanned in earlier pieces.
    offset: usize,
    /// The reader of the last container passed on verbatim, kept with its memory.
    spare: Verbatim,
}

impl Default for Sax {
    fn default() -> Self {
        Sax {
            frames: Frames::default(),
            state: State::Value,
            offset: 0,
            spare: Verbatim::default(),
        }
    }
}

impl Sax {
    /// Ready for a new value, its memory kept.
    pub(crate) fn reset(&mut self) {
        self.frames.open = 0;
        self.state = State::Value;
        self.offset = 0;
    }

    /// Scans `input`. Whitespace before the root value is skipped.
    pub(crate) fn feed(&mut self, input: &str, visitor: &mut impl Visitor) -> Scanned {
        let step = self.scan(input, visitor);
        self.offset += match step {
            Scanned::More => input.len(),
            Scanned::Done(used) | Scanned::Stray(used) => used,
            Scanned::Invalid(..) => 0,
        };
        step
    }

    fn scan(&mut self, input: &str, visitor: &mut impl Visitor) -> Scanned {
        let bytes = input.as_bytes();
        let mut pos = 0;
        while pos < bytes.len() {
            let byte = bytes[pos];
            match &mut self.state {
                State::Done => return Scanned::Done(pos),
                State::Verbatim { verbatim, capture } => {
                    let capture = *capture;
                    let mut emit = |piece: &str| {
                        if capture && !piece.is_empty() {
                            visitor.captured(piece)
                        }
                    };
                    match verbatim.feed(&input[pos..], &mut emit) {
                        Scanned::More => return Scanned::More,
                        Scanned::Done(used) => {
                            pos += used;
                            if capture {
                                visitor.ended(self.frames.path(), self.offset + pos);
                            }
                            self.spare = std::mem::take(verbatim);
                            self.value_done();
                        }
                        Scanned::Stray(at) => return Scanned::Stray(pos + at),
                        Scanned::Invalid(at, message) => {
                            return Scanned::Invalid(pos + at, message);
                        }
                    }
                    continue;
                }
                State::Key(decoder) => {
                    let frame = self.frames.last_mut().expect("keys are inside objects");
                    match decoder.feed(&input[pos..], &mut |piece| frame.key.push_str(piece)) {
                        Ok(Decoded::More) => return Scanned::More,
                        Ok(Decoded::End(used)) => {
                            pos += used;
                            self.state = State::Colon;
                        }
                        Err(BadEscape { at, message }) => {
                            return Scanned::Invalid(pos + at, message);
                        }
                    }
                    continue;
                }
                State::String { decoder, decode } => {
                    let decode = *decode;
                    let result = decoder.feed(&input[pos..], &mut |piece| {
                        if decode {
                            visitor.decoded(piece)
                        }
                    });
                    match result {
                        Ok(Decoded::More) => return Scanned::More,
                        Ok(Decoded::End(used)) => {
                            pos += used;
                            if decode {
                                visitor.ended(self.frames.path(), self.offset + pos);
                            }
                            self.value_done();
                        }
                        Err(BadEscape { at, message }) => {
                            return Scanned::Invalid(pos + at, message);
                        }
                    }
                    continue;
                }
                State::CaptureScalar | State::SkipScalar => {
                    let end = bytes[pos..]
                        .iter()
                        .position(|&b| is_space(b) || matches!(b, b',' | b'}' | b']' | b'<'));
                    let end = end.map_or(bytes.len(), |offset| pos + offset);
                    if matches!(self.state, State::CaptureScalar) && end > pos {
                        visitor.captured(&input[pos..end]);
                    }
                    if end == bytes.len() {
                        return Scanned::More;
                    }
                    if matches!(self.state, State::CaptureScalar) {
                        visitor.ended(self.frames.path(), self.offset + end);
                    }
                    pos = end;
                    self.value_done();
                    continue;
                }
                _ if is_space(byte) => {}
                _ if byte == b'<' => return Scanned::Stray(pos),
                State::Value | State::FirstItem | State::NextItem => {
                    if byte == b']' && !matches!(self.state, State::Value) {
                        self.close_container(visitor, self.offset + pos + 1);
                    } else {
                        self.start_value(byte, visitor, self.offset + pos);
                        if matches!(self.state, State::Verbatim { .. } | State::CaptureScalar) {
                            // The first byte belongs to the value: let its scanner see it.
                            continue;
                        }
                    }
                }
                State::FirstKey | State::NextKey => match byte {
                    b'"' => {
                        self.frames
                            .last_mut()
                            .expect("inside an object")
                            .key
                            .clear();
                        self.state = State::Key(StringDecoder::default());
                    }
                    b'}' => self.close_container(visitor, self.offset + pos + 1),
                    _ => {
                        return Scanned::Invalid(
                            pos,
                            format!("expected a key, found `{}`", byte as char),
                        );
                    }
                },
                State::Colon => {
                    if byte != b':' {
                        return Scanned::Invalid(
                            pos,
                            format!("expected `:`, found `{}`", byte as char),
                        );
                    }
                    self.state = State::Value;
                }
                State::After => match (byte, self.frames.last().map(|f| f.object)) {
                    (b',', Some(true)) => self.state = State::NextKey,
                    (b',', Some(false)) => {
                        self.frames.last_mut().expect("inside an array").index += 1;
                        self.state = State::NextItem;
                    }
                    (b'}', Some(true)) | (b']', Some(false)) => {
                        self.close_container(visitor, self.offset + pos + 1)
                    }
                    _ => {
                        return Scanned::Invalid(
                            pos,
                            format!(
                                "expected `,` or a closing bracket, found `{}`",
                                byte as char
                            ),
                        );
                    }
                },
            }
            pos += 1;
        }
        match self.state {
            State::Done => Scanned::Done(pos),
            _ => Scanned::More,
        }
    }

    /// Ends the input where it stands: completes the root value when at most
    /// `budget` closers are missing, telling `visitor` as if they had arrived.
    pub(crate) fn close(
        &mut self,
        budget: usize,
        visitor: &mut impl Visitor,
    ) -> Result<(), String> {
        let captured = match &self.state {
            State::Done => return Ok(()),
            State::Verbatim { verbatim, .. } => verbatim.unclosed().map_err(str::to_owned)?,
            State::CaptureScalar | State::SkipScalar | State::After => Vec::new(),
            State::FirstKey | State::NextKey | State::FirstItem | State::NextItem => Vec::new(),
            State::Value if self.frames.is_empty() => return Err("there is no value".into()),
            State::Value | State::Colon => {
                return Err("it ends after a key, before its value".into());
            }
            State::Key(_) | State::String { .. } => return Err("it ends inside a string".into()),
        };
        let missing = captured.len() + self.frames.len();
        if missing > budget {
            return Err(format!("{missing} closing brackets are missing"));
        }
        let capturing = matches!(
            self.state,
            State::Verbatim { capture: true, .. } | State::CaptureScalar
        );
        let at = self.offset;
        if capturing {
            if !captured.is_empty() {
                visitor.captured(std::str::from_utf8(&captured).expect("closers are ASCII"));
            }
            visitor.ended(self.frames.path(), at);
        }
        while !self.frames.is_empty() {
            self.close_container(visitor, at);
        }
        self.state = State::Done;
        Ok(())
    }

    fn start_value(&mut self, first: u8, visitor: &mut impl Visitor, at: usize) {
        let visit = visitor.value(self.frames.path(), first, at);
        self.state = match (visit, first) {
            (Visit::Descend, b'{' | b'[') => {
                self.frames.push(first == b'{');
                if first == b'{' {
                    State::FirstKey
                } else {
                    State::FirstItem
                }
            }
            (Visit::Decode | Visit::Skip | Visit::Descend, b'"') => State::String {
                decoder: StringDecoder::default(),
                decode: visit == Visit::Decode,
            },
            (Visit::Decode | Visit::Skip, b'{' | b'[') => State::Verbatim {
                verbatim: std::mem::take(&mut self.spare).reset(),
                capture: visit == Visit::Decode,
            },
            (Visit::Decode, _) => State::CaptureScalar,
            (Visit::Skip | Visit::Descend, _) => State::SkipScalar,
        };
    }

    fn close_container(&mut self, visitor: &mut impl Visitor, at: usize) {
        let parent = self.frames.len().saturating_sub(1);
        visitor.ended(Path(&self.frames.all[..parent]), at);
        self.frames.pop();
        self.value_done();
    }

    fn value_done(&mut self) {
        self.state = if self.frames.is_empty() {
            State::Done
        } else {
            State::After
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    /// Feeds `input` cut at `cuts`; returns the final step and the used length.
    fn feed_cut<F: FnMut(&str) -> Scanned>(
        input: &str,
        cuts: &[usize],
        mut feed: F,
    ) -> (Scanned, usize) {
        let mut start = 0;
        for end in crate::natural::scan::cut_points(input, cuts) {
            match feed(&input[start..end]) {
                Scanned::More => start = end,
                Scanned::Done(used) => return (Scanned::Done(start + used), start + used),
                Scanned::Stray(at) => return (Scanned::Stray(start + at), start + at),
                invalid => return (invalid, start),
            }
        }
        (Scanned::More, input.len())
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            any::<bool>().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            "\\PC{0,8}|[<>{}\\[\\],:\"\\\\]{0,6}".prop_map(Value::from),
            Just(Value::Null),
        ];
        leaf.prop_recursive(3, 20, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map("[a-z<]{1,4}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn container() -> impl Strategy<Value = Value> {
        json_value().prop_map(|v| {
            if v.is_object() || v.is_array() {
                v
            } else {
                json!({ "v": v })
            }
        })
    }

    #[derive(Default)]
    struct Recorder {
        captured: String,
        decoded: String,
        ended: Vec<String>,
        capture_key: &'static str,
        decode_key: &'static str,
    }

    impl Visitor for Recorder {
        fn value(&mut self, path: Path<'_>, _first: u8, _at: usize) -> Visit {
            match (path.depth(), path.key(1)) {
                (0, _) => Visit::Descend,
                (1, Some(key)) if key == self.capture_key => Visit::Decode,
                (1, Some(key)) if key == self.decode_key => Visit::Decode,
                _ => Visit::Skip,
            }
        }
        fn captured(&mut self, piece: &str) {
            self.captured.push_str(piece);
        }
        fn decoded(&mut self, piece: &str) {
            self.decoded.push_str(piece);
        }
        fn ended(&mut self, path: Path<'_>, _at: usize) {
            self.ended.push(path.key(1).unwrap_or("root").to_owned());
        }
    }

    proptest! {
        #[test]
        fn verbatim_passes_any_container_on_whole(value in container(), pretty in any::<bool>(), cuts in prop::collection::vec(any::<usize>(), 0..8)) {
            let text = if pretty { serde_json::to_string_pretty(&value).unwrap() } else { value.to_string() };
            let input = format!("{text}</tool_call>");
            let mut verbatim = Verbatim::default();
            let mut out = String::new();
            let (step, used) = feed_cut(&input, &cuts, |piece| verbatim.feed(piece, &mut |p| out.push_str(p)));
            prop_assert_eq!(step, Scanned::Done(text.len()));
            prop_assert_eq!(used, text.len());
            prop_assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), value);
        }

        #[test]
        fn sax_captures_and_decodes_fields_in_any_order(
            arguments in container(),
            name in "\\PC{0,12}",
            other in json_value(),
            order in 0usize..3,
            cuts in prop::collection::vec(any::<usize>(), 0..8),
        ) {
            let fields = [
                format!("\"name\": {}", Value::from(name.clone())),
                format!("\"arguments\": {arguments}"),
                format!("\"other\": {other}"),
            ];
            let mut ordered: Vec<&String> = fields.iter().collect();
            ordered.rotate_left(order);
            let text = format!("{{ {} }}", ordered.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "));
            let input = format!("{text}\n</tool_call>");
            let mut sax = Sax::default();
            let mut recorder = Recorder { capture_key: "arguments", decode_key: "name", ..Recorder::default() };
            let (step, _) = feed_cut(&input, &cuts, |piece| sax.feed(piece, &mut recorder));
            prop_assert_eq!(step, Scanned::Done(text.len()));
            prop_assert_eq!(serde_json::from_str::<Value>(&recorder.captured).unwrap(), arguments);
            prop_assert_eq!(recorder.decoded, name);
            prop_assert_eq!(recorder.ended.len(), 3);
            prop_assert_eq!(recorder.ended.last().map(String::as_str), Some("root"));
        }
    }

    /// `value` as JSON text with a trailing comma, and whitespace around it,
    /// after the last item of every non-empty container.
    fn with_trailing_commas(value: &Value) -> String {
        match value {
            Value::Array(items) if !items.is_empty() => {
                let items: Vec<String> = items.iter().map(with_trailing_commas).collect();
                format!("[{} ,\n ]", items.join(","))
            }
            Value::Object(fields) if !fields.is_empty() => {
                let fields: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| {
                        format!("{}: {}", Value::from(k.as_str()), with_trailing_commas(v))
                    })
                    .collect();
                format!("{{{},\t}}", fields.join(", "))
            }
            other => other.to_string(),
        }
    }

    proptest! {
        #[test]
        fn verbatim_drops_trailing_commas_however_the_text_is_cut(
            value in container(),
            cuts in prop::collection::vec(any::<usize>(), 0..12),
        ) {
            let text = with_trailing_commas(&value);
            let mut verbatim = Verbatim::default();
            let mut out = String::new();
            let (step, _) = feed_cut(&text, &cuts, |piece| verbatim.feed(piece, &mut |p| out.push_str(p)));
            prop_assert_eq!(step, Scanned::Done(text.len()));
            prop_assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), value);
        }
    }

    #[test]
    fn verbatim_drops_trailing_commas() {
        let mut verbatim = Verbatim::default();
        let mut out = String::new();
        let step = verbatim.feed("{\"a\": [1, 2, ], \"b\": 3,\n}", &mut |p| out.push_str(p));
        assert!(matches!(step, Scanned::Done(_)));
        assert_eq!(
            serde_json::from_str::<Value>(&out).unwrap(),
            json!({"a": [1, 2], "b": 3})
        );
    }

    #[test]
    fn verbatim_stops_at_a_stray_tag_outside_strings_only() {
        let mut verbatim = Verbatim::default();
        let mut out = String::new();
        let input = "{\"a\": \"x</tool_call>y\", \"b\": 1</tool_call>";
        let step = verbatim.feed(input, &mut |p| out.push_str(p));
        assert_eq!(step, Scanned::Stray(input.rfind('<').unwrap()));
        assert_eq!(verbatim.unclosed().unwrap(), b"}");
    }

    #[test]
    fn unclosable_values_say_why() {
        let mut verbatim = Verbatim::default();
        verbatim.feed("{\"a\": \"unterminated", &mut |_| {});
        assert_eq!(verbatim.unclosed(), Err("it ends inside a string"));
        let mut verbatim = Verbatim::default();
        verbatim.feed("{\"a\":", &mut |_| {});
        assert!(verbatim.unclosed().is_err());
    }

    #[test]
    fn sax_closes_one_missing_bracket_within_budget() {
        let mut recorder = Recorder {
            capture_key: "arguments",
            decode_key: "name",
            ..Recorder::default()
        };
        let mut sax = Sax::default();
        assert_eq!(
            sax.feed("{\"name\": \"x\", \"arguments\": {\"a\": 1}", &mut recorder),
            Scanned::More
        );
        sax.close(1, &mut recorder).unwrap();
        assert_eq!(recorder.captured, "{\"a\": 1}");

        let mut sax = Sax::default();
        let mut recorder = Recorder {
            capture_key: "arguments",
            ..Recorder::default()
        };
        sax.feed("{\"arguments\": {\"a\": 1", &mut recorder);
        assert_eq!(
            sax.close(1, &mut recorder),
            Err("2 closing brackets are missing".into())
        );
    }

    #[test]
    fn sax_reports_syntax_errors() {
        let mut recorder = Recorder::default();
        let mut sax = Sax::default();
        assert!(matches!(
            sax.feed("{\"a\" 1}", &mut recorder),
            Scanned::Invalid(..)
        ));
        let mut sax = Sax::default();
        assert!(matches!(
            sax.feed("{x}", &mut recorder),
            Scanned::Invalid(..)
        ));
    }
}

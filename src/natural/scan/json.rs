//! Incremental JSON scanning: [`Skim`] passes a container's text on as it arrives
//! (dropping trailing commas), and [`Sax`] follows an object's structure to hand
//! chosen values to a [`Visitor`] — captured verbatim, decoded, or skipped.
//!
//! Neither validates JSON fully (the final text is parsed by `serde_json` once);
//! they find where values start and end, respecting strings, so that an end
//! marker inside a string never ends a value.

use memchr::memchr2;

use super::string::{BadEscape, Decoded, StringDecoder};

/// What a scanner found in a piece of input.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// The piece was used up; the value goes on.
    More,
    /// The value ended: this many bytes of the piece belong to it.
    Done(usize),
    /// A byte that cannot continue the value (outside strings), at this offset:
    /// usually the start of an end tag. Nothing from it on was used.
    Stray(usize),
    /// The text is not JSON.
    Invalid(String),
}

fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

/// Skims one JSON object, array or string from its opening byte, passing its
/// text on verbatim except for trailing commas (`[1, 2,]`), which it drops.
#[derive(Debug, Default)]
pub(crate) struct Skim {
    /// The closers the open containers expect, innermost last.
    closers: Vec<u8>,
    in_string: bool,
    escaped: bool,
    /// A comma, and the whitespace after it, not passed on yet.
    held: String,
    /// The last significant byte outside strings.
    last: u8,
    /// A trailing comma was dropped.
    pub(crate) repaired: bool,
}

impl Skim {
    /// Scans `input`, passing the value's text to `emit`.
    pub(crate) fn feed(&mut self, input: &str, emit: &mut impl FnMut(&str)) -> Step {
        let bytes = input.as_bytes();
        let mut pos = 0;
        let mut from = 0;
        while pos < bytes.len() {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                    pos += 1;
                    continue;
                }
                match memchr2(b'"', b'\\', &bytes[pos..]) {
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
                                return Step::Done(pos);
                            }
                        }
                    }
                }
                continue;
            }
            let byte = bytes[pos];
            match byte {
                _ if is_space(byte) => {
                    if !self.held.is_empty() {
                        self.held.push(byte as char);
                        from = pos + 1;
                    }
                }
                b'}' | b']' => {
                    if !self.held.is_empty() {
                        self.held.clear();
                        self.repaired = true;
                    }
                    if self.closers.pop() != Some(byte) {
                        emit(&input[from..pos]);
                        return Step::Invalid(format!("unexpected `{}`", byte as char));
                    }
                    self.last = byte;
                    if self.closers.is_empty() {
                        emit(&input[from..=pos]);
                        return Step::Done(pos + 1);
                    }
                }
                b',' => {
                    self.release(emit);
                    emit(&input[from..pos]);
                    from = pos + 1;
                    self.held.push(',');
                    self.last = byte;
                }
                b'<' => {
                    emit(&input[from..pos]);
                    return Step::Stray(pos);
                }
                _ => {
                    self.release(emit);
                    match byte {
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
        emit(&input[from..]);
        Step::More
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

    /// Passes on a held comma: something other than a closer follows it.
    fn release(&mut self, emit: &mut impl FnMut(&str)) {
        if !self.held.is_empty() {
            emit(&self.held);
            self.held.clear();
        }
    }
}

/// How a [`Visitor`] wants a value treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Treat {
    /// Look inside it (objects and arrays; anything else is skipped).
    Descend,
    /// Pass its text on verbatim (to [`Visitor::captured`]).
    Capture,
    /// A string: pass its decoded contents on (to [`Visitor::decoded`]);
    /// anything else is captured.
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

    /// The array index at `depth` (1-based), when that level is an array.
    pub(crate) fn index(&self, depth: usize) -> Option<usize> {
        let frame = self.0.get(depth.checked_sub(1)?)?;
        (!frame.object).then_some(frame.index)
    }
}

/// Receives the values a [`Sax`] finds.
pub(crate) trait Visitor {
    /// A value starts at `path`; `first` is its first byte.
    fn value(&mut self, path: Path<'_>, first: u8) -> Treat;
    /// Text of a captured value.
    fn captured(&mut self, piece: &str);
    /// Decoded text of a decoded string.
    fn decoded(&mut self, piece: &str);
    /// A captured or decoded value at `path` ended.
    fn ended(&mut self, path: Path<'_>);
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
    Skim { skim: Skim, capture: bool },
    CaptureScalar,
    String { decoder: StringDecoder, decode: bool },
    SkipScalar,
    /// After a value: a comma or a closer.
    After,
    Done,
}

/// Follows the structure of a JSON value, handing values to a [`Visitor`].
#[derive(Debug)]
pub(crate) struct Sax {
    frames: Vec<Frame>,
    state: State,
    /// A trailing comma was dropped or a closer added.
    repaired: bool,
}

impl Default for Sax {
    fn default() -> Self {
        Sax {
            frames: Vec::new(),
            state: State::Value,
            repaired: false,
        }
    }
}

impl Sax {
    /// Scans `input`. Whitespace before the root value is skipped.
    pub(crate) fn feed(&mut self, input: &str, visitor: &mut impl Visitor) -> Step {
        let bytes = input.as_bytes();
        let mut pos = 0;
        while pos < bytes.len() {
            let byte = bytes[pos];
            match &mut self.state {
                State::Done => return Step::Done(pos),
                State::Skim { skim, capture } => {
                    let capture = *capture;
                    let mut emit = |piece: &str| {
                        if capture && !piece.is_empty() {
                            visitor.captured(piece)
                        }
                    };
                    match skim.feed(&input[pos..], &mut emit) {
                        Step::More => return Step::More,
                        Step::Done(used) => {
                            pos += used;
                            self.repaired |= skim.repaired;
                            if capture {
                                visitor.ended(Path(&self.frames));
                            }
                            self.value_done();
                        }
                        Step::Stray(at) => return Step::Stray(pos + at),
                        invalid @ Step::Invalid(_) => return invalid,
                    }
                    continue;
                }
                State::Key(decoder) => {
                    let frame = self.frames.last_mut().expect("keys are inside objects");
                    match decoder.feed(&input[pos..], &mut |piece| frame.key.push_str(piece)) {
                        Ok(Decoded::More) => return Step::More,
                        Ok(Decoded::End(used)) => {
                            pos += used;
                            self.state = State::Colon;
                        }
                        Err(BadEscape(message)) => return Step::Invalid(message),
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
                        Ok(Decoded::More) => return Step::More,
                        Ok(Decoded::End(used)) => {
                            pos += used;
                            if decode {
                                visitor.ended(Path(&self.frames));
                            }
                            self.value_done();
                        }
                        Err(BadEscape(message)) => return Step::Invalid(message),
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
                        return Step::More;
                    }
                    if matches!(self.state, State::CaptureScalar) {
                        visitor.ended(Path(&self.frames));
                    }
                    pos = end;
                    self.value_done();
                    continue;
                }
                _ if is_space(byte) => {}
                _ if byte == b'<' => return Step::Stray(pos),
                State::Value | State::FirstItem | State::NextItem => {
                    if byte == b']' && !matches!(self.state, State::Value) {
                        self.repaired |= matches!(self.state, State::NextItem);
                        self.close_container();
                    } else {
                        self.start_value(byte, visitor);
                        if matches!(self.state, State::Skim { .. } | State::CaptureScalar) {
                            // The first byte belongs to the value: let its scanner see it.
                            continue;
                        }
                    }
                }
                State::FirstKey | State::NextKey => match byte {
                    b'"' => {
                        self.frames.last_mut().expect("inside an object").key.clear();
                        self.state = State::Key(StringDecoder::default());
                    }
                    b'}' => {
                        if matches!(self.state, State::NextKey) {
                            self.repaired = true;
                        }
                        self.close_container();
                    }
                    _ => return Step::Invalid(format!("expected a key, found `{}`", byte as char)),
                },
                State::Colon => {
                    if byte != b':' {
                        return Step::Invalid(format!("expected `:`, found `{}`", byte as char));
                    }
                    self.state = State::Value;
                }
                State::After => match (byte, self.frames.last().map(|f| f.object)) {
                    (b',', Some(true)) => self.state = State::NextKey,
                    (b',', Some(false)) => {
                        self.frames.last_mut().expect("inside an array").index += 1;
                        self.state = State::NextItem;
                    }
                    (b'}', Some(true)) | (b']', Some(false)) => self.close_container(),
                    _ => {
                        return Step::Invalid(format!(
                            "expected `,` or a closing bracket, found `{}`",
                            byte as char
                        ));
                    }
                },
            }
            pos += 1;
        }
        match self.state {
            State::Done => Step::Done(pos),
            _ => Step::More,
        }
    }

    /// True once the root value is complete.
    pub(crate) fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// True when a trailing comma was dropped or a closer added.
    pub(crate) fn repaired(&self) -> bool {
        self.repaired
    }

    /// Ends the input where it stands: completes the root value when at most
    /// `budget` closers are missing, telling `visitor` as if they had arrived.
    pub(crate) fn close(&mut self, budget: usize, visitor: &mut impl Visitor) -> Result<(), String> {
        let captured = match &self.state {
            State::Done => return Ok(()),
            State::Skim { skim, .. } => skim.unclosed().map_err(str::to_owned)?,
            State::CaptureScalar | State::SkipScalar | State::After => Vec::new(),
            State::FirstKey | State::NextKey | State::FirstItem | State::NextItem => Vec::new(),
            State::Value if self.frames.is_empty() => return Err("there is no value".into()),
            State::Value | State::Colon => return Err("it ends after a key, before its value".into()),
            State::Key(_) | State::String { .. } => return Err("it ends inside a string".into()),
        };
        let missing = captured.len() + self.frames.len();
        if missing > budget {
            return Err(format!("{missing} closing brackets are missing"));
        }
        let capturing = matches!(
            self.state,
            State::Skim { capture: true, .. } | State::CaptureScalar
        );
        if capturing {
            if !captured.is_empty() {
                visitor.captured(std::str::from_utf8(&captured).expect("closers are ASCII"));
            }
            visitor.ended(Path(&self.frames));
        }
        self.repaired |= missing > 0;
        self.frames.clear();
        self.state = State::Done;
        Ok(())
    }

    fn start_value(&mut self, first: u8, visitor: &mut impl Visitor) {
        let treat = visitor.value(Path(&self.frames), first);
        self.state = match (treat, first) {
            (Treat::Descend, b'{' | b'[') => {
                self.frames.push(Frame {
                    object: first == b'{',
                    ..Frame::default()
                });
                if first == b'{' {
                    State::FirstKey
                } else {
                    State::FirstItem
                }
            }
            (Treat::Decode | Treat::Skip | Treat::Descend, b'"') => State::String {
                decoder: StringDecoder::default(),
                decode: treat == Treat::Decode,
            },
            (Treat::Capture | Treat::Decode, b'{' | b'[') | (Treat::Capture, b'"') => State::Skim {
                skim: Skim::default(),
                capture: true,
            },
            (Treat::Skip, b'{' | b'[') => State::Skim {
                skim: Skim::default(),
                capture: false,
            },
            (Treat::Capture | Treat::Decode, _) => State::CaptureScalar,
            (Treat::Skip | Treat::Descend, _) => State::SkipScalar,
        };
    }

    fn close_container(&mut self) {
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
    fn feed_cut<F: FnMut(&str) -> Step>(input: &str, cuts: &[usize], mut feed: F) -> (Step, usize) {
        let mut bounds: Vec<usize> = cuts
            .iter()
            .map(|c| c % (input.len() + 1))
            .filter(|c| input.is_char_boundary(*c))
            .collect();
        bounds.push(input.len());
        bounds.sort_unstable();
        bounds.dedup();
        let mut start = 0;
        for end in bounds {
            match feed(&input[start..end]) {
                Step::More => start = end,
                Step::Done(used) => return (Step::Done(start + used), start + used),
                Step::Stray(at) => return (Step::Stray(start + at), start + at),
                invalid => return (invalid, start),
            }
        }
        (Step::More, input.len())
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
        json_value().prop_map(|v| if v.is_object() || v.is_array() { v } else { json!({ "v": v }) })
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
        fn value(&mut self, path: Path<'_>, _first: u8) -> Treat {
            match (path.depth(), path.key(1)) {
                (0, _) => Treat::Descend,
                (1, Some(key)) if key == self.capture_key => Treat::Capture,
                (1, Some(key)) if key == self.decode_key => Treat::Decode,
                _ => Treat::Skip,
            }
        }
        fn captured(&mut self, piece: &str) {
            self.captured.push_str(piece);
        }
        fn decoded(&mut self, piece: &str) {
            self.decoded.push_str(piece);
        }
        fn ended(&mut self, path: Path<'_>) {
            self.ended.push(path.key(1).unwrap_or("?").to_owned());
        }
    }

    proptest! {
        #[test]
        fn skim_passes_any_container_on_whole(value in container(), pretty in any::<bool>(), cuts in prop::collection::vec(any::<usize>(), 0..8)) {
            let text = if pretty { serde_json::to_string_pretty(&value).unwrap() } else { value.to_string() };
            let input = format!("{text}</tool_call>");
            let mut skim = Skim::default();
            let mut out = String::new();
            let (step, used) = feed_cut(&input, &cuts, |piece| skim.feed(piece, &mut |p| out.push_str(p)));
            prop_assert_eq!(step, Step::Done(text.len()));
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
            prop_assert_eq!(step, Step::Done(text.len()));
            prop_assert_eq!(serde_json::from_str::<Value>(&recorder.captured).unwrap(), arguments);
            prop_assert_eq!(recorder.decoded, name);
            prop_assert_eq!(recorder.ended.len(), 2);
        }
    }

    #[test]
    fn skim_drops_trailing_commas() {
        let mut skim = Skim::default();
        let mut out = String::new();
        let step = skim.feed("{\"a\": [1, 2, ], \"b\": 3,\n}", &mut |p| out.push_str(p));
        assert!(matches!(step, Step::Done(_)));
        assert!(skim.repaired);
        assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), json!({"a": [1, 2], "b": 3}));
    }

    #[test]
    fn skim_stops_at_a_stray_tag_outside_strings_only() {
        let mut skim = Skim::default();
        let mut out = String::new();
        let input = "{\"a\": \"x</tool_call>y\", \"b\": 1</tool_call>";
        let step = skim.feed(input, &mut |p| out.push_str(p));
        assert_eq!(step, Step::Stray(input.rfind('<').unwrap()));
        assert_eq!(skim.unclosed().unwrap(), b"}");
    }

    #[test]
    fn unclosable_values_say_why() {
        let mut skim = Skim::default();
        skim.feed("{\"a\": \"unterminated", &mut |_| {});
        assert_eq!(skim.unclosed(), Err("it ends inside a string"));
        let mut skim = Skim::default();
        skim.feed("{\"a\":", &mut |_| {});
        assert!(skim.unclosed().is_err());
    }

    #[test]
    fn sax_closes_one_missing_bracket_within_budget() {
        let mut recorder = Recorder { capture_key: "arguments", decode_key: "name", ..Recorder::default() };
        let mut sax = Sax::default();
        assert_eq!(sax.feed("{\"name\": \"x\", \"arguments\": {\"a\": 1}", &mut recorder), Step::More);
        sax.close(1, &mut recorder).unwrap();
        assert!(sax.is_done() && sax.repaired());
        assert_eq!(recorder.captured, "{\"a\": 1}");

        let mut sax = Sax::default();
        let mut recorder = Recorder { capture_key: "arguments", ..Recorder::default() };
        sax.feed("{\"arguments\": {\"a\": 1", &mut recorder);
        assert_eq!(sax.close(1, &mut recorder), Err("2 closing brackets are missing".into()));
    }

    #[test]
    fn sax_reports_syntax_errors() {
        let mut recorder = Recorder::default();
        let mut sax = Sax::default();
        assert!(matches!(sax.feed("{\"a\" 1}", &mut recorder), Step::Invalid(_)));
        let mut sax = Sax::default();
        assert!(matches!(sax.feed("{x}", &mut recorder), Step::Invalid(_)));
    }
}

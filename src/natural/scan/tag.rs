//! Reading one XML-like tag — `<name a="v">`, `<name=value>`, `</name>` — from
//! text that arrives in pieces.

use crate::text::floor_char_boundary;

/// The longest tag the parser reads; a longer one is text.
pub(crate) const TAG_LIMIT: usize = 1024;

/// A tag that was read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Tag {
    /// `</name>`.
    pub(crate) closing: bool,
    /// The name, with its namespace prefix if any (`ns:invoke`).
    pub(crate) name: String,
    /// Quoted attributes, in order.
    pub(crate) attrs: Vec<(String, String)>,
    /// The value of the `<name=value>` form (Qwen3-Coder).
    pub(crate) inline: Option<String>,
}

impl Tag {
    /// An attribute's value.
    pub(crate) fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// True for an opening tag named `name`.
    pub(crate) fn opens(&self, name: &str) -> bool {
        !self.closing && self.name == name
    }

    /// True for a closing tag named `name`.
    pub(crate) fn closes(&self, name: &str) -> bool {
        self.closing && self.name == name && self.attrs.is_empty() && self.inline.is_none()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Just after `<`.
    Open,
    Name,
    /// Between attributes.
    Space,
    AttrName,
    AfterAttrName,
    BeforeValue,
    Value(u8),
    Inline,
    /// After `/` of `<name/>`.
    SelfClose,
}

/// What [`TagReader::feed`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TagStep {
    /// The piece was used up; the tag goes on.
    More,
    /// The tag ended: this many bytes of the piece belong to it.
    Done(usize),
    /// Not a tag (or too long): the bytes before this offset were read; the byte
    /// at it was not.
    NotATag(usize),
}

/// Reads a tag byte by byte after its `<`; keeps what it read, so that a
/// would-be tag can be given back as text.
#[derive(Debug)]
pub(crate) struct TagReader {
    tag: Tag,
    state: State,
    raw: String,
    limit: usize,
    attr: String,
    value: String,
    /// Emptied strings of earlier tags' attributes, reused for the next ones.
    spare: Vec<String>,
}

fn name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

/// False when `byte`, right after `<`, shows that no tag starts there.
pub(crate) fn may_open(byte: u8) -> bool {
    name_start(char::from(byte)) || byte == b'/'
}

/// A byte of a tag's name (names are ASCII), also of a Mistral tool's name or
/// call id.
pub(crate) fn name_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.' | b':')
}

fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')
}

impl Default for TagReader {
    /// A reader of tags of up to [`TAG_LIMIT`] bytes, waiting for a `<`: call
    /// [`restart`](Self::restart) when one is read.
    fn default() -> Self {
        TagReader {
            tag: Tag::default(),
            state: State::Open,
            raw: String::new(),
            limit: TAG_LIMIT,
            attr: String::new(),
            value: String::new(),
            spare: Vec::new(),
        }
    }
}

impl TagReader {
    /// A reader whose `<` was just read; gives up past `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        // Room for a short tag at once: `<String>` would otherwise grow it twice.
        let mut raw = String::with_capacity(32);
        raw.push('<');
        TagReader {
            tag: Tag::default(),
            state: State::Open,
            raw,
            limit,
            attr: String::new(),
            value: String::new(),
            spare: Vec::new(),
        }
    }

    /// Reads a new tag whose `<` was just read, keeping the memory of the last.
    pub(crate) fn restart(&mut self) {
        self.raw.clear();
        self.raw.push('<');
        self.tag.closing = false;
        self.tag.name.clear();
        for (mut attr, mut value) in self.tag.attrs.drain(..) {
            attr.clear();
            value.clear();
            self.spare.extend([attr, value]);
        }
        if let Some(mut inline) = self.tag.inline.take() {
            inline.clear();
            self.spare.push(inline);
        }
        self.state = State::Open;
        self.attr.clear();
        self.value.clear();
    }

    /// The text read so far, `<` included.
    pub(crate) fn raw(&self) -> &str {
        &self.raw
    }

    /// The tag read, once [`feed`](Self::feed) said [`TagStep::Done`].
    pub(crate) fn tag(&self) -> &Tag {
        &self.tag
    }

    /// The tag read (after [`TagStep::Done`]) and its raw text.
    pub(crate) fn finish(self) -> (Tag, String) {
        (self.tag, self.raw)
    }

    /// Reads from `input`.
    pub(crate) fn feed(&mut self, input: &str) -> TagStep {
        if let Some(step) = self.plain(input) {
            return step;
        }
        let bytes = input.as_bytes();
        let mut at = 0;
        while at < bytes.len() {
            // A run of bytes that leaves the state as it is (a name, a value)
            // is taken at once; anything else a character at a time.
            let run = self.run(&bytes[at..]);
            if run > 0 {
                let room = self.limit.saturating_sub(self.raw.len());
                let end = floor_char_boundary(input, at + run.min(room));
                let piece = &input[at..end];
                match self.state {
                    State::Name => self.tag.name.push_str(piece),
                    State::AttrName => self.attr.push_str(piece),
                    _ => self.value.push_str(piece),
                }
                self.raw.push_str(piece);
                if run > room {
                    return TagStep::NotATag(end);
                }
                at = end;
                continue;
            }
            let c = input[at..].chars().next().expect("a character");
            let step = self.step(c, at);
            if let Some(step) = step {
                return step;
            }
            at += c.len_utf8();
        }
        TagStep::More
    }

    /// A whole plain tag, `name>` or `/name>`, at the start of a new tag's
    /// `input`, read at once (the common case: a tag streamed as one token).
    fn plain(&mut self, input: &str) -> Option<TagStep> {
        if self.state != State::Open || self.raw.len() != 1 {
            return None;
        }
        let bytes = input.as_bytes();
        let closing = bytes.first() == Some(&b'/');
        let name = &bytes[usize::from(closing)..];
        if !name.first().is_some_and(|&b| name_start(char::from(b))) {
            return None;
        }
        let len = name.iter().position(|&b| !name_byte(b))?;
        let end = usize::from(closing) + len;
        if bytes[end] != b'>' || self.raw.len() + end + 1 > self.limit {
            return None;
        }
        self.tag.closing = closing;
        self.tag.name.push_str(&input[end - len..end]);
        self.raw.push_str(&input[..=end]);
        Some(TagStep::Done(end + 1))
    }

    /// How many bytes at the start of `bytes` leave the state as it is and
    /// only add to the name, attribute name or value being read.
    fn run(&self, bytes: &[u8]) -> usize {
        let until =
            |stop: &dyn Fn(u8) -> bool| bytes.iter().position(|&b| stop(b)).unwrap_or(bytes.len());
        match self.state {
            State::Name | State::AttrName => until(&|b| !name_byte(b)),
            State::Value(quote) => until(&|b| b == quote),
            State::Inline => until(&|b| matches!(b, b'>' | b'<' | b'\n')),
            _ => 0,
        }
    }

    /// Reads one character `c`, at byte `at` of the piece: `Some` when the tag
    /// ended or is not one.
    fn step(&mut self, c: char, at: usize) -> Option<TagStep> {
        {
            if self.raw.len() + c.len_utf8() > self.limit {
                return Some(TagStep::NotATag(at));
            }
            let next = match (self.state, c) {
                (State::Open, '/') if !self.tag.closing && self.tag.name.is_empty() => {
                    self.tag.closing = true;
                    State::Open
                }
                (State::Open, c) if name_start(c) => {
                    self.tag.name.push(c);
                    State::Name
                }
                (State::Name, c) if name_char(c) => {
                    self.tag.name.push(c);
                    State::Name
                }
                (State::Name | State::Space, '>') => {
                    self.raw.push(c);
                    return Some(TagStep::Done(at + 1));
                }
                (State::Name | State::Space, c) if c.is_ascii_whitespace() => State::Space,
                (State::Name, '=') if !self.tag.closing => State::Inline,
                (State::Name | State::Space, '/') if !self.tag.closing => State::SelfClose,
                (State::Space, c) if name_start(c) && !self.tag.closing => {
                    self.attr.push(c);
                    State::AttrName
                }
                (State::AttrName, c) if name_char(c) => {
                    self.attr.push(c);
                    State::AttrName
                }
                (State::AttrName | State::AfterAttrName, c) if c.is_ascii_whitespace() => {
                    State::AfterAttrName
                }
                (State::AttrName | State::AfterAttrName, '=') => State::BeforeValue,
                (State::BeforeValue, c) if c.is_ascii_whitespace() => State::BeforeValue,
                (State::BeforeValue, '"' | '\'') => State::Value(c as u8),
                (State::Value(quote), c) if c as u32 == quote as u32 => {
                    let attr =
                        std::mem::replace(&mut self.attr, self.spare.pop().unwrap_or_default());
                    let value =
                        std::mem::replace(&mut self.value, self.spare.pop().unwrap_or_default());
                    self.tag.attrs.push((attr, value));
                    State::Space
                }
                (State::Value(_), c) => {
                    self.value.push(c);
                    self.state
                }
                (State::Inline, '>') => {
                    let value =
                        std::mem::replace(&mut self.value, self.spare.pop().unwrap_or_default());
                    self.tag.inline = Some(value);
                    self.raw.push(c);
                    return Some(TagStep::Done(at + 1));
                }
                (State::Inline, c) if c != '<' && c != '\n' => {
                    self.value.push(c);
                    State::Inline
                }
                (State::SelfClose, '>') => {
                    self.raw.push(c);
                    return Some(TagStep::Done(at + 1));
                }
                _ => return Some(TagStep::NotATag(at)),
            };
            self.raw.push(c);
            self.state = next;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(input: &str) -> (TagStep, Tag) {
        let mut reader = TagReader::new(256);
        let step = reader.feed(&input[1..]);
        (step, reader.finish().0)
    }

    #[test]
    fn reads_the_forms_the_dialects_use() {
        let input = "<tool_call name = 'get_weather' >rest";
        let (step, tag) = read(input);
        assert_eq!(step, TagStep::Done(input.find('>').unwrap()));
        assert!(tag.opens("tool_call"));
        assert_eq!(tag.attr("name"), Some("get_weather"));

        let (_, tag) = read("<function=get_weather>");
        assert_eq!(tag.inline.as_deref(), Some("get_weather"));

        let (_, tag) = read("</ns:invoke>");
        assert!(tag.closes("ns:invoke"));

        let (_, tag) = read("<parameter name=\"a<b>\">");
        assert_eq!(tag.attr("name"), Some("a<b>"));
    }

    #[test]
    fn gives_up_on_what_is_not_a_tag() {
        assert_eq!(read("< 3").0, TagStep::NotATag(0));
        assert_eq!(read("<a<b>").0, TagStep::NotATag(1));
        assert_eq!(read("<parameter=\nx>").0, TagStep::NotATag(10));
        let mut reader = TagReader::new(8);
        assert_eq!(reader.feed("abcdefghij>"), TagStep::NotATag(7));
        assert_eq!(reader.raw(), "<abcdefg");
    }

    #[test]
    fn reads_across_pieces() {
        let mut reader = TagReader::new(256);
        assert_eq!(reader.feed("tool_ca"), TagStep::More);
        assert_eq!(reader.feed("ll name=\"x"), TagStep::More);
        assert_eq!(reader.feed("\">{"), TagStep::Done(2));
        let (tag, raw) = reader.finish();
        assert_eq!(raw, "<tool_call name=\"x\">");
        assert_eq!(tag.attr("name"), Some("x"));
    }

    /// Feeds `input` (after its `<`) in the pieces cut at `points`: where the
    /// tag ended (as an offset in `input`), the tag and its raw text.
    fn read_cut(
        input: &str,
        points: &[usize],
        limit: usize,
    ) -> (Option<(bool, usize)>, Tag, String) {
        let mut reader = TagReader::new(limit);
        let mut start = 1;
        for &end in points {
            let end = end + 1;
            match reader.feed(&input[start..end]) {
                TagStep::More => start = end,
                TagStep::Done(used) => {
                    let (tag, raw) = reader.finish();
                    return (Some((true, start + used)), tag, raw);
                }
                TagStep::NotATag(at) => {
                    let raw = reader.raw().to_owned();
                    return (Some((false, start + at)), reader.finish().0, raw);
                }
            }
        }
        let raw = reader.raw().to_owned();
        (None, reader.finish().0, raw)
    }

    proptest::proptest! {
        #[test]
        fn a_tag_reads_the_same_however_it_is_cut(
            body in "(tool_call|invoke|parameter|ns:x|/| |=|'|\"|name|a-b|é|🌧|\n|>|<|[a-z0-9]){0,24}",
            cuts in proptest::collection::vec(0usize..80, 0..8),
            limit in proptest::prop_oneof![proptest::strategy::Just(1024usize), 2usize..24],
        ) {
            let input = format!("<{body}");
            let whole = read_cut(&input, &[input.len() - 1], limit);
            let points = crate::natural::scan::cut_points(&input[1..], &cuts);
            proptest::prop_assert_eq!(read_cut(&input, &points, limit), whole);
        }
    }
}

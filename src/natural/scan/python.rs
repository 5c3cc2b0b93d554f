//! Python literals read as JSON, incrementally: the argument values of
//! pythonic tool calls (`[get_weather(city='Paris', days=3)]`).
//!
//! A literal is a string (`'…'`, `"…"`, `'''…'''`, `"""…"""`, with Python's
//! escapes), a number (`3`, `-2.5`, `1e-3`, `1_000`, `.5`), `True`, `False`,
//! `None`, or a list `[…]`, tuple `(…, …)` or dict `{'key': …}` of literals
//! (trailing commas allowed). It is written out as JSON as it arrives: strings
//! and containers piece by piece, a number or name when it ends. Strings with
//! prefixes (`r'…'`, `b'…'`), hexadecimal or complex numbers, sets, dict keys
//! that are not strings and `(x)` (a parenthesised value, not a tuple) are
//! errors.

use memchr::memchr2;

use super::is_space;
use super::string::{Surrogates, escape_with};

/// The longest number or name a literal may hold.
const TOKEN_LIMIT: usize = 256;

/// Reads one Python literal from its first byte (whitespace before it is
/// skipped), writing it out as JSON.
#[derive(Debug, Default)]
pub(crate) struct PyLiteral {
    /// The open containers, innermost last.
    open: Vec<Container>,
    state: State,
    /// A number or name being read.
    token: String,
    surrogates: Surrogates,
}

/// What [`PyLiteral::feed`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Read {
    /// The piece was used up; the literal goes on.
    More,
    /// The literal ended: this many bytes of the piece belong to it.
    Done(usize),
}

/// Not a Python literal.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BadLiteral(pub(crate) String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Container {
    List,
    /// A tuple, with the number of its items so far.
    Tuple(usize),
    Dict,
}

#[derive(Debug, Default, Clone, Copy)]
enum State {
    /// A value is expected.
    #[default]
    Value,
    /// After `[` or `(`: an item or the closer.
    FirstItem,
    /// After a comma between items: an item (after which a `,` is written)
    /// or the closer.
    NextItem,
    /// After `{`: a key or `}`.
    FirstKey,
    /// After a comma in a dict: a key or `}`.
    NextKey,
    /// After a key: `:`.
    Colon,
    /// After an opening quote, and a second one (`''`: empty, or triple).
    Quotes {
        quote: u8,
        count: u8,
        key: bool,
    },
    Str(Str),
    /// A number or name, in `token`.
    Token,
    /// After an item or value inside a container: a comma or the closer.
    After,
}

/// Inside a string.
#[derive(Debug, Clone, Copy)]
struct Str {
    quote: u8,
    triple: bool,
    /// Closing quotes seen in a row (a triple string ends at three).
    run: u8,
    escape: Escape,
    /// A dict key: `:` follows.
    key: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escape {
    None,
    /// After a backslash.
    Backslash,
    /// `\x`, `\u`, `\U`: `left` hex digits to go.
    Hex {
        left: u8,
        value: u32,
    },
    /// `\0`…`\777`: the digits so far.
    Octal {
        digits: u8,
        value: u32,
    },
}

impl PyLiteral {
    /// Ready for a new literal, its memory kept.
    pub(crate) fn reset(&mut self) {
        self.open.clear();
        self.state = State::Value;
        self.token.clear();
        self.surrogates = Surrogates::default();
    }

    /// Reads on in `input`, handing the JSON text to `out`.
    pub(crate) fn feed(
        &mut self,
        input: &str,
        out: &mut impl FnMut(&str),
    ) -> Result<Read, BadLiteral> {
        let bytes = input.as_bytes();
        let mut pos = 0;
        while let Some(&byte) = bytes.get(pos) {
            match self.state {
                State::Str(string) => {
                    pos = self.string(string, input, pos, out)?;
                    if self.value_ended() {
                        return Ok(Read::Done(pos));
                    }
                    continue;
                }
                State::Token => {
                    while let Some(&next) = bytes.get(pos).filter(|&&b| self.extends_token(b)) {
                        if self.token.len() == TOKEN_LIMIT {
                            return Err(BadLiteral("a number or name is too long".into()));
                        }
                        self.token.push(char::from(next));
                        pos += 1;
                    }
                    if pos == bytes.len() {
                        return Ok(Read::More);
                    }
                    token_json(&self.token, out)?;
                    self.value_done();
                    if self.value_ended() {
                        return Ok(Read::Done(pos));
                    }
                    continue;
                }
                State::Quotes { quote, count, key } => {
                    if byte == quote && count == 1 {
                        self.state = State::Quotes {
                            quote,
                            count: 2,
                            key,
                        };
                        pos += 1;
                        continue;
                    }
                    out("\"");
                    if byte == quote {
                        pos += 1;
                    } else if count == 2 {
                        // `''`: an empty string; this byte follows it.
                        out("\"");
                        self.string_done(key);
                        if self.value_ended() {
                            return Ok(Read::Done(pos));
                        }
                        continue;
                    }
                    self.state = State::Str(Str {
                        quote,
                        triple: count == 2,
                        run: 0,
                        escape: Escape::None,
                        key,
                    });
                    continue;
                }
                _ if is_space(byte) => {}
                State::Value => self.start_value(input, pos, out)?,
                State::FirstItem | State::NextItem => {
                    if self.closes(byte) {
                        self.close(out);
                    } else {
                        if let State::NextItem = self.state {
                            out(",");
                        }
                        if let Some(Container::Tuple(items)) = self.open.last_mut() {
                            *items += 1;
                        }
                        self.start_value(input, pos, out)?;
                    }
                }
                State::FirstKey | State::NextKey => match byte {
                    b'}' => self.close(out),
                    b'\'' | b'"' => {
                        if let State::NextKey = self.state {
                            out(",");
                        }
                        self.state = State::Quotes {
                            quote: byte,
                            count: 1,
                            key: true,
                        };
                    }
                    _ => return Err(BadLiteral("a dict key must be a string".into())),
                },
                State::Colon => {
                    if byte != b':' {
                        return Err(BadLiteral(format!(
                            "expected `:` after a dict key, found `{}`",
                            shown(input, pos)
                        )));
                    }
                    out(":");
                    self.state = State::Value;
                }
                State::After => match (byte, self.open.last()) {
                    (b',', Some(Container::Dict)) => self.state = State::NextKey,
                    (b',', Some(_)) => self.state = State::NextItem,
                    (b')', Some(Container::Tuple(1))) => {
                        return Err(BadLiteral(
                            "a value in parentheses is not a tuple: write `(x,)`".into(),
                        ));
                    }
                    _ if self.closes(byte) => self.close(out),
                    _ => {
                        return Err(BadLiteral(format!(
                            "expected `,` or a closing bracket, found `{}`",
                            shown(input, pos)
                        )));
                    }
                },
            }
            pos += 1;
            if self.value_ended() {
                return Ok(Read::Done(pos));
            }
        }
        Ok(Read::More)
    }

    /// True when the root literal has ended.
    fn value_ended(&self) -> bool {
        self.open.is_empty() && matches!(self.state, State::After)
    }

    /// Starts a value at byte `pos` of `input`, which is not whitespace.
    fn start_value(
        &mut self,
        input: &str,
        pos: usize,
        out: &mut impl FnMut(&str),
    ) -> Result<(), BadLiteral> {
        let byte = input.as_bytes()[pos];
        let opened = match byte {
            b'[' => Container::List,
            b'(' => Container::Tuple(0),
            b'{' => Container::Dict,
            b'\'' | b'"' => {
                self.state = State::Quotes {
                    quote: byte,
                    count: 1,
                    key: false,
                };
                return Ok(());
            }
            b'-' | b'+' | b'.' | b'_' => {
                self.start_token(byte);
                return Ok(());
            }
            _ if byte.is_ascii_alphanumeric() => {
                self.start_token(byte);
                return Ok(());
            }
            _ => {
                return Err(BadLiteral(format!(
                    "`{}` does not start a Python literal",
                    shown(input, pos)
                )));
            }
        };
        self.open.push(opened);
        if opened == Container::Dict {
            out("{");
            self.state = State::FirstKey;
        } else {
            out("[");
            self.state = State::FirstItem;
        }
        Ok(())
    }

    fn start_token(&mut self, first: u8) {
        self.token.clear();
        self.token.push(char::from(first));
        self.state = State::Token;
    }

    /// True when `byte` goes on with the number or name being read.
    fn extends_token(&self, byte: u8) -> bool {
        byte.is_ascii_alphanumeric()
            || byte == b'_'
            || byte == b'.'
            || (matches!(byte, b'+' | b'-')
                && self.token.ends_with(['e', 'E'])
                && self
                    .token
                    .starts_with(|c: char| c.is_ascii_digit() || "+-.".contains(c)))
    }

    /// True when `byte` closes the innermost container.
    fn closes(&self, byte: u8) -> bool {
        matches!(
            (self.open.last(), byte),
            (Some(Container::List), b']')
                | (Some(Container::Tuple(_)), b')')
                | (Some(Container::Dict), b'}')
        )
    }

    fn close(&mut self, out: &mut impl FnMut(&str)) {
        match self.open.pop() {
            Some(Container::Dict) => out("}"),
            _ => out("]"),
        }
        self.value_done();
    }

    fn value_done(&mut self) {
        self.state = State::After;
    }

    fn string_done(&mut self, key: bool) {
        if key {
            self.state = State::Colon;
        } else {
            self.value_done();
        }
    }

    /// Reads string contents from byte `pos`; returns where it stopped (the
    /// string ended, or the piece did).
    fn string(
        &mut self,
        mut string: Str,
        input: &str,
        mut pos: usize,
        out: &mut impl FnMut(&str),
    ) -> Result<usize, BadLiteral> {
        let bytes = input.as_bytes();
        let surrogates = &mut self.surrogates;
        while let Some(&byte) = bytes.get(pos) {
            match string.escape {
                Escape::None if string.run > 0 && byte != string.quote => {
                    // Quotes in a triple string that did not close it.
                    let quotes = [string.quote; 2];
                    let quotes = std::str::from_utf8(&quotes[..usize::from(string.run)]);
                    content(quotes.expect("ASCII"), surrogates, out);
                    string.run = 0;
                }
                Escape::None if byte == string.quote => {
                    pos += 1;
                    string.run += 1;
                    if !string.triple || string.run == 3 {
                        content("", surrogates, out);
                        out("\"");
                        self.string_done(string.key);
                        return Ok(pos);
                    }
                }
                Escape::None if byte == b'\\' => {
                    pos += 1;
                    string.escape = Escape::Backslash;
                }
                Escape::None => {
                    let run =
                        memchr2(string.quote, b'\\', &bytes[pos..]).unwrap_or(bytes.len() - pos);
                    content(&input[pos..pos + run], surrogates, out);
                    pos += run;
                }
                Escape::Backslash => {
                    let (escape, decoded) = match byte {
                        b'\n' => (Escape::None, ""),
                        b'\\' => (Escape::None, "\\"),
                        b'\'' => (Escape::None, "'"),
                        b'"' => (Escape::None, "\""),
                        b'a' => (Escape::None, "\u{7}"),
                        b'b' => (Escape::None, "\u{8}"),
                        b'f' => (Escape::None, "\u{c}"),
                        b'n' => (Escape::None, "\n"),
                        b'r' => (Escape::None, "\r"),
                        b't' => (Escape::None, "\t"),
                        b'v' => (Escape::None, "\u{b}"),
                        b'x' => (Escape::Hex { left: 2, value: 0 }, ""),
                        b'u' => (Escape::Hex { left: 4, value: 0 }, ""),
                        b'U' => (Escape::Hex { left: 8, value: 0 }, ""),
                        b'0'..=b'7' => {
                            let value = u32::from(byte - b'0');
                            (Escape::Octal { digits: 1, value }, "")
                        }
                        b'N' => {
                            let message = "named escapes (`\\N{…}`) are not read";
                            return Err(BadLiteral(message.into()));
                        }
                        // Python keeps an unknown escape as written: the
                        // character after the backslash is read as text.
                        _ => {
                            content("\\", surrogates, out);
                            string.escape = Escape::None;
                            continue;
                        }
                    };
                    pos += 1;
                    if !decoded.is_empty() {
                        content(decoded, surrogates, out);
                    }
                    string.escape = escape;
                }
                Escape::Hex { left, value } => {
                    let digit = char::from(byte).to_digit(16).ok_or_else(|| {
                        BadLiteral(format!("invalid hex escape digit `{}`", shown(input, pos)))
                    })?;
                    pos += 1;
                    let value = (value << 4) | digit;
                    string.escape = if left > 1 {
                        Escape::Hex {
                            left: left - 1,
                            value,
                        }
                    } else {
                        code_point(value, surrogates, out)?;
                        Escape::None
                    };
                }
                Escape::Octal { digits, value } => {
                    if digits < 3 && matches!(byte, b'0'..=b'7') {
                        pos += 1;
                        string.escape = Escape::Octal {
                            digits: digits + 1,
                            value: (value << 3) | u32::from(byte - b'0'),
                        };
                    } else {
                        code_point(value, surrogates, out)?;
                        string.escape = Escape::None;
                    }
                }
            }
        }
        self.state = State::Str(string);
        Ok(pos)
    }
}

/// String contents, written escaped after a waiting high surrogate.
fn content(text: &str, surrogates: &mut Surrogates, out: &mut impl FnMut(&str)) {
    surrogates.flush(&mut |s| escape_with(s, out));
    if !text.is_empty() {
        escape_with(text, out);
    }
}

/// A code point from an escape: a UTF-16 unit when it is one (surrogates are
/// paired), else a character.
fn code_point(
    value: u32,
    surrogates: &mut Surrogates,
    out: &mut impl FnMut(&str),
) -> Result<(), BadLiteral> {
    match u16::try_from(value) {
        Ok(unit) => surrogates.unit(unit, &mut |s| escape_with(s, out)),
        Err(_) => {
            let ch = char::from_u32(value)
                .ok_or_else(|| BadLiteral(format!("`\\U{value:08x}` is not a character")))?;
            content(ch.encode_utf8(&mut [0; 4]), surrogates, out);
        }
    }
    Ok(())
}

/// Writes a number or name as JSON.
fn token_json(token: &str, out: &mut impl FnMut(&str)) -> Result<(), BadLiteral> {
    match token {
        "True" => out("true"),
        "False" => out("false"),
        "None" => out("null"),
        _ => match number_json(token) {
            Some(json) => out(&json),
            None if token.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') => {
                return Err(BadLiteral(format!(
                    "`{token}` is not a literal (a string is written in quotes)"
                )));
            }
            None => return Err(BadLiteral(format!("`{token}` is not a decimal number"))),
        },
    }
    Ok(())
}

/// A decimal Python number as JSON: `+1` → `1`, `.5` → `0.5`, `5.` → `5.0`,
/// `1_000` → `1000`, `007` → `7`; `None` for anything else.
fn number_json(token: &str) -> Option<String> {
    let (negative, body) = match token.as_bytes().first()? {
        b'-' => (true, &token[1..]),
        b'+' => (false, &token[1..]),
        _ => (false, token),
    };
    let body = body.replace('_', "");
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(at) => (&body[..at], Some(&body[at + 1..])),
        None => (body.as_str(), None),
    };
    let (int, frac) = match mantissa.find('.') {
        Some(at) => (&mantissa[..at], Some(&mantissa[at + 1..])),
        None => (mantissa, None),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits(int)
        || !frac.is_none_or(digits)
        || (int.is_empty() && frac.is_none_or(str::is_empty))
    {
        return None;
    }
    let mut json = String::with_capacity(token.len() + 2);
    if negative {
        json.push('-');
    }
    let int = int.trim_start_matches('0');
    json.push_str(if int.is_empty() { "0" } else { int });
    if let Some(frac) = frac {
        json.push('.');
        json.push_str(if frac.is_empty() { "0" } else { frac });
    }
    if let Some(exponent) = exponent {
        let unsigned = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
        if unsigned.is_empty() || !digits(unsigned) {
            return None;
        }
        json.push('e');
        json.push_str(exponent);
    }
    Some(json)
}

/// The character at byte `pos` of `input`, for messages.
fn shown(input: &str, pos: usize) -> char {
    input[pos..].chars().next().unwrap_or('?')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    /// Reads `input` cut at `cuts`: the JSON written and the bytes used, or
    /// the error.
    fn read(input: &str, cuts: &[usize]) -> Result<(String, Option<usize>), BadLiteral> {
        let mut literal = PyLiteral::default();
        let mut json = String::new();
        let mut start = 0;
        for end in crate::natural::scan::cut_points(input, cuts) {
            match literal.feed(&input[start..end], &mut |p| json.push_str(p))? {
                Read::More => start = end,
                Read::Done(used) => return Ok((json, Some(start + used))),
            }
        }
        Ok((json, None))
    }

    /// How a test writes a string as a Python literal.
    #[derive(Debug, Clone, Copy)]
    struct Style {
        quote: char,
        triple: bool,
        /// Non-ASCII characters as `\u`/`\U` escapes.
        escape_unicode: bool,
    }

    fn python_string(text: &str, style: Style) -> String {
        let quotes = if style.triple { 3 } else { 1 };
        let mut out: String = std::iter::repeat_n(style.quote, quotes).collect();
        for ch in text.chars() {
            match ch {
                '\\' => out.push_str("\\\\"),
                '\'' | '"' => {
                    out.push('\\');
                    out.push(ch);
                }
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 || c == '\u{7f}' => {
                    out.push_str(&format!("\\x{:02x}", c as u32))
                }
                c if !c.is_ascii() && style.escape_unicode => {
                    if (c as u32) > 0xFFFF {
                        out.push_str(&format!("\\U{:08x}", c as u32));
                    } else {
                        out.push_str(&format!("\\u{:04x}", c as u32));
                    }
                }
                c => out.push(c),
            }
        }
        out.extend(std::iter::repeat_n(style.quote, quotes));
        out
    }

    /// `value` written as a Python literal (objects as dicts, arrays as lists
    /// or tuples).
    fn python(value: &Value, style: Style, tuples: bool) -> String {
        match value {
            Value::Null => "None".into(),
            Value::Bool(true) => "True".into(),
            Value::Bool(false) => "False".into(),
            Value::Number(n) => n.to_string(),
            Value::String(s) => python_string(s, style),
            Value::Array(items) => {
                let items: Vec<String> = items.iter().map(|v| python(v, style, tuples)).collect();
                match (tuples, items.len()) {
                    (true, 1) => format!("({},)", items[0]),
                    (true, _) => format!("({})", items.join(", ")),
                    (false, _) => format!("[{}]", items.join(", ")),
                }
            }
            Value::Object(fields) => {
                let fields: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| {
                        format!("{}: {}", python_string(k, style), python(v, style, tuples))
                    })
                    .collect();
                format!("{{{}}}", fields.join(",\n "))
            }
        }
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (-1e6f64..1e6).prop_map(Value::from),
            "\\PC{0,8}|[\\x00-\\x1f'\"\\\\]{0,6}".prop_map(Value::from),
            Just(Value::Null),
        ];
        leaf.prop_recursive(3, 20, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map("\\PC{0,4}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_json_value_written_in_python_reads_back_whatever_the_cuts(
            value in json_value(),
            quote in prop::sample::select(vec!['\'', '"']),
            triple in any::<bool>(),
            escape_unicode in any::<bool>(),
            tuples in any::<bool>(),
            cuts in prop::collection::vec(any::<usize>(), 0..8),
        ) {
            let style = Style { quote, triple, escape_unicode };
            let literal = python(&value, style, tuples);
            let input = format!("{literal}, x=1)");
            let (json, used) = read(&input, &cuts).unwrap();
            prop_assert_eq!(used, Some(literal.len()));
            prop_assert_eq!(serde_json::from_str::<Value>(&json).unwrap(), value);
        }
    }

    fn whole(input: &str) -> Value {
        let (json, _) = read(input, &[]).unwrap();
        serde_json::from_str(&json).unwrap()
    }

    #[test]
    fn python_spellings_read_as_json() {
        assert_eq!(whole("'it\\'s'"), json!("it's"));
        assert_eq!(
            whole(r#""a\"b\n\u00e9\x41\101\0""#),
            json!("a\"b\né\u{41}A\0")
        );
        assert_eq!(whole(r"'\ud83d\ude00 \U0001F600 \d'"), json!("😀 😀 \\d"));
        assert_eq!(whole("'''a 'b' \"c\" ''d'''"), json!("a 'b' \"c\" ''d"));
        assert_eq!(whole("\"\"\"two\nlines\"\"\""), json!("two\nlines"));
        assert_eq!(whole("'' "), json!(""));
        assert_eq!(
            whole("[1, -2, +3, 1_000, .5, 5., 1e3, -1.5E-2, 007,]"),
            json!([1, -2, 3, 1000, 0.5, 5.0, 1000.0, -0.015, 7])
        );
        assert_eq!(
            whole("{'a': (1, 'x'), \"b\": [True, False, None], 'c': {}, 'd': ()}"),
            json!({"a": [1, "x"], "b": [true, false, null], "c": {}, "d": []})
        );
        assert_eq!(whole("(1,)"), json!([1]));
    }

    #[test]
    fn a_scalar_ends_before_the_byte_after_it() {
        assert_eq!(read("True)", &[]).unwrap(), ("true".into(), Some(4)));
        assert_eq!(read("-12 ,", &[2]).unwrap(), ("-12".into(), Some(3)));
        assert_eq!(read("''", &[]).unwrap(), (String::new(), None));
    }

    #[test]
    fn what_is_not_a_literal_says_so() {
        for (input, message) in [
            ("0x1F)", "`0x1F` is not a decimal number"),
            (
                "city)",
                "`city` is not a literal (a string is written in quotes)",
            ),
            (
                "(1))",
                "a value in parentheses is not a tuple: write `(x,)`",
            ),
            ("{1: 2}", "a dict key must be a string"),
            ("{'a' 2}", "expected `:` after a dict key, found `2`"),
            ("[1 2]", "expected `,` or a closing bracket, found `2`"),
            ("'\\xZZ'", "invalid hex escape digit `Z`"),
            ("@", "`@` does not start a Python literal"),
            ("'\\U00110000'", "`\\U00110000` is not a character"),
            ("- 1)", "`-` is not a decimal number"),
        ] {
            assert_eq!(read(input, &[]), Err(BadLiteral(message.into())), "{input}");
        }
    }
}

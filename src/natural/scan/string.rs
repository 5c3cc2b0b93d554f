//! JSON string contents: an incremental decoder and an escaper.

use super::find_quote_or_escape;

/// Decodes the inside of a JSON string (after its opening quote) piece by piece.
/// Escapes split across pieces are completed when the rest arrives. Lenient where
/// models are sloppy: raw control characters pass through, a lone surrogate
/// becomes U+FFFD.
#[derive(Debug, Default)]
pub(crate) struct StringDecoder {
    state: DecodeState,
    surrogates: Surrogates,
}

#[derive(Debug, Default, Clone, Copy)]
enum DecodeState {
    #[default]
    Plain,
    Escape,
    Unicode {
        digits: u8,
        value: u16,
    },
}

/// What [`StringDecoder::feed`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Decoded {
    /// The piece ended inside the string.
    More,
    /// The closing quote: this many bytes of the piece were used, quote included.
    End(usize),
}

/// A malformed escape sequence.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BadEscape {
    /// The offset, in the piece, of the byte that breaks the escape: exact,
    /// whatever the pieces, so that what follows an error does not depend on
    /// where the text was cut.
    pub(crate) at: usize,
    pub(crate) message: String,
}

impl StringDecoder {
    /// Decodes `input`, handing decoded text to `out`, until the closing quote.
    pub(crate) fn feed(
        &mut self,
        input: &str,
        out: &mut impl FnMut(&str),
    ) -> Result<Decoded, BadEscape> {
        let bytes = input.as_bytes();
        let mut pos = 0;
        while pos < bytes.len() {
            match self.state {
                DecodeState::Plain => match find_quote_or_escape(&bytes[pos..]) {
                    None => {
                        self.surrogates.flush(out);
                        out(&input[pos..]);
                        return Ok(Decoded::More);
                    }
                    Some(offset) => {
                        let at = pos + offset;
                        if at > pos {
                            self.surrogates.flush(out);
                            out(&input[pos..at]);
                        }
                        pos = at + 1;
                        if bytes[at] == b'"' {
                            self.surrogates.flush(out);
                            return Ok(Decoded::End(pos));
                        }
                        self.state = DecodeState::Escape;
                    }
                },
                DecodeState::Escape => {
                    let byte = bytes[pos];
                    pos += 1;
                    if byte == b'u' {
                        self.state = DecodeState::Unicode {
                            digits: 0,
                            value: 0,
                        };
                        continue;
                    }
                    self.surrogates.flush(out);
                    let decoded = match byte {
                        b'"' => "\"",
                        b'\\' => "\\",
                        b'/' => "/",
                        b'b' => "\u{8}",
                        b'f' => "\u{c}",
                        b'n' => "\n",
                        b'r' => "\r",
                        b't' => "\t",
                        _ => {
                            let shown = input[pos - 1..].chars().next().unwrap_or('?');
                            return Err(BadEscape {
                                at: pos - 1,
                                message: format!("invalid escape `\\{shown}`"),
                            });
                        }
                    };
                    out(decoded);
                    self.state = DecodeState::Plain;
                }
                DecodeState::Unicode { digits, value } => {
                    let byte = bytes[pos];
                    pos += 1;
                    let digit = (byte as char).to_digit(16).ok_or_else(|| BadEscape {
                        at: pos - 1,
                        message: format!("invalid unicode escape digit `{}`", byte as char),
                    })?;
                    let value = (value << 4) | digit as u16;
                    if digits < 3 {
                        self.state = DecodeState::Unicode {
                            digits: digits + 1,
                            value,
                        };
                        continue;
                    }
                    self.state = DecodeState::Plain;
                    self.surrogates.unit(value, out);
                }
            }
        }
        Ok(Decoded::More)
    }
}

/// Pairs UTF-16 code units given one at a time (JSON's `\uD83D\uDE00`,
/// Python's `\ud83d\ude00`) into characters; a lone surrogate becomes U+FFFD.
#[derive(Debug, Default)]
pub(crate) struct Surrogates {
    /// A high surrogate waiting for its low half.
    high: Option<u16>,
}

impl Surrogates {
    /// One code unit: a character, or half of one.
    pub(crate) fn unit(&mut self, unit: u16, out: &mut impl FnMut(&str)) {
        match (self.high.take(), unit) {
            (Some(high), 0xDC00..=0xDFFF) => {
                let code = 0x10000 + (((high as u32) - 0xD800) << 10) + (unit as u32 - 0xDC00);
                let ch = char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER);
                out(ch.encode_utf8(&mut [0; 4]));
            }
            (high, 0xD800..=0xDBFF) => {
                if high.is_some() {
                    out("\u{FFFD}");
                }
                self.high = Some(unit);
            }
            (high, _) => {
                if high.is_some() {
                    out("\u{FFFD}");
                }
                let ch = char::from_u32(unit as u32).unwrap_or(char::REPLACEMENT_CHARACTER);
                out(ch.encode_utf8(&mut [0; 4]));
            }
        }
    }

    /// Something other than a low surrogate follows: a waiting high one is
    /// U+FFFD.
    pub(crate) fn flush(&mut self, out: &mut impl FnMut(&str)) {
        if self.high.take().is_some() {
            out("\u{FFFD}");
        }
    }
}

/// Hands `text` to `out` escaped as the inside of a JSON string, in runs.
pub(crate) fn escape_with(text: &str, out: &mut impl FnMut(&str)) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = text.as_bytes();
    let mut start = 0;
    for (index, &byte) in bytes.iter().enumerate() {
        let unicode;
        let escaped = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => {
                unicode = [
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(byte >> 4)],
                    HEX[usize::from(byte & 15)],
                ];
                std::str::from_utf8(&unicode).expect("ASCII")
            }
            _ => continue,
        };
        if start < index {
            out(&text[start..index]);
        }
        out(escaped);
        start = index + 1;
    }
    if start < bytes.len() {
        out(&text[start..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_in_pieces(input: &str, cuts: &[usize]) -> Result<(String, usize), BadEscape> {
        let mut decoder = StringDecoder::default();
        let mut text = String::new();
        let mut start = 0;
        for end in crate::natural::scan::cut_points(input, cuts) {
            match decoder.feed(&input[start..end], &mut |piece| text.push_str(piece))? {
                Decoded::End(used) => return Ok((text, start + used)),
                Decoded::More => start = end,
            }
        }
        Ok((text, usize::MAX))
    }

    proptest! {
        #[test]
        fn decodes_like_serde_json_in_any_pieces(value in "\\PC{0,40}", cuts in prop::collection::vec(any::<usize>(), 0..6), tail in "[a-z]{0,3}") {
            let encoded = serde_json::to_string(&value).unwrap();
            let input = format!("{}{tail}", &encoded[1..]);
            let (text, used) = decode_in_pieces(&input, &cuts).unwrap();
            prop_assert_eq!(text, value);
            prop_assert_eq!(used, encoded.len() - 1);
        }

        #[test]
        fn escaping_round_trips_through_serde_json(value in "\\PC{0,40}|[\\x00-\\x1f\"\\\\]{0,10}") {
            let mut escaped = String::from("\"");
            escape_with(&value, &mut |piece| escaped.push_str(piece));
            escaped.push('"');
            prop_assert_eq!(serde_json::from_str::<String>(&escaped).unwrap(), value);
        }
    }

    #[test]
    fn surrogate_pairs_split_across_pieces_decode() {
        let (text, _) = decode_in_pieces("\\ud83d\\ude00\"", &[3, 7, 9]).unwrap();
        assert_eq!(text, "😀");
        let (text, _) = decode_in_pieces("\\ud83dx\"", &[]).unwrap();
        assert_eq!(text, "\u{FFFD}x");
    }

    #[test]
    fn bad_escapes_are_errors() {
        assert!(decode_in_pieces("\\q\"", &[]).is_err());
        assert!(decode_in_pieces("\\u12g4\"", &[]).is_err());
    }
}

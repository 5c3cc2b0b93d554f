//! A content address: the name of media kept in a media store.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The prefix of every reference.
const PREFIX: &str = "sha256:";

/// The longest input an error about an invalid reference quotes.
const QUOTED: usize = 80;

/// The content address of media bytes: `sha256:` and the 64 lowercase hex
/// digits of their SHA-256 digest.
///
/// It is what [`MediaSource::Ref`](super::MediaSource::Ref) holds, and what a
/// [`MediaStore`](crate::store::MediaStore) files the bytes under. Parsing
/// refuses anything else (uppercase hex, another algorithm, a path), so a
/// reference can name a file without being able to name any other.
///
/// ```
/// use lmstack::message::MediaRef;
/// let reference = MediaRef::of(b"hello");
/// assert_eq!(
///     reference.to_string(),
///     "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
/// );
/// assert_eq!(reference.to_string().parse::<MediaRef>().unwrap(), reference);
/// assert!("sha256:../../etc/passwd".parse::<MediaRef>().is_err());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MediaRef {
    digest: [u8; 32],
}

impl MediaRef {
    /// The reference of `bytes`: their SHA-256 digest.
    pub fn of(bytes: &[u8]) -> Self {
        MediaRef {
            digest: Sha256::digest(bytes).into(),
        }
    }

    /// Reads `sha256:<64 lowercase hex digits>`.
    pub fn parse(text: &str) -> Result<Self, InvalidRef> {
        let invalid = || InvalidRef::new(text);
        let hex = text.strip_prefix(PREFIX).ok_or_else(invalid)?.as_bytes();
        if hex.len() != 64 {
            return Err(invalid());
        }
        let mut digest = [0; 32];
        for (byte, pair) in digest.iter_mut().zip(hex.chunks_exact(2)) {
            let (Some(high), Some(low)) = (nibble(pair[0]), nibble(pair[1])) else {
                return Err(invalid());
            };
            *byte = (high << 4) | low;
        }
        Ok(MediaRef { digest })
    }

    /// The SHA-256 digest.
    pub fn digest(&self) -> &[u8; 32] {
        &self.digest
    }

    /// The 64 lowercase hex digits of the digest (the reference without its
    /// `sha256:` prefix), fit for a file name.
    pub fn hex(&self) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut hex = String::with_capacity(64);
        for byte in self.digest {
            hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
            hex.push(char::from(DIGITS[usize::from(byte & 0xf)]));
        }
        hex
    }
}

/// The value of a lowercase hex digit.
fn nibble(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        _ => None,
    }
}

impl fmt::Display for MediaRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}", self.hex())
    }
}

impl fmt::Debug for MediaRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MediaRef({self})")
    }
}

impl FromStr for MediaRef {
    type Err = InvalidRef;

    fn from_str(text: &str) -> Result<Self, InvalidRef> {
        MediaRef::parse(text)
    }
}

impl TryFrom<String> for MediaRef {
    type Error = InvalidRef;

    fn try_from(text: String) -> Result<Self, InvalidRef> {
        MediaRef::parse(&text)
    }
}

impl From<MediaRef> for String {
    fn from(reference: MediaRef) -> Self {
        reference.to_string()
    }
}

/// Text that is not a [`MediaRef`]; it quotes the text (cut short when long).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{quoted}` is not a media reference (`sha256:` and 64 lowercase hex digits)")]
pub struct InvalidRef {
    quoted: String,
}

impl InvalidRef {
    fn new(text: &str) -> Self {
        let quoted = match text.char_indices().nth(QUOTED) {
            Some((end, _)) => format!("{}…", &text[..end]),
            None => text.to_owned(),
        };
        InvalidRef {
            quoted: quoted.escape_debug().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELLO: &str = "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";

    #[test]
    fn a_reference_reads_back_as_itself() {
        let reference = MediaRef::of(b"hello");
        assert_eq!(reference.to_string(), HELLO);
        assert_eq!(MediaRef::parse(HELLO), Ok(reference));
        assert_eq!(format!("{reference:?}"), format!("MediaRef({HELLO})"));
    }

    #[test]
    fn anything_but_sha256_and_64_lowercase_hex_digits_is_refused() {
        let digits = &HELLO[PREFIX.len()..];
        for bad in [
            String::new(),
            "sha256:".into(),
            digits.into(),
            format!("sha512:{digits}"),
            format!("SHA256:{digits}"),
            format!("sha256:{}", digits.to_uppercase()),
            format!("sha256:{}", &digits[1..]),
            format!("sha256:{digits}0"),
            format!("sha256:{}/", &digits[1..]),
            format!("sha256:../../{}", &digits[6..]),
            "sha256:../../etc/passwd".into(),
            format!("sha256:{}é", &digits[2..]),
            format!(" {HELLO}"),
        ] {
            let error = MediaRef::parse(&bad).unwrap_err();
            assert!(
                error.to_string().contains("is not a media reference"),
                "{error}"
            );
        }
    }

    #[test]
    fn an_error_quotes_a_long_input_cut_short() {
        let long = "x".repeat(10_000);
        let message = MediaRef::parse(&long).unwrap_err().to_string();
        assert!(message.len() < 200, "{message}");
        assert!(message.starts_with("`xxxx"), "{message}");
    }
}

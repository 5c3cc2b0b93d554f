//! Incremental scanners shared by the dialects: each takes text in pieces of any
//! size, keeps only the state it needs between pieces, and never looks at a byte
//! twice.

pub(crate) mod json;
pub(crate) mod marker;
pub(crate) mod string;
pub(crate) mod tag;

/// JSON's whitespace, which the dialects also skip around their markup.
pub(crate) fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

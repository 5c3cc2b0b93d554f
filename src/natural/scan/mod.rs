//! Incremental scanners shared by the dialects: each takes text in pieces of any
//! size, keeps only the state it needs between pieces, and never looks at a byte
//! twice.

pub(crate) mod json;
pub(crate) mod marker;
pub(crate) mod python;
pub(crate) mod string;
pub(crate) mod tag;
pub(crate) mod xml_value;

/// The first `"` or `\\` in `bytes`: where a JSON string may end or escape.
/// Token-sized pieces are scanned directly: for them the call into `memchr`
/// costs more than the scan.
pub(crate) fn find_quote_or_escape(bytes: &[u8]) -> Option<usize> {
    if bytes.len() < 16 {
        bytes.iter().position(|&b| b == b'"' || b == b'\\')
    } else {
        memchr::memchr2(b'"', b'\\', bytes)
    }
}

/// Where the scanners' tests cut `input`: `cuts` taken modulo its length,
/// on character boundaries, in order, ending with the end of the input.
#[cfg(test)]
pub(crate) fn cut_points(input: &str, cuts: &[usize]) -> Vec<usize> {
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|cut| cut % (input.len() + 1))
        .filter(|&cut| input.is_char_boundary(cut))
        .collect();
    points.push(input.len());
    points.sort_unstable();
    points.dedup();
    points
}

/// The longest name the dialects write bare — a tool's, a parameter's or
/// key's, a Mistral call id: a longer one is not read as a name.
pub(crate) const NAME_LIMIT: usize = 256;

/// JSON's whitespace, which the dialects also skip around their markup.
pub(crate) fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

/// Where the first byte of `bytes` from `pos` on that is not [whitespace](is_space)
/// stands, if any.
pub(crate) fn skip_space(bytes: &[u8], pos: usize) -> Option<usize> {
    bytes[pos..]
        .iter()
        .position(|&b| !is_space(b))
        .map(|offset| pos + offset)
}

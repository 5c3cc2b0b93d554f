//! The model families' special-token markers (`<|tool_call|>`, `[TOOL_CALLS]`,
//! `<｜tool▁calls▁begin｜>`…), read in the prose beside the XML-like tags, and
//! what each opens; and the byte that opens a family's calls at the start of a
//! line (Llama's `{`, pythonic `[`).

use super::block::Block;
use super::call_list::CallList;
use super::calls::BlockContext;
use super::llama_json::LlamaJson;
use super::pythonic::Pythonic;
use crate::Error;
use crate::natural::dialect::Dialect;

/// The markers `dialect` reads in the prose, each starting with `<` followed by
/// `|` or a full-width `｜`, or with `[`.
pub(super) fn markers(dialect: Dialect) -> &'static [&'static str] {
    match dialect {
        Dialect::Granite => &["<|tool_call|>"],
        Dialect::Llama3Json => &["<|python_tag|>"],
        Dialect::Pythonic => &["<|python_start|>"],
        _ => &[],
    }
}

/// What a marker opens.
pub(super) enum Opened {
    /// A block, read from the byte after the marker.
    Block(Block),
}

/// Opens what marker `index` of `dialect`'s [`markers`] starts; the block's
/// raw text so far is the marker.
pub(super) fn open(
    dialect: Dialect,
    index: usize,
    _ctx: &mut BlockContext<'_>,
) -> Result<Opened, Error> {
    Ok(match (dialect, index) {
        (Dialect::Granite, _) => Opened::Block(Block::List(CallList::default())),
        (Dialect::Llama3Json, _) => Opened::Block(Block::LlamaJson(LlamaJson::default())),
        (Dialect::Pythonic, _) => Opened::Block(Block::Pythonic(Pythonic::new())),
        _ => unreachable!("{dialect} has no marker {index}"),
    })
}

/// The byte that starts a candidate block of `dialect` at the start of a line
/// (after at most three spaces), if any.
pub(super) fn line_opener(dialect: Dialect) -> Option<u8> {
    match dialect {
        Dialect::Llama3Json => Some(b'{'),
        Dialect::Pythonic => Some(b'['),
        _ => None,
    }
}

/// The block a [`line_opener`] starts, read from that byte.
pub(super) fn open_at_line(dialect: Dialect) -> Block {
    match dialect {
        Dialect::Llama3Json => Block::LlamaJson(LlamaJson::default()),
        Dialect::Pythonic => Block::Pythonic(Pythonic::new()),
        _ => unreachable!("{dialect} opens nothing at the start of a line"),
    }
}

/// True when the byte after a `<` may go on into one of `markers`.
pub(super) fn may_follow_angle(markers: &[&str], byte: u8) -> bool {
    markers
        .iter()
        .any(|marker| marker.as_bytes().get(1) == Some(&byte))
}

/// True when some of `markers` starts with `[`.
pub(super) fn uses_bracket(markers: &[&str]) -> bool {
    markers.iter().any(|marker| marker.starts_with('['))
}

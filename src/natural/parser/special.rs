//! The model families' special-token markers (`<|tool_call|>`, `[TOOL_CALLS]`,
//! `<｜tool▁calls▁begin｜>`…), read in the prose beside the XML-like tags, and
//! what each opens; and the byte that opens a family's calls at the start of a
//! line (Llama's `{`, pythonic `[`).

use super::block::Block;
use super::call_list::CallList;
use super::calls::BlockContext;
use super::harmony::{self, Harmony};
use super::llama_json::LlamaJson;
use super::mistral::Mistral;
use super::pythonic::Pythonic;
use super::token_call::{Family, TokenCall};
use crate::Error;
use crate::natural::dialect::Dialect;

/// The markers `dialect` reads in the prose, each starting with `<` followed by
/// `|` or a full-width `｜`, or with `[`.
pub(super) fn markers(dialect: Dialect) -> &'static [&'static str] {
    match dialect {
        Dialect::Granite => &["<|tool_call|>"],
        // Magistral writes its reasoning between `[THINK]` and `[/THINK]`.
        Dialect::Mistral => &["[TOOL_CALLS]", "[THINK]"],
        Dialect::Harmony => harmony::MARKERS,
        // The section markers (plural, and the singular some checkpoints
        // write), the call marker, the section's end markers.
        Dialect::KimiK2 => &[
            "<|tool_calls_section_begin|>",
            "<|tool_call_section_begin|>",
            "<|tool_call_begin|>",
            "<|tool_calls_section_end|>",
            "<|tool_call_section_end|>",
        ],
        Dialect::DeepSeek => &[
            "<｜tool▁calls▁begin｜>",
            "<｜tool▁call▁begin｜>",
            "<｜tool▁calls▁end｜>",
        ],
        Dialect::Llama3Json => &["<|python_tag|>"],
        Dialect::Pythonic => &["<|python_start|>"],
        _ => &[],
    }
}

/// What a marker opens.
#[expect(
    clippy::large_enum_variant,
    reason = "returned once per marker, straight into place"
)]
pub(super) enum Opened {
    /// A block, read from the byte after the marker.
    Block(Block),
    /// Nothing: the marker is markup that vanishes.
    Nothing,
    /// Reasoning, up to the first of these markers.
    Reasoning(&'static [&'static str]),
    /// The end of a run of calls (`<|tool_calls_section_end|>`): dropped right
    /// after a call block, text anywhere else.
    Closer,
}

/// Opens what marker `index` of `dialect`'s [`markers`] starts; the block's
/// raw text so far is the marker.
pub(super) fn open(
    dialect: Dialect,
    index: usize,
    ctx: &mut BlockContext<'_>,
) -> Result<Opened, Error> {
    let token = |call: fn(Family, &BlockContext<'_>) -> TokenCall, family| {
        Opened::Block(Block::Token(call(family, ctx)))
    };
    Ok(match (dialect, index) {
        (Dialect::Granite, _) => Opened::Block(Block::List(CallList::default())),
        (Dialect::Mistral, 0) => Opened::Block(Block::Mistral(Mistral::default())),
        (Dialect::Mistral, _) => Opened::Reasoning(&["[/THINK]"]),
        (Dialect::Harmony, _) => match Harmony::open(harmony::MARKERS[index]) {
            Some(header) => Opened::Block(Block::Harmony(header)),
            None => Opened::Nothing,
        },
        (Dialect::KimiK2, 0 | 1) => token(TokenCall::section, Family::KimiK2),
        (Dialect::KimiK2, 2) => token(TokenCall::call, Family::KimiK2),
        (Dialect::DeepSeek, 0) => token(TokenCall::section, Family::DeepSeek),
        (Dialect::DeepSeek, 1) => token(TokenCall::call, Family::DeepSeek),
        (Dialect::KimiK2 | Dialect::DeepSeek, _) => Opened::Closer,
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

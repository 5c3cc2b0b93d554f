//! The model families' special-token markers (`<|tool_call|>`, `[TOOL_CALLS]`,
//! `<｜tool▁calls▁begin｜>`…), read in the prose beside the XML-like tags, and
//! what each opens; and the byte that opens a family's calls at the start of a
//! line (Llama's `{`, pythonic `[`).

use super::block::Block;
use super::call_list::CallList;
use super::calls::BlockContext;
use super::harmony::Harmony;
use super::llama_json::LlamaJson;
use super::mistral::Mistral;
use super::pythonic::Pythonic;
use super::token_call::{Family, TokenCall};
use crate::natural::dialect::Dialect;
use crate::natural::markers::{DEEPSEEK, GRANITE_CALLS, HARMONY, KIMI_K2, MISTRAL};

/// A special-token marker a dialect reads in the prose, and what it opens.
#[derive(Debug)]
pub(super) struct Special {
    pub(super) marker: &'static str,
    opens: Opens,
}

impl AsRef<str> for Special {
    fn as_ref(&self) -> &str {
        self.marker
    }
}

/// What a [`Special`] marker opens.
#[derive(Debug, Clone, Copy)]
enum Opens {
    /// Granite's JSON list of calls.
    CallList,
    /// What follows Mistral's `[TOOL_CALLS]`.
    Mistral,
    /// Reasoning, up to the first of these markers.
    Reasoning(&'static [&'static str]),
    /// A Harmony message's header.
    HarmonyHeader,
    /// The first call of a section of a family's special tokens.
    Section(Family),
    /// A call of a family's special tokens.
    Call(Family),
    /// The end of a run of calls.
    Closer,
    /// Markup that vanishes (a Harmony message's terminator).
    Nothing,
    /// Llama 3.x JSON calls (after `<|python_tag|>`).
    LlamaJson,
    /// A pythonic list of calls (after `<|python_start|>`).
    Pythonic,
}

const GRANITE: &[Special] = &[Special {
    marker: GRANITE_CALLS,
    opens: Opens::CallList,
}];

/// Magistral writes its reasoning between `[THINK]` and `[/THINK]`.
const MISTRAL_MARKERS: &[Special] = &[
    Special {
        marker: MISTRAL.calls,
        opens: Opens::Mistral,
    },
    Special {
        marker: MISTRAL.think,
        opens: Opens::Reasoning(&[MISTRAL.think_close]),
    },
];

/// The two that open a header, then the terminators of a message.
const HARMONY_MARKERS: &[Special] = &[
    Special {
        marker: HARMONY.channel,
        opens: Opens::HarmonyHeader,
    },
    Special {
        marker: HARMONY.start,
        opens: Opens::HarmonyHeader,
    },
    Special {
        marker: HARMONY.end,
        opens: Opens::Nothing,
    },
    Special {
        marker: HARMONY.ret,
        opens: Opens::Nothing,
    },
    Special {
        marker: HARMONY.call,
        opens: Opens::Nothing,
    },
];

/// The section markers (plural, and the singular some checkpoints write), the
/// call marker, the section's end markers.
const KIMI_K2_MARKERS: &[Special] = &[
    Special {
        marker: KIMI_K2.section_begin,
        opens: Opens::Section(Family::KimiK2),
    },
    Special {
        marker: "<|tool_call_section_begin|>",
        opens: Opens::Section(Family::KimiK2),
    },
    Special {
        marker: KIMI_K2.call_begin,
        opens: Opens::Call(Family::KimiK2),
    },
    Special {
        marker: KIMI_K2.section_end,
        opens: Opens::Closer,
    },
    Special {
        marker: "<|tool_call_section_end|>",
        opens: Opens::Closer,
    },
];

const DEEPSEEK_MARKERS: &[Special] = &[
    Special {
        marker: DEEPSEEK.section_begin,
        opens: Opens::Section(Family::DeepSeek),
    },
    Special {
        marker: DEEPSEEK.call_begin,
        opens: Opens::Call(Family::DeepSeek),
    },
    Special {
        marker: DEEPSEEK.section_end,
        opens: Opens::Closer,
    },
];

const LLAMA3_JSON: &[Special] = &[Special {
    marker: "<|python_tag|>",
    opens: Opens::LlamaJson,
}];

const PYTHONIC: &[Special] = &[Special {
    marker: "<|python_start|>",
    opens: Opens::Pythonic,
}];

/// The markers `dialect` reads in the prose, each starting with `<` followed by
/// `|` or a full-width `｜`, or with `[`.
pub(super) fn markers(dialect: Dialect) -> &'static [Special] {
    match dialect {
        Dialect::Granite => GRANITE,
        Dialect::Mistral => MISTRAL_MARKERS,
        Dialect::Harmony => HARMONY_MARKERS,
        Dialect::KimiK2 => KIMI_K2_MARKERS,
        Dialect::DeepSeek => DEEPSEEK_MARKERS,
        Dialect::Llama3Json => LLAMA3_JSON,
        Dialect::Pythonic => PYTHONIC,
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

/// Opens what `special` starts; the block's raw text so far is its marker.
pub(super) fn open(special: &Special, ctx: &mut BlockContext<'_>) -> Opened {
    match special.opens {
        Opens::CallList => Opened::Block(Block::List(CallList::default())),
        Opens::Mistral => Opened::Block(Block::Mistral(Mistral::default())),
        Opens::Reasoning(ends) => Opened::Reasoning(ends),
        Opens::HarmonyHeader => Opened::Block(Block::Harmony(Harmony::header(special.marker))),
        Opens::Section(family) => Opened::Block(Block::Token(TokenCall::section(family, ctx))),
        Opens::Call(family) => Opened::Block(Block::Token(TokenCall::call(family, ctx))),
        Opens::Closer => Opened::Closer,
        Opens::Nothing => Opened::Nothing,
        Opens::LlamaJson => Opened::Block(Block::LlamaJson(LlamaJson::default())),
        Opens::Pythonic => Opened::Block(Block::Pythonic(Pythonic::new())),
    }
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
pub(super) fn may_follow_angle(markers: &[Special], byte: u8) -> bool {
    markers
        .iter()
        .any(|special| special.marker.as_bytes().get(1) == Some(&byte))
}

/// True when some of `markers` starts with `[`.
pub(super) fn uses_bracket(markers: &[Special]) -> bool {
    markers
        .iter()
        .any(|special| special.marker.starts_with('['))
}

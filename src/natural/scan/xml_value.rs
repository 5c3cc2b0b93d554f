//! The raw-text values of the XML-like forms (Qwen3-Coder, Claude, MiniMax,
//! GLM): each flavour's tag names, and where a value ends. The parser reads its
//! values with [`ValueScan`]; the transformer asks [`reads_raw_value`] whether a
//! value it would write raw reads back whole.
//!
//! A value is raw text, never entity-decoded. One wrapping newline is trimmed.
//! A `</parameter>` ends a value only when a parameter, the end of the call or
//! block, or the end of the text follows it; elsewhere it is part of the value.

use std::borrow::Cow;

use memchr::memchr;

use super::is_space;
use super::tag::{Tag, TagReader, TagStep};
use crate::natural::markers::{GLM, GLM_KEY, MINIMAX};

/// The tag names of one flavour, namespace prefix included.
#[derive(Debug)]
pub(crate) struct Names {
    /// The element of one call (`function` / `invoke`; GLM's call is the block).
    pub(crate) call: Cow<'static, str>,
    /// The element of a value (`parameter`, GLM's `arg_value`).
    pub(crate) param: Cow<'static, str>,
    /// The element of the whole block (`tool_call` / `function_calls`).
    pub(crate) block: Cow<'static, str>,
    /// How calls and parameters are named.
    pub(crate) style: Style,
}

/// How a flavour names calls and parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    /// Qwen3-Coder: `<function=F>`, `<parameter=p>`.
    Inline,
    /// Claude, MiniMax: `<invoke name="F">`, `<parameter name="p">`.
    Attr,
    /// GLM: the name is the block's first line; `<arg_key>p</arg_key>` names the
    /// `<arg_value>` that follows.
    Keyed,
}

impl Names {
    /// Qwen3-Coder's: `<function=F>` in a `<tool_call>` block.
    pub(crate) fn qwen3() -> Self {
        Names {
            call: "function".into(),
            param: "parameter".into(),
            block: "tool_call".into(),
            style: Style::Inline,
        }
    }

    /// Claude's, with the namespace `prefix` of its `<{prefix}function_calls>`.
    pub(crate) fn claude(prefix: &str) -> Self {
        Names {
            call: prefixed(prefix, "invoke"),
            param: prefixed(prefix, "parameter"),
            block: prefixed(prefix, "function_calls"),
            style: Style::Attr,
        }
    }

    /// MiniMax's: Claude-style invokes in a `<minimax:tool_call>` block.
    pub(crate) fn minimax() -> Self {
        Names {
            call: MINIMAX.call.into(),
            param: MINIMAX.value.into(),
            block: MINIMAX.block.into(),
            style: Style::Attr,
        }
    }

    /// GLM's: the call is the block; keyed values.
    pub(crate) fn glm() -> Self {
        Names {
            call: GLM.call.into(),
            param: GLM.value.into(),
            block: GLM.block.into(),
            style: Style::Keyed,
        }
    }

    /// The name `tag` gives when it opens `element`, in this flavour's style.
    pub(crate) fn name_of<'t>(&self, tag: &'t Tag, element: &str) -> Option<&'t str> {
        if !tag.opens(element) {
            return None;
        }
        match self.style {
            Style::Inline => tag.inline.as_deref(),
            Style::Attr => tag.attr("name"),
            Style::Keyed => None,
        }
    }

    /// True when `tag` starts the next parameter.
    pub(crate) fn opens_param(&self, tag: &Tag) -> bool {
        match self.style {
            Style::Keyed => is_bare(tag) && tag.opens(GLM_KEY),
            _ => self.name_of(tag, &self.param).is_some(),
        }
    }
}

/// `name` with a namespace `prefix` (`ns:`), borrowed when there is none.
fn prefixed(prefix: &str, name: &'static str) -> Cow<'static, str> {
    if prefix.is_empty() {
        Cow::Borrowed(name)
    } else {
        Cow::Owned(format!("{prefix}{name}"))
    }
}

/// A tag without attributes or inline value.
pub(crate) fn is_bare(tag: &Tag) -> bool {
    tag.attrs.is_empty() && tag.inline.is_none()
}

/// True when `text`, written as a GLM (`glm`) or MiniMax value and followed
/// by its closing tag and the end of the call, is read as exactly `text`: no
/// tag in it ends the value early and no wrapping newline is trimmed. The
/// transformer writes a value raw only then, so that its writer and the
/// parser cannot drift apart.
pub(crate) fn reads_raw_value(glm: bool, text: &str) -> bool {
    let names = if glm { Names::glm() } else { Names::minimax() };
    let written = format!("{text}</{}>\n</{}>", names.param, names.call);
    let mut read = String::new();
    let step = ValueScan::new().feed(
        &names,
        &mut TagReader::default(),
        &mut String::new(),
        &written,
        &mut |piece| read.push_str(piece),
    );
    matches!(step, ValueStep::End { used, tag: true } if used == written.len()) && read == text
}

/// What [`ValueScan::feed`] found.
pub(crate) enum ValueStep {
    More,
    /// The value ended after `used` bytes; `tag`: a structural tag ended it,
    /// read and left in the block's tag reader.
    End {
        used: usize,
        tag: bool,
    },
}

/// Reads a raw-text value up to its structural end.
#[derive(Debug)]
pub(crate) struct ValueScan {
    state: ValueState,
    /// Nothing of the value was seen yet: one leading newline is dropped.
    leading: bool,
    /// A trailing newline not handed on yet: dropped if the value ends here.
    newline: bool,
}

#[derive(Debug)]
enum ValueState {
    Text,
    /// A tag inside the value.
    Tag,
    /// After `</parameter>`: whitespace so far, then maybe a tag (`tag`: one
    /// is being read).
    AfterClose {
        tag: bool,
    },
}

impl ValueScan {
    pub(crate) fn new() -> Self {
        ValueScan {
            state: ValueState::Text,
            leading: true,
            newline: false,
        }
    }

    /// True when the value ended with its `</parameter>`.
    pub(crate) fn closed(&self) -> bool {
        matches!(self.state, ValueState::AfterClose { .. })
    }

    /// A tag that ends the value: the next parameter, or the end of the call
    /// or block.
    fn structural(names: &Names, tag: &Tag) -> bool {
        names.opens_param(tag) || tag.closes(&names.call) || tag.closes(&names.block)
    }

    fn content(&mut self, mut text: &str, out: &mut impl FnMut(&str)) {
        if text.is_empty() {
            return;
        }
        if self.leading {
            self.leading = false;
            text = text.strip_prefix('\n').unwrap_or(text);
            if text.is_empty() {
                return;
            }
        }
        if self.newline {
            self.newline = false;
            out("\n");
        }
        match text.strip_suffix('\n') {
            Some(body) => {
                self.newline = true;
                if !body.is_empty() {
                    out(body);
                }
            }
            None => out(text),
        }
    }

    /// Reads the value on in `input`, its tags with `tags` (the block's
    /// reader: a structural tag that ends the value is left in it), a
    /// `</parameter>` and what follows it in `held`.
    pub(crate) fn feed(
        &mut self,
        names: &Names,
        tags: &mut TagReader,
        held: &mut String,
        input: &str,
        out: &mut impl FnMut(&str),
    ) -> ValueStep {
        let bytes = input.as_bytes();
        let mut pos = 0;
        while pos < bytes.len() {
            match &mut self.state {
                ValueState::Text => match memchr(b'<', &bytes[pos..]) {
                    None => {
                        self.content(&input[pos..], out);
                        return ValueStep::More;
                    }
                    Some(offset) => {
                        self.content(&input[pos..pos + offset], out);
                        pos += offset + 1;
                        tags.restart();
                        self.state = ValueState::Tag;
                    }
                },
                ValueState::Tag => match tags.feed(&input[pos..]) {
                    TagStep::More => return ValueStep::More,
                    TagStep::NotATag(at) => {
                        pos += at;
                        self.state = ValueState::Text;
                        self.content(tags.raw(), out);
                    }
                    TagStep::Done(used) => {
                        pos += used;
                        self.state = ValueState::Text;
                        let tag = tags.tag();
                        if tag.closes(&names.param) {
                            held.clear();
                            held.push_str(tags.raw());
                            self.state = ValueState::AfterClose { tag: false };
                        } else if Self::structural(names, tag) {
                            return ValueStep::End {
                                used: pos,
                                tag: true,
                            };
                        } else {
                            self.content(tags.raw(), out);
                        }
                    }
                },
                ValueState::AfterClose { tag: false } => {
                    let spaces = bytes[pos..].iter().take_while(|&&b| is_space(b)).count();
                    held.push_str(&input[pos..pos + spaces]);
                    pos += spaces;
                    if pos == bytes.len() {
                        return ValueStep::More;
                    }
                    if bytes[pos] == b'<' {
                        pos += 1;
                        tags.restart();
                        if let ValueState::AfterClose { tag, .. } = &mut self.state {
                            *tag = true;
                        }
                    } else {
                        self.state = ValueState::Text;
                        self.content(held, out);
                    }
                }
                ValueState::AfterClose { tag: true } => match tags.feed(&input[pos..]) {
                    TagStep::More => return ValueStep::More,
                    TagStep::NotATag(at) => {
                        pos += at;
                        self.state = ValueState::Text;
                        self.content(held, out);
                        self.content(tags.raw(), out);
                    }
                    TagStep::Done(used) => {
                        pos += used;
                        self.state = ValueState::Text;
                        if Self::structural(names, tags.tag()) {
                            return ValueStep::End {
                                used: pos,
                                tag: true,
                            };
                        }
                        self.content(held, out);
                        self.content(tags.raw(), out);
                    }
                },
            }
        }
        ValueStep::More
    }
}

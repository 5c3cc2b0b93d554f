//! `<tool_response>` blocks, read in transcript mode only: results written by
//! the transformer (or by hand in its format) come back as tool results.

use super::calls::{BlockContext, BlockStep};
use crate::natural::markers::TAGGED;
use crate::natural::result_text::read_result;
use crate::natural::scan::marker::{Found, MarkerFinder};
use crate::natural::scan::tag::Tag;
use crate::{Event, Message, ToolResult};

/// A result block after its opening tag: the body runs to `</tool_response>`.
#[derive(Debug)]
pub(super) struct Response {
    /// `name`, `id` and `is_error` of the tagged form; `None` for a bare tag.
    attrs: Option<(String, String, bool)>,
    finder: MarkerFinder,
    body: String,
}

impl Response {
    /// A block opened by `tag`, when it is a `<tool_response>` tag this reads:
    /// bare, or with a `name` and optionally `id` and `is_error`.
    pub(super) fn open(tag: &Tag) -> Option<Self> {
        if !tag.opens("tool_response") || tag.inline.is_some() {
            return None;
        }
        let known = |key: &str| matches!(key, "name" | "id" | "is_error");
        if !tag.attrs.iter().all(|(key, _)| known(key)) {
            return None;
        }
        let attrs = match tag.attr("name") {
            Some(name) => Some((
                name.to_owned(),
                tag.attr("id").unwrap_or_default().to_owned(),
                tag.attr("is_error") == Some("true"),
            )),
            None if tag.attrs.is_empty() => None,
            None => return None,
        };
        Some(Response {
            attrs,
            finder: MarkerFinder::new([TAGGED.response_close]),
            body: String::new(),
        })
    }

    pub(super) fn feed(&mut self, input: &str, ctx: &mut BlockContext<'_>) -> BlockStep {
        let body = &mut self.body;
        match self.finder.find(input, &mut |text| body.push_str(text)) {
            Found::More => BlockStep::More,
            Found::Marker { end, .. } => {
                let result = self.result();
                let message = Message::tool_results(vec![result]);
                ctx.emit.event(Event::message(message), ctx.out);
                BlockStep::Done(end)
            }
        }
    }

    /// The result the body holds.
    fn result(&mut self) -> ToolResult {
        read_result(self.attrs.take(), &std::mem::take(&mut self.body))
    }
}

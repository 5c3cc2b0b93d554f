//! The tool-call block being read, whatever its dialect, and the decision after
//! a bare `<tool_call>`: Hermes JSON, a Qwen3-Coder function, a GLM call (a
//! name), or not a call.

use super::call_list::CallList;
use super::calls::{BlockContext, BlockStep, Step};
use super::harmony::Harmony;
use super::json_block::{Hermes, Tagged};
use super::llama_json::LlamaJson;
use super::mistral::Mistral;
use super::protocol::Protocol;
use super::pythonic::Pythonic;
use super::response::Response;
use super::token_call::TokenCall;
use super::xml_block::Xml;
use crate::Error;
use crate::natural::scan::tag::{TAG_LIMIT, TagReader, TagStep};

/// A tool-call block being read.
#[derive(Debug)]
pub(super) enum Block {
    /// After a bare `<tool_call>`: Hermes JSON, a Qwen3-Coder function or a GLM
    /// name follows, or it was not a call.
    Pending(Pending),
    Tagged(Tagged),
    Hermes(Hermes),
    Xml(Xml),
    Protocol(Protocol),
    /// A JSON array of calls after a family's marker.
    List(CallList),
    /// What follows Mistral's `[TOOL_CALLS]`.
    Mistral(Mistral),
    /// A Harmony message's header, and a call's arguments after it.
    Harmony(Harmony),
    /// A call written with a family's special tokens (Kimi K2, DeepSeek).
    Token(TokenCall),
    /// Llama 3.x JSON calls.
    LlamaJson(LlamaJson),
    /// A pythonic list of calls.
    Pythonic(Pythonic),
    /// A result, in transcript mode.
    Response(Response),
}

#[derive(Debug)]
pub(super) struct Pending {
    /// A tag after `<tool_call>`, and where it started in the block.
    reader: Option<(TagReader, usize)>,
    hermes: bool,
    qwen3: bool,
    glm: bool,
    /// A reader of an earlier Hermes block, reused with its memory.
    spare: Option<Hermes>,
}

impl Pending {
    /// After a bare `<tool_call>`, in a dialect that reads `dialects` (Hermes,
    /// Qwen3-Coder, GLM); `spare` is the reader of an earlier Hermes block, if
    /// one is kept.
    pub(super) fn new(dialects: Bodies, spare: Option<Hermes>) -> Self {
        Pending {
            reader: None,
            hermes: dialects.hermes,
            qwen3: dialects.qwen3,
            glm: dialects.glm,
            spare,
        }
    }
}

/// The bodies a bare `<tool_call>` may hold in the dialect read.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bodies {
    /// Hermes JSON.
    pub(super) hermes: bool,
    /// A Qwen3-Coder `<function=F>`.
    pub(super) qwen3: bool,
    /// A GLM name line.
    pub(super) glm: bool,
}

impl Block {
    pub(super) fn feed(&mut self, input: &str, ctx: &mut BlockContext<'_>) -> Step {
        match self {
            Block::Pending(pending) => match pending.decide(input, ctx) {
                Decision::Step(step) => Ok(step),
                Decision::Become(block, used) => {
                    *self = block;
                    ctx.base += used;
                    let step = self.feed(&input[used..], ctx);
                    ctx.base -= used;
                    Ok(step?.after(used))
                }
            },
            Block::Tagged(block) => block.feed(input, ctx),
            Block::Hermes(block) => block.feed(input, ctx),
            Block::Xml(block) => block.feed(input, ctx),
            Block::Protocol(block) => block.feed(input, ctx),
            Block::List(block) => block.feed(input, ctx),
            Block::Mistral(block) => block.feed(input, ctx),
            Block::Harmony(block) => block.feed(input, ctx),
            Block::Token(block) => block.feed(input, ctx),
            Block::LlamaJson(block) => block.feed(input, ctx),
            Block::Pythonic(block) => block.feed(input, ctx),
            Block::Response(block) => Ok(block.feed(input, ctx)),
        }
    }

    /// The text ended inside the block; false when it was not a block after all
    /// (its raw text is then text).
    pub(super) fn end(&mut self, ctx: &mut BlockContext<'_>) -> Result<bool, Error> {
        match self {
            Block::Pending(_) | Block::Response(_) => Ok(false),
            Block::Tagged(block) => block.end(ctx).map(|()| true),
            Block::Hermes(block) => block.end(ctx).map(|()| true),
            Block::Xml(block) => block.end(ctx),
            Block::Protocol(block) => block.end(ctx),
            Block::List(block) => block.end(ctx),
            Block::Mistral(block) => block.end(ctx),
            Block::Harmony(block) => block.end(ctx),
            Block::Token(block) => block.end(ctx),
            Block::LlamaJson(block) => block.end(ctx),
            Block::Pythonic(block) => block.end(ctx),
        }
    }
}

/// What [`Pending::decide`] found.
#[expect(
    clippy::large_enum_variant,
    reason = "returned once per block, straight into place"
)]
enum Decision {
    /// The body is this block's, from byte `used` of the piece on.
    Become(Block, usize),
    /// Undecided ([`BlockStep::More`]), or not a call ([`BlockStep::NotACall`]).
    Step(BlockStep),
}

impl Pending {
    /// Reads on until the body shows which dialect it is.
    fn decide(&mut self, input: &str, ctx: &mut BlockContext<'_>) -> Decision {
        let bytes = input.as_bytes();
        let mut pos = 0;
        loop {
            if let Some((reader, start)) = &mut self.reader {
                let start = *start;
                return match reader.feed(&input[pos..]) {
                    TagStep::More => Decision::Step(BlockStep::More),
                    TagStep::Done(used) => {
                        let (reader, _) = self.reader.take().expect("reading a tag");
                        let (tag, _) = reader.finish();
                        match tag.inline.as_deref() {
                            Some(name) if self.qwen3 && tag.opens("function") => {
                                Decision::Become(Block::Xml(Xml::qwen3(name, ctx)), pos + used)
                            }
                            // Another tag: it is read again as prose.
                            _ => Decision::Step(BlockStep::NotACall {
                                at: pos + used,
                                replay_from: start,
                            }),
                        }
                    }
                    TagStep::NotATag(at) => Decision::Step(BlockStep::NotACall {
                        at: pos + at,
                        replay_from: start,
                    }),
                };
            }
            pos = match ctx.skip_space(bytes, pos, 0, |at| ctx.not_a_call(at, None)) {
                Ok(pos) => pos,
                Err(step) => return Decision::Step(step),
            };
            match bytes[pos] {
                b'{' if self.hermes => {
                    ctx.begin(0);
                    let hermes = self.spare.take().map(Hermes::reset).unwrap_or_default();
                    return Decision::Become(Block::Hermes(hermes), pos);
                }
                b'<' if self.qwen3 => {
                    self.reader = Some((TagReader::new(TAG_LIMIT), ctx.pos(pos)));
                    pos += 1;
                }
                byte if self.glm && (byte.is_ascii_alphanumeric() || byte == b'_') => {
                    return Decision::Become(Block::Xml(Xml::glm(ctx)), pos);
                }
                _ => {
                    return Decision::Step(ctx.not_a_call(pos, None));
                }
            }
        }
    }
}

//! The `--provider` option shared by `lift`, `lower` and `chat`, and the one
//! place a provider name becomes its [`Wire`]: each command is a [`WithWire`]
//! job, generic over the wire, run by [`Provider::run`].

use clap::ValueEnum;
use lmstack::provider::Wire;
use lmstack::provider::anthropic::{self, Messages};
use lmstack::provider::openai::{ChatCompletions, LowerOptions, MaxTokensField, ToolResultMedia};

/// A provider's wire format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Provider {
    /// OpenAI Chat Completions and compatible servers (vLLM, llama.cpp, Ollama, GLM, Groq).
    Openai,
    /// Anthropic Messages.
    Anthropic,
}

/// How requests are written, as the command line says it; each wire takes
/// what applies to it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Writing {
    /// What to do with images and documents in tool results (for Anthropic,
    /// `Native` unless set).
    pub tool_result_media: Option<Media>,
    /// Send the token limit as `max_completion_tokens` (OpenAI's reasoning models).
    pub max_completion_tokens: bool,
}

/// The policies for images and documents in tool results.
#[derive(Clone, Copy, Debug, Default, ValueEnum)]
pub enum Media {
    /// A synthetic user message with the files follows the tool messages.
    #[default]
    Inject,
    /// The files go inside the tool message (llama.cpp, vLLM).
    Native,
    /// A tool result with a file is an error.
    Reject,
}

/// A command's work, for whichever wire was chosen.
pub trait WithWire {
    /// What the work gives.
    type Output;

    /// Does the work over `wire`.
    fn run<W: Wire>(self, wire: W) -> Self::Output;
}

impl Provider {
    /// Runs `job` over this provider's wire, written as `writing` says.
    pub fn run<J: WithWire>(self, writing: Writing, job: J) -> J::Output {
        match self {
            Provider::Openai => job.run(ChatCompletions {
                lowering: LowerOptions {
                    tool_result_media: writing.media(ToolResultMedia::Inject),
                    max_tokens_field: if writing.max_completion_tokens {
                        MaxTokensField::MaxCompletionTokens
                    } else {
                        MaxTokensField::MaxTokens
                    },
                    ..LowerOptions::default()
                },
            }),
            Provider::Anthropic => job.run(Messages {
                lowering: anthropic::LowerOptions {
                    tool_result_media: writing.media(ToolResultMedia::Native),
                    ..anthropic::LowerOptions::default()
                },
            }),
        }
    }
}

impl Writing {
    /// The media policy the command line chose, or the wire's `default`.
    fn media(&self, default: ToolResultMedia) -> ToolResultMedia {
        match self.tool_result_media {
            None => default,
            Some(Media::Inject) => ToolResultMedia::Inject,
            Some(Media::Native) => ToolResultMedia::Native,
            Some(Media::Reject) => ToolResultMedia::Reject,
        }
    }
}

//! The `--provider` option shared by `lift`, `lower` and `chat`, and the one
//! place a provider name becomes its [`Wire`]: each command is a [`WithWire`]
//! job, generic over the wire, run by [`run`].

use clap::ValueEnum;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use lmstack::provider::anthropic::{self, Messages};
use lmstack::provider::gemini::{self, GenerateContent};
use lmstack::provider::openai_chat::{ChatCompletions, LowerOptions, MaxTokensField};
use lmstack::provider::{Kind, ToolResultMedia, Wire};

/// `--provider`: a wire format by its [`Kind`] name, each listed with what it
/// speaks to.
pub fn kind() -> impl TypedValueParser<Value = Kind> {
    let values = Kind::ALL.map(|kind| {
        PossibleValue::new(kind.name()).help(match kind {
            Kind::OpenAiChat => {
                "OpenAI Chat Completions and compatible servers (vLLM, llama.cpp, Ollama, GLM, Groq)"
            }
            Kind::Anthropic => "Anthropic Messages",
            Kind::Gemini => "Google Gemini's `generateContent`",
        })
    });
    PossibleValuesParser::new(values).try_map(|name| name.parse::<Kind>())
}

/// How requests are written, as the command line says it; each wire takes
/// what applies to it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Writing {
    /// What to do with images, documents and audio in tool results; `None` for the
    /// wire's default (inject for OpenAI, native for Anthropic, by model for
    /// Gemini).
    pub tool_result_media: Option<Media>,
    /// Send the token limit as `max_completion_tokens` (OpenAI's reasoning models).
    pub max_completion_tokens: bool,
}

/// The policies for images, documents and audio in tool results.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Media {
    /// A synthetic user message with the files follows the tool results.
    Inject,
    /// The files go inside the tool result (Anthropic, Gemini 3, llama.cpp, vLLM).
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

/// Runs `job` over the wire of `kind`, written as `writing` says.
pub fn run<J: WithWire>(kind: Kind, writing: Writing, job: J) -> J::Output {
    let media = writing.tool_result_media.map(Media::policy);
    match kind {
        Kind::OpenAiChat => job.run(ChatCompletions {
            lowering: LowerOptions {
                tool_result_media: media.unwrap_or(ToolResultMedia::Inject),
                max_tokens_field: if writing.max_completion_tokens {
                    MaxTokensField::MaxCompletionTokens
                } else {
                    MaxTokensField::MaxTokens
                },
                ..LowerOptions::default()
            },
        }),
        Kind::Anthropic => job.run(Messages {
            lowering: anthropic::LowerOptions {
                tool_result_media: media.unwrap_or(ToolResultMedia::Native),
                ..anthropic::LowerOptions::default()
            },
        }),
        Kind::Gemini => job.run(GenerateContent {
            lowering: gemini::LowerOptions {
                tool_result_media: media,
            },
        }),
    }
}

impl Media {
    fn policy(self) -> ToolResultMedia {
        match self {
            Media::Inject => ToolResultMedia::Inject,
            Media::Native => ToolResultMedia::Native,
            Media::Reject => ToolResultMedia::Reject,
        }
    }
}

//! The `--provider` option shared by `lift`, `lower` and `chat`: each command
//! is a [`WithWire`] job, generic over the wire, run by [`run`] over the one
//! the option names.

use std::process::ExitCode;

use clap::ValueEnum;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use lmstack::provider::{Kind, Lowering, ToolResultMedia, WithWire};

/// `--provider`: a wire format by its [`Kind`] name, each listed with what it
/// speaks to.
pub fn kind() -> impl TypedValueParser<Value = Kind> {
    let values = Kind::ALL.map(|kind| {
        PossibleValue::new(kind.name()).help(match kind {
            Kind::OpenAiChat => {
                "OpenAI Chat Completions and compatible servers (vLLM, llama.cpp, Ollama, GLM, Groq)"
            }
            Kind::OpenAiResponses => "OpenAI Responses (`POST /v1/responses`)",
            Kind::Anthropic => "Anthropic Messages",
            Kind::Gemini => "Google Gemini's `generateContent`",
        })
    });
    PossibleValuesParser::new(values).try_map(|name| name.parse::<Kind>())
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

/// Runs `job` over the wire of `kind`, written as `lowering` says (a wire
/// left out of the build is an error, printed).
pub fn run<J: WithWire<Output = ExitCode>>(kind: Kind, lowering: Lowering, job: J) -> ExitCode {
    kind.with_wire(lowering, job).unwrap_or_else(|error| {
        eprintln!("error: {error}");
        ExitCode::FAILURE
    })
}

impl Media {
    /// The policy, as the library names it.
    pub fn policy(self) -> ToolResultMedia {
        match self {
            Media::Inject => ToolResultMedia::Inject,
            Media::Native => ToolResultMedia::Native,
            Media::Reject => ToolResultMedia::Reject,
        }
    }
}

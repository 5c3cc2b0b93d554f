//! `lmstack lower`: a canonical request (`{"messages":[…],"options":{…}}`) on
//! stdin → the provider's wire request body on stdout.

use std::process::ExitCode;

use lmstack::provider::{Kind, Lowering, Wire, WithWire};
use lmstack::{ChatRequest, Error};

use crate::input;
use crate::provider_arg::{self, Media};
use crate::show::print_json_line;

/// Lowers a canonical request from stdin into the provider's request body.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The wire format to write.
    #[arg(long, value_parser = provider_arg::kind())]
    provider: Kind,
    /// What to do with images, documents and audio in tool results (by default the
    /// wire's choice: inject for OpenAI, native for Anthropic, by model for
    /// Gemini).
    #[arg(long, value_enum)]
    tool_result_media: Option<Media>,
    /// Send the token limit as `max_completion_tokens` (OpenAI's reasoning models).
    #[arg(long)]
    max_completion_tokens: bool,
    #[command(flatten)]
    input: input::Limit,
}

pub fn run(args: Args) -> ExitCode {
    let request: ChatRequest = match args.input.stdin().json(|error| {
        Error::InvalidRequest(format!(
            "stdin is not a canonical request ({{\"messages\":[…],\"options\":{{…}}}}): {error}"
        ))
    }) {
        Ok(request) => request,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    let mut lowering = Lowering::default();
    lowering.tool_result_media = args.tool_result_media.map(Media::policy);
    lowering.max_completion_tokens = args.max_completion_tokens;
    provider_arg::run(args.provider, lowering, Lower(request))
}

/// Lowering one request, over the chosen wire.
struct Lower(ChatRequest);

impl WithWire for Lower {
    type Output = ExitCode;

    fn run<W: Wire>(self, wire: W) -> ExitCode {
        match wire.lower(&self.0) {
            Ok(body) => {
                print_json_line(&body);
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("error: {error}");
                ExitCode::FAILURE
            }
        }
    }
}

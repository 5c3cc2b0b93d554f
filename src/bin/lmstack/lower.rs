//! `lmstack lower`: a canonical request (`{"messages":[…],"options":{…}}`) on
//! stdin → the provider's wire request body on stdout.

use std::process::ExitCode;

use clap::ValueEnum;
use lmstack::ChatRequest;
use lmstack::provider::openai::{LowerOptions, MaxTokensField, ToolResultMedia, lower};

use crate::input;
use crate::provider_arg::Provider;
use crate::show::print_json_line;

/// Lowers a canonical request from stdin into the provider's request body.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The wire format to write.
    #[arg(long, value_enum)]
    provider: Provider,
    /// What to do with images and documents in tool results.
    #[arg(long, value_enum, default_value = "inject")]
    tool_result_media: Media,
    /// Send the token limit as `max_completion_tokens` (OpenAI's reasoning models).
    #[arg(long)]
    max_completion_tokens: bool,
    #[command(flatten)]
    input: input::Limit,
}

/// The policies for images and documents in tool results.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Media {
    /// A synthetic user message with the files follows the tool messages.
    Inject,
    /// The files go inside the tool message (llama.cpp, vLLM).
    Native,
    /// A tool result with a file is an error.
    Reject,
}

pub fn run(args: Args) -> ExitCode {
    let input = match args.input.stdin().read_all() {
        Ok(input) => input,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    let request: ChatRequest = match serde_json::from_slice(&input) {
        Ok(request) => request,
        Err(error) => {
            eprintln!(
                "error: stdin is not a canonical request ({{\"messages\":[…],\"options\":{{…}}}}): {error}"
            );
            return ExitCode::FAILURE;
        }
    };
    let Provider::Openai = args.provider;
    let options = LowerOptions {
        tool_result_media: match args.tool_result_media {
            Media::Inject => ToolResultMedia::Inject,
            Media::Native => ToolResultMedia::Native,
            Media::Reject => ToolResultMedia::Reject,
        },
        max_tokens_field: if args.max_completion_tokens {
            MaxTokensField::MaxCompletionTokens
        } else {
            MaxTokensField::MaxTokens
        },
        ..LowerOptions::default()
    };
    match lower(&request, &options) {
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

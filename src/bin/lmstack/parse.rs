//! `lmstack parse`: model text on stdin → the natural tool use parser, fed in
//! chunks as a stream would deliver them → messages (or events) as JSON lines.

use std::path::PathBuf;
use std::process::ExitCode;

use lmstack::natural::{Dialect, NaturalToolUseParser, OnInvalid};
use lmstack::testing::{Chunking, ScriptedModel};
use lmstack::{ChatRequest, Error, Message, ToolSpec};
use tower::{Layer, ServiceExt};

use crate::input;
use crate::show::print_json_line;

/// Parses model text with `<tool_call>`-style markup from stdin.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The dialect: auto (the XML-like ones), tagged, hermes, qwen3-coder,
    /// claude-xml, json, mistral, llama3-json, pythonic, kimi-k2, deepseek,
    /// glm, harmony, minimax, granite.
    #[arg(long, default_value = "auto")]
    dialect: Dialect,
    /// A JSON array of tool specs (`name`, `description`, `parameters`). Without
    /// it any tool name is accepted and no schema is checked.
    #[arg(long, value_name = "FILE")]
    tools: Option<PathBuf>,
    /// Feed the text in chunks of this many bytes (on UTF-8 boundaries), as a
    /// streaming reply. Without a chunking the text is one non-streaming reply.
    #[arg(long, value_name = "N", conflicts_with = "random_chunks")]
    chunk_size: Option<usize>,
    /// Feed the text in chunks of 1 to 16 bytes drawn from this seed.
    #[arg(long, value_name = "SEED")]
    random_chunks: Option<u64>,
    /// What to do with calls that cannot be accepted.
    #[arg(long, value_enum, default_value = "text")]
    on_invalid: Policy,
    /// Print the reply's events instead of the joined messages.
    #[arg(long)]
    events: bool,
    #[command(flatten)]
    input: input::Limit,
}

/// The parser's policy for bad calls.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Policy {
    /// Keep the raw text as text, with the parse error in its metadata.
    Text,
    /// Hand the call out marked invalid.
    Mark,
    /// Fail.
    Error,
}

pub fn run(args: Args) -> ExitCode {
    match parse(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn parse(args: Args) -> Result<(), Error> {
    // The whole text is the model's reply, so it is read whole, within the limit.
    let text = String::from_utf8(args.input.stdin().read_all()?)
        .map_err(|_| Error::InvalidRequest("stdin is not UTF-8 text".into()))?;
    let tools: Vec<ToolSpec> = match &args.tools {
        None => Vec::new(),
        Some(path) => {
            let json = args.input.file(path, "the tools file")?.read_all()?;
            serde_json::from_slice(&json)
                .map_err(|error| Error::json(format!("the tools in {}", path.display()), error))?
        }
    };
    let chunking = match (args.chunk_size, args.random_chunks) {
        (Some(size), _) => Some(Chunking::Bytes(size.max(1))),
        (None, Some(seed)) => Some(Chunking::Random { seed, max: 16 }),
        (None, None) => None,
    };
    let parser = NaturalToolUseParser::new()
        .dialect(args.dialect)
        .on_invalid(match args.on_invalid {
            Policy::Text => OnInvalid::Text,
            Policy::Mark => OnInvalid::Mark,
            Policy::Error => OnInvalid::Error,
        });
    // The text plays the model's reply; the parser layer reads it as it would
    // read a real model's, streamed in the chosen chunks or whole.
    let model = ScriptedModel::new()
        .chunking(chunking.unwrap_or(Chunking::Whole))
        .yielding(false)
        .reply(text);
    let mut request = ChatRequest::new(Vec::new()).streaming(chunking.is_some());
    request.options.tools = tools;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|error| Error::stage("lmstack parse", error.to_string()))?;
    runtime.block_on(async {
        let reply = parser.layer(model).oneshot(request).await?;
        if args.events {
            // Print what arrived before an error too: nothing is lost.
            let mut reply = reply;
            while let Some(item) = futures::StreamExt::next(&mut reply).await {
                print_json_line(&item?);
            }
        } else {
            let messages: Vec<Message> = reply.collect().await?;
            messages.iter().for_each(print_json_line);
        }
        Ok(())
    })
}

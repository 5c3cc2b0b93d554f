//! `lmstack render`: canonical messages (JSON lines) on stdin → the natural tool
//! use transformer → messages with calls and results written as text (JSON
//! lines); `--read` does the reverse.

use std::io::BufRead;
use std::process::ExitCode;

use lmstack::natural::{NaturalToolUseParser, NaturalToolUseTransformer, RenderDialect};
use lmstack::{Error, Message};

use crate::show::print_json_line;

/// Renders tool calls and results of canonical messages as natural text.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The dialect to write: tagged (`<tool_call name="F">`) or hermes (Qwen
    /// family).
    #[arg(long, default_value = "tagged")]
    dialect: RenderDialect,
    /// The reverse: read messages written in this format back into canonical
    /// messages, calls and results paired into `tool_aggregate`s.
    #[arg(long)]
    read: bool,
}

pub fn run(args: Args) -> ExitCode {
    match render(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn render(args: Args) -> Result<(), Error> {
    let mut messages = Vec::new();
    for (number, line) in std::io::stdin().lock().lines().enumerate() {
        let line = line.map_err(|error| {
            Error::InvalidRequest(format!("reading stdin as UTF-8 text: {error}"))
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let message: Message = serde_json::from_str(&line)
            .map_err(|error| Error::json(format!("the message on line {}", number + 1), error))?;
        messages.push(message);
    }
    let messages = if args.read {
        NaturalToolUseParser::new().read_history(messages, &[])?
    } else {
        NaturalToolUseTransformer::new()
            .dialect(args.dialect)
            .render(messages)?
    };
    messages.iter().for_each(print_json_line);
    Ok(())
}

//! `lmstack render`: canonical messages (JSON lines) on stdin → the natural tool
//! use transformer → messages with calls and results written as text (JSON
//! lines); `--read` does the reverse.

use std::process::ExitCode;

use lmstack::natural::{
    Consolidation, NaturalToolUseParser, NaturalToolUseTransformer, RenderDialect,
};
use lmstack::{Error, Message};

use crate::input;
use crate::show::print_json_line;

/// Renders tool calls and results of canonical messages as natural text.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The dialect to write: tagged (`<tool_call name="F">`), hermes (Qwen
    /// family), or a family's own call form: mistral, llama3-json, pythonic,
    /// kimi-k2, deepseek, glm, harmony, minimax, granite.
    #[arg(long, default_value = "tagged")]
    dialect: RenderDialect,
    /// Where results go: split (the calls in an assistant message, the results
    /// in a user message after it) or single (the whole turn in one message,
    /// each call followed by its response; `user` when it holds responses,
    /// else `assistant`).
    #[arg(long, value_name = "FORM", default_value = "split")]
    consolidate: Consolidation,
    /// Write calls and responses without their `id`, as a model writes them;
    /// the ids are kept in each message's metadata (`tool_call_ids`), so
    /// `--read` gives them back.
    #[arg(long)]
    no_ids: bool,
    /// The reverse: read messages written in this format (in `--dialect`)
    /// back into canonical messages, calls and results paired into
    /// `tool_aggregate`s.
    #[arg(long)]
    read: bool,
    #[command(flatten)]
    input: input::Limit,
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
    // The history is rendered whole, so every message is kept; each line is
    // read as it comes, all of them within the limit.
    let mut messages = Vec::new();
    let mut stdin = args.input.stdin();
    let mut number = 0;
    while let Some(line) = stdin.line()? {
        number += 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let message: Message = serde_json::from_slice(&line)
            .map_err(|error| Error::json(format!("the message on line {number}"), error))?;
        messages.push(message);
    }
    let messages = if args.read {
        NaturalToolUseParser::new()
            .dialect(args.dialect.read_by())
            .read_history(messages, &[])?
    } else {
        NaturalToolUseTransformer::new()
            .dialect(args.dialect)
            .consolidation(args.consolidate)
            .call_ids(!args.no_ids)
            .render(messages)?
    };
    messages.iter().for_each(print_json_line);
    Ok(())
}

//! `lmstack render`: canonical messages (JSON lines) on stdin → the natural tool
//! use transformer → messages with calls and results written as text (JSON
//! lines); `--read` does the reverse.
//!
//! Each message is printed as soon as it is complete, so an error leaves the
//! messages before it printed.

use std::io::Read;
use std::process::ExitCode;

use lmstack::natural::{Consolidation, Dialect, NaturalToolUseParser, NaturalToolUseTransformer};
use lmstack::service::{Machine, Output};
use lmstack::{Error, Event, Message};

use crate::input::{self, Input};
use crate::show::{MessageLines, print_json_line};

/// Renders tool calls and results of canonical messages as natural text.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The dialect to write: tagged (`<tool_call name="F">`), hermes (Qwen
    /// family), or a family's own call form: mistral, llama3-json, pythonic,
    /// kimi-k2, deepseek, glm, harmony, minimax, granite.
    #[arg(long, default_value = "tagged", value_parser = Dialect::parse_rendered)]
    dialect: Dialect,
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
    // Each message is rendered (or read) as its line is read, and printed as
    // soon as it is complete: no more than a turn is held.
    let input = args.input.stdin();
    if args.read {
        let reader = NaturalToolUseParser::new()
            .dialect(args.dialect.read_by())
            .history_reader(&[]);
        return feed(
            input,
            reader,
            |message| message,
            |message| print_json_line(&message),
        );
    }
    let transformer = NaturalToolUseTransformer::new()
        .dialect(args.dialect)
        .consolidation(args.consolidate)
        .call_ids(!args.no_ids)
        .machine(Vec::<String>::new());
    let mut lines = MessageLines::default();
    let rendered = feed(input, transformer, Event::message, |event| {
        lines.push(event)
    });
    lines.finish();
    rendered
}

/// Feeds `machine` the messages of `input`, one a line (blank lines skipped),
/// as each line is read (`message` makes its input of one), handing what it
/// makes to `made` as it comes.
fn feed<M: Machine>(
    mut input: Input<impl Read>,
    mut machine: M,
    message: impl Fn(Message) -> M::In,
    mut made: impl FnMut(M::Out),
) -> Result<(), Error> {
    let mut out = Output::new();
    let mut number = 0;
    let fed = loop {
        let line = match input.line() {
            Ok(Some(line)) => line,
            Ok(None) => break machine.finish(&mut out),
            Err(error) => break Err(error),
        };
        number += 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let read = serde_json::from_slice(&line)
            .map_err(|error| Error::json(format!("the message on line {number}"), error));
        // The line's bytes go before the machine makes more of the message.
        drop(line);
        let pushed = read.and_then(|read| machine.push(message(read), &mut out));
        if pushed.is_err() {
            break pushed;
        }
        out.drain().for_each(&mut made);
    };
    out.drain().for_each(made);
    fed
}

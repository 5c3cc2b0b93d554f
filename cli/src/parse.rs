//! `lmstack parse`: model text on stdin → the natural tool use parser, fed in
//! chunks as a stream would deliver them → messages (or events) as JSON lines.
//!
//! The text is fed to the parser as it is read, so that it is never held whole
//! beside what the parser makes of it, and each message is printed as soon as
//! it is complete: an error leaves what was made before it printed.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use lmstack::natural::{Dialect, NaturalToolUseParser, OnInvalid, ParserMachine};
use lmstack::service::{Machine, Output};
use lmstack::{Error, Event, FinishReason, Joiner, Message, ToolSpec};

use crate::input::{self, Input};
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
    let tools: Vec<ToolSpec> = match &args.tools {
        None => Vec::new(),
        Some(path) => args
            .input
            .file(path, "the tools file")?
            .json(|error| Error::json(format!("the tools in {}", path.display()), error))?,
    };
    let parser = NaturalToolUseParser::new()
        .dialect(args.dialect)
        .on_invalid(match args.on_invalid {
            Policy::Text => OnInvalid::Text,
            Policy::Mark => OnInvalid::Mark,
            Policy::Error => OnInvalid::Error,
        });
    let mut machine = parser.machine(&tools, 0)?;
    // The text plays the model's reply: streamed in the chosen chunks, or,
    // without a chunking, one whole reply — fed in the pieces read all the
    // same, its events joined as a non-streaming reply's are (the parser makes
    // the same messages of a text however it is cut).
    let mut cuts = match (args.chunk_size, args.random_chunks) {
        (Some(size), _) => Some(Cuts::new(move || size.max(1))),
        (None, Some(seed)) => {
            let mut rng = fastrand::Rng::with_seed(seed);
            Some(Cuts::new(move || rng.usize(1..=16)))
        }
        (None, None) => None,
    };
    let mut sink = Sink {
        events: args.events,
        streamed: cuts.is_some(),
        joiner: Joiner::new(),
    };
    let mut out = Output::new();
    let fed = feed(
        Text::new(args.input.stdin()),
        cuts.as_mut(),
        &mut machine,
        &mut out,
        &mut sink,
    );
    sink.take(&mut out);
    sink.finish();
    fed
}

/// Feeds the text to the parser as it is read, cut by `cuts` when streamed,
/// handing what it makes to `sink`; then the reply's end.
fn feed(
    mut text: Text<impl Read>,
    mut cuts: Option<&mut Cuts>,
    machine: &mut ParserMachine,
    out: &mut Output,
    sink: &mut Sink,
) -> Result<(), Error> {
    let mut empty = true;
    while let Some(piece) = text.next()? {
        empty = false;
        match cuts.as_deref_mut() {
            Some(cuts) => cuts.push(&piece, |chunk| machine.push(Event::text(chunk), out))?,
            None => machine.push(Event::text(piece), out)?,
        }
        sink.take(out);
    }
    if let Some(cuts) = cuts {
        cuts.finish(|chunk| machine.push(Event::text(chunk), out))?;
    }
    if empty {
        // An empty reply is one empty message, as a model sends it.
        machine.push(Event::message(Message::assistant("")), out)?;
    }
    machine.push(Event::finish(FinishReason::Stop), out)?;
    machine.finish(out)
}

/// Where the parser's events go: printed as they come when streamed, else
/// joined as a non-streaming reply's are, each message printed (as itself or
/// as a `message` event) as soon as it is complete.
struct Sink {
    /// Events are printed, not messages.
    events: bool,
    /// The events are printed as they come.
    streamed: bool,
    joiner: Joiner,
}

impl Sink {
    /// Takes the events in `out`.
    fn take(&mut self, out: &mut Output) {
        for event in out.drain() {
            if self.events && self.streamed {
                print_json_line(&event);
                continue;
            }
            self.joiner.push(event);
            for message in self.joiner.take_completed() {
                match self.events {
                    true => print_json_line(&Event::from(message)),
                    false => print_json_line(&message),
                }
            }
        }
    }

    /// Prints what is still held: what was made before an error too.
    fn finish(self) {
        match (self.events, self.streamed) {
            (true, true) => {}
            (true, false) => self.joiner.finish_events().iter().for_each(print_json_line),
            (false, _) => self.joiner.finish().iter().for_each(print_json_line),
        }
    }
}

/// Stdin as UTF-8 text, in the pieces read; a character cut between two reads
/// is completed by the next.
struct Text<R> {
    input: Input<R>,
    /// The start of a character the last read cut.
    partial: Vec<u8>,
}

impl<R: Read> Text<R> {
    fn new(input: Input<R>) -> Self {
        Text {
            input,
            partial: Vec::new(),
        }
    }

    /// The next piece; `None` at the end of the input.
    fn next(&mut self) -> Result<Option<String>, Error> {
        let not_utf8 = || Error::InvalidRequest("stdin is not UTF-8 text".into());
        loop {
            let Some(read) = self.input.chunk()? else {
                return match self.partial.is_empty() {
                    true => Ok(None),
                    false => Err(not_utf8()),
                };
            };
            let bytes = match self.partial.is_empty() {
                true => read,
                false => [std::mem::take(&mut self.partial), read].concat(),
            };
            let error = match String::from_utf8(bytes) {
                Ok(text) => return Ok(Some(text)),
                Err(error) if error.utf8_error().error_len().is_some() => return Err(not_utf8()),
                Err(error) => error,
            };
            let valid = error.utf8_error().valid_up_to();
            let mut bytes = error.into_bytes();
            self.partial = bytes.split_off(valid);
            if valid > 0 {
                return String::from_utf8(bytes).map(Some).map_err(|_| not_utf8());
            }
        }
    }
}

/// Cuts text that arrives in pieces as [`Chunking::split`] cuts it whole: into
/// chunks of `next_size()` bytes, each end moved forward to a character
/// boundary.
///
/// [`Chunking::split`]: lmstack::testing::Chunking::split
struct Cuts {
    next_size: Box<dyn FnMut() -> usize>,
    /// The size of the next chunk, once drawn.
    size: Option<usize>,
    /// The text not cut yet.
    held: String,
}

impl Cuts {
    fn new(next_size: impl FnMut() -> usize + 'static) -> Self {
        Cuts {
            next_size: Box::new(next_size),
            size: None,
            held: String::new(),
        }
    }

    /// Adds `text`, handing each chunk it completes to `chunk`.
    fn push(
        &mut self,
        text: &str,
        chunk: impl FnMut(&str) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.held.push_str(text);
        self.cut(false, chunk)
    }

    /// Hands the rest to `chunk`: the text has ended.
    fn finish(&mut self, chunk: impl FnMut(&str) -> Result<(), Error>) -> Result<(), Error> {
        self.cut(true, chunk)
    }

    fn cut(
        &mut self,
        ended: bool,
        mut chunk: impl FnMut(&str) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let mut start = 0;
        let cut = loop {
            let rest = self.held.len() - start;
            let size = *self.size.get_or_insert_with(&mut self.next_size);
            if rest == 0 || (rest < size && !ended) {
                break Ok(());
            }
            let mut end = start + size.min(rest);
            while !self.held.is_char_boundary(end) {
                end += 1;
            }
            self.size = None;
            if let Err(error) = chunk(&self.held[start..end]) {
                break Err(error);
            }
            start = end;
        };
        self.held.drain(..start);
        cut
    }
}

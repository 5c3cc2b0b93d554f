//! `lmstack lift`: a provider's raw response (JSON, or SSE bytes) on stdin →
//! canonical messages (or events) as JSON lines on stdout.
//!
//! Stdin is fed to the body decoder piece by piece as it arrives, as the
//! provider feeds it an HTTP body, and what it lifts is printed as soon as it
//! is complete.

use std::io::Read;
use std::process::ExitCode;

use lmstack::provider::body::{BodyDecoder, Lift};
use lmstack::provider::sse::DEFAULT_MAX_EVENT_BYTES;
use lmstack::provider::{Kind, Lowering, Wire, WithWire};
use lmstack::service::{Machine, Output};
use lmstack::{Error, Joiner};

use crate::input::{self, Input};
use crate::provider_arg;
use crate::show::{MessageLines, print_json_line};

/// Lifts a raw response body from stdin into canonical messages.
///
/// Stdin is decoded as it arrives; a JSON body may be as large as
/// --max-input, an SSE event 16 MiB.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The wire format of the response.
    #[arg(long, value_parser = provider_arg::kind())]
    provider: Kind,
    /// The body is a stream (SSE); otherwise it is one JSON object.
    #[arg(long)]
    stream: bool,
    /// Print the reply's events (deltas when streaming) instead of messages.
    #[arg(long)]
    events: bool,
    #[command(flatten)]
    input: input::Limit,
}

pub fn run(args: Args) -> ExitCode {
    provider_arg::run(args.provider, Lowering::default(), args)
}

impl WithWire for Args {
    type Output = ExitCode;

    fn run<W: Wire>(self, wire: W) -> ExitCode {
        let lifter = wire.lifter();
        let decoder = if self.stream {
            BodyDecoder::sse(lifter)
        } else {
            BodyDecoder::json(lifter)
        };
        let mut decoder = decoder.with_limits(DEFAULT_MAX_EVENT_BYTES, self.input.bytes());
        let mut printer = match (self.events, self.stream) {
            (true, true) => Printer::Events,
            (true, false) => Printer::JoinedEvents(Joiner::new()),
            (false, _) => Printer::Messages(MessageLines::default()),
        };
        let mut out = Output::new();
        let outcome = feed(&mut decoder, self.input.stdin(), &mut out, &mut printer);
        // What was lifted before an error is printed too: nothing is lost.
        printer.print(&mut out);
        printer.finish();
        match outcome {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {error}");
                ExitCode::FAILURE
            }
        }
    }
}

/// Feeds the input to the decoder as it arrives, printing what each piece
/// lifts, then finishes the decoder.
fn feed(
    decoder: &mut BodyDecoder<impl Lift>,
    mut input: Input<impl Read>,
    out: &mut Output,
    printer: &mut Printer,
) -> Result<(), Error> {
    while let Some(piece) = input.chunk()? {
        decoder.push(piece.into(), out)?;
        printer.print(out);
    }
    decoder.finish(out)
}

/// How the lifted events are printed.
enum Printer {
    /// Each event as it is lifted.
    Events,
    /// The events joined (deltas into messages), at the end.
    JoinedEvents(Joiner),
    /// The messages, each as soon as it is complete.
    Messages(MessageLines),
}

impl Printer {
    /// Takes the events in `out`.
    fn print(&mut self, out: &mut Output) {
        for event in out.drain() {
            match self {
                Printer::Events => print_json_line(&event),
                Printer::JoinedEvents(joiner) => joiner.push(event),
                Printer::Messages(lines) => lines.push(event),
            }
        }
    }

    /// Prints what is still held.
    fn finish(self) {
        match self {
            Printer::Events => {}
            Printer::JoinedEvents(joiner) => {
                joiner.finish_events().iter().for_each(print_json_line)
            }
            Printer::Messages(lines) => lines.finish(),
        }
    }
}

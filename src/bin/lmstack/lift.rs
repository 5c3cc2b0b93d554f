//! `lmstack lift`: a provider's raw response (JSON, or SSE bytes) on stdin →
//! canonical messages (or events) as JSON lines on stdout.

use std::io::Read;
use std::process::ExitCode;

use lmstack::Joiner;
use lmstack::provider::body::BodyDecoder;
use lmstack::provider::openai::Lifter;
use lmstack::service::{Machine, Output};

use crate::provider_arg::Provider;
use crate::show::print_json_line;

/// Lifts a raw response body from stdin into canonical messages.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The wire format of the response.
    #[arg(long, value_enum)]
    provider: Provider,
    /// The body is a stream (SSE); otherwise it is one JSON object.
    #[arg(long)]
    stream: bool,
    /// Print the reply's events (deltas when streaming) instead of messages.
    #[arg(long)]
    events: bool,
}

pub fn run(args: Args) -> ExitCode {
    let mut body = Vec::new();
    if let Err(error) = std::io::stdin().read_to_end(&mut body) {
        eprintln!("error: reading stdin: {error}");
        return ExitCode::FAILURE;
    }
    let Provider::Openai = args.provider;
    let mut decoder = if args.stream {
        BodyDecoder::sse(Lifter::new())
    } else {
        BodyDecoder::json(Lifter::new())
    };
    let mut out = Output::new();
    let outcome = decoder
        .push(body.into(), &mut out)
        .and_then(|()| decoder.finish(&mut out));
    let events: Vec<_> = out.drain().collect();
    // What was lifted before an error is printed too: nothing is lost.
    if args.events && args.stream {
        events.iter().for_each(print_json_line);
    } else if args.events {
        Joiner::join_events(events).iter().for_each(print_json_line);
    } else {
        Joiner::join(events).iter().for_each(print_json_line);
    }
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

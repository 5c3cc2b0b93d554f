//! `lmstack`: each stage of the pipeline on stdin/stdout, and an offline demo.

use std::future::Future;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use lmstack::Error;
use tracing_subscriber::filter::LevelFilter;

use crate::logging::LogFormat;

mod chat;
mod conversation;
mod demo;
mod descriptors;
mod input;
mod lift;
mod logging;
mod lower;
mod mcp;
mod mcp_arg;
mod parse;
mod provider_arg;
mod render;
mod serve;
mod serve_config;
mod session;
mod show;
mod tools;
mod words;

// The gateway allocates per request and per streamed frame: mimalloc's
// thread-local heaps cost less there than glibc's malloc.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Composable tower layers for LLM message pipelines, on the command line.
///
/// Messages are read and written as JSON lines in lmstack's canonical form.
#[derive(Debug, Parser)]
#[command(name = "lmstack", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs the whole pipeline offline: a scripted text-only model calls real tools.
    Demo(demo::DemoArgs),
    /// Parses model text with `<tool_call>`-style markup into messages.
    Parse(parse::Args),
    /// Renders tool calls and results back into natural `<tool_call>` text.
    Render(render::Args),
    /// Lifts a provider's raw response (JSON or SSE) into canonical messages.
    Lift(lift::Args),
    /// Lowers a canonical request into a provider's wire request body.
    Lower(lower::Args),
    Chat(chat::Args),
    Mcp(mcp::Args),
    Serve(serve::Args),
}

fn main() -> ExitCode {
    let command = Cli::parse().command;
    match &command {
        Command::Serve(args) => logging::init(args.log_format(), LevelFilter::INFO),
        _ => logging::init(LogFormat::Text, LevelFilter::WARN),
    }
    match command {
        Command::Demo(args) => demo::run(args),
        Command::Parse(args) => parse::run(args),
        Command::Render(args) => render::run(args),
        Command::Lift(args) => lift::run(args),
        Command::Lower(args) => lower::run(args),
        Command::Chat(args) => chat::run(args),
        Command::Mcp(args) => mcp::run(args),
        Command::Serve(args) => serve::run(args),
    }
}

/// Runs a command's `work` on a multi-threaded runtime; an error is printed on
/// stderr and makes the exit status 1.
fn block_on(work: impl Future<Output = Result<(), Error>>) -> ExitCode {
    let outcome = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(work),
        Err(error) => Err(Error::stage(
            "lmstack",
            format!("starting the runtime: {error}"),
        )),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

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
#[cfg(feature = "otel")]
mod otel;
mod parse;
mod provider_arg;
mod render;
mod serve;
mod serve_config;
mod serve_limits;
mod session;
mod show;
mod tools;

// The gateway allocates per request and per streamed frame: mimalloc's
// thread-local heaps cost less there than glibc's malloc.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Holds memory as a command bounded by `--max-input` needs it: freed memory
/// goes back to the system at once, and no page is a 2 MiB huge page. By
/// default mimalloc keeps freed memory a second (`purge_delay`) and asks for
/// huge pages: a command growing a buffer kept every size it outgrew resident,
/// and a whole huge page for a few bytes used (`parse` of 8 MiB peaked at 1.7x
/// its input, 1.0x without). The gateway keeps the defaults, for its
/// throughput.
fn hold_memory_tightly() {
    #[cfg(feature = "mimalloc")]
    {
        use std::ffi::{c_int, c_long};
        /// `mi_option_purge_delay` in mimalloc.h (versions 2 and 3 alike).
        const PURGE_DELAY: c_int = 15;
        unsafe extern "C" {
            fn mi_option_set(option: c_int, value: c_long);
        }
        // SAFETY: `void mi_option_set(mi_option_t, long)` of the mimalloc the
        // `mimalloc` crate links in; it stores the option, which mimalloc reads
        // as it goes, and runs before the command starts any thread.
        unsafe { mi_option_set(PURGE_DELAY, 0) }
    }
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE only sets a flag of this process; where it
    // fails (an old kernel) huge pages stay on, which is harmless.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

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
    let logging = match &command {
        // The gateway's spans go to an OTLP endpoint where one is set.
        Command::Serve(args) => logging::init(args.log_format(), LevelFilter::INFO, true),
        _ => {
            hold_memory_tightly();
            logging::init(LogFormat::Text, LevelFilter::WARN, false)
        }
    };
    let exit = match command {
        Command::Demo(args) => demo::run(args),
        Command::Parse(args) => parse::run(args),
        Command::Render(args) => render::run(args),
        Command::Lift(args) => lift::run(args),
        Command::Lower(args) => lower::run(args),
        Command::Chat(args) => chat::run(args),
        Command::Mcp(args) => mcp::run(args),
        Command::Serve(args) => serve::run(args),
    };
    // After the runtime: the export's blocking client may not end inside it.
    logging.finish();
    exit
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

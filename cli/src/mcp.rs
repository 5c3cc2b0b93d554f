//! `lmstack mcp`: an MCP server's tools listed, or one of them called, on the
//! command line — what a model would see and get through the function layer.

use std::future;
use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;
use lmstack::function::mcp::McpServer;
use lmstack::function::{CallContext, MediaPolicy, ToolOutput, ToolSource};
use lmstack::{Error, Message, ToolResult};
use serde_json::Value;
use tokio::time::Instant;

use crate::mcp_arg::{ServerArgs, seconds};
use crate::show::print_json_line;

/// Lists or calls the tools of an MCP server.
///
/// The server is started with `--server 'CMD ARGS…'` (stdio) or reached with
/// `--url URL` (streamable HTTP).
///
/// A server that cannot be started or reached is an error (exit status 1), its
/// message naming the command or URL, the exit status and the end of the
/// server's stderr.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Prints the server's tools, one ToolSpec JSON object a line.
    List(ServerArgs),
    /// Calls one tool and prints its result as a `tool_results` message (one
    /// JSON line); a result the tool marks as an error, a failed call and a
    /// call past --timeout are error results, with exit status 0.
    Call(CallArgs),
}

/// Options of `lmstack mcp call`.
#[derive(Debug, clap::Args)]
struct CallArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// Stop the call after this long (the server is sent
    /// `notifications/cancelled`); the result then says it timed out.
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    timeout: Option<Duration>,
    /// The call id of the result.
    #[arg(long, default_value = "call_1")]
    call_id: String,
    /// The tool to call.
    tool: String,
    /// Its arguments, a JSON object.
    #[arg(value_name = "ARGS_JSON", default_value = "{}")]
    arguments: String,
}

/// Runs `lmstack mcp`.
pub fn run(args: Args) -> ExitCode {
    match args.command {
        Command::List(server) => crate::block_on(list(server)),
        Command::Call(call) => crate::block_on(call_tool(call)),
    }
}

/// Prints the server's tools.
async fn list(args: ServerArgs) -> Result<(), Error> {
    let server = args.connect().await?;
    for tool in server.tools().iter() {
        print_json_line(tool.spec());
    }
    server.close().await;
    Ok(())
}

/// Calls the tool and prints its result.
async fn call_tool(args: CallArgs) -> Result<(), Error> {
    let arguments = match serde_json::from_str::<Value>(&args.arguments) {
        Ok(arguments @ Value::Object(_)) => arguments,
        Ok(other) => return Err(bad_arguments(format!("not an object: {other}"))),
        Err(error) => return Err(bad_arguments(format!("not valid JSON: {error}"))),
    };
    let server = args.server.connect().await?;
    let result = call(&server, &args, arguments).await;
    print_json_line(&Message::tool_results(vec![result]));
    server.close().await;
    Ok(())
}

/// The result of the call, within its time limit: past it the call's context is
/// cancelled, which cancels the call on the server.
async fn call(server: &McpServer, args: &CallArgs, arguments: Value) -> ToolResult {
    let deadline = args.timeout.map(|limit| Instant::now() + limit);
    let context = CallContext::new(args.call_id.as_str()).with_deadline(deadline);
    let call = server.call(&args.tool, arguments, &context);
    tokio::pin!(call);
    let expired = async {
        match deadline {
            Some(deadline) => tokio::time::sleep_until(deadline).await,
            None => future::pending().await,
        }
    };
    let output = tokio::select! {
        outcome = &mut call => outcome.unwrap_or_else(|error| {
            ToolOutput::error(format!("The tool `{}` failed: {error}", args.tool))
        }),
        () = expired => {
            context.cancel();
            // Ends at once, now that the context is cancelled.
            let _ = call.await;
            ToolOutput::error(format!(
                "The tool `{}` did not finish within {} and was stopped.",
                args.tool,
                humantime::format_duration(args.timeout.unwrap_or_default())
            ))
        }
    };
    output.into_result(&args.call_id, &args.tool, &MediaPolicy::default())
}

/// ARGS_JSON is not a JSON object.
fn bad_arguments(problem: String) -> Error {
    Error::stage("lmstack", format!("ARGS_JSON is {problem}"))
}

//! `lmstack chat`: one prompt to a real model server through the provider stack;
//! the reply's canonical messages as JSON lines on stdout.

use std::io::Write;
use std::process::ExitCode;

use futures::StreamExt;
use lmstack::provider::ApiKey;
use lmstack::provider::openai::{OpenAi, OpenAiConfig};
use lmstack::provider::retry::RetryLayer;
use lmstack::{ChatRequest, Error, Event, Joiner, Message};
use tower::{Layer, ServiceExt};

use crate::provider_arg::Provider;
use crate::show::print_json_line;

/// Talks to a real model server: sends PROMPT, prints the reply.
///
/// The key is read from OPENAI_API_KEY when set (local servers need none); the
/// base URL defaults to OPENAI_BASE_URL, else api.openai.com.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The server's wire format.
    #[arg(long, value_enum)]
    provider: Provider,
    /// The model to ask.
    #[arg(long)]
    model: String,
    /// The API root, such as http://127.0.0.1:8080/v1.
    #[arg(
        long,
        env = "OPENAI_BASE_URL",
        default_value = "https://api.openai.com/v1"
    )]
    base_url: String,
    /// Stream the reply (its text is echoed to stderr as it arrives).
    #[arg(long)]
    stream: bool,
    /// Let a model without native tool calling use the tools through text.
    #[arg(long)]
    natural_tools: bool,
    /// The largest number of tokens to generate.
    #[arg(long)]
    max_tokens: Option<u32>,
    /// What to ask.
    prompt: String,
}

pub fn run(args: Args) -> ExitCode {
    if args.natural_tools {
        eprintln!(
            "error: --natural-tools needs the natural tool use layers (issues #3, #4) and the demo tools (issue #5), which this build does not have yet"
        );
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: starting the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(chat(args)) {
        Ok(messages) => {
            messages.iter().for_each(print_json_line);
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn chat(args: Args) -> Result<Vec<Message>, Error> {
    let Provider::Openai = args.provider;
    let mut config = OpenAiConfig::new(&args.base_url).model(&args.model);
    if let Ok(key) = ApiKey::from_env("OPENAI_API_KEY") {
        config = config.api_key(key);
    }
    let model = RetryLayer::default().layer(OpenAi::new(config)?);
    let mut request = ChatRequest::new(vec![Message::user(args.prompt)]).streaming(args.stream);
    request.options.max_tokens = args.max_tokens;
    let mut reply = model.oneshot(request).await?;
    let mut joiner = Joiner::new();
    let mut stderr = std::io::stderr();
    while let Some(event) = reply.next().await {
        let event = event?;
        if let Event::TextDelta(delta) = &event {
            let _ = write!(stderr, "{}", delta.text);
            let _ = stderr.flush();
        }
        joiner.push(event);
    }
    if args.stream {
        let _ = writeln!(stderr);
    }
    Ok(joiner.finish())
}

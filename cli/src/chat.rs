//! `lmstack chat`: one prompt, or an interactive session (`session`), to a real
//! model server with the demo tools (and those of MCP servers), through the
//! stack (Transcript, with `--log`) → ToolLoop → FunctionCall →
//! [NaturalToolUse] → Retry → provider; the conversation printed as `lmstack
//! demo` prints it.

use std::fs::OpenOptions;
use std::path::PathBuf;
use std::process::ExitCode;

use futures::future::LocalBoxFuture;
use lmstack::function::{FunctionCallLayer, MediaPolicy, ToolLoopLayer};
use lmstack::natural::NaturalToolUse;
use lmstack::provider::{
    ApiKey, Kind, Lowering, Provider as HttpProvider, ProviderConfig, Wire, WithWire,
};
use lmstack::retry::RetryLayer;
use lmstack::{ChatRequest, Error, Message};
use tower::util::BoxCloneSyncService;
use tower::{ServiceBuilder, ServiceExt};

use crate::input::Limit;
use crate::mcp_arg::ChatServers;
use crate::provider_arg;
use crate::session::{self, Session};
use crate::{conversation, show, tools};

/// Talks to a real model server through the provider stack.
///
/// Sends PROMPT with the demo tools (a calculator, the current time,
/// detect_boxes, which asks the same model where things are in an image, and
/// draw_boxes), runs the tool calls the model makes, and prints the
/// conversation. Without PROMPT, an interactive session (below).
///
/// The key is read from the provider's variable (OPENAI_API_KEY) when set
/// (local servers need none); the base URL defaults to OPENAI_BASE_URL, else
/// the provider's own API.
///
/// MCP servers add their tools beside the demo tools: `--mcp 'CMD ARGS…'`
/// starts one over stdio, `--mcp-url URL` reaches one over streamable HTTP (both
/// repeatable). Their tools keep their names; a name offered twice is an error
/// naming the tool, and `--mcp-prefix` names every MCP server's tools
/// SERVER__TOOL instead.
#[derive(Debug, clap::Args)]
#[command(after_help = session::COMMANDS)]
pub struct Args {
    /// The server's wire format.
    #[arg(long, value_parser = provider_arg::kind())]
    provider: Kind,
    /// The model to ask.
    #[arg(long)]
    model: String,
    /// The API root, such as http://127.0.0.1:8080/v1 (default: the
    /// provider's own API).
    #[arg(long, env = "OPENAI_BASE_URL")]
    base_url: Option<String>,
    /// Stream the reply (the model's text is printed as it arrives); the
    /// interactive session always streams.
    #[arg(long)]
    stream: bool,
    /// Let a model without native tool calling use the tools through text: the
    /// tools are described in the system prompt, with example calls in the
    /// model family's own format (Mistral, Llama, Kimi K2, DeepSeek, GLM,
    /// gpt-oss, MiniMax, Granite; Hermes for Qwen and Hermes models; tagged
    /// `<tool_call>` for others), picked from the model's name; calls are read
    /// from the model's text in that format, and results written back as
    /// `<tool_response>` blocks.
    #[arg(long)]
    natural_tools: bool,
    /// The largest number of tokens to generate per round.
    #[arg(long)]
    max_tokens: Option<u32>,
    /// The directory detect_boxes and draw_boxes may read images from (by
    /// default they read none).
    #[arg(long, value_name = "DIR")]
    files: Option<PathBuf>,
    /// The directory draw_boxes saves its annotated images in (each name is
    /// printed with the result; by default they are only shown to the model).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print the messages as JSON lines (lmstack's canonical form) instead of text.
    #[arg(long)]
    json: bool,
    /// Start from a conversation saved by `/save` (JSON lines of messages).
    #[arg(long, value_name = "FILE")]
    resume: Option<PathBuf>,
    /// Log every turn — its request and each event of its reply — as
    /// timestamped JSON lines, appended to FILE; images and other media are
    /// kept once each, by SHA-256, in the directory media/ beside FILE.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// What to ask; without it, an interactive session reads prompts from stdin.
    prompt: Option<String>,
    #[command(flatten)]
    mcp: ChatServers,
    #[command(flatten)]
    input: Limit,
}

pub fn run(args: Args) -> ExitCode {
    let provider = args.provider;
    crate::block_on(async move { provider.with_wire(Lowering::default(), Chat(args))?.await })
}

/// The conversation, over the chosen wire.
struct Chat(Args);

impl WithWire for Chat {
    type Output = LocalBoxFuture<'static, Result<(), Error>>;

    fn run<W: Wire>(self, wire: W) -> Self::Output {
        Box::pin(chat(wire, self.0))
    }
}

async fn chat<W: Wire>(wire: W, args: Args) -> Result<(), Error> {
    let base_url = args.base_url.as_deref().unwrap_or(W::DEFAULT_BASE_URL);
    let mut config = ProviderConfig::new(base_url).wire(wire).model(&args.model);
    if let Ok(key) = ApiKey::from_env(W::KEY_ENV) {
        config = config.api_key(key);
    }
    let media = match &args.files {
        Some(dir) => MediaPolicy::new().root(dir),
        None => MediaPolicy::new(),
    };
    let log = match &args.log {
        Some(path) => {
            let file = OpenOptions::new().create(true).append(true).open(path);
            let file = file.map_err(|error| {
                Error::InvalidRequest(format!("opening the log {}: {error}", path.display()))
            })?;
            Some(conversation::log(path, file))
        }
        None => None,
    };
    let history = match &args.resume {
        Some(path) => conversation::load(path, args.input)?,
        None => Vec::new(),
    };
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out).map_err(|error| {
            Error::InvalidRequest(format!("making the directory {}: {error}", out.display()))
        })?;
    }
    let provider = ServiceBuilder::new()
        .layer(RetryLayer::default())
        .service(HttpProvider::new(config)?);
    // detect_boxes asks the same model, without the tools, for the boxes.
    let vision = BoxCloneSyncService::new(provider.clone());
    let tools = tools::all(&media, vision, args.out.clone());
    let registry = args.mcp.registry(tools).await?;
    let stack = ServiceBuilder::new()
        .option_layer(log.clone())
        .layer(ToolLoopLayer::new())
        .layer(FunctionCallLayer::new(registry).media(media))
        .option_layer(
            args.natural_tools
                .then(|| NaturalToolUse::for_model(&args.model)),
        )
        .service(provider);
    let mut template = ChatRequest::new(Vec::new());
    template.options.max_tokens = args.max_tokens;
    let Some(prompt) = args.prompt else {
        let session = Session {
            stack,
            template: template.streaming(true),
            history,
            json: args.json,
            log,
            limit: args.input,
        };
        return session.run().await;
    };
    let opening = format!("user: {prompt}");
    let mut request = template.streaming(args.stream);
    request.messages = history;
    request.messages.push(Message::user(prompt));
    let reply = stack.oneshot(request).await;
    let shown = match reply {
        Ok(reply) if args.json => show::json_lines(reply).await,
        Ok(reply) => show::text(reply, &opening).await,
        Err(error) => Err(error),
    };
    if let Some(log) = &log {
        log.flush().await;
    }
    shown
}

//! `lmstack serve`: the gateway — the stack served over HTTP in the OpenAI Chat
//! Completions and Anthropic Messages formats, for any client.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use lmstack::config::Seconds;
use lmstack::provider::Secrets;
use lmstack::server::{BearerToken, ConnectionLimits, Gateway, serve as serve_router};
use lmstack::{BoxChatService, ChatRequest, Error, Reply};
use tower::{Layer, Service, ServiceExt};

use crate::demo::{self, Workspace};
use crate::descriptors;
use crate::logging::LogFormat;
use crate::serve_config::Config;

/// Serves models over HTTP to OpenAI, Anthropic and Gemini clients.
///
/// Clients post to /v1/chat/completions (OpenAI Chat Completions),
/// /v1/responses (OpenAI Responses), /v1/messages (Anthropic Messages) or
/// /v1beta/models/MODEL:generateContent (Gemini), streaming or not, naming a
/// model of the configuration (token counts where the upstream can); GET
/// /v1/models lists them, GET /health and GET /metrics (Prometheus) serve
/// operations. A request in any format is served by any model, whatever its
/// provider; a model may have several deployments and fallback models.
///
/// Without --config, the offline demo is served as the model `lmstack-demo`:
/// point an SDK at http://127.0.0.1:8080/v1 and ask it anything.
///
/// Clients must present the token in LMSTACK_SERVE_TOKEN (or the variable the
/// configuration names), or one of the configuration's named keys (each with
/// its own limits and budget), as `Authorization: Bearer`, `x-api-key` or
/// `x-goog-api-key`; with no token or key set, the gateway listens on loopback
/// addresses only, and answers no web page (see docs/serve.md). SIGTERM or
/// Ctrl-C stops taking requests and lets those in flight finish, up to --drain
/// seconds; a second one stops at once. One line per request is logged on
/// stderr (RUST_LOG filters, `info` by default); spans are exported over OTLP
/// when OTEL_EXPORTER_OTLP_ENDPOINT is set.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The configuration: TOML naming the models (see docs/serve.md).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The address to listen on [default: the configuration's, else
    /// 127.0.0.1:8080].
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// How long requests in flight may run on after SIGTERM or Ctrl-C.
    #[arg(long, value_name = "SECS", default_value = "10")]
    drain: u64,
    /// How the log lines on stderr are written: `text`, or `json` (one object
    /// a line).
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t)]
    log_format: LogFormat,
}

/// The model name of the offline demo.
const DEMO_MODEL: &str = "lmstack-demo";

/// The variable that holds the clients' token when the configuration names none.
const TOKEN_ENV: &str = "LMSTACK_SERVE_TOKEN";

impl Args {
    /// How the log lines are written.
    pub fn log_format(&self) -> LogFormat {
        self.log_format
    }
}

pub fn run(args: Args) -> ExitCode {
    crate::block_on(serve(args))
}

async fn serve(args: Args) -> Result<(), Error> {
    let config = match &args.config {
        Some(path) => Config::read(path)?,
        None => Config::default(),
    };
    let server = &config.server;
    let listen = args
        .listen
        .or(server.listen)
        .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 8080)));
    let token_env = server.token_env.as_deref().unwrap_or(TOKEN_ENV);
    // Trimmed as a presented token is, so that a stray space or newline in the
    // variable does not lock every client out.
    let token = std::env::var(token_env)
        .ok()
        .map(|token| token.trim().to_owned())
        .filter(|token| !token.is_empty());
    // The named keys, beside the single token (the key `default`).
    crate::serve_limits::check_names(&server.keys, token.is_some())
        .map_err(Error::InvalidRequest)?;
    let keys = server
        .keys
        .iter()
        .map(|key| Ok((key.name.as_str(), key.token()?)))
        .collect::<Result<Vec<_>, Error>>()?;
    let key_limits = crate::serve_limits::layer(&server.keys, &server.limits)?;
    if token.is_none() && keys.is_empty() && !listen.ip().is_loopback() {
        return Err(Error::InvalidRequest(format!(
            "refusing to listen on {listen} without a token: set {token_env}, or listen on a \
             loopback address"
        )));
    }
    let mut gateway = Gateway::new()
        .allowed_hosts(server.allowed_hosts.iter().cloned())
        .allowed_origins(server.allowed_origins.iter().cloned());
    if let Some(limit) = server.body_limit {
        gateway = gateway.body_limit(limit);
    }
    if let Some(budget) = server.body_budget {
        gateway = gateway.body_budget(budget);
    }
    if let Some(Seconds(timeout)) = server.body_timeout_secs {
        gateway = gateway.body_timeout(timeout);
    }
    if let Some(Seconds(every)) = server.keep_alive_secs {
        gateway = gateway.keep_alive((!every.is_zero()).then_some(every));
    }
    if let Some(token) = &token {
        gateway = gateway.token(BearerToken::new(token));
    }
    for (name, key) in &keys {
        gateway = gateway.key(name, BearerToken::new(key));
    }
    let mut limits = ConnectionLimits::default();
    if let Some(Seconds(timeout)) = server.header_timeout_secs {
        limits = limits.header_timeout(timeout);
    }
    if let Some(Seconds(timeout)) = server.idle_timeout_secs {
        limits = limits.idle_timeout(timeout);
    }
    let wanted = server.max_connections.unwrap_or(limits.max_connections);
    limits = limits.max_connections(descriptors::connections_within_limit(wanted));
    // Kept for as long as the demo is served: its tools read the scene there.
    let mut workspace = None;
    if config.models.is_empty() {
        let demo = DemoModel::new(workspace.insert(Workspace::new()?));
        gateway = gateway.model(DEMO_MODEL, "scripted", demo, 64);
    }
    // What no answer or log line may show: the upstreams' keys, the token.
    let mut secrets = Secrets::new();
    for token in token.iter().chain(keys.iter().map(|(_, key)| key)) {
        secrets = secrets.secret(token);
    }
    for (name, model) in &config.models {
        let (mut stack, sent) = model.stack(name).await?;
        let limits = key_limits.clone().map(|limits| limits.price(model.price));
        if let Some(limits) = &limits {
            stack = BoxChatService::new(limits.clone().layer(stack));
        }
        secrets.extend([sent]);
        gateway = gateway
            .model(name, model.upstream_name(), stack, model.max_concurrent)
            .token_counter(name, model.token_counter(name)?)
            .fallbacks(name, model.fallbacks.iter().cloned());
        if let Some(mut forward) = model.forward(name)? {
            // The fast path counts the limited keys' requests as the stack.
            if let Some(limits) = limits {
                forward = forward.limits(limits);
            }
            gateway = gateway.forward(name, forward);
        }
        for alias in &model.aliases {
            gateway = gateway.alias(alias, name);
        }
    }
    if let Some(model) = &server.default_model {
        gateway = gateway.default_model(model);
    }
    gateway = gateway.secrets(secrets);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|error| Error::InvalidRequest(format!("listening on {listen}: {error}")))?;
    let bound = listener
        .local_addr()
        .map_err(|error| Error::stage("lmstack serve", error.to_string()))?;
    let models: Vec<&str> = gateway.model_names().collect();
    eprintln!(
        "lmstack serve: listening on http://{bound} — models: {}; {}",
        models.join(", "),
        match (&token, keys.len()) {
            (Some(_), 0) => format!("clients must present the token in {token_env}"),
            (None, 0) => format!("no token set ({token_env}): loopback only"),
            (_, named) => format!(
                "clients must present one of {} keys",
                named + usize::from(token.is_some())
            ),
        }
    );
    let mut signals = Signals::new();
    let (stop, stopping) = tokio::sync::oneshot::channel::<()>();
    let stopping = async move {
        let _ = stopping.await;
    };
    let mut server = tokio::spawn(serve_router(listener, gateway.router(), limits, stopping));
    tokio::select! {
        finished = &mut server => return served(finished),
        () = signals.next() => {}
    }
    let drain = Duration::from_secs(args.drain);
    eprintln!(
        "lmstack serve: stopping; requests in flight have {drain:?} to finish (a second signal \
         stops at once)"
    );
    let _ = stop.send(());
    tokio::select! {
        finished = tokio::time::timeout(drain, &mut server) => match finished {
            Ok(finished) => served(finished),
            Err(_) => {
                eprintln!("lmstack serve: requests still in flight after {drain:?} were cut off");
                Ok(())
            }
        },
        () = signals.next() => {
            eprintln!("lmstack serve: stopped at once; requests in flight were cut off");
            Ok(())
        }
    }
}

/// The server task's outcome.
fn served(finished: Result<std::io::Result<()>, tokio::task::JoinError>) -> Result<(), Error> {
    let stage = |error: String| Error::stage("lmstack serve", error);
    finished
        .map_err(|error| stage(error.to_string()))?
        .map_err(|error| stage(error.to_string()))
}

/// SIGTERM and Ctrl-C (SIGINT), as they come.
struct Signals {
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Self {
        Signals {
            #[cfg(unix)]
            terminate: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .ok(),
        }
    }

    /// The next signal.
    async fn next(&mut self) {
        let interrupt = async {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        #[cfg(unix)]
        if let Some(terminate) = &mut self.terminate {
            tokio::select! {
                () = interrupt => {}
                _ = terminate.recv() => {}
            }
            return;
        }
        interrupt.await;
    }
}

/// The offline demo as a model: each request plays the demo's conversation
/// afresh (its scripted model ignores what it is asked).
#[derive(Clone)]
struct DemoModel {
    media: lmstack::function::MediaPolicy,
}

impl DemoModel {
    fn new(workspace: &Workspace) -> Self {
        DemoModel {
            media: workspace.media(),
        }
    }
}

impl Service<ChatRequest> for DemoModel {
    type Response = Reply;
    type Error = Error;
    type Future = BoxFuture<'static, Result<Reply, Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: ChatRequest) -> Self::Future {
        let media = self.media.clone();
        Box::pin(async move {
            let model = demo::model();
            let stack = demo::stack(&model, model.clone(), media, None)?;
            stack.oneshot(request).await
        })
    }
}

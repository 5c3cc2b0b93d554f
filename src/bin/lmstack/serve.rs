//! `lmstack serve`: the gateway — the stack served over HTTP in the OpenAI Chat
//! Completions and Anthropic Messages formats, for any client.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use lmstack::server::{BearerToken, Gateway};
use lmstack::{ChatRequest, Error, Reply};
use tower::{Service, ServiceExt};

use crate::demo::{self, Workspace};
use crate::serve_config::Config;

/// Serves models over HTTP to OpenAI and Anthropic clients.
///
/// Clients post to /v1/chat/completions (OpenAI Chat Completions) or
/// /v1/messages (Anthropic Messages), streaming or not, naming a model of the
/// configuration; GET /v1/models lists them, GET /health and GET /metrics
/// (Prometheus) serve operations. A request in either format is served by any
/// model, whatever its provider.
///
/// Without --config, the offline demo is served as the model `lmstack-demo`:
/// point an SDK at http://127.0.0.1:8080/v1 and ask it anything.
///
/// Clients must present the token in LMSTACK_SERVE_TOKEN (or the variable the
/// configuration names) as `Authorization: Bearer` or `x-api-key`; with no
/// token set, the gateway listens on loopback addresses only. SIGTERM or
/// Ctrl-C stops taking requests and lets those in flight finish, up to --drain
/// seconds.
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
}

/// The model name of the offline demo.
const DEMO_MODEL: &str = "lmstack-demo";

/// The variable that holds the clients' token when the configuration names none.
const TOKEN_ENV: &str = "LMSTACK_SERVE_TOKEN";

pub fn run(args: Args) -> ExitCode {
    crate::block_on(serve(args))
}

async fn serve(args: Args) -> Result<(), Error> {
    let config = match &args.config {
        Some(path) => Config::read(path)?,
        None => Config::default(),
    };
    let listen = args
        .listen
        .or(config.server.listen)
        .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 8080)));
    let token_env = config.server.token_env.as_deref().unwrap_or(TOKEN_ENV);
    let token = std::env::var(token_env)
        .ok()
        .filter(|token| !token.is_empty());
    if token.is_none() && !listen.ip().is_loopback() {
        return Err(Error::InvalidRequest(format!(
            "refusing to listen on {listen} without a token: set {token_env}, or listen on a \
             loopback address"
        )));
    }
    let mut gateway = Gateway::new();
    if let Some(limit) = config.server.body_limit {
        gateway = gateway.body_limit(limit);
    }
    if let Some(secs) = config.server.keep_alive_secs {
        gateway = gateway.keep_alive((secs > 0).then(|| Duration::from_secs(secs)));
    }
    if let Some(token) = &token {
        gateway = gateway.token(BearerToken::new(token));
    }
    // Kept for as long as the demo is served: its tools read the scene there.
    let mut workspace = None;
    if config.models.is_empty() {
        let demo = DemoModel::new(workspace.insert(Workspace::new()?));
        gateway = gateway.model(DEMO_MODEL, "scripted", demo, 64);
    }
    for (name, model) in &config.models {
        let stack = model.stack(name).await?;
        gateway = gateway.model(name, model.provider_name(), stack, model.max_concurrent);
    }
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
        match token {
            Some(_) => format!("clients must present the token in {token_env}"),
            None => format!("no token set ({token_env}): loopback only"),
        }
    );
    // Each SSE frame goes out as it is written: without TCP_NODELAY, Nagle's
    // algorithm holds a stream's small frames back for the client's delayed ACK
    // (some 40 ms each).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY not set: {error}");
        }
    });
    let drain = Duration::from_secs(args.drain);
    let (stopping, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = axum::serve(listener, gateway.router()).with_graceful_shutdown(async move {
        shutdown_signal().await;
        eprintln!("lmstack serve: stopping; requests in flight have {drain:?} to finish");
        let _ = stopping.send(());
    });
    let server = tokio::spawn(async move { server.await });
    let finished = async {
        server
            .await
            .map_err(|error| Error::stage("lmstack serve", error.to_string()))?
            .map_err(|error| Error::stage("lmstack serve", error.to_string()))
    };
    tokio::pin!(finished);
    tokio::select! {
        result = &mut finished => return result,
        _ = stopped => {}
    }
    match tokio::time::timeout(drain, finished).await {
        Ok(result) => result,
        Err(_) => {
            eprintln!("lmstack serve: requests still in flight after {drain:?} were cut off");
            Ok(())
        }
    }
}

/// SIGTERM, or Ctrl-C.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = interrupt => {}
                    _ = terminate.recv() => {}
                }
            }
            Err(_) => {
                let _ = interrupt.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
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

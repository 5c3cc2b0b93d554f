//! # lmstack
//!
//! Composable [`tower`] layers for LLM message pipelines.
//!
//! A Rust service builds one stack per provider — for example
//! `ToolLoop → FunctionCall → NaturalToolUse → provider` — and calls it with a
//! [`ChatRequest`]. Every stage is a `Service<ChatRequest, Response = Reply>`;
//! a [`Reply`] is a stream of [`Event`]s that [`Reply::collect`] folds into
//! [`Message`]s. Every layer works in streaming and non-streaming mode from one
//! core: a pure state machine run by the generic driver in [`service`].
//!
//! ```
//! use lmstack::testing::ScriptedModel;
//! use lmstack::{ChatRequest, Message};
//! use tower::ServiceExt;
//!
//! # futures::executor::block_on(async {
//! let model = ScriptedModel::new().reply("Hi! How can I help?");
//! let request = ChatRequest::new(vec![Message::user("Hello")]).streaming(true);
//! let messages = model.oneshot(request).await?.collect().await?;
//! assert_eq!(messages, vec![Message::assistant("Hi! How can I help?")]);
//! # Ok::<(), lmstack::Error>(())
//! # }).unwrap();
//! ```
//!
//! Modules:
//! - [`message`]: the canonical message model, streaming events and the joiner;
//! - [`service`]: the request, the reply and the state-machine driver;
//! - [`natural`]: tool calls as text for models without native tool calling —
//!   the parser, the transformer and the `NaturalToolUse` layer;
//! - [`function`]: tools, the function-call layer and the tool loop (feature
//!   `function`, on by default);
//! - [`store`]: media stores — images, documents and audio kept once, by
//!   content address, and named by reference in stored conversations;
//! - [`transcript`]: a layer that records conversations as JSON lines, written on
//!   a thread of its own behind a bounded queue, and a reader for them;
//! - [`provider`]: the wire layer (SSE, the shared body decoder, HTTP, typed
//!   errors) and the provider adapters;
//! - [`server`]: what serving the stack to clients of other wire formats
//!   shares (call ids that carry call metadata through clients);
//! - [`config`]: a model described by configuration — its
//!   provider chosen at run time — and the stack built of it (a provider
//!   feature);
//! - [`retry`]: a layer that retries any model call failing before its first
//!   event (feature `retry`, on by default);
//! - [`deploy`]: one model served by several deployments — least in-flight
//!   choice, session affinity, a circuit breaker each, and fallback before the
//!   first event;
//! - [`testing`]: a scripted model, the replay of a transcript, and helpers to
//!   unit-test your own middleware.
//!
//! The `lmstack` command line (each stage on stdin/stdout, an offline demo,
//! and `lmstack serve`, the gateway) is the crate `lmstack-cli`:
//! `cargo install lmstack-cli`.
//!
//! # Features
//!
//! The defaults are what most services need — the OpenAI-compatible provider,
//! tool execution and retries, over rustls — and nothing of a command line or
//! a server.
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `openai` | yes | OpenAI Chat Completions and compatible servers (vLLM, llama.cpp, Ollama, GLM, Groq): `provider::openai_chat`; enables `http` |
//! | `openai-responses` | | OpenAI Responses (`POST /v1/responses`): `provider::openai_responses`; enables `http` |
//! | `anthropic` | | Anthropic Messages: `provider::anthropic`; enables `http` |
//! | `gemini` | | Google Gemini's generateContent API: `provider::gemini`; enables `http` |
//! | `http` | through `openai` | the HTTP transport the providers share (on `reqwest`): `provider::transport`, `provider::Provider` |
//! | `rustls-aws-lc` | yes | TLS for https URLs by rustls, its cryptography from aws-lc-rs (reqwest's own default) |
//! | `rustls-ring` | | TLS by rustls, its cryptography from ring instead of aws-lc-rs. Alone (without the two others), and unless the application installed a crypto provider for rustls, it makes ring the process's default provider when lmstack builds its first HTTP client (reqwest takes the process's) |
//! | `native-tls` | | the platform's TLS (OpenSSL on Linux, Secure Transport on macOS, SChannel on Windows); chosen over rustls when both are enabled |
//! | `function` | yes | tools, the function-call layer and the tool loop: [`function`] |
//! | `retry` | yes | the retry layer: [`retry`] |
//! | `mcp` | | MCP servers' tools as a tool source: `function::mcp` (on rmcp, stdio servers and streamable HTTP, with the TLS chosen above); enables `function` |
//! | `server` | | the stack served over HTTP in the OpenAI and Anthropic formats: `server::Gateway`, `server::serve` (axum and hyper); the limits per client key: `limit`; enables `openai` and `anthropic` |
//! | `redis` | | the limits' counters in Redis, shared by gateway replicas: `limit::RedisLimitStore` (the `redis` crate on tokio); enables `server` |
//!
//! The TLS features apply to every HTTP client of the crate (the providers'
//! transport and MCP's client share one `reqwest`). To use another backend
//! than the default, turn the defaults off and name it:
//!
//! ```toml
//! [dependencies]
//! lmstack = { version = "0.1", default-features = false, features = ["openai", "function", "retry", "rustls-ring"] }
//! ```
//!
//! With `http` but no TLS feature the crate builds, and requests to `http://`
//! URLs (a local model server) work; an `https://` URL is refused before
//! anything is sent, with an error that names the features to enable.

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod attempt;
#[cfg(any(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic",
    feature = "gemini"
))]
pub mod config;
pub mod deploy;
mod error;
#[cfg(feature = "function")]
pub mod function;
#[cfg(feature = "http")]
mod gen_ai;
#[cfg(feature = "server")]
pub mod limit;
pub mod message;
pub mod natural;
pub mod provider;
#[cfg(feature = "retry")]
pub mod retry;
mod schema;
pub mod server;
pub mod service;
pub mod store;
pub mod testing;
mod text;
#[cfg(any(feature = "http", feature = "mcp"))]
mod tls;
pub mod transcript;
mod validation;

pub use error::{BoxError, Error};

/// The README's examples, compiled and run as doctests (they use the function
/// layer).
#[cfg(all(doctest, feature = "function"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// docs/guide.md's examples, compiled and run as doctests (they touch every
/// part: tools, MCP, the gateway, each wire).
#[cfg(all(
    doctest,
    feature = "function",
    feature = "mcp",
    feature = "server",
    feature = "anthropic",
    feature = "gemini"
))]
#[doc = include_str!("../docs/guide.md")]
struct GuideDoctests;
pub use message::{
    CacheControl, CacheTtl, CallDetails, Citation, CitationSource, ContentBlock, DocumentLocation,
    Event, FinishReason, InvalidCall, InvalidCallKind, Joiner, LocationUnit, Media, MediaRef,
    MediaSource, Message, Metadata, ReasoningDelta, Role, TextDelta, TextSpan, ToolCall,
    ToolCallDelta, ToolResult, Usage,
};
pub use service::{
    BoxChatService, ChatOptions, ChatRequest, CodeExecution, NativeTool, Reply, ResponseFormat,
    ServerTool, SessionKey, ToolChoice, ToolSpec, UserLocation, WebSearch,
};

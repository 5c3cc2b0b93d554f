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
//!   event (feature `retry`, on by default through `cli`);
//! - [`testing`]: a scripted model, the replay of a transcript, and helpers to
//!   unit-test your own middleware.

#![warn(missing_docs)]

#[cfg(any(feature = "openai", feature = "anthropic", feature = "gemini"))]
pub mod config;
mod error;
#[cfg(feature = "function")]
pub mod function;
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
pub mod transcript;

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
    CallDetails, ContentBlock, Event, FinishReason, InvalidCall, InvalidCallKind, Joiner, Media,
    MediaRef, MediaSource, Message, Metadata, ReasoningDelta, Role, TextDelta, ToolCall,
    ToolCallDelta, ToolResult, Usage,
};
pub use service::{BoxChatService, ChatOptions, ChatRequest, Reply, ToolChoice, ToolSpec};

//! Serving the stack to clients of other wire formats: the pieces a gateway
//! (`lmstack serve`) puts between a client's format and a stack, pure and
//! shared by every served format. Each format's server half (`decode`, `encode`)
//! lives in its wire's unit, beside its lowering and lifting, in
//! [`provider`](crate::provider).
//!
//! - [`sealed_ids`]: tool-call metadata (Gemini's thought signatures) carried
//!   through clients inside the call's id;
//! - [`BearerToken`]: the access check, in constant time;
//! - [`Metrics`]: what was served, in the Prometheus text format;
//! - `ResponseStore` (feature `server`): the conversations a Responses API
//!   client continues by `previous_response_id`, in memory by default;
//! - `Forward` (feature `server`): a model's upstream, to which the gateway
//!   forwards same-wire requests as they came (the fast path);
//! - `Gateway` (feature `server`): stacks by model name, served over HTTP in
//!   the OpenAI Chat Completions, OpenAI Responses (feature
//!   `openai-responses`), Anthropic Messages and (feature `gemini`) Gemini
//!   `generateContent` formats, as an axum router;
//! - `serve` (feature `server`): a router served on a listener within
//!   [`ConnectionLimits`]: timeouts on request heads and idle connections, and
//!   a cap on open connections.

#[cfg(feature = "server")]
mod admit;
#[cfg(feature = "server")]
mod answer;
mod auth;
#[cfg(feature = "server")]
mod coalesce;
#[cfg(feature = "server")]
mod connections;
#[cfg(feature = "server")]
mod extras;
#[cfg(feature = "server")]
mod fallback;
#[cfg(feature = "server")]
mod fit;
#[cfg(feature = "server")]
mod format;
#[cfg(feature = "server")]
mod forward;
#[cfg(feature = "server")]
mod gateway;
#[cfg(all(feature = "server", feature = "gemini"))]
mod gemini_routes;
mod gen_ai_metrics;
#[cfg(feature = "server")]
mod guard;
mod metrics;
#[cfg(feature = "server")]
mod response_store;
#[cfg(all(feature = "server", feature = "openai-responses"))]
mod responses;
pub mod sealed_ids;
mod status;
#[cfg(feature = "server")]
mod tap;

pub use auth::BearerToken;
#[cfg(feature = "server")]
pub use connections::{ConnectionLimits, serve};
#[cfg(feature = "server")]
pub use fit::{Fit, FitLayer, OptionsWire};
#[cfg(feature = "server")]
pub use forward::Forward;
#[cfg(feature = "server")]
pub use gateway::Gateway;
pub use metrics::{GenAi, InFlight, Metrics};
#[cfg(feature = "server")]
pub use response_store::{MemoryResponseStore, ResponseStore, StoreFuture};

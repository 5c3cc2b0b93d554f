//! `lmstack::provider`: each wire format in its own directory (`openai_chat/`,
//! `anthropic/`, `gemini/`) with its directions — `lower`, `lift`, `http` (the
//! client over loopback), `llmock` (faults injected by a mock provider; ignored
//! without one), `fixtures`, and `serve` (the server half: decode and encode) —
//! and what every wire shares: the SSE codec, tool results' media, faults and
//! hostile bytes, credentials kept out of errors.
//!
//! One test binary; the modules that need a feature gate themselves on it.

#[path = "../common/regressions.rs"]
mod regressions;

#[cfg(feature = "http")]
#[path = "../common/mod.rs"]
mod common;

mod anthropic {
    mod caching;
    mod http;
    mod lift;
    mod llmock;
    mod lower;
    mod serve;
}

mod gemini {
    mod http;
    mod lift;
    mod llmock;
    mod lower;
    mod serve;
}

mod openai_responses {
    mod http;
    mod lift;
    mod lower;
    mod serve;
}

mod openai_chat {
    mod fixtures;
    mod http;
    mod lift;
    mod llmock;
    mod lower;
    mod serve;
}

#[cfg(all(feature = "openai", feature = "anthropic"))]
mod allocations;
#[cfg(feature = "http")]
mod citations;
#[cfg(feature = "openai")]
mod faults;
#[cfg(feature = "openai")]
mod fuzz;
mod interleaved;
#[cfg(all(feature = "openai", feature = "anthropic", feature = "gemini"))]
mod refused;
#[cfg(all(feature = "openai", feature = "anthropic"))]
mod reply_extras;
#[cfg(feature = "openai")]
mod secrets;
#[cfg(all(feature = "openai", feature = "anthropic", feature = "gemini"))]
mod server_tools;
mod sse;
#[cfg(feature = "openai")]
mod tls;
mod tool_result_media;

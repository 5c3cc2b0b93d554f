//! `lmstack::function`: tools and their registry, the function layer (calls run
//! concurrently, limited, cancelled), the tool loop, tools' media and faults,
//! work with effects never repeated, and MCP servers as a tool source (`mcp/`;
//! the tests on the real server-everything are ignored without it).
//!
//! One test binary; the modules that need a feature gate themselves on it.

#[cfg(feature = "function")]
#[path = "../common/regressions.rs"]
mod regressions;

#[cfg(feature = "http")]
#[path = "../common/mod.rs"]
mod common;

#[cfg(not(feature = "http"))]
#[path = "../common/without_providers.rs"]
mod common;

#[cfg(feature = "function")]
mod effects;
mod function_call;
mod media;
mod tool_context;
mod tool_faults;
mod tool_loop;
mod tools;

mod mcp {
    mod everything;
    mod http;
    mod providers;
}

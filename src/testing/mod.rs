//! Helpers to unit-test middleware built on lmstack: a scripted model service,
//! ways to cut text into deltas, checks that both modes agree
//! ([`collect_both`] compares messages; [`assert_modes_agree`] the whole
//! non-streaming contract, over several cuts), and the replay of a recorded
//! [transcript](crate::transcript).
//!
//! ```
//! use lmstack::testing::{Chunking, ScriptedModel, collect_both};
//! use lmstack::{ChatRequest, Message};
//!
//! # futures::executor::block_on(async {
//! // Any stack over a scripted model; here the model alone.
//! let make = || ScriptedModel::new().chunking(Chunking::Chars).reply("¡Hola!");
//! let (whole, streamed) = collect_both(make, ChatRequest::new(vec![Message::user("hi")]))
//!     .await
//!     .unwrap();
//! assert_eq!(whole, streamed);
//! # });
//! ```

mod chunking;
mod modes;
mod replay;
mod scripted;

pub use chunking::Chunking;
pub use modes::{assert_modes_agree, collect_both};
pub use replay::replay;
pub use scripted::{ScriptedModel, Turn, stream_messages};

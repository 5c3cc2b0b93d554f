//! Helpers to unit-test middleware built on lmstack: a scripted model service,
//! ways to cut text into deltas, a check that both modes agree, and the replay of
//! a recorded [transcript](crate::transcript).
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
mod replay;
mod scripted;

pub use chunking::Chunking;
pub use replay::replay;
pub use scripted::{ScriptedModel, Turn, stream_messages};

use tower::{Service, ServiceExt};

use crate::{ChatRequest, Error, Message, Reply};

/// Runs `request` once in non-streaming and once in streaming mode, each time on a
/// fresh service from `make`, and returns both replies as messages
/// `(non_streaming, streaming)`. A layer whose core is shared between the modes
/// gives equal lists.
pub async fn collect_both<S, F>(
    mut make: F,
    request: ChatRequest,
) -> Result<(Vec<Message>, Vec<Message>), Error>
where
    F: FnMut() -> S,
    S: Service<ChatRequest, Response = Reply>,
    S::Error: Into<Error>,
{
    let mut run = async |stream: bool| -> Result<Vec<Message>, Error> {
        let mut request = request.clone();
        request.options.stream = stream;
        let reply = make().oneshot(request).await.map_err(Into::into)?;
        reply.collect().await
    };
    let whole = run(false).await?;
    let streamed = run(true).await?;
    Ok((whole, streamed))
}

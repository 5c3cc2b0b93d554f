//! `replay`: a scripted model that plays a recorded transcript.

use std::io::BufRead;

use super::scripted::{ScriptedModel, Turn};
use crate::Error;
use crate::transcript::{self, Exchange};

impl From<&Exchange> for Turn {
    /// The exchange as a scripted turn: its events, then its error if it had one (an
    /// error with no event before it replays as a failed call).
    fn from(exchange: &Exchange) -> Turn {
        match &exchange.error {
            Some(message) if exchange.events.is_empty() => Turn::Fail(message.clone()),
            Some(message) => Turn::Break(exchange.events.clone(), message.clone()),
            None => Turn::Events(exchange.events.clone()),
        }
    }
}

/// A model that replays a transcript written by
/// [`TranscriptLayer`](crate::transcript::TranscriptLayer): the n-th request gets
/// the n-th recorded reply, streamed as recorded in streaming mode, joined in
/// non-streaming mode. The [`ScriptedModel`] records the requests it receives, to
/// compare with those of [`transcript::read`].
///
/// A transcript with records missing (a `dropped` line) is refused: its replies
/// could be cut short, or answer the wrong requests.
///
/// ```
/// use lmstack::testing;
/// use lmstack::{ChatRequest, Message};
/// use tower::ServiceExt;
///
/// # futures::executor::block_on(async {
/// let transcript = r#"
/// {"at":"2025-06-01T09:30:00.125Z","exchange":1,"kind":"request","request":{"messages":[{"type":"text","role":"user","text":"Hi"}]}}
/// {"at":"2025-06-01T09:30:00.311Z","exchange":1,"kind":"event","event":{"type":"text_delta","text":"Hello!"}}
/// {"at":"2025-06-01T09:30:00.342Z","exchange":1,"kind":"end"}
/// "#;
/// let model = testing::replay(transcript.as_bytes())?;
/// let request = ChatRequest::new(vec![Message::user("Hi")]);
/// let reply = model.oneshot(request).await?.collect().await?;
/// assert_eq!(reply, vec![Message::assistant("Hello!")]);
/// # Ok::<(), lmstack::Error>(())
/// # }).unwrap();
/// ```
pub fn replay(reader: impl BufRead) -> Result<ScriptedModel, Error> {
    let (exchanges, missing) = transcript::read_with_gaps(reader)?;
    if missing > 0 {
        return Err(Error::stage(
            "replay",
            format!(
                "the transcript lacks {missing} records (see its `dropped` lines); \
                 replaying it would give wrong replies"
            ),
        ));
    }
    Ok(exchanges
        .iter()
        .fold(ScriptedModel::new(), |model, exchange| {
            model.turn(Turn::from(exchange))
        }))
}

//! The lines of a transcript, and what a recording does when its writer falls
//! behind.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::message::Event;
use crate::service::ChatRequest;

/// One line of a transcript.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// When the record was made (RFC 3339, UTC, milliseconds); for a `dropped`
    /// line, when the first of the missing records was lost.
    #[serde(with = "rfc3339")]
    pub at: SystemTime,
    /// The exchange it belongs to, counted from 1 per layer; 0 for a `dropped`
    /// line, which belongs to no one exchange.
    pub exchange: u64,
    /// What happened.
    #[serde(flatten)]
    pub record: Record,
}

/// What an [`Entry`] records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    /// A request, as the inner service received it.
    Request {
        /// The request (boxed: an event's record, the common one, stays
        /// small).
        request: Box<ChatRequest>,
    },
    /// One event of the reply.
    Event {
        /// The event.
        event: Event,
    },
    /// The call or the reply failed; nothing follows.
    Error {
        /// The error, as text.
        message: String,
    },
    /// The reply ended normally.
    End,
    /// Records are missing here: dropped because the writer was behind
    /// ([`OnFull::Drop`]), or lost to a failed write.
    Dropped {
        /// How many.
        records: u64,
    },
}

/// What a recording does when the writer's queue is full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnFull {
    /// Wait for room: the recording call or reply returns `Pending` until the
    /// writer takes a record, and is woken then. Nothing is lost; a slow writer
    /// slows the conversation.
    #[default]
    BackPressure,
    /// Drop the record without waiting: it is counted
    /// ([`TranscriptLayer::dropped`](super::TranscriptLayer::dropped)), reported with `tracing::warn!`, and a
    /// `dropped` line in the transcript marks the gap. The conversation never waits
    /// for the writer.
    Drop,
}

/// `SystemTime` as RFC 3339 text.
mod rfc3339 {
    use std::time::SystemTime;

    use serde::{Deserialize, Deserializer, Serializer, de};

    pub(super) fn serialize<S: Serializer>(at: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&humantime::format_rfc3339_millis(*at))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        humantime::parse_rfc3339_weak(&text).map_err(de::Error::custom)
    }
}

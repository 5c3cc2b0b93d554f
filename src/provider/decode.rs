//! Response bodies → replies: a provider's pure body decoder, driven over the
//! bytes of an HTTP body in either mode.
//!
//! A provider describes its wire format once, as a [`Decode`]r (bytes in, events
//! out, no IO). [`stream_reply`] runs it over a body as the bytes arrive (the
//! streaming reply); [`read_reply`] runs the same decoder over the whole body and
//! joins the events into complete messages (the non-streaming reply).

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::stream::{Stream, StreamExt};

use super::transport::ByteStream;
use crate::{Error, Event, Joiner, Reply};

/// A provider's response body decoder: a pure state machine.
pub trait Decode: Send + 'static {
    /// Takes the next bytes of the body; appends the events they complete.
    fn push(&mut self, bytes: &[u8], out: &mut Vec<Event>) -> Result<(), Error>;

    /// The body ended: appends what is still held, or says what is missing.
    fn finish(&mut self, out: &mut Vec<Event>) -> Result<(), Error>;
}

/// The streaming reply: events as the body's bytes arrive. An error (of the body
/// or of the decoder) ends it after the events decoded before it.
pub fn stream_reply<D: Decode>(body: ByteStream, decoder: D) -> Reply {
    Reply::from_stream(EventStream {
        body,
        decoder,
        out: VecDeque::new(),
        scratch: Vec::new(),
        error: None,
        ended: false,
    })
}

/// The non-streaming reply: the whole body through the same decoder, joined into
/// complete messages (and the finish reason).
pub async fn read_reply<D: Decode>(mut body: ByteStream, mut decoder: D) -> Result<Reply, Error> {
    let mut events = Vec::new();
    while let Some(bytes) = body.next().await {
        decoder.push(&bytes?, &mut events)?;
    }
    decoder.finish(&mut events)?;
    Ok(Reply::from_events(Joiner::join_events(events)))
}

struct EventStream<D> {
    body: ByteStream,
    decoder: D,
    out: VecDeque<Event>,
    scratch: Vec<Event>,
    error: Option<Error>,
    ended: bool,
}

impl<D> Unpin for EventStream<D> {}

impl<D: Decode> Stream for EventStream<D> {
    type Item = Result<Event, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(event) = this.out.pop_front() {
                return Poll::Ready(Some(Ok(event)));
            }
            if let Some(error) = this.error.take() {
                return Poll::Ready(Some(Err(error)));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            let step = match this.body.poll_next_unpin(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(bytes))) => this.decoder.push(&bytes, &mut this.scratch),
                Poll::Ready(Some(Err(error))) => Err(error),
                Poll::Ready(None) => {
                    this.ended = true;
                    this.decoder.finish(&mut this.scratch)
                }
            };
            this.out.extend(this.scratch.drain(..));
            if let Err(error) = step {
                this.ended = true;
                this.error = Some(error);
            }
        }
    }
}

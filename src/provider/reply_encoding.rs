//! What every served wire's reply encoder shares: a reply's items in — `Ok`
//! events, or the `Err` that ends a failed reply — and nothing written after
//! the end or the error.

use bytes::Bytes;

use crate::Error;
use crate::message::Event;
use crate::service::{Machine, Output};

/// A wire's reply encoder (the server half's outward direction): canonical
/// events → the wire's response bytes. Every `EncodeReply` is the [`Machine`]
/// a gateway runs over a reply's items: an event goes to
/// [`event`](EncodeReply::event), the error that ends a reply to
/// [`fail`](EncodeReply::fail), the end of the reply to
/// [`end`](EncodeReply::end) — and nothing after the reply
/// [`ended`](EncodeReply::ended).
pub trait EncodeReply: Send + 'static {
    /// Whether the reply is over: ended, or failed.
    fn ended(&self) -> bool;
    /// Writes one event.
    fn event(&mut self, event: Event, out: &mut Output<Bytes>) -> Result<(), Error>;
    /// Writes the error that ends the reply; the reply is over.
    fn fail(&mut self, error: &Error, out: &mut Output<Bytes>);
    /// Writes the end of the reply; the reply is over.
    fn end(&mut self, out: &mut Output<Bytes>) -> Result<(), Error>;
}

impl<E: EncodeReply> Machine for E {
    type In = Result<Event, Error>;
    type Out = Bytes;

    fn push(&mut self, item: Result<Event, Error>, out: &mut Output<Bytes>) -> Result<(), Error> {
        match item {
            _ if self.ended() => Ok(()),
            Ok(event) => self.event(event, out),
            Err(error) => {
                self.fail(&error, out);
                Ok(())
            }
        }
    }

    fn finish(&mut self, out: &mut Output<Bytes>) -> Result<(), Error> {
        if self.ended() {
            return Ok(());
        }
        self.end(out)
    }
}

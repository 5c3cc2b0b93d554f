//! The response of every stage: a stream of events.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::{BoxStream, Stream, StreamExt};

use crate::error::Error;
use crate::message::{Event, Joiner, Message};

/// A model reply: a [`Stream`] of `Result<Event, Error>`.
///
/// In streaming mode it carries deltas as they arrive; in non-streaming mode it
/// carries complete messages, already in memory. An `Err` item ends the reply.
/// [`Reply::collect`] folds either into messages.
///
/// ```
/// # futures::executor::block_on(async {
/// use lmstack::{Event, Message, Reply};
/// let reply = Reply::from_events([Event::text("Hel"), Event::text("lo")]);
/// assert_eq!(reply.collect().await.unwrap(), vec![Message::assistant("Hello")]);
/// # });
/// ```
pub struct Reply {
    inner: Inner,
}

enum Inner {
    Ready(std::vec::IntoIter<Result<Event, Error>>),
    Streaming(BoxStream<'static, Result<Event, Error>>),
}

impl Reply {
    /// A reply of complete messages (the non-streaming form).
    pub fn from_messages(messages: impl IntoIterator<Item = Message>) -> Self {
        Self::from_events(messages.into_iter().map(Event::from))
    }

    /// A reply of events that are all known already.
    pub fn from_events(events: impl IntoIterator<Item = Event>) -> Self {
        Self::from_results(events.into_iter().map(Ok).collect())
    }

    /// A reply of items that are all known already; an `Err` item ends it.
    pub fn from_results(items: Vec<Result<Event, Error>>) -> Self {
        Reply {
            inner: Inner::Ready(items.into_iter()),
        }
    }

    /// A reply that is only an error.
    pub fn from_error(error: Error) -> Self {
        Self::from_results(vec![Err(error)])
    }

    /// A reply whose events arrive over time.
    pub fn from_stream<S>(stream: S) -> Self
    where
        S: Stream<Item = Result<Event, Error>> + Send + 'static,
    {
        Reply {
            inner: Inner::Streaming(stream.boxed()),
        }
    }

    /// True when every item is already in memory (no waiting on IO).
    pub fn is_ready(&self) -> bool {
        matches!(self.inner, Inner::Ready(_))
    }

    /// Reads the whole reply and folds it into messages; the first error ends it.
    pub async fn collect(self) -> Result<Vec<Message>, Error> {
        let mut joiner = Joiner::new();
        self.fold_into(&mut joiner).await?;
        Ok(joiner.finish())
    }

    /// Reads the whole reply and folds it into messages, keeping the messages
    /// made before an error: the messages, and the error that ended the reply
    /// if one did. Nothing is lost — tool results whose side effects happened,
    /// the rounds a tool loop ran before it failed.
    ///
    /// ```
    /// # futures::executor::block_on(async {
    /// use lmstack::{Error, Event, Message, Reply};
    /// let reply = Reply::from_results(vec![Ok(Event::text("Hel")), Err(Error::stage("model", "cut"))]);
    /// let (messages, error) = reply.collect_partial().await;
    /// assert_eq!(messages, vec![Message::assistant("Hel")]);
    /// assert!(error.is_some());
    /// # });
    /// ```
    pub async fn collect_partial(mut self) -> (Vec<Message>, Option<Error>) {
        let mut joiner = Joiner::new();
        while let Some(item) = self.next().await {
            match item {
                Ok(event) => joiner.push(event),
                Err(error) => return (joiner.finish(), Some(error)),
            }
        }
        (joiner.finish(), None)
    }

    /// Reads the whole reply into events; the first error ends it.
    pub async fn collect_events(mut self) -> Result<Vec<Event>, Error> {
        let mut events = Vec::new();
        while let Some(item) = self.next().await {
            events.push(item?);
        }
        Ok(events)
    }

    /// Reads the whole reply and returns it in non-streaming form: its messages as
    /// `message` events, then the `finish` event if there was one. An error ends
    /// it: returned instead when nothing came before it, otherwise kept as the
    /// reply's last item, after the messages made so far (see [`Complete`]).
    ///
    /// This is the one way a non-streaming reply is built: a layer whose logic
    /// is a stream of events serves non-streaming requests with
    /// [`Complete`] of that stream, so that both modes come from the same code.
    ///
    /// ```
    /// # futures::executor::block_on(async {
    /// use lmstack::{Event, Message, Reply};
    /// let reply = Reply::from_events([Event::text("Hel"), Event::text("lo")]).complete().await.unwrap();
    /// assert!(reply.is_ready());
    /// assert_eq!(reply.collect_events().await.unwrap(), vec![Event::message(Message::assistant("Hello"))]);
    /// # });
    /// ```
    pub fn complete(self) -> Complete<Reply> {
        Complete::new(self)
    }

    /// Reads the whole reply into `joiner`; the first error ends it.
    pub async fn fold_into(mut self, joiner: &mut Joiner) -> Result<(), Error> {
        while let Some(item) = self.next().await {
            joiner.push(item?);
        }
        Ok(())
    }
}

impl Stream for Reply {
    type Item = Result<Event, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match &mut self.get_mut().inner {
            Inner::Ready(items) => Poll::Ready(items.next()),
            Inner::Streaming(stream) => stream.poll_next_unpin(cx),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.inner {
            Inner::Ready(items) => items.size_hint(),
            Inner::Streaming(stream) => stream.size_hint(),
        }
    }
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner {
            Inner::Ready(items) => f.debug_tuple("Reply::Ready").field(&items.len()).finish(),
            Inner::Streaming(_) => f.write_str("Reply::Streaming"),
        }
    }
}

/// The future of [`Reply::complete`]: reads a whole stream of events and
/// resolves to the non-streaming reply — its messages as `message` events, then
/// the `finish` event.
///
/// An error ends the stream. With nothing before it, it is the future's error
/// (the call failed); otherwise the reply holds the messages made so far, then
/// the error as its last item — so that nothing is lost (the results of tools
/// that ran, the rounds of a tool loop), exactly as a streaming consumer would
/// have seen them. [`Reply::collect_partial`] reads both.
///
/// It drives any event stream, so a layer's future can name it over the
/// layer's own stream type without boxing it.
#[must_use = "futures do nothing unless polled"]
pub struct Complete<S> {
    events: S,
    joiner: Joiner,
}

impl<S> Complete<S> {
    /// Completes `events`.
    pub fn new(events: S) -> Self {
        Complete {
            events,
            joiner: Joiner::new(),
        }
    }
}

impl<S> Future for Complete<S>
where
    S: Stream<Item = Result<Event, Error>> + Unpin,
{
    type Output = Result<Reply, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        while let Some(item) = ready!(this.events.poll_next_unpin(cx)) {
            match item {
                Ok(event) => this.joiner.push(event),
                Err(error) => {
                    // Nothing is lost: what came before the error stays, in front
                    // of it. With nothing before it, the error fails the call.
                    let events = std::mem::take(&mut this.joiner).finish_events();
                    if events.is_empty() {
                        return Poll::Ready(Err(error));
                    }
                    let mut items: Vec<_> = events.into_iter().map(Ok).collect();
                    items.push(Err(error));
                    return Poll::Ready(Ok(Reply::from_results(items)));
                }
            }
        }
        let events = std::mem::take(&mut this.joiner).finish_events();
        Poll::Ready(Ok(Reply::from_events(events)))
    }
}

impl<S> fmt::Debug for Complete<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Complete").finish_non_exhaustive()
    }
}

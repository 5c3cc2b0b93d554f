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
/// In streaming mode it carries deltas as they arrive. In non-streaming mode it is
/// already in memory ([`is_ready`](Reply::is_ready)) and has the same shape: **a
/// non-streaming reply is the streaming reply with each run of deltas joined into
/// one `message` event; `message`, `usage` and `finish` events are the same, in the
/// same places** ([`Joiner::join_events`]). A tool loop's reply, for one, is in
/// both modes round 1's messages, its `usage`, `finish(tool_calls)`, the results,
/// round 2's messages, its `usage`, `finish(stop)`. An `Err` item ends the reply.
/// [`Reply::collect`] folds either into messages.
///
/// A layer that only looks at or rewrites events keeps the form with
/// [`map_events`](Reply::map_events), [`filter_map_events`](Reply::filter_map_events),
/// [`inspect`](Reply::inspect), [`map_err`](Reply::map_err) and
/// [`on_end`](Reply::on_end): a ready reply stays ready, a streaming one streams.
/// (`Reply::from_stream` of a non-streaming reply would break the non-streaming
/// contract; [`testing::assert_modes_agree`](crate::testing::assert_modes_agree)
/// catches that.)
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
    /// A reply of complete messages (the non-streaming form): each a `message`
    /// event, but usage a `usage` event, as a model's reply carries it.
    ///
    /// ```
    /// use lmstack::{Event, Message, Reply};
    /// let reply = Reply::from_messages([Message::assistant("Hi"), Message::usage(3, 1)]);
    /// let events: Vec<Event> = futures::executor::block_on(reply.collect_events()).unwrap();
    /// assert!(matches!(events[..], [Event::Message { .. }, Event::Usage(_)]));
    /// ```
    pub fn from_messages(messages: impl IntoIterator<Item = Message>) -> Self {
        Self::from_events(messages.into_iter().map(|message| match message {
            Message::Usage(usage) => Event::Usage(usage),
            other => Event::from(other),
        }))
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
    /// if one did (a tool call it cut off marked so: [`Joiner::break_off`]).
    /// Nothing is lost — tool results whose side effects happened,
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
                Err(error) => {
                    joiner.break_off();
                    return (joiner.finish(), Some(error));
                }
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

    /// Reads the whole reply and returns it in non-streaming form: each run of
    /// deltas joined into one `message` event, every other event (`message`,
    /// `usage`, `finish`) as it came ([`Joiner::join_events`]). An error ends it:
    /// returned instead when nothing came before it, otherwise kept as the reply's
    /// last item, after the events made so far (see [`Complete`]).
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

    /// Rewrites every event with `f`, keeping the reply's form: a ready reply is
    /// rewritten at once and stays ready; a streaming one is rewritten as it
    /// streams. This is how a plain tower layer (`map_response`) changes events
    /// without breaking the non-streaming contract. `f` sees the form of the
    /// mode — deltas when streaming, `message` events where the stream had
    /// deltas otherwise — so it should handle both, as a [`Machine`] does.
    ///
    /// [`Machine`]: crate::service::Machine
    ///
    /// ```
    /// # futures::executor::block_on(async {
    /// use lmstack::{Event, Message, Reply};
    /// let upper = |event| match event {
    ///     Event::TextDelta(mut delta) => { delta.text = delta.text.to_uppercase(); Event::TextDelta(delta) }
    ///     other => other,
    /// };
    /// let reply = Reply::from_events([Event::text("hi")]).map_events(upper);
    /// assert!(reply.is_ready());
    /// assert_eq!(reply.collect().await.unwrap(), vec![Message::assistant("HI")]);
    /// # });
    /// ```
    pub fn map_events<F>(self, mut f: F) -> Reply
    where
        F: FnMut(Event) -> Event + Send + 'static,
    {
        self.filter_map_events(move |event| Some(f(event)))
    }

    /// Rewrites every event with `f` and drops those it maps to `None`, keeping
    /// the reply's form (see [`map_events`](Reply::map_events)).
    ///
    /// ```
    /// # futures::executor::block_on(async {
    /// use lmstack::{Event, FinishReason, Reply};
    /// let reply = Reply::from_events([Event::text("hi"), Event::Usage(Default::default())])
    ///     .filter_map_events(|event| (!matches!(event, Event::Usage(_))).then_some(event));
    /// assert_eq!(reply.collect_events().await.unwrap(), vec![Event::text("hi")]);
    /// # });
    /// ```
    pub fn filter_map_events<F>(self, mut f: F) -> Reply
    where
        F: FnMut(Event) -> Option<Event> + Send + 'static,
    {
        self.adapt(move |item| match item? {
            Ok(event) => f(event).map(Ok),
            Err(error) => Some(Err(error)),
        })
    }

    /// Calls `f` with a reference to every event, keeping the reply's form (a
    /// ready reply's events are seen at once). How a layer hands values back:
    /// count into an `Arc`, or sum the `usage` events — which are the same in
    /// both modes, as are `finish` events.
    ///
    /// ```
    /// # futures::executor::block_on(async {
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use lmstack::{Event, Reply, Usage};
    /// let tokens = Arc::new(AtomicU64::new(0));
    /// let counted = tokens.clone();
    /// let usage = Usage { output_tokens: 7, ..Usage::default() };
    /// let reply = Reply::from_events([Event::text("hi"), Event::Usage(usage)]).inspect(move |event| {
    ///     if let Event::Usage(usage) = event {
    ///         counted.fetch_add(usage.output_tokens, Ordering::Relaxed);
    ///     }
    /// });
    /// reply.collect().await.unwrap();
    /// assert_eq!(tokens.load(Ordering::Relaxed), 7);
    /// # });
    /// ```
    pub fn inspect<F>(self, mut f: F) -> Reply
    where
        F: FnMut(&Event) + Send + 'static,
    {
        self.map_events(move |event| {
            f(&event);
            event
        })
    }

    /// Rewrites the error that ends the reply, if one does, keeping the reply's
    /// form.
    pub fn map_err<F>(self, mut f: F) -> Reply
    where
        F: FnMut(Error) -> Error + Send + 'static,
    {
        self.adapt(move |item| Some(item?.map_err(&mut f)))
    }

    /// Calls `f` once, when the reply has ended: with `None` after its last
    /// item, or with the error that ended it. A ready reply has ended already, so
    /// `f` runs at once; a streaming one calls it when it is read to its end. A
    /// reply dropped before its end drops `f` uncalled (a `oneshot::Sender` that
    /// `f` holds then tells its receiver so). Keeps the reply's form.
    ///
    /// ```
    /// # futures::executor::block_on(async {
    /// use lmstack::{Event, Reply};
    /// let (tell, told) = futures::channel::oneshot::channel();
    /// let reply = Reply::from_events([Event::text("hi")]).on_end(move |error| {
    ///     let _ = tell.send(error.is_none());
    /// });
    /// reply.collect().await.unwrap();
    /// assert_eq!(told.await, Ok(true));
    /// # });
    /// ```
    pub fn on_end<F>(self, f: F) -> Reply
    where
        F: FnOnce(Option<&Error>) + Send + 'static,
    {
        let mut f = Some(f);
        self.adapt(move |item| {
            let error = match &item {
                Some(Ok(_)) => return item,
                Some(Err(error)) => Some(error),
                None => None,
            };
            if let Some(f) = f.take() {
                f(error);
            }
            item
        })
    }

    /// The one adapter under the public ones: `f` sees each item, then `None`
    /// once at the end, and says what to hand on. A ready reply is adapted at
    /// once and stays ready; a streaming one as it streams.
    pub(crate) fn adapt<F>(self, mut f: F) -> Reply
    where
        F: FnMut(Option<Item>) -> Option<Item> + Send + 'static,
    {
        match self.inner {
            Inner::Ready(items) => {
                let ended = items.map(Some).chain([None]);
                Reply::from_results(ended.filter_map(f).collect())
            }
            Inner::Streaming(stream) => {
                let ended = stream.map(Some).chain(futures::stream::iter([None]));
                Reply::from_stream(ended.filter_map(move |item| std::future::ready(f(item))))
            }
        }
    }
}

/// An item of a reply.
type Item = Result<Event, Error>;

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
/// resolves to the non-streaming reply — the same events with each run of deltas
/// joined into one `message` event ([`Joiner::finish_events`]); `usage` and
/// `finish` events stay as they are, in their places.
///
/// An error ends the stream. With nothing before it, it is the future's error
/// (the call failed); otherwise the reply holds the events made so far (a tool
/// call it cut off marked so: [`Joiner::break_off`]), then
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
                    // of it (a call it cut off marked so). With nothing before it,
                    // the error fails the call.
                    this.joiner.break_off();
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

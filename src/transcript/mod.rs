//! Transcripts: a layer that records every request and reply event as JSON lines
//! with timestamps, and a reader for what it wrote. The replay of a transcript,
//! for tests without a model, is [`testing::replay`](crate::testing::replay).
//!
//! Each line is one [`Entry`]: a timestamp (taken when the record is made, not
//! when it is written), the number of the exchange (one request and its reply),
//! and what happened:
//!
//! ```json
//! {"at":"2025-06-01T09:30:00.125Z","exchange":1,"kind":"request","request":{"messages":[…],"options":{…}}}
//! {"at":"2025-06-01T09:30:00.311Z","exchange":1,"kind":"event","event":{"type":"text_delta","text":"Hel"}}
//! {"at":"2025-06-01T09:30:00.342Z","exchange":1,"kind":"end"}
//! {"at":"2025-06-01T09:30:01.002Z","exchange":2,"kind":"error","message":"scripted model: …"}
//! {"at":"2025-06-01T09:30:02.517Z","exchange":0,"kind":"dropped","records":12}
//! ```
//!
//! Events are recorded as they pass, so a streaming reply shows its timing, memory
//! stays flat, and a reply dropped half-way is recorded up to where it was read
//! (with no `end` line). A non-streaming reply stays in memory, as it came
//! ([`Reply::is_ready`]). Exchanges running at the same time interleave their
//! lines; the exchange number keeps them apart.
//!
//! # The writer runs on its own thread
//!
//! A server never blocks inside `poll`, so the layer does no IO. It hands each
//! record to a **bounded queue** ([`TranscriptLayer::capacity`] records, 1024 by
//! default); a **dedicated thread**, started by [`TranscriptLayer::new`], owns the
//! [`Write`], serialises the records to JSON and writes them. It writes what is
//! queued, then flushes the writer when the queue runs empty (or when a
//! [`flush`](TranscriptLayer::flush) waits), and sleeps when there is nothing to
//! do. Serialisation happens on that thread too, so the async side only clones the
//! event and takes a timestamp.
//!
//! Why a thread rather than a task: writing to a [`Write`] blocks, and a thread
//! works the same under any executor (tokio, another runtime, or
//! `futures::executor::block_on` as in the example below) without tying the
//! layer to one. A tokio task would need a tokio runtime wherever the layer is
//! built, and would still have to hand the blocking writes to tokio's blocking
//! pool. The cost is one parked thread per [`TranscriptLayer::new`].
//!
//! # When the writer falls behind
//!
//! When the queue is full, [`OnFull`] decides ([`TranscriptLayer::on_full`]):
//!
//! - [`OnFull::BackPressure`] (the default): nothing is lost. The recording call
//!   or reply returns `Pending` until the writer takes a record from the queue
//!   (and wakes it), so a slow disk slows the conversation instead of filling
//!   memory. An event is handed on once its record is queued.
//! - [`OnFull::Drop`]: the conversation never waits. A record that finds the queue
//!   full is dropped, counted ([`TranscriptLayer::dropped`]) and reported with
//!   `tracing::warn!`, and as soon as there is room again the transcript gets a
//!   `dropped` line saying how many records are missing at that point (exchange
//!   0: the records may belong to any exchange then in flight). Exchange numbers
//!   are given when the call is made, whether or not its records are kept, so a
//!   lost request leaves a hole in the numbering.
//!
//! Under back-pressure, a call or reply dropped while its record waits for room
//! (a future or stream dropped before it was ready) cannot wait: it queues the
//! record if there is room by then, else the record is dropped, counted and
//! marked like those of [`OnFull::Drop`].
//!
//! A write or flush that fails is reported with `tracing::warn!` and counted
//! ([`TranscriptLayer::write_errors`]); the conversation goes on. The records it
//! lost are marked by a `dropped` line before the next record that is written.
//! A failed write may leave a partial line, which [`read`] reports as an error.
//!
//! # Media by reference
//!
//! With a [`TranscriptLayer::media_store`], the writer thread puts the inline
//! media of recorded requests and message events in the store and writes
//! references (`{"type":"image","media_type":"image/png","ref":"sha256:…"}`), so
//! the image every request of a conversation repeats is stored once;
//! [`read_with_store`] reads the transcript back with its media inline. The
//! replies handed on are not changed. See [`crate::store`].
//!
//! # Flushing and shutdown
//!
//! [`TranscriptLayer::flush`] resolves when everything recorded before it has been
//! written and the writer flushed: call it before reading a transcript back, and
//! before the process exits. When the layer and every service, future and reply
//! it made are dropped, the writer writes what is still queued, flushes, closes
//! the writer and stops — on its own thread, so nothing waits for it (a process
//! that exits first may lose the end; flush first).
//!
//! # Example
//!
//! ```
//! use lmstack::testing::{self, ScriptedModel};
//! use lmstack::transcript::{SharedBuffer, TranscriptLayer};
//! use lmstack::{ChatRequest, Message};
//! use tower::{Layer, ServiceExt};
//!
//! # futures::executor::block_on(async {
//! // Record a conversation (here into memory; `TranscriptLayer::to_file` writes a file).
//! let buffer = SharedBuffer::default();
//! let recorder = TranscriptLayer::new(buffer.clone());
//! let model = recorder.layer(ScriptedModel::new().reply("Hello!"));
//! let request = ChatRequest::new(vec![Message::user("Hi")]).streaming(true);
//! let live = model.oneshot(request.clone()).await?.collect().await?;
//!
//! // The writer works on its own thread: wait until it has written everything.
//! recorder.flush().await;
//!
//! // Replay it: the same reply, without the model.
//! let replay = testing::replay(buffer.contents().as_slice())?;
//! let replayed = replay.oneshot(request).await?.collect().await?;
//! assert_eq!(live, replayed);
//! # Ok::<(), lmstack::Error>(())
//! # }).unwrap();
//! ```

mod record;
mod writer;

use std::fmt;
use std::fs::OpenOptions;
use std::future::Future;
use std::io::{self, BufRead, Write};
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, ready};

use futures::stream::{Stream, StreamExt};
use pin_project_lite::pin_project;
use tower::{Layer, Service};

use crate::service::ChatService;
use crate::store::{self, MediaStore};
use crate::{ChatRequest, Error, Event, Reply};

pub use record::{Entry, OnFull, Record};
pub use writer::Flush;
use writer::{Recorder, Sender};

/// Records the requests and replies of the service it wraps.
///
/// Records go through a bounded queue to a writer thread (see the
/// [module docs](self)). Clones of the layer, and every service they make, share
/// one recorder: the writer, its queue, the exchange count, the options and the
/// counters.
#[derive(Clone)]
pub struct TranscriptLayer {
    recorder: Arc<Recorder>,
}

impl TranscriptLayer {
    /// Records into `writer`, written on a thread of its own, with a queue of 1024
    /// records and [`OnFull::BackPressure`].
    pub fn new(writer: impl Write + Send + 'static) -> Self {
        TranscriptLayer {
            recorder: Recorder::start(Box::new(writer)),
        }
    }

    /// Records into the file at `path`, created if needed and appended to.
    pub fn to_file(path: impl AsRef<Path>) -> io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self::new(file))
    }

    /// Sets how many records the queue to the writer holds (at least 1; 1024 by
    /// default). Besides the queue, the writer holds the record it is writing, and
    /// each call or reply at most the one record it waits to queue.
    pub fn capacity(self, records: usize) -> Self {
        self.recorder.set_capacity(records);
        self
    }

    /// Sets what happens when the queue is full ([`OnFull::BackPressure`] by
    /// default).
    pub fn on_full(self, policy: OnFull) -> Self {
        self.recorder.set_on_full(policy);
        self
    }

    /// Writes media by reference: the writer thread puts every inline (base64)
    /// image, document and audio clip of the recorded requests and message
    /// events in `store`, and the transcript names it
    /// (`{"type":"image","media_type":"image/png","ref":"sha256:…"}`), so an
    /// image repeated in every request of a conversation is stored once.
    /// [`read_with_store`] reads such a transcript back with its media inline.
    ///
    /// Set it before the first call: it applies to the records the writer takes
    /// from then on. The store's IO happens on the writer thread. Media the
    /// store refuses stays inline, and is reported with `tracing::warn!` and
    /// counted in [`write_errors`](Self::write_errors). Without a store, media
    /// is written inline.
    pub fn media_store(self, store: Arc<dyn MediaStore>) -> Self {
        self.recorder.set_media_store(store);
        self
    }

    /// Resolves when every record queued before this call, and the `dropped` line
    /// for records dropped before it, has been written and the writer flushed.
    /// (Under back-pressure, a record still waiting for room is not queued yet: a
    /// flush after a conversation has been read to its end covers all of it.)
    ///
    /// A write that failed counts as done; [`write_errors`](Self::write_errors)
    /// tells. The future holds the writer open while it waits.
    pub fn flush(&self) -> Flush {
        self.recorder.flush()
    }

    /// The number of records dropped so far: by [`OnFull::Drop`], or because a
    /// call or reply was dropped while its record waited for room.
    pub fn dropped(&self) -> u64 {
        self.recorder.dropped()
    }

    /// The number of failed writes and flushes so far, and of media a
    /// [`media_store`](Self::media_store) refused.
    pub fn write_errors(&self) -> u64 {
        self.recorder.write_errors()
    }
}

impl fmt::Debug for TranscriptLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TranscriptLayer")
            .field("dropped", &self.dropped())
            .field("write_errors", &self.write_errors())
            .finish_non_exhaustive()
    }
}

impl<S> Layer<S> for TranscriptLayer {
    type Service = Transcript<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Transcript {
            inner,
            recorder: self.recorder.clone(),
        }
    }
}

/// The service made by [`TranscriptLayer`].
#[derive(Clone)]
pub struct Transcript<S> {
    inner: S,
    recorder: Arc<Recorder>,
}

impl<S> Transcript<S> {
    crate::service::inner_service_accessors!(inner: S);
}

impl<S: fmt::Debug> fmt::Debug for Transcript<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transcript")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S: ChatService> Service<ChatRequest> for Transcript<S> {
    type Response = Reply;
    type Error = Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: ChatRequest) -> Self::Future {
        let exchange = self.recorder.next_exchange();
        let mut sender = Sender::new(self.recorder.clone(), exchange);
        sender.record(Record::Request {
            request: Box::new(request.clone()),
        });
        // Usually there is room, and the request is queued in call order; if not,
        // the future queues it (or drops it, by the policy) before it polls the
        // inner call.
        sender.try_send();
        ResponseFuture {
            state: State::Calling {
                future: self.inner.call(request),
                sender: Some(sender),
            },
        }
    }
}

pin_project! {
    /// The future of [`Transcript`]: queues the request's record, then resolves to
    /// the recorded reply. A non-streaming reply is read and recorded whole first,
    /// and kept in memory as it came.
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Calling { #[pin] future: F, sender: Option<Sender> },
        Failing { sender: Sender, error: Option<Error> },
        Collecting { reply: Recorded, items: Vec<Result<Event, Error>> },
        Done,
    }
}

impl<F, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Reply, E>>,
    E: Into<Error>,
{
    type Output = Result<Reply, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Calling { future, sender } => {
                    let Some(queue) = sender.as_mut() else {
                        state.set(State::Done);
                        continue;
                    };
                    ready!(queue.poll_send(cx));
                    let result = ready!(future.poll(cx));
                    let Some(mut sender) = sender.take() else {
                        state.set(State::Done);
                        continue;
                    };
                    match result.map_err(Into::into) {
                        Ok(reply) => {
                            let recorded = Recorded::new(reply, sender);
                            if !recorded.reply.is_ready() {
                                state.set(State::Done);
                                return Poll::Ready(Ok(Reply::from_stream(recorded)));
                            }
                            state.set(State::Collecting {
                                reply: recorded,
                                items: Vec::new(),
                            });
                        }
                        Err(error) => {
                            sender.record(Record::Error {
                                message: error.to_string(),
                            });
                            state.set(State::Failing {
                                sender,
                                error: Some(error),
                            });
                        }
                    }
                }
                StateProj::Failing { sender, error } => {
                    ready!(sender.poll_send(cx));
                    let error = error.take();
                    state.set(State::Done);
                    if let Some(error) = error {
                        return Poll::Ready(Err(error));
                    }
                }
                StateProj::Collecting { reply, items } => {
                    while let Some(item) = ready!(reply.poll_next_unpin(cx)) {
                        items.push(item);
                    }
                    let items = std::mem::take(items);
                    state.set(State::Done);
                    // Keep a non-streaming reply in memory, as it came.
                    return Poll::Ready(Ok(Reply::from_results(items)));
                }
                StateProj::Done => {
                    return Poll::Ready(Err(Error::stage(
                        "transcript",
                        "the response future was polled after it completed",
                    )));
                }
            }
        }
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

/// A reply whose items are recorded as they pass. An item is handed on once its
/// record is queued (or dropped, by the policy).
struct Recorded {
    reply: Reply,
    sender: Sender,
    /// The item whose record is being queued (`Some(None)`: the end).
    held: Option<Option<Result<Event, Error>>>,
    ended: bool,
}

impl Recorded {
    fn new(reply: Reply, sender: Sender) -> Self {
        Recorded {
            reply,
            sender,
            held: None,
            ended: false,
        }
    }
}

impl Stream for Recorded {
    type Item = Result<Event, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            ready!(this.sender.poll_send(cx));
            if let Some(item) = this.held.take() {
                return Poll::Ready(item);
            }
            if this.ended {
                return Poll::Ready(None);
            }
            let item = ready!(this.reply.poll_next_unpin(cx));
            let record = match &item {
                Some(Ok(event)) => Record::Event {
                    event: event.clone(),
                },
                Some(Err(error)) => Record::Error {
                    message: error.to_string(),
                },
                None => Record::End,
            };
            this.ended = !matches!(record, Record::Event { .. });
            this.sender.record(record);
            this.held = Some(item);
        }
    }
}

/// One recorded exchange: the request and what came back.
#[derive(Clone, Debug, PartialEq)]
pub struct Exchange {
    /// The number of the exchange.
    pub number: u64,
    /// The request.
    pub request: ChatRequest,
    /// The reply's events, in order.
    pub events: Vec<Event>,
    /// The error that ended the call or the reply, if any.
    pub error: Option<String>,
    /// The reply was read to its end (or to its error).
    pub complete: bool,
    /// Records of this exchange may be missing: a `dropped` line came while it
    /// was open (after its request, before its end).
    pub lost: bool,
}

/// Reads a transcript into its exchanges, in the order of their requests.
///
/// A `dropped` line marks the exchanges open at that point as
/// [`lost`](Exchange::lost); the lines of an exchange whose request was dropped
/// are skipped. An exchange dropped whole leaves only a hole in the numbering.
pub fn read(reader: impl BufRead) -> Result<Vec<Exchange>, Error> {
    read_with_gaps(reader).map(|(exchanges, _)| exchanges)
}

/// [`read`] a transcript written with a
/// [`media_store`](TranscriptLayer::media_store), with its media by reference
/// made inline again from `store`: the requests and message events come back
/// as they were recorded, ready to be sent to any provider. A reference the
/// store cannot give (missing, corrupt) is an error naming it.
///
/// ```
/// use std::sync::Arc;
/// use lmstack::store::MemoryStore;
/// use lmstack::testing::ScriptedModel;
/// use lmstack::transcript::{self, SharedBuffer, TranscriptLayer};
/// use lmstack::{ChatRequest, ContentBlock, Message, Role};
/// use tower::{Layer, ServiceExt};
///
/// # futures::executor::block_on(async {
/// let store = Arc::new(MemoryStore::new());
/// let buffer = SharedBuffer::default();
/// let recorder = TranscriptLayer::new(buffer.clone()).media_store(store.clone());
/// let model = recorder.layer(ScriptedModel::new().reply("A cat."));
/// let image = ContentBlock::image_bytes("image/png", b"\x89PNG\r\n\x1a\n");
/// let request = ChatRequest::new(vec![Message::multimodal(Role::User, vec![image])]);
/// model.oneshot(request.clone()).await?.collect().await?;
/// recorder.flush().await;
///
/// let text = String::from_utf8(buffer.contents()).unwrap();
/// assert!(text.contains(r#""ref":"sha256:"#) && !text.contains(r#""data""#));
/// let exchanges = transcript::read_with_store(text.as_bytes(), &*store)?;
/// assert_eq!(exchanges[0].request, request);
/// # Ok::<(), lmstack::Error>(())
/// # }).unwrap();
/// ```
pub fn read_with_store(
    reader: impl BufRead,
    store: &dyn MediaStore,
) -> Result<Vec<Exchange>, Error> {
    let mut exchanges = read(reader)?;
    for exchange in &mut exchanges {
        let number = exchange.number;
        let in_exchange = |error: store::StoreError| {
            Error::stage("transcript", format!("exchange {number}: {error}"))
        };
        store::rehydrate(&mut exchange.request.messages, store).map_err(in_exchange)?;
        for event in &mut exchange.events {
            if let Event::Message { message } = event {
                store::rehydrate(std::slice::from_mut(message), store).map_err(in_exchange)?;
            }
        }
    }
    Ok(exchanges)
}

/// [`read`], and how many records the transcript says are missing.
pub(crate) fn read_with_gaps(reader: impl BufRead) -> Result<(Vec<Exchange>, u64), Error> {
    let mut exchanges: Vec<Exchange> = Vec::new();
    let mut missing: u64 = 0;
    for (number, line) in (1..).zip(reader.lines()) {
        let line = line.map_err(|error| {
            Error::stage("transcript", format!("cannot read line {number}: {error}"))
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let entry: Entry = serde_json::from_str(&line)
            .map_err(|error| Error::json(format!("transcript line {number}"), error))?;
        match entry.record {
            Record::Request { request } => {
                exchanges.push(Exchange {
                    number: entry.exchange,
                    request: *request,
                    events: Vec::new(),
                    error: None,
                    complete: false,
                    lost: false,
                });
                continue;
            }
            Record::Dropped { records } => {
                missing = missing.saturating_add(records);
                exchanges
                    .iter_mut()
                    .filter(|e| !e.complete)
                    .for_each(|e| e.lost = true);
                continue;
            }
            _ => {}
        }
        let Some(exchange) = exchanges
            .iter_mut()
            .rev()
            .find(|e| e.number == entry.exchange)
        else {
            if missing > 0 {
                // Its request was dropped.
                continue;
            }
            return Err(Error::stage(
                "transcript",
                format!(
                    "line {number} belongs to exchange {}, whose request is not recorded before it",
                    entry.exchange
                ),
            ));
        };
        match entry.record {
            Record::Event { event } => exchange.events.push(event),
            Record::Error { message } => {
                exchange.error = Some(message);
                exchange.complete = true;
            }
            Record::End => exchange.complete = true,
            Record::Request { .. } | Record::Dropped { .. } => {}
        }
    }
    Ok((exchanges, missing))
}

/// A writer into shared memory, for recording a transcript in tests.
#[derive(Clone, Debug, Default)]
pub struct SharedBuffer {
    bytes: Arc<Mutex<Vec<u8>>>,
}

impl SharedBuffer {
    /// A copy of everything written so far.
    pub fn contents(&self) -> Vec<u8> {
        self.lock().clone()
    }

    fn lock(&self) -> MutexGuard<'_, Vec<u8>> {
        self.bytes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Write for SharedBuffer {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.lock().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

//! Transcripts: a layer that records every request and reply event as JSON lines
//! with timestamps, and a reader for what it wrote. The replay of a transcript,
//! for tests without a model, is [`testing::replay`](crate::testing::replay).
//!
//! Each line is one [`Entry`]: a timestamp, the number of the exchange (one request
//! and its reply), and what happened:
//!
//! ```json
//! {"at":"2025-06-01T09:30:00.125Z","exchange":1,"kind":"request","request":{"messages":[…],"options":{…}}}
//! {"at":"2025-06-01T09:30:00.311Z","exchange":1,"kind":"event","event":{"type":"text_delta","text":"Hel"}}
//! {"at":"2025-06-01T09:30:00.342Z","exchange":1,"kind":"end"}
//! {"at":"2025-06-01T09:30:01.002Z","exchange":2,"kind":"error","message":"scripted model: …"}
//! ```
//!
//! Events are written as they pass, so a streaming reply shows its timing, memory
//! stays flat, and a reply dropped half-way is recorded up to where it was read (with
//! no `end` line). Exchanges running at the same time interleave their lines; the
//! exchange number keeps them apart.
//!
//! ```
//! use lmstack::testing::{self, ScriptedModel};
//! use lmstack::transcript::{self, TranscriptLayer};
//! use lmstack::{ChatRequest, Message};
//! use std::sync::{Arc, Mutex};
//! use tower::{Layer, ServiceExt};
//!
//! # futures::executor::block_on(async {
//! // Record a conversation (here into memory; `TranscriptLayer::to_file` writes a file).
//! let buffer = transcript::SharedBuffer::default();
//! let model = TranscriptLayer::new(buffer.clone()).layer(ScriptedModel::new().reply("Hello!"));
//! let request = ChatRequest::new(vec![Message::user("Hi")]).streaming(true);
//! let live = model.oneshot(request.clone()).await?.collect().await?;
//!
//! // Replay it: the same reply, without the model.
//! let replay = testing::replay(buffer.contents().as_slice())?;
//! let replayed = replay.oneshot(request).await?.collect().await?;
//! assert_eq!(live, replayed);
//! # Ok::<(), lmstack::Error>(())
//! # }).unwrap();
//! ```

use std::fmt;
use std::fs::OpenOptions;
use std::io::{self, BufRead, Write};
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, ready};
use std::time::SystemTime;

use futures::future::BoxFuture;
use futures::stream::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use tower::{Layer, Service};

use crate::{ChatRequest, Error, Event, Reply};

/// One line of a transcript.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// When it happened (RFC 3339, UTC, milliseconds).
    #[serde(with = "rfc3339")]
    pub at: SystemTime,
    /// The exchange it belongs to, counted from 1 per layer.
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
        /// The request.
        request: ChatRequest,
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
}

/// Records the requests and replies of the service it wraps.
///
/// Writing is synchronous, one line at a time with a flush; a write that fails is
/// reported with `tracing` and does not disturb the conversation.
#[derive(Clone)]
pub struct TranscriptLayer {
    sink: Arc<Sink>,
}

struct Sink {
    writer: Mutex<Box<dyn Write + Send>>,
    exchanges: AtomicU64,
}

impl TranscriptLayer {
    /// Records into `writer`.
    pub fn new(writer: impl Write + Send + 'static) -> Self {
        TranscriptLayer {
            sink: Arc::new(Sink {
                writer: Mutex::new(Box::new(writer)),
                exchanges: AtomicU64::new(0),
            }),
        }
    }

    /// Records into the file at `path`, created if needed and appended to.
    pub fn to_file(path: impl AsRef<Path>) -> io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self::new(file))
    }
}

impl fmt::Debug for TranscriptLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TranscriptLayer").finish_non_exhaustive()
    }
}

impl<S> Layer<S> for TranscriptLayer {
    type Service = Transcript<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Transcript {
            inner,
            sink: self.sink.clone(),
        }
    }
}

impl Sink {
    fn write(&self, exchange: u64, record: Record) {
        let entry = Entry {
            at: SystemTime::now(),
            exchange,
            record,
        };
        let written = serde_json::to_vec(&entry)
            .map_err(io::Error::from)
            .and_then(|mut line| {
                line.push(b'\n');
                let mut writer = self.lock();
                writer.write_all(&line)?;
                writer.flush()
            });
        if let Err(error) = written {
            tracing::warn!(exchange, "transcript: cannot write an entry: {error}");
        }
    }

    fn lock(&self) -> MutexGuard<'_, Box<dyn Write + Send>> {
        self.writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The service made by [`TranscriptLayer`].
#[derive(Clone)]
pub struct Transcript<S> {
    inner: S,
    sink: Arc<Sink>,
}

impl<S> Transcript<S> {
    crate::service::inner_service_accessors!();
}

impl<S: fmt::Debug> fmt::Debug for Transcript<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transcript")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S> Service<ChatRequest> for Transcript<S>
where
    S: Service<ChatRequest, Response = Reply>,
    S::Error: Into<Error>,
    S::Future: Send + 'static,
{
    type Response = Reply;
    type Error = Error;
    type Future = BoxFuture<'static, Result<Reply, Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: ChatRequest) -> Self::Future {
        let sink = self.sink.clone();
        let exchange = sink.exchanges.fetch_add(1, Ordering::Relaxed) + 1;
        sink.write(
            exchange,
            Record::Request {
                request: request.clone(),
            },
        );
        let reply = self.inner.call(request);
        Box::pin(async move {
            let reply = match reply.await.map_err(Into::into) {
                Ok(reply) => reply,
                Err(error) => {
                    let message = error.to_string();
                    sink.write(exchange, Record::Error { message });
                    return Err(error);
                }
            };
            let ready = reply.is_ready();
            let recorded = Recorded {
                reply,
                sink,
                exchange,
                ended: false,
            };
            if ready {
                // Keep a non-streaming reply in memory, as it came.
                Ok(Reply::from_results(recorded.collect().await))
            } else {
                Ok(Reply::from_stream(recorded))
            }
        })
    }
}

/// A reply whose items are written as they pass.
struct Recorded {
    reply: Reply,
    sink: Arc<Sink>,
    exchange: u64,
    ended: bool,
}

impl Stream for Recorded {
    type Item = Result<Event, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
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
        this.sink.write(this.exchange, record);
        Poll::Ready(item)
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
}

/// Reads a transcript into its exchanges, in the order of their requests.
pub fn read(reader: impl BufRead) -> Result<Vec<Exchange>, Error> {
    let mut exchanges: Vec<Exchange> = Vec::new();
    for (number, line) in (1..).zip(reader.lines()) {
        let line = line.map_err(|error| {
            Error::stage("transcript", format!("cannot read line {number}: {error}"))
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let entry: Entry = serde_json::from_str(&line)
            .map_err(|error| Error::json(format!("transcript line {number}"), error))?;
        if let Record::Request { request } = entry.record {
            exchanges.push(Exchange {
                number: entry.exchange,
                request,
                events: Vec::new(),
                error: None,
                complete: false,
            });
            continue;
        }
        let exchange = exchanges
            .iter_mut()
            .rev()
            .find(|e| e.number == entry.exchange)
            .ok_or_else(|| {
                Error::stage(
                    "transcript",
                    format!(
                        "line {number} belongs to exchange {}, whose request is not recorded before it",
                        entry.exchange
                    ),
                )
            })?;
        match entry.record {
            Record::Event { event } => exchange.events.push(event),
            Record::Error { message } => {
                exchange.error = Some(message);
                exchange.complete = true;
            }
            Record::End => exchange.complete = true,
            Record::Request { .. } => {}
        }
    }
    Ok(exchanges)
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

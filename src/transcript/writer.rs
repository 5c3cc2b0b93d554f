//! The recorder: a bounded queue of records between the async side and a writer
//! thread that owns the `std::io::Write`.
//!
//! Everything the two sides share sits behind one mutex, which is only ever held to
//! move a record, count, or register a waker — never across IO or serialisation.
//! The writer thread sleeps on a condition variable when it has nothing to do.
//!
//! Progress is counted in *units*: every queued record is one, and so is every gap
//! (a run of records dropped while the queue was full), which becomes one `dropped`
//! line. Units are written in the order they were queued, so "everything queued
//! before `flush()`" is a number, and a flush waits for the writer to have written
//! and flushed that many.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::SystemTime;

use super::record::{Entry, OnFull, Record};
use crate::message::{Event, Message};
use crate::store::{self, MediaStore};

/// The default capacity of the queue, in records.
pub(super) const DEFAULT_CAPACITY: usize = 1024;

/// A line buffer that grew past this is given back after use.
const LINE_KEEP: usize = 1 << 20;

/// What the async side and the writer thread share.
struct Shared {
    state: Mutex<State>,
    /// The writer thread waits here for work.
    work: Condvar,
    /// Records dropped under [`OnFull::Drop`] (or by a reply dropped while its
    /// record waited for room).
    dropped: AtomicU64,
    /// Failed writes and flushes, and records that could not be written at all.
    write_errors: AtomicU64,
}

struct State {
    /// Records waiting for the writer; never longer than `capacity` (unless the
    /// capacity was lowered since).
    queue: VecDeque<Item>,
    capacity: usize,
    on_full: OnFull,
    /// Records dropped since the last one was queued; the next queued record (or
    /// the idle writer) turns it into a `dropped` line.
    gap: Option<Gap>,
    /// Units handed to the writer so far.
    queued: u64,
    /// Units written (or given up on) and flushed so far.
    done: u64,
    /// Tasks waiting for room, by sender id; at most one per live sender.
    room_waiters: Vec<(u64, Waker)>,
    /// Flushes waiting, by id, with the unit count they wait for.
    flush_waiters: Vec<(u64, u64, Waker)>,
    /// Every handle of the async side is gone: drain the queue and stop.
    closed: bool,
    /// The writer thread is gone (it could not start, or the writer panicked):
    /// records are counted as write errors at once, nothing waits.
    dead: bool,
    /// Where the writer puts inline media, written by reference.
    media_store: Option<Arc<dyn MediaStore>>,
}

/// A run of records missing from the transcript.
#[derive(Clone, Copy, Debug)]
struct Gap {
    records: u64,
    /// When the first of them was lost.
    since: SystemTime,
}

impl Gap {
    fn new(records: u64) -> Self {
        Gap {
            records,
            since: SystemTime::now(),
        }
    }

    fn merge(a: Option<Gap>, b: Option<Gap>) -> Option<Gap> {
        match (a, b) {
            (Some(a), Some(b)) => Some(Gap {
                records: a.records + b.records,
                since: a.since.min(b.since),
            }),
            (a, b) => a.or(b),
        }
    }
}

/// One queued record, and the gap just before it.
struct Item {
    gap: Option<Gap>,
    entry: Entry,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock; should it happen, the counts and
        // the queue are still consistent, so keep going.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The writer thread is gone: give up on what is queued and release every
    /// waiter.
    fn die(&self, why: &str, in_flight: u64) {
        let wakers = {
            let mut state = self.lock();
            state.dead = true;
            let lost = state.queue.len() as u64 + in_flight;
            self.write_errors.fetch_add(lost, Ordering::Relaxed);
            state.queue.clear();
            state.gap = None;
            state.done = state.queued;
            let mut wakers: Vec<Waker> = state.room_waiters.drain(..).map(|(_, w)| w).collect();
            wakers.extend(state.flush_waiters.drain(..).map(|(_, _, w)| w));
            wakers
        };
        wakers.into_iter().for_each(Waker::wake);
        tracing::warn!("transcript: {why}; nothing more will be written");
    }
}

impl State {
    /// Counts one dropped record; true when it starts a new gap.
    fn drop_record(&mut self, shared: &Shared) -> bool {
        shared.dropped.fetch_add(1, Ordering::Relaxed);
        match &mut self.gap {
            Some(gap) => {
                gap.records += 1;
                false
            }
            None => {
                self.gap = Some(Gap::new(1));
                self.queued += 1;
                true
            }
        }
    }
}

/// The async side's handle on the recorder. The layer, its services, their
/// futures and replies, and flushes each hold one through an `Arc`; when the last
/// goes, the writer drains the queue and stops.
pub(super) struct Recorder {
    shared: Arc<Shared>,
    exchanges: AtomicU64,
    ids: AtomicU64,
}

impl Recorder {
    /// Starts the writer thread on `writer`.
    pub(super) fn start(writer: Box<dyn Write + Send>) -> Arc<Recorder> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                capacity: DEFAULT_CAPACITY,
                on_full: OnFull::default(),
                gap: None,
                queued: 0,
                done: 0,
                room_waiters: Vec::new(),
                flush_waiters: Vec::new(),
                closed: false,
                dead: false,
                media_store: None,
            }),
            work: Condvar::new(),
            dropped: AtomicU64::new(0),
            write_errors: AtomicU64::new(0),
        });
        let thread_shared = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("lmstack-transcript".into())
            .spawn(move || {
                let shared = thread_shared;
                let run = catch_unwind(AssertUnwindSafe(|| Writer::new(writer).run(&shared)));
                if run.is_err() {
                    shared.die("the transcript writer panicked", 1);
                }
            });
        if let Err(error) = spawned {
            shared.die(&format!("cannot start the writer thread: {error}"), 0);
        }
        Arc::new(Recorder {
            shared,
            exchanges: AtomicU64::new(0),
            ids: AtomicU64::new(0),
        })
    }

    /// The number of the next exchange, counted from 1.
    pub(super) fn next_exchange(&self) -> u64 {
        self.exchanges.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed)
    }

    pub(super) fn set_capacity(&self, records: usize) {
        self.shared.lock().capacity = records.max(1);
        // A larger queue may have room for those waiting.
        self.wake_room_waiters();
    }

    pub(super) fn set_on_full(&self, on_full: OnFull) {
        self.shared.lock().on_full = on_full;
        // Waiting senders now drop instead, if that is the new policy.
        self.wake_room_waiters();
    }

    pub(super) fn set_media_store(&self, media_store: Arc<dyn MediaStore>) {
        self.shared.lock().media_store = Some(media_store);
    }

    fn wake_room_waiters(&self) {
        let wakers: Vec<Waker> = {
            let mut state = self.shared.lock();
            state.room_waiters.drain(..).map(|(_, w)| w).collect()
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    pub(super) fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    pub(super) fn write_errors(&self) -> u64 {
        self.shared.write_errors.load(Ordering::Relaxed)
    }

    pub(super) fn flush(self: &Arc<Self>) -> Flush {
        let target = self.shared.lock().queued;
        Flush {
            recorder: self.clone(),
            target,
            id: self.next_id(),
            waiting: false,
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.work.notify_one();
    }
}

/// Hands the records of one exchange to the queue, one at a time.
pub(super) struct Sender {
    recorder: Arc<Recorder>,
    exchange: u64,
    id: u64,
    /// A record made but not queued yet.
    pending: Option<Entry>,
    /// Registered in `room_waiters`.
    waiting: bool,
}

impl Sender {
    pub(super) fn new(recorder: Arc<Recorder>, exchange: u64) -> Self {
        let id = recorder.next_id();
        Sender {
            recorder,
            exchange,
            id,
            pending: None,
            waiting: false,
        }
    }

    /// Makes a record now (its timestamp is now); [`Sender::poll_send`] queues it.
    /// Callers queue one record before making the next.
    pub(super) fn record(&mut self, record: Record) {
        if self.pending.is_some() {
            // Not reached: every caller sends first. Should it happen, the older
            // record still goes first, without waiting.
            let _ = self.send(None, true);
        }
        self.pending = Some(Entry {
            at: SystemTime::now(),
            exchange: self.exchange,
            record,
        });
    }

    /// Queues the pending record: `Pending` (woken when there is room) while the
    /// queue is full under [`OnFull::BackPressure`]; under [`OnFull::Drop`] a full
    /// queue drops it instead.
    pub(super) fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.send(Some(cx), false)
    }

    /// Queues the pending record if that needs no waiting; under back-pressure a
    /// full queue keeps it pending for [`Sender::poll_send`].
    pub(super) fn try_send(&mut self) {
        let _ = self.send(None, false);
    }

    fn send(&mut self, cx: Option<&mut Context<'_>>, forced: bool) -> Poll<()> {
        let Some(entry) = self.pending.take() else {
            return Poll::Ready(());
        };
        let shared = &*self.recorder.shared;
        let mut state = shared.lock();
        let mut new_gap = false;
        if state.dead {
            shared.write_errors.fetch_add(1, Ordering::Relaxed);
        } else if state.queue.len() < state.capacity {
            let gap = state.gap.take();
            state.queue.push_back(Item { gap, entry });
            state.queued += 1;
            shared.work.notify_one();
        } else if forced || state.on_full == OnFull::Drop {
            new_gap = state.drop_record(shared);
        } else {
            if let Some(cx) = cx {
                let waker = cx.waker();
                match state.room_waiters.iter_mut().find(|(id, _)| *id == self.id) {
                    Some((_, registered)) => registered.clone_from(waker),
                    None => state.room_waiters.push((self.id, waker.clone())),
                }
                self.waiting = true;
            }
            self.pending = Some(entry);
            return Poll::Pending;
        }
        if self.waiting {
            state.room_waiters.retain(|(id, _)| *id != self.id);
            self.waiting = false;
        }
        drop(state);
        if new_gap {
            tracing::warn!(
                exchange = self.exchange,
                "transcript: the writer is behind; dropping records until it has room \
                 (a `dropped` line will mark the gap)"
            );
        }
        Poll::Ready(())
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        // A record made but not queued (its reply or call was dropped while it
        // waited for room) is queued if there is room, else dropped and counted:
        // a drop cannot wait.
        let _ = self.send(None, true);
        if self.waiting {
            let mut state = self.recorder.shared.lock();
            state.room_waiters.retain(|(id, _)| *id != self.id);
        }
    }
}

/// The future returned by [`TranscriptLayer::flush`](super::TranscriptLayer::flush):
/// resolves when every record queued before the call (and every `dropped` line
/// due by then) has been written and the writer flushed. A write that failed counts
/// as done (see [`TranscriptLayer::write_errors`](super::TranscriptLayer::write_errors)).
#[must_use = "a flush does nothing unless awaited"]
pub struct Flush {
    recorder: Arc<Recorder>,
    target: u64,
    id: u64,
    waiting: bool,
}

impl Future for Flush {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let shared = &*this.recorder.shared;
        let mut state = shared.lock();
        if state.dead || state.done >= this.target {
            if this.waiting {
                state.flush_waiters.retain(|(id, _, _)| *id != this.id);
                this.waiting = false;
            }
            return Poll::Ready(());
        }
        let waker = cx.waker();
        match state
            .flush_waiters
            .iter_mut()
            .find(|(id, _, _)| *id == this.id)
        {
            Some((_, _, registered)) => registered.clone_from(waker),
            None => state
                .flush_waiters
                .push((this.id, this.target, waker.clone())),
        }
        this.waiting = true;
        // The writer flushes early, mid-batch, for a waiting flush.
        shared.work.notify_one();
        Poll::Pending
    }
}

impl Drop for Flush {
    fn drop(&mut self) {
        if self.waiting {
            let mut state = self.recorder.shared.lock();
            state.flush_waiters.retain(|(id, _, _)| *id != self.id);
        }
    }
}

impl fmt::Debug for Flush {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Flush")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

/// Puts the inline media of a request's messages, or of a message event, in
/// `media_store`, leaving references in their place. Media the store refuses
/// stays inline, and is reported and counted as a write error.
fn by_reference(entry: &mut Entry, media_store: &dyn MediaStore, shared: &Shared) {
    let messages = match &mut entry.record {
        Record::Request { request } => request.messages.as_mut_slice(),
        Record::Event {
            event: Event::Message { message },
        } => std::slice::from_mut(message),
        _ => return,
    };
    for media in messages.iter_mut().flat_map(Message::media_mut) {
        if let Err(error) = store::dehydrate_media(media, media_store) {
            shared.write_errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                exchange = entry.exchange,
                "transcript: media kept inline: {error}"
            );
        }
    }
}

/// What the writer thread does next.
// A job lives on the writer's stack for one step; boxing the item would cost an
// allocation per record for nothing.
#[allow(clippy::large_enum_variant)]
enum Job {
    Item(Item),
    Gap(Gap),
    Flush,
    /// Only wake the tasks collected.
    Wake,
    Stop,
}

/// The writer thread's side: owns the `Write` and does all the IO.
struct Writer {
    out: Box<dyn Write + Send>,
    line: Vec<u8>,
    /// Units written (or given up on).
    written: u64,
    /// `written` at the last flush.
    flushed: u64,
    /// Bytes went out since the last flush.
    dirty: bool,
    /// The last write failed: it may have left a partial line, so the next write
    /// starts on a new line.
    broken: bool,
    /// Records lost to failed writes, not yet marked in the transcript.
    lost: Option<Gap>,
    /// The media store of the record being written, if one is set.
    media_store: Option<Arc<dyn MediaStore>>,
}

impl Writer {
    fn new(out: Box<dyn Write + Send>) -> Self {
        Writer {
            out,
            line: Vec::new(),
            written: 0,
            flushed: 0,
            dirty: false,
            broken: false,
            lost: None,
            media_store: None,
        }
    }

    fn run(mut self, shared: &Shared) {
        loop {
            let mut wakers = Vec::new();
            let job = self.next_job(shared, &mut wakers);
            wakers.into_iter().for_each(Waker::wake);
            match job {
                Job::Item(mut item) => {
                    self.written += 1 + u64::from(item.gap.is_some());
                    if let Some(media_store) = &self.media_store {
                        by_reference(&mut item.entry, &**media_store, shared);
                    }
                    self.write(shared, item.gap, Some(&item.entry));
                }
                Job::Gap(gap) => {
                    self.written += 1;
                    self.write(shared, Some(gap), None);
                }
                Job::Flush => {
                    if std::mem::take(&mut self.dirty)
                        && let Err(error) = self.out.flush()
                    {
                        shared.write_errors.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!("transcript: cannot flush the writer: {error}");
                    }
                    self.flushed = self.written;
                }
                Job::Wake => {}
                Job::Stop => return,
            }
        }
    }

    /// Waits for work; publishes progress and collects the wakers to wake.
    fn next_job(&mut self, shared: &Shared, wakers: &mut Vec<Waker>) -> Job {
        let mut state = shared.lock();
        loop {
            if self.flushed > state.done {
                let done = self.flushed;
                state.done = done;
                state.flush_waiters.retain(|(_, target, waker)| {
                    let reached = *target <= done;
                    if reached {
                        wakers.push(waker.clone());
                    }
                    !reached
                });
            }
            let idle = state.queue.is_empty() && state.gap.is_none();
            let asked = state
                .flush_waiters
                .iter()
                .any(|(_, target, _)| *target <= self.written);
            if self.flushed < self.written && (idle || asked) {
                return Job::Flush;
            }
            if let Some(item) = state.queue.pop_front() {
                wakers.extend(state.room_waiters.drain(..).map(|(_, w)| w));
                self.media_store.clone_from(&state.media_store);
                return Job::Item(item);
            }
            if let Some(gap) = state.gap.take() {
                return Job::Gap(gap);
            }
            if state.closed {
                return Job::Stop;
            }
            if !wakers.is_empty() {
                // Wake them before sleeping.
                return Job::Wake;
            }
            state = shared
                .work
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Writes one line for `entry`, preceded by a `dropped` line when records are
    /// missing before it (dropped at `gap`, or lost to failed writes).
    fn write(&mut self, shared: &Shared, gap: Option<Gap>, entry: Option<&Entry>) {
        self.line.clear();
        if self.broken {
            self.line.push(b'\n');
        }
        let missing = Gap::merge(self.lost.take(), gap);
        if let Some(missing) = missing {
            let marker = Entry {
                at: missing.since,
                exchange: 0,
                record: Record::Dropped {
                    records: missing.records,
                },
            };
            // The marker is plain numbers and text: it always serialises.
            if serde_json::to_writer(&mut self.line, &marker).is_ok() {
                self.line.push(b'\n');
            }
        }
        let mut records = 0;
        if let Some(entry) = entry {
            let start = self.line.len();
            match serde_json::to_writer(&mut self.line, entry) {
                Ok(()) => {
                    self.line.push(b'\n');
                    records = 1;
                }
                Err(error) => {
                    self.line.truncate(start);
                    shared.write_errors.fetch_add(1, Ordering::Relaxed);
                    self.lost = Gap::merge(self.lost, Some(Gap::new(1)));
                    tracing::warn!(
                        exchange = entry.exchange,
                        "transcript: cannot serialise a record: {error}"
                    );
                }
            }
        }
        if self.line.len() == usize::from(self.broken) {
            // Nothing to write (the record could not be serialised).
            return;
        }
        match self.out.write_all(&self.line) {
            Ok(()) => {
                self.broken = false;
                self.dirty = true;
                if let Some(missing) = missing {
                    tracing::warn!(
                        records = missing.records,
                        "transcript: {} records are missing; a `dropped` line marks the gap",
                        missing.records
                    );
                }
            }
            Err(error) => {
                let first = !self.broken;
                self.broken = true;
                shared.write_errors.fetch_add(1, Ordering::Relaxed);
                let failed = (records > 0).then(|| Gap::new(records));
                self.lost = Gap::merge(Gap::merge(self.lost, missing), failed);
                if first {
                    tracing::warn!(
                        "transcript: cannot write: {error} (further failures are counted \
                         until a write succeeds)"
                    );
                }
            }
        }
        if self.line.capacity() > LINE_KEEP {
            self.line = Vec::new();
        }
    }
}

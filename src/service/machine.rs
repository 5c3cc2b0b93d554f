//! The one driver for pure cores: a [`Machine`] (a synchronous, IO-free state
//! machine) run over a stream of inputs by [`MachineStream`].
//!
//! Every stage of lmstack that transforms a stream is written this way: the
//! layers built with [`MachineLayer`](super::MachineLayer) (events in, events
//! out), the providers' body decoders (bytes in, events out) and the function
//! layer's dispatch (events and tool results in, events and jobs out). Their
//! logic is the machine; the only loop that feeds a machine and hands its output
//! on is [`MachineStream`]'s. A non-streaming reply is the same stream, joined by
//! [`Reply::complete`](super::Reply::complete).

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::{Stream, StreamExt};

use crate::error::Error;
use crate::message::Event;

/// A pure state machine: takes inputs one by one, hands out outputs.
///
/// It does no IO and reads no clock: tests drive it input by input (byte by
/// byte, for a decoder) without a runtime. A layer's machine takes and hands
/// out [`Event`]s:
///
/// ```
/// use lmstack::service::{Machine, Output};
/// use lmstack::{Error, Event};
///
/// /// Drops reasoning.
/// struct NoReasoning;
///
/// impl Machine for NoReasoning {
///     type In = Event;
///     type Out = Event;
///     fn push(&mut self, event: Event, out: &mut Output) -> Result<(), Error> {
///         if !matches!(event, Event::ReasoningDelta(_)) {
///             out.push(event);
///         }
///         Ok(())
///     }
/// }
///
/// let mut machine = NoReasoning;
/// let mut out = Output::new();
/// machine.push(Event::reasoning("hmm"), &mut out).unwrap();
/// machine.push(Event::text("Hi"), &mut out).unwrap();
/// assert_eq!(out.drain().collect::<Vec<_>>(), vec![Event::text("Hi")]);
/// ```
pub trait Machine: Send + 'static {
    /// What the machine takes.
    type In;
    /// What the machine hands out.
    type Out;

    /// Takes one input and pushes any number of outputs.
    ///
    /// An error ends the run: the outputs pushed before it are delivered, then
    /// the error.
    fn push(&mut self, input: Self::In, out: &mut Output<Self::Out>) -> Result<(), Error>;

    /// The input ended (or failed): pushes what is still held back.
    fn finish(&mut self, out: &mut Output<Self::Out>) -> Result<(), Error> {
        let _ = out;
        Ok(())
    }
}

/// Where a [`Machine`] hands out its outputs, in order: a queue the driver
/// empties.
pub struct Output<T = Event> {
    queue: VecDeque<T>,
}

impl<T> Output<T> {
    /// An empty output queue.
    pub fn new() -> Self {
        Output {
            queue: VecDeque::new(),
        }
    }

    /// Hands out one item.
    pub fn push(&mut self, item: T) {
        self.queue.push_back(item);
    }

    /// Number of items not taken yet.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// True when no item is waiting.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Takes the next item.
    pub fn pop(&mut self) -> Option<T> {
        self.queue.pop_front()
    }

    /// Takes all waiting items.
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.queue.drain(..)
    }

    /// The waiting items from the `start`th on, in order.
    #[cfg(feature = "http")]
    pub(crate) fn iter_from(&self, start: usize) -> impl Iterator<Item = &T> {
        self.queue.range(start..)
    }

    /// The waiting item at `index`, to change.
    #[cfg(feature = "anthropic")]
    pub(crate) fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        self.queue.get_mut(index)
    }

    /// Takes back the waiting items from the `len`th on.
    #[cfg(feature = "http")]
    pub(crate) fn truncate(&mut self, len: usize) {
        self.queue.truncate(len);
    }
}

impl<T> Default for Output<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Extend<T> for Output<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, items: I) {
        self.queue.extend(items);
    }
}

impl<T: fmt::Debug> fmt::Debug for Output<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.queue).finish()
    }
}

/// A machine run over a stream of inputs: the one driver of every pure core.
///
/// Each input goes through the machine as it arrives and the outputs are
/// streamed at once. When the input ends, or fails, the machine is finished
/// first (so held-back output is not lost), then the input's error, if any, is
/// passed on; an error of the machine ends the stream after the outputs pushed
/// before it.
///
/// ```
/// use futures::stream::{self, StreamExt};
/// use lmstack::service::{Machine, MachineStream, Output};
/// use lmstack::Error;
///
/// /// Sums numbers, handing out the total at the end.
/// struct Sum(u32);
///
/// impl Machine for Sum {
///     type In = u32;
///     type Out = u32;
///     fn push(&mut self, n: u32, _out: &mut Output<u32>) -> Result<(), Error> {
///         self.0 += n;
///         Ok(())
///     }
///     fn finish(&mut self, out: &mut Output<u32>) -> Result<(), Error> {
///         out.push(self.0);
///         Ok(())
///     }
/// }
///
/// # futures::executor::block_on(async {
/// let input = stream::iter([Ok(1), Ok(2), Ok(3)]);
/// let totals: Vec<_> = MachineStream::new(input, Sum(0)).collect().await;
/// assert_eq!(totals.into_iter().collect::<Result<Vec<_>, _>>().unwrap(), [6]);
/// # });
/// ```
pub struct MachineStream<S, M: Machine> {
    input: S,
    machine: M,
    out: Output<M::Out>,
    error: Option<Error>,
    ended: bool,
}

impl<S, M: Machine> MachineStream<S, M> {
    /// Runs `input` through `machine`.
    pub fn new(input: S, machine: M) -> Self {
        MachineStream {
            input,
            machine,
            out: Output::new(),
            error: None,
            ended: false,
        }
    }

    /// The machine.
    pub fn machine(&self) -> &M {
        &self.machine
    }

    /// The input stream, mutably (for a driver that feeds it, such as one that
    /// runs the jobs a machine hands out and streams their results back in).
    pub fn input_mut(&mut self) -> &mut S {
        &mut self.input
    }

    fn end(&mut self, error: Option<Error>) {
        self.ended = true;
        match (self.machine.finish(&mut self.out), error) {
            (_, Some(error)) | (Err(error), None) => self.error = Some(error),
            (Ok(()), None) => {}
        }
    }
}

// Nothing in a `MachineStream` is pinned in place: its input must be `Unpin`.
impl<S, M: Machine> Unpin for MachineStream<S, M> {}

impl<S, M> Stream for MachineStream<S, M>
where
    S: Stream<Item = Result<M::In, Error>> + Unpin,
    M: Machine,
{
    type Item = Result<M::Out, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(item) = this.out.pop() {
                return Poll::Ready(Some(Ok(item)));
            }
            if let Some(error) = this.error.take() {
                return Poll::Ready(Some(Err(error)));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            match ready!(this.input.poll_next_unpin(cx)) {
                Some(Ok(input)) => {
                    if let Err(error) = this.machine.push(input, &mut this.out) {
                        this.ended = true;
                        this.error = Some(error);
                    }
                }
                Some(Err(error)) => this.end(Some(error)),
                None => this.end(None),
            }
        }
    }
}

impl<S, M: Machine> fmt::Debug for MachineStream<S, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MachineStream")
            .field("queued", &self.out.len())
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

//! Coalescing a streamed body: the frames that are ready at the same time go
//! out as one chunk.
//!
//! A streamed reply is written frame by frame, and each chunk of a response
//! body costs hyper a chunk header, and the socket a write and (with
//! `TCP_NODELAY`) a segment. An upstream often hands over many frames at once
//! (a burst of tokens, or a whole reply read in one read); [`Coalesce`] joins
//! those into one chunk, up to a size, and never holds a frame back: as soon as
//! the inner stream has nothing more ready, what was gathered goes out.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures::Stream;

/// A stream of byte chunks whose chunks that are ready together are joined,
/// up to about `cap` bytes per chunk (a chunk bigger than `cap` alone passes
/// whole).
///
/// On each poll it takes items from the inner stream for as long as they are
/// ready: it yields what it gathered as soon as the inner stream is pending,
/// ends, fails, or the gathered bytes reach `cap`. An error or the end is
/// yielded after the bytes gathered before it. So the bytes, and their order,
/// are the inner stream's, and no chunk waits for a later one.
pub(crate) struct Coalesce<S, E> {
    inner: S,
    cap: usize,
    /// An error or the end met while gathering, yielded after the gathered
    /// bytes: `Some(None)` is the end.
    held: Option<Option<E>>,
}

impl<S, E> Coalesce<S, E> {
    /// Joins the ready chunks of `inner` up to about `cap` bytes.
    pub(crate) fn new(inner: S, cap: usize) -> Self {
        Coalesce {
            inner,
            cap,
            held: None,
        }
    }
}

impl<S: Unpin, E> Unpin for Coalesce<S, E> {}

impl<S, E> Stream for Coalesce<S, E>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    type Item = Result<Bytes, E>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(held) = this.held.take() {
            return Poll::Ready(held.map(Err));
        }
        // The first chunk: nothing is gathered yet, so pending is pending.
        let first = match Pin::new(&mut this.inner).poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => chunk,
            other => return other,
        };
        if first.len() >= this.cap {
            return Poll::Ready(Some(Ok(first)));
        }
        // One chunk ready alone goes as it is, without a copy.
        let mut gathered: Option<BytesMut> = None;
        let mut first = Some(first);
        loop {
            let len =
                gathered.as_ref().map_or(0, BytesMut::len) + first.as_ref().map_or(0, Bytes::len);
            if len >= this.cap {
                break;
            }
            match Pin::new(&mut this.inner).poll_next(cx) {
                Poll::Ready(Some(Ok(chunk))) => {
                    let buffer = gathered.get_or_insert_with(|| {
                        let first = first.take().unwrap_or_default();
                        let mut buffer = BytesMut::with_capacity(
                            (first.len() + chunk.len()).max(this.cap.min(4096)),
                        );
                        buffer.extend_from_slice(&first);
                        buffer
                    });
                    buffer.extend_from_slice(&chunk);
                }
                Poll::Ready(Some(Err(error))) => {
                    this.held = Some(Some(error));
                    break;
                }
                Poll::Ready(None) => {
                    this.held = Some(None);
                    break;
                }
                Poll::Pending => break,
            }
        }
        let chunk = match gathered {
            Some(buffer) => buffer.freeze(),
            None => first.unwrap_or_default(),
        };
        Poll::Ready(Some(Ok(chunk)))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::task::Waker;

    use proptest::prelude::*;

    use super::*;

    /// What the inner stream does when polled.
    #[derive(Clone, Debug)]
    enum Step {
        Chunk(Vec<u8>),
        Pending,
        Fail,
    }

    /// A stream that plays its steps, then ends.
    struct Script {
        steps: VecDeque<Step>,
        /// Chunks handed out so far.
        yielded: Vec<u8>,
    }

    impl Stream for Script {
        type Item = Result<Bytes, ()>;

        fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
            match self.steps.pop_front() {
                Some(Step::Chunk(chunk)) => {
                    self.yielded.extend_from_slice(&chunk);
                    Poll::Ready(Some(Ok(chunk.into())))
                }
                Some(Step::Pending) => {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
                Some(Step::Fail) => Poll::Ready(Some(Err(()))),
                None => Poll::Ready(None),
            }
        }
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => prop::collection::vec(any::<u8>(), 0..40).prop_map(Step::Chunk),
            2 => Just(Step::Pending),
            1 => Just(Step::Fail),
        ]
    }

    /// Polls `coalesce` to its end, checking at each pending that every byte
    /// the inner stream gave was yielded; returns the items.
    fn drain(coalesce: &mut Coalesce<Script, ()>, cap: usize) -> Vec<Result<Vec<u8>, ()>> {
        let mut cx = Context::from_waker(Waker::noop());
        let mut items = Vec::new();
        let mut out: Vec<u8> = Vec::new();
        loop {
            match Pin::new(&mut *coalesce).poll_next(&mut cx) {
                Poll::Ready(Some(Ok(chunk))) => {
                    // Gathering stops once the cap is reached: a joined chunk
                    // is under it by less than one inner chunk (< 40 bytes).
                    assert!(chunk.len() < cap + 40);
                    out.extend_from_slice(&chunk);
                    items.push(Ok(chunk.to_vec()));
                }
                Poll::Ready(Some(Err(()))) => {
                    assert_eq!(out, coalesce.inner.yielded, "bytes held past an error");
                    items.push(Err(()));
                }
                Poll::Ready(None) => {
                    assert_eq!(out, coalesce.inner.yielded);
                    return items;
                }
                Poll::Pending => {
                    assert_eq!(out, coalesce.inner.yielded, "a ready chunk was held");
                }
            }
        }
    }

    /// The inner stream's items with the chunks between errors joined (and
    /// empty runs dropped): what any coalescing must keep.
    fn runs(steps: &[Step]) -> Vec<Result<Vec<u8>, ()>> {
        let mut runs = Vec::new();
        let mut run: Option<Vec<u8>> = None;
        for step in steps {
            match step {
                Step::Chunk(chunk) => run.get_or_insert_default().extend_from_slice(chunk),
                Step::Pending => {}
                Step::Fail => {
                    runs.extend(run.take().map(Ok));
                    runs.push(Err(()));
                }
            }
        }
        runs.extend(run.map(Ok));
        runs
    }

    fn joined(items: Vec<Result<Vec<u8>, ()>>) -> Vec<Result<Vec<u8>, ()>> {
        let mut runs = Vec::new();
        let mut run: Option<Vec<u8>> = None;
        for item in items {
            match item {
                Ok(chunk) => run.get_or_insert_default().extend_from_slice(&chunk),
                Err(()) => {
                    runs.extend(run.take().map(Ok));
                    runs.push(Err(()));
                }
            }
        }
        runs.extend(run.map(Ok));
        runs
    }

    proptest! {
        /// Whatever the readiness pattern: the same bytes in the same order,
        /// errors in their place, and nothing held while the inner stream is
        /// pending (checked in `drain`).
        #[test]
        fn keeps_the_bytes_and_holds_nothing_ready(
            steps in prop::collection::vec(step(), 0..60),
            cap in 1usize..200,
        ) {
            let script = Script { steps: steps.iter().cloned().collect(), yielded: Vec::new() };
            let mut coalesce = Coalesce::new(script, cap);
            let items = drain(&mut coalesce, cap);
            prop_assert_eq!(joined(items), runs(&steps));
        }
    }

    #[test]
    fn joins_what_is_ready_together_and_passes_a_lone_chunk_as_is() {
        let steps = [
            Step::Chunk(b"a".to_vec()),
            Step::Chunk(b"bc".to_vec()),
            Step::Pending,
            Step::Chunk(b"d".to_vec()),
            Step::Pending,
            Step::Chunk(b"efgh".to_vec()),
            Step::Chunk(b"ij".to_vec()),
            Step::Chunk(b"k".to_vec()),
        ];
        let script = Script {
            steps: steps.into_iter().collect(),
            yielded: Vec::new(),
        };
        let mut coalesce = Coalesce::new(script, 5);
        let items = drain(&mut coalesce, 5);
        let expected: Vec<Result<Vec<u8>, ()>> = vec![
            Ok(b"abc".to_vec()),
            Ok(b"d".to_vec()),
            // The cap is reached after "efghij": "k" goes on its own.
            Ok(b"efghij".to_vec()),
            Ok(b"k".to_vec()),
        ];
        assert_eq!(items, expected);
    }
}

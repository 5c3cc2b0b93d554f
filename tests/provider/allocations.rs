//! What a streamed reply costs the gateway's translating path in
//! allocations: once a stream runs, each chunk of an OpenAI upstream's text
//! costs two — the event's text and the chunk's `choices` — whatever the
//! client's wire. The SSE framing, the lifting and the reply encoders reuse
//! their buffers (the frames handed out are dropped before the next chunk,
//! as the gateway writes them).
//!
//! The allocations are counted per thread (by a counting allocator for this
//! test binary), so tests running beside this one do not count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::Bytes;
use lmstack::provider::body::BodyDecoder;
use lmstack::provider::openai_chat::Lifter;
use lmstack::provider::{anthropic, openai_chat};
use lmstack::service::{Machine, Output};
use lmstack::{Error, Event};

/// Counts the allocations (and reallocations) of each thread.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    // A thread being torn down has no counter left: its allocations are not counted.
    let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
}

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

/// A chunk of an OpenAI stream, as one piece of the body, with `word`.
fn chunk(word: &str, first: bool) -> Bytes {
    let role = if first { r#""role":"assistant","# } else { "" };
    format!(
        "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{{role}\"content\":\"{word} \"}},\"finish_reason\":null}}]}}\n\n"
    )
    .into()
}

/// The allocations of each of 40 chunks after the first 10, through the
/// OpenAI lifting and `encoder`, its frames dropped at once.
fn steady_chunks<E>(mut encoder: E) -> Vec<usize>
where
    E: Machine<In = Result<Event, Error>, Out = Bytes>,
{
    let pieces: Vec<Bytes> = (0..50).map(|n| chunk(&format!("w{n}"), n == 0)).collect();
    let mut decoder = BodyDecoder::sse(Lifter::new());
    let (mut events, mut frames) = (Output::new(), Output::new());
    let mut each = Vec::new();
    for (n, piece) in pieces.into_iter().enumerate() {
        let before = allocations();
        decoder.push(piece, &mut events).unwrap();
        while let Some(event) = events.pop() {
            encoder.push(Ok(event), &mut frames).unwrap();
        }
        assert!(frames.drain().count() > 0, "chunk {n} wrote no frame");
        if n >= 10 {
            each.push(allocations() - before);
        }
    }
    each
}

#[test]
fn a_steady_chunk_costs_two_allocations_to_an_anthropic_client() {
    let encoder = anthropic::ReplyEncoder::new("msg_1", "m", true);
    assert_eq!(steady_chunks(encoder), vec![2; 40]);
}

#[test]
fn a_steady_chunk_costs_two_allocations_to_an_openai_client() {
    let encoder = openai_chat::ReplyEncoder::new("chatcmpl-1", 1, "m").streaming(false);
    assert_eq!(steady_chunks(encoder), vec![2; 40]);
}

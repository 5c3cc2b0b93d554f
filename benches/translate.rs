//! The gateway's per-request pipeline without sockets: an OpenAI Chat
//! upstream's reply (the gateway bench mock's: 40 text chunks, or the same
//! text as one JSON body) through the OpenAI lifting (SSE framing → lifter →
//! canonical events), the gateway's call-id sealing and the client's reply
//! encoder — an Anthropic client's (the translating path) and an OpenAI
//! client's (the same wire), streamed and whole.
//!
//! `cargo bench -p lmstack-benches --bench translate`; figures in
//! docs/performance.md (issue 30). With `TRANSLATE_REPEAT=N` it runs each case
//! N times, prints the allocations per chunk (a counting allocator) and exits
//! without criterion: the driver to run under
//! `valgrind --tool=callgrind` (instructions per chunk: the difference of two
//! `N`s over the chunks between them).

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput};
use lmstack::provider::anthropic;
use lmstack::provider::body::BodyDecoder;
use lmstack::provider::openai_chat::{self, Lifter};
use lmstack::server::sealed_ids::SealCallIds;
use lmstack::service::{Machine, Output};
use lmstack::{Error, Event};

/// Counts every allocation (and reallocation) of the process.
struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The completion's words, one chunk each: the gateway bench mock's.
#[path = "gateway/mock/src/words.rs"]
mod words;
use words::WORDS;

/// The mock's stream, one piece per SSE event as a server writes them (and
/// as they arrive, one HTTP body frame each): the first delta with the role,
/// the last with the finish reason, then `[DONE]`.
fn stream_pieces() -> Vec<Bytes> {
    let last = WORDS.len() - 1;
    let mut pieces: Vec<Bytes> = WORDS
        .iter()
        .enumerate()
        .map(|(i, word)| {
            let role = if i == 0 { r#""role":"assistant","# } else { "" };
            let finish = if i == last { r#""stop""# } else { "null" };
            format!(
                "data: {{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"mock\",\"choices\":[{{\"index\":0,\"delta\":{{{role}\"content\":\"{word}\"}},\"finish_reason\":{finish}}}]}}\n\n"
            )
            .into()
        })
        .collect();
    pieces.push(Bytes::from_static(b"data: [DONE]\n\n"));
    pieces
}

/// The mock's whole body: the same text as one message, with usage.
fn whole_body() -> Bytes {
    format!(
        "{{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion\",\"created\":1700000000,\"model\":\"mock\",\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":\"{}\"}},\"finish_reason\":\"stop\"}}],\"usage\":{{\"prompt_tokens\":12,\"completion_tokens\":40,\"total_tokens\":52}}}}",
        WORDS.concat()
    )
    .into()
}

/// The client's wire: which reply encoder the gateway runs.
#[derive(Clone, Copy)]
enum Client {
    Anthropic,
    OpenAi,
}

/// Runs one request's reply through the gateway's machines: `pieces` of the
/// upstream's body → its decoder (streamed or whole) → the call-id sealing →
/// `client`'s encoder; returns the bytes written.
fn pipeline(client: Client, stream: bool, pieces: &[Bytes]) -> usize {
    let mut decoder = if stream {
        BodyDecoder::sse(Lifter::new())
    } else {
        BodyDecoder::json(Lifter::new())
    };
    match client {
        Client::Anthropic => run(
            &mut decoder,
            anthropic::ReplyEncoder::new("msg_bench", "mock", stream),
            pieces,
        ),
        Client::OpenAi => {
            let encoder = openai_chat::ReplyEncoder::new("chatcmpl-bench", 1_700_000_000, "mock");
            let encoder = if stream {
                encoder.streaming(false)
            } else {
                encoder
            };
            run(&mut decoder, encoder, pieces)
        }
    }
}

fn run<E>(decoder: &mut BodyDecoder<Lifter>, mut encoder: E, pieces: &[Bytes]) -> usize
where
    E: Machine<In = Result<Event, Error>, Out = Bytes>,
{
    let mut seal = SealCallIds::new();
    let (mut events, mut sealed, mut bytes) = (Output::new(), Output::new(), Output::new());
    let mut written = 0;
    let mut pass = |events: &mut Output, bytes: &mut Output<Bytes>| {
        while let Some(event) = events.pop() {
            seal.push(Ok(event), &mut sealed).expect("sealed");
            while let Some(item) = sealed.pop() {
                encoder.push(item, bytes).expect("encoded");
            }
        }
        while let Some(frame) = bytes.pop() {
            written += black_box(frame).len();
        }
    };
    for piece in pieces {
        decoder
            .push(black_box(piece.clone()), &mut events)
            .expect("decoded");
        pass(&mut events, &mut bytes);
    }
    decoder.finish(&mut events).expect("decoded");
    pass(&mut events, &mut bytes);
    seal.finish(&mut sealed).expect("sealed");
    while let Some(item) = sealed.pop() {
        encoder.push(item, &mut bytes).expect("encoded");
    }
    encoder.finish(&mut bytes).expect("encoded");
    written + bytes.drain().map(|frame| frame.len()).sum::<usize>()
}

/// The cases: a name, the client, and whether it streams.
const CASES: [(&str, Client, bool); 4] = [
    ("openai->anthropic stream", Client::Anthropic, true),
    ("openai->anthropic whole", Client::Anthropic, false),
    ("openai->openai stream", Client::OpenAi, true),
    ("openai->openai whole", Client::OpenAi, false),
];

fn bench(c: &mut Criterion) {
    let (stream, whole) = (stream_pieces(), [whole_body()]);
    let mut group = c.benchmark_group("gateway pipeline, per chunk");
    group.throughput(Throughput::Elements(WORDS.len() as u64));
    for (name, client, streams) in CASES {
        let pieces: &[Bytes] = if streams { &stream } else { &whole };
        group.bench_with_input(BenchmarkId::from_parameter(name), pieces, |b, pieces| {
            b.iter(|| pipeline(client, streams, pieces))
        });
    }
    group.finish();
}

/// Runs each case whose name holds `only` `repeat` times and prints its
/// allocations per chunk (of the 40) beside the bytes it writes.
fn profile(repeat: usize, only: &str) {
    let (stream, whole) = (stream_pieces(), [whole_body()]);
    for (name, client, streams) in CASES.into_iter().filter(|case| case.0.contains(only)) {
        let pieces: &[Bytes] = if streams { &stream } else { &whole };
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        let mut written = 0;
        for _ in 0..repeat {
            written = pipeline(client, streams, pieces);
        }
        let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
        let per_chunk = allocations as f64 / (repeat * WORDS.len()) as f64;
        println!("{name}: {per_chunk:.2} allocations per chunk, {written} bytes written");
    }
}

fn main() {
    if let Some(repeat) = std::env::var("TRANSLATE_REPEAT")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        profile(repeat, &std::env::var("TRANSLATE_CASE").unwrap_or_default());
        return;
    }
    let mut criterion = Criterion::default().configure_from_args();
    bench(&mut criterion);
    criterion.final_summary();
}

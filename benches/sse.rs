//! Throughput of the SSE decoder and of the whole OpenAI response decoder (SSE +
//! lifting), at several chunk sizes, against a plain copy of the same chunks;
//! and the cost per tool call of a reply with very many calls.
//!
//! `cargo bench -p lmstack-benches --bench sse`; figures in docs/performance.md.

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use lmstack::provider::body::BodyDecoder;
use lmstack::provider::openai_chat::Lifter;
use lmstack::provider::sse::SseDecoder;
use lmstack::service::{Machine, Output};
use std::hint::black_box;

/// A Chat Completions stream of `deltas` token-sized text deltas and one tool
/// call whose arguments are `argument_bytes` long, streamed in 16-byte fragments.
fn openai_stream(deltas: usize, argument_bytes: usize) -> Vec<u8> {
    let mut body = String::new();
    let chunk = |delta: &str| {
        format!(
            "data: {{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"logprobs\":null,\"finish_reason\":null}}]}}\n\n"
        )
    };
    for n in 0..deltas {
        body.push_str(&chunk(&format!("{{\"content\":\"tok{} \"}}", n % 10)));
    }
    body.push_str(&chunk(
        r#"{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"write","arguments":""}}]}"#,
    ));
    let argument = format!("{{\"text\":\"{}\"}}", "x".repeat(argument_bytes));
    for piece in argument.as_bytes().chunks(16) {
        let piece = serde_json::to_string(std::str::from_utf8(piece).unwrap()).unwrap();
        body.push_str(&chunk(&format!(
            "{{\"tool_calls\":[{{\"index\":0,\"function\":{{\"arguments\":{piece}}}}}]}}"
        )));
    }
    body.push_str("data: {\"id\":\"chatcmpl-bench\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n");
    body.push_str("data: [DONE]\n\n");
    body.into_bytes()
}

/// One event whose data line is `bytes` long: the worst case for a decoder that
/// rescans its buffer.
fn one_big_event(bytes: usize) -> Vec<u8> {
    let mut body = b"data: ".to_vec();
    body.extend(std::iter::repeat_n(b'a', bytes));
    body.extend_from_slice(b"\n\n");
    body
}

/// A stream of `calls` whole tool calls at indexes 0, 1, … without ids (older
/// Ollama): each call is checked against those already closed.
fn many_calls(calls: usize) -> Vec<u8> {
    let mut body = String::new();
    for n in 0..calls {
        body.push_str(&format!(
            "data: {{\"id\":\"chatcmpl-bench\",\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":{n},\"type\":\"function\",\"function\":{{\"name\":\"f\",\"arguments\":\"{{}}\"}}}}]}}}}]}}\n\n"
        ));
    }
    body.push_str("data: [DONE]\n\n");
    body.into_bytes()
}

/// Lifting a reply of 10,000 and 100,000 calls, its events taken as they come
/// (as `MachineStream` does): linear when the time per call is the same at
/// both counts.
fn bench_many_calls(c: &mut Criterion) {
    let mut group = c.benchmark_group("openai tool calls, per call");
    group.sample_size(10);
    for calls in [10_000usize, 100_000] {
        let body = Bytes::from(many_calls(calls));
        group.throughput(Throughput::Elements(calls as u64));
        group.bench_with_input(BenchmarkId::from_parameter(calls), &body, |b, body| {
            b.iter(|| {
                let mut decoder = BodyDecoder::sse(Lifter::new()).with_max_tool_calls(calls);
                let mut events = Output::new();
                for start in (0..body.len()).step_by(4096) {
                    let piece = body.slice(start..body.len().min(start + 4096));
                    decoder.push(black_box(piece), &mut events).unwrap();
                    while let Some(event) = events.pop() {
                        black_box(event);
                    }
                }
                decoder.finish(&mut events).unwrap();
            })
        });
    }
    group.finish();
}

fn bench_sse(c: &mut Criterion) {
    let stream = openai_stream(2_000, 64 << 10);
    let body = Bytes::from(stream.clone());
    let mut group = c.benchmark_group("sse");
    group.throughput(Throughput::Bytes(stream.len() as u64));
    for size in [4usize, 64, 4096] {
        group.bench_with_input(BenchmarkId::new("plain copy", size), &size, |b, &size| {
            b.iter(|| {
                let mut copy = Vec::with_capacity(stream.len());
                for piece in stream.chunks(size) {
                    copy.extend_from_slice(black_box(piece));
                }
                black_box(copy)
            })
        });
        group.bench_with_input(BenchmarkId::new("sse decoder", size), &size, |b, &size| {
            b.iter(|| {
                let mut decoder = SseDecoder::new();
                let mut events = Output::new();
                for piece in stream.chunks(size) {
                    decoder.push(black_box(piece), &mut events).unwrap();
                    while let Some(event) = events.pop() {
                        black_box(event);
                    }
                }
                decoder.finish(&mut events).unwrap();
            })
        });
        group.bench_with_input(
            BenchmarkId::new("openai decoder", size),
            &size,
            |b, &size| {
                b.iter(|| {
                    let mut decoder = BodyDecoder::sse(Lifter::new());
                    let mut events = Output::new();
                    // An HTTP body arrives as slices of shared buffers, as here.
                    for start in (0..body.len()).step_by(size) {
                        let piece = body.slice(start..body.len().min(start + size));
                        decoder.push(black_box(piece), &mut events).unwrap();
                        while let Some(event) = events.pop() {
                            black_box(event);
                        }
                    }
                    decoder.finish(&mut events).unwrap();
                })
            },
        );
    }
    group.finish();

    let mut group = c.benchmark_group("sse one big event, 4-byte chunks");
    for bytes in [64usize << 10, 1 << 20] {
        let body = one_big_event(bytes);
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(bytes), &body, |b, body| {
            b.iter(|| {
                let mut decoder = SseDecoder::new();
                let mut events = Output::new();
                for piece in body.chunks(4) {
                    decoder.push(black_box(piece), &mut events).unwrap();
                }
                decoder.finish(&mut events).unwrap();
                black_box(events)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_sse, bench_many_calls);
criterion_main!(benches);

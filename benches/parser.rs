//! Throughput of the natural tool use parser on prose, on many Hermes calls and
//! on one call with a 1 MiB string argument, at 1-byte, 4-byte and 4 KiB
//! pieces, against the `tool-parser` crate's Qwen/Hermes parser (the peer) on the
//! same pieces, a plain copy of them and the floor of the event API (a machine
//! that hands each piece back unchanged); then how both parsers scale with the
//! size of an argument and with the number of calls in one piece.
//!
//! `cargo bench -p lmstack-benches --bench parser`; figures in docs/performance.md.

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group,
    criterion_main,
};
use lmstack::natural::{Dialect, NaturalToolUseParser};
use lmstack::testing::Chunking;
use lmstack_benches::{CITIES, Tools, event_floor, lmstack_calls, peer_calls, ready, schemas};
use serde_json::Value;
use tool_parser::{QwenParser, ToolParser};

const SIZES: [usize; 3] = [1, 4, 4096];

/// Sentences of prose and markdown, with the odd `<`, backtick and non-ASCII
/// character.
const SENTENCES: [&str; 12] = [
    "The forecast for the coming week looks mild, with light rain on Tuesday.",
    "Use `cargo build --release` to get an optimised binary; debug builds are slower.",
    "If x < y and y < z, then x < z — transitivity holds for any total order.",
    "A `Vec<u8>` owns its bytes, while a `&[u8]` only borrows them.",
    "**Note:** the café on the corner opens at 7:30, not at 8.",
    "- Bring an umbrella\n- Check the train times\n- Call Zoë before noon",
    "The ratio was 3 <= 4, so the test passed on the first try.",
    "Résumé, naïve and façade keep their accents in the final text.",
    "## Summary\n\nThe model answered every question without calling a tool.",
    "Prices rose by 2 % in March; analysts expect them to settle by June.",
    "Wrap generic types like `Option<String>` in backticks so they render.",
    "She said “see you tomorrow” and left the meeting early.",
];

/// About `bytes` of English and markdown, with a fenced code block now and then.
fn prose(bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + 512);
    let mut n = 0;
    while text.len() < bytes {
        text.push_str(SENTENCES[n % SENTENCES.len()]);
        text.push_str(if n % 5 == 4 { "\n\n" } else { " " });
        if n % 40 == 39 {
            text.push_str(
                "```rust\nlet total: u32 = xs.iter().filter(|&&x| x < 10).sum();\n```\n\n",
            );
        }
        n += 1;
    }
    text
}

/// Short prose and a Hermes `get_weather` call, `calls` times: about 150 bytes each.
/// The JSON is written out, so that its key order does not depend on `serde_json`'s
/// features.
fn hermes_calls(calls: usize) -> String {
    let mut text = String::new();
    for n in 0..calls {
        let (city, days) = (CITIES[n % CITIES.len()], n % 7 + 1);
        text.push_str(&format!(
            "Let me check the weather in {city}.\n<tool_call>\n{{\"name\": \"get_weather\", \"arguments\": {{\"city\": \"{city}\", \"days\": {days}, \"units\": \"celsius\"}}}}\n</tool_call>\n"
        ));
    }
    text
}

/// One Hermes `write_file` call whose `content` is a JSON string of about
/// `bytes` (prose, with `\n` and `\"` escapes).
fn one_big_call(bytes: usize) -> String {
    let mut content = prose(bytes).replace("said “", "said \"").replace('”', "\"");
    while content.len() > bytes {
        content.pop();
    }
    let content = Value::from(content);
    format!(
        "<tool_call>\n{{\"name\": \"write_file\", \"arguments\": {{\"path\": \"notes.md\", \"content\": {content}}}}}\n</tool_call>"
    )
}

/// lmstack's parser (Hermes dialect) and the peer, with the same tools.
struct Parsers {
    lmstack: NaturalToolUseParser,
    tools: Tools,
}

impl Parsers {
    fn new() -> Self {
        Parsers {
            lmstack: NaturalToolUseParser::new().dialect(Dialect::Hermes),
            tools: Tools::new(),
        }
    }

    /// Streams the pieces through lmstack's parser; returns the number of
    /// tool calls.
    fn lmstack(&self, pieces: &[&str]) -> usize {
        lmstack_calls(&self.lmstack, &self.tools.lmstack, pieces)
    }

    /// Streams the pieces through the peer; returns the number of tool calls.
    fn peer(&self, pieces: &[&str]) -> usize {
        peer_calls(QwenParser::new(), &self.tools.peer, pieces)
    }

    /// The peer's non-streaming parse of the pieces joined.
    fn peer_whole(&self, pieces: &[&str]) -> usize {
        let (text, calls) =
            ready(QwenParser::new().parse_complete(&pieces.concat())).expect("no error");
        black_box(text);
        calls.len()
    }
}

fn plain_copy(pieces: &[&str], len: usize) -> Vec<u8> {
    let mut copy = Vec::with_capacity(len);
    for piece in pieces {
        copy.extend_from_slice(black_box(piece.as_bytes()));
    }
    copy
}

type Group<'a> = BenchmarkGroup<'a, WallTime>;

/// The floor of checking every call of `text`: its arguments parsed into a
/// `serde_json::Value` and validated by the tool's compiled `jsonschema`
/// validator, as the parser does once per call — nothing else. Throughput is
/// counted over the whole text, so it reads as a ceiling for the parser on it.
fn bench_check_floor(g: &mut Group<'_>, text: &str) {
    let (_, _, schema) = schemas().into_iter().next().expect("get_weather");
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    let arguments: Vec<&str> = text
        .match_indices("\"arguments\": ")
        .map(|(at, key)| {
            let start = at + key.len();
            let end = start + text[start..].find("}}").expect("closed") + 1;
            &text[start..end]
        })
        .collect();
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("argument check floor", |b| {
        b.iter(|| {
            for arguments in &arguments {
                let value: Value = serde_json::from_str(arguments).expect("JSON");
                assert!(validator.is_valid(&value));
            }
        })
    });
}

/// One of the two parsers on the pieces of a text: the number of calls found.
type Run = fn(&Parsers, &[&str]) -> usize;

fn group<'a>(c: &'a mut Criterion, name: &str) -> Group<'a> {
    let mut group = c.benchmark_group(name);
    group.sampling_mode(SamplingMode::Flat);
    group
}

/// Plain copy, lmstack and the peer on `text` in pieces of `size` bytes; the
/// peer reads `peer_text` instead when `text` would take it too long. lmstack
/// must find the calls it finds in the whole text; when the peer does not, a
/// note says so.
fn bench_input(g: &mut Group<'_>, parsers: &Parsers, size: usize, text: &str, peer_text: &str) {
    let calls = parsers.lmstack(&[text]);
    let pieces = Chunking::Bytes(size).split(text);
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_with_input(BenchmarkId::new("plain copy", size), &pieces, |b, p| {
        b.iter(|| plain_copy(p, text.len()))
    });
    g.bench_with_input(BenchmarkId::new("event floor", size), &pieces, |b, p| {
        b.iter(|| event_floor(p))
    });
    g.bench_with_input(BenchmarkId::new("lmstack", size), &pieces, |b, p| {
        b.iter(|| assert_eq!(parsers.lmstack(p), calls))
    });
    let name = if peer_text.len() == text.len() {
        "tool-parser".to_owned()
    } else {
        format!("tool-parser on {} KiB", peer_text.len() >> 10)
    };
    let pieces = Chunking::Bytes(size).split(peer_text);
    let mut want = Some(parsers.lmstack(&[peer_text]));
    g.throughput(Throughput::Bytes(peer_text.len() as u64));
    g.bench_with_input(BenchmarkId::new(&name, size), &pieces, |b, p| {
        if let Some(want) = want.take() {
            let found = parsers.peer(p);
            if found != want {
                eprintln!("note: {name} finds {found} of the {want} calls in {size}-byte pieces");
            }
        }
        b.iter(|| parsers.peer(p))
    });
}

fn bench_parser(c: &mut Criterion) {
    let parsers = Parsers::new();
    let prose = prose(1 << 20);
    let mut g = group(c, "parser prose");
    for size in SIZES {
        bench_input(&mut g, &parsers, size, &prose, &prose);
    }
    g.finish();

    let calls = hermes_calls(7_000);
    let mut g = group(c, "parser hermes calls");
    for size in SIZES {
        bench_input(&mut g, &parsers, size, &calls, &calls);
    }
    bench_check_floor(&mut g, &calls);
    g.finish();

    // The peer re-parses the whole call at every piece: 1 MiB would take it
    // more than an hour in 1-byte pieces, so below 4 KiB pieces it reads 4 KiB.
    let (big, small) = (one_big_call(1 << 20), one_big_call(4 << 10));
    let mut g = group(c, "parser 1 MiB argument");
    for size in SIZES {
        let peer_text = if size < 4096 { &small } else { &big };
        bench_input(&mut g, &parsers, size, &big, peer_text);
    }
    g.finish();

    // The same for many calls in one piece (a reply that is not streamed).
    let mut g = group(c, "parser hermes calls, one piece");
    let runs: [(&str, usize, Run); 4] = [
        ("lmstack", 1_750, Parsers::lmstack),
        ("lmstack", 7_000, Parsers::lmstack),
        ("tool-parser parse_complete", 1_750, Parsers::peer_whole),
        ("tool-parser parse_complete", 7_000, Parsers::peer_whole),
    ];
    for (name, calls, run) in runs {
        let text = hermes_calls(calls);
        g.throughput(Throughput::Bytes(text.len() as u64));
        let id = BenchmarkId::new(name, format!("{calls} calls"));
        g.bench_with_input(id, &[text.as_str()], |b, p| {
            b.iter(|| assert_eq!(run(&parsers, p), calls))
        });
    }
    g.finish();

    // Linear cost is the same throughput at any argument size.
    let mut g = group(c, "parser argument size, 4-byte pieces");
    let runs: [(&str, usize, Run); 6] = [
        ("lmstack", 4, Parsers::lmstack),
        ("lmstack", 64, Parsers::lmstack),
        ("lmstack", 1024, Parsers::lmstack),
        ("tool-parser", 1, Parsers::peer),
        ("tool-parser", 4, Parsers::peer),
        ("tool-parser", 16, Parsers::peer),
    ];
    for (name, kib, run) in runs {
        let text = one_big_call(kib << 10);
        let pieces = Chunking::Bytes(4).split(&text);
        g.throughput(Throughput::Bytes(text.len() as u64));
        let id = BenchmarkId::new(name, format!("{kib} KiB"));
        g.bench_with_input(id, &pieces, |b, p| {
            b.iter(|| assert_eq!(run(&parsers, p), 1))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench_parser
}
criterion_main!(benches);

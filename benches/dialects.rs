//! The model families' dialects, each beside `tool-parser`'s parser for the
//! same family where it has one: many calls in the family's own form (prose
//! before each where the form allows it), and one call whose argument is 4 KiB
//! and 64 KiB (linear cost is the same throughput at any size), at 4-byte and
//! 4 KiB pieces.
//!
//! `cargo bench -p lmstack-benches --bench dialects` (`DIALECTS=glm,minimax`
//! for some families only); figures in docs/performance.md.

use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group,
    criterion_main,
};
use lmstack::natural::{Dialect, NaturalToolUseParser};
use lmstack::testing::Chunking;
use lmstack_benches::{CITIES, Tools, event_floor, lmstack_calls, peer_calls_dyn, ready};
use serde_json::{Value, json};
use tool_parser::{
    DeepSeekParser, Glm4MoeParser, KimiK2Parser, LlamaParser, MinimaxM2Parser, MistralParser,
    PythonicParser, ToolParser,
};

/// One family: its dialect, how it writes calls, and the peer's parser for it.
struct Family {
    name: &'static str,
    dialect: Dialect,
    /// The calls, with their prose, as the family writes them.
    write: fn(&[(&str, Value)]) -> String,
    /// The family's special tokens: a server streams each one whole.
    tokens: &'static [&'static str],
    /// A new parser of the peer's for the family.
    peer: Option<fn() -> Box<dyn ToolParser>>,
}

const FAMILIES: [Family; 9] = [
    Family {
        name: "mistral",
        tokens: &["[TOOL_CALLS]"],
        dialect: Dialect::Mistral,
        write: |calls| {
            format!(
                "Let me check.\n[TOOL_CALLS] [{}]",
                json_objects(calls, "arguments", ", ")
            )
        },
        peer: Some(|| Box::new(MistralParser::new())),
    },
    Family {
        name: "llama3-json",
        tokens: &["<|python_tag|>"],
        dialect: Dialect::Llama3Json,
        write: |calls| format!("<|python_tag|>{}", json_objects(calls, "parameters", "; ")),
        peer: Some(|| Box::new(LlamaParser::new())),
    },
    Family {
        name: "pythonic",
        tokens: &[],
        dialect: Dialect::Pythonic,
        write: |calls| {
            let calls: Vec<String> = calls
                .iter()
                .map(|(name, args)| {
                    let args: Vec<String> = object(args)
                        .map(|(key, value)| format!("{key}={value}"))
                        .collect();
                    format!("{name}({})", args.join(", "))
                })
                .collect();
            format!("[{}]", calls.join(", "))
        },
        peer: Some(|| Box::new(PythonicParser::new())),
    },
    Family {
        name: "kimi-k2",
        tokens: &[
            "<|tool_calls_section_begin|>",
            "<|tool_call_begin|>",
            "<|tool_call_argument_begin|>",
            "<|tool_call_end|>",
            "<|tool_calls_section_end|>",
        ],
        dialect: Dialect::KimiK2,
        write: |calls| {
            each(calls, |n, name, args| {
                format!(
                    "<|tool_calls_section_begin|><|tool_call_begin|>functions.{name}:{n}<|tool_call_argument_begin|>{args}<|tool_call_end|><|tool_calls_section_end|>"
                )
            })
        },
        peer: Some(|| Box::new(KimiK2Parser::new())),
    },
    Family {
        name: "deepseek",
        tokens: &[
            "<｜tool▁calls▁begin｜>",
            "<｜tool▁call▁begin｜>",
            "<｜tool▁sep｜>",
            "<｜tool▁call▁end｜>",
            "<｜tool▁calls▁end｜>",
        ],
        dialect: Dialect::DeepSeek,
        write: |calls| {
            each(calls, |_, name, args| {
                format!(
                    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{args}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
                )
            })
        },
        peer: Some(|| Box::new(DeepSeekParser::new())),
    },
    Family {
        name: "glm",
        tokens: &[
            "<tool_call>",
            "</tool_call>",
            "<arg_key>",
            "</arg_key>",
            "<arg_value>",
            "</arg_value>",
        ],
        dialect: Dialect::Glm,
        write: |calls| {
            each(calls, |_, name, args| {
                let args: String = object(args)
                    .map(|(key, value)| {
                        format!(
                            "<arg_key>{key}</arg_key>\n<arg_value>{}</arg_value>\n",
                            raw(value)
                        )
                    })
                    .collect();
                format!("<tool_call>{name}\n{args}</tool_call>")
            })
        },
        peer: Some(|| Box::new(Glm4MoeParser::glm45())),
    },
    Family {
        name: "minimax",
        tokens: &["<minimax:tool_call>", "</minimax:tool_call>"],
        dialect: Dialect::MiniMax,
        write: |calls| {
            each(calls, |_, name, args| {
                let args: String = object(args)
                    .map(|(key, value)| {
                        format!("<parameter name=\"{key}\">{}</parameter>\n", raw(value))
                    })
                    .collect();
                format!(
                    "<minimax:tool_call>\n<invoke name=\"{name}\">\n{args}</invoke>\n</minimax:tool_call>"
                )
            })
        },
        peer: Some(|| Box::new(MinimaxM2Parser::new())),
    },
    Family {
        name: "harmony",
        tokens: &[
            "<|channel|>",
            "<|message|>",
            "<|end|>",
            "<|start|>",
            "<|constrain|>",
            "<|call|>",
        ],
        dialect: Dialect::Harmony,
        write: |calls| {
            let mut text = String::new();
            for (n, (name, args)) in calls.iter().enumerate() {
                let city = CITIES[n % CITIES.len()];
                text.push_str(&format!(
                    "<|channel|>analysis<|message|>Let me check the weather in {city}.<|end|><|start|>assistant<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>{args}<|call|>"
                ));
            }
            text
        },
        peer: None,
    },
    Family {
        name: "granite",
        tokens: &["<|tool_call|>"],
        dialect: Dialect::Granite,
        write: |calls| {
            each(calls, |_, name, args| {
                format!("<|tool_call|>[{{\"name\": \"{name}\", \"arguments\": {args}}}]")
            })
        },
        peer: None,
    },
];

/// The calls as JSON objects `{"name": F, key: {…}}` joined by `separator`.
fn json_objects(calls: &[(&str, Value)], key: &str, separator: &str) -> String {
    let objects: Vec<String> = calls
        .iter()
        .map(|(name, args)| format!("{{\"name\": \"{name}\", \"{key}\": {args}}}"))
        .collect();
    objects.join(separator)
}

/// Each call written by `call(n, name, arguments)`, after a sentence of prose.
fn each(calls: &[(&str, Value)], call: impl Fn(usize, &str, &Value) -> String) -> String {
    let mut text = String::new();
    for (n, (name, args)) in calls.iter().enumerate() {
        let city = CITIES[n % CITIES.len()];
        text.push_str(&format!("Let me check the weather in {city}.\n"));
        text.push_str(&call(n, name, args));
        text.push('\n');
    }
    text
}

/// The members of an object.
fn object(value: &Value) -> impl Iterator<Item = (&String, &Value)> {
    value.as_object().expect("an object").iter()
}

/// A value as the XML forms write it: strings raw, others as JSON.
fn raw(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// `count` `get_weather` calls.
fn weather_calls(count: usize) -> Vec<(&'static str, Value)> {
    (0..count)
        .map(|n| {
            let city = CITIES[n % CITIES.len()];
            (
                "get_weather",
                json!({"city": city, "days": n % 7 + 1, "units": "celsius"}),
            )
        })
        .collect()
}

/// One `write_file` call whose content is about `bytes` of text with quotes,
/// newlines, `<` and non-ASCII characters.
fn big_call(bytes: usize) -> Vec<(&'static str, Value)> {
    const LINE: &str = "If x < y then \"y\" > x — naïve, but true.\n";
    let content = LINE.repeat(bytes / LINE.len() + 1);
    vec![(
        "write_file",
        json!({"path": "notes.md", "content": content}),
    )]
}

type Group<'a> = BenchmarkGroup<'a, WallTime>;

/// `text` cut as a server streams it: each of `tokens` whole, the rest in
/// pieces of `size` bytes.
fn token_pieces<'t>(text: &'t str, tokens: &[&str], size: usize) -> Vec<&'t str> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let next = tokens
            .iter()
            .filter_map(|token| rest.find(token).map(|at| (at, token.len())))
            .min();
        let (plain, token) = match next {
            Some((at, len)) => (&rest[..at], &rest[at..at + len]),
            None => (rest, ""),
        };
        pieces.extend(Chunking::Bytes(size).split(plain));
        if !token.is_empty() {
            pieces.push(token);
        }
        rest = &rest[plain.len() + token.len()..];
    }
    pieces
}

/// lmstack and the peer on `text` in 4-byte pieces (special tokens cut, and
/// whole as a server streams them) and 4 KiB pieces. lmstack must find `want`
/// calls; when the peer does not, a note says so.
fn bench_text(
    g: &mut Group<'_>,
    family: &Family,
    tools: &Tools,
    text: &str,
    want: usize,
    id: &str,
) {
    let parser = NaturalToolUseParser::new().dialect(family.dialect);
    g.throughput(Throughput::Bytes(text.len() as u64));
    let cuts = [
        ("4-byte pieces", Chunking::Bytes(4).split(text)),
        (
            "4-byte pieces, tokens whole",
            token_pieces(text, family.tokens, 4),
        ),
        ("4096-byte pieces", Chunking::Bytes(4096).split(text)),
    ];
    for (cut, pieces) in cuts {
        let param = format!("{id}, {cut}");
        g.bench_with_input(BenchmarkId::new("event floor", &param), &pieces, |b, p| {
            b.iter(|| event_floor(p))
        });
        g.bench_with_input(BenchmarkId::new("lmstack", &param), &pieces, |b, p| {
            b.iter(|| assert_eq!(lmstack_calls(&parser, &tools.lmstack, p), want))
        });
        if let Some(peer) = family.peer {
            let found = peer_calls_dyn(peer().as_mut(), &tools.peer, &pieces);
            if found != want {
                let (_, whole) = ready(peer().parse_complete(text)).expect("no error");
                eprintln!(
                    "note: tool-parser finds {found} of the {want} calls ({}, {param}); {} in the whole text",
                    family.name,
                    whole.len()
                );
            }
            g.bench_with_input(BenchmarkId::new("tool-parser", &param), &pieces, |b, p| {
                b.iter(|| peer_calls_dyn(peer().as_mut(), &tools.peer, p))
            });
        }
    }
}

fn bench_dialects(c: &mut Criterion) {
    let tools = Tools::new();
    // `DIALECTS=glm,minimax` runs only those families (the peer's notes are
    // worked out before criterion's own filter applies).
    let only = std::env::var("DIALECTS").ok();
    let chosen = |family: &&Family| {
        only.as_deref()
            .is_none_or(|names| names.split(',').any(|name| name == family.name))
    };
    for family in FAMILIES.iter().filter(chosen) {
        let mut g = c.benchmark_group(format!("dialect {}", family.name));
        g.sampling_mode(SamplingMode::Flat);
        let many = (family.write)(&weather_calls(200));
        bench_text(&mut g, family, &tools, &many, 200, "200 calls");
        for kib in [4, 64] {
            let big = (family.write)(&big_call(kib << 10));
            bench_text(
                &mut g,
                family,
                &tools,
                &big,
                1,
                &format!("{kib} KiB argument"),
            );
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench_dialects
}
criterion_main!(benches);

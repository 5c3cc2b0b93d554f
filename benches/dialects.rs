//! The model families' dialects, each beside `tool-parser`'s parser for the
//! same family where it has one: many calls in the family's own form (prose
//! before each where the form allows it), and one call whose argument is 4 KiB
//! and 64 KiB (linear cost is the same throughput at any size), at 4-byte and
//! 4 KiB pieces.
//!
//! `cargo bench -p lmstack-benches --bench dialects`; figures in
//! docs/performance.md.

use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group,
    criterion_main,
};
use lmstack::natural::{Dialect, NaturalToolUseParser};
use lmstack::testing::Chunking;
use lmstack_benches::{CITIES, Tools, lmstack_calls, peer_calls};
use serde_json::{Value, json};
use tool_parser::{
    DeepSeekParser, Glm4MoeParser, KimiK2Parser, LlamaParser, MinimaxM2Parser, MistralParser,
    PythonicParser,
};

/// One family: its dialect, how it writes calls, and the peer's parser for it.
struct Family {
    name: &'static str,
    dialect: Dialect,
    /// The calls, with their prose, as the family writes them.
    write: fn(&[(&str, Value)]) -> String,
    peer: Option<fn(&Tools, &[&str]) -> usize>,
}

const FAMILIES: [Family; 9] = [
    Family {
        name: "mistral",
        dialect: Dialect::Mistral,
        write: |calls| {
            format!(
                "Let me check.\n[TOOL_CALLS] [{}]",
                json_objects(calls, "arguments", ", ")
            )
        },
        peer: Some(|tools, pieces| peer_calls(MistralParser::new(), &tools.peer, pieces)),
    },
    Family {
        name: "llama3-json",
        dialect: Dialect::Llama3Json,
        write: |calls| format!("<|python_tag|>{}", json_objects(calls, "parameters", "; ")),
        peer: Some(|tools, pieces| peer_calls(LlamaParser::new(), &tools.peer, pieces)),
    },
    Family {
        name: "pythonic",
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
        peer: Some(|tools, pieces| peer_calls(PythonicParser::new(), &tools.peer, pieces)),
    },
    Family {
        name: "kimi-k2",
        dialect: Dialect::KimiK2,
        write: |calls| {
            each(calls, |n, name, args| {
                format!(
                    "<|tool_calls_section_begin|><|tool_call_begin|>functions.{name}:{n}<|tool_call_argument_begin|>{args}<|tool_call_end|><|tool_calls_section_end|>"
                )
            })
        },
        peer: Some(|tools, pieces| peer_calls(KimiK2Parser::new(), &tools.peer, pieces)),
    },
    Family {
        name: "deepseek",
        dialect: Dialect::DeepSeek,
        write: |calls| {
            each(calls, |_, name, args| {
                format!(
                    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{args}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
                )
            })
        },
        peer: Some(|tools, pieces| peer_calls(DeepSeekParser::new(), &tools.peer, pieces)),
    },
    Family {
        name: "glm",
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
        peer: Some(|tools, pieces| peer_calls(Glm4MoeParser::glm45(), &tools.peer, pieces)),
    },
    Family {
        name: "minimax",
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
        peer: Some(|tools, pieces| peer_calls(MinimaxM2Parser::new(), &tools.peer, pieces)),
    },
    Family {
        name: "harmony",
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

/// lmstack and the peer on `text` in pieces of `size` bytes. lmstack must find
/// `want` calls; when the peer does not, a note says so.
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
    for size in [4, 4096] {
        let pieces = Chunking::Bytes(size).split(text);
        let param = format!("{id}, {size}-byte pieces");
        g.bench_with_input(BenchmarkId::new("lmstack", &param), &pieces, |b, p| {
            b.iter(|| assert_eq!(lmstack_calls(&parser, &tools.lmstack, p), want))
        });
        if let Some(peer) = family.peer {
            let found = peer(tools, &pieces);
            if found != want {
                eprintln!(
                    "note: tool-parser finds {found} of the {want} calls ({}, {param})",
                    family.name
                );
            }
            g.bench_with_input(BenchmarkId::new("tool-parser", &param), &pieces, |b, p| {
                b.iter(|| peer(tools, p))
            });
        }
    }
}

fn bench_dialects(c: &mut Criterion) {
    let tools = Tools::new();
    for family in &FAMILIES {
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

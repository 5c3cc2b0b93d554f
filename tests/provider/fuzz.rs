//! Hostile bytes for the provider's decoders: the SSE decoder alone, and each
//! wire's lifter (OpenAI; Anthropic in [`anthropic`]) through `BodyDecoder` with
//! either framing, on arbitrary bytes, on arbitrary JSON in the shape of its
//! wire, and on the recorded responses of `tests/fixtures`, mutated. Nothing panics; every failure is a
//! typed error; within the default limits, how the bytes are cut never changes
//! the outcome.

use std::sync::LazyLock;

use lmstack::provider::TransportErrorKind;
use lmstack::provider::Wire;
use lmstack::provider::body::{BodyDecoder, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_TOOL_CALLS};
#[cfg(feature = "gemini")]
use lmstack::provider::gemini::GenerateContent;
use lmstack::provider::openai_chat::ChatCompletions;
use lmstack::provider::sse::{DEFAULT_MAX_EVENT_BYTES, SseDecoder, SseEvent};
use lmstack::service::Output;
use lmstack::{Error, Event, Joiner};
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Map, Value};

use crate::common::{cassette, chunks_as_sse, decode_cut, fixture};

/// How a decoding ended: its events, or its error's text.
type Outcome<T> = Result<Vec<T>, String>;

/// The limits of one run: the largest event, the largest body, the most calls.
#[derive(Clone, Copy, Debug)]
struct Limits {
    event: usize,
    body: usize,
    calls: usize,
}

const DEFAULT_LIMITS: Limits = Limits {
    event: DEFAULT_MAX_EVENT_BYTES,
    body: DEFAULT_MAX_BODY_BYTES,
    calls: DEFAULT_MAX_TOOL_CALLS,
};

/// Limits small enough for short inputs to meet them.
fn small_limits() -> impl Strategy<Value = Limits> {
    (0usize..256, 0usize..2048, 0usize..4).prop_map(|(event, body, calls)| Limits {
        event,
        body,
        calls,
    })
}

/// The wire `W`'s decoder with SSE framing (`sse`) or JSON framing, within
/// `limits`.
fn decoder<W: Wire>(sse: bool, limits: Limits) -> BodyDecoder<W::Lifter> {
    let lifter = W::default().lifter();
    let decoder = if sse {
        BodyDecoder::sse(lifter)
    } else {
        BodyDecoder::json(lifter)
    };
    decoder
        .with_limits(limits.event, limits.body)
        .with_max_tool_calls(limits.calls)
}

/// The errors a response decoder may end with, all typed: a limit, an error
/// the provider sent, or a malformed or truncated response.
fn check_typed(error: &Error) -> Result<(), TestCaseError> {
    let typed = match error {
        Error::LimitExceeded { .. } | Error::ToolCallLimit { .. } => true,
        Error::Provider(_) => error.provider_error().is_some(),
        Error::Transport(_) => error.transport_error().is_some_and(|error| {
            matches!(
                error.kind,
                TransportErrorKind::Malformed | TransportErrorKind::Truncated
            )
        }),
        _ => false,
    };
    prop_assert!(typed, "an unexpected error: {error:?}");
    prop_assert!(!error.to_string().is_empty());
    Ok(())
}

/// Decodes `bytes` cut in `sizes` through the wire `W`'s decoder, checking
/// that a failure is typed and that a success joins into messages.
fn lift<W: Wire>(
    bytes: &[u8],
    sizes: &[usize],
    sse: bool,
    limits: Limits,
) -> Result<Outcome<Event>, TestCaseError> {
    match decode_cut(decoder::<W>(sse, limits), bytes, sizes) {
        Ok(events) => {
            let calls = Joiner::join(events.clone())
                .iter()
                .flat_map(|message| message.calls())
                .count();
            prop_assert!(calls <= limits.calls, "{calls} calls past the limit");
            Ok(Ok(events))
        }
        Err(error) => {
            check_typed(&error)?;
            Ok(Err(error.to_string()))
        }
    }
}

/// The wire `W`'s decoder on `bytes` whole and cut in `sizes`, within the
/// default limits: the same outcome either way.
fn lift_alike<W: Wire>(bytes: &[u8], sizes: &[usize], sse: bool) -> Result<(), TestCaseError> {
    let whole = lift::<W>(bytes, &[usize::MAX], sse, DEFAULT_LIMITS)?;
    let cut = lift::<W>(bytes, sizes, sse, DEFAULT_LIMITS)?;
    prop_assert_eq!(whole, cut);
    Ok(())
}

/// The wire `W`'s decoder on `bytes` cut in `sizes` within small `limits`: only the
/// checks of [`lift`] count, as near a limit the outcome may depend on the
/// cutting (a line being read counts towards the event limit).
fn lift_within<W: Wire>(
    bytes: &[u8],
    sizes: &[usize],
    sse: bool,
    limits: Limits,
) -> Result<(), TestCaseError> {
    lift::<W>(bytes, sizes, sse, limits).map(drop)
}

/// The SSE decoder alone on `bytes` cut in `sizes`; its only failure is its
/// event limit.
fn sse_events(
    bytes: &[u8],
    sizes: &[usize],
    limit: usize,
) -> Result<Outcome<SseEvent>, TestCaseError> {
    let mut decoder = SseDecoder::new().with_max_event_bytes(limit);
    let mut events = Output::new();
    let mut sizes = sizes.iter().cycle();
    let mut decode = |mut rest: &[u8]| {
        while !rest.is_empty() {
            let size = (*sizes.next().unwrap_or(&usize::MAX)).clamp(1, rest.len());
            decoder.push(&rest[..size], &mut events)?;
            rest = &rest[size..];
        }
        decoder.finish(&mut events)
    };
    match decode(bytes) {
        Ok(()) => Ok(Ok(events.drain().collect())),
        Err(error) => {
            prop_assert!(
                matches!(
                    error,
                    Error::LimitExceeded { stage: "sse decoder", what: "one event", limit: l } if l == limit
                ),
                "{error:?}"
            );
            Ok(Err(error.to_string()))
        }
    }
}

fn sizes() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..24, 1..8)
}

/// Bytes that are mostly the pieces of SSE and JSON, so that broken framing
/// and broken JSON are both explored, plus any byte.
fn hostile_bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..8),
        3 => prop::sample::select(TOKENS).prop_map(|token| token.as_bytes().to_vec()),
    ];
    prop::collection::vec(piece, 0..48).prop_map(|pieces| pieces.concat())
}

/// Pieces of the wire formats that matter to a decoder.
const TOKENS: &[&str] = &[
    "\n",
    "\r",
    "\r\n",
    "\n\n",
    "data: ",
    "data:",
    "data: [DONE]\n\n",
    "data: x",
    "data: {}",
    "event: error\n",
    "id: 1\n",
    "retry: 99\n",
    ": comment\n",
    "\u{FEFF}",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "\\",
    "null",
    "0",
    "-1",
    "4294967295",
    "4294967296",
    "1e999",
    "\"choices\":[{\"index\":0,\"delta\":{",
    "\"tool_calls\":[{\"index\":1,\"function\":{\"name\":\"f\",\"arguments\":\"{\"}}]",
    "\"content\":\"é\"",
    "\"finish_reason\":\"stop\"",
    "\"error\":{\"message\":\"m\",\"code\":503}",
    "\"usage\":{\"prompt_tokens\":1.5}",
];

/// Keys of Chat Completions bodies and chunks.
const KEYS: &[&str] = &[
    "id",
    "object",
    "choices",
    "index",
    "delta",
    "message",
    "role",
    "content",
    "text",
    "reasoning",
    "reasoning_content",
    "refusal",
    "tool_calls",
    "type",
    "function",
    "name",
    "arguments",
    "web_search",
    "finish_reason",
    "usage",
    "prompt_tokens",
    "completion_tokens",
    "prompt_tokens_details",
    "cached_tokens",
    "x_groq",
    "error",
    "code",
    "status",
];

/// Arbitrary JSON in the vocabulary of Chat Completions: the right keys with
/// values of any type, so the lifter meets every kind of confusion.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        prop_oneof![
            Just(0u64),
            Just(1),
            Just(2),
            Just(u32::MAX as u64),
            Just(u64::MAX)
        ]
        .prop_map(Value::from),
        prop_oneof![Just(-1.0f64), Just(1.5), Just(1e300)].prop_map(Value::from),
        prop::sample::select(vec![
            "",
            "stop",
            "tool_calls",
            "function",
            "web_search",
            "call_1",
            "call_2",
            "f",
            "{",
            "{}",
            "{\"a\":1}",
            "[DONE]",
            "é",
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|fields| {
                Value::Object(
                    fields
                        .into_iter()
                        .map(|(key, value)| (key.to_owned(), value))
                        .collect::<Map<_, _>>(),
                )
            }),
        ]
    })
}

/// A field of an object, present once in `1 + absent` times: mostly with a
/// typical value, sometimes with any JSON at all.
fn field(
    key: &'static str,
    absent: u32,
    typical: impl Strategy<Value = Value> + 'static,
) -> BoxedStrategy<Option<(&'static str, Value)>> {
    prop_oneof![
        absent => Just(None),
        1 => prop_oneof![
            4 => typical.prop_map(move |value| Some((key, value))),
            1 => any_json().prop_map(move |value| Some((key, value))),
        ],
    ]
    .boxed()
}

/// An object of the given fields.
fn object(
    fields: Vec<BoxedStrategy<Option<(&'static str, Value)>>>,
) -> impl Strategy<Value = Value> {
    fields.prop_map(|fields| {
        Value::Object(
            fields
                .into_iter()
                .flatten()
                .map(|(key, value)| (key.to_owned(), value))
                .collect(),
        )
    })
}

fn one_of(values: &'static [&'static str]) -> impl Strategy<Value = Value> {
    prop::sample::select(values).prop_map(Value::from)
}

fn small_index() -> impl Strategy<Value = Value> {
    prop_oneof![8 => 0u32..4, 1 => Just(u32::MAX)].prop_map(Value::from)
}

fn text() -> impl Strategy<Value = Value> {
    one_of(&["", "Hel", "lo", "{", "\"a\": 1}", "é", "[DONE]"])
}

/// A tool-call fragment: any of its fields, with ids, indexes and names from
/// small sets so that fragments continue, interleave and repeat calls.
fn wire_call() -> impl Strategy<Value = Value> {
    let function = object(vec![
        field("name", 1, one_of(&["f", "g", ""])),
        field("arguments", 1, text()),
    ]);
    object(vec![
        field("index", 1, small_index()),
        field("id", 1, one_of(&["call_1", "call_2", "call_3", ""])),
        field("type", 2, one_of(&["function", "web_search", "mcp"])),
        field("function", 0, function),
        field("web_search", 3, any_json()),
    ])
}

/// A delta, or a non-streaming message: text, reasoning, refusal, calls.
fn wire_delta() -> impl Strategy<Value = Value> {
    object(vec![
        field("role", 2, Just(Value::from("assistant"))),
        field("content", 1, text()),
        field("reasoning_content", 3, text()),
        field("reasoning", 3, text()),
        field("refusal", 4, text()),
        field(
            "tool_calls",
            1,
            prop::collection::vec(wire_call(), 0..4).prop_map(Value::Array),
        ),
    ])
}

fn wire_usage() -> impl Strategy<Value = Value> {
    let count = prop_oneof![
        Just(Value::from(12)),
        Just(Value::from(-1)),
        Just(Value::from(1.5e300))
    ];
    object(vec![
        field("prompt_tokens", 0, count.clone()),
        field("completion_tokens", 0, count),
    ])
}

/// A chunk or a whole body of Chat Completions, every field optional and any
/// field sometimes of the wrong type.
fn wire_chunk() -> impl Strategy<Value = Value> {
    let choice = object(vec![
        field(
            "index",
            1,
            prop_oneof![4 => Just(0u32), 1 => Just(1u32)].prop_map(Value::from),
        ),
        field("delta", 0, wire_delta()),
        field("message", 4, wire_delta()),
        field(
            "finish_reason",
            3,
            one_of(&["stop", "tool_calls", "length", "function_call", "sensitive"]),
        ),
    ]);
    object(vec![
        field("id", 1, one_of(&["c1", ""])),
        field(
            "choices",
            0,
            prop::collection::vec(choice, 0..3).prop_map(Value::Array),
        ),
        field("usage", 3, wire_usage()),
        field("x_groq", 6, object(vec![field("usage", 0, wire_usage())])),
        field(
            "error",
            20,
            object(vec![
                field("message", 0, text()),
                field(
                    "type",
                    1,
                    one_of(&["server_error", "invalid_request_error"]),
                ),
                field(
                    "code",
                    1,
                    prop_oneof![Just(Value::from(503)), Just(Value::from("x"))],
                ),
            ]),
        ),
    ])
}

/// The recorded responses: streams, and whole bodies.
struct Recorded {
    streams: Vec<Vec<u8>>,
    bodies: Vec<Vec<u8>>,
}

static RECORDED: LazyLock<Recorded> = LazyLock::new(|| {
    let responses = |name: &str| {
        cassette(name)
            .into_iter()
            .map(|exchange| exchange.response.into_bytes())
            .collect::<Vec<_>>()
    };
    let mut streams: Vec<Vec<u8>> = [
        "openai/openai-python/parallel_tools.sse",
        "openai/openai-python/refusal.sse",
        "openai/openai-python/strict_tool.sse",
        "openai/openai-python/max_tokens_reached.sse",
        "openai_compat/vercel-ai/anthropic-fallback-tool-call.sse",
    ]
    .into_iter()
    .map(fixture)
    .collect();
    streams.push(chunks_as_sse(
        "openai_compat/vercel-ai/groq-tool-call.chunks.txt",
    ));
    for name in [
        "openai/fantasy/gpt-4o-multi_tool_streaming.yaml",
        "openai_compat/fantasy/zai-glm-4-7-flash-multi_tool_streaming.yaml",
        "openai_compat/fantasy/zai-glm-4-7-flash-thinking-streaming.yaml",
        "openai_compat/fantasy/llama-cpp-gpt-oss-tool_streaming.yaml",
    ] {
        streams.extend(responses(name));
    }
    let mut bodies = vec![
        fixture("openai/openai-python/parallel_tools.json"),
        fixture("openai/vercel-ai/unsupported-parameter-error.json"),
    ];
    bodies.extend(responses("openai/fantasy/gpt-4o-multi_tool.yaml"));
    bodies.extend(responses(
        "openai_compat/rig/llamacpp-image_tool_result.yaml",
    ));
    Recorded { streams, bodies }
});

/// One change to a body.
#[derive(Clone, Debug)]
enum Mutation {
    Flip(Index, u8),
    Delete(Index, usize),
    Insert(Index, &'static str),
    Duplicate(Index, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), 0u8..8).prop_map(|(at, bit)| Mutation::Flip(at, bit)),
        (any::<Index>(), 1usize..64).prop_map(|(at, len)| Mutation::Delete(at, len)),
        (any::<Index>(), prop::sample::select(TOKENS))
            .prop_map(|(at, token)| Mutation::Insert(at, token)),
        (any::<Index>(), 1usize..256).prop_map(|(at, len)| Mutation::Duplicate(at, len)),
    ]
}

/// The wire `W`'s decoder on `bytes` cut in `sizes`: the same whole and cut
/// within the default limits ([`lift_alike`]), and typed within `limits`
/// ([`lift_within`]).
fn lift_checked<W: Wire>(
    bytes: &[u8],
    sizes: &[usize],
    sse: bool,
    limits: Limits,
) -> Result<(), TestCaseError> {
    lift_alike::<W>(bytes, sizes, sse)?;
    lift_within::<W>(bytes, sizes, sse, limits)
}

/// The wire `W`'s decoder on one recorded stream and one recorded body of
/// `recorded`, mutated: each in its own framing and in the other (a server
/// whose content type lies), the same whole and cut, and typed within small
/// `limits`.
fn mutated_alike<W: Wire>(
    recorded: &Recorded,
    stream: Index,
    body: Index,
    mutations: &[Mutation],
    sizes: &[usize],
    limits: Limits,
) -> Result<(), TestCaseError> {
    let stream = mutate(stream.get(&recorded.streams).clone(), mutations);
    let body = mutate(body.get(&recorded.bodies).clone(), mutations);
    for (bytes, sse) in [
        (&stream, true),
        (&body, false),
        (&stream, false),
        (&body, true),
    ] {
        lift_alike::<W>(bytes, sizes, sse)?;
    }
    lift_within::<W>(&stream, sizes, true, limits)?;
    lift_within::<W>(&body, sizes, false, limits)
}

fn mutate(mut body: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for mutation in mutations {
        if body.is_empty() {
            break;
        }
        let len = body.len();
        let span = |at: &Index, bytes: usize| {
            let start = at.index(len);
            start..len.min(start + bytes)
        };
        match mutation {
            Mutation::Flip(at, bit) => body[at.index(len)] ^= 1 << bit,
            Mutation::Delete(at, bytes) => {
                body.drain(span(at, *bytes));
            }
            Mutation::Insert(at, token) => {
                let at = at.index(len);
                body.splice(at..at, token.bytes());
            }
            Mutation::Duplicate(at, bytes) => {
                let span = span(at, *bytes);
                let copy = body[span.clone()].to_vec();
                body.splice(span.end..span.end, copy);
            }
        }
    }
    body
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(256)))]

    #[test]
    fn the_sse_decoder_takes_any_bytes_alike_however_cut(
        bytes in hostile_bytes(),
        sizes in sizes(),
        limit in 0usize..256,
    ) {
        let whole = sse_events(&bytes, &[usize::MAX], DEFAULT_MAX_EVENT_BYTES)?;
        prop_assert!(whole.is_ok());
        prop_assert_eq!(&whole, &sse_events(&bytes, &sizes, DEFAULT_MAX_EVENT_BYTES)?);
        // Past a small limit: the limit's error, nothing else.
        sse_events(&bytes, &sizes, limit).map(drop)?;
    }

    #[test]
    fn the_lifter_takes_any_bytes_in_either_framing(
        bytes in hostile_bytes(),
        sizes in sizes(),
        sse in any::<bool>(),
        limits in small_limits(),
    ) {
        lift_checked::<ChatCompletions>(&bytes, &sizes, sse, limits)?;
    }

    #[test]
    fn the_lifter_takes_any_chunks_streamed_or_whole(
        values in prop::collection::vec(wire_chunk(), 1..12),
        done in any::<bool>(),
        sizes in sizes(),
        limits in small_limits(),
    ) {
        let mut stream: String = values.iter().map(|value| format!("data: {value}\n\n")).collect();
        if done {
            stream.push_str("data: [DONE]\n\n");
        }
        lift_checked::<ChatCompletions>(stream.as_bytes(), &sizes, true, limits)?;
        let body = values[0].to_string();
        lift_checked::<ChatCompletions>(body.as_bytes(), &sizes, false, limits)?;
    }

    #[test]
    fn recorded_responses_mutated_and_cut_anywhere(
        stream in any::<Index>(),
        body in any::<Index>(),
        mutations in prop::collection::vec(mutation(), 1..6),
        sizes in sizes(),
        limits in small_limits(),
    ) {
        mutated_alike::<ChatCompletions>(&RECORDED, stream, body, &mutations, &sizes, limits)?;
    }
}

/// The Anthropic lifter under the same properties: any bytes, any events in
/// the shape of Messages streams, and the recorded responses mutated.
#[cfg(feature = "anthropic")]
mod anthropic {
    use lmstack::provider::anthropic::Messages;

    use super::*;
    use crate::common::json_cassette;

    static RECORDED: LazyLock<Recorded> = LazyLock::new(|| {
        let mut streams = vec![
            fixture("anthropic/LmDotnetTools/sample-response-anthropic.sse.txt"),
            chunks_as_sse("anthropic/vercel-ai/anthropic-clear-thinking.1.chunks.txt"),
            chunks_as_sse("anthropic/vercel-ai/anthropic-tool-no-args.chunks.txt"),
        ];
        for name in [
            "anthropic/fantasy/TestAnthropicCommon/claude-sonnet-4/multi_tool_streaming.yaml",
            "anthropic/fantasy/TestAnthropicThinking/claude-sonnet-4/thinking-streaming.yaml",
        ] {
            streams.extend(cassette(name).into_iter().map(|e| e.response.into_bytes()));
        }
        let mut bodies = vec![
            fixture("anthropic/vercel-ai/anthropic-claude-opus-5-reasoning-high.1.json"),
            fixture("anthropic/vercel-ai/anthropic-json-tool.1.json"),
        ];
        for name in [
            "10e53c1d-51be-4c64-b5bf-99adb3fa4719",
            "555fb399-a54c-455b-9ac5-2c9673f18e12",
            "d743d628-16aa-4c9f-ae78-51deb578f746",
            "f59a9391-643b-422c-96dc-1f28bc7ea4d7",
        ] {
            for exchange in json_cassette(&format!("anthropic/anthropic-sdk-python/{name}.json")) {
                let response = exchange.response.into_bytes();
                match response.starts_with(b"event:") {
                    true => streams.push(response),
                    false => bodies.push(response),
                }
            }
        }
        Recorded { streams, bodies }
    });

    /// A content block of any kind the lifter knows, and some it does not.
    fn block() -> impl Strategy<Value = Value> {
        object(vec![
            field(
                "type",
                0,
                one_of(&[
                    "text",
                    "thinking",
                    "redacted_thinking",
                    "tool_use",
                    "server_tool_use",
                    "web_search_tool_result",
                    "image",
                ]),
            ),
            field("text", 1, text()),
            field("thinking", 1, text()),
            field("signature", 1, text()),
            field("data", 2, text()),
            field("id", 1, one_of(&["toolu_1", "toolu_2", ""])),
            field("name", 1, one_of(&["f", "g", ""])),
            field(
                "input",
                1,
                prop_oneof![Just(Value::Object(Map::new())), any_json()],
            ),
        ])
    }

    fn delta() -> impl Strategy<Value = Value> {
        object(vec![
            field(
                "type",
                0,
                one_of(&[
                    "text_delta",
                    "input_json_delta",
                    "thinking_delta",
                    "signature_delta",
                    "citations_delta",
                ]),
            ),
            field("text", 1, text()),
            field("partial_json", 1, text()),
            field("thinking", 1, text()),
            field("signature", 1, text()),
        ])
    }

    fn usage() -> impl Strategy<Value = Value> {
        let count = prop_oneof![
            Just(Value::from(12)),
            Just(Value::from(-1)),
            Just(Value::from(u64::MAX)),
            Just(Value::from(1.5e300))
        ];
        object(vec![
            field("input_tokens", 0, count.clone()),
            field("output_tokens", 0, count.clone()),
            field("cache_read_input_tokens", 1, count.clone()),
            field("cache_creation_input_tokens", 1, count),
        ])
    }

    /// One event of a Messages stream, every field optional and any field
    /// sometimes of the wrong type.
    fn event() -> impl Strategy<Value = Value> {
        let index = || prop_oneof![8 => 0u64..3, 1 => Just(u64::MAX)].prop_map(Value::from);
        let typed =
            |kind: &'static str, fields: Vec<BoxedStrategy<Option<(&'static str, Value)>>>| {
                object(fields).prop_map(move |mut value| {
                    value["type"] = kind.into();
                    value
                })
            };
        prop_oneof![
            typed(
                "message_start",
                vec![field(
                    "message",
                    0,
                    object(vec![
                        field("id", 1, one_of(&["msg_1", ""])),
                        field("usage", 1, usage()),
                    ]),
                )],
            ),
            typed(
                "content_block_start",
                vec![
                    field("index", 1, index()),
                    field("content_block", 0, block())
                ],
            ),
            typed(
                "content_block_delta",
                vec![field("index", 1, index()), field("delta", 0, delta())],
            ),
            typed("content_block_stop", vec![field("index", 1, index())]),
            typed(
                "message_delta",
                vec![
                    field(
                        "delta",
                        0,
                        object(vec![field(
                            "stop_reason",
                            0,
                            one_of(&["end_turn", "tool_use", "max_tokens", "pause_turn"]),
                        )]),
                    ),
                    field("usage", 1, usage()),
                ],
            ),
            typed("message_stop", vec![]),
            typed("ping", vec![]),
            typed(
                "error",
                vec![field(
                    "error",
                    0,
                    object(vec![
                        field("type", 1, one_of(&["overloaded_error", "api_error"])),
                        field("message", 0, text()),
                    ]),
                )],
            ),
            any_json(),
        ]
    }

    proptest! {
        #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(256)))]

        #[test]
        fn the_anthropic_lifter_takes_any_bytes_in_either_framing(
            bytes in hostile_bytes(),
            sizes in sizes(),
            sse in any::<bool>(),
            limits in small_limits(),
        ) {
            lift_checked::<Messages>(&bytes, &sizes, sse, limits)?;
        }

        #[test]
        fn the_anthropic_lifter_takes_any_events_streamed_or_whole(
            values in prop::collection::vec(event(), 1..16),
            sizes in sizes(),
            limits in small_limits(),
        ) {
            let stream: String = values.iter().map(|value| format!("data: {value}\n\n")).collect();
            lift_checked::<Messages>(stream.as_bytes(), &sizes, true, limits)?;
            let body = values[0].to_string();
            lift_checked::<Messages>(body.as_bytes(), &sizes, false, limits)?;
        }

        #[test]
        fn recorded_anthropic_responses_mutated_and_cut_anywhere(
            stream in any::<Index>(),
            body in any::<Index>(),
            mutations in prop::collection::vec(mutation(), 1..6),
            sizes in sizes(),
            limits in small_limits(),
        ) {
            mutated_alike::<Messages>(&RECORDED, stream, body, &mutations, &sizes, limits)?;
        }
    }
}

/// The recorded Gemini responses: streams and bodies.
#[cfg(feature = "gemini")]
static GEMINI_RECORDED: LazyLock<Recorded> = LazyLock::new(|| {
    let mut streams: Vec<Vec<u8>> = [
        "google/fantasy/TestGoogleCommon/gemini-3-pro-preview/multi_tool_streaming.yaml",
        "google/fantasy/TestGoogleThinking/gemini-3-pro-preview/thinking-streaming.yaml",
        "google/rig/gemini/streaming_multimodal_tool_results/streaming_history_preserves_hybrid_tool_result_image_parts.yaml",
    ]
    .into_iter()
    .flat_map(cassette)
    .map(|exchange| exchange.response.into_bytes())
    .collect();
    streams.extend(
        [
            "google/vertexai-sdk-test-data/googleai/streaming-success-thinking-function-call-thought-summary-signature.txt",
            "google/vertexai-sdk-test-data/vertexai/streaming-failure-error-mid-stream.txt",
        ]
        .map(fixture),
    );
    streams.extend(
        [
            "google/vercel-ai/google-stream-no-args-tool-call.chunks.txt",
            "google/vercel-ai/google-stream-tool-call-arguments.chunks.txt",
            "google/vercel-ai/google-tool-call-gemini3.chunks.txt",
        ]
        .map(chunks_as_sse),
    );
    let bodies = [
        "google/vercel-ai/google-tool-call.json",
        "google/vercel-ai/google-429-retry-info.json",
        "google/vertexai-sdk-test-data/vertexai/unary-success-function-call-parallel-calls.json",
    ]
    .map(fixture)
    .to_vec();
    Recorded { streams, bodies }
});

#[cfg(feature = "gemini")]
proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(256)))]

    #[test]
    fn the_gemini_lifter_takes_any_bytes_in_either_framing(
        bytes in hostile_bytes(),
        sizes in sizes(),
        sse in any::<bool>(),
        limits in small_limits(),
    ) {
        lift_checked::<GenerateContent>(&bytes, &sizes, sse, limits)?;
    }

    #[test]
    fn recorded_gemini_responses_mutated_and_cut_anywhere(
        stream in any::<Index>(),
        body in any::<Index>(),
        mutations in prop::collection::vec(mutation(), 1..6),
        sizes in sizes(),
        limits in small_limits(),
    ) {
        mutated_alike::<GenerateContent>(&GEMINI_RECORDED, stream, body, &mutations, &sizes, limits)?;
    }
}

//! Lifting what real servers send beyond the recorded fixtures: each quirk the
//! adapter claims to handle, and by property, that a streamed response joins to
//! exactly the messages of the equivalent non-streaming body.

#![cfg(feature = "openai")]

use crate::common;

use common::*;
use lmstack::provider::TransportErrorKind;
use lmstack::provider::body::BodyDecoder;
use lmstack::provider::openai_chat::{EXTRA_KEY, Lifter, LowerOptions, MESSAGE_KEY, lower};
use lmstack::service::{Machine, Output};
use lmstack::testing::Chunking;
use lmstack::{ChatRequest, Error, Event, FinishReason, Joiner, Message, ToolResult};
use proptest::prelude::*;
use serde_json::{Value, json};

fn delta(delta: Value) -> Value {
    json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": delta}]})
}

fn finish(reason: &str) -> Value {
    json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

fn call(index: Option<u32>, id: Option<&str>, name: Option<&str>, arguments: &str) -> Value {
    let mut call = json!({"type": "function", "function": {"arguments": arguments}});
    if let Some(index) = index {
        call["index"] = index.into();
    }
    if let Some(id) = id {
        call["id"] = id.into();
    }
    if let Some(name) = name {
        call["function"]["name"] = name.into();
    }
    delta(json!({"tool_calls": [call]}))
}

fn calls_of(messages: &[Message]) -> Vec<(String, String, Value)> {
    messages
        .iter()
        .flat_map(|m| m.calls())
        .map(|c| (c.id.clone(), c.name.clone(), c.arguments.clone()))
        .collect()
}

fn lift_events(body: &[u8]) -> Result<Vec<Event>, Error> {
    decode_cut(BodyDecoder::sse(Lifter::new()), body, &[body.len()])
}

#[test]
fn calls_without_ids_get_stable_ids_from_the_response_id() {
    let body = sse(&[
        call(Some(0), None, Some("add"), "{\"a\":"),
        call(Some(0), None, None, "1}"),
        call(Some(1), None, Some("neg"), "{}"),
        finish("tool_calls"),
    ]);
    assert_eq!(
        calls_of(&lift_sse(&body).unwrap()),
        vec![
            ("chatcmpl-1_call_0".into(), "add".into(), json!({"a": 1})),
            ("chatcmpl-1_call_1".into(), "neg".into(), json!({})),
        ]
    );
}

#[test]
fn every_call_at_index_zero_splits_on_a_new_id() {
    let body = sse(&[
        call(Some(0), Some("a"), Some("add"), ""),
        call(Some(0), None, None, "{\"x\":1}"),
        call(Some(0), Some("b"), Some("add"), "{\"x\":2}"),
        finish("tool_calls"),
    ]);
    assert_eq!(
        calls_of(&lift_sse(&body).unwrap()),
        vec![
            ("a".into(), "add".into(), json!({"x": 1})),
            ("b".into(), "add".into(), json!({"x": 2})),
        ]
    );
}

#[test]
fn whole_calls_without_index_or_id_split_on_a_new_name() {
    let body = sse(&[
        call(None, None, Some("add"), "{\"x\":1}"),
        call(None, None, Some("add"), "{\"x\":2}"),
        finish("tool_calls"),
    ]);
    let calls = calls_of(&lift_sse(&body).unwrap());
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].2, json!({"x": 2}));
}

#[test]
fn fragments_that_go_back_to_an_earlier_call_continue_it() {
    let body = sse(&[
        call(Some(0), Some("a"), Some("add"), "{\"x\""),
        call(Some(1), Some("b"), Some("add"), "{}"),
        call(Some(0), None, None, ":1}"),
        finish("tool_calls"),
    ]);
    let calls = calls_of(&lift_sse(&body).unwrap());
    assert_eq!(
        calls,
        [
            ("a".into(), "add".into(), json!({"x": 1})),
            ("b".into(), "add".into(), json!({}))
        ]
    );
}

#[test]
fn arguments_sent_as_an_object_are_read() {
    let body = sse(&[
        delta(
            json!({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": {"q": [1, 2]}}}]}),
        ),
        finish("tool_calls"),
    ]);
    assert_eq!(
        calls_of(&lift_sse(&body).unwrap())[0].2,
        json!({"q": [1, 2]})
    );
}

#[test]
fn vllm_and_ollama_reasoning_field_is_kept_and_echoed_back() {
    let body = sse(&[
        delta(json!({"reasoning": "Think"})),
        delta(json!({"reasoning": "ing."})),
        delta(json!({"content": "Done."})),
        finish("stop"),
    ]);
    let messages = lift_sse(&body).unwrap();
    assert_eq!(
        as_json(&messages[..1]),
        json!([{"type": "reasoning", "text": "Thinking.",
                "metadata": {"generation_id": "chatcmpl-1", "reasoning_field": "reasoning"}}])
    );
    let mut history = vec![Message::user("Hi")];
    history.extend(messages);
    history.push(Message::user("And?"));
    let body = lower(&ChatRequest::new(history), &LowerOptions::default()).unwrap();
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": "Done.", "reasoning": "Thinking."})
    );
}

#[test]
fn server_side_tool_calls_pass_through_and_are_not_sent_back() {
    let body = sse(&[
        delta(
            json!({"tool_calls": [{"index": 0, "id": "ws_1", "type": "web_search",
                                      "web_search": {"search_results": [{"title": "Rust"}]}}]}),
        ),
        delta(json!({"content": "Rust is a language."})),
        finish("stop"),
    ]);
    let messages = lift_sse(&body).unwrap();
    let call = &messages[0].calls()[0];
    assert!(call.provider_executed);
    let two_searches = sse(&[
        delta(json!({"tool_calls": [{"type": "web_search", "web_search": {"q": 1}}]})),
        delta(json!({"tool_calls": [{"type": "web_search", "web_search": {"q": 2}}]})),
        finish("stop"),
    ]);
    let searches = calls_of(&lift_sse(&two_searches).unwrap());
    assert_eq!(
        searches.iter().map(|c| c.2.clone()).collect::<Vec<_>>(),
        vec![json!({"q": 1}), json!({"q": 2})]
    );
    assert_eq!(call.name, "web_search");
    assert_eq!(
        call.arguments,
        json!({"search_results": [{"title": "Rust"}]})
    );
    let mut history = vec![Message::user("What is Rust?")];
    history.extend(messages);
    let body = lower(&ChatRequest::new(history), &LowerOptions::default()).unwrap();
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": "Rust is a language."})
    );
}

#[test]
fn finish_reasons_are_mapped() {
    let cases = [
        ("stop", false, FinishReason::Stop),
        ("stop", true, FinishReason::ToolCalls), // Ollama and vLLM send `stop` after calls
        ("length", false, FinishReason::Length),
        ("function_call", true, FinishReason::ToolCalls),
        ("content_filter", false, FinishReason::ContentFilter),
        ("sensitive", false, FinishReason::ContentFilter), // GLM
        (
            "network_error",
            false,
            FinishReason::Other("network_error".into()),
        ),
    ];
    for (wire, with_call, expected) in cases {
        let mut chunks = vec![delta(json!({"content": "x"}))];
        if with_call {
            chunks.push(call(Some(0), Some("c"), Some("f"), "{}"));
        }
        chunks.push(finish(wire));
        let mut joiner = Joiner::new();
        lift_events(&sse(&chunks))
            .unwrap()
            .into_iter()
            .for_each(|e| joiner.push(e));
        assert_eq!(joiner.finish_reason(), Some(&expected), "{wire}");
    }
}

#[test]
fn usage_of_unexpected_types_is_read_leniently_not_malformed() {
    let body = sse(&[
        delta(json!({"content": "a"})),
        json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 12.0, "completion_tokens": "7", "total_tokens": null,
                         "prompt_tokens_details": "n/a",
                         "completion_tokens_details": {"reasoning_tokens": 3.0}}}),
        // A usage that is not an object is ignored: the one before stays.
        json!({"id": "chatcmpl-1", "choices": [], "usage": "unknown", "x_groq": {"usage": [1, 2]}}),
    ]);
    let messages = lift_events(&body).map(Joiner::join).unwrap();
    let usage = messages
        .iter()
        .find_map(|m| match m {
            Message::Usage(usage) => Some(usage),
            _ => None,
        })
        .expect("the usage is kept");
    assert_eq!(
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.cached_input_tokens,
            usage.reasoning_tokens
        ),
        (12, 0, None, Some(3))
    );
    assert_eq!(messages[0].as_text(), Some("a"));
}

#[test]
fn usage_comes_once_at_the_end_from_wherever_it_was_sent() {
    let usage = |input: u64| json!({"prompt_tokens": input, "completion_tokens": 2});
    let body = sse(&[
        json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"content": "a"}}], "usage": usage(1)}),
        json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "x_groq": {"usage": usage(2)}}),
        json!({"id": "chatcmpl-1", "choices": [], "usage": usage(3)}),
    ]);
    let events = lift_events(&body).unwrap();
    let usages: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            Event::Usage(usage) => Some(usage.input_tokens),
            _ => None,
        })
        .collect();
    assert_eq!(usages, vec![3], "the last usage, once");
    assert!(
        matches!(events.last(), Some(Event::Finish { .. })),
        "finish comes last"
    );
}

#[test]
fn content_given_as_parts_is_read_and_unknown_fields_ignored() {
    let body = sse(&[
        json!({"id": "chatcmpl-1", "obfuscation": "xyz", "choices": [{"index": 0, "logprobs": null,
               "delta": {"content": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}], "annotations": []}}]}),
        finish("stop"),
    ]);
    assert_eq!(lift_sse(&body).unwrap()[0].as_text(), Some("Hello"));
}

#[test]
fn only_the_first_choice_is_lifted() {
    let body = sse(&[
        json!({"id": "chatcmpl-1", "choices": [
            {"index": 1, "delta": {"content": "other"}},
            {"index": 0, "delta": {"content": "first"}}]}),
        finish("stop"),
    ]);
    assert_eq!(lift_sse(&body).unwrap()[0].as_text(), Some("first"));
}

#[test]
fn an_error_inside_the_stream_ends_it_with_the_provider_error() {
    let body = sse(&[
        delta(json!({"content": "partial"})),
        json!({"error": {"message": "The server had an error", "type": "server_error"}}),
    ]);
    let mut decoder = BodyDecoder::sse(Lifter::new());
    let mut events = Output::new();
    let result = decoder.push(body.into(), &mut events);
    let Some(error) = result.as_ref().err().and_then(Error::provider_error) else {
        panic!("expected a provider error, got {result:?}");
    };
    assert_eq!(error.error_type.as_deref(), Some("server_error"));
    assert!(
        error
            .to_string()
            .contains("error inside the response stream"),
        "{error}"
    );
    assert_eq!(
        Joiner::join(events.drain()),
        vec![
            Message::assistant("partial")
                .with_metadata(lmstack::Metadata::generation("chatcmpl-1"))
        ]
    );
}

#[test]
fn a_stream_cut_short_is_truncated_but_a_finished_one_needs_no_done() {
    let mut cut = String::from_utf8(sse(&[delta(json!({"content": "par"}))])).unwrap();
    cut.truncate(cut.find("data: [DONE]").unwrap());
    let result = lift_sse(cut.as_bytes());
    let Some(error) = result.as_ref().err().and_then(Error::transport_error) else {
        panic!("expected a truncated-stream error, got {result:?}");
    };
    assert_eq!(error.kind, TransportErrorKind::Truncated);
    assert!(error.to_string().contains("without `[DONE]`"), "{error}");
    let mut finished =
        String::from_utf8(sse(&[delta(json!({"content": "ok"})), finish("stop")])).unwrap();
    finished.truncate(finished.find("data: [DONE]").unwrap());
    assert_eq!(
        lift_sse(finished.as_bytes()).unwrap()[0].as_text(),
        Some("ok")
    );
}

#[test]
fn a_chunk_that_is_not_json_is_malformed_and_says_which() {
    let body = b"data: {\"choices\":[]}\n\ndata: {not json\n\n";
    let result = lift_sse(body);
    let Some(error) = result.as_ref().err().and_then(Error::transport_error) else {
        panic!("expected a malformed-stream error, got {result:?}");
    };
    assert_eq!(error.kind, TransportErrorKind::Malformed);
    assert!(error.message.contains("chunk 2"), "{error}");
    assert!(error.message.contains("{not json"), "{error}");
}

/// A message of calls only whose unknown fields are kept, streamed or whole,
/// joins to exactly one message: its `tool_calls`, the fields on its calls
/// (each delta's on its first call fragment; a whole message's on its first
/// call, as the decoder keeps a request's), no empty text beside it.
#[test]
fn a_message_of_calls_only_joins_to_one_message_holding_its_fields() {
    let fields = json!({"x_vendor": {"trace": [1, 2]}, "x_flag": null});
    let mut message = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "call_2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]});
    message
        .as_object_mut()
        .unwrap()
        .extend(fields.as_object().unwrap().clone());
    let body = json!({"id": "chatcmpl-1", "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]});
    let stream = sse(&[
        delta(json!({"role": "assistant", "content": null, "x_vendor": {"trace": [1, 2]}})),
        call(Some(0), Some("call_1"), Some("f"), "{}"),
        delta(
            json!({"x_flag": null, "tool_calls": [{"index": 1, "id": "call_2",
            "type": "function", "function": {"name": "g", "arguments": ""}}]}),
        ),
        call(Some(1), None, None, "{}"),
        finish("tool_calls"),
    ]);
    for (mode, messages) in [
        ("whole", lift_json(body.to_string().as_bytes()).unwrap()),
        ("streamed", lift_sse(&stream).unwrap()),
    ] {
        let [Message::ToolCalls(calls)] = &messages[..] else {
            panic!("{mode}: one tool_calls message, not {messages:?}");
        };
        assert_eq!(calls.calls.len(), 2, "{mode}");
        let mut kept = serde_json::Map::new();
        for call in &calls.calls {
            if let Some(Value::Object(fields)) = call.metadata.get(MESSAGE_KEY) {
                kept.extend(fields.clone());
            }
        }
        assert_eq!(Value::Object(kept), fields, "{mode}: {messages:?}");
    }
}

/// A streamed delta's unknown fields, and those of a call's later fragment,
/// are kept where they belong: with the text or reasoning of their delta,
/// or the fragment's call.
#[test]
fn a_deltas_and_a_later_fragments_unknown_fields_are_kept() {
    let stream = sse(&[
        delta(json!({"role": "assistant", "reasoning_content": "Hm", "x_r": 1})),
        delta(json!({"content": "Hi", "x_t": 2})),
        delta(json!({"x_between": 3})),
        call(Some(0), Some("call_1"), Some("f"), "{"),
        delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "}"}, "x_c": 4}]})),
        finish("tool_calls"),
    ]);
    let messages = lift_sse(&stream).unwrap();
    let extra = |message: &Message| message.metadata().get(EXTRA_KEY).cloned();
    assert_eq!(extra(&messages[0]), Some(json!({"x_r": 1})), "{messages:?}");
    assert_eq!(extra(&messages[1]), Some(json!({"x_t": 2, "x_between": 3})));
    let call = &messages[2].calls()[0];
    assert_eq!(call.metadata.get(EXTRA_KEY), Some(&json!({"x_c": 4})));
    assert_eq!(call.arguments, json!({}));
}

#[test]
fn nothing_after_done_counts() {
    let mut body = sse(&[delta(json!({"content": "a"}))]);
    body.extend_from_slice(b"data: {not json either\n\n");
    assert_eq!(lift_sse(&body).unwrap()[0].as_text(), Some("a"));
}

#[test]
fn a_refusal_goes_back_as_a_refusal() {
    let body = sse(&[delta(json!({"refusal": "No."})), finish("stop")]);
    let mut history = vec![Message::user("Do it")];
    history.extend(lift_sse(&body).unwrap());
    history.push(Message::tool_results(vec![]));
    let body = lower(&ChatRequest::new(history), &LowerOptions::default()).unwrap();
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "refusal": "No."})
    );
}

/// A random assistant turn, rendered as a non-streaming body and as a stream
/// with the quirks of various servers.
#[derive(Clone, Debug)]
struct Turn {
    reasoning: Option<(String, &'static str)>,
    content: Option<String>,
    calls: Vec<(String, Value)>,
    with_ids: bool,
    usage: Option<(u64, u64)>,
    finish: &'static str,
}

fn turn() -> impl Strategy<Value = Turn> {
    let text = "[a-zA-Z0-9 ,.é€🦀\n\"\\\\]{1,40}";
    let arguments = proptest::collection::btree_map(
        "[a-z]{1,6}",
        prop_oneof![
            any::<i32>().prop_map(Value::from),
            "[a-z \"{}\\[\\]]{0,12}".prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
        ],
        0..4,
    )
    .prop_map(|map| Value::Object(map.into_iter().collect()));
    (
        proptest::option::of((
            text,
            prop_oneof![Just("reasoning_content"), Just("reasoning")],
        )),
        proptest::option::of(text),
        proptest::collection::vec(("[a-z_]{1,10}", arguments), 0..4),
        any::<bool>(),
        proptest::option::of((0u64..10_000, 0u64..10_000)),
        prop_oneof![Just("stop"), Just("length"), Just("tool_calls")],
    )
        .prop_map(
            |(reasoning, content, calls, with_ids, usage, finish)| Turn {
                reasoning,
                content,
                calls,
                with_ids,
                usage,
                finish,
            },
        )
}

impl Turn {
    fn call_id(&self, n: usize) -> Option<String> {
        self.with_ids.then(|| format!("call_{n}x"))
    }

    fn usage_json(&self) -> Value {
        self.usage.map_or(Value::Null, |(input, output)| {
            json!({"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output})
        })
    }

    fn body(&self) -> Vec<u8> {
        let mut message = json!({"role": "assistant", "content": self.content});
        if let Some((text, field)) = &self.reasoning {
            message[*field] = text.clone().into();
        }
        if !self.calls.is_empty() {
            message["tool_calls"] = self
                .calls
                .iter()
                .enumerate()
                .map(|(n, (name, arguments))| {
                    let mut call = json!({"type": "function", "function": {"name": name, "arguments": arguments.to_string()}});
                    if let Some(id) = self.call_id(n) {
                        call["id"] = id.into();
                    }
                    call
                })
                .collect();
        }
        json!({"id": "chatcmpl-9", "object": "chat.completion",
               "choices": [{"index": 0, "message": message, "finish_reason": self.finish}],
               "usage": self.usage_json()})
        .to_string()
        .into_bytes()
    }

    /// Streamed with a quirk set picked by `style`: 0 OpenAI (fragments, index
    /// from 0, usage in a `choices: []` chunk), 1 GLM (whole calls, usage on the
    /// finish chunk, role repeated), 2 first index 1 and usage in `x_groq`, 3 every
    /// call at index 0 (needs ids).
    fn stream(&self, style: u8, seed: u64) -> Vec<u8> {
        let style = if style == 3 && !self.with_ids {
            0
        } else {
            style
        };
        let chunk = |delta: Value| {
            json!({"id": "chatcmpl-9", "object": "chat.completion.chunk",
                                          "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
        };
        let cut = Chunking::Random { seed, max: 7 };
        let mut chunks = vec![chunk(json!({"role": "assistant", "content": null}))];
        if let Some((text, field)) = &self.reasoning {
            for piece in cut.split(text) {
                chunks.push(chunk(json!({"role": "assistant", *field: piece})));
            }
        }
        if let Some(text) = &self.content {
            for piece in cut.split(text) {
                chunks.push(chunk(json!({"content": piece})));
            }
        }
        for (n, (name, arguments)) in self.calls.iter().enumerate() {
            let index = match style {
                2 => n + 1,
                3 => 0,
                _ => n,
            };
            let arguments = arguments.to_string();
            let mut first = json!({"index": index, "type": "function", "function": {"name": name, "arguments": ""}});
            if let Some(id) = self.call_id(n) {
                first["id"] = id.into();
            }
            if style == 1 {
                first["function"]["arguments"] = arguments.into();
                chunks.push(chunk(json!({"tool_calls": [first]})));
                continue;
            }
            chunks.push(chunk(json!({"tool_calls": [first]})));
            for piece in cut.split(&arguments) {
                chunks.push(chunk(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                ));
            }
        }
        let mut last = json!({"id": "chatcmpl-9", "choices": [{"index": 0, "delta": {}, "finish_reason": self.finish}]});
        match style {
            1 => last["usage"] = self.usage_json(),
            2 => last["x_groq"] = json!({"usage": self.usage_json()}),
            _ => {}
        }
        chunks.push(last);
        if style == 0 || style == 3 {
            chunks.push(json!({"id": "chatcmpl-9", "choices": [], "usage": self.usage_json()}));
        }
        sse(&chunks)
    }
}

fn joined(events: Vec<Event>) -> (Vec<Message>, Option<FinishReason>) {
    let mut joiner = Joiner::new();
    events.into_iter().for_each(|event| joiner.push(event));
    let finish = joiner.finish_reason().cloned();
    (joiner.finish(), finish)
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(256)))]

    /// One core, two modes: any turn streamed in any server's style and cut at
    /// any bytes joins to the messages (and finish reason) of its non-streaming body.
    #[test]
    fn a_joined_stream_equals_the_non_streaming_body(
        turn in turn(),
        style in 0u8..4,
        seed in any::<u64>(),
        sizes in proptest::collection::vec(1usize..40, 1..8),
    ) {
        let body = turn.body();
        let whole = joined(decode_cut(BodyDecoder::json(Lifter::new()), &body, &[body.len()]).unwrap());
        let stream = turn.stream(style, seed);
        let streamed = joined(decode_cut(BodyDecoder::sse(Lifter::new()), &stream, &sizes).unwrap());
        prop_assert_eq!(&streamed, &whole);
        // And what went in comes out: text, reasoning, every call with its arguments.
        let (messages, _) = whole;
        let text: String = messages.iter().filter_map(Message::as_text).collect();
        prop_assert_eq!(text, turn.content.clone().unwrap_or_default());
        let calls: Vec<(String, Value)> = messages.iter().flat_map(|m| m.calls()).map(|c| (c.name.clone(), c.arguments.clone())).collect();
        prop_assert_eq!(calls, turn.calls.clone());
    }
}

#[test]
fn tool_results_follow_their_calls_on_the_wire() {
    let body = sse(&[
        call(Some(0), Some("c1"), Some("add"), "{\"a\":1}"),
        finish("tool_calls"),
    ]);
    let mut history = vec![Message::user("add")];
    history.extend(lift_sse(&body).unwrap());
    history.push(Message::tool_results(vec![ToolResult::text(
        "c1", "add", "1",
    )]));
    let body = lower(&ChatRequest::new(history), &LowerOptions::default()).unwrap();
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": "add"},
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{\"a\":1}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "1"},
        ])
    );
}

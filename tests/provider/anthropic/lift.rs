//! Lifting Anthropic Messages responses: every recorded fixture to exactly
//! the text, reasoning (with signatures), calls and usage it holds; each wire
//! quirk the lifter claims to handle; and by property, that any cutting of a
//! recorded stream joins to the same messages.

#![cfg(feature = "anthropic")]

use crate::common;

use common::*;
use lmstack::provider::TransportErrorKind;
use lmstack::provider::anthropic::{BLOCK_KEY, CACHE_CREATION_KEY, Lifter};
use lmstack::provider::body::BodyDecoder;
use lmstack::{Error, Event, FinishReason, Joiner, Message};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Lifts a body (SSE or JSON) into messages and the finish reason.
fn lift(body: &[u8], sse: bool) -> Result<(Vec<Message>, Option<FinishReason>), Error> {
    lift_cut(body, sse, &[body.len().max(1)])
}

fn lift_cut(
    body: &[u8],
    sse: bool,
    sizes: &[usize],
) -> Result<(Vec<Message>, Option<FinishReason>), Error> {
    let decoder = if sse {
        BodyDecoder::sse(Lifter::new())
    } else {
        BodyDecoder::json(Lifter::new())
    };
    let events = decode_cut(decoder, body, sizes)?;
    let mut joiner = Joiner::new();
    events.into_iter().for_each(|event| joiner.push(event));
    let reason = joiner.finish_reason().cloned();
    Ok((joiner.finish(), reason))
}

/// Short texts whole; long ones by length, start and end.
fn clip(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= 140 {
        return text.to_owned();
    }
    let start: String = chars[..30].iter().collect();
    let end: String = chars[chars.len() - 30..].iter().collect();
    format!("[{}] {start}…{end}", chars.len())
}

/// One line per message: what it holds, read concretely.
fn describe(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(|message| match message {
            Message::Text(text) => format!("text: {}", clip(&text.text)),
            Message::Reasoning(reasoning) => {
                let signature = reasoning.signature.as_deref().unwrap_or("");
                format!(
                    "reasoning: {} | signature [{}] {}…{}",
                    clip(&reasoning.text),
                    signature.len(),
                    &signature[..signature.len().min(12)],
                    &signature[signature.len().saturating_sub(10)..]
                )
            }
            Message::ToolCalls(calls) => calls
                .calls
                .iter()
                .map(|call| format!("call {} {} {}", call.id, call.name, call.arguments))
                .collect::<Vec<_>>()
                .join("; "),
            Message::Usage(usage) => format!(
                "usage: in {} out {} cached {:?} created {:?} reasoning {:?}",
                usage.input_tokens,
                usage.output_tokens,
                usage.cached_input_tokens,
                usage
                    .metadata
                    .get(CACHE_CREATION_KEY)
                    .and_then(Value::as_u64),
                usage.reasoning_tokens
            ),
            other => format!("{other:?}"),
        })
        .collect()
}

fn check(body: &[u8], sse: bool, id: &str, reason: FinishReason, expected: &[&str]) {
    let (messages, finish) = lift(body, sse).unwrap();
    assert_eq!(describe(&messages), expected);
    assert_eq!(finish, Some(reason));
    for message in &messages {
        if !matches!(message, Message::ToolCalls(_)) {
            assert_eq!(message.metadata().generation_id(), Some(id), "{message:?}");
        }
    }
}

#[test]
fn lmdotnet_thinking_text_and_three_parallel_calls_with_cache_usage() {
    check(
        &fixture("anthropic/LmDotnetTools/sample-response-anthropic.sse.txt"),
        true,
        "msg_01DuSdEwtL6gBD5P3yjXmn1W",
        FinishReason::ToolCalls,
        &[
            "reasoning: [1640] The user is asking about a pat…tart searching for references. | signature [2392] EvwNCkYICxgC…yPTNyOGAE=",
            "text: I'll analyze this question about deafness and hemorrhagic nephritis. Let me search for relevant medical information.",
            concat!(
                r#"call toolu_01RLUSfSTu6jhjV9fiQFwWtU mcp__books__llm_query_search {"sessionId":"q1","query":"Alport syndrome deafness hemorrhagic nephritis glomerular basement membrane","count":4}; "#,
                r#"call toolu_01FYxsVEJbCtRWHT5L3ZAVJk mcp__books__llm_query_search {"sessionId":"q1","query":"type IV collagen hereditary nephritis sensorineural deafness","count":3}; "#,
                r#"call toolu_01MJKNLFBZd4Cw2sLfa2dTdJ mcp__books__llm_query_search {"sessionId":"q1","query":"basement membrane splitting lamellation electron microscopy nephritis","count":3}"#,
            ),
            // 9 uncached + 619 written to the cache + 12055 read from it.
            "usage: in 12683 out 732 cached Some(12055) created Some(619) reasoning None",
        ],
    );
}

#[test]
fn vercel_thinking_with_signature_then_text() {
    check(
        &chunks_as_sse("anthropic/vercel-ai/anthropic-clear-thinking.1.chunks.txt"),
        true,
        "msg_01Y6V41gqPaKWEw7iPouH7iW",
        FinishReason::Stop,
        &[
            "reasoning: The previous result was 925. Now I need to divide that by 5.\n\n925 ÷ 5 = 185 | signature [332] EvQBCkYICxgC…hT6Ca17BgB",
            "text: 925 ÷ 5 = 185",
            "usage: in 69 out 53 cached Some(0) created Some(0) reasoning None",
        ],
    );
}

#[test]
fn vercel_a_tool_without_arguments_sends_an_empty_fragment_read_as_an_empty_object() {
    check(
        &chunks_as_sse("anthropic/vercel-ai/anthropic-tool-no-args.chunks.txt"),
        true,
        "msg_01GE2RKp1VYsPzdFs3sS9z5S",
        FinishReason::ToolCalls,
        &[
            "text: I'll update the issue list for you.",
            "call toolu_01QE1WLsSVp5hy5Q3GmGTmjP updateIssueList {}",
            "usage: in 565 out 48 cached Some(0) created Some(0) reasoning None",
        ],
    );
}

#[test]
fn vercel_whole_bodies_thinking_and_a_nested_tool_input() {
    check(
        &fixture("anthropic/vercel-ai/anthropic-claude-opus-5-reasoning-high.1.json"),
        false,
        "msg_011CdMNhurHSJCxCC2NB7WYc",
        FinishReason::Stop,
        &[
            "reasoning: [352] I need to find all roots of th…olynomial has exactly 3 roots. | signature [752] CAISqwQKhwEI…Wz7dcYAQ==",
            "text: [2644] ## Step 1: Set up the problem\n…ndently confirming the answer.",
            "usage: in 51 out 1699 cached Some(0) created Some(0) reasoning Some(139)",
        ],
    );
    check(
        &fixture("anthropic/vercel-ai/anthropic-json-tool.1.json"),
        false,
        "msg_0191iYfpERYfS27xLsdW2nbb",
        FinishReason::ToolCalls,
        &[
            concat!(
                r#"call toolu_01Q9ExVZnzZj7E2QQYHYtNUa json {"elements":[{"location":"San Francisco","temperature":-5,"condition":"snowy"},"#,
                r#"{"location":"London","temperature":0,"condition":"snowy"},{"location":"Paris","temperature":23,"condition":"cloudy"},"#,
                r#"{"location":"Berlin","temperature":-9,"condition":"snowy"}]}"#
            ),
            "usage: in 1151 out 87 cached Some(0) created Some(0) reasoning None",
        ],
    );
}

#[test]
fn fantasy_streams_parallel_calls_thinking_and_answers() {
    let common =
        cassette("anthropic/fantasy/TestAnthropicCommon/claude-sonnet-4/multi_tool_streaming.yaml");
    check(
        common[0].response.as_bytes(),
        true,
        "msg_01PSvJdjd5keNSD63VHjYzex",
        FinishReason::ToolCalls,
        &[
            "text: I'll add and multiply the numbers 2 and 3 for you.",
            r#"call toolu_01UYxUYC2zRPY8wiutnF48eP add {"a":2,"b":3}; call toolu_01VaRx1jpWCvPhi7L4kywAcd multiply {"a":2,"b":3}"#,
            "usage: in 502 out 137 cached Some(0) created Some(0) reasoning None",
        ],
    );
    check(
        common[1].response.as_bytes(),
        true,
        "msg_015WPQbJC4ysDAi7LuCD43Fp",
        FinishReason::Stop,
        &[
            "text: The results are:\n- 2 + 3 = 5\n- 2 × 3 = 6",
            "usage: in 700 out 31 cached Some(0) created Some(0) reasoning None",
        ],
    );
    let thinking =
        cassette("anthropic/fantasy/TestAnthropicThinking/claude-sonnet-4/thinking-streaming.yaml");
    check(
        thinking[0].response.as_bytes(),
        true,
        "msg_01KTBB57LAzaSZs8kMNvfnsY",
        FinishReason::ToolCalls,
        &[
            "reasoning: [301] The user is asking for weather…ers to make the function call. | signature [636] EtYDCkYICxgC…hPFVAYAQ==",
            r#"call toolu_01Js4AMfx5qpTLhwTusnvT68 weather {"location":"Florence, Italy"}"#,
            "usage: in 424 out 119 cached Some(0) created Some(0) reasoning None",
        ],
    );
    check(
        thinking[1].response.as_bytes(),
        true,
        "msg_01G4mwZgqcFN38A9H8S9pPAA",
        FinishReason::Stop,
        &[
            "text: [202] The current weather in Florenc…ir conditioning when possible.",
            "usage: in 558 out 51 cached Some(0) created Some(0) reasoning None",
        ],
    );
}

#[test]
fn sdk_python_cassettes_streamed_and_whole() {
    let streamed =
        json_cassette("anthropic/anthropic-sdk-python/555fb399-a54c-455b-9ac5-2c9673f18e12.json");
    check(
        streamed[0].response.as_bytes(),
        true,
        "msg_01AusY9WEbCaj3N7Tv5J4YjH",
        FinishReason::ToolCalls,
        &[
            r#"call toolu_018acGYLtfR52q9yDbWaEdQZ get_weather {"location":"San Francisco, CA","units":"f"}"#,
            "usage: in 656 out 74 cached Some(0) created Some(0) reasoning None",
        ],
    );
    check(
        streamed[1].response.as_bytes(),
        true,
        "msg_016HxyUMAncysqX7dn1kWNRx",
        FinishReason::Stop,
        &[
            "text: The weather in San Francisco, CA is currently:\n- **Temperature:** 68°F\n- **Condition:** Sunny\n\nIt's a nice sunny day!",
            "usage: in 770 out 38 cached Some(0) created Some(0) reasoning None",
        ],
    );
    let whole =
        json_cassette("anthropic/anthropic-sdk-python/10e53c1d-51be-4c64-b5bf-99adb3fa4719.json");
    check(
        whole[0].response.as_bytes(),
        false,
        "msg_01RMQBcKf2dxTq6qfi31BBTz",
        FinishReason::ToolCalls,
        &[
            r#"call toolu_01A9HHF5Ezy3oBrKmSgfASm9 get_weather {"location":"San Francisco, CA","units":"f"}"#,
            "usage: in 656 out 74 cached Some(0) created Some(0) reasoning None",
        ],
    );
    check(
        whole[1].response.as_bytes(),
        false,
        "msg_01GJyhkguJrrqMbZNzEybYFL",
        FinishReason::Stop,
        &[
            "text: [278] I apologize, but I'm getting a…ther for a different location?",
            "usage: in 760 out 63 cached Some(0) created Some(0) reasoning None",
        ],
    );
    let wrong =
        json_cassette("anthropic/anthropic-sdk-python/f59a9391-643b-422c-96dc-1f28bc7ea4d7.json");
    check(
        wrong[0].response.as_bytes(),
        false,
        "msg_01QCEBW49MBPHFuFwMDoFtPP",
        FinishReason::ToolCalls,
        &[
            r#"call toolu_01GHndag5wQmbzNihYmV2UBj get_weather {"location":"San Francisco, CA","units":"c"}"#,
            "usage: in 659 out 74 cached Some(0) created Some(0) reasoning None",
        ],
    );
    let retried =
        json_cassette("anthropic/anthropic-sdk-python/d743d628-16aa-4c9f-ae78-51deb578f746.json");
    check(
        retried[2].response.as_bytes(),
        false,
        "msg_01Q1NNiF8NA8EywFhxTmFbeP",
        FinishReason::Stop,
        &[
            r#"text: {"items":[{"product_name":"Green Tea","price":5.50,"quantity":2},{"product_name":"Coffee","price":3.00,"quantity":1}],"total":14.0}"#,
            "usage: in 406 out 50 cached Some(0) created Some(0) reasoning None",
        ],
    );
}

#[test]
fn error_bodies_of_the_fixtures_are_typed_provider_errors() {
    for (name, index, kind) in [
        (
            "f59a9391-643b-422c-96dc-1f28bc7ea4d7",
            1,
            "invalid_request_error",
        ),
        (
            "d743d628-16aa-4c9f-ae78-51deb578f746",
            0,
            "rate_limit_error",
        ),
    ] {
        let exchange =
            &json_cassette(&format!("anthropic/anthropic-sdk-python/{name}.json"))[index];
        let error = lift(exchange.response.as_bytes(), false).unwrap_err();
        let error = error.provider_error().expect("a provider error");
        assert_eq!(error.error_type.as_deref(), Some(kind));
        assert_eq!(error.provider, "anthropic");
    }
}

fn start() -> Value {
    json!({"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 10, "output_tokens": 1}}})
}

fn block(index: u32, block: Value) -> Value {
    json!({"type": "content_block_start", "index": index, "content_block": block})
}

fn delta(index: u32, delta: Value) -> Value {
    json!({"type": "content_block_delta", "index": index, "delta": delta})
}

fn stop(index: u32) -> Value {
    json!({"type": "content_block_stop", "index": index})
}

fn end(reason: &str, usage: Value) -> [Value; 2] {
    [
        json!({"type": "message_delta", "delta": {"stop_reason": reason}, "usage": usage}),
        json!({"type": "message_stop"}),
    ]
}

#[test]
fn redacted_thinking_arrives_whole_and_keeps_its_data() {
    let mut events = vec![
        start(),
        block(
            0,
            json!({"type": "redacted_thinking", "data": "EncRypTed=="}),
        ),
        stop(0),
        block(1, json!({"type": "text", "text": ""})),
        delta(1, json!({"type": "text_delta", "text": "Hi"})),
        stop(1),
    ];
    events.extend(end("end_turn", json!({"output_tokens": 5})));
    let (messages, _) = lift(&typed_sse(&events), true).unwrap();
    let Message::Reasoning(reasoning) = &messages[0] else {
        panic!("{messages:?}")
    };
    assert!(reasoning.redacted);
    assert_eq!(reasoning.signature.as_deref(), Some("EncRypTed=="));
    assert_eq!(messages[1].as_text(), Some("Hi"));
}

#[test]
fn server_tool_blocks_are_kept_whole_for_replay() {
    let result = json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
        "content": [{"type": "web_search_result", "url": "https://x", "encrypted_content": "Zz"}]});
    let mut events = vec![
        start(),
        block(
            0,
            json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}),
        ),
        delta(
            0,
            json!({"type": "input_json_delta", "partial_json": "{\"query\":\"rust\"}"}),
        ),
        stop(0),
        block(1, result.clone()),
        stop(1),
        block(2, json!({"type": "text", "text": ""})),
        delta(2, json!({"type": "text_delta", "text": "Found"})),
        delta(
            2,
            json!({"type": "citations_delta", "citation": {"type": "web_search_result_location"}}),
        ),
        stop(2),
    ];
    events.extend(end("end_turn", json!({"output_tokens": 5})));
    let (messages, _) = lift(&typed_sse(&events), true).unwrap();
    let call = &messages[0].calls()[0];
    assert!(call.provider_executed);
    assert_eq!(
        (call.id.as_str(), call.name.as_str()),
        ("srvtoolu_1", "web_search")
    );
    assert_eq!(call.arguments, json!({"query": "rust"}));
    assert_eq!(
        call.metadata.get(BLOCK_KEY),
        Some(&json!({"type": "server_tool_use"}))
    );
    assert_eq!(messages[1].metadata().get(BLOCK_KEY), Some(&result));
    assert_eq!(messages[1].as_text(), Some(""));
    assert_eq!(messages[2].as_text(), Some("Found"));
}

#[test]
fn stop_reasons_are_mapped() {
    for (wire, reason) in [
        ("end_turn", FinishReason::Stop),
        ("stop_sequence", FinishReason::Stop),
        ("tool_use", FinishReason::ToolCalls),
        ("max_tokens", FinishReason::Length),
        ("model_context_window_exceeded", FinishReason::Length),
        ("refusal", FinishReason::Refusal),
        ("pause_turn", FinishReason::Other("pause_turn".into())),
    ] {
        let mut events = vec![start()];
        events.extend(end(wire, json!({})));
        assert_eq!(
            lift(&typed_sse(&events), true).unwrap().1,
            Some(reason),
            "{wire}"
        );
    }
}

#[test]
fn usage_is_cumulative_each_reading_replaces_the_last() {
    let mut events = vec![start()];
    events.push(json!({"type": "message_delta", "delta": {}, "usage": {"output_tokens": 7}}));
    events.extend(end(
        "end_turn",
        json!({"output_tokens": 9, "cache_read_input_tokens": 4}),
    ));
    let (messages, _) = lift(&typed_sse(&events), true).unwrap();
    assert_eq!(
        describe(&messages),
        ["usage: in 14 out 9 cached Some(4) created None reasoning None"]
    );
}

#[test]
fn an_error_event_mid_stream_is_a_retryable_provider_error_when_overloaded() {
    let events = [
        start(),
        block(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "Hel"})),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ];
    let decoder = BodyDecoder::sse(Lifter::new());
    let body = typed_sse(&events);
    let error = decode_cut(decoder, &body, &[body.len()]).unwrap_err();
    let provider = error.provider_error().expect("a provider error");
    assert!(provider.is_overloaded());
    assert_eq!(provider.message, "Overloaded");
    #[cfg(feature = "retry")]
    assert!(lmstack::retry::is_retryable(&error));
}

#[test]
fn pings_unknown_events_blocks_and_deltas_are_ignored() {
    let mut events = vec![
        start(),
        json!({"type": "ping"}),
        json!({"type": "brand_new_event", "x": 1}),
        block(0, json!({"type": "container_upload", "file_id": "f"})),
        delta(0, json!({"type": "text_delta", "text": "not text"})),
        stop(0),
        block(1, json!({"type": "text", "text": ""})),
        delta(1, json!({"type": "mystery_delta", "text": "?"})),
        delta(1, json!({"type": "text_delta", "text": "ok"})),
        stop(1),
    ];
    events.extend(end("end_turn", json!({})));
    let (messages, _) = lift(&typed_sse(&events), true).unwrap();
    assert_eq!(
        describe(&messages),
        [
            "text: ok",
            "usage: in 10 out 1 cached None created None reasoning None"
        ]
    );
}

#[test]
fn missing_indices_and_counts_are_read_leniently_and_an_explicit_zero_is_not_absence() {
    let events = [
        json!({"type": "message_start", "message": {"id": "msg_1",
            "usage": {"input_tokens": 10.0, "output_tokens": 1, "cache_creation_input_tokens": null}}}),
        json!({"type": "content_block_start", "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "delta": {"type": "text_delta", "text": "ok"}}),
        json!({"type": "content_block_stop"}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
        // No stop reason, and one count: the reason stays, the count is 0.
        json!({"type": "message_delta", "usage": {"output_tokens": 0}}),
        json!({"type": "message_stop"}),
    ];
    let (messages, reason) = lift(&typed_sse(&events), true).unwrap();
    assert_eq!(
        describe(&messages),
        [
            "text: ok",
            "usage: in 10 out 0 cached None created None reasoning None"
        ]
    );
    assert_eq!(reason, Some(FinishReason::Stop));
}

#[test]
fn a_known_block_without_its_fields_is_malformed_and_named() {
    let events = [
        start(),
        block(0, json!({"type": "tool_use", "name": "f", "input": {}})),
    ];
    let error = lift(&typed_sse(&events), true).unwrap_err();
    assert_eq!(
        error.transport_error().map(|e| e.kind),
        Some(TransportErrorKind::Malformed)
    );
    let text = error.to_string();
    assert!(
        text.contains(
            "event 2 is not a JSON Messages stream event (content block: missing field `id`)"
        ),
        "{text}"
    );
}

#[test]
fn a_stream_cut_short_is_truncated_and_garbage_is_malformed() {
    let events = [start(), block(0, json!({"type": "text", "text": ""}))];
    let error = lift(&typed_sse(&events), true).unwrap_err();
    assert_eq!(
        error.transport_error().map(|e| e.kind),
        Some(TransportErrorKind::Truncated)
    );
    let error = lift(b"event: message_start\ndata: {not json\n\n", true).unwrap_err();
    assert_eq!(
        error.transport_error().map(|e| e.kind),
        Some(TransportErrorKind::Malformed)
    );
    assert!(error.to_string().contains("event 1"), "{error}");
}

#[test]
fn more_calls_than_the_limit_fail() {
    let mut events = vec![start()];
    for index in 0..3 {
        events.push(block(
            index,
            json!({"type": "tool_use", "id": format!("t{index}"), "name": "f", "input": {}}),
        ));
        events.push(stop(index));
    }
    events.extend(end("tool_use", json!({})));
    let body = typed_sse(&events);
    let decoder = BodyDecoder::sse(Lifter::new()).with_max_tool_calls(2);
    let error = decode_cut(decoder, &body, &[body.len()]).unwrap_err();
    assert!(
        matches!(error, Error::ToolCallLimit { limit: 2, .. }),
        "{error:?}"
    );
}

#[test]
fn tool_arguments_stream_as_fragments_of_one_call() {
    let mut events = vec![
        start(),
        block(
            0,
            json!({"type": "tool_use", "id": "t0", "name": "add", "input": {}, "caller": {"type": "direct"}}),
        ),
    ];
    for piece in ["", "{\"a\":", " 1}"] {
        events.push(delta(
            0,
            json!({"type": "input_json_delta", "partial_json": piece}),
        ));
    }
    events.push(stop(0));
    events.extend(end("tool_use", json!({})));
    let body = typed_sse(&events);
    let lifted = decode_cut(BodyDecoder::sse(Lifter::new()), &body, &[body.len()]).unwrap();
    let fragments: Vec<&str> = lifted
        .iter()
        .filter_map(|event| match event {
            Event::ToolCallDelta(delta) => Some(delta.arguments_delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(fragments, ["", "", "{\"a\":", " 1}"]);
    let messages = Joiner::join(lifted);
    let call = &messages[0].calls()[0];
    assert_eq!(call.arguments, json!({"a": 1}));
    assert_eq!(
        call.metadata.get(BLOCK_KEY),
        Some(&json!({"type": "tool_use", "caller": {"type": "direct"}}))
    );
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(64)))]

    #[test]
    fn any_cutting_of_a_recorded_stream_joins_to_the_same_messages(
        sizes in proptest::collection::vec(1usize..64, 1..16),
    ) {
        for (name, body) in recorded_anthropic_streams() {
            let whole = lift(&body, true).unwrap();
            let cut = lift_cut(&body, true, &sizes).unwrap();
            // Not only the same, but something: every recording holds a
            // message and ends with a stop reason.
            prop_assert!(!whole.0.is_empty() && whole.1.is_some(), "{}: {:?}", name, whole);
            prop_assert_eq!(cut, whole, "{}", name);
        }
    }
}

/// One model turn: signed thinking, text, calls, usage and a stop reason.
#[derive(Clone, Debug)]
struct Turn {
    thinking: Option<(String, String)>,
    text: Option<String>,
    calls: Vec<(String, Value)>,
    usage: (u64, u64, u64),
    stop: &'static str,
}

fn turn() -> impl Strategy<Value = Turn> {
    let text = "[a-zé \"\\\\{}\n]{1,16}";
    let arguments =
        proptest::collection::btree_map("[a-z]{1,4}", text, 0..3).prop_map(|map| json!(map));
    (
        proptest::option::of((text, "[A-Za-z0-9+/=]{1,24}")),
        proptest::option::of(text),
        proptest::collection::vec(("[a-z_]{1,8}", arguments), 0..4),
        (0u64..5000, 1u64..5000, 0u64..5000),
        proptest::sample::select(vec!["end_turn", "tool_use", "max_tokens", "pause_turn"]),
    )
        .prop_map(|(thinking, text, calls, usage, stop)| Turn {
            thinking,
            text,
            calls,
            usage,
            stop,
        })
}

impl Turn {
    fn blocks(&self) -> Vec<Value> {
        let mut blocks = Vec::new();
        if let Some((thinking, signature)) = &self.thinking {
            blocks.push(json!({"type": "thinking", "thinking": thinking, "signature": signature}));
        }
        if let Some(text) = &self.text {
            blocks.push(json!({"type": "text", "text": text}));
        }
        for (n, (name, input)) in self.calls.iter().enumerate() {
            blocks.push(json!({"type": "tool_use", "id": format!("toolu_{n}"), "name": name, "input": input}));
        }
        blocks
    }

    fn body(&self) -> Vec<u8> {
        let (input, output, cached) = self.usage;
        json!({"id": "msg_p", "type": "message", "role": "assistant", "content": self.blocks(),
               "stop_reason": self.stop,
               "usage": {"input_tokens": input, "output_tokens": output, "cache_read_input_tokens": cached}})
        .to_string()
        .into_bytes()
    }

    /// The turn streamed, each text cut into pieces where `cuts` says.
    fn stream(&self, cuts: &[usize]) -> Vec<u8> {
        let mut cuts = cuts.iter().cycle();
        let mut pieces = |text: &str| {
            let chars: Vec<char> = text.chars().collect();
            let mut out = Vec::new();
            let mut rest = &chars[..];
            while !rest.is_empty() {
                let size = (*cuts.next().unwrap_or(&1)).clamp(1, rest.len());
                out.push(rest[..size].iter().collect::<String>());
                rest = &rest[size..];
            }
            out
        };
        let (input, _, cached) = self.usage;
        let mut events = vec![json!({"type": "message_start", "message": {"id": "msg_p",
            "usage": {"input_tokens": input, "output_tokens": 1, "cache_read_input_tokens": cached}}})];
        for (index, whole) in (0u32..).zip(self.blocks()) {
            let mut start = whole.clone();
            match whole["type"].as_str() {
                Some("thinking") => {
                    start["thinking"] = "".into();
                    start["signature"] = "".into();
                    events.push(block(index, start));
                    for piece in pieces(whole["thinking"].as_str().unwrap()) {
                        events.push(delta(
                            index,
                            json!({"type": "thinking_delta", "thinking": piece}),
                        ));
                    }
                    for piece in pieces(whole["signature"].as_str().unwrap()) {
                        events.push(delta(
                            index,
                            json!({"type": "signature_delta", "signature": piece}),
                        ));
                    }
                }
                Some("text") => {
                    start["text"] = "".into();
                    events.push(block(index, start));
                    for piece in pieces(whole["text"].as_str().unwrap()) {
                        events.push(delta(index, json!({"type": "text_delta", "text": piece})));
                    }
                }
                _ => {
                    start["input"] = json!({});
                    events.push(block(index, start));
                    events.push(delta(
                        index,
                        json!({"type": "input_json_delta", "partial_json": ""}),
                    ));
                    for piece in pieces(&whole["input"].to_string()) {
                        events.push(delta(
                            index,
                            json!({"type": "input_json_delta", "partial_json": piece}),
                        ));
                    }
                }
            }
            events.push(json!({"type": "ping"}));
            events.push(stop(index));
        }
        events.extend(end(self.stop, json!({"output_tokens": self.usage.1})));
        typed_sse(&events)
    }
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(128)))]

    #[test]
    fn a_joined_stream_equals_the_non_streaming_body(
        turn in turn(),
        cuts in proptest::collection::vec(1usize..6, 1..8),
        sizes in proptest::collection::vec(1usize..64, 1..8),
    ) {
        let whole = lift(&turn.body(), false).unwrap();
        let streamed = lift_cut(&turn.stream(&cuts), true, &sizes).unwrap();
        prop_assert_eq!(&streamed, &whole);
        // And what went in comes out, read from the turn itself: the thinking
        // with its signature, the text, each call's id, name and input, the
        // usage and the stop reason.
        let (messages, finish) = &whole;
        let thinking: Vec<(String, Option<String>)> = messages.iter().filter_map(|m| match m {
            Message::Reasoning(thought) => Some((thought.text.clone(), thought.signature.clone())),
            _ => None,
        }).collect();
        let expected: Vec<(String, Option<String>)> = turn.thinking.iter().map(|(text, signature)| (text.clone(), Some(signature.clone()))).collect();
        prop_assert_eq!(thinking, expected);
        let text: String = messages.iter().filter_map(Message::as_text).collect();
        prop_assert_eq!(text, turn.text.clone().unwrap_or_default());
        let calls: Vec<(String, String, Value)> = messages.iter().flat_map(|m| m.calls()).map(|c| (c.id.clone(), c.name.clone(), c.arguments.clone())).collect();
        let expected: Vec<(String, String, Value)> = turn.calls.iter().enumerate().map(|(n, (name, input))| (format!("toolu_{n}"), name.clone(), input.clone())).collect();
        prop_assert_eq!(calls, expected);
        let usage: Vec<(u64, u64)> = messages.iter().filter_map(|m| match m {
            Message::Usage(usage) => Some((usage.input_tokens, usage.output_tokens)),
            _ => None,
        }).collect();
        let (uncached, output, cached) = turn.usage;
        prop_assert_eq!(usage, vec![(uncached + cached, output)]);
        let stop = match turn.stop {
            "end_turn" => FinishReason::Stop,
            "tool_use" => FinishReason::ToolCalls,
            "max_tokens" => FinishReason::Length,
            other => FinishReason::Other(other.into()),
        };
        prop_assert_eq!(finish.clone(), Some(stop));
    }
}

//! Every recorded Chat Completions response under `tests/fixtures/openai*` lifts to
//! exactly the text, reasoning, calls, arguments and usage it holds, however its
//! bytes are cut; and the follow-up requests recorded in the cassettes are
//! reproduced by lowering the equivalent canonical history.

#![cfg(feature = "openai")]

use crate::common;

use common::*;
use lmstack::provider::ProviderError;
use lmstack::provider::body::BodyDecoder;
use lmstack::provider::openai_chat::{
    Lifter, LowerOptions, MaxTokensField, ToolResultMedia, lower,
};
use lmstack::service::{Machine, Output};
use lmstack::{
    ChatRequest, ContentBlock, Error, FinishReason, Joiner, Media, Message, ToolCall, ToolResult,
};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Lifts a whole response (SSE when `stream`, else JSON): messages and finish reason.
fn lift(body: &[u8], stream: bool) -> (Vec<Message>, Option<FinishReason>) {
    let mut decoder = if stream {
        BodyDecoder::sse(Lifter::new())
    } else {
        BodyDecoder::json(Lifter::new())
    };
    let mut events = Output::new();
    decoder.push(body.to_vec().into(), &mut events).unwrap();
    decoder.finish(&mut events).unwrap();
    let mut joiner = Joiner::new();
    events.drain().for_each(|event| joiner.push(event));
    let finish = joiner.finish_reason().cloned();
    (joiner.finish(), finish)
}

fn assert_lifts(body: &[u8], stream: bool, expected: Value, finish: FinishReason) {
    let (messages, reason) = lift(body, stream);
    assert_eq!(as_json(&messages), expected);
    assert_eq!(reason, Some(finish));
}

fn generation(id: &str) -> Value {
    json!({"generation_id": id})
}

fn reasoning_meta(id: &str) -> Value {
    json!({"generation_id": id, "reasoning_field": "reasoning_content"})
}

fn add_and_multiply(add: &str, multiply: &str) -> Value {
    json!({"type": "tool_calls", "calls": [
        {"id": add, "name": "add", "arguments": {"a": 2, "b": 3}},
        {"id": multiply, "name": "multiply", "arguments": {"a": 2, "b": 3}},
    ]})
}

#[test]
fn gpt_4o_non_streaming_cassette() {
    let exchanges = cassette("openai/fantasy/gpt-4o-multi_tool.yaml");
    assert_lifts(
        exchanges[0].response.as_bytes(),
        false,
        json!([
            add_and_multiply("call_fifE5poZ3dg3JDUKGFi48NGq", "call_cvvIly4eGLZUYOMhAviT8jAF"),
            {"type": "usage", "input_tokens": 110, "output_tokens": 50, "cached_input_tokens": 0,
             "reasoning_tokens": 0, "metadata": generation("chatcmpl-DuLdJw8LrXaHfxHUWoGkO4mQLLtEk")},
        ]),
        FinishReason::ToolCalls,
    );
    let id = "chatcmpl-DuLdL7Zz4iHqgl5WrFxQFnJ1CvSsK";
    assert_lifts(
        exchanges[1].response.as_bytes(),
        false,
        json!([
            {"type": "text", "role": "assistant", "metadata": generation(id),
             "text": "The result of adding 2 and 3 is 5, and the result of multiplying 2 and 3 is 6."},
            {"type": "usage", "input_tokens": 176, "output_tokens": 28, "cached_input_tokens": 0,
             "reasoning_tokens": 0, "metadata": generation(id)},
        ]),
        FinishReason::Stop,
    );
}

#[test]
fn gpt_4o_streaming_cassette() {
    let exchanges = cassette("openai/fantasy/gpt-4o-multi_tool_streaming.yaml");
    assert_lifts(
        exchanges[0].response.as_bytes(),
        true,
        json!([
            add_and_multiply("call_ehIWdjL1abZk1h8FWGLQ0Hie", "call_fBSgA47J5VeONggizTIvl7AH"),
            {"type": "usage", "input_tokens": 106, "output_tokens": 50, "cached_input_tokens": 0,
             "reasoning_tokens": 0, "metadata": generation("chatcmpl-DuLdMEdkw5VsZSxKY3i9G934hT7LM")},
        ]),
        FinishReason::ToolCalls,
    );
    let id = "chatcmpl-DuLdNvsdmTNPbya2tqjr8GbYubTqm";
    assert_lifts(
        exchanges[1].response.as_bytes(),
        true,
        json!([
            {"type": "text", "role": "assistant", "metadata": generation(id),
             "text": "The sum of 2 and 3 is 5, and the product is 6."},
            {"type": "usage", "input_tokens": 172, "output_tokens": 20, "cached_input_tokens": 0,
             "reasoning_tokens": 0, "metadata": generation(id)},
        ]),
        FinishReason::Stop,
    );
}

#[test]
fn openai_python_refusal_is_marked_text_and_a_refusal_finish() {
    let id = "chatcmpl-ABfw4IfQfCCrcuybFm41wJyxjbkz7";
    assert_lifts(
        &fixture("openai/openai-python/refusal.sse"),
        true,
        json!([
            {"type": "text", "role": "assistant", "text": "I'm sorry, I can't assist with that request.",
             "metadata": {"generation_id": id, "refusal": true}},
            {"type": "usage", "input_tokens": 79, "output_tokens": 11, "reasoning_tokens": 0,
             "metadata": generation(id)},
        ]),
        FinishReason::Refusal,
    );
}

#[test]
fn openai_python_max_tokens_reached() {
    let id = "chatcmpl-ABfw3Oqj8RD0z6aJiiX37oTjV2HFh";
    assert_lifts(
        &fixture("openai/openai-python/max_tokens_reached.sse"),
        true,
        json!([
            {"type": "text", "role": "assistant", "text": "{\"", "metadata": generation(id)},
            {"type": "usage", "input_tokens": 79, "output_tokens": 1, "reasoning_tokens": 0,
             "metadata": generation(id)},
        ]),
        FinishReason::Length,
    );
}

#[test]
fn openai_python_strict_tool() {
    assert_lifts(
        &fixture("openai/openai-python/strict_tool.sse"),
        true,
        json!([
            {"type": "tool_calls", "calls": [{"id": "call_c91SqDXlYFuETYv8mUHzz6pp", "name": "GetWeatherArgs",
              "arguments": {"city": "Edinburgh", "country": "UK", "units": "c"}}]},
            {"type": "usage", "input_tokens": 76, "output_tokens": 24, "reasoning_tokens": 0,
             "metadata": generation("chatcmpl-ABfw8AOXnoa2kzy11vVTSjuQhHCQr")},
        ]),
        FinishReason::ToolCalls,
    );
}

fn weather_and_stock(weather: &str, stock: &str) -> Value {
    json!({"type": "tool_calls", "calls": [
        {"id": weather, "name": "GetWeatherArgs", "arguments": {"city": "Edinburgh", "country": "GB", "units": "c"}},
        {"id": stock, "name": "get_stock_price", "arguments": {"ticker": "AAPL", "exchange": "NASDAQ"}},
    ]})
}

#[test]
fn openai_python_parallel_tools_streamed_and_whole() {
    assert_lifts(
        &fixture("openai/openai-python/parallel_tools.sse"),
        true,
        json!([
            weather_and_stock("call_JMW1whyEaYG438VE1OIflxA2", "call_DNYTawLBoN8fj3KN6qU9N1Ou"),
            {"type": "usage", "input_tokens": 149, "output_tokens": 60, "reasoning_tokens": 0,
             "metadata": generation("chatcmpl-ABfwAwrNePHUgBBezonVC6MX3zd63")},
        ]),
        FinishReason::ToolCalls,
    );
    assert_lifts(
        &fixture("openai/openai-python/parallel_tools.json"),
        false,
        json!([
            weather_and_stock("call_fdNz3vOBKYgOIpMdWotB9MjY", "call_h1DWI1POMJLb0KwIyQHWXD4p"),
            {"type": "usage", "input_tokens": 149, "output_tokens": 60, "reasoning_tokens": 0,
             "metadata": generation("chatcmpl-ABfvyvfNWKcl7Ohqos4UFrmMs1v4C")},
        ]),
        FinishReason::ToolCalls,
    );
}

#[test]
fn an_error_body_is_a_typed_provider_error() {
    let body = fixture("openai/vercel-ai/unsupported-parameter-error.json");
    let now = std::time::SystemTime::UNIX_EPOCH;
    let error =
        ProviderError::from_response("openai", 400, &[("x-request-id", "req_7")], &body, now);
    assert_eq!(error.status, 400);
    assert_eq!(error.error_type.as_deref(), Some("invalid_request_error"));
    assert_eq!(error.code.as_deref(), Some("unsupported_parameter"));
    assert_eq!(error.param.as_deref(), Some("max_tokens"));
    assert_eq!(error.request_id.as_deref(), Some("req_7"));
    assert!(
        error
            .message
            .starts_with("Unsupported parameter: 'max_tokens'")
    );
    // The same object in a 200 body (some servers do that) is the same error.
    let result = lift_json(&body);
    let Some(error) = result.as_ref().err().and_then(Error::provider_error) else {
        panic!("expected a provider error, got {result:?}");
    };
    assert_eq!(error.code.as_deref(), Some("unsupported_parameter"));
}

#[test]
fn llama_cpp_reasoning_content_and_a_tool_call() {
    let exchanges = cassette("openai_compat/fantasy/llama-cpp-gpt-oss-tool_streaming.yaml");
    let id = "chatcmpl-lz25qRqbjeLO8nbwF4DJYJQc7KjZrG2z";
    assert_lifts(
        exchanges[0].response.as_bytes(),
        true,
        json!([
            {"type": "reasoning", "text": "User wants weather in Florence, Italy. We can use the weather function.",
             "metadata": reasoning_meta(id)},
            {"type": "tool_calls", "calls": [{"id": "g2KOIWzn722hzEaZQmNVP4roUPEiYafL", "name": "weather",
              "arguments": {"location": "Florence, Italy"}}]},
            {"type": "usage", "input_tokens": 139, "output_tokens": 41, "metadata": generation(id)},
        ]),
        FinishReason::ToolCalls,
    );
    let id = "chatcmpl-PRVO688pTstdVIzbBa8S5l5QzcgoxAWl";
    assert_lifts(
        exchanges[1].response.as_bytes(),
        true,
        json!([
            {"type": "text", "role": "assistant", "text": "The current weather in Florence, Italy is **40\u{202f}°C**.",
             "metadata": generation(id)},
            {"type": "usage", "input_tokens": 196, "output_tokens": 18, "metadata": generation(id)},
        ]),
        FinishReason::Stop,
    );
}

#[test]
fn glm_reasoning_text_and_whole_calls() {
    let exchanges = cassette("openai_compat/fantasy/zai-glm-4-7-flash-multi_tool_streaming.yaml");
    let id = "20260313050448e162ecc8207a4c47";
    assert_lifts(
        exchanges[0].response.as_bytes(),
        true,
        json!([
            {"type": "reasoning", "metadata": reasoning_meta(id),
             "text": "The user wants me to both add and multiply the numbers 2 and 3. I need to use both the add and multiply functions on the same time, as instructed.\n\nFor add: a=2, b=3\nFor multiply: a=2, b=3\n\nI'll call both functions together."},
            {"type": "text", "role": "assistant", "metadata": generation(id),
             "text": "I'll both add and multiply the numbers 2 and 3 for you."},
            add_and_multiply("call_4f8cb52342424eb9bbc1b20e", "call_0d06add371834452b339ffdb"),
            {"type": "usage", "input_tokens": 275, "output_tokens": 112, "cached_input_tokens": 43,
             "reasoning_tokens": 64, "metadata": generation(id)},
        ]),
        FinishReason::ToolCalls,
    );
    let id = "20260313050451de4dfedf43994285";
    assert_lifts(
        exchanges[1].response.as_bytes(),
        true,
        json!([
            {"type": "reasoning", "metadata": reasoning_meta(id),
             "text": "I got the results:\n- Addition: 2 + 3 = 5\n- Multiplication: 2 × 3 = 6\n\nNow I can provide a complete answer to the user."},
            {"type": "text", "role": "assistant", "metadata": generation(id),
             "text": "I've calculated both operations for you:\n\n- **Addition:** 2 + 3 = **5**\n- **Multiplication:** 2 × 3 = **6**"},
            {"type": "usage", "input_tokens": 395, "output_tokens": 79, "cached_input_tokens": 251,
             "reasoning_tokens": 41, "metadata": generation(id)},
        ]),
        FinishReason::Stop,
    );
}

#[test]
fn glm_thinking_round_trip() {
    let exchanges = cassette("openai_compat/fantasy/zai-glm-4-7-flash-thinking-streaming.yaml");
    let id = "202603130505331e1698c2b13a4e98";
    assert_lifts(
        exchanges[0].response.as_bytes(),
        true,
        json!([
            {"type": "reasoning", "metadata": reasoning_meta(id),
             "text": "The user is asking about the weather in Florence, Italy. I have a weather function available that can get weather information for a location. The required parameter is \"location\" which should be a city name. The user specified \"Florence, Italy\" so I should use \"Florence\" as the location parameter."},
            {"type": "text", "role": "assistant", "metadata": generation(id),
             "text": "I'll check the weather in Florence, Italy for you."},
            {"type": "tool_calls", "calls": [{"id": "call_330c741a86144cb7a385bc6d", "name": "weather",
              "arguments": {"location": "Florence"}}]},
            {"type": "usage", "input_tokens": 173, "output_tokens": 87, "cached_input_tokens": 172,
             "reasoning_tokens": 63, "metadata": generation(id)},
        ]),
        FinishReason::ToolCalls,
    );
    let id = "2026031305053599aa59710f974b49";
    assert_lifts(
        exchanges[1].response.as_bytes(),
        true,
        json!([
            {"type": "reasoning", "metadata": reasoning_meta(id),
             "text": "The weather function returned \"40 C\" which appears to be the current temperature in Florence. This seems quite hot at 40 degrees Celsius. I should provide this information to the user, though I should note that this might be the current temperature."},
            {"type": "text", "role": "assistant", "metadata": generation(id),
             "text": "The current weather in Florence, Italy is 40°C (104°F). That's quite hot!"},
            {"type": "usage", "input_tokens": 266, "output_tokens": 71, "cached_input_tokens": 177,
             "reasoning_tokens": 49, "metadata": generation(id)},
        ]),
        FinishReason::Stop,
    );
}

#[test]
fn llama_cpp_answer_after_an_image_tool_result() {
    let exchanges = cassette("openai_compat/rig/llamacpp-image_tool_result.yaml");
    let id = "chatcmpl-REDACTED_1";
    assert_lifts(
        exchanges[0].response.as_bytes(),
        false,
        json!([
            {"type": "text", "role": "assistant", "text": "Pink", "metadata": generation(id)},
            {"type": "usage", "input_tokens": 61, "output_tokens": 2, "cached_input_tokens": 60,
             "metadata": generation(id)},
        ]),
        FinishReason::Stop,
    );
}

#[test]
fn tool_indexes_starting_at_one() {
    assert_lifts(
        &fixture("openai_compat/vercel-ai/anthropic-fallback-tool-call.sse"),
        true,
        json!([
            {"type": "text", "role": "assistant", "text": "Reading it.", "metadata": generation("msg_sanitized")},
            {"type": "tool_calls", "calls": [{"id": "toolu_sanitized", "name": "read_file",
              "arguments": {"path": "a.txt"}}]},
        ]),
        FinishReason::ToolCalls,
    );
}

#[test]
fn groq_whole_call_and_x_groq_usage() {
    assert_lifts(
        &chunks_as_sse("openai_compat/vercel-ai/groq-tool-call.chunks.txt"),
        true,
        json!([
            {"type": "tool_calls", "calls": [{"id": "tk85n1k4m", "name": "weather", "arguments": {}}]},
            {"type": "usage", "input_tokens": 210, "output_tokens": 15,
             "metadata": generation("chatcmpl-b610d559-f156-4aca-8827-24b4fe6af54f")},
        ]),
        FinishReason::ToolCalls,
    );
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(64)))]

    /// Cut anywhere, every streamed fixture gives the events of the whole body.
    #[test]
    fn any_cutting_of_a_recorded_stream_gives_the_same_events(
        sizes in proptest::collection::vec(1usize..64, 1..16),
        crlf in any::<bool>(),
    ) {
        for (name, body) in recorded_openai_streams() {
            let whole = decode_cut(BodyDecoder::sse(Lifter::new()), &body, &[body.len()]).unwrap();
            let body = if crlf {
                String::from_utf8(body).unwrap().replace('\n', "\r\n").into_bytes()
            } else {
                body
            };
            let cut = decode_cut(BodyDecoder::sse(Lifter::new()), &body, &sizes).unwrap();
            prop_assert_eq!(cut, whole, "{}", name);
        }
    }
}

/// Lowers the recorded first request, then the history of the second one (the
/// first request's messages, the lifted first response, the tool results), and
/// compares both with what was recorded — as JSON, arguments parsed.
fn reproduces_the_cassette(name: &str, options: &LowerOptions) {
    let exchanges = cassette(name);
    let stream = exchanges[0].request["stream"] == true;
    let first = canonical_request(&exchanges[0].request);
    assert_eq!(
        normalise_request(lower(&first, options).unwrap()),
        normalise_request(exchanges[0].request.clone()),
        "{name}: first request"
    );
    let (lifted, _) = lift(exchanges[0].response.as_bytes(), stream);
    let calls = lifted
        .iter()
        .flat_map(|m| m.calls())
        .cloned()
        .collect::<Vec<_>>();
    let results = recorded_results(&exchanges[1].request, &calls);
    assert!(
        !results.is_empty(),
        "{name}: the follow-up carries tool results"
    );

    // As the lifted messages followed by a tool_results message …
    let mut split = first.clone();
    split.messages.extend(lifted.iter().cloned());
    split.messages.push(Message::tool_results(results.clone()));
    // … and as a tool_aggregate in place of the calls (what the function layer emits).
    let mut aggregated = first.clone();
    for message in &lifted {
        aggregated.messages.push(match message {
            Message::ToolCalls(calls) => {
                Message::tool_aggregate(calls.calls.clone(), results.clone())
            }
            other => other.clone(),
        });
    }
    for history in [split, aggregated] {
        assert_eq!(
            normalise_request(lower(&history, options).unwrap()),
            normalise_request(exchanges[1].request.clone()),
            "{name}: follow-up request"
        );
    }
}

fn strict_false() -> LowerOptions {
    LowerOptions {
        strict_tools: Some(false),
        ..LowerOptions::default()
    }
}

#[test]
fn gpt_4o_follow_up_requests_are_reproduced() {
    reproduces_the_cassette("openai/fantasy/gpt-4o-multi_tool.yaml", &strict_false());
    reproduces_the_cassette(
        "openai/fantasy/gpt-4o-multi_tool_streaming.yaml",
        &strict_false(),
    );
}

#[test]
fn glm_follow_up_requests_echo_reasoning_content() {
    reproduces_the_cassette(
        "openai_compat/fantasy/zai-glm-4-7-flash-multi_tool_streaming.yaml",
        &strict_false(),
    );
    reproduces_the_cassette(
        "openai_compat/fantasy/zai-glm-4-7-flash-thinking-streaming.yaml",
        &strict_false(),
    );
}

#[test]
fn llama_cpp_follow_up_request_echoes_reasoning_content() {
    let options = LowerOptions {
        max_tokens_field: MaxTokensField::MaxCompletionTokens,
        ..strict_false()
    };
    reproduces_the_cassette(
        "openai_compat/fantasy/llama-cpp-gpt-oss-tool_streaming.yaml",
        &options,
    );
}

#[test]
fn llama_cpp_image_tool_result_request_is_reproduced_with_the_native_policy() {
    let exchange = &cassette("openai_compat/rig/llamacpp-image_tool_result.yaml")[0];
    let url = exchange.request["messages"][1]["content"][0]["image_url"]["url"]
        .as_str()
        .unwrap();
    let data = url.strip_prefix("data:image/png;base64,").unwrap();
    let mut request = ChatRequest::new(vec![
        Message::tool_calls(vec![ToolCall::new(
            "call_REDACTED_1",
            "view_file",
            json!({}),
        )]),
        Message::tool_results(vec![ToolResult::new(
            "call_REDACTED_1",
            "view_file",
            vec![ContentBlock::Image(Media::base64("image/png", data))],
        )]),
        Message::user("Call view_file, then reply with ONLY the dominant colour name."),
    ])
    .model("Qwen3-VL-2B-Instruct-Q8_0");
    request.options.max_tokens = Some(30);
    request.options.temperature = Some(0.0);
    let options = LowerOptions {
        tool_result_media: ToolResultMedia::Native,
        ..LowerOptions::default()
    };
    assert_eq!(lower(&request, &options).unwrap(), exchange.request);
}

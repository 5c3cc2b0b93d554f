//! The OpenAI provider over real HTTP on loopback, through the real transport:
//! recorded responses served cut at random byte boundaries, error answers,
//! headers, timeouts and the retry layer.

#![cfg(all(feature = "openai", feature = "function", feature = "retry"))]

use crate::common;

use std::time::Duration;

use common::server::{Answer, Server};
use common::*;
use lmstack::provider::openai_chat::{OpenAi, OpenAiConfig};
use lmstack::provider::transport::HttpConfig;
use lmstack::provider::{ApiKey, TransportErrorKind};
use lmstack::{ChatRequest, Error, Event, Message};
use tower::ServiceExt;

fn provider(server: &Server) -> OpenAi {
    OpenAi::new(OpenAiConfig::new(server.base_url()).model("test-model")).unwrap()
}

fn request(stream: bool) -> ChatRequest {
    ChatRequest::new(vec![Message::user("Add and multiply 2 and 3")]).streaming(stream)
}

/// The recorded streams of the fixtures, with what they lift to whole.
fn recorded() -> Vec<(String, Vec<u8>)> {
    let mut bodies = vec![];
    for name in [
        "openai/fantasy/gpt-4o-multi_tool_streaming.yaml",
        "openai_compat/fantasy/zai-glm-4-7-flash-multi_tool_streaming.yaml",
        "openai_compat/fantasy/llama-cpp-gpt-oss-tool_streaming.yaml",
    ] {
        bodies.push((
            name.to_owned(),
            cassette(name)[0].response.clone().into_bytes(),
        ));
    }
    for name in [
        "openai/openai-python/parallel_tools.sse",
        "openai/openai-python/refusal.sse",
    ] {
        bodies.push((name.to_owned(), fixture(name)));
    }
    bodies
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_streams_over_loopback_cut_at_random_bytes() {
    for (name, body) in recorded() {
        let expected = lift_sse(&body).unwrap();
        for seed in 0..4u64 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let sizes: Vec<usize> = (0..32).map(|_| rng.usize(1..=48)).collect();
            let server = Server::start(vec![Answer::ok("text/event-stream", &body, &sizes)]).await;
            let reply = provider(&server).oneshot(request(true)).await.unwrap();
            assert!(!reply.is_ready(), "a streaming reply streams");
            let messages = reply.collect().await.unwrap();
            assert_eq!(messages, expected, "{name}, seed {seed}");
            let (headers, sent) = &server.requests()[0];
            assert_eq!(sent["stream"], true);
            assert_eq!(sent["stream_options"]["include_usage"], true);
            assert_eq!(sent["model"], "test-model");
            assert_eq!(headers["accept"], "text/event-stream");
        }
    }
}

#[tokio::test]
async fn a_recorded_body_over_loopback_in_non_streaming_mode() {
    let exchange = &cassette("openai/fantasy/gpt-4o-multi_tool.yaml")[0];
    let body = exchange.response.as_bytes();
    let server = Server::start(vec![Answer::ok("application/json", body, &[7, 100, 3])]).await;
    let reply = provider(&server).oneshot(request(false)).await.unwrap();
    assert!(reply.is_ready(), "a non-streaming reply is in memory");
    let events = reply.collect_events().await.unwrap();
    assert!(
        events.iter().all(|e| matches!(
            e,
            Event::Message { .. } | Event::Usage(_) | Event::Finish { .. }
        )),
        "the deltas joined: {events:?}"
    );
    assert!(
        matches!(
            &events[events.len() - 2..],
            [Event::Usage(_), Event::Finish { .. }]
        ),
        "usage and finish stay events, in their places: {events:?}"
    );
    assert_eq!(lmstack::Joiner::join(events), lift_json(body).unwrap());
    assert!(server.requests()[0].1.get("stream").is_none());
}

#[tokio::test]
async fn a_server_that_streams_json_anyway_is_read_by_its_content_type() {
    let body = cassette("openai/fantasy/gpt-4o-multi_tool.yaml")[1]
        .response
        .clone();
    let server = Server::start(vec![Answer::ok("application/json", body.as_bytes(), &[5])]).await;
    let messages = provider(&server)
        .oneshot(request(true))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(messages, lift_json(body.as_bytes()).unwrap());
}

#[tokio::test]
async fn an_http_error_is_a_typed_provider_error() {
    let body = fixture("openai/vercel-ai/unsupported-parameter-error.json");
    let server = Server::start(vec![Answer::error(
        400,
        &body,
        &[("x-request-id", "req_abc")],
    )])
    .await;
    let result = provider(&server).oneshot(request(true)).await;
    let Some(error) = result.as_ref().err().and_then(Error::provider_error) else {
        panic!("expected a provider error, got {result:?}");
    };
    assert_eq!(error.status, 400);
    assert_eq!(error.code.as_deref(), Some("unsupported_parameter"));
    assert_eq!(error.request_id.as_deref(), Some("req_abc"));
    let text = error.to_string();
    assert!(
        text.starts_with("openai: HTTP 400 (invalid_request_error, unsupported_parameter)"),
        "{text}"
    );
}

#[tokio::test]
async fn the_key_goes_in_the_header_and_never_in_debug_output() {
    let body = cassette("openai/fantasy/gpt-4o-multi_tool.yaml")[1]
        .response
        .clone();
    let server = Server::start(vec![Answer::ok("application/json", body.as_bytes(), &[64])]).await;
    let config = OpenAiConfig::new(server.base_url()).api_key(ApiKey::new("sk-very-secret"));
    assert!(!format!("{config:?}").contains("sk-very-secret"));
    let provider = OpenAi::new(config).unwrap();
    let http_request = provider.http_request(request(false)).unwrap();
    assert!(!format!("{http_request:?}").contains("sk-very-secret"));
    provider.oneshot(request(false)).await.unwrap();
    assert_eq!(
        server.requests()[0].0["authorization"],
        "Bearer sk-very-secret"
    );
}

#[tokio::test]
async fn a_connection_refused_is_a_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let provider = OpenAi::new(OpenAiConfig::new(format!("http://{addr}/v1"))).unwrap();
    let result = provider.oneshot(request(true)).await;
    let Some(error) = result.as_ref().err().and_then(Error::transport_error) else {
        panic!("expected a connect error, got {result:?}");
    };
    assert_eq!(error.kind, TransportErrorKind::Connect);
    assert!(
        error
            .to_string()
            .contains(&format!("POST http://{addr}/v1/chat/completions")),
        "{error}"
    );
}

/// The retry layer over the real transport, with its clock and jitter injected:
/// the waits are recorded (and not slept), so they can be checked exactly.
#[cfg(feature = "retry")]
mod through_retry {
    use tower::Layer;

    use super::*;
    use crate::common::retry::recorded_retries;

    /// Asks `server` through the retry layer: the reply's messages, and the waits.
    async fn messages_with_retries(server: &Server) -> (Vec<Message>, Vec<Duration>) {
        let (layer, waits) = recorded_retries();
        let messages = layer
            .layer(provider(server))
            .oneshot(request(true))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let waits = waits.lock().unwrap().clone();
        (messages, waits)
    }

    #[tokio::test]
    async fn retry_honours_retry_after_exactly_and_succeeds() {
        let body = cassette("openai/fantasy/gpt-4o-multi_tool_streaming.yaml")[1]
            .response
            .clone();
        let server = Server::start(vec![
            Answer::error(
                429,
                br#"{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}"#,
                &[("retry-after-ms", "300")],
            ),
            Answer::ok("text/event-stream", body.as_bytes(), &[13]),
        ])
        .await;
        let (messages, waits) = messages_with_retries(&server).await;
        assert_eq!(waits, vec![Duration::from_millis(300)]);
        assert_eq!(messages, lift_sse(body.as_bytes()).unwrap());
        assert_eq!(server.requests().len(), 2);
    }

    #[tokio::test]
    async fn a_stream_that_breaks_before_its_first_event_is_retried() {
        let body = cassette("openai/fantasy/gpt-4o-multi_tool_streaming.yaml")[1]
            .response
            .clone();
        // Only the role chunk (no event) arrives before the connection drops.
        let role_chunk = body.split("\n\n").next().unwrap().to_owned() + "\n\n";
        let mut broken = Answer::ok("text/event-stream", role_chunk.as_bytes(), &[1000]);
        broken.break_after = true;
        let server = Server::start(vec![
            broken,
            Answer::ok("text/event-stream", body.as_bytes(), &[50]),
        ])
        .await;
        let (messages, waits) = messages_with_retries(&server).await;
        assert_eq!(messages, lift_sse(body.as_bytes()).unwrap());
        assert_eq!(waits, vec![Duration::from_millis(50)]);
        assert_eq!(server.requests().len(), 2);
    }

    #[tokio::test]
    async fn a_stream_that_breaks_after_its_first_event_is_not_retried() {
        let body = cassette("openai/fantasy/gpt-4o-multi_tool_streaming.yaml")[1]
            .response
            .clone();
        let head: String = body
            .split("\n\n")
            .take(4)
            .map(|chunk| format!("{chunk}\n\n"))
            .collect();
        let mut broken = Answer::ok("text/event-stream", head.as_bytes(), &[usize::MAX]);
        broken.break_after = true;
        let server = Server::start(vec![broken]).await;
        let (layer, waits) = recorded_retries();
        let reply = layer
            .layer(provider(&server))
            .oneshot(request(true))
            .await
            .unwrap();
        let items: Vec<Result<Event, Error>> = futures::StreamExt::collect(reply).await;
        let text: String = items
            .iter()
            .filter_map(|item| match item {
                Ok(Event::TextDelta(delta)) => Some(delta.text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, "The sum of");
        let end = items.last().and_then(|item| item.as_ref().err());
        let Some(error) = end.and_then(Error::transport_error) else {
            panic!("expected the stream to end with a transport error, got {end:?}");
        };
        assert_eq!(error.kind, TransportErrorKind::Interrupted, "{error}");
        assert_eq!(
            server.requests().len(),
            1,
            "not replayed after the first event"
        );
        assert!(waits.lock().unwrap().is_empty());
    }
}

#[tokio::test]
async fn a_stalled_stream_times_out() {
    let body = cassette("openai/fantasy/gpt-4o-multi_tool_streaming.yaml")[1]
        .response
        .clone();
    let mut stalled = Answer::ok("text/event-stream", body.as_bytes(), &[1000]);
    stalled.stall = Duration::from_secs(3);
    let server = Server::start(vec![stalled]).await;
    let config = OpenAiConfig::new(server.base_url())
        .http(HttpConfig::default().read_timeout(Duration::from_millis(300)));
    let reply = OpenAi::new(config)
        .unwrap()
        .oneshot(request(true))
        .await
        .unwrap();
    let result = reply.collect().await;
    let Some(error) = result.as_ref().err().and_then(Error::transport_error) else {
        panic!("expected a timeout, got {result:?}");
    };
    assert_eq!(error.kind, TransportErrorKind::Timeout, "{error}");
    assert!(
        error
            .to_string()
            .contains("reading the response: no data within the read_timeout of 300ms"),
        "{error}"
    );
}

/// GLM-style multi-round tool calling over HTTP: round one streams the recorded
/// reasoning, text and two whole calls; the calls' results go back as
/// `role: "tool"` messages (with the reasoning echoed as GLM expects), and the
/// server receives exactly the recorded second request.
#[tokio::test]
async fn glm_two_rounds_replay_the_recorded_conversation() {
    let exchanges = cassette("openai_compat/fantasy/zai-glm-4-7-flash-multi_tool_streaming.yaml");
    let server = Server::start(
        exchanges
            .iter()
            .map(|exchange| {
                Answer::ok(
                    "text/event-stream",
                    exchange.response.as_bytes(),
                    &[29, 3, 101],
                )
            })
            .collect(),
    )
    .await;
    let mut config = OpenAiConfig::new(server.base_url());
    config.wire.lowering.strict_tools = Some(false);
    let provider = OpenAi::new(config).unwrap();

    let mut request = canonical_request(&exchanges[0].request);
    let first = provider
        .clone()
        .oneshot(request.clone())
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let calls: Vec<_> = first.iter().flat_map(|m| m.calls()).cloned().collect();
    let results = recorded_results(&exchanges[1].request, &calls);
    for message in first {
        request.messages.push(match message {
            Message::ToolCalls(calls) => Message::tool_aggregate(calls.calls, results.clone()),
            other => other,
        });
    }
    let second = provider
        .oneshot(request)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();

    assert_eq!(second, lift_sse(exchanges[1].response.as_bytes()).unwrap());
    let received = server.requests();
    for (round, exchange) in exchanges.iter().enumerate() {
        assert_eq!(
            normalise_request(received[round].1.clone()),
            normalise_request(exchange.request.clone()),
            "round {round}"
        );
    }
}

/// The recorded GLM conversation driven by the real layers rather than by hand.
#[cfg(feature = "function")]
mod through_the_tool_loop {
    use std::convert::Infallible;

    use lmstack::function::{FunctionCallLayer, Tool, ToolLoopLayer, ToolRegistry};
    use serde_json::{Value, json};
    use tower::ServiceBuilder;

    use super::*;

    const GLM: &str = "openai_compat/fantasy/zai-glm-4-7-flash-multi_tool_streaming.yaml";

    /// The recording's tools, as real tools: `add` and `multiply` with the
    /// recorded descriptions and schemas, computing from the parsed arguments.
    fn recorded_tools(request: &Value) -> Vec<Tool> {
        let tools = request["tools"].as_array().unwrap();
        tools
            .iter()
            .map(|tool| {
                let function = &tool["function"];
                let name = function["name"].as_str().unwrap();
                let operation: fn(i64, i64) -> i64 = match name {
                    "add" => |a, b| a + b,
                    "multiply" => |a, b| a * b,
                    other => panic!("a tool the test does not know: {other}"),
                };
                Tool::dynamic(
                    name,
                    function["description"].as_str().unwrap(),
                    function["parameters"].clone(),
                    move |args: Value| async move {
                        let (a, b) = (args["a"].as_i64().unwrap(), args["b"].as_i64().unwrap());
                        Ok::<_, Infallible>(json!(operation(a, b)))
                    },
                )
            })
            .collect()
    }

    /// The recorded first answer with a server-side `web_search` call added
    /// before its finish chunk (no GLM recording has one).
    fn with_a_server_side_call(body: &str) -> String {
        let chunk = json!({"id": "20260313050448e162ecc8207a4c47", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 2, "id": "ws_1", "type": "web_search",
                "web_search": {"search_results": [{"title": "Arithmetic"}]}}]}}]});
        let mut events: Vec<String> = body.split("\n\n").map(str::to_owned).collect();
        let finish = events
            .iter()
            .position(|event| event.contains(r#""finish_reason":"tool_calls""#))
            .expect("the recorded finish chunk");
        events.insert(finish, format!("data: {chunk}"));
        events.join("\n\n")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn glm_two_rounds_through_the_tool_loop_send_exactly_the_recorded_requests() {
        let exchanges = cassette(GLM);
        let first = with_a_server_side_call(&exchanges[0].response);
        let server = Server::start(vec![
            Answer::ok("text/event-stream", first.as_bytes(), &[29, 3, 101]),
            Answer::ok(
                "text/event-stream",
                exchanges[1].response.as_bytes(),
                &[29, 3, 101],
            ),
        ])
        .await;
        let mut config = OpenAiConfig::new(server.base_url());
        config.wire.lowering.strict_tools = Some(false);
        let registry = ToolRegistry::new(recorded_tools(&exchanges[0].request)).unwrap();
        let stack = ServiceBuilder::new()
            .layer(ToolLoopLayer::new())
            .layer(FunctionCallLayer::new(registry))
            .service(OpenAi::new(config).unwrap());
        let mut request = canonical_request(&exchanges[0].request);
        request.options.tools.clear(); // the function layer declares its tools
        let messages = stack
            .oneshot(request)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();

        // Both results went back as `role: "tool"` messages with their
        // `tool_call_id`, and the server-side call was not: exactly the recording.
        let received = server.requests();
        assert_eq!(received.len(), 2, "two rounds");
        for (round, exchange) in exchanges.iter().enumerate() {
            assert_eq!(
                normalise_request(received[round].1.clone()),
                normalise_request(exchange.request.clone()),
                "round {round}"
            );
        }
        // The server-side call was passed through, not run.
        let passed: Vec<_> = messages
            .iter()
            .filter(|message| matches!(message, Message::ToolCalls(_)))
            .flat_map(Message::calls)
            .collect();
        assert_eq!(passed.len(), 1, "{messages:?}");
        assert_eq!(passed[0].name, "web_search");
        assert!(passed[0].provider_executed);
        let answered: Vec<(&str, String)> = messages
            .iter()
            .flat_map(Message::results)
            .map(|result| (result.name.as_str(), result.text_content()))
            .collect();
        assert_eq!(
            answered,
            [("add", "5".to_owned()), ("multiply", "6".to_owned())]
        );
        // The reply ends with the second round's answer.
        let second = lift_sse(exchanges[1].response.as_bytes()).unwrap();
        assert!(messages.ends_with(&second), "{messages:?}");
    }
}

/// A wire that signs the whole request, as AWS SigV4 does: the hook sees the
/// final URL, the body and the time.
#[derive(Clone, Debug, Default)]
struct Signed(lmstack::provider::openai_chat::ChatCompletions);

impl lmstack::provider::Wire for Signed {
    const KIND: lmstack::provider::Kind = lmstack::provider::Kind::OpenAiChat;
    const KEY_ENV: &'static str = "SIGNED_KEY";
    const DEFAULT_BASE_URL: &'static str = "http://127.0.0.1:9/v1";
    type Lifter = lmstack::provider::openai_chat::Lifter;

    fn path(&self, request: &ChatRequest) -> String {
        self.0.path(request)
    }

    fn authorize(
        &self,
        key: &ApiKey,
        request: &mut lmstack::provider::transport::HttpRequest,
        now: std::time::SystemTime,
    ) -> Result<(), Error> {
        let secs = now.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let sum: u64 = request.body().iter().map(|&b| u64::from(b)).sum();
        let signature = format!(
            "{} {} {} {sum} {secs} {}",
            request.method(),
            request.uri().path(),
            request.body().len(),
            key.expose().len()
        );
        lmstack::provider::wire::key_header(
            request,
            http::HeaderName::from_static("x-signature"),
            &signature,
            "signed",
        )
    }

    fn lower(&self, request: &ChatRequest) -> Result<serde_json::Value, Error> {
        self.0.lower(request)
    }
}

#[tokio::test]
async fn a_wire_can_sign_the_whole_request_at_the_time_given() {
    let body = cassette("openai/fantasy/gpt-4o-multi_tool.yaml")[1]
        .response
        .clone();
    let server = Server::start(vec![Answer::ok("application/json", body.as_bytes(), &[64])]).await;
    let config = lmstack::provider::ProviderConfig::<Signed>::new(server.base_url())
        .api_key(ApiKey::new("sk-12345"));
    let provider = lmstack::provider::Provider::new(config).unwrap();
    let at = std::time::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
    let signed = provider.http_request_at(request(false), at).unwrap();
    let sum: u64 = signed.body().iter().map(|&b| u64::from(b)).sum();
    let expected = format!(
        "POST /v1/chat/completions {} {sum} 1445412480 8",
        signed.body().len()
    );
    assert_eq!(signed.headers()["x-signature"], expected.as_str());
    assert!(signed.headers()["x-signature"].is_sensitive());
    assert!(!signed.headers().contains_key("authorization"));

    provider.oneshot(request(false)).await.unwrap();
    let sent = &server.requests()[0].0["x-signature"];
    assert!(
        sent.to_str()
            .unwrap()
            .starts_with("POST /v1/chat/completions ")
    );
}

//! `lmstack serve`'s observability as an operator sees it: the spans of each
//! request and upstream attempt exported to an OTLP endpoint (a loopback
//! receiver here, `http/json`, configured by the standard variables; held
//! until SIGTERM flushes them), no conversation text unless opted in, and the
//! GenAI histograms at `/metrics`.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::cli::{Serving, serve_command, start, write_config};
use common::server::{Answer, Server};
use lmstack::provider::openai_chat::{OpenAi, OpenAiConfig};
use lmstack::{ChatRequest, Message};
use serde_json::{Value, json};
use tower::ServiceExt;

/// What the client asks: words that must reach no span by default.
const PROMPT: &str = "the plan nobody may read";

/// The upstream's whole answer.
fn whole_answer() -> Answer {
    let reply = json!({"id": "chatcmpl-up", "object": "chat.completion", "created": 1,
        "model": "up-gpt", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": "Understood."}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}});
    Answer::ok(
        "application/json",
        reply.to_string().as_bytes(),
        &[usize::MAX],
    )
}

/// The upstream's streamed answer.
fn streamed_answer() -> Answer {
    let chunk = |delta: Value, finish: Value, usage: Value| {
        let chunk = json!({"id": "c", "object": "chat.completion.chunk", "created": 1,
            "model": "up-gpt", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            "usage": usage});
        format!("data: {chunk}\n\n")
    };
    let body = [
        chunk(
            json!({"role": "assistant", "content": "Under"}),
            Value::Null,
            Value::Null,
        ),
        chunk(json!({"content": "stood."}), Value::Null, Value::Null),
        chunk(
            json!({}),
            json!("stop"),
            json!({"prompt_tokens": 2, "completion_tokens": 4, "total_tokens": 6}),
        ),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    Answer::ok("text/event-stream", body.as_bytes(), &[usize::MAX])
}

/// A busy upstream that asks to be asked again at once.
fn busy() -> Answer {
    let body = json!({"error": {"message": "busy", "type": "server_error"}});
    Answer::error(503, body.to_string().as_bytes(), &[("retry-after", "0")])
}

/// The gateway serving `gpt` from `upstream` (retried), its spans sent to
/// `receiver` as `variables` say; its same-wire fast path on or off.
fn gateway(
    dir: &tempfile::TempDir,
    upstream: &Server,
    receiver: &Server,
    variables: &[(&str, &str)],
    fast_path: bool,
) -> Serving {
    let config = write_config(
        dir,
        &format!(
            "[models.gpt]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"up-gpt\"\n\
             fast_path = {fast_path}\n",
            upstream.base_url()
        ),
    );
    let mut command = serve_command(&["--config", &config], None);
    command
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://{}", receiver.addr),
        )
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .env("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=team-a")
        .env("OTEL_SERVICE_NAME", "gateway-under-test")
        // Nothing leaves before the end: the spans arrive only if SIGTERM
        // flushes them.
        .env("OTEL_BSP_SCHEDULE_DELAY", "600000")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT");
    command.envs(variables.iter().copied());
    start(command)
}

/// A receiver of OTLP traces that accepts every export.
async fn receiver() -> Server {
    let accepted = Answer::ok("application/json", b"{}", &[usize::MAX]);
    Server::start_with_standing(Vec::new(), vec![("/v1/traces", accepted)]).await
}

/// Asks `gpt` at `serving` for an answer to [`PROMPT`].
async fn ask(serving: &Serving, stream: bool) -> String {
    let client = OpenAi::new(OpenAiConfig::new(format!("{}/v1", serving.base)).model("gpt"));
    let request = ChatRequest::new(vec![Message::user(PROMPT)]).streaming(stream);
    let reply = client.unwrap().oneshot(request).await.unwrap();
    let messages = reply.collect().await.unwrap();
    messages.iter().filter_map(Message::as_text).collect()
}

/// Sends SIGTERM to `serving` and waits for it to exit successfully.
async fn stop(serving: Serving) {
    serving.signal(libc::SIGTERM);
    serving.exits_successfully().await;
}

/// A span as exported: its name, kind, ids and attributes (their values
/// unwrapped from OTLP's typed values).
#[derive(Debug)]
struct Exported {
    name: String,
    kind: i64,
    span_id: String,
    parent: String,
    attributes: BTreeMap<String, Value>,
}

impl Exported {
    fn attribute(&self, key: &str) -> &Value {
        self.attributes.get(key).unwrap_or(&Value::Null)
    }
}

/// An OTLP JSON value (`{"stringValue": …}`, `{"intValue": …}`, `{"arrayValue":
/// {"values": […]}}`) as plain JSON.
fn plain(value: &Value) -> Value {
    if let Some(text) = value.get("stringValue") {
        return text.clone();
    }
    if let Some(int) = value.get("intValue") {
        let int = int.as_i64().or_else(|| int.as_str()?.parse().ok());
        return int.map_or(Value::Null, Value::from);
    }
    if let Some(values) = value
        .pointer("/arrayValue/values")
        .and_then(Value::as_array)
    {
        return values.iter().map(plain).collect();
    }
    value.clone()
}

/// The attributes of an OTLP JSON object, plain.
fn attributes(object: &Value) -> BTreeMap<String, Value> {
    let attributes = object["attributes"].as_array().cloned().unwrap_or_default();
    attributes
        .iter()
        .map(|pair| {
            (
                pair["key"].as_str().unwrap().to_owned(),
                plain(&pair["value"]),
            )
        })
        .collect()
}

/// Every span `receiver` was sent, and the resources they came with.
fn exported(receiver: &Server) -> (Vec<Exported>, Vec<BTreeMap<String, Value>>) {
    let mut spans = Vec::new();
    let mut resources = Vec::new();
    for (_, body) in receiver.requests() {
        for resource in body["resourceSpans"].as_array().unwrap() {
            resources.push(attributes(&resource["resource"]));
            for scope in resource["scopeSpans"].as_array().unwrap() {
                for span in scope["spans"].as_array().unwrap() {
                    let id = |key: &str| span[key].as_str().unwrap_or_default().to_owned();
                    spans.push(Exported {
                        name: span["name"].as_str().unwrap().to_owned(),
                        kind: span["kind"].as_i64().unwrap_or_default(),
                        span_id: id("spanId"),
                        parent: id("parentSpanId"),
                        attributes: attributes(span),
                    });
                }
            }
        }
    }
    (spans, resources)
}

/// OTLP's span kinds.
const SERVER: i64 = 2;
const CLIENT: i64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_and_upstream_attempt_is_a_genai_span_flushed_on_sigterm() {
    // The same spans whether the request is forwarded as it came (the
    // same-wire fast path) or decoded, lifted and encoded again.
    for fast_path in [true, false] {
        spans_of_one_request_and_its_two_attempts(fast_path).await;
    }
}

async fn spans_of_one_request_and_its_two_attempts(fast_path: bool) {
    let upstream = Server::start(vec![busy(), whole_answer()]).await;
    let receiver = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let serving = gateway(&dir, &upstream, &receiver, &[], fast_path);
    assert_eq!(ask(&serving, false).await, "Understood.");
    assert_eq!(upstream.requests().len(), 2, "one retry");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(receiver.requests().is_empty(), "held until the end");
    stop(serving).await;

    let (spans, resources) = exported(&receiver);
    assert!(
        resources
            .iter()
            .all(|resource| resource["service.name"] == "gateway-under-test"),
        "{resources:?}"
    );
    let tenants = receiver_headers(&receiver);
    assert!(
        tenants.iter().all(|tenant| tenant == "team-a"),
        "{tenants:?}"
    );
    let requests: Vec<&Exported> = spans.iter().filter(|span| span.kind == SERVER).collect();
    let [request] = requests[..] else {
        panic!("one request span: {spans:#?}");
    };
    assert_eq!(request.name, "chat gpt");
    for (key, value) in [
        ("gen_ai.operation.name", json!("chat")),
        ("gen_ai.provider.name", json!("openai")),
        ("gen_ai.request.model", json!("gpt")),
        ("gen_ai.response.model", json!("gpt")),
        ("gen_ai.usage.input_tokens", json!(3)),
        ("gen_ai.usage.output_tokens", json!(5)),
        ("gen_ai.response.finish_reasons", json!(["stop"])),
        ("http.response.status_code", json!(200)),
    ] {
        assert_eq!(request.attribute(key), &value, "{key} of {request:#?}");
    }
    let attempts: Vec<&Exported> = spans.iter().filter(|span| span.kind == CLIENT).collect();
    let [failed, answered] = attempts[..] else {
        panic!("two attempt spans: {spans:#?}");
    };
    let port = upstream.addr.port();
    for attempt in [failed, answered] {
        assert_eq!(attempt.name, "chat up-gpt");
        assert_eq!(attempt.parent, request.span_id, "a child of the request");
        assert_eq!(attempt.attribute("gen_ai.request.model"), "up-gpt");
        assert_eq!(attempt.attribute("gen_ai.provider.name"), "openai");
        assert_eq!(attempt.attribute("server.address"), "127.0.0.1");
        assert_eq!(attempt.attribute("server.port"), &json!(port));
    }
    assert_eq!(failed.attribute("error.type"), "503");
    assert_eq!(failed.attribute("gen_ai.usage.input_tokens"), &Value::Null);
    assert_eq!(answered.attribute("error.type"), &Value::Null);
    assert_eq!(answered.attribute("gen_ai.usage.output_tokens"), &json!(5));
    assert_eq!(
        answered.attribute("gen_ai.response.finish_reasons"),
        &json!(["stop"])
    );
    let everything = receiver
        .requests()
        .iter()
        .map(|(_, body)| body.to_string())
        .collect::<String>();
    assert!(!everything.contains(PROMPT), "no prompt text by default");
    assert!(
        !everything.contains("Understood"),
        "no answer text by default"
    );
}

/// The `x-tenant` header of each export `receiver` received.
fn receiver_headers(receiver: &Server) -> Vec<String> {
    receiver
        .requests()
        .iter()
        .map(|(headers, _)| {
            let tenant = headers
                .get("x-tenant")
                .and_then(|value| value.to_str().ok());
            tenant.unwrap_or_default().to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conversation_reaches_the_request_span_only_when_opted_in() {
    let upstream = Server::start(vec![streamed_answer()]).await;
    let receiver = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let opt_in = [("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")];
    let serving = gateway(&dir, &upstream, &receiver, &opt_in, true);
    assert_eq!(ask(&serving, true).await, "Understood.");
    stop(serving).await;

    let (spans, _) = exported(&receiver);
    let request = spans.iter().find(|span| span.kind == SERVER).unwrap();
    let input = request.attribute("gen_ai.input.messages").as_str().unwrap();
    let input: Value = serde_json::from_str(input).unwrap();
    assert_eq!(
        input,
        json!([{"role": "user", "parts": [{"type": "text", "content": PROMPT}]}])
    );
    let output = request
        .attribute("gen_ai.output.messages")
        .as_str()
        .unwrap();
    let output: Value = serde_json::from_str(output).unwrap();
    assert_eq!(
        output,
        json!([{"role": "assistant", "parts": [{"type": "text", "content": "Understood."}]}])
    );
    assert_eq!(request.attribute("gen_ai.usage.output_tokens"), &json!(4));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_hold_the_genai_histograms_with_bounded_labels() {
    let refused = Answer::error(400, br#"{"error": {"message": "no"}}"#, &[]);
    let upstream = Server::start(vec![whole_answer(), streamed_answer(), refused]).await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            "[models.gpt]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"up-gpt\"\n",
            upstream.base_url()
        ),
    );
    let serving = common::cli::serve(&["--config", &config], None);
    ask(&serving, false).await;
    ask(&serving, true).await;
    let client = OpenAi::new(OpenAiConfig::new(format!("{}/v1", serving.base)).model("gpt"));
    let request = ChatRequest::new(vec![Message::user(PROMPT)]);
    assert!(client.unwrap().oneshot(request).await.is_err());
    // A model nobody serves makes no series.
    let client = OpenAi::new(OpenAiConfig::new(format!("{}/v1", serving.base)).model("x-free"));
    let request = ChatRequest::new(vec![Message::user(PROMPT)]);
    assert!(client.unwrap().oneshot(request).await.is_err());
    serving.log_containing(&["status=400", "status=404"]);

    let text = reqwest::get(format!("{}/metrics", serving.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let labels =
        r#"gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt""#;
    for line in [
        format!("gen_ai_client_operation_duration_seconds_count{{{labels}}} 2"),
        format!("gen_ai_client_operation_duration_seconds_count{{{labels},error_type=\"400\"}} 1"),
        format!("gen_ai_client_token_usage_count{{{labels},gen_ai_token_type=\"input\"}} 2"),
        format!("gen_ai_client_token_usage_sum{{{labels},gen_ai_token_type=\"input\"}} 5"),
        format!("gen_ai_client_token_usage_sum{{{labels},gen_ai_token_type=\"output\"}} 9"),
        format!(
            "gen_ai_client_token_usage_bucket{{{labels},gen_ai_token_type=\"output\",le=\"4\"}} 1"
        ),
        format!("gen_ai_client_operation_time_to_first_chunk_seconds_count{{{labels}}} 1"),
        "# TYPE gen_ai_client_token_usage histogram".to_owned(),
        // The metrics that were there before are still there.
        r#"lmstack_tokens_total{model="gpt",kind="output"} 9"#.to_owned(),
    ] {
        assert!(text.contains(&format!("{line}\n")), "{line} in\n{text}");
    }
    assert!(!text.contains("x-free"), "{text}");
}

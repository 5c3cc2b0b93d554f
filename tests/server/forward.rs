//! The same-wire fast path: a client of its model's upstream wire gets the
//! upstream's bytes as they came, with the same meaning as the full path's
//! answer to the same upstream (the recorded streams of each wire, cut at
//! random, replayed by a loopback upstream), the same tokens counted; a
//! request that needs the stack takes the full path; the keys stay on their
//! side.

#![cfg(all(feature = "server", feature = "http"))]

use std::sync::LazyLock;

use lmstack::config::{ModelConfig, NaturalTools};
use lmstack::natural::Dialect;
use lmstack::provider::body::{BodyDecoder, Lift};
use lmstack::provider::{ApiKey, Kind};
use lmstack::server::{BearerToken, Gateway};
use lmstack::{Error, Message};
use proptest::prelude::*;

use crate::common::server::{Answer, Server};
use crate::common::{
    chunks_as_sse, fixture, lift_with, recorded_anthropic_streams, recorded_openai_streams,
};

const CLIENT_KEY: &str = "client-key-0123456789";
const UPSTREAM_KEY: &str = "upstream-key-9876543210";

/// One wire served: how a client asks, and how it reads the answer.
struct Wire {
    kind: Kind,
    path: fn(&str, bool) -> String,
    body: fn(&str, bool) -> String,
    read: fn(&[u8]) -> Result<Vec<Message>, Error>,
    streams: Vec<(String, Vec<u8>)>,
}

fn read<L: Lift + Default>(bytes: &[u8]) -> Result<Vec<Message>, Error> {
    lift_with(
        BodyDecoder::for_content_type(L::default(), Some("text/event-stream"), true),
        bytes,
    )
}

fn openai() -> Wire {
    Wire {
        kind: Kind::OpenAiChat,
        path: |_, _| "/v1/chat/completions".into(),
        body: |model, stream| {
            format!(
                r#"{{"model":"{model}","messages":[{{"role":"user","content":"Hi"}}],"stream":{stream},"stream_options":{{"include_usage":true}}}}"#
            )
        },
        read: read::<lmstack::provider::openai_chat::Lifter>,
        streams: recorded_openai_streams(),
    }
}

/// An OpenAI client that does not ask for the usage chunk: the gateway asks
/// for it and leaves it out of the client's answer.
fn openai_without_usage() -> Wire {
    Wire {
        body: |model, stream| {
            format!(
                r#"{{"model":"{model}","messages":[{{"role":"user","content":"Hi"}}],"stream":{stream}}}"#
            )
        },
        ..openai()
    }
}

fn anthropic() -> Wire {
    Wire {
        kind: Kind::Anthropic,
        path: |_, _| "/v1/messages".into(),
        body: |model, stream| {
            format!(
                r#"{{"model":"{model}","max_tokens":64,"messages":[{{"role":"user","content":"Hi"}}],"stream":{stream}}}"#
            )
        },
        read: read::<lmstack::provider::anthropic::Lifter>,
        streams: recorded_anthropic_streams(),
    }
}

#[cfg(feature = "gemini")]
fn gemini() -> Wire {
    let mut streams: Vec<(String, Vec<u8>)> = [
        "google/hand-made/grounding.sse",
        "google/vertexai-sdk-test-data/googleai/streaming-success-thinking-function-call-thought-summary-signature.txt",
        "google/vertexai-sdk-test-data/vertexai/streaming-failure-error-mid-stream.txt",
    ]
    .map(|name| (name.to_owned(), fixture(name)))
    .to_vec();
    for name in [
        "google/vercel-ai/google-stream-no-args-tool-call.chunks.txt",
        "google/vercel-ai/google-stream-tool-call-arguments.chunks.txt",
        "google/vercel-ai/google-tool-call-gemini3.chunks.txt",
    ] {
        streams.push((name.to_owned(), chunks_as_sse(name)));
    }
    Wire {
        kind: Kind::Gemini,
        path: |model, stream| match stream {
            true => format!("/v1beta/models/{model}:streamGenerateContent?alt=sse"),
            false => format!("/v1beta/models/{model}:generateContent"),
        },
        body: |_, _| r#"{"contents":[{"role":"user","parts":[{"text":"Hi"}]}]}"#.into(),
        read: read::<lmstack::provider::gemini::Lifter>,
        streams,
    }
}

fn wires() -> Vec<Wire> {
    let wires = vec![openai(), openai_without_usage(), anthropic()];
    #[cfg(feature = "gemini")]
    let wires = {
        let mut wires = wires;
        wires.push(gemini());
        wires
    };
    wires
}

static WIRES: LazyLock<Vec<Wire>> = LazyLock::new(wires);

/// The model `kind` at `upstream`, asked for `up-model` with the upstream's
/// key, and no retries.
fn config(kind: Kind, upstream: &Server) -> ModelConfig {
    ModelConfig::new(kind)
        .base_url(upstream.base_url())
        .model("up-model")
        .api_key(ApiKey::new(UPSTREAM_KEY))
        .retry(false)
}

/// A gateway serving `config` as `fast` (with its fast path) and as `full`
/// (without), to the client key.
async fn gateway(config: &ModelConfig) -> (String, Gateway) {
    let (stack, _) = config.stack("fast").await.unwrap();
    let (full, _) = config.stack("full").await.unwrap();
    let gateway = Gateway::new()
        .key("client", BearerToken::new(CLIENT_KEY))
        .model("fast", "upstream", stack, 4)
        .model("full", "upstream", full, 4);
    let gateway = match config.forward("fast").unwrap() {
        Some(forward) => gateway.forward("fast", forward),
        None => gateway,
    };
    served(gateway).await
}

/// Serves `gateway` on loopback: its base URL, and a handle on its metrics.
async fn served(gateway: Gateway) -> (String, Gateway) {
    let metrics = gateway.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, gateway.router()).await });
    (format!("http://{address}"), metrics)
}

/// A client's POST of `body` to `path`: status, headers, body.
async fn post(base: &str, path: &str, body: String) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let response = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .bearer_auth(CLIENT_KEY)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.bytes().await.unwrap().to_vec())
}

/// The line of `metrics` that starts with `sample`, its value.
fn metric(text: &str, sample: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(sample)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Messages as compared between the paths: what the model said. The full path
/// writes its own ids and seals what the client's wire has no field for; the
/// fast path passes the upstream's on.
fn said(messages: Result<Vec<Message>, Error>) -> Result<serde_json::Value, String> {
    let mut json = serde_json::to_value(messages.map_err(|_| "an error".to_owned())?).unwrap();
    strip(&mut json);
    Ok(json)
}

fn strip(json: &mut serde_json::Value) {
    match json {
        serde_json::Value::Object(object) => {
            object.remove("metadata");
            object.remove("id");
            object.values_mut().for_each(strip);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
        _ => {}
    }
}

/// The recorded stream `stream` of `wire`, cut in `sizes`, through the fast
/// path and the full path: the same messages (or both an error), the same
/// tokens counted, the fast one forwarded.
async fn alike(wire: &Wire, stream: usize, sizes: &[usize]) -> Result<(), TestCaseError> {
    let (name, bytes) = &wire.streams[stream % wire.streams.len()];
    let answer = Answer::ok("text/event-stream", bytes, sizes);
    let upstream = Server::start(vec![answer.clone(), answer]).await;
    let (base, gateway) = gateway(&config(wire.kind, &upstream)).await;
    let mut answers = Vec::new();
    for model in ["fast", "full"] {
        let (status, _, body) =
            post(&base, &(wire.path)(model, true), (wire.body)(model, true)).await;
        prop_assert_eq!(
            status,
            200,
            "{} via {}: {}",
            name,
            model,
            String::from_utf8_lossy(&body)
        );
        answers.push(said((wire.read)(&body)));
    }
    prop_assert_eq!(&answers[0], &answers[1], "{}", name);
    if wire.kind == Kind::OpenAiChat {
        // Asked for it or not, the client gets the usage as it asked, and
        // the upstream is asked for it.
        let asked = (wire.body)("fast", true).contains("include_usage");
        let usage = |said: &serde_json::Value| said.to_string().contains("\"usage\"");
        if let Ok(fast) = &answers[0] {
            prop_assert!(asked || !usage(fast), "{}: {}", name, fast);
        }
        for (_, body) in upstream.requests() {
            prop_assert_eq!(&body["stream_options"]["include_usage"], true);
        }
    }
    let text = gateway_metrics(&gateway);
    for kind in ["input", "output"] {
        let fast = metric(
            &text,
            &format!("lmstack_tokens_total{{model=\"fast\",kind=\"{kind}\"}}"),
        );
        let full = metric(
            &text,
            &format!("lmstack_tokens_total{{model=\"full\",kind=\"{kind}\"}}"),
        );
        prop_assert_eq!(fast, full, "{} tokens of {}", kind, name);
    }
    prop_assert_eq!(
        metric(&text, "lmstack_forwarded_total{model=\"fast\"}"),
        1.0
    );
    prop_assert_eq!(
        metric(&text, "lmstack_forwarded_total{model=\"full\"}"),
        0.0
    );
    // The upstream was asked for its model, with its key, both times.
    for (headers, body) in upstream.requests() {
        let key = headers
            .get("authorization")
            .or(headers.get("x-api-key"))
            .or(headers.get("x-goog-api-key"));
        let key = key.unwrap().to_str().unwrap();
        prop_assert!(
            key.contains(UPSTREAM_KEY) && !key.contains(CLIENT_KEY),
            "{}",
            key
        );
        if wire.kind != Kind::Gemini {
            prop_assert_eq!(&body["model"], "up-model");
        }
    }
    if wire.kind == Kind::Gemini {
        prop_assert!(
            upstream
                .uris()
                .iter()
                .all(|uri| uri.contains("/models/up-model:")),
            "{:?}",
            upstream.uris()
        );
    }
    Ok(())
}

/// The gateway's metrics, as `GET /metrics` renders them.
fn gateway_metrics(gateway: &Gateway) -> String {
    gateway.metrics().render()
}

fn sizes() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..200, 1..6)
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(48)))]

    #[test]
    fn the_fast_path_and_the_full_path_say_the_same_at_any_chunking(
        wire in 0usize..4,
        stream in any::<usize>(),
        sizes in sizes(),
    ) {
        let wire = &WIRES[wire % WIRES.len()];
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(alike(wire, stream, &sizes))?;
    }
}

#[tokio::test]
async fn every_recorded_stream_says_the_same_on_both_paths() {
    for wire in WIRES.iter() {
        for stream in 0..wire.streams.len() {
            alike(wire, stream, &[7, 300, 1]).await.unwrap();
        }
    }
}

#[tokio::test]
async fn a_whole_answer_is_forwarded_with_its_tokens_and_none_of_the_upstreams_headers() {
    let body = br#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"up-model","choices":[{"index":0,"message":{"role":"assistant","content":"Hello."},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}"#;
    let mut answer = Answer::ok("application/json", body, &[5, 40]);
    answer
        .headers
        .push(("set-cookie", "session=upstream".into()));
    answer
        .headers
        .push(("x-upstream-secret", UPSTREAM_KEY.into()));
    let upstream = Server::start(vec![answer]).await;
    let (base, gateway) = gateway(&config(Kind::OpenAiChat, &upstream)).await;
    let wire = openai();
    let (status, headers, forwarded) =
        post(&base, "/v1/chat/completions", (wire.body)("fast", false)).await;
    assert_eq!(status, 200);
    assert_eq!(forwarded, body, "the upstream's bytes, as they came");
    assert!(
        headers.get("set-cookie").is_none() && headers.get("x-upstream-secret").is_none(),
        "{headers:?}"
    );
    let text = gateway_metrics(&gateway);
    assert_eq!(
        metric(&text, "lmstack_tokens_total{model=\"fast\",kind=\"input\"}"),
        9.0
    );
    assert_eq!(
        metric(
            &text,
            "lmstack_tokens_total{model=\"fast\",kind=\"output\"}"
        ),
        2.0
    );
    assert_eq!(
        metric(&text, "lmstack_forwarded_total{model=\"fast\"}"),
        1.0
    );
}

#[tokio::test]
async fn an_upstream_error_is_the_clients_format_error_without_the_key() {
    let echo = format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {UPSTREAM_KEY}","type":"invalid_request_error"}}}}"#
    );
    let upstream = Server::start(vec![Answer::error(401, echo.as_bytes(), &[])]).await;
    let (base, _) = gateway(&config(Kind::OpenAiChat, &upstream)).await;
    let (status, _, body) =
        post(&base, "/v1/chat/completions", (openai().body)("fast", true)).await;
    let body = String::from_utf8(body).unwrap();
    assert!(status >= 400, "{status} {body}");
    assert!(!body.contains(UPSTREAM_KEY), "{body}");
    assert!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["error"].is_object(),
        "{body}"
    );
}

#[tokio::test]
async fn a_key_in_an_error_event_cut_across_pieces_never_reaches_the_client() {
    let start = b"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n";
    let error = format!(
        "data: {{\"error\":{{\"message\":\"Incorrect API key provided: {UPSTREAM_KEY}\",\"type\":\"invalid_request_error\"}}}}\n\n"
    );
    let stream = [&start[..], error.as_bytes()].concat();
    let key_at = start.len() + error.find(UPSTREAM_KEY).unwrap();
    for cut in [
        key_at + 1,
        key_at + UPSTREAM_KEY.len() / 2,
        key_at + UPSTREAM_KEY.len() - 1,
    ] {
        let mut answer = Answer::ok("text/event-stream", &stream, &[cut, 5]);
        // Each piece comes alone.
        answer.pace = std::time::Duration::from_millis(2);
        let upstream = Server::start(vec![answer]).await;
        let config = config(Kind::OpenAiChat, &upstream);
        let (stack, _) = config.stack("fast").await.unwrap();
        let secrets = lmstack::provider::Secrets::new().secret(UPSTREAM_KEY);
        let gateway = Gateway::new()
            .key("client", BearerToken::new(CLIENT_KEY))
            .secrets(secrets)
            .model("fast", "upstream", stack, 4)
            .forward("fast", config.forward("fast").unwrap().unwrap());
        let (base, gateway) = served(gateway).await;
        let (status, _, body) =
            post(&base, "/v1/chat/completions", (openai().body)("fast", true)).await;
        let body = String::from_utf8(body).unwrap();
        assert_eq!(status, 200);
        assert!(!body.contains(UPSTREAM_KEY), "cut at {cut}: {body}");
        let scrubbed = stream.len() - UPSTREAM_KEY.len() + "[redacted]".len();
        assert_eq!(body.len(), scrubbed, "cut at {cut}: {body}");
        assert!(
            body.contains("Incorrect API key provided: [redacted]"),
            "{body}"
        );
        assert_eq!(
            metric(
                &gateway_metrics(&gateway),
                "lmstack_forwarded_total{model=\"fast\"}"
            ),
            1.0
        );
    }
}

/// A request of `body` to a gateway over `config`: whether it was forwarded.
async fn forwarded(config: ModelConfig, body: &str, answer: Answer) -> bool {
    let upstream = Server::start(vec![answer]).await;
    let config = config.base_url(upstream.base_url());
    let (base, gateway) = gateway(&config).await;
    let (status, _, reply) = post(&base, "/v1/chat/completions", body.to_owned()).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&reply));
    metric(
        &gateway_metrics(&gateway),
        "lmstack_forwarded_total{model=\"fast\"}",
    ) == 1.0
}

#[tokio::test]
async fn a_request_that_needs_the_stack_takes_the_full_path() {
    let done = br#"{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"{}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;
    let answer = || Answer::ok("application/json", done, &[usize::MAX]);
    let plain = ModelConfig::new(Kind::OpenAiChat)
        .model("up-model")
        .api_key(ApiKey::new(UPSTREAM_KEY))
        .retry(false);
    let hi = r#"{"model":"fast","messages":[{"role":"user","content":"Hi"}]}"#;
    assert!(
        forwarded(plain.clone(), hi, answer()).await,
        "a plain request is forwarded"
    );
    // Natural tools: the stack renders tools and parses calls.
    let natural = plain
        .clone()
        .natural_tools(NaturalTools::Dialect(Dialect::Hermes));
    assert!(!forwarded(natural, hi, answer()).await);
    // Structured output: the stack checks the answer.
    let structured = r#"{"model":"fast","messages":[{"role":"user","content":"Hi"}],"response_format":{"type":"json_object"}}"#;
    assert!(!forwarded(plain.clone(), structured, answer()).await);
    // A call id the gateway sealed: the stack opens it.
    let sealed = lmstack::server::sealed_ids::seal_id("call_1", &{
        let mut metadata = lmstack::Metadata::default();
        metadata.insert("thought_signature", serde_json::json!("sig"));
        metadata
    });
    let with_sealed = format!(
        r#"{{"model":"fast","messages":[{{"role":"user","content":"Hi"}},{{"role":"assistant","tool_calls":[{{"id":"{sealed}","type":"function","function":{{"name":"f","arguments":"{{}}"}}}}]}},{{"role":"tool","tool_call_id":"{sealed}","content":"ok"}}]}}"#
    );
    assert!(!forwarded(plain.clone(), &with_sealed, answer()).await);
    // Several deployments.
    let deployed = plain
        .clone()
        .deployment(lmstack::config::DeploymentConfig::new())
        .deployment(lmstack::config::DeploymentConfig::new());
    assert!(deployed.forward("fast").unwrap().is_none());
}

/// The time of the limits in the tests: the start of a minute.
const NOW: u64 = 1_739_188_800_000;

/// The counts of the key `name`'s requests, tokens and spend in `store`.
async fn counts(store: &lmstack::limit::MemoryLimitStore, name: &str) -> Vec<u64> {
    use lmstack::limit::{Add, Counter, LimitStore};
    let counter = |what: &str, start: u64| Counter {
        key: format!("{what}:{{{name}}}:{start}"),
        expires_at: None,
    };
    let adds = [("rpm", NOW), ("tpm", NOW), ("spend", 0)].map(|(what, start)| Add {
        counter: counter(what, start),
        amount: 0,
    });
    store.add_all(&adds, NOW).await.unwrap()
}

#[tokio::test]
async fn a_limited_key_takes_the_fast_path_refused_and_settled_as_on_the_full_path() {
    use lmstack::limit::{KeyLimits, LimitLayer, MemoryLimitStore, Period, Price};
    use tower::Layer;
    let stream = b"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n\
        data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
        data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":7,\"total_tokens\":57}}\n\n\
        data: [DONE]\n\n";
    let answer = Answer::ok("text/event-stream", stream, &[40, 3]);
    let upstream = Server::start(vec![answer; 4]).await;
    let config = config(Kind::OpenAiChat, &upstream);
    let key = KeyLimits::new()
        .requests_per_minute(2)
        .tokens_per_minute(100_000)
        .budget(100.0, Period::Total);
    let price = Some(Price {
        input: 1.0,
        cached_input: None,
        output: 2.0,
    });
    let limits = |store: &MemoryLimitStore| {
        LimitLayer::new()
            .store(store.clone())
            .key("metered", key.clone())
            .price(price)
            .clock(|| NOW)
    };
    let (fast_store, full_store) = (MemoryLimitStore::new(), MemoryLimitStore::new());
    let (stack, _) = config.stack("fast").await.unwrap();
    let (full, _) = config.stack("full").await.unwrap();
    let full = lmstack::BoxChatService::new(limits(&full_store).layer(full));
    let forward = config.forward("fast").unwrap().unwrap();
    let gateway = Gateway::new()
        .key("metered", BearerToken::new(CLIENT_KEY))
        .model("fast", "upstream", stack, 4)
        .model("full", "upstream", full, 4)
        .forward("fast", forward.limits(limits(&fast_store)));
    let (base, gateway) = served(gateway).await;
    let body = |model: &str| (openai_without_usage().body)(model, true);
    let mut answers = Vec::new();
    for model in ["fast", "full"] {
        for _ in 0..2 {
            let (status, _, reply) = post(&base, "/v1/chat/completions", body(model)).await;
            assert_eq!(status, 200, "{}", String::from_utf8_lossy(&reply));
        }
        let (status, headers, reply) = post(&base, "/v1/chat/completions", body(model)).await;
        let retry_after = headers.get("retry-after").map(|value| value.to_owned());
        answers.push((status, retry_after, String::from_utf8(reply).unwrap()));
    }
    assert_eq!(answers[0].0, 429, "{:?}", answers[0]);
    assert!(answers[0].1.is_some(), "{:?}", answers[0]);
    assert_eq!(
        answers[0], answers[1],
        "the fast path's refusal is the full path's"
    );
    let fast = counts(&fast_store, "metered").await;
    assert_eq!(fast, counts(&full_store, "metered").await);
    // Two requests, their tokens and their spend (in millionths).
    assert_eq!(fast, [2, 2 * 57, 2 * (50 + 2 * 7)]);
    assert_eq!(
        metric(
            &gateway_metrics(&gateway),
            "lmstack_forwarded_total{model=\"fast\"}"
        ),
        3.0,
        "the limited key's requests and its refusal took the fast path"
    );
    assert_eq!(upstream.requests().len(), 4, "no refused request went up");
}

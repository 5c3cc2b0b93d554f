//! The gateway as a hostile client, a web page or a slow upstream meets it,
//! over real TCP on loopback, served by `lmstack::server::serve`: requests sent
//! halfway or never finished, idle and unread connections, too many of them,
//! bodies past the budget, unknown model names, forged browser requests, a
//! model silent before its first event, an upstream's `Retry-After`.

#![cfg(all(feature = "server", feature = "retry"))]

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::server::{Answer, Server};
use futures::StreamExt;
use lmstack::provider::openai_chat::{OpenAi, OpenAiConfig};
use lmstack::retry::RetryLayer;
use lmstack::server::{BearerToken, ConnectionLimits, Gateway, serve};
use lmstack::testing::ScriptedModel;
use lmstack::{ChatRequest, Error, Event, Message, Reply};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tower::ServiceExt;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A gateway served on a loopback port until `stop` is called.
struct Serving {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Serving {
    async fn start(gateway: Gateway, limits: ConnectionLimits) -> Serving {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let shutdown = async move {
            let _ = stopped.await;
        };
        let done = tokio::spawn(serve(listener, gateway.router(), limits, shutdown));
        Serving {
            addr,
            stop: Some(stop),
            done,
        }
    }

    fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops taking connections; resolves when the last one closed.
    async fn stop(mut self) -> std::io::Result<()> {
        let _ = self.stop.take().unwrap().send(());
        (&mut self.done).await.unwrap()
    }
}

/// A connection that has sent `bytes`.
async fn connect(addr: SocketAddr, bytes: &[u8]) -> TcpStream {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(bytes).await.unwrap();
    tcp
}

/// Reads until the server closes the connection (within 10 s): what it sent,
/// and when it closed, from `since`.
async fn until_closed(tcp: &mut TcpStream, since: Instant) -> (String, Duration) {
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buf = [0u8; 4096];
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
    });
    read.await.expect("the server closed the connection");
    (
        String::from_utf8_lossy(&answer).into_owned(),
        since.elapsed(),
    )
}

/// Whether the connection is still open after `wait` (nothing read, no end).
async fn still_open(tcp: &mut TcpStream, wait: Duration) -> bool {
    let mut buf = [0u8; 1];
    tokio::time::timeout(wait, tcp.read(&mut buf))
        .await
        .is_err()
}

fn limits(header: Duration, idle: Duration) -> ConnectionLimits {
    ConnectionLimits::default()
        .header_timeout(header)
        .idle_timeout(idle)
}

async fn post(
    base: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut request = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, headers, body)
}

const JSON: (&str, &str) = ("content-type", "application/json");
const CHAT: &str = r#"{"model":"demo","messages":[{"role":"user","content":"Hi"}]}"#;
const MESSAGES: &str =
    r#"{"model":"demo","max_tokens":8,"messages":[{"role":"user","content":"Hi"}]}"#;

/// A streamed chat request for the model `demo`: the response, its body
/// still to read.
async fn stream_from(serving: &Serving) -> reqwest::Response {
    let body = r#"{"model":"demo","stream":true,"messages":[{"role":"user","content":"Hi"}]}"#;
    reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", serving.base()))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
}

/// A model that says `words` words, each after `pause`, and notes when a
/// reply is dropped.
fn paced(
    pause: Duration,
    words: usize,
    dropped: Arc<AtomicBool>,
) -> impl lmstack::service::ChatService<Future: Send> + Clone + Send + Sync + 'static {
    tower::service_fn(move |_request: ChatRequest| {
        let dropped = dropped.clone();
        async move {
            let noted = Noted(dropped);
            let events = futures::stream::iter(0..words).then(move |_| {
                let _keep = &noted;
                async move {
                    tokio::time::sleep(pause).await;
                    Ok::<_, Error>(Event::text("word "))
                }
            });
            Ok::<_, Error>(Reply::from_stream(events))
        }
    })
}

/// Sets its flag when dropped.
struct Noted(Arc<AtomicBool>);

impl Drop for Noted {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(ms(10)).await;
    }
}

#[tokio::test]
async fn a_request_head_not_sent_whole_in_time_is_closed_at_the_header_timeout() {
    let gateway = Gateway::new().model("demo", "scripted", ScriptedModel::new(), 4);
    let serving = Serving::start(gateway, limits(ms(400), Duration::from_secs(60))).await;
    let started = Instant::now();
    let mut half = connect(
        serving.addr,
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: lo",
    )
    .await;
    let mut silent = connect(serving.addr, b"").await;
    // A head trickled a byte at a time is bounded as a whole, not per byte.
    let mut trickle = connect(serving.addr, b"G").await;
    let trickling = async {
        for byte in b"ET /health HTTP/1.1\r\nHost: localhost\r\n" {
            tokio::time::sleep(ms(50)).await;
            if trickle.write_all(&[*byte]).await.is_err() {
                break;
            }
        }
        until_closed(&mut trickle, started).await
    };
    let (trickled, (half, at), (silent, silent_at)) = tokio::join!(
        trickling,
        until_closed(&mut half, started),
        until_closed(&mut silent, started)
    );
    for (what, answer, at) in [
        ("half a head", half, at),
        ("no byte at all", silent, silent_at),
        ("a trickled head", trickled.0, trickled.1),
    ] {
        assert_eq!(answer, "", "{what}: closed without an answer");
        assert!(
            at >= ms(350),
            "{what}: closed at {at:?}, before the timeout"
        );
        assert!(at < ms(3000), "{what}: closed at {at:?}");
    }
    // A head that comes whole in time is answered.
    let (status, _, _) = post(&serving.base(), "/v1/chat/completions", &[JSON], "{").await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn a_body_that_never_comes_whole_is_answered_408_in_the_clients_format() {
    let model = ScriptedModel::new();
    let gateway = Gateway::new()
        .model("demo", "scripted", model.clone(), 4)
        .body_timeout(ms(400));
    let serving = Serving::start(gateway, ConnectionLimits::default()).await;
    let head = |path: &str, framing: &str| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n{framing}\r\n"
        )
    };
    let started = Instant::now();
    let cases = [
        ("/v1/chat/completions", "Content-Length: 100\r\n", "{\"mo"),
        (
            "/v1/messages",
            "Transfer-Encoding: chunked\r\n",
            "4\r\n{\"mo\r\n",
        ),
        ("/v1/messages", "Content-Length: 100\r\n", ""),
    ];
    for (path, framing, sent) in cases {
        let mut tcp = connect(
            serving.addr,
            format!("{}{sent}", head(path, framing)).as_bytes(),
        )
        .await;
        let (answer, at) = until_closed(&mut tcp, Instant::now()).await;
        assert!(answer.starts_with("HTTP/1.1 408"), "{path}: {answer}");
        assert!(at >= ms(350) && at < ms(3000), "{path}: answered at {at:?}");
        let body = &answer[answer.find("\r\n\r\n").unwrap() + 4..];
        let body: Value = serde_json::from_str(body).unwrap();
        let message = match path {
            "/v1/messages" => {
                assert_eq!(body["type"], "error", "{body}");
                &body["error"]["message"]
            }
            _ => &body["error"]["message"],
        };
        assert!(
            message.as_str().unwrap().contains("did not arrive"),
            "{body}"
        );
    }
    assert!(started.elapsed() < Duration::from_secs(8));
    assert!(model.requests().is_empty(), "no model ran");
}

#[tokio::test]
async fn an_idle_connection_is_closed_at_the_idle_timeout_and_a_busy_one_is_not() {
    let gateway = Gateway::new().model("demo", "scripted", ScriptedModel::new(), 4);
    let serving = Serving::start(gateway, limits(ms(200), ms(600))).await;
    let health = b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let mut tcp = connect(serving.addr, health).await;
    let mut answer = [0u8; 256];
    let n = tcp.read(&mut answer).await.unwrap();
    assert!(answer[..n].ends_with(b"ok"));
    // Kept alive: idle for less than the idle timeout (but more than the
    // header timeout), then used again.
    assert!(still_open(&mut tcp, ms(350)).await);
    tcp.write_all(health).await.unwrap();
    let n = tcp.read(&mut answer).await.unwrap();
    assert!(
        answer[..n].ends_with(b"ok"),
        "the second request is answered"
    );
    let since = Instant::now();
    let (rest, at) = until_closed(&mut tcp, since).await;
    assert_eq!(rest, "");
    assert!(at >= ms(550) && at < ms(3000), "closed at {at:?}");
}

#[tokio::test]
async fn a_stream_its_client_does_not_read_is_cut_at_the_idle_timeout() {
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = dropped.clone();
    // Endless and fast: the socket's buffers fill, and the writes wait.
    let flood = tower::service_fn(move |_request: ChatRequest| {
        let noted = Noted(flag.clone());
        async move {
            let chunk = "x".repeat(16 << 10);
            let events = futures::stream::repeat_with(move || {
                let _keep = &noted;
                Ok::<_, Error>(Event::text(chunk.clone()))
            });
            Ok::<_, Error>(Reply::from_stream(events))
        }
    });
    let gateway = Gateway::new().model("demo", "scripted", flood, 4);
    let serving = Serving::start(gateway, limits(ms(300), ms(500))).await;
    let body = r#"{"model":"demo","stream":true,"messages":[{"role":"user","content":"Go"}]}"#;
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let _unread = connect(serving.addr, request.as_bytes()).await;
    eventually("the unread stream was never cut", || {
        dropped.load(Ordering::SeqCst)
    })
    .await;
}

#[tokio::test]
async fn connections_past_the_cap_wait_until_one_closes() {
    let gateway = Gateway::new().model("demo", "scripted", ScriptedModel::new(), 4);
    let limits = limits(ms(600), Duration::from_secs(60)).max_connections(2);
    let serving = Serving::start(gateway, limits).await;
    let started = Instant::now();
    let _first = connect(serving.addr, b"GET /hea").await;
    let _second = connect(serving.addr, b"GET /hea").await;
    tokio::time::sleep(ms(50)).await;
    let health = reqwest::get(format!("{}/health", serving.base()));
    let health = tokio::time::timeout(Duration::from_secs(10), health).await;
    let at = started.elapsed();
    assert_eq!(health.unwrap().unwrap().status(), 200);
    assert!(
        at >= ms(550),
        "answered at {at:?}: the third connection waited for a place"
    );
}

#[tokio::test]
async fn stopping_closes_idle_and_half_sent_connections_at_once_and_lets_answers_finish() {
    let dropped = Arc::new(AtomicBool::new(false));
    let model = paced(ms(100), 5, dropped);
    let gateway = Gateway::new().model("demo", "scripted", model, 4);
    // Timeouts far longer than the test: the drain must not wait for them.
    let serving = Serving::start(
        gateway,
        limits(Duration::from_secs(60), Duration::from_secs(60)),
    )
    .await;
    let mut half = connect(serving.addr, b"POST /v1/chat/completions HTTP/1.1\r\nHo").await;
    let mut idle = connect(
        serving.addr,
        b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n",
    )
    .await;
    let mut answer = [0u8; 256];
    let _ = idle.read(&mut answer).await.unwrap();
    let response = stream_from(&serving).await;
    let started = Instant::now();
    let stopped = tokio::spawn(serving.stop());
    let text = response.text().await.unwrap();
    assert_eq!(
        text.matches("word").count(),
        5,
        "the answer finished: {text}"
    );
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let result = tokio::time::timeout(Duration::from_secs(5), stopped).await;
    assert!(result.expect("stopped in time").unwrap().is_ok());
    assert!(started.elapsed() < Duration::from_secs(5));
    for tcp in [&mut half, &mut idle] {
        let (rest, _) = until_closed(tcp, started).await;
        assert_eq!(rest, "");
    }
}

#[tokio::test]
async fn model_names_clients_choose_make_no_metrics_series() {
    let gateway = Gateway::new().model("demo", "scripted", ScriptedModel::new().reply("Hi."), 4);
    let serving = Serving::start(gateway, ConnectionLimits::default()).await;
    let base = serving.base();
    let scrape = || async {
        let metrics = reqwest::get(format!("{base}/metrics")).await.unwrap();
        metrics.text().await.unwrap()
    };
    let (status, _, _) = post(&base, "/v1/chat/completions", &[JSON], CHAT).await;
    assert_eq!(status, 200);
    let before = scrape().await;
    for i in 0..200 {
        let name = format!("made-up-{i}-{}", "x".repeat(20_000));
        let body = json!({"model": name, "messages": [{"role": "user", "content": "Hi"}]});
        let (status, _, body) =
            post(&base, "/v1/chat/completions", &[JSON], &body.to_string()).await;
        assert_eq!(status, 404);
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.len() < 300,
            "the name is not echoed whole: {}",
            message.len()
        );
    }
    let after = scrape().await;
    assert!(!after.contains("made-up"), "no series for a client's name");
    assert!(
        after.contains("lmstack_requests_total{model=\"\",format=\"openai\",status=\"404\"} 200"),
        "{after}"
    );
    assert!(
        after.len() < before.len() + 200,
        "{} → {} bytes",
        before.len(),
        after.len()
    );
}

#[tokio::test]
async fn a_gateway_without_a_token_answers_no_web_page() {
    let model = ScriptedModel::new().reply("Hi.").reply("Hi again.");
    let gateway = Gateway::new()
        .model("demo", "scripted", model.clone(), 4)
        .allowed_origins(["http://localhost:3000"]);
    let serving = Serving::start(gateway, ConnectionLimits::default()).await;
    let base = serving.base();
    for (path, body) in [("/v1/chat/completions", CHAT), ("/v1/messages", MESSAGES)] {
        let anthropic = path == "/v1/messages";
        let forged: [(&[(&str, &str)], u16); 5] = [
            // DNS rebinding: a foreign name that resolves to loopback.
            (&[("host", "evil.example:8080"), JSON], 403),
            // A page's cross-site post.
            (&[("origin", "https://evil.example"), JSON], 403),
            // A form post, which needs no CORS preflight.
            (&[("content-type", "text/plain")], 415),
            (
                &[("content-type", "application/x-www-form-urlencoded")],
                415,
            ),
            (&[], 415),
        ];
        for (headers, expected) in forged {
            let (status, _, answer) = post(&base, path, headers, body).await;
            assert_eq!(status, expected, "{path} {headers:?}: {answer}");
            if anthropic {
                assert_eq!(answer["type"], "error", "{answer}");
            }
            let message = answer["error"]["message"].as_str();
            assert!(message.is_some_and(|m| !m.is_empty()), "{answer}");
        }
    }
    assert!(
        model.requests().is_empty(),
        "no forged request ran the model"
    );
    for path in ["/v1/models", "/metrics"] {
        let response = reqwest::Client::new()
            .get(format!("{base}{path}"))
            .header("host", "rebound.example")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 403, "{path}");
    }
    // The allowed origin: the CORS preflight, then the call, which it may read.
    let client = reqwest::Client::new();
    let preflight = client
        .request(
            reqwest::Method::OPTIONS,
            format!("{base}/v1/chat/completions"),
        )
        .header("origin", "http://localhost:3000")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type")
        .send()
        .await
        .unwrap();
    assert!(preflight.status().is_success());
    let allowed = preflight.headers()["access-control-allow-origin"]
        .to_str()
        .unwrap();
    assert_eq!(allowed, "http://localhost:3000");
    let origin = ("origin", "http://localhost:3000");
    let (status, headers, _) = post(&base, "/v1/chat/completions", &[origin, JSON], CHAT).await;
    assert_eq!(status, 200);
    assert_eq!(
        headers["access-control-allow-origin"],
        "http://localhost:3000"
    );
    // A plain client on loopback.
    let (status, _, _) = post(&base, "/v1/messages", &[JSON], MESSAGES).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_token_guards_the_model_list_and_the_metrics_but_not_the_health_check() {
    let gateway = Gateway::new()
        .model("demo", "scripted", ScriptedModel::new(), 4)
        .token(BearerToken::new("s3cret"));
    let serving = Serving::start(gateway, ConnectionLimits::default()).await;
    let client = reqwest::Client::new();
    for path in ["/v1/models", "/metrics"] {
        let url = format!("{}{path}", serving.base());
        let refused = client.get(&url).send().await.unwrap();
        assert_eq!(refused.status(), 401, "{path}");
        let answered = client.get(&url).bearer_auth("s3cret").send().await.unwrap();
        assert_eq!(answered.status(), 200, "{path}");
    }
    let health = client
        .get(format!("{}/health", serving.base()))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
}

/// An OpenAI upstream answering `answers`, behind the retry layer (fast
/// backoff) when `retry`.
fn upstream(server: &Server, retry: bool) -> lmstack::BoxChatService {
    let provider = OpenAi::new(OpenAiConfig::new(server.base_url()).model("up")).unwrap();
    let retry = retry.then(|| {
        RetryLayer::new()
            .initial_backoff(ms(10))
            .max_backoff(ms(10))
    });
    let stack = tower::ServiceBuilder::new()
        .option_layer(retry)
        .service(provider);
    lmstack::BoxChatService::new(stack)
}

fn chunks(texts: &[&str]) -> Vec<u8> {
    let mut body = String::new();
    for text in texts {
        let chunk = json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "up",
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]});
        body.push_str(&format!("data: {chunk}\n\n"));
    }
    let done = json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "up",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    body.push_str(&format!("data: {done}\n\ndata: [DONE]\n\n"));
    body.into_bytes()
}

#[tokio::test]
async fn a_stream_gets_headers_and_keep_alives_while_a_retried_upstream_is_silent() {
    // The first attempt fails; the second thinks for a while before its
    // first token. The retry layer resolves the reply only at that token.
    let mut thinking = Answer::ok(
        "text/event-stream",
        &chunks(&["Hello", " there"]),
        &[usize::MAX],
    );
    thinking.stall = ms(1500);
    let server = Server::start(vec![Answer::error(500, b"{}", &[]), thinking]).await;
    let gateway = Gateway::new()
        .model("demo", "openai", upstream(&server, true), 4)
        .keep_alive(Some(ms(100)));
    let serving = Serving::start(gateway, ConnectionLimits::default()).await;
    let started = Instant::now();
    let response = stream_from(&serving).await;
    let headers_at = started.elapsed();
    assert_eq!(response.status(), 200);
    assert!(headers_at < ms(1000), "headers after {headers_at:?}");
    let mut frames = response.bytes_stream();
    let first = frames.next().await.unwrap().unwrap();
    assert_eq!(&first[..], b": keep-alive\n\n", "a keep-alive first");
    assert!(started.elapsed() < ms(1000), "{:?}", started.elapsed());
    let mut rest = Vec::new();
    while let Some(frame) = frames.next().await {
        rest.extend_from_slice(&frame.unwrap());
    }
    let rest = String::from_utf8(rest).unwrap();
    assert!(rest.matches(": keep-alive").count() >= 5, "{rest}");
    assert!(rest.contains("Hello") && rest.contains(" there"), "{rest}");
    assert!(
        rest.ends_with("data: [DONE]\n\n"),
        "the retry is invisible: {rest}"
    );
    assert!(!rest.contains("error"), "{rest}");
    assert_eq!(server.requests().len(), 2, "one retry");
}

#[tokio::test]
async fn an_upstream_failing_after_the_headers_went_out_ends_the_stream_with_the_formats_error() {
    // The stall is in the body of the error answer: its headers come at once,
    // its message after the keep-alive interval.
    let mut failing = Answer::error(503, br#"{"error":{"message":"overloaded"}}"#, &[]);
    failing.stall = ms(400);
    let server = Server::start(vec![failing.clone(), failing]).await;
    let gateway = Gateway::new()
        .model("demo", "openai", upstream(&server, false), 4)
        .keep_alive(Some(ms(100)));
    let serving = Serving::start(gateway, ConnectionLimits::default()).await;
    let response = stream_from(&serving).await;
    assert_eq!(
        response.status(),
        200,
        "the headers went out before the error"
    );
    let text = response.text().await.unwrap();
    assert!(text.starts_with(": keep-alive\n\n"), "{text}");
    assert!(
        text.contains("data: {\"error\"") && text.contains("overloaded"),
        "{text}"
    );
    assert!(!text.contains("[DONE]"), "{text}");
    // lmstack's own client reads it as the error it is.
    let client =
        OpenAi::new(OpenAiConfig::new(format!("{}/v1", serving.base())).model("demo")).unwrap();
    let request = ChatRequest::new(vec![Message::user("Hi")]).streaming(true);
    let outcome = match client.oneshot(request).await {
        Ok(reply) => reply.collect().await,
        Err(error) => Err(error),
    };
    let error = outcome.expect_err("the stream ends in an error");
    assert!(error.to_string().contains("overloaded"), "{error}");
}

#[tokio::test]
async fn an_upstreams_retry_after_reaches_the_client_and_the_gateways_own_429_has_one() {
    let limited = br#"{"error":{"message":"slow down","type":"rate_limit_error"}}"#;
    let server = Server::start(vec![
        Answer::error(429, limited, &[("retry-after", "7")]),
        Answer::error(429, limited, &[("retry-after-ms", "2500")]),
    ])
    .await;
    let gateway = Gateway::new().model("demo", "openai", upstream(&server, false), 1);
    let serving = Serving::start(gateway, ConnectionLimits::default()).await;
    let base = serving.base();
    let (status, headers, body) = post(&base, "/v1/chat/completions", &[JSON], CHAT).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(headers["retry-after"], "7");
    let (status, headers, body) = post(&base, "/v1/messages", &[JSON], MESSAGES).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(headers["retry-after"], "3", "2.5 s, rounded up");
    assert_eq!(body["error"]["type"], "rate_limit_error");
}

#[tokio::test]
async fn bodies_past_the_budget_are_refused_429_and_a_models_place_is_taken_before_decoding() {
    let dropped = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let model = paced(ms(300), 1, dropped);
    let model = tower::ServiceBuilder::new()
        .map_request(move |request: ChatRequest| {
            counted.fetch_add(1, Ordering::SeqCst);
            request
        })
        .service(model);
    let gateway = Gateway::new()
        .model("demo", "scripted", model, 1)
        .body_limit(100_000)
        .body_budget(150_000);
    let serving = Serving::start(gateway, ConnectionLimits::default()).await;
    let text = "y".repeat(80_000);
    let big = json!({"model": "demo", "messages": [{"role": "user", "content": text}]}).to_string();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        big.len()
    );
    // One body sent all but its last byte holds 80 kB of the budget…
    let mut holding = connect(serving.addr, head.as_bytes()).await;
    holding
        .write_all(&big.as_bytes()[..big.len() - 1])
        .await
        .unwrap();
    tokio::time::sleep(ms(100)).await;
    // …so a second one does not fit.
    let (status, headers, body) =
        post(&serving.base(), "/v1/chat/completions", &[JSON], &big).await;
    assert_eq!(status, 429, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("request bodies"),
        "{body}"
    );
    assert_eq!(headers["retry-after"], "1");
    holding
        .write_all(&big.as_bytes()[big.len() - 1..])
        .await
        .unwrap();
    // The first runs, and holds the model's one place: a body that would not
    // decode is refused for want of a place before it is decoded.
    eventually("the first request runs", || {
        calls.load(Ordering::SeqCst) == 1
    })
    .await;
    let undecodable = r#"{"model":"demo","messages":5}"#;
    let (status, _, body) = post(
        &serving.base(),
        "/v1/chat/completions",
        &[JSON],
        undecodable,
    )
    .await;
    assert_eq!(status, 429, "{body}");
    let (answer, _) = until_closed(&mut holding, Instant::now()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // With the budget back and the place free, both are answered as usual.
    let (status, _, body) = post(
        &serving.base(),
        "/v1/chat/completions",
        &[JSON],
        undecodable,
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let (status, _, _) = post(&serving.base(), "/v1/chat/completions", &[JSON], &big).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn the_secrets_a_gateway_holds_reach_no_answer() {
    const KEY: &str = "sk-gateway-held-0123456789abcdef";
    let leaky = tower::service_fn(|request: ChatRequest| async move {
        let leak = Error::stage("a tool", format!("the upstream said: key {KEY} is revoked"));
        if !request.options.stream {
            return Err(leak);
        }
        Ok(Reply::from_results(vec![
            Ok(Event::text("Partly ")),
            Err(leak),
        ]))
    });
    let gateway = Gateway::new()
        .model("demo", "scripted", leaky, 4)
        .secrets(lmstack::provider::Secrets::new().secret(KEY));
    let serving = Serving::start(gateway, ConnectionLimits::default()).await;
    let streamed = r#"{"model":"demo","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"Hi"}]}"#;
    for (path, body, status) in [
        ("/v1/chat/completions", CHAT, 500),
        ("/v1/messages", MESSAGES, 500),
        ("/v1/chat/completions", streamed, 200),
        ("/v1/messages", streamed, 200),
    ] {
        let (answered, _, text) = post(&serving.base(), path, &[JSON], body).await;
        assert_eq!(answered, status, "{path}: {text}");
        let text = text.to_string();
        assert!(
            text.contains("is revoked") && text.contains("[redacted]"),
            "{path}: {text}"
        );
        assert!(!text.contains(&KEY[..12]), "{path}: {text}");
    }
}

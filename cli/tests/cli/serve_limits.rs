//! `lmstack serve` as a process under pressure: more half-sent requests than
//! its open files allow, a second signal during the drain, its log lines, a
//! token variable with a stray space.

#![cfg(unix)]

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use common::cli::{serve, serve_command, start, write_config};
use common::server::{Answer, Server};
use serde_json::{Value, json};

/// Waits (up to `within`) for the process to exit; how long it took.
fn exits_within(serving: &mut common::cli::Serving, within: Duration) -> Duration {
    let started = Instant::now();
    while serving.child.try_wait().unwrap().is_none() {
        assert!(started.elapsed() < within, "still running after {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    started.elapsed()
}

fn address(serving: &common::cli::Serving) -> String {
    serving.base.trim_start_matches("http://").to_owned()
}

/// `GET /health` on a fresh connection, with a deadline; the status line.
fn health(address: &str, within: Duration) -> String {
    let mut tcp = TcpStream::connect(address).unwrap();
    tcp.set_read_timeout(Some(within)).unwrap();
    tcp.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    let _ = tcp.read_to_string(&mut answer);
    answer.lines().next().unwrap_or_default().to_owned()
}

#[test]
fn half_sent_requests_past_the_open_files_limit_do_not_stop_the_health_check() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(&dir, "[server]\nheader_timeout_secs = 0.5\n");
    let mut command = serve_command(&["--config", &config], None);
    // SAFETY: setrlimit(2) in the child before exec, async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 256,
                rlim_max: 256,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let serving = start(command);
    let address = address(&serving);
    let held: Vec<TcpStream> = (0..300)
        .map(|_| {
            let mut tcp = TcpStream::connect(&address).unwrap();
            tcp.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: local")
                .unwrap();
            tcp
        })
        .collect();
    let started = Instant::now();
    let status = health(&address, Duration::from_secs(20));
    assert_eq!(status, "HTTP/1.1 200 OK", "after {:?}", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(15));
    drop(held);
    let warned = serving.stderr().join("");
    assert!(
        warned.contains("leaves room for 96 connections"),
        "the cap was fitted to the limit: {warned}"
    );
}

#[test]
fn a_second_signal_stops_at_once_and_half_sent_requests_do_not_hold_the_drain() {
    // An answer that takes longer than the test: only a signal ends it.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut endless = Answer::ok("application/json", b"{}", &[usize::MAX]);
    endless.stall = Duration::from_secs(600);
    let upstream = runtime.block_on(Server::start(vec![endless]));
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            "[server]\nheader_timeout_secs = 60\n[models.slow]\nprovider = \"openai\"\nbase_url = \"{}\"\nretry = false\n",
            upstream.base_url()
        ),
    );
    // Half-sent requests alone do not hold the drain.
    let mut serving = serve(&["--config", &config, "--drain", "60"], None);
    let mut half = TcpStream::connect(address(&serving)).unwrap();
    half.write_all(b"POST /v1/messages HTTP/1.1\r\nHo").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    serving.signal(libc::SIGTERM);
    let took = exits_within(&mut serving, Duration::from_secs(5));
    assert!(took < Duration::from_secs(5));
    // A request in flight holds it; a second signal ends it at once.
    let mut serving = serve(&["--config", &config, "--drain", "60"], None);
    let mut asking = TcpStream::connect(address(&serving)).unwrap();
    let body = r#"{"model":"slow","messages":[{"role":"user","content":"Hi"}]}"#;
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    asking.write_all(request.as_bytes()).unwrap();
    while runtime.block_on(async { upstream.requests().len() }) < 1 {
        std::thread::sleep(Duration::from_millis(10));
    }
    serving.signal(libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        serving.child.try_wait().unwrap().is_none(),
        "the drain waits for the request in flight"
    );
    serving.signal(libc::SIGTERM);
    exits_within(&mut serving, Duration::from_secs(3));
    let said = serving.stderr().join("");
    assert!(said.contains("stopped at once"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_is_one_log_line_in_text_or_json() {
    let reply = json!({"id": "chatcmpl-up", "object": "chat.completion", "created": 1,
        "model": "up", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": "Logged."}}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}});
    let answers = vec![
        Answer::ok(
            "application/json",
            reply.to_string().as_bytes(),
            &[usize::MAX],
        ),
        Answer::ok(
            "application/json",
            reply.to_string().as_bytes(),
            &[usize::MAX],
        ),
    ];
    let upstream = Server::start(answers).await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            "[models.logged]\nprovider = \"openai\"\nbase_url = \"{}\"\n",
            upstream.base_url()
        ),
    );
    let body = r#"{"model":"logged","messages":[{"role":"user","content":"Hi"}]}"#;
    let client = reqwest::Client::new();
    for format in ["json", "text"] {
        let serving = serve(&["--config", &config, "--log-format", format], None);
        let url = format!("{}/v1/chat/completions", serving.base);
        let ok = client
            .post(&url)
            .header("content-type", "application/json")
            .body(body);
        assert_eq!(ok.send().await.unwrap().status(), 200);
        let refused = client.post(&url).body(body);
        assert_eq!(refused.send().await.unwrap().status(), 415);
        // The answer's line is written when its body ends.
        let deadline = Instant::now() + Duration::from_secs(5);
        let lines = loop {
            let lines: Vec<String> = serving
                .stderr()
                .into_iter()
                .filter(|line| line.contains("lmstack::gateway"))
                .collect();
            if lines.len() >= 2 || Instant::now() > deadline {
                break lines;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(lines.len(), 2, "{format}: {lines:?}");
        if format == "json" {
            let line: Value = serde_json::from_str(&lines[0]).unwrap();
            assert_eq!(line["level"], "INFO");
            assert_eq!(line["model"], "logged");
            assert_eq!(line["upstream"], "openai");
            assert_eq!(line["format"], "openai");
            assert_eq!(line["status"], 200);
            assert_eq!(line["input_tokens"], 11);
            assert_eq!(line["output_tokens"], 7);
            assert!(line["duration_ms"].as_f64().is_some(), "{line}");
            assert!(line.get("cancelled").is_none(), "it ended: {line}");
            let refused: Value = serde_json::from_str(&lines[1]).unwrap();
            assert_eq!(refused["status"], 415);
            assert!(
                refused["error"]
                    .as_str()
                    .unwrap()
                    .contains("application/json")
            );
        } else {
            for field in [
                "model=\"logged\"",
                "status=200",
                "input_tokens=11",
                "output_tokens=7",
            ] {
                assert!(lines[0].contains(field), "{field} in {}", lines[0]);
            }
            assert!(lines[1].contains("status=415"), "{}", lines[1]);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_variable_with_a_stray_space_still_admits_its_clients() {
    let serving = serve(&[], Some(" s3cret\n"));
    let client = reqwest::Client::new();
    let models = format!("{}/v1/models", serving.base);
    let admitted = client
        .get(&models)
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(admitted.status(), 200);
    let refused = client.get(&models).send().await.unwrap();
    assert_eq!(refused.status(), 401);
}

/// The upstream key of the secrets test: long enough that its pieces are
/// unmistakable.
const KEY: &str = "sk-proj-Abc123SecretKeyValue9876wxyz";

/// Whether `text` holds any 8 characters in a row of [`KEY`].
fn shows_the_key(text: &str) -> bool {
    (0..=KEY.len() - 8).any(|start| text.contains(&KEY[start..start + 8]))
}

fn echo_in_full(headers: &axum::http::HeaderMap, _: &str) -> Vec<u8> {
    let presented = headers["authorization"].to_str().unwrap();
    json!({"error": {"message": format!("no access for `{presented}`"), "type": "invalid_request_error"}})
        .to_string()
        .into_bytes()
}

fn echo_masked(headers: &axum::http::HeaderMap, _: &str) -> Vec<u8> {
    let key = headers["authorization"]
        .to_str()
        .unwrap()
        .trim_start_matches("Bearer ");
    let masked = format!("{}{}{}", &key[..12], "*".repeat(20), &key[key.len() - 4..]);
    json!({"error": {"message": format!("Incorrect API key provided: {masked}."), "code": "invalid_api_key"}})
        .to_string()
        .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_echoes_the_key_never_shows_it_to_a_client_or_a_log() {
    let in_stream = format!(
        "data: {}\n\n",
        json!({"error": {"message": format!("proxy says: key {KEY} is revoked")}})
    );
    let upstream = Server::start(vec![
        Answer::echo(401, echo_in_full),
        Answer::echo(401, echo_masked),
        Answer::ok("text/event-stream", in_stream.as_bytes(), &[usize::MAX]),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            "[models.up]\nprovider = \"openai\"\nbase_url = \"{}\"\napi_key_env = \"LMSTACK_TEST_UPSTREAM_KEY\"\nretry = false\n\
             [models.hidden]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:1/internal-upstream/v1\"\nretry = false\n",
            upstream.base_url()
        ),
    );
    let mut command = serve_command(&["--config", &config], None);
    command.env("LMSTACK_TEST_UPSTREAM_KEY", KEY);
    let serving = start(command);
    let client = reqwest::Client::new();
    let ask = |path: &str, model: &str, stream: bool| {
        let body = json!({"model": model, "stream": stream, "max_tokens": 8,
                          "messages": [{"role": "user", "content": "Hi"}]});
        client
            .post(format!("{}{path}", serving.base))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    let mut answers = Vec::new();
    for (path, stream) in [
        ("/v1/chat/completions", false),
        ("/v1/messages", true),
        ("/v1/chat/completions", true),
    ] {
        let response = ask(path, "up", stream).await.unwrap();
        let status = response.status().as_u16();
        answers.push((status, response.text().await.unwrap()));
    }
    assert_eq!(upstream.requests().len(), 3);
    assert_eq!(answers[0].0, 502, "{answers:?}");
    assert_eq!(answers[1].0, 502, "{answers:?}");
    assert_eq!(answers[2].0, 200, "an error inside the stream: {answers:?}");
    assert!(
        answers[0].1.contains("no access for `[redacted]`"),
        "{answers:?}"
    );
    assert!(
        answers[1]
            .1
            .contains("Incorrect API key provided: [redacted]"),
        "{answers:?}"
    );
    assert!(answers[2].1.contains("is revoked"), "{answers:?}");
    for (_, text) in &answers {
        assert!(!shows_the_key(text), "{text}");
    }
    // An upstream that cannot be reached: where it lives is for the log only.
    let response = ask("/v1/chat/completions", "hidden", false).await.unwrap();
    assert_eq!(response.status(), 502);
    let text = response.text().await.unwrap();
    assert!(text.contains("could not connect"), "{text}");
    assert!(
        !text.contains("internal-upstream") && !text.contains(":1/"),
        "{text}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    let log = loop {
        let log = serving.stderr().join("");
        if log.matches("lmstack::gateway").count() >= 4 || Instant::now() > deadline {
            break log;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        log.contains("internal-upstream"),
        "the log says where: {log}"
    );
    assert!(log.contains("[redacted]"), "{log}");
    assert!(!shows_the_key(&log), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickling_upstream_is_cut_at_the_request_timeout() {
    let whole = json!({"id": "c", "object": "chat.completion", "created": 1, "model": "up",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "Slowly, slowly."}}]});
    let mut trickle = Answer::ok("application/json", whole.to_string().as_bytes(), &[1]);
    trickle.pace = Duration::from_millis(200);
    let upstream = Server::start(vec![trickle]).await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            "[models.slow]\nprovider = \"openai\"\nbase_url = \"{}\"\nretry = false\n\
             read_timeout_secs = 5\nrequest_timeout_secs = 1\n",
            upstream.base_url()
        ),
    );
    let serving = serve(&["--config", &config], None);
    let started = Instant::now();
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", serving.base))
        .header("content-type", "application/json")
        .body(r#"{"model":"slow","messages":[{"role":"user","content":"Hi"}]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 504);
    let took = started.elapsed();
    let text = response.text().await.unwrap();
    assert!(text.contains("request_timeout"), "{text}");
    assert!(took < Duration::from_secs(4), "cut after {took:?}");
}

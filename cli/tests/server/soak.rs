//! Soak of `lmstack serve` as a process (issue 23): for
//! `LMSTACK_SERVE_SOAK_SECONDS` (default 20), normal clients stream and ask
//! whole answers through the gateway from a loopback upstream, while hostile
//! ones hold half-sent heads, send bodies that never end, drop streams midway
//! and send garbage. It checks that every normal request is answered in full
//! with 200, that their median latency stays within a few times what it was
//! with no one hostile about, that `/health` answers throughout, and that the
//! gateway's resident memory returns to within 48 MiB of what it was after the
//! warm-up once the hostile clients are gone (Linux only).

#[path = "../common/mod.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use common::cli::{serve, write_config};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Hostile clients of each kind at once.
const HOSTILE: usize = 24;
/// Normal clients at once.
const NORMAL: usize = 4;
/// The chunks of each streamed answer.
const CHUNKS: usize = 20;
/// The resident memory the soak may leave behind.
const MEMORY_SLACK: u64 = 48 << 20;

/// An OpenAI-style upstream that streams `CHUNKS` chunks, or answers whole.
async fn upstream() -> String {
    let app = axum::Router::new().fallback(axum::routing::post(|body: Bytes| async move {
        let request: Value = serde_json::from_slice(&body).unwrap_or_default();
        let chunk = |delta: Value, finish: Value| {
            json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "up",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        if request["stream"] == true {
            let frames = futures::stream::iter(0..=CHUNKS).then(move |i| async move {
                tokio::time::sleep(Duration::from_millis(1)).await;
                let frame = match i {
                    CHUNKS => format!(
                        "data: {}\n\ndata: [DONE]\n\n",
                        chunk(json!({}), json!("stop"))
                    ),
                    _ => format!(
                        "data: {}\n\n",
                        chunk(json!({"content": "word "}), Value::Null)
                    ),
                };
                Ok::<_, std::convert::Infallible>(frame)
            });
            return axum::response::Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(frames))
                .unwrap();
        }
        let whole = json!({"id": "c", "object": "chat.completion", "created": 1, "model": "up",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "word ".repeat(CHUNKS)}}]});
        axum::response::Response::builder()
            .header("content-type", "application/json")
            .body(Body::from(whole.to_string()))
            .unwrap()
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}/v1")
}

/// The gateway's resident memory, in bytes (Linux).
fn resident(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib << 10)
}

/// One normal request, streamed or whole: its latency, checked in full.
async fn normal(client: &reqwest::Client, base: &str, stream: bool) -> Duration {
    let started = Instant::now();
    let body = json!({"model": "up", "stream": stream,
                      "messages": [{"role": "user", "content": "Hi"}]});
    let response = client
        .post(format!("{base}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("a normal request is answered");
    assert_eq!(response.status(), 200);
    let text = response.text().await.expect("its whole body");
    assert_eq!(text.matches("word").count(), CHUNKS, "{text}");
    if stream {
        assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    }
    started.elapsed()
}

fn median(mut times: Vec<Duration>) -> Duration {
    assert!(!times.is_empty());
    times.sort();
    times[times.len() / 2]
}

/// Normal clients for `phase`: their latencies.
async fn normal_load(base: &str, phase: Duration) -> Vec<Duration> {
    let mut clients = Vec::new();
    for worker in 0..NORMAL {
        let base = base.to_owned();
        clients.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let until = Instant::now() + phase;
            let mut times = Vec::new();
            let mut n = 0;
            while Instant::now() < until {
                times.push(normal(&client, &base, (worker + n) % 3 != 0).await);
                n += 1;
            }
            times
        }));
    }
    let mut times = Vec::new();
    for client in clients {
        times.extend(client.await.unwrap());
    }
    times
}

/// A hostile client of `kind`, again and again until `stop`.
async fn hostile(kind: usize, address: String, stop: Arc<AtomicBool>, seen: Arc<AtomicUsize>) {
    let chat = |framing: &str| {
        format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n{framing}\r\n"
        )
    };
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut tcp) = TcpStream::connect(&address).await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let sent = match kind {
            // Half a head, held.
            0 => b"POST /v1/chat/completions HTTP/1.1\r\nHost: loc".to_vec(),
            // A body that never ends.
            1 => format!(
                "{}{{\"model\": \"up\", \"mess",
                chat("Content-Length: 100000\r\n")
            )
            .into_bytes(),
            2 => format!(
                "{}10\r\n{{\"model\": \"up\", ",
                chat("Transfer-Encoding: chunked\r\n")
            )
            .into_bytes(),
            // A stream dropped after its first bytes.
            3 => {
                let body =
                    r#"{"model":"up","stream":true,"messages":[{"role":"user","content":"Hi"}]}"#;
                format!(
                    "{}{body}",
                    chat(&format!("Content-Length: {}\r\n", body.len()))
                )
                .into_bytes()
            }
            // Garbage.
            _ => (0..512).map(|_| fastrand::u8(..)).collect(),
        };
        if tcp.write_all(&sent).await.is_err() {
            continue;
        }
        let mut buf = vec![0u8; 1024];
        if kind == 3 {
            let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf)).await;
        } else {
            // Held until the gateway closes it (it must, within its timeouts).
            let closed = tokio::time::timeout(Duration::from_secs(10), async {
                while tcp.read(&mut buf).await.is_ok_and(|n| n > 0) {}
            });
            assert!(
                closed.await.is_ok(),
                "a hostile connection of kind {kind} was never closed"
            );
        }
        seen.fetch_add(1, Ordering::Relaxed);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a soak of LMSTACK_SERVE_SOAK_SECONDS (20 by default): .ci/test runs it"]
async fn slow_and_broken_clients_leave_normal_ones_their_latency_and_the_memory_returns() {
    let seconds: u64 = std::env::var("LMSTACK_SERVE_SOAK_SECONDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(20);
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            "[server]\nheader_timeout_secs = 1\nbody_timeout_secs = 1\nidle_timeout_secs = 2\n\
             [models.up]\nprovider = \"openai\"\nbase_url = \"{upstream}\"\nmax_concurrent = 256\n"
        ),
    );
    let serving = serve(&["--config", &config], None);
    let base = serving.base.clone();
    let address = base.trim_start_matches("http://").to_owned();
    let pid = serving.child.id();

    // Warm-up, then the baseline: normal clients alone.
    normal_load(&base, Duration::from_secs(2)).await;
    let quiet = median(normal_load(&base, Duration::from_secs(3)).await);
    let baseline = resident(pid);

    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(AtomicUsize::new(0));
    let mut hostiles = Vec::new();
    for i in 0..HOSTILE * 5 {
        let (address, stop, seen) = (address.clone(), stop.clone(), seen.clone());
        hostiles.push(tokio::spawn(hostile(i % 5, address, stop, seen)));
    }
    let health = {
        let (base, stop) = (base.clone(), stop.clone());
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            while !stop.load(Ordering::Relaxed) {
                let answer = client.get(format!("{base}/health")).send();
                let answer = tokio::time::timeout(Duration::from_secs(5), answer).await;
                assert!(
                    answer.is_ok_and(|a| a.is_ok_and(|a| a.status() == 200)),
                    "/health"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    let loaded = normal_load(&base, Duration::from_secs(seconds.saturating_sub(5).max(5))).await;
    let under_attack = median(loaded.clone());
    stop.store(true, Ordering::Relaxed);
    for hostile in hostiles {
        hostile.await.unwrap();
    }
    health.await.unwrap();
    eprintln!(
        "soak: {} normal requests, median {quiet:?} alone and {under_attack:?} beside {} hostile \
         connections",
        loaded.len(),
        seen.load(Ordering::Relaxed)
    );
    assert!(
        seen.load(Ordering::Relaxed) > HOSTILE,
        "the hostile clients ran"
    );
    assert!(
        under_attack <= quiet * 5 + Duration::from_millis(50),
        "normal latency {quiet:?} became {under_attack:?}"
    );

    // Once the hostile connections are gone, the memory returns.
    if let (Some(baseline), Some(_)) = (baseline, resident(pid)) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            normal_load(&base, Duration::from_millis(200)).await;
            let now = resident(pid).unwrap();
            if now <= baseline + MEMORY_SLACK {
                eprintln!(
                    "soak: resident {} MiB after, {} MiB before",
                    now >> 20,
                    baseline >> 20
                );
                break;
            }
            assert!(
                Instant::now() < deadline,
                "resident memory {} MiB, {} MiB after the warm-up",
                now >> 20,
                baseline >> 20
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

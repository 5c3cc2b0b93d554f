//! The upstream of the gateway benchmark: `POST /v1/chat/completions` answered at
//! once with a fixed completion, as JSON, or as 40 SSE chunks and `[DONE]` when the
//! request has `"stream": true`. Both bodies are built once, at start-up, so the
//! mock costs the same under every gateway: reading the request and writing bytes.
//!
//! It is also the benchmark's OpenTelemetry collector: `POST /v1/traces` and
//! `/v1/metrics` (OTLP over HTTP) are read and answered with an empty export
//! response, as a collector that accepts everything does.
//!
//! `lmstack-gateway-mock [ADDR]` (127.0.0.1:9000 by default); the runtime takes
//! `TOKIO_WORKER_THREADS` as usual.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::header::CONTENT_TYPE;
use axum::response::Response;
use axum::routing::post;

mod words;
use words::WORDS;

const CREATED: u64 = 1_700_000_000;

fn json_body() -> Bytes {
    let body = serde_json::json!({
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": CREATED,
        "model": "mock",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": WORDS.concat()},
            "finish_reason": "stop",
        }],
        "usage": {"prompt_tokens": 12, "completion_tokens": 40, "total_tokens": 52},
    });
    Bytes::from(serde_json::to_vec(&body).expect("a JSON value"))
}

fn sse_body() -> Bytes {
    let mut out = Vec::new();
    let last = WORDS.len() - 1;
    for (i, word) in WORDS.iter().enumerate() {
        let mut delta = serde_json::json!({"content": word});
        if i == 0 {
            delta["role"] = "assistant".into();
        }
        let finish = if i == last {
            "stop".into()
        } else {
            serde_json::Value::Null
        };
        let chunk = serde_json::json!({
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": "mock",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(&serde_json::to_vec(&chunk).expect("a JSON value"));
        out.extend_from_slice(b"\n\n");
    }
    out.extend_from_slice(b"data: [DONE]\n\n");
    Bytes::from(out)
}

#[tokio::main]
async fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9000".to_owned());
    let (json, sse) = (json_body(), sse_body());
    let collected = |_: Bytes| async {
        Response::builder()
            .header(CONTENT_TYPE, "application/x-protobuf")
            .body(Body::empty())
            .expect("a response")
    };
    let app = Router::new()
        .route("/v1/traces", post(collected))
        .route("/v1/metrics", post(collected))
        .route(
            "/v1/chat/completions",
            post(move |body: Bytes| async move {
                let request: serde_json::Value =
                    serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
                let (content_type, bytes) = if request["stream"] == true {
                    ("text/event-stream", sse.clone())
                } else {
                    ("application/json", json.clone())
                };
                Response::builder()
                    .header(CONTENT_TYPE, content_type)
                    .body(Body::from(bytes))
                    .expect("a response")
            }),
        );
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .unwrap_or_else(|error| panic!("binding {addr}: {error}"));
    eprintln!("mock upstream on http://{addr}");
    axum::serve(listener, app).await.expect("serving");
}

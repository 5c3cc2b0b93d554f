//! The real Claude Code (`@anthropic-ai/claude-code@2.1.328`, installed by
//! `.ci/test`, its executable in `LMSTACK_CLAUDE_CODE`) as a client of
//! `lmstack serve`, headless (`claude -p`), offline: loopback servers play the
//! upstream. Each turn reads a file with Claude Code's own `Read` tool: the
//! upstream's first answer calls `Read` on it, its second is a text made of the
//! tool's result, which Claude Code prints — the file's secret on stdout proves
//! the round trip.
//!
//! - Directly and through the gateway to an Anthropic upstream, the upstream
//!   must get the same requests: every body field, block, `cache_control`,
//!   tool (`defer_loading` included), system message and `anthropic-beta` flag.
//!   Ignored, as they differ between any two runs or are no part of the
//!   Messages API: the session id (in `metadata.user_id`, new in each run; the
//!   device id there is the same, as HOME is); the query `?beta=true` (the SDK's
//!   mark of its beta client, which the gateway's upstream URL has not: the API
//!   reads the flags from `anthropic-beta`); the order of an object's keys; the
//!   headers in `NOT_FORWARDED` and `x-stainless-*`. The model's name is the same
//!   on both sides (no rewrite), so it is compared too.
//! - Through the gateway to an OpenAI Chat upstream, the turn completes.
//!
//! With `LMSTACK_CLAUDE_CODE_FIXTURES=1` the direct run writes its requests,
//! ids and temporary paths stripped, to `tests/fixtures/anthropic/claude-code/`.

use crate::common;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use common::server::{Answer, Server};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::agent;
use crate::upstream::{CHAT_CALL_ID, Wire};

/// The model's name, the same to the client and to the upstream: the gateway
/// has no name to rewrite, so the bodies compare whole.
const MODEL: &str = "claude-e2e";
/// What only the file holds.
const SECRET: &str = "lighthouse-7c3e";
/// The gateway's token, which Claude Code sends as its API key.
const TOKEN: &str = "e2e-token";
/// How long one headless turn may take.
const TURN: Duration = Duration::from_secs(120);

/// The headers each run sends on that the Messages API does not read (the
/// client's identity: its SDK's `x-stainless-*`, its user agent, `x-app`, the
/// session) or that the gateway replaces (the key, the connection's own).
/// Every other header must reach the upstream unchanged.
const NOT_FORWARDED: &[&str] = &[
    "accept",
    "accept-encoding",
    "anthropic-dangerous-direct-browser-access",
    "authorization",
    "connection",
    "content-length",
    "host",
    "user-agent",
    "x-api-key",
    "x-app",
    "x-claude-code-session-id",
];

fn claude_code() -> String {
    std::env::var("LMSTACK_CLAUDE_CODE")
        .expect("LMSTACK_CLAUDE_CODE: the claude executable of @anthropic-ai/claude-code (.ci/test installs it)")
}

/// One HOME and one working directory for all runs of a test: Claude Code
/// writes both into its prompt, so its requests compare between runs.
struct Session {
    home: TempDir,
    work: TempDir,
    file: String,
}

impl Session {
    fn new() -> Session {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let file = work.path().join("note.txt");
        std::fs::write(&file, format!("The secret is {SECRET}.\n")).unwrap();
        Session {
            home,
            work,
            file: file.to_str().unwrap().to_owned(),
        }
    }

    /// Runs one headless turn against `base` (an Anthropic base URL, without
    /// `/v1`); what Claude Code printed.
    fn turn(&self, base: &str) -> String {
        let mut command = Command::new(claude_code());
        command
            .args([
                "-p",
                &format!("Read the file {} and tell me what it says.", self.file),
            ])
            .args(["--model", MODEL, "--allowedTools", "Read"])
            .current_dir(self.work.path())
            .env("HOME", self.home.path())
            .env("ANTHROPIC_BASE_URL", base)
            .env("ANTHROPIC_API_KEY", TOKEN)
            .env("DISABLE_TELEMETRY", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env_remove("ANTHROPIC_AUTH_TOKEN")
            .env_remove("ANTHROPIC_MODEL");
        agent::headless(command, TURN)
    }

    /// An upstream's answers of `wire`: `Read` on the file, then a text made
    /// of its result.
    fn turns(&self, wire: Wire) -> Vec<Answer> {
        wire.turns("Read", &json!({"file_path": self.file}))
    }

    /// `turn` on a blocking thread, beside the loopback servers.
    async fn turn_on(self: &Arc<Self>, base: String) -> String {
        let session = self.clone();
        tokio::task::spawn_blocking(move || session.turn(&base))
            .await
            .unwrap()
    }
}

/// A request as the upstream got it: the path (its query apart), the headers
/// the Messages API reads, and the body with the session id taken out.
fn comparable(uri: &str, headers: &axum::http::HeaderMap, body: &Value) -> Value {
    let mut kept = serde_json::Map::new();
    for (name, value) in headers {
        if !NOT_FORWARDED.contains(&name.as_str()) && !name.as_str().starts_with("x-stainless-") {
            kept.insert(name.to_string(), json!(value.to_str().unwrap()));
        }
    }
    let mut body = body.clone();
    if let Some(user) = body.pointer_mut("/metadata/user_id") {
        let mut id: Value = serde_json::from_str(user.as_str().unwrap()).unwrap();
        id["session_id"] = json!("SESSION");
        *user = json!(id.to_string());
    }
    json!({"path": uri.split('?').next().unwrap(), "headers": kept, "body": body})
}

/// Every JSON path where `a` and `b` differ, with both values.
fn differences(a: &Value, b: &Value, path: &str, found: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                let (u, v) = (&x.get(key), &y.get(key));
                match (u, v) {
                    (Some(u), Some(v)) => differences(u, v, &format!("{path}.{key}"), found),
                    _ => found.push(format!("{path}.{key}: {u:?} vs {v:?}")),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                differences(u, v, &format!("{path}[{i}]"), found);
            }
        }
        _ if a != b => {
            let short = |v: &Value| v.to_string().chars().take(300).collect::<String>();
            found.push(format!("{path}: {} vs {}", short(a), short(b)));
        }
        _ => {}
    }
}

/// The upstream's requests, comparable.
fn received(upstream: &Server) -> Vec<Value> {
    let uris = upstream.uris();
    let requests = upstream.requests();
    assert_eq!(uris.len(), requests.len());
    uris.iter()
        .zip(&requests)
        .map(|(uri, (headers, body))| comparable(uri, headers, body))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Claude Code: .ci/test installs it"]
async fn claude_code_sends_the_same_requests_through_the_gateway_as_directly() {
    let session = Arc::new(Session::new());

    let direct = Server::start(session.turns(Wire::Anthropic)).await;
    let printed = session.turn_on(format!("http://{}", direct.addr)).await;
    assert!(printed.contains(SECRET), "directly: {printed}");

    let upstream = Server::start(session.turns(Wire::Anthropic)).await;
    let dir = tempfile::tempdir().unwrap();
    let serving = agent::gateway(&dir, MODEL, Wire::Anthropic, &upstream, TOKEN);
    let printed = session.turn_on(serving.base.clone()).await;
    assert!(printed.contains(SECRET), "through the gateway: {printed}");

    if std::env::var_os("LMSTACK_CLAUDE_CODE_FIXTURES").is_some() {
        write_fixtures(&session, &direct);
    }
    let (direct, via) = (received(&direct), received(&upstream));
    assert_eq!(direct.len(), 2, "the call, then its result");
    assert_eq!(via.len(), direct.len());
    let mut found = Vec::new();
    for (i, (direct, via)) in direct.iter().zip(&via).enumerate() {
        differences(direct, via, &format!("request {i}"), &mut found);
    }
    assert!(
        found.is_empty(),
        "directly vs through the gateway:\n{}",
        found.join("\n")
    );
    // What the comparison covered.
    let first = &direct[0]["body"];
    assert!(first["tools"].to_string().contains("defer_loading"));
    assert!(first["system"].to_string().contains("cache_control"));
    assert!(direct[0]["headers"]["anthropic-beta"].is_string());
    assert!(direct[1]["body"].to_string().contains(SECRET));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Claude Code: .ci/test installs it"]
async fn claude_code_completes_a_tool_turn_through_the_gateway_to_an_openai_upstream() {
    let session = Arc::new(Session::new());
    let upstream = Server::start(session.turns(Wire::Chat)).await;
    let dir = tempfile::tempdir().unwrap();
    let serving = agent::gateway(&dir, MODEL, Wire::Chat, &upstream, TOKEN);
    let printed = session.turn_on(serving.base.clone()).await;
    assert!(printed.contains(SECRET), "{printed}");
    let sent = upstream.requests();
    assert_eq!(sent.len(), 2, "the call, then its result");
    let last = sent[1].1["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["tool_call_id"], CHAT_CALL_ID);
    // What Claude Code sends that an OpenAI upstream cannot take is dropped,
    // and the log says so.
    for (headers, body) in &sent {
        assert!(!headers.contains_key("anthropic-beta"));
        let body = body.to_string();
        assert!(
            !body.contains("cache_control") && !body.contains("defer_loading"),
            "{body}"
        );
    }
    serving.log_containing(&[
        "does not take were dropped",
        "anthropic-beta",
        "cache_control breakpoints",
        "tool field `defer_loading`",
    ]);
}

/// Writes the direct run's requests as fixtures: ids and temporary paths
/// replaced by fixed ones.
fn write_fixtures(session: &Session, direct: &Server) {
    let work = session.work.path().to_str().unwrap();
    let home = session.home.path().to_str().unwrap();
    let slug: String = work
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let names = ["first-request.json", "tool-result-request.json"];
    for ((_, body), name) in direct.requests().iter().zip(names) {
        let mut body = body.clone();
        if let Some(user) = body.pointer_mut("/metadata/user_id") {
            let mut id: Value = serde_json::from_str(user.as_str().unwrap()).unwrap();
            id["session_id"] = json!("00000000-0000-4000-8000-000000000000");
            id["device_id"] = json!("0".repeat(64));
            *user = json!(id.to_string());
        }
        let text = serde_json::to_string_pretty(&body)
            .unwrap()
            .replace(work, "/home/user/project")
            .replace(&slug, "-home-user-project")
            .replace(home, "/home/user");
        let path = common::fixture_path(&format!("anthropic/claude-code/{name}"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text + "\n").unwrap();
    }
}

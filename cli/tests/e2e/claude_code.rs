//! The real Claude Code (`@anthropic-ai/claude-code@2.1.328`, installed by
//! `.ci/test`, its executable in `LMSTACK_CLAUDE_CODE`) as a client of
//! `lmstack serve`, headless (`claude -p`), offline: loopback servers play the
//! upstream. Its text and image turns read the file with Claude Code's own
//! `Read` tool (the cells of [`agent`](crate::agent)).
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
//! - Through the gateway to an upstream of each wire and a text-only one, the
//!   text and the image turn complete, and what another wire cannot take is
//!   dropped with a warning.
//!
//! With `LMSTACK_CLAUDE_CODE_FIXTURES=1` the direct run writes its requests,
//! ids and temporary paths stripped, to `tests/fixtures/anthropic/claude-code/`.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use common::server::Server;
use serde_json::{Value, json};

use crate::agent::{self, Agent, Route, Scenario, TOKEN, Workspace};
use crate::upstream::{CHAT_CALL_ID, Wire};

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

struct ClaudeCode;

impl Agent for ClaudeCode {
    const NAME: &'static str = "Claude Code";
    /// The same to the client and to the upstream: the gateway has no name to
    /// rewrite, so the bodies compare whole.
    const MODEL: &'static str = "claude-e2e";

    /// `Read` takes an absolute path.
    fn call(scenario: Scenario, work: &Path) -> (&'static str, Value) {
        let path = work.join(scenario.file());
        ("Read", json!({"file_path": path.to_str().unwrap()}))
    }

    fn command(home: &Path, work: &Path, base: &str, prompt: &str) -> Command {
        let executable = std::env::var("LMSTACK_CLAUDE_CODE")
            .expect("LMSTACK_CLAUDE_CODE: the claude executable of @anthropic-ai/claude-code (.ci/test installs it)");
        let mut command = Command::new(executable);
        command
            .args(["-p", prompt])
            .args(["--model", Self::MODEL, "--allowedTools", "Read"])
            .current_dir(work)
            .env("HOME", home)
            .env("ANTHROPIC_BASE_URL", base)
            .env("ANTHROPIC_API_KEY", TOKEN)
            .env("DISABLE_TELEMETRY", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env_remove("ANTHROPIC_AUTH_TOKEN")
            .env_remove("ANTHROPIC_MODEL");
        command
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

/// One turn of the text scenario in `workspace` (the same HOME and working
/// directory for both runs: Claude Code writes both into its prompt) against
/// a scripted Anthropic upstream, by `route`; the upstream.
async fn text_turn(workspace: &Arc<Workspace>, route: Route) -> Server {
    let run = agent::cell::<ClaudeCode>(workspace.clone(), Scenario::Text, Wire::Anthropic, route);
    run.await.upstream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Claude Code: .ci/test installs it"]
async fn claude_code_sends_the_same_requests_through_the_gateway_as_directly() {
    let workspace = Arc::new(Workspace::new());
    let direct = text_turn(&workspace, Route::Direct).await;
    let upstream = text_turn(&workspace, Route::Gateway).await;

    if std::env::var_os("LMSTACK_CLAUDE_CODE_FIXTURES").is_some() {
        write_fixtures(&workspace, &direct);
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
    assert!(direct[1]["body"].to_string().contains(agent::SECRET));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Claude Code: .ci/test installs it"]
async fn claude_code_reads_a_text_and_an_image_directly_from_an_anthropic_upstream() {
    let (_, image) = agent::both::<ClaudeCode>(Wire::Anthropic, Route::Direct).await;
    // `Read` answered with an image block inside its `tool_result`.
    let result = image.received[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|block| block["type"] == "tool_result")
        .unwrap()
        .clone();
    assert!(
        result["content"].to_string().contains("\"image\""),
        "{result}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Claude Code: .ci/test installs it"]
async fn claude_code_reads_a_text_and_an_image_through_the_gateway_to_an_anthropic_upstream() {
    agent::both::<ClaudeCode>(Wire::Anthropic, Route::Gateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Claude Code: .ci/test installs it"]
async fn claude_code_reads_a_text_and_an_image_through_the_gateway_to_an_openai_chat_upstream() {
    let (text, image) = agent::both::<ClaudeCode>(Wire::Chat, Route::Gateway).await;
    let last = text.received[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["tool_call_id"], CHAT_CALL_ID);
    // What Claude Code sends that an OpenAI upstream cannot take is dropped,
    // and the log says so.
    for run in [&text, &image] {
        for (headers, body) in run.upstream.requests() {
            assert!(!headers.contains_key("anthropic-beta"));
            let body = body.to_string();
            assert!(
                !body.contains("cache_control") && !body.contains("defer_loading"),
                "{body}"
            );
        }
        run.gateway.as_ref().unwrap().log_containing(&[
            "does not take were dropped",
            "anthropic-beta",
            "cache_control breakpoints",
            "tool field `defer_loading`",
        ]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Claude Code: .ci/test installs it"]
async fn claude_code_reads_a_text_and_an_image_through_the_gateway_to_a_gemini_upstream() {
    agent::both::<ClaudeCode>(Wire::Gemini, Route::Gateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Claude Code: .ci/test installs it"]
async fn claude_code_reads_a_text_and_an_image_through_the_gateway_to_a_responses_upstream() {
    agent::both::<ClaudeCode>(Wire::Responses, Route::Gateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Claude Code: .ci/test installs it"]
async fn claude_code_reads_a_text_and_an_image_through_the_gateway_to_a_text_only_upstream() {
    agent::both::<ClaudeCode>(Wire::TextOnly, Route::Gateway).await;
}

/// Writes the direct run's requests as fixtures: ids and temporary paths
/// replaced by fixed ones.
fn write_fixtures(workspace: &Workspace, direct: &Server) {
    let work = workspace.work.path().to_str().unwrap();
    let home = workspace.home.path().to_str().unwrap();
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

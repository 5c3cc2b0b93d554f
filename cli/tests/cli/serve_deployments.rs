//! `lmstack serve` with models of several deployments, against loopback
//! upstreams that fail in each way: a call falls back to the next deployment
//! (connection refused, 500, 429 with `Retry-After`, a timeout) and then to a
//! fallback model, refitted to its wire; a failing deployment cools down; a
//! reply that broke after its first event is never sent again; a session
//! stays on its deployment.

use crate::common;

use std::time::Duration;

use common::cli::{Serving, write_config};
use common::server::{Answer, Server};
use serde_json::{Value, json};

fn serve(config: &str) -> Serving {
    common::cli::serve(&["--config", config], None)
}

/// A whole OpenAI Chat reply saying `text`.
fn says(text: &str) -> Answer {
    let body = json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
        "model": "up", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}});
    Answer::ok(
        "application/json",
        body.to_string().as_bytes(),
        &[usize::MAX],
    )
}

/// An upstream giving `answer` to every request.
async fn always(answer: Answer) -> Server {
    Server::start_with_standing(Vec::new(), vec![("/", answer)]).await
}

/// An address where nothing listens.
async fn refusing() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{address}/v1")
}

/// Posts `body` to the gateway's Chat Completions route with `headers`: the
/// status and the body's text.
async fn post(serving: &Serving, body: Value, headers: &[(&str, &str)]) -> (u16, String) {
    let mut request = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", serving.base))
        .header("content-type", "application/json")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// Claude Code's session header.
const SESSION: &str = "x-claude-code-session-id";

fn chat(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "Hi"}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_failure_falls_back_to_the_next_deployment_which_then_cools_down() {
    let refused = refusing().await;
    let broken = always(Answer::error(
        500,
        br#"{"error": {"message": "down"}}"#,
        &[],
    ))
    .await;
    let limited = always(Answer::error(
        429,
        br#"{"error": {"message": "slow down"}}"#,
        &[("retry-after", "60")],
    ))
    .await;
    let mut stalled = says("too late");
    stalled.stall = Duration::from_secs(30);
    let stalled = always(stalled).await;
    let healthy = always(says("From the healthy one.")).await;
    let dir = tempfile::tempdir().unwrap();
    let deployment = |url: &str| format!("[[models.gpt.deployments]]\nbase_url = \"{url}\"\n");
    let config = format!(
        "[models.gpt]\nprovider = \"openai\"\nfailures_to_open = 1\nread_timeout_secs = 0.5\n\
         {}{}{}{}{}",
        deployment(&refused),
        deployment(&broken.base_url()),
        deployment(&limited.base_url()),
        deployment(&stalled.base_url()),
        deployment(&healthy.base_url()),
    );
    let serving = serve(&write_config(&dir, &config));
    // Tried in order (the first listed on a tie): each fails in its own way
    // before the healthy one answers.
    for _ in 0..3 {
        let (status, body) = post(&serving, chat("gpt"), &[]).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("From the healthy one."), "{body}");
    }
    // The failing ones were called once: they cool down.
    let called = |server: &Server| server.requests().len();
    assert_eq!(
        [&broken, &limited, &stalled, &healthy].map(called),
        [1, 1, 1, 3]
    );
    serving.log_containing(&["trying the next deployment", "HTTP 429", "HTTP 500"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_whose_deployments_all_fail_falls_back_to_another_refitted_to_its_wire() {
    let overloaded =
        br#"{"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}"#;
    let first = always(Answer::error(529, overloaded, &[])).await;
    let second = always(Answer::error(503, overloaded, &[])).await;
    let gpt = always(says("From the fallback.")).await;
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "[models.claude]\nprovider = \"anthropic\"\nfallbacks = [\"gpt\"]\n\
         [[models.claude.deployments]]\nbase_url = \"{}\"\n\
         [[models.claude.deployments]]\nbase_url = \"{}\"\n\
         [models.gpt]\nprovider = \"openai\"\nbase_url = \"{}\"\nretry = false\n",
        first.base_url(),
        second.base_url(),
        gpt.base_url(),
    );
    let serving = serve(&write_config(&dir, &config));
    // An Anthropic client's request, with an option OpenAI has no place for.
    let request = json!({"model": "claude", "max_tokens": 16, "top_k": 5,
        "messages": [{"role": "user", "content": "Hi"}]});
    let response = reqwest::Client::new()
        .post(format!("{}/v1/messages", serving.base))
        .header("content-type", "application/json")
        .header("anthropic-version", "2023-06-01")
        .body(request.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let said = response.text().await.unwrap();
    assert!(said.contains("From the fallback."), "{said}");
    // Each Anthropic deployment got the client's option; the OpenAI fallback
    // the request refitted from the client's, without it.
    for server in [&first, &second] {
        assert_eq!(server.requests()[0].1["top_k"], 5);
    }
    let sent = &gpt.requests()[0].1;
    assert!(sent.get("top_k").is_none(), "{sent}");
    assert_eq!(sent["messages"][0]["content"], "Hi", "{sent}");
    serving.log_containing(&[
        "`claude` failed before its first event",
        "the `openai` upstream of `gpt` does not take were dropped: top_k",
        "fallback=\"gpt\"",
    ]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_that_broke_after_its_first_event_is_never_sent_again() {
    let chunk = json!({"id": "c1", "object": "chat.completion.chunk", "created": 1,
        "model": "up", "choices": [{"index": 0, "delta": {"role": "assistant",
        "content": "Hello, wor"}}]});
    let mut breaking = Answer::ok(
        "text/event-stream",
        format!("data: {chunk}\n\n").as_bytes(),
        &[usize::MAX],
    );
    breaking.break_after = true;
    let breaking = Server::start(vec![breaking]).await;
    let other = Server::start(Vec::new()).await;
    let fallback = Server::start(Vec::new()).await;
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "[models.gpt]\nprovider = \"openai\"\nfallbacks = [\"spare\"]\n\
         [[models.gpt.deployments]]\nbase_url = \"{}\"\n\
         [[models.gpt.deployments]]\nbase_url = \"{}\"\n\
         [models.spare]\nprovider = \"openai\"\nbase_url = \"{}\"\n",
        breaking.base_url(),
        other.base_url(),
        fallback.base_url(),
    );
    let serving = serve(&write_config(&dir, &config));
    let mut request = chat("gpt");
    request["stream"] = json!(true);
    let (status, body) = post(&serving, request, &[]).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("Hello, wor"), "{body}");
    assert!(
        body.contains("\"error\""),
        "the client gets the error: {body}"
    );
    assert_eq!(breaking.requests().len(), 1);
    assert!(other.requests().is_empty(), "never sent again");
    assert!(fallback.requests().is_empty(), "never sent to a fallback");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_stays_on_its_deployment_and_sessions_spread() {
    let upstreams = [always(says("one")).await, always(says("two")).await];
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "[models.gpt]\nprovider = \"openai\"\n\
         [[models.gpt.deployments]]\nbase_url = \"{}\"\n\
         [[models.gpt.deployments]]\nbase_url = \"{}\"\n",
        upstreams[0].base_url(),
        upstreams[1].base_url(),
    );
    let serving = serve(&write_config(&dir, &config));
    // The deployment a request went to, by what it said.
    let home = |body: &str| usize::from(body.contains("\"two\""));
    // Sessions spread over both deployments, by Claude Code's session header.
    let mut homes = Vec::new();
    for n in 0..24 {
        let session = format!("session-{n}");
        let (status, body) = post(&serving, chat("gpt"), &[(SESSION, &session)]).await;
        assert_eq!(status, 200, "{body}");
        homes.push(home(&body));
    }
    let second = homes.iter().sum::<usize>();
    assert!((4..=20).contains(&second), "{homes:?}");
    // Each stays on its own, by the header or by the body's prompt_cache_key.
    for (n, &at) in homes.iter().enumerate() {
        let session = format!("session-{n}");
        let (_, body) = post(&serving, chat("gpt"), &[(SESSION, &session)]).await;
        assert_eq!(home(&body), at, "session-{n} stayed");
        let mut keyed = chat("gpt");
        keyed["prompt_cache_key"] = json!(session);
        let (_, body) = post(&serving, keyed, &[]).await;
        assert_eq!(home(&body), at, "the key session-{n} went the same way");
    }
    let total: usize = upstreams.iter().map(|server| server.requests().len()).sum();
    assert_eq!(total, 72);
}

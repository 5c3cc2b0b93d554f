//! Client keys with limits in `lmstack serve`: two processes sharing a real
//! `redis-server` (`LMSTACK_REDIS_URL`, started by `.ci/test`) enforce one
//! budget and one token rate across both, and across a restart; a store that
//! cannot be reached fails open or closed, as configured, with one warning.

#![cfg(unix)]

use crate::common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::cli::{Serving, serve_command, start, write_config};
use common::server::{Answer, Server};
use serde_json::{Value, json};

/// An upstream whose every reply reports 11 input and 7 output tokens.
async fn upstream(replies: usize) -> Server {
    let reply = json!({"id": "chatcmpl-up", "object": "chat.completion", "created": 1,
        "model": "up", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": "Counted."}}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}});
    let body = reply.to_string();
    let answers = (0..replies)
        .map(|_| Answer::ok("application/json", body.as_bytes(), &[usize::MAX]))
        .collect();
    Server::start(answers).await
}

/// A configuration: the model `counted` at `upstream` (1.0 per million tokens
/// both ways: 18 millionths a reply), the keys `alice` (40 tokens a minute)
/// and `bob` (a budget of 50 millionths), and `limits` as the
/// `[server.limits]` table.
fn config(dir: &tempfile::TempDir, upstream: &Server, limits: &str) -> String {
    let text = format!(
        "[server.limits]\n{limits}\n\
         [[server.keys]]\nname = \"alice\"\nkey_env = \"TEST_KEY_ALICE\"\ntokens_per_minute = 40\n\
         [[server.keys]]\nname = \"bob\"\nkey_env = \"TEST_KEY_BOB\"\nbudget = 0.00005\n\
         budget_period = \"total\"\n\
         [models.counted]\nprovider = \"openai\"\nbase_url = \"{}\"\n\
         [models.counted.price]\ninput = 1.0\noutput = 1.0\n",
        upstream.base_url()
    );
    write_config(dir, &text)
}

fn serve_with_keys(config: &str) -> Serving {
    let mut command = serve_command(&["--config", config, "--log-format", "json"], None);
    command
        .env("TEST_KEY_ALICE", "alice-key")
        .env("TEST_KEY_BOB", "bob-key");
    start(command)
}

/// Asks `serving` in the OpenAI format (or the Anthropic one) with `key`:
/// the status, the `Retry-After` and the body.
async fn ask(serving: &Serving, key: &str, anthropic: bool) -> (u16, Option<u64>, Value) {
    let client = reqwest::Client::new();
    let (path, auth) = match anthropic {
        true => ("/v1/messages", ("x-api-key", key.to_owned())),
        false => (
            "/v1/chat/completions",
            ("authorization", format!("Bearer {key}")),
        ),
    };
    let body = json!({"model": "counted", "max_tokens": 1,
        "messages": [{"role": "user", "content": "Hi"}]});
    let response = client
        .post(format!("{}{path}", serving.base))
        .header(auth.0, auth.1)
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let wait = response
        .headers()
        .get("retry-after")
        .and_then(|value| value.to_str().ok()?.parse().ok());
    (status, wait, response.json().await.unwrap_or(Value::Null))
}

/// Waits, if need be, until a minute has at least 20 seconds left, so that
/// the requests of a test count in one minute.
fn early_in_a_minute() {
    let second = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        % 60;
    if second >= 40 {
        std::thread::sleep(Duration::from_secs(61 - second));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a redis-server (LMSTACK_REDIS_URL)"]
async fn two_gateways_sharing_redis_enforce_one_budget_and_one_token_rate_across_a_restart() {
    let redis = std::env::var("LMSTACK_REDIS_URL").expect("LMSTACK_REDIS_URL (.ci/test)");
    let upstream = upstream(16).await;
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!(
        "lmstack-cli-test:{}:{}:",
        std::process::id(),
        fastrand::u64(..)
    );
    let limits = format!("redis_url = \"{redis}\"\nkey_prefix = \"{prefix}\"\n");
    let config = config(&dir, &upstream, &limits);
    let one = serve_with_keys(&config);
    let mut two = serve_with_keys(&config);

    // bob's budget: 50 millionths, 18 a reply; the third reply passes it.
    for serving in [&one, &two, &one] {
        assert_eq!(ask(serving, "bob-key", false).await.0, 200);
    }
    let (status, wait, body) = ask(&two, "bob-key", false).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(wait, None, "a total budget never resets");
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");

    // alice's 40 tokens a minute: 18 counted per reply (its usage), each
    // request reserving about 11; the third does not fit.
    early_in_a_minute();
    assert_eq!(ask(&one, "alice-key", true).await.0, 200);
    assert_eq!(ask(&two, "alice-key", true).await.0, 200);
    let (status, wait, body) = ask(&one, "alice-key", true).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["type"], "rate_limit_error");
    assert!(
        wait.is_some_and(|wait| (1..=60).contains(&wait)),
        "{wait:?}"
    );

    // A gateway restarted finds the counters where they were.
    drop(std::mem::replace(&mut two, serve_with_keys(&config)));
    assert_eq!(ask(&two, "bob-key", false).await.0, 429);
    assert_eq!(ask(&two, "alice-key", false).await.0, 429);
    let log = two.log_containing(&["\"key\":\"alice\"", "\"status\":429"]);
    assert!(log.contains("\"key\":\"bob\""), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_cannot_be_reached_fails_open_or_closed_with_one_warning() {
    let upstream = upstream(4).await;
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens on port 1 of loopback.
    let down = "redis_url = \"redis://127.0.0.1:1/\"\nstore_timeout_secs = 0.3\n";
    let open = serve_with_keys(&config(&dir, &upstream, down));
    for _ in 0..3 {
        assert_eq!(ask(&open, "bob-key", false).await.0, 200);
    }
    let log = open.log_containing(&["the limit store failed", "requests pass unlimited"]);
    assert_eq!(log.matches("the limit store failed").count(), 1, "{log}");

    let closed = format!("{down}on_store_error = \"closed\"\n");
    let closed = serve_with_keys(&config(&dir, &upstream, &closed));
    let (status, wait, body) = ask(&closed, "alice-key", true).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["type"], "overloaded_error");
    assert_eq!(wait, Some(1));
    assert_eq!(ask(&closed, "bob-key", false).await.0, 503);
    let log = closed.log_containing(&["requests are refused with 503"]);
    assert_eq!(log.matches("the limit store failed").count(), 1, "{log}");
}

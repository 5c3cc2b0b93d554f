//! Talking to llmock (PyPI `llmock==0.2.2`), the mock provider with fault
//! injection that `.ci/test` starts: its address, scripting behaviours for one
//! model, and reading its journal.

use serde_json::{Value, json};

/// Why a test needs llmock, for its panic messages.
const NEEDS: &str =
    "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL";

/// llmock's base URL, from `LMSTACK_LLMOCK_URL`.
pub fn llmock() -> String {
    std::env::var("LMSTACK_LLMOCK_URL").unwrap_or_else(|_| {
        panic!(
            "LMSTACK_LLMOCK_URL is not set: this test {}",
            NEEDS.trim_start_matches("needs ")
        )
    })
}

/// A model name for this test run alone (the server may outlive one run).
pub fn unique(name: &str) -> String {
    format!("{name}-{}", std::process::id())
}

/// Queues llmock behaviours that apply only to requests for `model`.
pub async fn script(model: &str, behaviors: Value) {
    let behaviors: Vec<Value> = behaviors
        .as_array()
        .unwrap()
        .iter()
        .map(|behavior| {
            let mut behavior = behavior.clone();
            behavior["match"] = json!({"model": model});
            behavior
        })
        .collect();
    let response = reqwest::Client::new()
        .post(format!("{}/_llmock/scenario", llmock()))
        .header("content-type", "application/json")
        .body(json!({"behaviors": behaviors}).to_string())
        .send()
        .await
        .expect("llmock answers");
    assert!(
        response.status().is_success(),
        "llmock refused the scenario: {}",
        response.text().await.unwrap()
    );
}

/// Reads one of llmock's control endpoints (`/_llmock/{what}`) as JSON.
async fn control(what: &str) -> Value {
    let text = reqwest::get(format!("{}/_llmock/{what}", llmock()))
        .await
        .expect("llmock answers")
        .text()
        .await
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The attempts llmock saw for `model`, oldest first.
pub async fn attempts(model: &str) -> Vec<Value> {
    control("requests").await["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|record| record["model"] == model)
        .cloned()
        .collect()
}

/// The behaviours still waiting to fire for models whose name starts with
/// `prefix`.
pub async fn pending(prefix: &str) -> Vec<Value> {
    control("scenario").await["pending"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|behavior| {
            behavior["match"]["model"]
                .as_str()
                .is_some_and(|model| model.starts_with(prefix))
        })
        .cloned()
        .collect()
}

/// The answer the fault tests script after their faults.
pub const ANSWER: &str = "one two three four five six seven";

/// Queues `faults` for `model`, then [`ANSWER`] (twice: a retry that comes
/// once too often still finds it, and the count of attempts tells).
pub async fn script_faults_then_answer(model: &str, faults: Value) {
    let mut behaviors = match faults {
        Value::Array(faults) => faults,
        fault => vec![fault],
    };
    behaviors.push(json!({"type": "reply", "text": ANSWER, "times": 2}));
    script(model, Value::Array(behaviors)).await;
}

/// Reads a streaming reply to its end: the text that arrived, and how it ended.
pub async fn read(reply: lmstack::Reply) -> (String, Result<(), lmstack::Error>) {
    let mut text = String::new();
    let items: Vec<_> = futures::StreamExt::collect(reply).await;
    for item in items {
        match item {
            Ok(lmstack::Event::TextDelta(delta)) => text.push_str(&delta.text),
            Ok(_) => {}
            Err(error) => return (text, Err(error)),
        }
    }
    (text, Ok(()))
}

//! The real Codex CLI (`@openai/codex@0.169.0`, installed by `.ci/test`, its
//! executable in `LMSTACK_CODEX`) as a client, headless (`codex exec
//! --skip-git-repo-check -s read-only`), offline: loopback servers play the
//! upstream, and a temporary HOME holds the `.codex/config.toml` that names
//! the base URL as a `responses` provider. The cells of the matrix
//! ([`agent`](crate::agent)): its text turn runs `exec_command` with
//! `cat secret.txt`, its image turn `view_image` on `red.png`.
//!
//! Directly against a Responses upstream (which proves the harness and the
//! scripts: the event sequences are those Codex accepted from a recording
//! upstream), and through `lmstack serve` to an upstream of each wire and a
//! text-only one. Codex's requests as a recording upstream got them are
//! fixtures (`tests/fixtures/openai_responses/codex/`), read by the served
//! Responses format's own tests.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::agent::{self, Agent, Route, Scenario, TOKEN};
use crate::upstream::Wire;

/// The variable Codex reads its API key from (`env_key`).
const KEY_VARIABLE: &str = "LMSTACK_E2E_CODEX_KEY";

struct Codex;

impl Agent for Codex {
    const NAME: &'static str = "Codex";
    const MODEL: &'static str = "codex-e2e";

    fn call(scenario: Scenario, _work: &Path) -> (&'static str, Value) {
        match scenario {
            Scenario::Text => (
                "exec_command",
                json!({"cmd": format!("cat {}", scenario.file())}),
            ),
            Scenario::Image => ("view_image", json!({"path": scenario.file()})),
        }
    }

    /// Codex retries nothing, so that a failure shows at once.
    fn command(home: &Path, work: &Path, base: &str, prompt: &str) -> Command {
        let codex_home = home.join(".codex");
        std::fs::create_dir_all(&codex_home).unwrap();
        let config = format!(
            "model = \"{}\"\nmodel_provider = \"lm\"\n\n\
             [model_providers.lm]\nname = \"lmstack\"\nbase_url = \"{base}/v1\"\n\
             wire_api = \"responses\"\nenv_key = \"{KEY_VARIABLE}\"\n\
             request_max_retries = 0\nstream_max_retries = 0\n",
            Self::MODEL
        );
        std::fs::write(codex_home.join("config.toml"), config).unwrap();
        let executable = std::env::var("LMSTACK_CODEX")
            .expect("LMSTACK_CODEX: the codex executable of @openai/codex (.ci/test installs it)");
        let mut command = Command::new(executable);
        command
            .args(["exec", "--skip-git-repo-check", "-s", "read-only"])
            .arg(prompt)
            .current_dir(work)
            .env("HOME", home)
            .env(KEY_VARIABLE, TOKEN)
            .env_remove("CODEX_HOME")
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL");
        command
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Codex CLI: .ci/test installs it"]
async fn codex_reads_a_text_and_an_image_directly_from_a_responses_upstream() {
    let (text, image) = agent::both::<Codex>(Wire::Responses, Route::Direct).await;
    // The image went back as Codex's `input_image` in `function_call_output`.
    let output = &image.received[1]["input"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|item| item["type"] == "function_call_output")
        .unwrap()["output"];
    assert_eq!(output[0]["type"], "input_image", "{output}");
    // The command's output went back as its `function_call_output` string.
    let last = text.received[1]["input"]
        .as_array()
        .unwrap()
        .last()
        .unwrap();
    assert_eq!(last["type"], "function_call_output", "{last}");
    assert!(last["output"].is_string(), "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Codex CLI: .ci/test installs it"]
async fn codex_reads_a_text_and_an_image_through_the_gateway_to_a_responses_upstream() {
    agent::both::<Codex>(Wire::Responses, Route::Gateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Codex CLI: .ci/test installs it"]
async fn codex_reads_a_text_and_an_image_through_the_gateway_to_an_openai_chat_upstream() {
    agent::both::<Codex>(Wire::Chat, Route::Gateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Codex CLI: .ci/test installs it"]
async fn codex_reads_a_text_and_an_image_through_the_gateway_to_an_anthropic_upstream() {
    agent::both::<Codex>(Wire::Anthropic, Route::Gateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Codex CLI: .ci/test installs it"]
async fn codex_reads_a_text_and_an_image_through_the_gateway_to_a_gemini_upstream() {
    agent::both::<Codex>(Wire::Gemini, Route::Gateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Codex CLI: .ci/test installs it"]
async fn codex_reads_a_text_and_an_image_through_the_gateway_to_a_text_only_upstream() {
    agent::both::<Codex>(Wire::TextOnly, Route::Gateway).await;
}

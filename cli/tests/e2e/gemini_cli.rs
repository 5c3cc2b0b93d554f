//! The real Gemini CLI (`@google/gemini-cli@0.61.0`, installed by `.ci/test`,
//! its executable in `LMSTACK_GEMINI_CLI`) as a client, headless (`gemini -m
//! MODEL -p PROMPT`), offline: loopback servers play the upstream
//! (`GOOGLE_GEMINI_BASE_URL`), and a temporary HOME holds the
//! `.gemini/settings.json` that picks API-key auth and turns telemetry,
//! usage statistics and update checks off. The cells of the matrix
//! ([`agent`](crate::agent)): both turns call its `read_file` tool, on
//! `secret.txt` and on `red.png`.
//!
//! Directly against a Gemini upstream (which proves the harness and the
//! scripts), and through `lmstack serve` to an upstream of each wire and a
//! text-only one.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::agent::{self, Agent, Route, Scenario, TOKEN};
use crate::upstream::Wire;

struct GeminiCli;

impl Agent for GeminiCli {
    const NAME: &'static str = "Gemini CLI";
    const MODEL: &'static str = "gemini-e2e";

    fn call(scenario: Scenario, work: &Path) -> (&'static str, Value) {
        let path = work.join(scenario.file());
        ("read_file", json!({"file_path": path.to_str().unwrap()}))
    }

    fn command(home: &Path, work: &Path, base: &str, prompt: &str) -> Command {
        let settings = home.join(".gemini");
        std::fs::create_dir_all(&settings).unwrap();
        let config = json!({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
            "privacy": {"usageStatisticsEnabled": false},
            "telemetry": {"enabled": false},
        });
        std::fs::write(settings.join("settings.json"), config.to_string()).unwrap();
        let executable = std::env::var("LMSTACK_GEMINI_CLI").expect(
            "LMSTACK_GEMINI_CLI: the gemini executable of @google/gemini-cli (.ci/test installs it)",
        );
        let mut command = Command::new(executable);
        command
            .args(["-m", Self::MODEL, "-p", prompt])
            .current_dir(work)
            .env("HOME", home)
            .env("GOOGLE_GEMINI_BASE_URL", base)
            .env("GEMINI_API_KEY", TOKEN)
            .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
            .env("GEMINI_TELEMETRY_ENABLED", "false")
            .env_remove("GOOGLE_API_KEY")
            .env_remove("GOOGLE_GENAI_USE_VERTEXAI")
            .env_remove("GOOGLE_CLOUD_PROJECT")
            .env_remove("GEMINI_MODEL");
        command
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Gemini CLI: .ci/test installs it"]
async fn gemini_cli_reads_a_text_and_an_image_directly_from_a_gemini_upstream() {
    let (text, image) = agent::both::<GeminiCli>(Wire::Gemini, Route::Direct).await;
    // It asked on its streaming route, with the key in `x-goog-api-key`.
    let uri = &text.upstream.uris()[0];
    assert!(
        uri.contains(&format!(
            "/models/{}:streamGenerateContent",
            GeminiCli::MODEL
        )),
        "{uri}"
    );
    let (headers, _) = &text.upstream.requests()[0];
    assert_eq!(headers["x-goog-api-key"], TOKEN);
    // Before it sends the image, it counts its tokens.
    assert_eq!((text.counted, image.counted), (0, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Gemini CLI: .ci/test installs it"]
async fn gemini_cli_reads_a_text_and_an_image_through_the_gateway_to_a_gemini_upstream() {
    let (_, image) = agent::both::<GeminiCli>(Wire::Gemini, Route::Gateway).await;
    // Its count of the image's tokens (a body of the function response and
    // the image alone, without the call) reached the upstream's count.
    assert_eq!(
        image.counted,
        1,
        "Gemini CLI's :countTokens before it sends the image was not counted by the upstream: {}",
        image.gateway.as_ref().unwrap().stderr().concat()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Gemini CLI: .ci/test installs it"]
async fn gemini_cli_reads_a_text_and_an_image_through_the_gateway_to_an_openai_chat_upstream() {
    agent::both::<GeminiCli>(Wire::Chat, Route::Gateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Gemini CLI: .ci/test installs it"]
async fn gemini_cli_reads_a_text_and_an_image_through_the_gateway_to_an_anthropic_upstream() {
    agent::both::<GeminiCli>(Wire::Anthropic, Route::Gateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Gemini CLI: .ci/test installs it"]
async fn gemini_cli_reads_a_text_and_an_image_through_the_gateway_to_a_responses_upstream() {
    agent::both::<GeminiCli>(Wire::Responses, Route::Gateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Gemini CLI: .ci/test installs it"]
async fn gemini_cli_reads_a_text_and_an_image_through_the_gateway_to_a_text_only_upstream() {
    agent::both::<GeminiCli>(Wire::TextOnly, Route::Gateway).await;
}

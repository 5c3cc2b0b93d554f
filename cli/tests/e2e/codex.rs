//! The real Codex CLI (`@openai/codex@0.169.0`, installed by `.ci/test`, its
//! executable in `LMSTACK_CODEX`) as a client, headless (`codex exec
//! --skip-git-repo-check -s read-only`), offline: loopback servers play the
//! upstream, and a temporary HOME holds the `.codex/config.toml` that names
//! the base URL as a `responses` provider. Two scenarios, each a turn in which
//! the scripted model calls one of Codex's own tools and then answers from
//! the result it received, which Codex prints:
//!
//! - shell: `exec_command` with `cat secret.txt`; the answer quotes the
//!   command's output, so the file's secret on stdout proves the round trip;
//! - image: `view_image` on `red.png`; the upstream must receive the image in
//!   its own wire's shape (a Responses `input_image` in the
//!   `function_call_output`, an Anthropic `image` block inside the
//!   `tool_result`, an OpenAI Chat `image_url` part in a user message after
//!   the results, Gemini `inlineData`), never as base64 in text; it answers
//!   with the image's media type and size.
//!
//! Directly against a Responses upstream (which proves the harness and the
//! scripts: the event sequences are those Codex accepted from a recording
//! upstream), and through `lmstack serve` to an upstream of each wire. Each
//! test runs its two scenarios at once; one Codex turn takes about a second.
//! Codex's requests as a recording upstream got them are fixtures
//! (`tests/fixtures/openai_responses/codex/`), read by the served Responses
//! format's own tests.

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine;
use common::server::Server;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::agent;
use crate::upstream::{self, Wire};

/// The model's name, the same to Codex and to the upstream.
const MODEL: &str = "codex-e2e";
/// What only `secret.txt` holds.
const SECRET: &str = "harbour-5d1f";
/// The gateway's token, which Codex sends as its API key.
const TOKEN: &str = "e2e-token";
/// The variable Codex reads its API key from (`env_key`).
const KEY_VARIABLE: &str = "LMSTACK_E2E_CODEX_KEY";
/// How long one headless turn may take.
const TURN: Duration = Duration::from_secs(45);
/// `red.png`: 4×4 red pixels.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEElEQVR4nGP4z8AARwzEcQCukw/x0F8jngAAAABJRU5ErkJggg==";

fn codex() -> String {
    std::env::var("LMSTACK_CODEX")
        .expect("LMSTACK_CODEX: the codex executable of @openai/codex (.ci/test installs it)")
}

fn png() -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(PNG)
        .unwrap()
}

/// What the model asks Codex to do.
#[derive(Clone, Copy, Debug)]
enum Scenario {
    /// `exec_command` with `cat secret.txt`.
    Shell,
    /// `view_image` on `red.png`.
    Image,
}

impl Scenario {
    fn prompt(self) -> &'static str {
        match self {
            Scenario::Shell => "What does secret.txt say?",
            Scenario::Image => "Look at red.png",
        }
    }

    /// The tool the model calls, with the arguments Codex's tool takes.
    fn call(self) -> (&'static str, Value) {
        match self {
            Scenario::Shell => ("exec_command", json!({"cmd": "cat secret.txt"})),
            Scenario::Image => ("view_image", json!({"path": "red.png"})),
        }
    }

    /// What Codex must print: the answer made of the tool's result.
    fn printed(self) -> String {
        match self {
            Scenario::Shell => SECRET.to_owned(),
            Scenario::Image => upstream::seen("image/png", &png()),
        }
    }
}

/// A temporary HOME (with Codex's configuration) and working directory
/// (`secret.txt`, `red.png`).
struct Workspace {
    home: TempDir,
    work: TempDir,
}

impl Workspace {
    fn new() -> Workspace {
        let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let file =
            |name: &str, bytes: &[u8]| std::fs::write(work.path().join(name), bytes).unwrap();
        file(
            "secret.txt",
            format!("The secret is {SECRET}.\n").as_bytes(),
        );
        file("red.png", &png());
        Workspace { home, work }
    }

    /// Runs one headless turn of `scenario` with `base` (without `/v1`) as
    /// the Responses provider; what Codex printed. Codex retries nothing, so
    /// that a failure shows at once.
    fn turn(&self, base: &str, scenario: Scenario) -> String {
        let codex_home = self.home.path().join(".codex");
        std::fs::create_dir_all(&codex_home).unwrap();
        let config = format!(
            "model = \"{MODEL}\"\nmodel_provider = \"lm\"\n\n\
             [model_providers.lm]\nname = \"lmstack\"\nbase_url = \"{base}/v1\"\n\
             wire_api = \"responses\"\nenv_key = \"{KEY_VARIABLE}\"\n\
             request_max_retries = 0\nstream_max_retries = 0\n"
        );
        std::fs::write(codex_home.join("config.toml"), config).unwrap();
        let mut command = Command::new(codex());
        command
            .args(["exec", "--skip-git-repo-check", "-s", "read-only"])
            .arg(scenario.prompt())
            .current_dir(self.work.path())
            .env("HOME", self.home.path())
            .env(KEY_VARIABLE, TOKEN)
            .env_remove("CODEX_HOME")
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL");
        agent::headless(command, TURN)
    }
}

/// Where Codex's requests go.
#[derive(Clone, Copy, Debug)]
enum Route {
    /// Straight to the upstream.
    Direct,
    /// Through `lmstack serve`.
    Gateway,
}

/// One finished turn.
struct Run {
    printed: String,
    /// The body of each request the upstream received.
    received: Vec<Value>,
}

/// Codex does `scenario` against a scripted upstream of `wire`, by `route`;
/// checks what it printed and what the upstream received.
async fn cell(scenario: Scenario, wire: Wire, route: Route) -> Run {
    let (tool, arguments) = scenario.call();
    let upstream = Server::start(wire.turns(tool, &arguments)).await;
    let dir = tempfile::tempdir().unwrap();
    let (base, _serving) = match route {
        Route::Direct => (format!("http://{}", upstream.addr), None),
        Route::Gateway => {
            let serving = agent::gateway(&dir, MODEL, wire, &upstream, TOKEN);
            (serving.base.clone(), Some(serving))
        }
    };
    let workspace = Workspace::new();
    let started = Instant::now();
    let printed =
        finished(tokio::task::spawn_blocking(move || workspace.turn(&base, scenario)).await);
    eprintln!(
        "codex, {scenario:?} against {wire:?} {route:?}: {:.1?}",
        started.elapsed()
    );
    let run = Run {
        printed,
        received: upstream
            .requests()
            .into_iter()
            .map(|(_, body)| body)
            .collect(),
    };
    check(scenario, wire, &run);
    run
}

/// The turn printed the answer made of the tool's result, and the upstream
/// received the call and its result in its own shape.
fn check(scenario: Scenario, wire: Wire, run: &Run) {
    let case = format!("{scenario:?} against {wire:?}");
    let expected = scenario.printed();
    assert!(
        run.printed.contains(&expected),
        "{case}: Codex printed {:?}, not {expected:?}",
        run.printed
    );
    assert_eq!(run.received.len(), 2, "{case}: the call, then its result");
    let (tool, _) = scenario.call();
    let (first, second) = (&run.received[0], &run.received[1]);
    assert!(
        first.to_string().contains(&format!("\"{tool}\"")),
        "{case}: Codex's tool `{tool}` was offered: {first}"
    );
    let images = wire.result_images(second);
    match scenario {
        Scenario::Shell => {
            let result = wire.result_text(second);
            assert!(result.contains(SECRET), "{case}: the result: {result:?}");
            assert!(images.is_empty(), "{case}");
        }
        Scenario::Image => {
            assert_eq!(
                images,
                [("image/png".to_owned(), png())],
                "{case}: {second}"
            );
            // Once, where the wire puts images: never also as text.
            let copies = second
                .to_string()
                .matches(PNG.trim_end_matches('='))
                .count();
            assert_eq!(copies, 1, "{case}: the image's base64 in {second}");
        }
    }
}

/// Both scenarios at once against `wire` by `route`. Each ends before a
/// failure of either is raised: a cell's servers live as long as its Codex.
async fn both(wire: Wire, route: Route) -> (Run, Run) {
    let shell = tokio::spawn(cell(Scenario::Shell, wire, route));
    let image = tokio::spawn(cell(Scenario::Image, wire, route));
    let (shell, image) = (shell.await, image.await);
    (finished(shell), finished(image))
}

/// A task's value, or its panic raised here.
fn finished<T>(task: Result<T, tokio::task::JoinError>) -> T {
    task.unwrap_or_else(|error| std::panic::resume_unwind(error.into_panic()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Codex CLI: .ci/test installs it"]
async fn codex_runs_a_shell_and_an_image_turn_directly_against_a_responses_upstream() {
    let (shell, image) = both(Wire::Responses, Route::Direct).await;
    // The image went back as Codex's `input_image` in `function_call_output`.
    let output = &image.received[1]["input"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|item| item["type"] == "function_call_output")
        .unwrap()["output"];
    assert_eq!(output[0]["type"], "input_image", "{output}");
    // The command's output went back as its `function_call_output` string.
    let last = shell.received[1]["input"]
        .as_array()
        .unwrap()
        .last()
        .unwrap();
    assert_eq!(last["type"], "function_call_output", "{last}");
    assert!(last["output"].is_string(), "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Codex CLI: .ci/test installs it"]
async fn codex_runs_a_shell_and_an_image_turn_through_the_gateway_to_a_responses_upstream() {
    both(Wire::Responses, Route::Gateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Codex CLI: .ci/test installs it"]
async fn codex_runs_a_shell_and_an_image_turn_through_the_gateway_to_an_openai_chat_upstream() {
    both(Wire::Chat, Route::Gateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Codex CLI: .ci/test installs it"]
async fn codex_runs_a_shell_and_an_image_turn_through_the_gateway_to_an_anthropic_upstream() {
    both(Wire::Anthropic, Route::Gateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Codex CLI: .ci/test installs it"]
async fn codex_runs_a_shell_and_an_image_turn_through_the_gateway_to_a_gemini_upstream() {
    both(Wire::Gemini, Route::Gateway).await;
}

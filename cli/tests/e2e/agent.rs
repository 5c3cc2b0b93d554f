//! What the coding agents' tests share: the matrix cell. In a cell one agent,
//! headless, with a temporary HOME, in a working directory holding
//! `secret.txt` and `red.png`, does one scenario against a scripted upstream
//! of one wire, directly or through `lmstack serve`:
//!
//! - text: the model calls the agent's own tool to read `secret.txt`, then
//!   answers with the result it received, which the agent prints — the
//!   secret on stdout proves the round trip;
//! - image: the model calls the agent's tool on `red.png`; the upstream must
//!   receive the image in its own wire's shape (Anthropic an `image` block
//!   inside the `tool_result`, OpenAI Chat an `image_url` part in a user
//!   message after the results, Responses an `input_image` in the
//!   `function_call_output`, Gemini `inlineData` in or after the function
//!   response; a text-only model a placeholder line in its text and the image
//!   beside it), never as base64 in text; it answers with the image's media
//!   type and size.
//!
//! Each agent's file implements [`Agent`] and lists its cells; a cell runs
//! both scenarios at once.

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use common::cli::Serving;
use common::server::Server;
use serde_json::Value;
use tempfile::TempDir;

use crate::upstream::{self, Wire};

/// What only `secret.txt` holds.
pub const SECRET: &str = "harbour-5d1f";
/// The gateway's token, which each agent sends as its API key.
pub const TOKEN: &str = "e2e-token";
/// `red.png`: 4×4 red pixels.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEElEQVR4nGP4z8AARwzEcQCukw/x0F8jngAAAABJRU5ErkJggg==";

/// The bytes of `red.png`.
pub fn png() -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(PNG)
        .unwrap()
}

/// A coding agent, run headless.
pub trait Agent: 'static {
    /// Its name, in messages.
    const NAME: &'static str;
    /// The model it asks for, the same name at the upstream.
    const MODEL: &'static str;
    /// The call of its own tool that reads the file of `scenario` in `work`:
    /// the tool's name and arguments.
    fn call(scenario: Scenario, work: &Path) -> (&'static str, Value);
    /// One headless turn with `prompt`, its HOME `home` (where it may write
    /// its configuration), in `work`, against `base` (a base URL without
    /// `/v1`) with [`TOKEN`] as its key.
    fn command(home: &Path, work: &Path, base: &str, prompt: &str) -> Command;
}

/// What the model has the agent do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// Read `secret.txt`.
    Text,
    /// Read `red.png`.
    Image,
}

impl Scenario {
    /// The file it reads.
    pub fn file(self) -> &'static str {
        match self {
            Scenario::Text => "secret.txt",
            Scenario::Image => "red.png",
        }
    }

    /// What the agent must print: the answer made of the tool's result.
    fn printed(self) -> String {
        match self {
            Scenario::Text => SECRET.to_owned(),
            Scenario::Image => upstream::seen("image/png", &png()),
        }
    }
}

/// Where the agent's requests go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Straight to the upstream (its own wire).
    Direct,
    /// Through `lmstack serve`.
    Gateway,
}

/// A temporary HOME and working directory (`secret.txt`, `red.png`).
pub struct Workspace {
    pub home: TempDir,
    pub work: TempDir,
}

impl Workspace {
    pub fn new() -> Workspace {
        let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let file =
            |name: &str, bytes: &[u8]| std::fs::write(work.path().join(name), bytes).unwrap();
        file(
            Scenario::Text.file(),
            format!("The secret is {SECRET}.\n").as_bytes(),
        );
        file(Scenario::Image.file(), &png());
        Workspace { home, work }
    }

    /// `A`'s headless turn of `scenario` against `base`; what it printed.
    pub fn turn<A: Agent>(&self, base: &str, scenario: Scenario) -> String {
        let prompt = format!("Read the file {} and tell me about it.", scenario.file());
        let command = A::command(self.home.path(), self.work.path(), base, &prompt);
        headless(command, TURN)
    }
}

/// How long one headless turn may take.
const TURN: Duration = Duration::from_secs(90);

/// One finished turn.
pub struct Run {
    /// What the agent printed.
    pub printed: String,
    /// The body of each request for the model the upstream received.
    pub received: Vec<Value>,
    /// How many token counts the upstream was asked for.
    pub counted: usize,
    /// The upstream (its requests' headers and paths).
    pub upstream: Server,
    /// The gateway, on that route (its log).
    pub gateway: Option<Serving>,
}

/// `A` does `scenario` in `workspace` against a scripted upstream of `wire`,
/// by `route`; checks what it printed and what the upstream received.
pub async fn cell<A: Agent>(
    workspace: Arc<Workspace>,
    scenario: Scenario,
    wire: Wire,
    route: Route,
) -> Run {
    let (tool, arguments) = A::call(scenario, workspace.work.path());
    let upstream = wire.upstream(tool, &arguments).await;
    let dir = tempfile::tempdir().unwrap();
    let gateway = match route {
        Route::Direct => None,
        Route::Gateway => Some(gateway(&dir, A::MODEL, wire, &upstream, TOKEN)),
    };
    let base = match &gateway {
        Some(serving) => serving.base.clone(),
        None => format!("http://{}", upstream.addr),
    };
    let started = Instant::now();
    let printed =
        finished(tokio::task::spawn_blocking(move || workspace.turn::<A>(&base, scenario)).await);
    let case = format!("{}, {scenario:?} against {wire:?} {route:?}", A::NAME);
    eprintln!("{case}: {:.1?}", started.elapsed());
    let counting = wire.counting().map(|(path, _)| path);
    let counts = |uri: &String| counting.is_some_and(|path| uri.contains(path));
    let (mut received, mut counted) = (Vec::new(), 0);
    for (uri, (_, body)) in upstream.uris().iter().zip(upstream.requests()) {
        if counts(uri) {
            counted += 1;
        } else {
            received.push(body);
        }
    }
    let run = Run {
        printed,
        received,
        counted,
        upstream,
        gateway,
    };
    check(&case, scenario, wire, tool, &run);
    run
}

/// The turn printed the answer made of the tool's result, and the upstream
/// received the call and its result in its own shape.
fn check(case: &str, scenario: Scenario, wire: Wire, tool: &str, run: &Run) {
    assert_eq!(run.received.len(), 2, "{case}: the call, then its result");
    let (first, second) = (&run.received[0], &run.received[1]);
    assert!(
        wire.offers(first, tool),
        "{case}: the agent's tool `{tool}` was not offered: {}",
        shortened(first)
    );
    let images = wire.result_images(second);
    match scenario {
        Scenario::Text => {
            let result = wire.result_text(second);
            assert!(result.contains(SECRET), "{case}: the result: {result:?}");
            assert!(images.is_empty(), "{case}: {}", shortened(second));
        }
        Scenario::Image => {
            let copies = second
                .to_string()
                .matches(PNG.trim_end_matches('='))
                .count();
            assert_eq!(
                images,
                [("image/png".to_owned(), png())],
                "{case}: the image is not where {wire:?} puts a tool's result{}: {}",
                if copies > 0 {
                    " (it is elsewhere in the request)"
                } else {
                    ""
                },
                shortened(second)
            );
            // Once, where the wire puts images: never also as text.
            assert_eq!(
                copies,
                1,
                "{case}: the image's base64 in {}",
                shortened(second)
            );
        }
    }
    let expected = scenario.printed();
    assert!(
        run.printed.contains(&expected),
        "{case}: the agent printed {:?}, not {expected:?}",
        run.printed
    );
}

/// `body`'s JSON, its middle left out past a few thousand characters.
fn shortened(body: &Value) -> String {
    let text = body.to_string();
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= 6000 {
        return text;
    }
    let (head, tail) = (&chars[..3000], &chars[chars.len() - 3000..]);
    format!("{} … {}", String::from_iter(head), String::from_iter(tail))
}

/// Both scenarios of `A` at once against `wire` by `route`. Each ends before
/// a failure of either is raised: a cell's servers live as long as its agent.
pub async fn both<A: Agent>(wire: Wire, route: Route) -> (Run, Run) {
    let run = |scenario| cell::<A>(Arc::new(Workspace::new()), scenario, wire, route);
    let text = tokio::spawn(run(Scenario::Text));
    let image = tokio::spawn(run(Scenario::Image));
    let (text, image) = (text.await, image.await);
    (finished(text), finished(image))
}

/// A task's value, or its panic raised here.
fn finished<T>(task: Result<T, tokio::task::JoinError>) -> T {
    task.unwrap_or_else(|error| std::panic::resume_unwind(error.into_panic()))
}

/// Runs `command` (an agent's headless turn), killed after `limit`; what it
/// printed on stdout. Panics, with both outputs, unless it succeeded.
///
/// The agent runs in a process group of its own, which is killed once its
/// first process has ended (or at the limit): an npm launcher starts the real
/// binary as its child, and a child left running would hold the output pipes
/// open.
pub fn headless(mut command: Command, limit: Duration) -> String {
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("{command:?} runs: {error}"));
    let deadline = Instant::now() + limit;
    let mut timed_out = false;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            timed_out = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    kill_group(&mut child);
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{:?}: {}{}\nstdout: {stdout}\nstderr: {}",
        command.get_program(),
        output.status,
        if timed_out {
            format!(", killed after {limit:?}")
        } else {
            String::new()
        },
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Kills `child`'s process group (on Unix; elsewhere `child` alone).
fn kill_group(child: &mut Child) {
    #[cfg(unix)]
    if let Ok(group) = i32::try_from(child.id()) {
        // SAFETY: kill(2) takes any pid; a negative one names a process group.
        unsafe { libc::kill(-group, libc::SIGKILL) };
    }
    #[cfg(not(unix))]
    let _ = child.kill();
}

/// `lmstack serve` in `dir`, wanting `token` from its clients, with `model`
/// served by an upstream of `wire` at `upstream` (the same model name there;
/// a text-only upstream with `natural_tools` in its dialect).
pub fn gateway(dir: &TempDir, model: &str, wire: Wire, upstream: &Server, token: &str) -> Serving {
    let natural = wire
        .natural_tools()
        .map(|dialect| format!("natural_tools = \"{dialect}\"\n"))
        .unwrap_or_default();
    let config = common::cli::write_config(
        dir,
        &format!(
            "[models.{model}]\nprovider = \"{}\"\nbase_url = \"{}\"\n\
             api_key_env = \"LMSTACK_E2E_UPSTREAM_KEY\"\nretry = false\n{natural}",
            wire.provider(),
            upstream.base_url()
        ),
    );
    let mut command = common::cli::serve_command(&["--config", &config], Some(token));
    command.env("LMSTACK_E2E_UPSTREAM_KEY", "upstream-key");
    common::cli::start(command)
}

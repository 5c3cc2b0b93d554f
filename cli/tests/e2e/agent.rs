//! What the coding agents' tests share: running an agent's headless turn with
//! a time limit, and `lmstack serve` in front of a scripted upstream.

use crate::common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::cli::Serving;
use common::server::Server;
use tempfile::TempDir;

use crate::upstream::Wire;

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
/// served by an upstream of `wire` at `upstream` (the same model name there).
pub fn gateway(dir: &TempDir, model: &str, wire: Wire, upstream: &Server, token: &str) -> Serving {
    let config = common::cli::write_config(
        dir,
        &format!(
            "[models.{model}]\nprovider = \"{}\"\nbase_url = \"{}\"\n\
             api_key_env = \"LMSTACK_E2E_UPSTREAM_KEY\"\nretry = false\n",
            wire.provider(),
            upstream.base_url()
        ),
    );
    let mut command = common::cli::serve_command(&["--config", &config], Some(token));
    command.env("LMSTACK_E2E_UPSTREAM_KEY", "upstream-key");
    common::cli::start(command)
}

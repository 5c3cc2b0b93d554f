//! A stdio server's child process: started in a process group of its own, its
//! stderr logged and its tail kept, and the whole group killed when dropped (`npx`
//! runs the server as a grandchild, which killing `npx` alone would leave behind).

use std::collections::VecDeque;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};
use tokio::task::JoinHandle;

use super::config::Command;
use super::error::{McpError, StderrTail};

/// How much of the end of stderr is kept for error messages.
const TAIL_BYTES: usize = 4096;

/// A running server process and the collector of its stderr.
pub(super) struct Child {
    process: tokio::process::Child,
    tail: Arc<Mutex<VecDeque<u8>>>,
    collector: JoinHandle<()>,
}

impl Child {
    /// Starts `command` with piped stdio; hands back its stdout and stdin.
    pub(super) fn spawn(
        command: &Command,
        server: &str,
    ) -> Result<(Child, ChildStdout, ChildStdin), McpError> {
        let mut process = tokio::process::Command::new(&command.program);
        process
            .args(&command.args)
            .envs(command.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(dir) = &command.current_dir {
            process.current_dir(dir);
        }
        #[cfg(unix)]
        process.process_group(0);
        let mut process = process.spawn().map_err(|source| McpError::Spawn {
            command: command.to_string(),
            source,
        })?;
        let (Some(stdout), Some(stdin), Some(stderr)) = (
            process.stdout.take(),
            process.stdin.take(),
            process.stderr.take(),
        ) else {
            unreachable!("all three streams were piped");
        };
        let tail = Arc::new(Mutex::new(VecDeque::with_capacity(TAIL_BYTES)));
        let collector = tokio::spawn(collect(stderr, tail.clone(), server.to_owned()));
        let child = Child {
            process,
            tail,
            collector,
        };
        Ok((child, stdout, stdin))
    }

    /// Stops the process group and waits (briefly) for the process and the rest of
    /// its stderr: its exit status, if it ended, and the tail of its stderr.
    pub(super) async fn stop(mut self) -> (Option<ExitStatus>, StderrTail) {
        let status = match self.process.try_wait() {
            Ok(Some(status)) => Some(status),
            _ => {
                self.kill();
                tokio::time::timeout(Duration::from_secs(2), self.process.wait())
                    .await
                    .ok()
                    .and_then(Result::ok)
            }
        };
        let collector = &mut self.collector;
        let _ = tokio::time::timeout(Duration::from_millis(500), collector).await;
        (status, self.tail())
    }

    /// Waits up to `grace` for the process to end by itself: its status if it did.
    pub(super) async fn exited_within(&mut self, grace: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(grace, self.process.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// The end of what the process wrote to stderr so far.
    pub(super) fn tail(&self) -> StderrTail {
        let tail = self.tail.lock().unwrap_or_else(|e| e.into_inner());
        let (front, back) = tail.as_slices();
        let bytes = [front, back].concat();
        let text = String::from_utf8_lossy(&bytes);
        // Start at a line boundary when the tail was cut.
        let text = match (tail.len() == TAIL_BYTES, text.find('\n')) {
            (true, Some(newline)) => &text[newline + 1..],
            _ => &text,
        };
        StderrTail(text.to_owned())
    }

    /// Kills the process group (the process alone where there are no groups).
    fn kill(&mut self) {
        #[cfg(unix)]
        if let Some(pid) = self.process.id().and_then(|id| i32::try_from(id).ok()) {
            // SAFETY: kill(2) with a negative pid signals the process group the
            // child leads (it was spawned with `process_group(0)`).
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
        let _ = self.process.start_kill();
    }
}

impl Drop for Child {
    /// Kills the group even when the process itself has ended: what it started
    /// may live on.
    fn drop(&mut self) {
        self.kill();
        self.collector.abort();
    }
}

/// Reads stderr to its end: each piece logged, the last [`TAIL_BYTES`] kept.
async fn collect(mut stderr: ChildStderr, tail: Arc<Mutex<VecDeque<u8>>>, server: String) {
    let mut buffer = [0u8; 4096];
    while let Ok(read @ 1..) = stderr.read(&mut buffer).await {
        let piece = &buffer[..read];
        tracing::debug!(
            server,
            "stderr: {}",
            String::from_utf8_lossy(piece).trim_end()
        );
        let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
        tail.extend(piece);
        let excess = tail.len().saturating_sub(TAIL_BYTES);
        tail.drain(..excess);
    }
}

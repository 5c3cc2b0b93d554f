//! The log lines on stderr: `RUST_LOG` picks what is written (a level by
//! default), as text or as JSON lines.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// One line of text an event.
    #[default]
    Text,
    /// One JSON object a line, the event's fields at its top level.
    Json,
}

/// Installs the logger: on stderr, in `format`, with `RUST_LOG`'s filter, or
/// `default` and above when it is not set (its directives that do not parse
/// are skipped).
pub fn init(format: LogFormat, default: LevelFilter) {
    let filter = EnvFilter::builder()
        .with_default_directive(default.into())
        .from_env_lossy();
    let logger = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter);
    let installed = match format {
        LogFormat::Text => logger.try_init(),
        LogFormat::Json => logger.json().flatten_event(true).try_init(),
    };
    if let Err(error) = installed {
        eprintln!("lmstack: no logger installed: {error}");
    }
}

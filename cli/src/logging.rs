//! The log lines on stderr: `RUST_LOG` picks what is written (a level by
//! default), as text or as JSON lines; and, with the feature `otel`, the
//! spans exported over OTLP where the environment sets an endpoint.

use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// One line of text an event.
    #[default]
    Text,
    /// One JSON object a line, the event's fields at its top level.
    Json,
}

/// What the logging holds until the command ends: the spans' export, if on.
#[derive(Debug, Default)]
pub struct Logging {
    #[cfg(feature = "otel")]
    export: Option<crate::otel::Export>,
}

impl Logging {
    /// Sends what is still held (the last spans) before the process ends.
    pub fn finish(self) {
        #[cfg(feature = "otel")]
        if let Some(export) = self.export {
            export.shutdown();
        }
    }
}

/// Installs the logger: on stderr, in `format`, with `RUST_LOG`'s filter, or
/// `default` and above when it is not set (its directives that do not parse
/// are skipped); and where `spans` is set, the spans' export (feature `otel`)
/// when the environment asks for it.
pub fn init(format: LogFormat, default: LevelFilter, spans: bool) -> Logging {
    let filter = EnvFilter::builder()
        .with_default_directive(default.into())
        .from_env_lossy();
    let lines = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let lines = match format {
        LogFormat::Text => lines.boxed(),
        LogFormat::Json => lines.json().flatten_event(true).boxed(),
    };
    let subscriber = tracing_subscriber::registry().with(lines.with_filter(filter));
    let (export, logging) = exporter(spans);
    if let Err(error) = subscriber.with(export).try_init() {
        eprintln!("lmstack: no logger installed: {error}");
    }
    logging
}

/// The layer that exports spans, where `spans` is set and the environment
/// asks for it (feature `otel`).
#[cfg(feature = "otel")]
fn exporter<S>(spans: bool) -> (Option<impl Layer<S>>, Logging)
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    match spans.then(crate::otel::layer::<S>).transpose() {
        Ok(Some(Some((layer, export)))) => (
            Some(layer),
            Logging {
                export: Some(export),
            },
        ),
        Ok(_) => (None, Logging::default()),
        Err(error) => {
            eprintln!("lmstack: spans are not exported: {error}");
            (None, Logging::default())
        }
    }
}

/// Without the feature `otel`, no span is exported.
#[cfg(not(feature = "otel"))]
fn exporter(_spans: bool) -> (Option<tracing_subscriber::layer::Identity>, Logging) {
    (None, Logging::default())
}

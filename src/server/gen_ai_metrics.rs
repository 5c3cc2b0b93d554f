//! The gateway's metrics of the OpenTelemetry GenAI conventions, in the
//! Prometheus text format (an OpenTelemetry metric `a.b.c` of unit `s` is
//! `a_b_c_seconds` there): how long each chat operation took, the tokens it
//! used and how long its first chunk took, with the conventions' buckets.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::metrics::{Histogram, escape};

/// `gen_ai.client.operation.duration`'s buckets, in seconds.
const DURATION_BUCKETS: &[f64] = &[
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/// `gen_ai.client.token.usage`'s buckets.
const TOKEN_BUCKETS: &[f64] = &[
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];

/// `gen_ai.client.operation.time_to_first_chunk`'s buckets, in seconds.
const FIRST_CHUNK_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

const DURATION: &str = "gen_ai_client_operation_duration_seconds";
const TOKENS: &str = "gen_ai_client_token_usage";
const FIRST_CHUNK: &str = "gen_ai_client_operation_time_to_first_chunk_seconds";

/// One chat operation, as [`Metrics::gen_ai`](super::Metrics::gen_ai) counts
/// it. Every label comes from the gateway's configuration or from a small
/// set of names, never from what a client sent.
///
/// ```
/// use lmstack::server::{GenAi, Metrics};
/// use std::time::Duration;
///
/// let metrics = Metrics::default();
/// metrics.register("demo");
/// metrics.gen_ai("demo", &GenAi {
///     provider: "openai",
///     error_type: None,
///     duration: Duration::from_millis(300),
///     tokens: Some((12, 40)),
///     first_chunk: Some(Duration::from_millis(90)),
/// });
/// let text = metrics.render();
/// let labels = r#"gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="demo""#;
/// assert!(text.contains(&format!("gen_ai_client_operation_duration_seconds_count{{{labels}}} 1\n")));
/// assert!(text.contains(&format!("gen_ai_client_token_usage_sum{{{labels},gen_ai_token_type=\"output\"}} 40\n")));
/// ```
#[derive(Clone, Debug)]
pub struct GenAi<'a> {
    /// The provider's name (`gen_ai.provider.name`).
    pub provider: &'a str,
    /// The `error.type` of an operation that failed.
    pub error_type: Option<&'a str>,
    /// How long the operation took, to the end of its answer.
    pub duration: Duration,
    /// The input and output tokens, where the reply reported them.
    pub tokens: Option<(u64, u64)>,
    /// How long the first chunk of a streamed reply took.
    pub first_chunk: Option<Duration>,
}

/// One model's GenAI histograms, by provider.
#[derive(Debug, Default)]
pub(super) struct GenAiSeries {
    providers: Mutex<BTreeMap<String, ByProvider>>,
}

/// The histograms of one model and provider.
#[derive(Debug)]
struct ByProvider {
    /// By error type (`""` for none).
    durations: BTreeMap<String, Histogram>,
    input: Histogram,
    output: Histogram,
    first_chunk: Histogram,
}

impl Default for ByProvider {
    fn default() -> Self {
        ByProvider {
            durations: BTreeMap::new(),
            input: Histogram::counts(TOKEN_BUCKETS),
            output: Histogram::counts(TOKEN_BUCKETS),
            first_chunk: Histogram::seconds(FIRST_CHUNK_BUCKETS),
        }
    }
}

impl GenAiSeries {
    /// Counts `operation`.
    pub(super) fn count(&self, operation: &GenAi<'_>) {
        let mut providers = self
            .providers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !providers.contains_key(operation.provider) {
            providers.insert(operation.provider.to_owned(), ByProvider::default());
        }
        let Some(series) = providers.get_mut(operation.provider) else {
            return;
        };
        let error_type = operation.error_type.unwrap_or_default();
        if !series.durations.contains_key(error_type) {
            let histogram = Histogram::seconds(DURATION_BUCKETS);
            series.durations.insert(error_type.to_owned(), histogram);
        }
        if let Some(durations) = series.durations.get(error_type) {
            durations.observe(operation.duration.as_secs_f64());
        }
        if let Some((input, output)) = operation.tokens {
            series.input.observe(input as f64);
            series.output.observe(output as f64);
        }
        if let Some(first) = operation.first_chunk {
            series.first_chunk.observe(first.as_secs_f64());
        }
    }

    /// Writes the histograms of every model (`(label value, series)`).
    pub(super) fn render<'a>(
        text: &mut String,
        models: impl Iterator<Item = (&'a str, &'a GenAiSeries)> + Clone,
    ) {
        type Write<'w> = &'w dyn Fn(&mut String, &str, &ByProvider);
        let durations: Write = &|text, labels, series| {
            for (error_type, histogram) in &series.durations {
                let labels = match error_type.as_str() {
                    "" => labels.to_owned(),
                    error_type => format!("{labels},error_type=\"{}\"", escape(error_type)),
                };
                histogram.render(text, DURATION, &labels);
            }
        };
        let tokens: Write = &|text, labels, series| {
            if series.input.is_empty() {
                return;
            }
            for (kind, histogram) in [("input", &series.input), ("output", &series.output)] {
                let labels = format!("{labels},gen_ai_token_type=\"{kind}\"");
                histogram.render(text, TOKENS, &labels);
            }
        };
        let first_chunk: Write = &|text, labels, series| {
            if !series.first_chunk.is_empty() {
                series.first_chunk.render(text, FIRST_CHUNK, labels);
            }
        };
        for (name, help, write) in [
            (DURATION, "GenAI operation duration.", durations),
            (TOKENS, "Number of input and output tokens used.", tokens),
            (
                FIRST_CHUNK,
                "Time to receive the first chunk of a streamed reply.",
                first_chunk,
            ),
        ] {
            let _ = writeln!(text, "# HELP {name} {help}\n# TYPE {name} histogram");
            for (model, series) in models.clone() {
                let providers = series
                    .providers
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                for (provider, series) in providers.iter() {
                    let labels = format!(
                        "gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"{}\",gen_ai_request_model=\"{model}\"",
                        escape(provider)
                    );
                    write(text, &labels, series);
                }
            }
        }
    }
}

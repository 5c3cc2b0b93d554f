//! The gateway's metrics, in the Prometheus text format.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

pub use super::gen_ai_metrics::GenAi;
use super::gen_ai_metrics::GenAiSeries;

/// The upper bounds of the request-duration histogram, in seconds.
const BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Counters of what the gateway served, shared by its handlers (a clone is
/// another handle on the same counters), rendered for a Prometheus scrape by
/// [`render`](Metrics::render):
///
/// - `lmstack_requests_total{model, format, status}`: requests answered;
/// - `lmstack_requests_in_flight{model}`: requests being answered;
/// - `lmstack_tokens_total{model, kind}`: input and output tokens the models
///   reported;
/// - `lmstack_forwarded_total{model}`: requests answered on the same-wire
///   fast path ([`forwarded`](Metrics::forwarded));
/// - `lmstack_request_duration_seconds{model}`: a histogram of the time from
///   the request to the end of its answer;
/// - the OpenTelemetry GenAI metrics of each chat operation
///   ([`gen_ai`](Metrics::gen_ai)), under their conventional names:
///   `gen_ai_client_operation_duration_seconds`, `gen_ai_client_token_usage`
///   and `gen_ai_client_operation_time_to_first_chunk_seconds`, labelled by
///   `gen_ai_operation_name`, `gen_ai_provider_name`, `gen_ai_request_model`
///   (the model as served) and `error_type` or `gen_ai_token_type`.
///
/// The `model` label takes only the names [registered](Metrics::register) (the
/// gateway registers the models it serves); anything counted under another
/// name — a request refused before its model was known, or naming a model not
/// served — is counted under `model=""`. So what clients send never makes a
/// series: the number of series is fixed by the configuration. Each model's
/// counters are atomics; a scrape copies them without holding any lock that a
/// request takes for longer than that copy.
///
/// ```
/// use lmstack::server::Metrics;
/// use std::time::Duration;
///
/// let metrics = Metrics::default();
/// metrics.register("demo");
/// metrics.answered("demo", "openai", 200, Duration::from_millis(3));
/// metrics.answered("a model nobody serves", "openai", 404, Duration::from_millis(1));
/// metrics.tokens("demo", 12, 40);
/// let text = metrics.render();
/// assert!(text.contains(r#"lmstack_requests_total{model="demo",format="openai",status="200"} 1"#));
/// assert!(text.contains(r#"lmstack_requests_total{model="",format="openai",status="404"} 1"#));
/// assert!(text.contains(r#"lmstack_tokens_total{model="demo",kind="output"} 40"#));
/// assert!(!text.contains("nobody"));
/// ```
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    inner: Arc<Registry>,
}

#[derive(Debug, Default)]
struct Registry {
    /// The registered models' counters; written only while a gateway is built.
    models: RwLock<BTreeMap<String, Arc<Series>>>,
    /// Everything counted under a name not registered.
    unlisted: Arc<Series>,
}

/// One model's counters.
#[derive(Debug)]
struct Series {
    /// Requests answered, by format and status: a few entries, each added once.
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    in_flight: AtomicU64,
    input_tokens: AtomicU64,
    output_tokens: AtomicU64,
    /// Requests answered on the same-wire fast path.
    forwarded: AtomicU64,
    durations: Histogram,
    gen_ai: GenAiSeries,
}

impl Default for Series {
    fn default() -> Self {
        Series {
            requests: Mutex::default(),
            in_flight: AtomicU64::default(),
            input_tokens: AtomicU64::default(),
            output_tokens: AtomicU64::default(),
            forwarded: AtomicU64::default(),
            durations: Histogram::seconds(BUCKETS),
            gen_ai: GenAiSeries::default(),
        }
    }
}

/// A histogram of values in fixed buckets, counted without a lock.
#[derive(Debug)]
pub(super) struct Histogram {
    /// The buckets' upper bounds.
    bounds: &'static [f64],
    counts: Box<[AtomicU64]>,
    count: AtomicU64,
    /// The sum of the values, in units of `1 / scale`.
    sum: AtomicU64,
    scale: f64,
}

impl Histogram {
    /// A histogram of seconds, summed to the microsecond, in buckets `bounds`.
    pub(super) fn seconds(bounds: &'static [f64]) -> Self {
        Self::new(bounds, 1e6)
    }

    /// A histogram of whole numbers (tokens), in buckets `bounds`.
    pub(super) fn counts(bounds: &'static [f64]) -> Self {
        Self::new(bounds, 1.0)
    }

    fn new(bounds: &'static [f64], scale: f64) -> Self {
        Histogram {
            bounds,
            counts: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
            scale,
        }
    }

    /// Counts `value`.
    pub(super) fn observe(&self, value: f64) {
        for (count, bound) in self.counts.iter().zip(self.bounds) {
            if value <= *bound {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        // The cast saturates: a huge value sums as `u64::MAX` units.
        self.sum
            .fetch_add((value * self.scale) as u64, Ordering::Relaxed);
    }

    /// Whether nothing was counted.
    pub(super) fn is_empty(&self) -> bool {
        self.count.load(Ordering::Relaxed) == 0
    }

    /// Writes the histogram `name`'s samples with the labels `labels` (without
    /// `le`).
    pub(super) fn render(&self, text: &mut String, name: &str, labels: &str) {
        let bucket = format!("{name}_bucket");
        for (count, bound) in self.counts.iter().zip(self.bounds) {
            let count = count.load(Ordering::Relaxed) as f64;
            write_sample(text, &bucket, &format!("{labels},le=\"{bound}\""), count);
        }
        let all = self.count.load(Ordering::Relaxed) as f64;
        write_sample(text, &bucket, &format!("{labels},le=\"+Inf\""), all);
        let sum = self.sum.load(Ordering::Relaxed) as f64 / self.scale;
        write_sample(text, &format!("{name}_sum"), labels, sum);
        write_sample(text, &format!("{name}_count"), labels, all);
    }
}

/// A request counted in flight until dropped; made by [`Metrics::start`].
#[derive(Debug)]
pub struct InFlight {
    series: Arc<Series>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.series.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Metrics {
    /// Gives `model` its own series (a gateway registers each model it serves).
    pub fn register(&self, model: &str) {
        self.inner
            .models
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(model.to_owned())
            .or_default();
    }

    /// Counts a request to `model` in flight until the guard is dropped.
    pub fn start(&self, model: &str) -> InFlight {
        let series = self.series(model);
        series.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight { series }
    }

    /// Counts a request answered with `status`, which took `took`.
    pub fn answered(&self, model: &str, format: &'static str, status: u16, took: Duration) {
        let series = self.series(model);
        *series
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((format, status))
            .or_default() += 1;
        series.durations.observe(took.as_secs_f64());
    }

    /// Counts one chat operation's GenAI metrics (see [`GenAi`]): for a model
    /// not [registered](Metrics::register), none.
    pub fn gen_ai(&self, model: &str, operation: &GenAi<'_>) {
        if let Some(series) = self.registered(model) {
            series.gen_ai.count(operation);
        }
    }

    /// The series of `model` if it is registered.
    fn registered(&self, model: &str) -> Option<Arc<Series>> {
        let models = self
            .inner
            .models
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        models.get(model).cloned()
    }

    /// Counts a request answered on the same-wire fast path (its upstream's
    /// bytes forwarded as they came).
    pub fn forwarded(&self, model: &str) {
        self.series(model).forwarded.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds the tokens a model reported.
    pub fn tokens(&self, model: &str, input: u64, output: u64) {
        let series = self.series(model);
        series.input_tokens.fetch_add(input, Ordering::Relaxed);
        series.output_tokens.fetch_add(output, Ordering::Relaxed);
    }

    /// The series of `model`: its own if registered, else the unlisted one.
    fn series(&self, model: &str) -> Arc<Series> {
        let models = self
            .inner
            .models
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        models.get(model).unwrap_or(&self.inner.unlisted).clone()
    }

    /// Everything, in the Prometheus text exposition format.
    pub fn render(&self) -> String {
        let mut all: Vec<(String, Arc<Series>)> = self
            .inner
            .models
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(model, series)| (escape(model), series.clone()))
            .collect();
        all.push((String::new(), self.inner.unlisted.clone()));
        let mut text = String::new();
        header(&mut text, "requests_total", "counter", "Requests answered.");
        for (model, series) in &all {
            let requests = series
                .requests
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            for ((format, status), n) in requests {
                let labels = format!("model=\"{model}\",format=\"{format}\",status=\"{status}\"");
                sample(&mut text, "requests_total", &labels, n as f64);
            }
        }
        let gauge = "requests_in_flight";
        header(&mut text, gauge, "gauge", "Requests being answered.");
        for (model, series) in &all {
            let n = series.in_flight.load(Ordering::Relaxed);
            sample(&mut text, gauge, &format!("model=\"{model}\""), n as f64);
        }
        let help = "Tokens the models reported.";
        header(&mut text, "tokens_total", "counter", help);
        for (model, series) in &all {
            for (kind, n) in [
                ("input", &series.input_tokens),
                ("output", &series.output_tokens),
            ] {
                let labels = format!("model=\"{model}\",kind=\"{kind}\"");
                let n = n.load(Ordering::Relaxed);
                sample(&mut text, "tokens_total", &labels, n as f64);
            }
        }
        let help = "Requests answered on the same-wire fast path (the upstream's bytes \
                    forwarded), of those counted in lmstack_requests_total.";
        header(&mut text, "forwarded_total", "counter", help);
        for (model, series) in &all {
            let n = series.forwarded.load(Ordering::Relaxed);
            sample(
                &mut text,
                "forwarded_total",
                &format!("model=\"{model}\""),
                n as f64,
            );
        }
        let name = "request_duration_seconds";
        let help = "Time from request to the end of its answer.";
        header(&mut text, name, "histogram", help);
        for (model, series) in &all {
            let labels = format!("model=\"{model}\"");
            series
                .durations
                .render(&mut text, &format!("lmstack_{name}"), &labels);
        }
        let models = all
            .iter()
            .map(|(model, series)| (model.as_str(), &series.gen_ai));
        GenAiSeries::render(&mut text, models);
        text
    }
}

fn header(text: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(
        text,
        "# HELP lmstack_{name} {help}\n# TYPE lmstack_{name} {kind}"
    );
}

fn sample(text: &mut String, name: &str, labels: &str, value: f64) {
    write_sample(text, &format!("lmstack_{name}"), labels, value);
}

/// Writes the sample `name{labels} value`.
pub(super) fn write_sample(text: &mut String, name: &str, labels: &str, value: f64) {
    let _ = writeln!(text, "{name}{{{labels}}} {value}");
}

/// A label value as the text format writes it: `\`, `"` and line feeds escaped.
pub(super) fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_in_flight_requests_and_a_histogram_of_durations() {
        let metrics = Metrics::default();
        metrics.register("m\"1");
        metrics.register("m");
        let first = metrics.start("m\"1");
        let second = metrics.start("m\"1");
        drop(first);
        assert!(
            metrics
                .render()
                .contains("lmstack_requests_in_flight{model=\"m\\\"1\"} 1\n")
        );
        drop(second);
        metrics.answered("m", "anthropic", 429, Duration::from_millis(2));
        metrics.answered("m", "anthropic", 200, Duration::from_secs(3));
        let text = metrics.render();
        assert!(
            text.contains("lmstack_requests_in_flight{model=\"m\\\"1\"} 0\n"),
            "{text}"
        );
        for line in [
            "lmstack_request_duration_seconds_bucket{model=\"m\",le=\"0.001\"} 0",
            "lmstack_request_duration_seconds_bucket{model=\"m\",le=\"0.005\"} 1",
            "lmstack_request_duration_seconds_bucket{model=\"m\",le=\"5\"} 2",
            "lmstack_request_duration_seconds_bucket{model=\"m\",le=\"+Inf\"} 2",
            "lmstack_request_duration_seconds_count{model=\"m\"} 2",
            "lmstack_request_duration_seconds_sum{model=\"m\"} 3.002",
            "lmstack_requests_total{model=\"m\",format=\"anthropic\",status=\"429\"} 1",
            "# TYPE lmstack_request_duration_seconds histogram",
        ] {
            assert!(text.contains(&format!("{line}\n")), "{line} in\n{text}");
        }
    }

    #[test]
    fn names_not_registered_make_no_series() {
        let metrics = Metrics::default();
        metrics.register("served");
        let before = metrics.render().len();
        for i in 0..1000 {
            let name = format!("client-chosen-{i}-{}", "x".repeat(1000));
            metrics.answered(&name, "openai", 404, Duration::from_millis(1));
            metrics.tokens(&name, 1, 1);
            drop(metrics.start(&name));
        }
        let text = metrics.render();
        assert!(!text.contains("client-chosen"));
        assert!(
            text.contains(
                "lmstack_requests_total{model=\"\",format=\"openai\",status=\"404\"} 1000\n"
            ),
            "{text}"
        );
        // One more sample line (the 404s') and larger numbers, whatever the
        // names were (a megabyte of them).
        assert!(text.len() < before + 500, "{} → {}", before, text.len());
    }
}

//! The gateway's metrics, in the Prometheus text format.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

/// The upper bounds of the request-duration histogram, in seconds.
const BUCKETS: [f64; 12] = [
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
/// - `lmstack_request_duration_seconds{model}`: a histogram of the time from
///   the request to the end of its answer.
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
#[derive(Debug, Default)]
struct Series {
    /// Requests answered, by format and status: a few entries, each added once.
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    in_flight: AtomicU64,
    input_tokens: AtomicU64,
    output_tokens: AtomicU64,
    durations: Histogram,
}

#[derive(Debug, Default)]
struct Histogram {
    counts: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    /// The sum of the durations, in microseconds.
    sum_micros: AtomicU64,
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
        let histogram = &series.durations;
        let seconds = took.as_secs_f64();
        for (count, bound) in histogram.counts.iter().zip(BUCKETS) {
            if seconds <= bound {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
        histogram.count.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        histogram.sum_micros.fetch_add(micros, Ordering::Relaxed);
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
        let name = "request_duration_seconds";
        let help = "Time from request to the end of its answer.";
        header(&mut text, name, "histogram", help);
        for (model, series) in &all {
            let histogram = &series.durations;
            let model = format!("model=\"{model}\"");
            for (count, bound) in histogram.counts.iter().zip(BUCKETS) {
                let labels = format!("{model},le=\"{bound}\"");
                let count = count.load(Ordering::Relaxed);
                sample(&mut text, &format!("{name}_bucket"), &labels, count as f64);
            }
            let all = histogram.count.load(Ordering::Relaxed) as f64;
            let bucket = format!("{name}_bucket");
            sample(&mut text, &bucket, &format!("{model},le=\"+Inf\""), all);
            let sum = histogram.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
            sample(&mut text, &format!("{name}_sum"), &model, sum);
            sample(&mut text, &format!("{name}_count"), &model, all);
        }
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
    let _ = writeln!(text, "lmstack_{name}{{{labels}}} {value}");
}

/// A label value as the text format writes it: `\`, `"` and line feeds escaped.
fn escape(value: &str) -> String {
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

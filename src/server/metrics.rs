//! The gateway's metrics, in the Prometheus text format.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex, MutexGuard};
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
/// ```
/// use lmstack::server::Metrics;
/// use std::time::Duration;
///
/// let metrics = Metrics::default();
/// metrics.answered("demo", "openai", 200, Duration::from_millis(3));
/// metrics.tokens("demo", 12, 40);
/// let text = metrics.render();
/// assert!(text.contains(r#"lmstack_requests_total{model="demo",format="openai",status="200"} 1"#));
/// assert!(text.contains(r#"lmstack_tokens_total{model="demo",kind="output"} 40"#));
/// ```
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    inner: Arc<Mutex<Counters>>,
}

#[derive(Debug, Default)]
struct Counters {
    requests: BTreeMap<(String, &'static str, u16), u64>,
    in_flight: BTreeMap<String, u64>,
    tokens: BTreeMap<(String, &'static str), u64>,
    durations: BTreeMap<String, Histogram>,
}

#[derive(Debug, Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// A request counted in flight until dropped; made by [`Metrics::start`].
#[derive(Debug)]
pub struct InFlight {
    metrics: Metrics,
    model: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(count) = self.metrics.lock().in_flight.get_mut(&self.model) {
            *count = count.saturating_sub(1);
        }
    }
}

impl Metrics {
    /// Counts a request to `model` in flight until the guard is dropped.
    pub fn start(&self, model: &str) -> InFlight {
        *self.lock().in_flight.entry(model.to_owned()).or_default() += 1;
        InFlight {
            metrics: self.clone(),
            model: model.to_owned(),
        }
    }

    /// Counts a request answered with `status`, which took `took`.
    pub fn answered(&self, model: &str, format: &'static str, status: u16, took: Duration) {
        let mut counters = self.lock();
        *counters
            .requests
            .entry((model.to_owned(), format, status))
            .or_default() += 1;
        let histogram = counters.durations.entry(model.to_owned()).or_default();
        let seconds = took.as_secs_f64();
        for (count, bound) in histogram.counts.iter_mut().zip(BUCKETS) {
            if seconds <= bound {
                *count += 1;
            }
        }
        histogram.count += 1;
        histogram.sum += seconds;
    }

    /// Adds the tokens a model reported.
    pub fn tokens(&self, model: &str, input: u64, output: u64) {
        let mut counters = self.lock();
        for (kind, n) in [("input", input), ("output", output)] {
            *counters.tokens.entry((model.to_owned(), kind)).or_default() += n;
        }
    }

    /// Everything, in the Prometheus text exposition format.
    pub fn render(&self) -> String {
        let counters = self.lock();
        let mut text = String::new();
        header(&mut text, "requests_total", "counter", "Requests answered.");
        for ((model, format, status), n) in &counters.requests {
            let labels = format!(
                "model=\"{}\",format=\"{format}\",status=\"{status}\"",
                escape(model)
            );
            sample(&mut text, "requests_total", &labels, *n as f64);
        }
        header(
            &mut text,
            "requests_in_flight",
            "gauge",
            "Requests being answered.",
        );
        for (model, n) in &counters.in_flight {
            sample(
                &mut text,
                "requests_in_flight",
                &model_label(model),
                *n as f64,
            );
        }
        header(
            &mut text,
            "tokens_total",
            "counter",
            "Tokens the models reported.",
        );
        for ((model, kind), n) in &counters.tokens {
            let labels = format!("model=\"{}\",kind=\"{kind}\"", escape(model));
            sample(&mut text, "tokens_total", &labels, *n as f64);
        }
        let name = "request_duration_seconds";
        header(
            &mut text,
            name,
            "histogram",
            "Time from request to the end of its answer.",
        );
        for (model, histogram) in &counters.durations {
            let model = model_label(model);
            for (count, bound) in histogram.counts.iter().zip(BUCKETS) {
                let labels = format!("{model},le=\"{bound}\"");
                sample(&mut text, &format!("{name}_bucket"), &labels, *count as f64);
            }
            let all = histogram.count as f64;
            sample(
                &mut text,
                &format!("{name}_bucket"),
                &format!("{model},le=\"+Inf\""),
                all,
            );
            sample(&mut text, &format!("{name}_sum"), &model, histogram.sum);
            sample(&mut text, &format!("{name}_count"), &model, all);
        }
        text
    }

    fn lock(&self) -> MutexGuard<'_, Counters> {
        // A panic elsewhere cannot leave a counter half-written: keep counting.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
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

fn model_label(model: &str) -> String {
    format!("model=\"{}\"", escape(model))
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
            "lmstack_requests_total{model=\"m\",format=\"anthropic\",status=\"429\"} 1",
            "# TYPE lmstack_request_duration_seconds histogram",
        ] {
            assert!(text.contains(&format!("{line}\n")), "{line} in\n{text}");
        }
    }
}

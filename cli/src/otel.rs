//! The gateway's spans exported over OTLP (feature `otel`), configured as
//! every OpenTelemetry service is: by the standard environment variables.
//! Export is on when an endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, and `OTEL_SDK_DISABLED` is not
//! `true`); the protocol is `http/protobuf` unless `OTEL_EXPORTER_OTLP_PROTOCOL`
//! (or its `TRACES_` variant) says `http/json`; the headers, timeout,
//! compression, batching (`OTEL_BSP_*`) and resource (`OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`; the service is `lmstack` when they name none)
//! are read by the OpenTelemetry SDK. Only lmstack's spans are exported (the
//! GenAI spans of each request and upstream attempt), whatever `RUST_LOG`
//! keeps of the log lines.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{Array, Context, Key, KeyValue, StringValue, Value};
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchSpanProcessor, SdkTracerProvider, Span, SpanData, SpanProcessor,
};
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::registry::LookupSpan;

/// The spans' export, flushed and ended by [`shutdown`](Export::shutdown).
#[derive(Debug)]
pub struct Export {
    provider: SdkTracerProvider,
}

impl Export {
    /// Sends the spans still held and stops the export.
    pub fn shutdown(self) {
        if let Err(error) = self.provider.shutdown() {
            eprintln!("lmstack: the last spans were not exported: {error}");
        }
    }
}

/// The layer that exports lmstack's spans, and its [`Export`]; `None` where
/// no endpoint is set, or an error that says why the export cannot start.
pub fn layer<S>() -> Result<Option<(impl Layer<S>, Export)>, String>
where
    S: Subscriber + for<'span> LookupSpan<'span>,
{
    let set = |name: &str| std::env::var(name).is_ok_and(|value| !value.trim().is_empty());
    let disabled = std::env::var("OTEL_SDK_DISABLED")
        .is_ok_and(|value| value.trim().eq_ignore_ascii_case("true"));
    if disabled
        || !(set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
    {
        return Ok(None);
    }
    let exporter = SpanExporter::builder()
        .with_http()
        .with_protocol(protocol()?)
        .build()
        .map_err(|error| format!("OTLP export: {error}"))?;
    let batch = BatchSpanProcessor::builder(exporter).build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(Arrays(batch))
        .with_resource(resource())
        .build();
    let tracer = provider.tracer("lmstack");
    // Only the conventions' attributes: no busy/idle times (taken at every
    // poll of a stream, the costliest part), source locations or threads.
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_tracked_inactivity(false)
        .with_location(false)
        .with_threads(false)
        .with_filter(filter_fn(|metadata| {
            metadata.is_span() && metadata.target().starts_with("lmstack")
        }));
    Ok(Some((layer, Export { provider })))
}

/// The protocol the variables name: `http/protobuf` (the default) or
/// `http/json`; gRPC is not built in.
fn protocol() -> Result<Protocol, String> {
    let named = [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ]
    .into_iter()
    .find_map(|name| std::env::var(name).ok().map(|value| (name, value)));
    match named {
        None => Ok(Protocol::HttpBinary),
        Some((_, value)) if value.trim() == "http/protobuf" => Ok(Protocol::HttpBinary),
        Some((_, value)) if value.trim() == "http/json" => Ok(Protocol::HttpJson),
        Some((name, value)) => Err(format!(
            "{name}={value}: lmstack exports over http/protobuf or http/json"
        )),
    }
}

/// The resource the variables describe, its service `lmstack` where they
/// name none.
fn resource() -> Resource {
    let resource = Resource::builder().build();
    let named = resource
        .get(&Key::new("service.name"))
        .is_some_and(|name| !name.as_str().starts_with("unknown_service"));
    match named {
        true => resource,
        false => Resource::builder().with_service_name("lmstack").build(),
    }
}

/// The attributes that hold a JSON array of strings (`tracing` fields have
/// no arrays), exported as the arrays the conventions make them.
const ARRAYS: [&str; 1] = ["gen_ai.response.finish_reasons"];

/// A span processor that turns the [`ARRAYS`] into arrays, then hands the
/// span on to `P`.
#[derive(Debug)]
struct Arrays<P>(P);

impl<P: SpanProcessor> SpanProcessor for Arrays<P> {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.0.on_start(span, cx);
    }

    fn on_end(&self, mut span: SpanData) {
        for attribute in &mut span.attributes {
            if ARRAYS.contains(&attribute.key.as_str()) {
                *attribute = as_array(attribute);
            }
        }
        self.0.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: std::time::Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.0.set_resource(resource);
    }
}

/// `attribute` with its JSON array of strings made an array (left as it is
/// when it holds none).
fn as_array(attribute: &KeyValue) -> KeyValue {
    let strings = match &attribute.value {
        Value::String(text) => serde_json::from_str::<Vec<String>>(text.as_str()).ok(),
        _ => None,
    };
    match strings {
        Some(strings) => {
            let strings = strings.into_iter().map(StringValue::from).collect();
            KeyValue::new(attribute.key.clone(), Value::Array(Array::String(strings)))
        }
        None => attribute.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_array_of_strings_becomes_an_array() {
        let reasons = KeyValue::new("gen_ai.response.finish_reasons", r#"["stop","length"]"#);
        let array = Value::Array(Array::String(vec!["stop".into(), "length".into()]));
        assert_eq!(as_array(&reasons).value, array);
        let plain = KeyValue::new("gen_ai.response.finish_reasons", "stop");
        assert_eq!(as_array(&plain), plain);
    }
}

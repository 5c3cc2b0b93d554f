//! Credentials in URLs: a base URL may carry a user and password
//! (`http://user:PASS@host/v1`) or a key in its query (`?key=…`), and a media
//! URL a signature. None of them may show in an error, in `Debug` output or in
//! a log line. Nor may, to a gateway's client, where the upstream lives.

use crate::common::server::{Answer, Server};
use lmstack::message::{ContentBlock, Media, ToolResult};
use lmstack::provider::openai::{LowerOptions, OpenAi, OpenAiConfig, ToolResultMedia, lower};
use lmstack::provider::{ApiKey, TransportErrorKind};
use lmstack::{ChatRequest, Error, Message, ToolCall};
use serde_json::json;
use tower::ServiceExt;

/// The secrets the URLs below carry; none may be shown.
const SECRETS: [&str; 3] = ["PASS", "SECRET", "sk-KEY"];

/// Fails when `text` shows any of [`SECRETS`].
fn assert_no_secret(what: &str, text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{what} shows `{secret}`: {text}");
    }
}

/// Every way an error can be shown: `Display`, `Debug` (plain and pretty) and
/// each error of its source chain.
fn shown(error: &Error) -> String {
    let mut text = format!("{error}\n{error:?}\n{error:#?}");
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        text.push_str(&format!("\n{inner}\n{inner:?}"));
        source = inner.source();
    }
    text
}

/// A loopback address nothing listens on.
fn closed_addr() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    addr
}

/// A base URL with a password and a key in its query, at `addr`.
fn secret_url(addr: std::net::SocketAddr) -> String {
    format!("http://user:PASS@{addr}/v1?key=SECRET#SECRET")
}

fn request() -> ChatRequest {
    ChatRequest::new(vec![Message::user("hi")]).streaming(true)
}

#[tokio::test]
async fn a_transport_error_shows_no_credentials_of_the_base_url() {
    let addr = closed_addr();
    let provider = OpenAi::new(OpenAiConfig::new(secret_url(addr))).unwrap();
    let error = provider.oneshot(request()).await.unwrap_err();
    assert_eq!(
        error.transport_error().map(|error| error.kind),
        Some(TransportErrorKind::Connect),
        "{error}"
    );
    assert_no_secret("the transport error", &shown(&error));
    // Still says where it tried to go.
    assert!(
        error
            .to_string()
            .contains(&format!("POST http://{addr}/v1/chat/completions?***:")),
        "{error}"
    );
}

#[tokio::test]
async fn a_malformed_base_url_is_refused_without_its_credentials() {
    for base_url in [
        // A space: not a URI at all.
        "http://user:PASS@bad host/v1?key=SECRET",
        // A URI, but its port is out of range.
        "http://user:PASS@127.0.0.1:99999/v1?key=SECRET",
        // No scheme.
        "user:PASS@127.0.0.1/v1?key=SECRET",
        // A password with a raw `/` and `?`: the user-info is not where a parser
        // would look for it.
        "http://user:PA/S?S@127.0.0.1/v1",
    ] {
        let provider = OpenAi::new(OpenAiConfig::new(base_url)).unwrap();
        let error = provider.oneshot(request()).await.unwrap_err();
        let text = shown(&error);
        assert_no_secret(base_url, &text);
        assert!(text.contains("***"), "{base_url}: {text}");
    }
}

#[tokio::test]
async fn credentials_in_the_base_url_are_sent_where_http_puts_them() {
    let body = br#"{"choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}]}"#;
    let server = Server::start(vec![Answer::ok("application/json", body, &[64])]).await;
    let base_url = format!("http://user:PASS@{}/v1?key=SECRET#SECRET", server.addr);
    let provider = OpenAi::new(OpenAiConfig::new(&base_url)).unwrap();
    // The path goes before the query; the user-info leaves the URL for a header.
    let http_request = provider.http_request(request()).unwrap();
    assert_eq!(
        http_request.uri().to_string(),
        format!("http://{}/v1/chat/completions?key=SECRET", server.addr)
    );
    let reply = provider.oneshot(request().streaming(false)).await.unwrap();
    assert_eq!(
        reply.collect().await.unwrap(),
        vec![Message::assistant("hello")]
    );
    // "user:PASS", base64.
    assert_eq!(
        server.requests()[0].0["authorization"],
        "Basic dXNlcjpQQVNT"
    );
    // An API key wins over the URL's credentials.
    let provider =
        OpenAi::new(OpenAiConfig::new(&base_url).api_key(ApiKey::new("sk-KEY"))).unwrap();
    let http_request = provider.http_request(request()).unwrap();
    assert_eq!(http_request.headers()["authorization"], "Bearer sk-KEY");
}

#[test]
fn debug_of_the_configuration_and_provider_shows_no_credentials() {
    let config = OpenAiConfig::new(secret_url(closed_addr())).api_key(ApiKey::new("sk-KEY"));
    assert_no_secret("the configuration", &format!("{config:?}"));
    let provider = OpenAi::new(config).unwrap();
    assert_no_secret("the provider", &format!("{provider:?}"));
    assert!(format!("{provider:?}").contains("http://***@127.0.0.1"));
}

#[test]
fn a_document_url_refused_by_the_lowering_shows_no_signature() {
    let url = "https://bucket.example/report.pdf?X-Amz-Signature=SECRET";
    let result = ToolResult::new(
        "call_1",
        "fetch",
        vec![ContentBlock::Document(Media::url(url))],
    );
    let history = vec![
        Message::user("read it"),
        Message::tool_calls(vec![ToolCall::new("call_1", "fetch", json!({}))]),
        Message::tool_results(vec![result]),
    ];
    for media in [ToolResultMedia::Native, ToolResultMedia::Inject] {
        let options = LowerOptions {
            tool_result_media: media,
            ..LowerOptions::default()
        };
        let error = lower(&ChatRequest::new(history.clone()), &options).unwrap_err();
        assert!(error.to_string().contains("bucket.example"), "{error}");
        assert_no_secret("the lowering error", &shown(&error));
    }
}

#[tokio::test]
async fn a_client_is_not_told_where_the_upstream_lives() {
    // A host and a path to recognise; nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.7:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let base_url = format!("http://{addr}/internal-upstream/v1");
    let error = OpenAi::new(OpenAiConfig::new(&base_url))
        .unwrap()
        .oneshot(request())
        .await
        .unwrap_err();
    assert_eq!(
        error.transport_error().map(|error| error.kind),
        Some(TransportErrorKind::Connect),
        "{error}"
    );
    // The logs say where.
    assert!(
        error
            .to_string()
            .contains(&format!("POST {base_url}/chat/completions")),
        "{error}"
    );
    let parts = [
        "127.0.0.7",
        &addr.port().to_string(),
        "internal-upstream",
        "chat/completions",
        "POST",
    ];
    let bodies = [
        lmstack::provider::openai::error_body(&error),
        #[cfg(feature = "anthropic")]
        lmstack::provider::anthropic::error_body(&error),
    ];
    for (status, body) in bodies {
        assert_eq!(status, 502);
        let body = body.to_string();
        assert!(
            body.contains("openai: could not connect: sending the request"),
            "{body}"
        );
        for part in parts {
            assert!(
                !body.contains(part),
                "the error body shows `{part}`: {body}"
            );
        }
    }
}

/// The retry layer logs each failed attempt with its error: through a
/// subscriber that writes every event's fields to a buffer.
#[cfg(feature = "retry")]
mod retry_logs {
    use std::fmt::Write as _;
    use std::sync::{Arc, Mutex};

    use lmstack::retry::RetryLayer;
    use tower::Layer;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    use super::*;

    /// Writes every event's fields, as `name=value`, to a shared buffer.
    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<String>>);

    impl Visit for Capture {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            let mut log = self.0.lock().unwrap();
            let _ = write!(log, "{}={value:?} ", field.name());
        }
    }

    impl Subscriber for Capture {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            event.record(&mut self.clone());
            self.0.lock().unwrap().push('\n');
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    #[tokio::test]
    async fn retry_logs_show_no_credentials_of_the_base_url() {
        let capture = Capture::default();
        // The runtime of `tokio::test` polls on this thread.
        let _guard = tracing::subscriber::set_default(capture.clone());
        let provider = OpenAi::new(OpenAiConfig::new(secret_url(closed_addr()))).unwrap();
        let service = RetryLayer::new()
            .max_retries(2)
            .sleep(|_| std::future::ready(()))
            .layer(provider);
        let error = service.oneshot(request()).await.unwrap_err();
        assert_no_secret("the error after the retries", &shown(&error));
        let log = capture.0.lock().unwrap().clone();
        assert_eq!(
            log.matches("retrying the model call").count(),
            2,
            "two retries logged: {log}"
        );
        assert!(log.contains("could not connect"), "{log}");
        assert_no_secret("the retry log", &log);
    }
}

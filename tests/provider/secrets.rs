//! Credentials in URLs: a base URL may carry a user and password
//! (`http://user:PASS@host/v1`) or a key in its query (`?key=…`), and a media
//! URL a signature. None of them may show in an error, in `Debug` output or in
//! a log line. Nor may a key that an upstream echoes back in its error, whole
//! or masked; nor, to a gateway's client, where the upstream lives.

use crate::common::server::{Answer, Server};
use axum::http::HeaderMap;
use lmstack::message::{ContentBlock, Media, ToolResult};
use lmstack::provider::openai_chat::{LowerOptions, OpenAi, OpenAiConfig, ToolResultMedia, lower};
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

/// The gateway's key to the upstream, as a test upstream echoes it back.
const KEY: &str = "sk-proj-Q7mR2vT9wLk3ZpN8bYc4HdF6gJ1s";

/// Fails when `text` shows any four characters in a row of `key`.
fn assert_no_part_of(key: &str, what: &str, text: &str) {
    for part in key.as_bytes().windows(4) {
        let part = std::str::from_utf8(part).unwrap();
        assert!(
            !text.contains(part),
            "{what} shows `{part}` of the key: {text}"
        );
    }
}

/// Every text of `error`: `shown`, and each field of a provider error.
fn every_text(error: &Error) -> String {
    let mut text = shown(error);
    if let Some(error) = error.provider_error() {
        let fields = [
            &error.error_type,
            &error.code,
            &error.param,
            &error.request_id,
        ];
        text.extend(
            fields
                .into_iter()
                .flatten()
                .map(|field| format!("\n{field}")),
        );
        text.push_str(&format!("\n{}", error.message));
    }
    text
}

/// The bearer token of the request's `Authorization` header.
fn sent_key(headers: &HeaderMap) -> String {
    let value = headers["authorization"].to_str().unwrap();
    value.strip_prefix("Bearer ").unwrap().to_owned()
}

/// OpenAI's answer to a wrong key, quoting it as `quoted` makes of it, in every
/// text field.
fn refusal(quoted: &str) -> Vec<u8> {
    json!({"error": {
        "message": format!("Incorrect API key provided: {quoted}. You can find your API key at https://platform.openai.com/account/api-keys."),
        "type": format!("invalid_request_error ({quoted})"),
        "param": quoted,
        "code": format!("invalid_api_key:{quoted}"),
    }})
    .to_string()
    .into_bytes()
}

/// Asks an upstream that answers with `answer`, with [`KEY`], in either mode;
/// the call's error, or the reply's.
async fn refused(answer: fn() -> Answer, stream: bool) -> Error {
    let server = Server::start(vec![answer()]).await;
    let config = OpenAiConfig::new(server.base_url()).api_key(ApiKey::new(KEY));
    let result = async {
        let reply = OpenAi::new(config)?
            .oneshot(request().streaming(stream))
            .await?;
        reply.collect().await
    };
    let error = result.await.unwrap_err();
    assert_eq!(sent_key(&server.requests()[0].0), KEY);
    error
}

#[tokio::test]
async fn a_key_the_upstream_echoes_whole_is_scrubbed_from_its_error() {
    // A misconfigured proxy: the whole `Authorization` header, and its token.
    let echo = || {
        Answer::echo(401, |headers, _| {
            let sent = headers["authorization"].to_str().unwrap();
            refusal(&format!("{sent} (token {})", sent_key(headers)))
        })
    };
    for stream in [false, true] {
        let error = refused(echo, stream).await;
        let upstream = error.provider_error().expect("a provider error");
        assert_eq!(upstream.status, 401);
        assert!(
            upstream
                .message
                .starts_with("Incorrect API key provided: [redacted] (token [redacted])."),
            "{upstream}"
        );
        assert_no_part_of(KEY, "the error", &every_text(&error));
    }
}

#[tokio::test]
async fn a_key_the_upstream_echoes_masked_is_scrubbed_from_its_error() {
    // OpenAI's way: the first 8 characters and the last 4 around stars.
    let echo = || {
        Answer::echo(401, |headers, _| {
            let key = sent_key(headers);
            refusal(&format!(
                "{}{}{}",
                &key[..8],
                "*".repeat(24),
                &key[key.len() - 4..]
            ))
        })
    };
    let error = refused(echo, false).await;
    let upstream = error.provider_error().expect("a provider error");
    assert!(
        upstream
            .message
            .starts_with("Incorrect API key provided: [redacted]. You can find"),
        "{upstream}"
    );
    assert_eq!(upstream.param.as_deref(), Some("[redacted]"));
    assert_no_part_of(KEY, "the error", &every_text(&error));
}

#[tokio::test]
async fn a_key_echoed_in_an_error_inside_a_reply_is_scrubbed() {
    // An error object inside a 200 answer: a stream's error event, or the body.
    fn inside(stream: bool) -> Answer {
        let content_type = if stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        let mut answer = Answer::ok(content_type, b"", &[1]);
        answer.echo = Some(if stream {
            |headers, _| [b"data: ".as_slice(), &refusal(&sent_key(headers)), b"\n\n"].concat()
        } else {
            |headers, _| refusal(&sent_key(headers))
        });
        answer
    }
    for (stream, answer) in [
        (false, (|| inside(false)) as fn() -> Answer),
        (true, || inside(true)),
    ] {
        let error = refused(answer, stream).await;
        let upstream = error.provider_error().expect("a provider error");
        assert_eq!(upstream.status, 200, "inside the reply");
        assert!(
            upstream
                .message
                .starts_with("Incorrect API key provided: [redacted]."),
            "{upstream}"
        );
        assert_no_part_of(KEY, "the error", &every_text(&error));
    }
}

#[cfg(feature = "gemini")]
#[tokio::test]
async fn a_key_in_the_query_that_the_upstream_echoes_is_scrubbed() {
    use lmstack::provider::gemini::{Gemini, GeminiConfig};
    const GEMINI_KEY: &str = "AIzaSyB7mQ2vT9wLk3ZpN8bYc4HdF6gJ1sRt0uE";
    let server = Server::start(vec![Answer::echo(400, |_, uri| {
        let message = format!("API key not valid for {uri}. Please pass a valid API key.");
        json!({"error": {"code": 400, "message": message, "status": format!("INVALID_ARGUMENT {uri}")}})
            .to_string()
            .into_bytes()
    })])
    .await;
    let config = GeminiConfig::new(format!("{}?key={GEMINI_KEY}", server.base_url()))
        .model("gemini-2.5-flash");
    let error = Gemini::new(config)
        .unwrap()
        .oneshot(request())
        .await
        .unwrap_err();
    assert!(
        server.uris()[0].ends_with(&format!("&key={GEMINI_KEY}")),
        "{:?}",
        server.uris()
    );
    let upstream = error.provider_error().expect("a provider error");
    assert!(upstream.message.starts_with("API key not valid for /v1/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=[redacted]."), "{upstream}");
    assert_no_part_of(GEMINI_KEY, "the error", &every_text(&error));
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
        lmstack::provider::openai_chat::error_body(&error),
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

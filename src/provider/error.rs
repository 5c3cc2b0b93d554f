//! What a provider call can fail with: the provider's own error answer
//! ([`ProviderError`]) or a failure of the connection or of the stream
//! ([`TransportError`]). Both travel inside [`Error`](crate::Error), boxed;
//! [`Error::provider_error`](crate::Error::provider_error) and
//! [`Error::transport_error`](crate::Error::transport_error) read them back.

use crate::text::floor_char_boundary;
use std::fmt;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::redact::Secrets;
use crate::BoxError;

/// An error answered by the provider: an HTTP error status, or an error object
/// sent inside a successful stream.
///
/// The fields come from the status line, the headers (`x-request-id`,
/// `retry-after-ms`, `retry-after`, `x-should-retry`) and the error body, which
/// is read in the shapes of OpenAI (`{"error": {"message", "type", "code",
/// "param"}}`), Anthropic (`{"type": "error", "error": {"type", "message"}}`) and
/// Gemini (`{"error": {"code", "message", "status", "details"}}`, whose
/// `google.rpc.RetryInfo` detail gives `retry_after` when no header does).
#[derive(Clone, Debug, PartialEq)]
pub struct ProviderError {
    /// Which provider answered, such as `openai`.
    pub provider: &'static str,
    /// The HTTP status (200 for an error sent inside a stream).
    pub status: u16,
    /// The provider's error type, such as `rate_limit_error` or `invalid_request_error`.
    pub error_type: Option<String>,
    /// The provider's error code, such as `rate_limit_exceeded` or `unsupported_parameter`.
    pub code: Option<String>,
    /// The request parameter at fault, when the provider names one.
    pub param: Option<String>,
    /// The provider's message (or the start of the body when it had none).
    pub message: String,
    /// The provider's id for the request, to quote to its support.
    pub request_id: Option<String>,
    /// How long the provider asked to wait before trying again.
    pub retry_after: Option<Duration>,
    /// The provider's own word on whether to retry (`x-should-retry`).
    pub should_retry: Option<bool>,
}

/// The most of an error body kept in [`ProviderError::message`] when the body is
/// not a JSON error object.
const MAX_RAW_MESSAGE: usize = 512;

impl ProviderError {
    /// Reads an error answer: its status, headers and body.
    ///
    /// `now` is the time the answer came, used only to turn a `Retry-After` given
    /// as an HTTP date into a wait (a date already past is no wait). This function
    /// reads no clock: the IO driver that received the answer passes
    /// `SystemTime::now()`.
    ///
    /// ```
    /// use lmstack::provider::ProviderError;
    /// use std::time::SystemTime;
    /// let body = br#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#;
    /// let headers = [("x-request-id", "req_1"), ("retry-after", "2")];
    /// let error = ProviderError::from_response("openai", 429, &headers, body, SystemTime::now());
    /// assert_eq!(error.code.as_deref(), Some("rate_limit_exceeded"));
    /// assert_eq!(error.retry_after, Some(std::time::Duration::from_secs(2)));
    /// assert_eq!(
    ///     error.to_string(),
    ///     "openai: HTTP 429 (requests, rate_limit_exceeded): Rate limit reached [request id req_1, retry after 2s]"
    /// );
    /// ```
    pub fn from_response(
        provider: &'static str,
        status: u16,
        headers: &[(&str, &str)],
        body: &[u8],
        now: SystemTime,
    ) -> Self {
        let header = |name: &str| {
            headers
                .iter()
                .find(|(key, _)| key.eq_ignore_ascii_case(name))
                .map(|(_, value)| value.trim())
        };
        let mut error = match serde_json::from_slice::<Value>(body) {
            Ok(value) => Self::from_body(provider, status, &value),
            Err(_) => None,
        }
        .unwrap_or_else(|| Self::plain(provider, status, raw_message(body)));
        error.request_id = ["x-request-id", "request-id", "x-goog-request-id"]
            .into_iter()
            .find_map(header)
            .map(str::to_owned);
        error.retry_after = header("retry-after-ms")
            .and_then(|ms| seconds(ms.parse::<f64>().ok()? / 1000.0))
            .or_else(|| header("retry-after").and_then(|value| parse_retry_after(value, now)))
            .or(error.retry_after);
        error.should_retry = header("x-should-retry").and_then(|value| match value {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        });
        error
    }

    /// The error object a provider sent inside a successful (HTTP 200) response,
    /// a stream's error event or an error chunk: read as [`from_body`](Self::from_body)
    /// does, or kept as raw text when it has no message.
    pub fn in_stream(provider: &'static str, error: &Value) -> Self {
        Self::from_body(provider, 200, error).unwrap_or_else(|| {
            Self::plain(provider, 200, raw_message(error.to_string().as_bytes()))
        })
    }

    /// Reads an error object (`{"error": {…}}`, or the inner object itself), as
    /// sent in a body or inside a stream. `None` when `value` is not one.
    pub fn from_body(provider: &'static str, status: u16, value: &Value) -> Option<Self> {
        let object = value.get("error").unwrap_or(value).as_object()?;
        let text = |key: &str| match object.get(key)? {
            Value::String(text) => Some(text.clone()),
            Value::Number(number) => Some(number.to_string()),
            _ => None,
        };
        let message = text("message")?;
        Some(ProviderError {
            error_type: text("type").or_else(|| text("status")),
            code: text("code"),
            param: text("param"),
            message,
            retry_after: google_retry_delay(object.get("details")),
            ..Self::plain(provider, status, String::new())
        })
    }

    fn plain(provider: &'static str, status: u16, message: String) -> Self {
        ProviderError {
            provider,
            status,
            error_type: None,
            code: None,
            param: None,
            message,
            request_id: None,
            retry_after: None,
            should_retry: None,
        }
    }

    /// Scrubs every text taken from the answer.
    pub(super) fn scrub(&mut self, secrets: &Secrets) {
        let fields = [
            &mut self.error_type,
            &mut self.code,
            &mut self.param,
            &mut self.request_id,
        ];
        for text in fields.into_iter().flatten().chain([&mut self.message]) {
            secrets.scrub_in_place(text);
        }
    }

    /// True when the provider said it is overloaded (Anthropic's 529
    /// `overloaded_error`, Gemini's `UNAVAILABLE`, OpenAI's `server_is_overloaded`).
    pub fn is_overloaded(&self) -> bool {
        let says = |field: &Option<String>| {
            field.as_deref().is_some_and(|word| {
                let word = word.to_ascii_lowercase();
                word.contains("overloaded") || word == "unavailable"
            })
        };
        self.status == 529 || says(&self.error_type) || says(&self.code)
    }
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if (200..300).contains(&self.status) {
            write!(f, "{}: error inside the response stream", self.provider)?;
        } else {
            write!(f, "{}: HTTP {}", self.provider, self.status)?;
        }
        let kinds: Vec<&str> = [&self.error_type, &self.code]
            .into_iter()
            .filter_map(|field| field.as_deref())
            .collect();
        if !kinds.is_empty() {
            write!(f, " ({})", kinds.join(", "))?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(param) = &self.param {
            write!(f, " (parameter `{param}`)")?;
        }
        let mut notes = Vec::new();
        if let Some(id) = &self.request_id {
            notes.push(format!("request id {id}"));
        }
        if let Some(wait) = self.retry_after {
            notes.push(format!("retry after {wait:?}"));
        }
        if !notes.is_empty() {
            write!(f, " [{}]", notes.join(", "))?;
        }
        Ok(())
    }
}

/// `Retry-After`: seconds, or an HTTP date (the wait from `now` until then; none
/// when it is past).
fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    if let Ok(number) = value.parse::<f64>() {
        return seconds(number);
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(now).unwrap_or_default())
}

/// The `retryDelay` of a Google `google.rpc.RetryInfo` in an error's `details`
/// (`"13s"`, `"34.4s"`: a protobuf `Duration` in JSON).
fn google_retry_delay(details: Option<&Value>) -> Option<Duration> {
    details?
        .as_array()?
        .iter()
        .filter(|detail| {
            detail
                .get("@type")
                .and_then(Value::as_str)
                .is_some_and(|kind| kind.ends_with("google.rpc.RetryInfo"))
        })
        .find_map(|detail| {
            let delay = detail.get("retryDelay")?.as_str()?.trim();
            seconds(delay.strip_suffix('s')?.parse().ok()?)
        })
}

/// A wait of `seconds`; `None` for a value no `Duration` holds (negative, not
/// finite, or too large), which counts as no usable `Retry-After`.
fn seconds(seconds: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(seconds).ok()
}

fn raw_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return "(empty body)".to_owned();
    }
    let end = floor_char_boundary(text, MAX_RAW_MESSAGE);
    let mut message = text[..end].to_owned();
    if end < text.len() {
        message.push('…');
    }
    message
}

/// A failure of the connection to a provider, or of the response stream.
///
/// Its `Display` names the request that failed, for logs:
/// `openai: could not connect: POST http://10.0.0.7:8000/v1/chat/completions:
/// sending the request: …`. What a server tells its client leaves that out
/// ([`client_message`](Self::client_message)): where the upstream lives is the
/// operator's business.
#[derive(Debug)]
pub struct TransportError {
    /// Which provider was being talked to.
    pub provider: &'static str,
    /// What kind of failure.
    pub kind: TransportErrorKind,
    /// What happened, in words, without the request's URL.
    pub message: String,
    /// The request that failed, as its method and URL
    /// ([redacted](super::redact_url)), when the error is about one.
    pub target: Option<String>,
    /// The underlying error, if any.
    pub source: Option<BoxError>,
}

/// The kinds of [`TransportError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransportErrorKind {
    /// The connection could not be made.
    Connect,
    /// No data came within the configured time.
    Timeout,
    /// The connection broke while the response was being read.
    Interrupted,
    /// The response ended before its end marker (`[DONE]` or a finish reason).
    Truncated,
    /// The response was not in the expected format.
    Malformed,
    /// The request could not be built or sent.
    Request,
}

impl TransportErrorKind {
    /// Its name in one word, as telemetry names an error (`connect`,
    /// `timeout`…).
    #[cfg(feature = "http")]
    pub(crate) fn short_name(self) -> &'static str {
        match self {
            TransportErrorKind::Connect => "connect",
            TransportErrorKind::Timeout => "timeout",
            TransportErrorKind::Interrupted => "interrupted",
            TransportErrorKind::Truncated => "truncated",
            TransportErrorKind::Malformed => "malformed",
            TransportErrorKind::Request => "request",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            TransportErrorKind::Connect => "could not connect",
            TransportErrorKind::Timeout => "timed out",
            TransportErrorKind::Interrupted => "connection interrupted",
            TransportErrorKind::Truncated => "response truncated",
            TransportErrorKind::Malformed => "malformed response",
            TransportErrorKind::Request => "request failed",
        }
    }
}

impl TransportError {
    /// A transport error without an underlying cause.
    pub fn new(
        provider: &'static str,
        kind: TransportErrorKind,
        message: impl Into<String>,
    ) -> Self {
        TransportError {
            provider,
            kind,
            message: message.into(),
            target: None,
            source: None,
        }
    }

    /// Adds the underlying error.
    pub fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Adds the request that failed: its method and redacted URL.
    pub fn with_target(mut self, target: impl Into<String>) -> Self {
        self.target = Some(target.into());
        self
    }

    /// The error as a server tells its client: the `Display` without the
    /// [`target`](Self::target).
    ///
    /// ```
    /// use lmstack::provider::{TransportError, TransportErrorKind};
    /// let error = TransportError::new("openai", TransportErrorKind::Connect, "sending the request: refused")
    ///     .with_target("POST http://10.0.0.7:8000/v1/chat/completions");
    /// assert_eq!(
    ///     error.to_string(),
    ///     "openai: could not connect: POST http://10.0.0.7:8000/v1/chat/completions: sending the request: refused"
    /// );
    /// assert_eq!(error.client_message(), "openai: could not connect: sending the request: refused");
    /// ```
    pub fn client_message(&self) -> String {
        let mut message = String::new();
        let _ = self.write(&mut message, false);
        message
    }

    fn write(&self, out: &mut impl fmt::Write, with_target: bool) -> fmt::Result {
        write!(out, "{}: {}: ", self.provider, self.kind.describe())?;
        if let Some(target) = self.target.as_ref().filter(|_| with_target) {
            write!(out, "{target}: ")?;
        }
        out.write_str(&self.message)
    }

    /// Scrubs the texts that may hold an upstream's words.
    pub(super) fn scrub(&mut self, secrets: &Secrets) {
        for text in [Some(&mut self.message), self.target.as_mut()]
            .into_iter()
            .flatten()
        {
            secrets.scrub_in_place(text);
        }
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, true)
    }
}

impl std::error::Error for TransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn std::error::Error + 'static))
    }
}

impl std::error::Error for ProviderError {}

impl From<ProviderError> for crate::Error {
    fn from(error: ProviderError) -> Self {
        crate::Error::Provider(Box::new(error))
    }
}

impl From<TransportError> for crate::Error {
    fn from(error: TransportError) -> Self {
        crate::Error::Transport(Box::new(error))
    }
}

impl crate::Error {
    /// The provider's error answer, when this is [`Error::Provider`](crate::Error::Provider).
    ///
    /// ```
    /// use lmstack::provider::ProviderError;
    /// use std::time::SystemTime;
    /// let error: lmstack::Error =
    ///     ProviderError::from_response("openai", 503, &[], b"busy", SystemTime::now()).into();
    /// assert_eq!(error.provider_error().map(|error| error.status), Some(503));
    /// assert!(error.transport_error().is_none());
    /// ```
    pub fn provider_error(&self) -> Option<&ProviderError> {
        match self {
            crate::Error::Provider(error) => error.downcast_ref(),
            _ => None,
        }
    }

    /// The transport failure, when this is [`Error::Transport`](crate::Error::Transport).
    pub fn transport_error(&self) -> Option<&TransportError> {
        match self {
            crate::Error::Transport(error) => error.downcast_ref(),
            _ => None,
        }
    }

    /// The error's text as a server tells its client: its `Display`, less what
    /// only the server's operators need — the request a
    /// [`TransportError`] names (the upstream's URL:
    /// [`TransportError::client_message`]).
    ///
    /// A server also runs it through [`Secrets::scrub`] with every credential
    /// it holds.
    ///
    /// ```
    /// use lmstack::provider::{TransportError, TransportErrorKind};
    /// let error: lmstack::Error = TransportError::new("openai", TransportErrorKind::Timeout, "no data")
    ///     .with_target("POST http://10.0.0.7:8000/v1/chat/completions")
    ///     .into();
    /// assert_eq!(error.client_message(), "openai: timed out: no data");
    /// assert!(error.to_string().contains("10.0.0.7"));
    /// ```
    pub fn client_message(&self) -> String {
        match self.transport_error() {
            Some(error) => error.client_message(),
            None => self.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed "now": Wed, 21 Oct 2015 07:28:00 GMT.
    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480)
    }

    fn read(status: u16, headers: &[(&str, &str)], body: &[u8]) -> ProviderError {
        ProviderError::from_response("openai", status, headers, body, now())
    }

    #[test]
    fn a_google_retry_info_detail_gives_the_wait_unless_a_header_does() {
        let body = br#"{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[
            {"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[]},
            {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"13s"}]}}"#;
        let error = ProviderError::from_response("gemini", 429, &[], body, now());
        assert_eq!(error.retry_after, Some(Duration::from_secs(13)));
        assert_eq!(error.error_type.as_deref(), Some("RESOURCE_EXHAUSTED"));
        assert_eq!(error.code.as_deref(), Some("429"));
        let error =
            ProviderError::from_response("gemini", 429, &[("retry-after", "2")], body, now());
        assert_eq!(error.retry_after, Some(Duration::from_secs(2)));
        let odd = br#"{"error":{"message":"m","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"-1s"},"x"]}}"#;
        assert_eq!(read(429, &[], odd).retry_after, None);
        let fraction = br#"{"error":{"message":"m","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"34.4s"}]}}"#;
        assert_eq!(
            read(429, &[], fraction).retry_after,
            Some(Duration::from_millis(34_400))
        );
    }

    #[test]
    fn reads_the_three_error_shapes() {
        let openai = br#"{"error":{"message":"Unsupported parameter","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}"#;
        let error = read(400, &[], openai);
        assert_eq!(error.param.as_deref(), Some("max_tokens"));
        assert_eq!(error.error_type.as_deref(), Some("invalid_request_error"));

        let anthropic = br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_9"}"#;
        let error = ProviderError::from_response(
            "anthropic",
            529,
            &[("request-id", "req_9")],
            anthropic,
            now(),
        );
        assert!(error.is_overloaded());
        assert_eq!(error.request_id.as_deref(), Some("req_9"));

        let gemini =
            br#"{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}"#;
        let error = ProviderError::from_response("gemini", 429, &[], gemini, now());
        assert_eq!(error.code.as_deref(), Some("429"));
        assert_eq!(error.error_type.as_deref(), Some("RESOURCE_EXHAUSTED"));
    }

    #[test]
    fn a_body_that_is_not_json_is_kept_short() {
        let body = "<html>".repeat(200);
        let error = read(502, &[], body.as_bytes());
        assert!(error.message.starts_with("<html>"));
        assert!(error.message.chars().count() <= MAX_RAW_MESSAGE + 1);
        assert!(error.to_string().contains("HTTP 502"));
    }

    #[test]
    fn retry_after_ms_wins_over_seconds() {
        let error = read(
            429,
            &[("Retry-After", "1"), ("retry-after-ms", "250")],
            b"{}",
        );
        assert_eq!(error.retry_after, Some(Duration::from_millis(250)));
    }

    #[test]
    fn a_retry_after_date_is_the_wait_from_the_given_now() {
        let date = |value: &str| read(503, &[("retry-after", value)], b"").retry_after;
        assert_eq!(
            date("Wed, 21 Oct 2015 07:29:30 GMT"),
            Some(Duration::from_secs(90))
        );
        assert_eq!(date("Wed, 21 Oct 2015 07:28:00 GMT"), Some(Duration::ZERO));
        assert_eq!(
            date("Wed, 21 Oct 2015 07:27:00 GMT"),
            Some(Duration::ZERO),
            "a date already past is no wait"
        );
        assert_eq!(date("not a date"), None);
        // The same header read at another time gives another wait: no clock inside.
        let later = now() + Duration::from_secs(30);
        let error = ProviderError::from_response(
            "openai",
            503,
            &[("retry-after", "Wed, 21 Oct 2015 07:29:30 GMT")],
            b"",
            later,
        );
        assert_eq!(error.retry_after, Some(Duration::from_secs(60)));
    }

    #[test]
    fn the_accessors_read_the_boxed_errors_back() {
        let provider: crate::Error = read(429, &[], b"slow down").into();
        assert!(matches!(provider, crate::Error::Provider(_)));
        assert_eq!(
            provider.provider_error(),
            Some(&read(429, &[], b"slow down"))
        );
        assert!(provider.transport_error().is_none());
        assert_eq!(provider.to_string(), "openai: HTTP 429: slow down");

        let transport: crate::Error =
            TransportError::new("openai", TransportErrorKind::Timeout, "no data").into();
        assert!(matches!(transport, crate::Error::Transport(_)));
        assert_eq!(
            transport.transport_error().map(|error| error.kind),
            Some(TransportErrorKind::Timeout)
        );
        assert!(transport.provider_error().is_none());
        assert_eq!(transport.to_string(), "openai: timed out: no data");

        // Another error in these variants, or another variant, reads as none.
        let stranger = crate::Error::Provider("not a provider error".into());
        assert!(stranger.provider_error().is_none());
        let stranger = crate::Error::Transport("not a transport error".into());
        assert!(stranger.transport_error().is_none());
        assert!(
            crate::Error::stage("parser", "bad")
                .provider_error()
                .is_none()
        );
    }

    #[test]
    fn a_wait_no_duration_holds_is_no_retry_after() {
        let retry_after = |headers: &[(&str, &str)]| read(429, headers, b"{}").retry_after;
        for unusable in ["1e300", "-1", "NaN", "inf"] {
            assert_eq!(
                retry_after(&[("retry-after", unusable)]),
                None,
                "{unusable}"
            );
            assert_eq!(
                retry_after(&[("retry-after-ms", unusable)]),
                None,
                "{unusable} ms"
            );
        }
        assert_eq!(retry_after(&[("retry-after", "1e20")]), None);
        assert_eq!(retry_after(&[("retry-after-ms", "1e30")]), None);
        // An unusable `retry-after-ms` leaves `retry-after` to speak.
        assert_eq!(
            retry_after(&[("retry-after-ms", "1e30"), ("retry-after", "3")]),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            retry_after(&[("retry-after", "1.5")]),
            Some(Duration::from_millis(1500))
        );
    }
}

//! Texts as they may be shown: a URL without the credentials it can carry
//! ([`redact_url`]), and any text without the credentials a request carried
//! ([`Secrets`]).

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use memchr::memmem;

use super::error::{ProviderError, TransportError};
use super::key::ApiKey;
use crate::Error;

/// `url` with its secrets hidden, for errors, logs and `Debug` output: the
/// user-info (`user:password@`) becomes `***@`, and the query and fragment
/// become `?***` (or `#***`), names and values alike — a key may be either.
///
/// It reads the text, not a parsed URL, so it serves a URL that does not parse
/// as well, and errs on the side of hiding: the user-info runs from the `//`
/// after the scheme (or from the start, without one) to the *last* `@`, since a
/// malformed password may hold a raw `/` or `@`; an `@` after the first `?` or
/// `#` may end a password holding one of those, so then all after the `//` is
/// hidden. A URL with an `@` in its path or query shows less than it could,
/// never more.
///
/// ```
/// use lmstack::provider::redact_url;
/// assert_eq!(
///     redact_url("https://user:pass@example.com/v1?key=sk-1#top"),
///     "https://***@example.com/v1?***"
/// );
/// assert_eq!(redact_url("http://127.0.0.1:8080/v1"), "http://127.0.0.1:8080/v1");
/// ```
pub fn redact_url(url: &str) -> String {
    let start = authority_start(url);
    let query = url.find(['?', '#']);
    let end = query.unwrap_or(url.len());
    let mut shown = String::with_capacity(url.len());
    shown.push_str(&url[..start]);
    match url.rfind('@') {
        Some(at) if at > end => {
            shown.push_str("***");
            return shown;
        }
        Some(at) => {
            shown.push_str("***");
            shown.push_str(&url[at..end]);
        }
        None => shown.push_str(&url[start..end]),
    }
    if let Some(mark) = query {
        shown.push_str(&url[mark..=mark]);
        shown.push_str("***");
    }
    shown
}

/// Where the authority starts: after `scheme://`, or a leading `//`; otherwise
/// at 0, so that text without a scheme is hidden from its start.
fn authority_start(url: &str) -> usize {
    let scheme = url.find(':').map_or("", |colon| &url[..colon]);
    let is_scheme = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if is_scheme && url[scheme.len() + 1..].starts_with("//") {
        scheme.len() + 3
    } else if url.starts_with("//") {
        2
    } else {
        0
    }
}

/// What [`Secrets::scrub`] writes in place of a secret.
pub const REDACTED: &str = "[redacted]";

/// A secret shorter than this is scrubbed only where it shows whole: a few of
/// its characters are too likely to be ordinary text.
const MIN_MASKED: usize = 8;
/// The least of a secret's start that makes a masked echo of it.
const MIN_START: usize = 3;
/// The least of a secret's end that makes a masked echo of it.
const MIN_END: usize = 4;
/// The least mask beside a secret's start, or its end, alone.
const MIN_MASK: usize = 3;

/// Credentials that no text leaving the process may show, and the one way to
/// hide them.
///
/// [`scrub`](Self::scrub) replaces with [`REDACTED`] every whole occurrence of
/// a secret, and every *masked echo* of one — the way a provider quotes a key
/// it refuses (`Incorrect API key provided: sk-proj-abc1******wxyz`): a run of
/// mask characters (`*`, `•`, `…`, `x`, `X`) after at least 3 characters of a
/// secret's start and/or before at least 4 of its end. The start or the end
/// alone needs at least 3 mask characters beside it (a `…` counts as 3). A
/// word that merely shares some letters with a secret is left alone, since it
/// is never scrubbed without a mask beside it; a secret shorter than 8
/// characters is scrubbed only whole; an empty one is ignored.
///
/// The HTTP transport scrubs every error it makes of an answer with the
/// credentials of its request ([`of_request`](Self::of_request)), and a
/// provider the errors inside its replies with those of its configuration
/// ([`ProviderConfig::secrets`](super::ProviderConfig::secrets)). A server
/// builds one of every credential it holds, and runs what it tells a client,
/// or logs, through it.
///
/// Scrubbing takes time linear in the text, for each secret. Clones share the
/// secrets; `Debug` shows only how many there are.
///
/// ```
/// use lmstack::provider::{ApiKey, Secrets};
///
/// let secrets = Secrets::new()
///     .key(&ApiKey::new("sk-proj-abc1def2ghi3wxyz"))
///     .secret("gateway-token-42");
/// assert_eq!(
///     secrets.scrub("Incorrect API key provided: sk-proj-abc1def2ghi3wxyz."),
///     "Incorrect API key provided: [redacted]."
/// );
/// assert_eq!(
///     secrets.scrub("Incorrect API key provided: sk-proj-ab***********wxyz."),
///     "Incorrect API key provided: [redacted]."
/// );
/// assert_eq!(secrets.scrub("no token gateway-token-42"), "no token [redacted]");
/// // Without a mask beside them, pieces of a secret are ordinary text.
/// assert_eq!(secrets.scrub("sk-proj keys end in wxyz"), "sk-proj keys end in wxyz");
/// assert_eq!(format!("{secrets:?}"), "Secrets(2 hidden)");
/// ```
#[derive(Clone, Default)]
pub struct Secrets(Arc<Vec<Box<str>>>);

impl Secrets {
    /// No secrets: [`scrub`](Self::scrub) changes nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `secret` (without the whitespace around it).
    pub fn secret(mut self, secret: impl AsRef<str>) -> Self {
        self.add(secret.as_ref());
        self
    }

    /// Adds an API key.
    pub fn key(self, key: &ApiKey) -> Self {
        self.secret(key.expose())
    }

    /// Whether there is no secret to hide.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn add(&mut self, secret: &str) {
        let secret = secret.trim();
        if !secret.is_empty() && !self.0.iter().any(|known| **known == *secret) {
            Arc::make_mut(&mut self.0).push(secret.into());
        }
    }

    /// `text` with each secret in it, whole or masked, replaced by
    /// [`REDACTED`] (once for secrets that touch or overlap); borrowed when it
    /// holds none.
    pub fn scrub<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let bytes = text.as_bytes();
        let mut spans = Vec::new();
        let mut masks = None;
        for secret in self.0.iter().map(|secret| secret.as_bytes()) {
            spans.extend(memmem::find_iter(bytes, secret).map(|at| at..at + secret.len()));
            if secret.len() >= MIN_MASKED && shows_an_end_of(bytes, secret) {
                masks
                    .get_or_insert_with(|| Masks::of(text))
                    .echoes(bytes, secret, &mut spans);
            }
        }
        if spans.is_empty() {
            return Cow::Borrowed(text);
        }
        spans.sort_unstable_by_key(|span| span.start);
        let mut scrubbed = String::with_capacity(text.len());
        let mut copied = 0;
        let mut spans = spans.into_iter().peekable();
        while let Some(mut span) = spans.next() {
            while let Some(next) = spans.next_if(|next| next.start <= span.end) {
                span.end = span.end.max(next.end);
            }
            scrubbed.push_str(&text[copied..span.start]);
            scrubbed.push_str(REDACTED);
            copied = span.end;
        }
        scrubbed.push_str(&text[copied..]);
        Cow::Owned(scrubbed)
    }

    /// Scrubs `text` where it is.
    pub(super) fn scrub_in_place(&self, text: &mut String) {
        if let Cow::Owned(scrubbed) = self.scrub(text) {
            *text = scrubbed;
        }
    }

    /// `error` with the texts that may carry a secret scrubbed: a
    /// [`ProviderError`]'s message, type, code, parameter and request id, a
    /// [`TransportError`]'s message and target, the message of an invalid
    /// request, a refusal or a stage's failure. Any other error is returned as
    /// it is.
    pub fn scrub_error(&self, error: Error) -> Error {
        if self.is_empty() {
            return error;
        }
        match error {
            Error::InvalidRequest(mut message) => {
                self.scrub_in_place(&mut message);
                Error::InvalidRequest(message)
            }
            Error::Refused {
                status,
                mut message,
            } => {
                self.scrub_in_place(&mut message);
                Error::Refused { status, message }
            }
            Error::Stage { stage, mut message } => {
                self.scrub_in_place(&mut message);
                Error::Stage { stage, message }
            }
            Error::Provider(error) => {
                Error::Provider(scrub_boxed(error, |error: &mut ProviderError| {
                    error.scrub(self)
                }))
            }
            Error::Transport(error) => {
                Error::Transport(scrub_boxed(error, |error: &mut TransportError| {
                    error.scrub(self)
                }))
            }
            other => other,
        }
    }
}

/// `error` with `scrub` applied, when it is an `E`.
fn scrub_boxed<E>(error: crate::BoxError, scrub: impl FnOnce(&mut E)) -> crate::BoxError
where
    E: std::error::Error + Send + Sync + 'static,
{
    match error.downcast::<E>() {
        Ok(mut error) => {
            scrub(&mut error);
            error
        }
        Err(other) => other,
    }
}

impl<S: AsRef<str>> FromIterator<S> for Secrets {
    /// The secrets of an iterator, such as configured keys:
    /// `keys.iter().map(ApiKey::expose).collect::<Secrets>()`.
    fn from_iter<I: IntoIterator<Item = S>>(secrets: I) -> Self {
        let mut all = Secrets::new();
        all.extend(secrets);
        all
    }
}

impl<S: AsRef<str>> Extend<S> for Secrets {
    fn extend<I: IntoIterator<Item = S>>(&mut self, secrets: I) {
        for secret in secrets {
            self.add(secret.as_ref());
        }
    }
}

impl Extend<Secrets> for Secrets {
    /// Adds the secrets of others, such as each upstream's
    /// [`ProviderConfig::secrets`](super::ProviderConfig::secrets).
    fn extend<I: IntoIterator<Item = Secrets>>(&mut self, others: I) {
        for other in others {
            self.extend(other.0.iter());
        }
    }
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secrets({} hidden)", self.0.len())
    }
}

/// Whether `text` shows as much of the start or of the end of `secret` as a
/// masked echo does: a quick test before the search for one.
fn shows_an_end_of(text: &[u8], secret: &[u8]) -> bool {
    memmem::find(text, &secret[..MIN_START]).is_some()
        || memmem::find(text, &secret[secret.len() - MIN_END..]).is_some()
}

/// How much masking `c` is: 1 for `*`, `•`, `x` and `X`, 3 for `…`, else 0.
fn mask_weight(c: char) -> usize {
    match c {
        '*' | '•' | 'x' | 'X' => 1,
        '…' => 3,
        _ => 0,
    }
}

/// The runs of mask characters in a text, where masked echoes are looked for.
struct Masks {
    /// Each run, as a range of `bounds`.
    runs: Vec<Range<usize>>,
    /// Where a run starts and where each of its characters ends, in order, each
    /// with the weight of the run's characters before it.
    bounds: Vec<(usize, usize)>,
}

impl Masks {
    fn of(text: &str) -> Self {
        let mut masks = Masks {
            runs: Vec::new(),
            bounds: Vec::new(),
        };
        let mut run: Option<usize> = None;
        let mut weight = 0;
        for (at, c) in text.char_indices() {
            match (mask_weight(c), run) {
                (0, Some(first)) => {
                    masks.runs.push(first..masks.bounds.len());
                    run = None;
                }
                (0, None) => {}
                (mask, _) => {
                    if run.is_none() {
                        run = Some(masks.bounds.len());
                        masks.bounds.push((at, 0));
                        weight = 0;
                    }
                    weight += mask;
                    masks.bounds.push((at + c.len_utf8(), weight));
                }
            }
        }
        if let Some(first) = run {
            masks.runs.push(first..masks.bounds.len());
        }
        masks
    }

    /// Adds to `spans` the masked echoes of `secret` in `text` (whose runs
    /// these are). The secret's start may end at any bound of a run but its
    /// last, and its end begin at any but its first: an `x` beside the mask
    /// may be the secret's own.
    fn echoes(&self, text: &[u8], secret: &[u8], spans: &mut Vec<Range<usize>>) {
        let offsets = self.bounds.iter().map(|&(at, _)| at);
        let starts = matched_before(text.iter().copied(), secret, offsets.clone());
        let reversed: Vec<u8> = secret.iter().rev().copied().collect();
        let from_end = offsets.rev().map(|at| text.len() - at);
        let mut ends = matched_before(text.iter().rev().copied(), &reversed, from_end);
        ends.reverse();
        for run in &self.runs {
            let at = |bound: usize| self.bounds[bound].0;
            let weight = |bound: usize| self.bounds[bound].1;
            let (first, last) = (run.start, run.end - 1);
            let start = (first..last)
                .filter(|&bound| starts[bound] >= MIN_START)
                .min_by_key(|&bound| at(bound) - starts[bound]);
            let end = (first + 1..=last)
                .filter(|&bound| ends[bound] >= MIN_END)
                .max_by_key(|&bound| at(bound) + ends[bound]);
            match (start, end) {
                (Some(start), Some(end)) if start < end => {
                    spans.push(at(start) - starts[start]..at(end) + ends[end]);
                }
                _ => {
                    if let Some(start) = start
                        && weight(last) - weight(start) >= MIN_MASK
                    {
                        spans.push(at(start) - starts[start]..at(last));
                    }
                    if let Some(end) = end
                        && weight(end) >= MIN_MASK
                    {
                        spans.push(at(first)..at(end) + ends[end]);
                    }
                }
            }
        }
    }
}

/// For each of `offsets` into `text` (ascending), the length of the longest
/// start of `pattern` that ends there: one Knuth–Morris–Pratt scan, linear in
/// the text and the pattern.
fn matched_before(
    text: impl Iterator<Item = u8>,
    pattern: &[u8],
    offsets: impl Iterator<Item = usize>,
) -> Vec<usize> {
    // `borders[k]`: the longest proper start of `pattern[..k]` that also ends it.
    let mut borders = vec![0; pattern.len() + 1];
    let mut k = 0;
    for i in 1..pattern.len() {
        while k > 0 && pattern[i] != pattern[k] {
            k = borders[k];
        }
        if pattern[i] == pattern[k] {
            k += 1;
        }
        borders[i + 1] = k;
    }
    let mut offsets = offsets.peekable();
    let mut lengths = Vec::new();
    let mut matched = 0;
    for (at, byte) in text.enumerate() {
        while offsets.next_if_eq(&at).is_some() {
            lengths.push(matched);
        }
        if offsets.peek().is_none() {
            return lengths;
        }
        if matched == pattern.len() {
            matched = borders[matched];
        }
        while matched > 0 && pattern[matched] != byte {
            matched = borders[matched];
        }
        if pattern[matched] == byte {
            matched += 1;
        }
    }
    lengths.extend(offsets.map(|_| matched));
    lengths
}

/// The headers whose values are credentials, marked sensitive or not.
#[cfg(feature = "http")]
const CREDENTIAL_HEADERS: [&str; 5] = [
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "x-goog-api-key",
    "api-key",
];

/// The words that make a URL query parameter a credential, in its name (any
/// case): `key` (Gemini's `?key=`, `api_key`), `token` (`access_token`),
/// `sig` (a signed URL's signature), `secret`, `pass`, `auth`, `cred`.
#[cfg(feature = "http")]
const CREDENTIAL_PARAMETERS: [&str; 7] = ["key", "token", "sig", "secret", "pass", "auth", "cred"];

#[cfg(feature = "http")]
impl Secrets {
    /// The credentials `request` carries:
    ///
    /// - the value of each header marked sensitive, and of `Authorization`,
    ///   `Proxy-Authorization`, `x-api-key`, `x-goog-api-key` and `api-key`;
    ///   of a value `SCHEME TOKEN` (`Bearer sk-…`, `Basic …`), the token too,
    ///   and of a `Basic` token the password it encodes;
    /// - in its URL, the password of the user-info (as written, decoded, and
    ///   as the `Basic` token [`move_url_credentials`](super::transport::move_url_credentials)
    ///   sends) and each query value whose name says it is a credential (`key`,
    ///   `api_key`, `access_token`, `sig`, …: a name holding `key`, `token`,
    ///   `sig`, `secret`, `pass`, `auth` or `cred`), as written and decoded.
    ///
    /// ```
    /// use lmstack::provider::Secrets;
    /// let request = http::Request::post("https://host/v1/m:generateContent?alt=sse&key=AIzaSy-secret-1")
    ///     .header("authorization", "Bearer sk-secret-2")
    ///     .body(())
    ///     .unwrap();
    /// let secrets = Secrets::of_request(&request);
    /// assert_eq!(
    ///     secrets.scrub("no AIzaSy-secret-1 nor sk-secret-2 shows, but sse does"),
    ///     "no [redacted] nor [redacted] shows, but sse does"
    /// );
    /// ```
    pub fn of_request<B>(request: &http::Request<B>) -> Self {
        let mut secrets = Secrets::new();
        secrets.add_headers(request.headers());
        secrets.add_uri(request.uri());
        secrets
    }

    /// Adds the credentials among `headers`, as [`of_request`](Self::of_request) reads them.
    pub(super) fn add_headers(&mut self, headers: &http::HeaderMap) {
        for (name, value) in headers {
            if !value.is_sensitive() && !CREDENTIAL_HEADERS.contains(&name.as_str()) {
                continue;
            }
            let Ok(value) = std::str::from_utf8(value.as_bytes()) else {
                continue;
            };
            self.add(value);
            let Some((scheme, token)) = value.trim().split_once(' ') else {
                continue;
            };
            if scheme.chars().all(|c| c.is_ascii_alphabetic()) {
                self.add(token);
            }
            if scheme.eq_ignore_ascii_case("basic")
                && let Some(password) = basic_password(token.trim())
            {
                self.add(&password);
            }
        }
    }

    /// Adds the credentials in `uri`, as [`of_request`](Self::of_request) reads them.
    pub(super) fn add_uri(&mut self, uri: &http::Uri) {
        let user_info = uri
            .authority()
            .and_then(|authority| authority.as_str().rsplit_once('@'));
        if let Some((user_info, _)) = user_info {
            let (_, password) = user_info.split_once(':').unwrap_or((user_info, ""));
            self.add_encoded(password);
            self.add(&basic_token(user_info));
        }
        for (name, value) in uri
            .query()
            .unwrap_or("")
            .split('&')
            .filter_map(|pair| pair.split_once('='))
        {
            let name = name.to_ascii_lowercase();
            if CREDENTIAL_PARAMETERS.iter().any(|word| name.contains(word)) {
                self.add_encoded(value);
            }
        }
    }

    /// Adds `value` as written in a URL, and percent-decoded.
    fn add_encoded(&mut self, value: &str) {
        self.add(value);
        self.add(&percent_encoding::percent_decode_str(value).decode_utf8_lossy());
    }
}

/// The token of the `Authorization: Basic` header for a URL's user-info
/// (`user:password`, percent-encoded as in a URL): the decoded user and
/// password, joined by `:`, in base64.
#[cfg(feature = "http")]
pub(super) fn basic_token(user_info: &str) -> String {
    use base64::Engine as _;
    use percent_encoding::percent_decode_str;
    let (user, password) = user_info.split_once(':').unwrap_or((user_info, ""));
    let mut credentials: Vec<u8> = percent_decode_str(user).collect();
    credentials.push(b':');
    credentials.extend(percent_decode_str(password));
    base64::engine::general_purpose::STANDARD.encode(credentials)
}

/// The password a `Basic` token encodes.
#[cfg(feature = "http")]
fn basic_password(token: &str) -> Option<String> {
    use base64::Engine as _;
    let credentials = base64::engine::general_purpose::STANDARD
        .decode(token)
        .ok()?;
    let credentials = String::from_utf8(credentials).ok()?;
    Some(credentials.split_once(':')?.1.to_owned())
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn hides_user_info_query_and_fragment() {
        let cases = [
            ("http://user:PASS@host:8080/v1", "http://***@host:8080/v1"),
            ("http://user@host/v1", "http://***@host/v1"),
            ("http://host/v1?key=SECRET&b=2", "http://host/v1?***"),
            ("http://host/v1#SECRET", "http://host/v1#***"),
            ("http://host/v1?key=SECRET#SECRET", "http://host/v1?***"),
            ("http://u:P@host/v1?key=SECRET", "http://***@host/v1?***"),
            ("http://[::1]:8080/v1", "http://[::1]:8080/v1"),
            ("https://api.openai.com/v1", "https://api.openai.com/v1"),
            ("", ""),
        ];
        for (url, shown) in cases {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }

    #[test]
    fn malformed_user_info_is_hidden_whole() {
        let cases = [
            // No scheme, or no `//`: the user-info starts the text.
            ("user:PASS@host/v1", "***@host/v1"),
            ("http:user:PASS@host/v1", "***@host/v1"),
            ("u:P//ASS@host/v1", "***@host/v1"),
            ("//user:PASS@host/v1", "//***@host/v1"),
            // A raw `/` or `@` in the password.
            ("http://u:PA/SS@host/v1", "http://***@host/v1"),
            ("http://u:PA@SS@host/v1", "http://***@host/v1"),
            ("http://u:P//ASS@host/v1", "http://***@host/v1"),
            // A raw `?` or `#` in the password: all after the `//` goes.
            ("http://u:PA?SS@host/v1", "http://***"),
            ("http://u:PA#SS@host/v1", "http://***"),
            ("u:PA?//SS@host/v1", "***"),
            // As does a query holding an `@`.
            ("http://host/v1?mail=a@SECRET&key=SECRET", "http://***"),
            // Nothing to hide, or nothing at all.
            ("@", "***@"),
            ("?", "?***"),
            (":", ":"),
            ("://", "://"),
        ];
        for (url, shown) in cases {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }
}

#[cfg(test)]
mod secrets_tests {
    use std::time::{Duration, Instant};

    use proptest::prelude::*;

    use super::*;
    use crate::provider::TransportErrorKind;

    const KEY: &str = "sk-proj-abc1def2ghi3jkl4wxyz";

    fn scrub(secrets: &[&str], text: &str) -> String {
        secrets.iter().collect::<Secrets>().scrub(text).into_owned()
    }

    #[test]
    fn a_whole_secret_is_replaced_wherever_it_is() {
        let secrets = Secrets::new().secret(KEY).secret("gw-token-42");
        let text = format!("{KEY}, Bearer {KEY}{KEY}:{KEY} and gw-token-42");
        assert_eq!(
            secrets.scrub(&text),
            "[redacted], Bearer [redacted]:[redacted] and [redacted]",
            "touching secrets become one marker"
        );
        assert!(matches!(
            secrets.scrub("no secret"),
            Cow::Borrowed("no secret")
        ));
        // Overlapping secrets, whole or in part.
        assert_eq!(
            scrub(&["abcdefgh", "efghijkl"], "<abcdefghijkl>"),
            "<[redacted]>"
        );
        assert_eq!(scrub(&["abcd"], "é abcd é"), "é [redacted] é");
    }

    #[test]
    fn masked_echoes_are_replaced_as_providers_write_them() {
        let cases = [
            // OpenAI: the start and the end around stars.
            "sk-proj-abc1**************************wxyz",
            "sk-proj-********************************wxyz",
            "sk-***wxyz",
            // The start, or the end, alone.
            "sk-proj-abc1def2**********",
            "sk-***",
            "********************jkl4wxyz",
            "***wxyz",
            // Other masks: an ellipsis, bullets, x's.
            "sk-proj…wxyz",
            "sk-proj-abc1…",
            "…wxyz",
            "sk-proj-••••••••wxyz",
            "sk-proj-abc1xxxxxxxxxxwxyz",
            "sk-pXXXXXXXX",
        ];
        for echo in cases {
            assert_eq!(
                scrub(
                    &[KEY],
                    &format!("Incorrect API key provided: {echo}. See the docs.")
                ),
                "Incorrect API key provided: [redacted]. See the docs.",
                "{echo}"
            );
        }
    }

    #[test]
    fn an_x_of_the_secret_beside_the_mask_is_taken_as_the_secrets() {
        // The secret's end starts with x's, its start ends with one: the run of
        // mask characters holds them.
        let secret = "abcx1234567xxyz";
        for echo in ["abcx****xxyz", "****xxyz", "abcx****"] {
            assert_eq!(
                scrub(&[secret], &format!("<{echo}>")),
                "<[redacted]>",
                "{echo}"
            );
        }
        // Two characters of the start are not enough to be taken.
        assert_eq!(scrub(&[secret], "<ab*******xxyz>"), "<ab[redacted]>");
    }

    #[test]
    fn ordinary_text_sharing_pieces_of_a_secret_is_left_alone() {
        let unchanged = [
            // Pieces of the secret without a mask beside them.
            "sk-proj keys end in wxyz",
            "sk-proj-abc1 is not sk-proj-abc1def2ghi3jkl4wxy",
            // A mask too short for a start, or an end, alone.
            "sk-proj-abc1** and **wxyz",
            "sk-proj-abc1x and xwxyz",
            // Too little of the start (2) or of the end (3) beside a mask.
            "sk****** and ****xyz",
            // A mask, or pieces, apart from each other.
            "sk-proj ***** wxyz",
            "max 8 tokens, 3x faster, xxx-large, ***",
        ];
        for text in unchanged {
            assert_eq!(scrub(&[KEY], text), text);
        }
    }

    #[test]
    fn a_short_secret_is_scrubbed_only_whole_and_an_empty_one_not_at_all() {
        assert_eq!(
            scrub(&["pa55wd"], "pa55wd pa5***** ***55wd"),
            "[redacted] pa5***** ***55wd"
        );
        assert!(Secrets::new().secret("").secret(" \t").is_empty());
        assert_eq!(scrub(&[""], "text"), "text");
        assert_eq!(
            scrub(&["  padded-secret "], "a padded-secret"),
            "a [redacted]"
        );
    }

    #[test]
    fn debug_shows_how_many_secrets_not_which() {
        let secrets = Secrets::new()
            .secret(KEY)
            .key(&ApiKey::new("sk-other-key"))
            .secret(KEY);
        assert_eq!(format!("{secrets:?}"), "Secrets(2 hidden)");
        let mut all: Secrets = ["a-secret-1"].into_iter().collect();
        all.extend([secrets]);
        assert_eq!(format!("{all:?}"), "Secrets(3 hidden)");
    }

    #[test]
    fn scrub_error_scrubs_every_text_an_error_may_carry_a_secret_in() {
        let secrets = Secrets::new().secret(KEY);
        let body = format!(
            r#"{{"error":{{"message":"bad key {KEY}","type":"t {KEY}","code":"c sk-proj-***wxyz","param":"p {KEY}"}}}}"#
        );
        let headers = [("x-request-id", KEY)];
        let error = ProviderError::from_response(
            "openai",
            401,
            &headers,
            body.as_bytes(),
            std::time::SystemTime::UNIX_EPOCH,
        );
        let error = secrets.scrub_error(error.into());
        let scrubbed = error.provider_error().unwrap();
        assert_eq!(scrubbed.message, "bad key [redacted]");
        assert_eq!(scrubbed.error_type.as_deref(), Some("t [redacted]"));
        assert_eq!(scrubbed.code.as_deref(), Some("c [redacted]"));
        assert_eq!(scrubbed.param.as_deref(), Some("p [redacted]"));
        assert_eq!(scrubbed.request_id.as_deref(), Some("[redacted]"));

        let error = TransportError::new(
            "openai",
            TransportErrorKind::Malformed,
            format!("chunk: {KEY}"),
        )
        .with_target(format!("POST http://host/bot{KEY}/x"));
        let error = secrets.scrub_error(error.into());
        assert_eq!(
            error.to_string(),
            "openai: malformed response: POST http://host/bot[redacted]/x: chunk: [redacted]"
        );

        for texts in [
            Error::stage("s", format!("failed with {KEY}")),
            Error::InvalidRequest(format!("bad {KEY}")),
            Error::Refused {
                status: 403,
                message: format!("no {KEY}"),
            },
        ] {
            let scrubbed = secrets.scrub_error(texts).to_string();
            assert!(
                scrubbed.contains(REDACTED) && !scrubbed.contains(KEY),
                "{scrubbed}"
            );
        }
        let limit = Error::ToolLoopLimit { max_iterations: 3 };
        let kept = secrets.scrub_error(limit);
        assert!(matches!(kept, Error::ToolLoopLimit { max_iterations: 3 }));
    }

    #[test]
    fn scrubbing_is_linear_in_the_text_for_each_secret() {
        // Self-similar secrets and a text of their starts and ends around masks:
        // the worst case of a naive search for the longest start before each mask.
        let secrets: Secrets = (0..256)
            .map(|n| format!("{}{n:03}", "a".repeat(1000)))
            .collect();
        let piece = format!("{}***{}*", "a".repeat(700), "a".repeat(200));
        let text = piece.repeat((64 << 10) / piece.len());
        let started = Instant::now();
        let scrubbed = secrets.scrub(&text);
        assert!(scrubbed.starts_with(REDACTED));
        // Linear, this is some 30 M steps; comparing, before each mask, each
        // start of each secret with the text, some 20 G.
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
    }

    #[cfg(feature = "http")]
    #[test]
    fn a_request_s_credentials_are_its_credential_headers_and_url_credentials() {
        let mut custom = http::HeaderValue::from_static("org-sensitive-1");
        custom.set_sensitive(true);
        let request = http::Request::post(
            "http://me:p%40ss-word@host/v1/m?alt=sse&api-version=2024-10-21&key=AIza-key-1&X-Amz-Signature=sig-value-1",
        )
        .header("authorization", "Bearer sk-bearer-1")
        .header("proxy-authorization", "Basic dXNlcjpwcm94eS1wYXNzLTE=")
        .header("x-api-key", "anthropic-key-1")
        .header("x-goog-api-key", "goog-key-1")
        .header("api-key", "azure-key-1")
        .header("openai-organization", custom)
        .header("anthropic-version", "2023-06-01")
        .body(())
        .unwrap();
        let secrets = Secrets::of_request(&request);
        let shown = [
            "sk-bearer-1",
            "Basic dXNlcjpwcm94eS1wYXNzLTE=",
            // The password the Basic token encodes ("user:proxy-pass-1").
            "proxy-pass-1",
            "anthropic-key-1",
            "goog-key-1",
            "azure-key-1",
            "org-sensitive-1",
            "AIza-key-1",
            "sig-value-1",
            // The password of the URL, as written, decoded, and as Basic sends it.
            "p%40ss-word",
            "p@ss-word",
            &basic_token("me:p%40ss-word"),
        ];
        for secret in shown {
            assert_eq!(
                secrets.scrub(&format!("<{secret}>")),
                "<[redacted]>",
                "{secret}"
            );
        }
        // What is not a credential stays.
        let text = "me, sse, 2024-10-21, 2023-06-01, host, Bearer, Basic";
        assert_eq!(secrets.scrub(text), text);
    }

    /// A secret as keys are: letters (no `x`, a mask), digits, `-` and `_`.
    fn secret() -> impl Strategy<Value = String> {
        "[a-wyzA-WYZ0-9_-]{8,64}"
    }

    /// A masked echo of `secret`: its start and/or its end around a mask.
    fn masked(secret: &str, start: usize, end: usize, mask: usize, form: u8) -> String {
        let half = secret.len() / 2;
        let (start, end) = (3 + start % (half - 2), 4 + end % (half - 3));
        let (start, end) = (&secret[..start], &secret[secret.len() - end..]);
        match form % 3 {
            0 => format!("{start}{}{end}", "*".repeat(1 + mask)),
            1 => format!("{start}{}", "*".repeat(3 + mask)),
            _ => format!("{}{end}", "•".repeat(3 + mask)),
        }
    }

    proptest! {
        #[test]
        fn a_secret_anywhere_in_any_text_never_survives(
            secrets in prop::collection::vec(secret(), 1..4),
            before in "\\PC{0,40}",
            after in "\\PC{0,40}",
            which in any::<prop::sample::Index>(),
            (start, end, mask, form) in (0..64usize, 0..64usize, 0..20usize, any::<u8>()),
        ) {
            let all: Secrets = secrets.iter().collect();
            let secret = which.get(&secrets);
            let whole = format!("{before}{secret}{after}");
            let scrubbed = all.scrub(&whole);
            prop_assert!(!scrubbed.contains(secret.as_str()), "{}", scrubbed);
            let echo = masked(secret, start, end, mask, form);
            let scrubbed = all.scrub(&format!("{before}{echo}{after}")).into_owned();
            prop_assert!(!scrubbed.contains(&echo), "{} in {}", echo, scrubbed);
            prop_assert!(scrubbed.contains(REDACTED));
        }

        #[test]
        fn text_without_a_secret_or_a_mask_is_unchanged(
            secret in secret(),
            pieces in prop::collection::vec((0..3u8, "[a-wyzA-WYZ0-9 .,_-]{0,12}", any::<prop::sample::Index>()), 0..12),
        ) {
            // Words, and starts and ends of the secret, without the secret whole.
            let text: String = pieces.iter().map(|(kind, word, cut)| match kind {
                0 => word.clone(),
                1 => secret[..cut.index(secret.len())].to_owned(),
                _ => secret[cut.index(secret.len()) + 1..].to_owned(),
            }).collect();
            prop_assume!(!text.contains(&secret));
            let secrets = Secrets::new().secret(&secret);
            prop_assert!(matches!(secrets.scrub(&text), Cow::Borrowed(_)));
        }
    }
}

//! URLs as they may be shown: without the secrets they can carry.

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

//! Anthropic's beta flags (`anthropic-beta: flag-a,flag-b`): carried in a
//! canonical request's `options.extra` under [`BETA_KEY`], read from a client's
//! headers by a gateway, written as the upstream's header by the [`Messages`]
//! wire (never into the body). Pure.
//!
//! [`Messages`]: super::Messages

use ::http::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};

use crate::Error;
use crate::provider::Kind;

/// The wire, in this module's messages.
const PROVIDER: &str = Kind::Anthropic.name();

/// The `options.extra` key of the beta flags a request is sent with: an array
/// of flag strings (a string of comma-separated flags is read too). The
/// header's own name, which no body field can have (Anthropic's body fields
/// are snake_case); the Messages wire sends it as the `anthropic-beta`
/// header, merged with the flags the configuration's headers already hold.
///
/// ```
/// use lmstack::provider::anthropic::{BETA_KEY, Messages};
/// use lmstack::provider::{Provider, ProviderConfig};
/// use lmstack::{ChatRequest, Message};
///
/// let mut request = ChatRequest::new(vec![Message::user("Hi")]).model("claude-sonnet-4-5");
/// request.options.extra.insert(BETA_KEY.into(), serde_json::json!(["context-1m-2025-08-07"]));
/// let provider = Provider::new(ProviderConfig::<Messages>::new("http://127.0.0.1:1/v1"))?;
/// let sent = provider.http_request(request)?;
/// assert_eq!(sent.headers()["anthropic-beta"], "context-1m-2025-08-07");
/// assert!(!String::from_utf8_lossy(sent.body()).contains("context-1m"));
/// # Ok::<(), lmstack::Error>(())
/// ```
pub const BETA_KEY: &str = "anthropic-beta";

/// The header the flags travel in.
const BETA_HEADER: HeaderName = HeaderName::from_static("anthropic-beta");

/// The flags of `values` (header values or strings, each a comma-separated
/// list), trimmed, empty ones left out, each once, in order.
pub(crate) fn flags<'a>(values: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut flags: Vec<String> = Vec::new();
    for flag in values.into_iter().flat_map(|value| value.split(',')) {
        let flag = flag.trim();
        if !flag.is_empty() && !flags.iter().any(|seen| seen == flag) {
            flags.push(flag.to_owned());
        }
    }
    flags
}

/// Adds the flags of a client's `anthropic-beta` headers (every line of them)
/// to `extra`'s [`BETA_KEY`], after those it holds.
#[cfg(feature = "server")]
pub(crate) fn decode_headers(headers: &HeaderMap, extra: &mut Map<String, Value>) {
    let sent = headers
        .get_all(BETA_HEADER)
        .iter()
        .filter_map(|value| value.to_str().ok());
    let held = extra.get(BETA_KEY).map(extra_flags).unwrap_or_default();
    let flags = flags(held.iter().map(String::as_str).chain(sent));
    if !flags.is_empty() {
        extra.insert(BETA_KEY.into(), flags.into());
    }
}

/// The flags an extra value holds: an array of strings, or one string.
fn extra_flags(value: &Value) -> Vec<String> {
    match value {
        Value::String(flags) => self::flags([flags.as_str()]),
        Value::Array(items) => flags(items.iter().filter_map(Value::as_str)),
        _ => Vec::new(),
    }
}

/// Writes `extra`'s flags, then `needed` (one the request's tools need),
/// into `headers`' `anthropic-beta`, after the flags already there (the
/// configuration's), as one comma-separated value.
pub(crate) fn write_header(
    extra: &Map<String, Value>,
    needed: Option<&str>,
    headers: &mut HeaderMap,
) -> Result<(), Error> {
    let asked = match extra.get(BETA_KEY) {
        None => Vec::new(),
        Some(value @ (Value::String(_) | Value::Array(_))) => extra_flags(value),
        Some(_) => {
            return Err(Error::InvalidRequest(format!(
                "{PROVIDER}: `{BETA_KEY}` must be a list of flags"
            )));
        }
    };
    let held: Vec<&str> = headers
        .get_all(BETA_HEADER)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .collect();
    let asked = asked.iter().map(String::as_str).chain(needed);
    let all = flags(held.into_iter().chain(asked));
    if all.is_empty() {
        return Ok(());
    }
    let value = HeaderValue::try_from(all.join(",")).map_err(|_| {
        Error::InvalidRequest(format!(
            "{PROVIDER}: a beta flag is not a valid header value"
        ))
    })?;
    headers.insert(BETA_HEADER, value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn flags_are_split_trimmed_and_kept_once_in_order() {
        assert_eq!(flags(["b, a", " ,a,c ", ""]), ["b", "a", "c"]);
    }

    #[cfg(feature = "server")]
    #[test]
    fn every_header_line_is_read_after_the_bodys_flags() {
        let mut headers = HeaderMap::new();
        headers.append(BETA_HEADER, HeaderValue::from_static("x,y"));
        headers.append(BETA_HEADER, HeaderValue::from_static("z, x"));
        let mut extra = Map::new();
        extra.insert(BETA_KEY.into(), json!("w"));
        decode_headers(&headers, &mut extra);
        assert_eq!(extra[BETA_KEY], json!(["w", "x", "y", "z"]));
        let mut none = Map::new();
        decode_headers(&HeaderMap::new(), &mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn the_header_written_merges_the_configurations_flags_first() {
        let mut headers = HeaderMap::new();
        headers.insert(BETA_HEADER, HeaderValue::from_static("own-1"));
        let mut extra = Map::new();
        extra.insert(BETA_KEY.into(), json!(["client-1", "own-1"]));
        write_header(&extra, None, &mut headers).unwrap();
        assert_eq!(headers[BETA_HEADER], "own-1,client-1");
        write_header(&extra, Some("tool-1"), &mut headers).unwrap();
        assert_eq!(headers[BETA_HEADER], "own-1,client-1,tool-1");
        extra.insert(BETA_KEY.into(), json!(["bad\nflag"]));
        assert!(write_header(&extra, None, &mut headers).is_err());
        extra.insert(BETA_KEY.into(), json!(7));
        assert!(write_header(&extra, None, &mut headers).is_err());
    }
}

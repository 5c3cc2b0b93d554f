//! Who may use a gateway: the clients that present its token — or, on a
//! gateway without one (a laptop's, on loopback), only what a web page cannot
//! forge: a loopback `Host` (no DNS rebinding), no foreign browser `Origin`, a
//! JSON body (no form post, which a page sends without asking).

use axum::http::{HeaderMap, header};

use super::BearerToken;
use super::auth::Presented;
use crate::Error;
use crate::limit::Caller;
use crate::message::mime_essence;

/// The access rules of a gateway.
#[derive(Clone, Debug, Default)]
pub(crate) struct Guard {
    /// The keys clients may present, each with its name (none: a gateway
    /// without a token).
    pub(crate) keys: Vec<(Caller, BearerToken)>,
    /// Host names taken besides the loopback ones, lower-case, without port.
    pub(crate) allowed_hosts: Vec<String>,
    /// Browser origins taken (`scheme://host[:port]`), lower-case.
    pub(crate) allowed_origins: Vec<String>,
}

/// What a route does, for the rules that depend on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// It runs a model on a JSON body.
    Chat,
    /// It shows what the gateway serves or counts (`/v1/models`, `/metrics`).
    Read,
}

impl Guard {
    /// `Ok` if a request with these headers may use `route`, with the
    /// caller of the key it presented (none on a gateway without keys); else
    /// why not, as a refusal with its status (401, 403 or 415).
    pub(crate) fn check(&self, headers: &HeaderMap, route: Route) -> Result<Option<Caller>, Error> {
        let value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        if !self.keys.is_empty() {
            // Google's clients send their key as `x-goog-api-key` (or `?key=`,
            // which the Gemini routes pass on as that header).
            let key = value("x-api-key").or_else(|| value("x-goog-api-key"));
            let presented = Presented::new(value("authorization"), key);
            // Every key is compared, so that the time says nothing of which
            // one matched.
            let matched = self.keys.iter().fold(None, |matched, (caller, token)| {
                let accepted = token.accepts_presented(&presented);
                matched.or(accepted.then_some(caller))
            });
            return match matched {
                Some(caller) => Ok(Some(caller.clone())),
                None => Err(refused(401, "a valid bearer token is required")),
            };
        }
        if let Some(host) = headers.get(header::HOST) {
            let host = host.to_str().ok().map(host_name);
            if !host.is_some_and(|host| is_loopback(host) || self.allows_host(host)) {
                return Err(refused(
                    403,
                    "this gateway has no token, so it answers only requests addressed to a \
                     loopback name (localhost, 127.0.0.1, [::1]) or to one of its allowed_hosts",
                ));
            }
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let allowed = origin.to_str().is_ok_and(|origin| {
                let origin = origin.trim().to_ascii_lowercase();
                self.allowed_origins.contains(&origin)
            });
            if !allowed {
                return Err(refused(
                    403,
                    "this gateway has no token, so it answers no web page whose origin is not \
                     one of its allowed_origins",
                ));
            }
        }
        if route == Route::Chat && !value("content-type").is_some_and(is_json) {
            return Err(refused(
                415,
                "the request body must be sent as Content-Type: application/json",
            ));
        }
        Ok(None)
    }

    fn allows_host(&self, host: &str) -> bool {
        self.allowed_hosts
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(host))
    }
}

fn refused(status: u16, message: &str) -> Error {
    Error::Refused {
        status,
        message: message.to_owned(),
    }
}

/// The host of a `Host` value, without its port (`[::1]:8080` → `::1`).
fn host_name(value: &str) -> &str {
    let value = value.trim();
    if let Some(rest) = value.strip_prefix('[') {
        return rest.split_once(']').map_or(rest, |(host, _)| host);
    }
    value.rsplit_once(':').map_or(value, |(host, _)| host)
}

/// Whether `host` can only mean this machine: `localhost` and its subdomains
/// (which browsers resolve to loopback themselves), or a loopback address.
fn is_loopback(host: &str) -> bool {
    let host = host.trim_end_matches('.');
    if host.eq_ignore_ascii_case("localhost")
        || host.len() > ".localhost".len()
            && host[host.len() - ".localhost".len()..].eq_ignore_ascii_case(".localhost")
    {
        return true;
    }
    host.parse::<std::net::IpAddr>()
        .is_ok_and(|address| address.is_loopback())
}

/// Whether a `Content-Type` is JSON: `application/json` or `application/*+json`,
/// with any parameters.
fn is_json(content_type: &str) -> bool {
    let essence = mime_essence(content_type);
    essence == "application/json"
        || essence.starts_with("application/") && essence.ends_with("+json")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, value)| {
                (
                    header::HeaderName::from_static(name),
                    value.parse().unwrap(),
                )
            })
            .collect()
    }

    fn status(guard: &Guard, pairs: &[(&'static str, &str)], route: Route) -> u16 {
        match guard.check(&headers(pairs), route) {
            Ok(_) => 200,
            Err(error) => error.http_status(),
        }
    }

    const JSON: (&str, &str) = ("content-type", "application/json");

    #[test]
    fn without_a_token_only_loopback_hosts_are_answered() {
        let guard = Guard::default();
        for host in [
            "localhost",
            "LOCALHOST:8080",
            "localhost.",
            "api.localhost:1",
            "127.0.0.1:8080",
            "127.8.9.1",
            "[::1]:8080",
            "[::1]",
        ] {
            assert_eq!(
                status(&guard, &[("host", host), JSON], Route::Chat),
                200,
                "{host}"
            );
        }
        for host in [
            "evil.example:8080",
            "localhost.evil.example",
            "evillocalhost",
            "10.0.0.1",
            "[::2]:8080",
            "0.0.0.0",
            "",
        ] {
            assert_eq!(
                status(&guard, &[("host", host), JSON], Route::Chat),
                403,
                "{host}"
            );
        }
        let lan = Guard {
            allowed_hosts: vec!["box.lan".into()],
            ..Guard::default()
        };
        assert_eq!(
            status(&lan, &[("host", "BOX.lan:8080"), JSON], Route::Chat),
            200
        );
    }

    #[test]
    fn without_a_token_a_browser_origin_needs_to_be_allowed() {
        let guard = Guard {
            allowed_origins: vec!["http://localhost:3000".into()],
            ..Guard::default()
        };
        let host = ("host", "127.0.0.1:8080");
        for origin in ["https://evil.example", "null", "http://localhost:3001"] {
            let pairs = [host, ("origin", origin), JSON];
            assert_eq!(status(&guard, &pairs, Route::Chat), 403, "{origin}");
            assert_eq!(status(&guard, &pairs, Route::Read), 403, "{origin}");
        }
        let pairs = [host, ("origin", "http://LOCALHOST:3000"), JSON];
        assert_eq!(status(&guard, &pairs, Route::Chat), 200);
    }

    #[test]
    fn without_a_token_a_chat_body_must_be_json() {
        let guard = Guard::default();
        let host = ("host", "localhost");
        for kind in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "application/vnd.api+json",
        ] {
            let pairs = [host, ("content-type", kind)];
            assert_eq!(status(&guard, &pairs, Route::Chat), 200, "{kind}");
        }
        for kind in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "text/plain; a=application/json",
        ] {
            let pairs = [host, ("content-type", kind)];
            assert_eq!(status(&guard, &pairs, Route::Chat), 415, "{kind}");
        }
        assert_eq!(status(&guard, &[host], Route::Chat), 415, "none");
        assert_eq!(status(&guard, &[host], Route::Read), 200, "no body to read");
    }

    #[test]
    fn with_a_token_the_token_alone_decides() {
        let guard = Guard {
            keys: vec![(Caller::new("default"), BearerToken::new("s3cret"))],
            ..Guard::default()
        };
        let foreign = [
            ("host", "gateway.example"),
            ("origin", "https://app.example"),
        ];
        assert_eq!(status(&guard, &foreign, Route::Read), 401);
        let presented = [foreign[0], foreign[1], ("x-api-key", "s3cret")];
        assert_eq!(status(&guard, &presented, Route::Chat), 200);
        let wrong = [("authorization", "Bearer nope"), JSON];
        assert_eq!(status(&guard, &wrong, Route::Chat), 401);
    }

    #[test]
    fn each_key_names_its_caller() {
        let guard = Guard {
            keys: vec![
                (Caller::new("alice"), BearerToken::new("a-key")),
                (Caller::new("bob"), BearerToken::new("b-key")),
            ],
            ..Guard::default()
        };
        let caller = |pairs: &[(&'static str, &str)]| guard.check(&headers(pairs), Route::Chat);
        let bob = caller(&[("authorization", "Bearer b-key"), JSON]).unwrap();
        assert_eq!(bob, Some(Caller::new("bob")));
        let alice = caller(&[("x-goog-api-key", "a-key"), JSON]).unwrap();
        assert_eq!(alice, Some(Caller::new("alice")));
        assert!(caller(&[("authorization", "Bearer c-key"), JSON]).is_err());
    }
}

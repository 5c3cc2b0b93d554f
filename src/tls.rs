//! The TLS of lmstack's HTTP clients — the providers' transport and MCP's
//! streamable HTTP client, one `reqwest` — as the features chose it:
//! `rustls-aws-lc` (rustls on aws-lc-rs, reqwest's own default),
//! `rustls-ring` (rustls on ring) or `native-tls` (the platform's TLS). With
//! none of them an https URL is refused, saying so.

/// Whether a TLS backend was compiled in.
pub(crate) const AVAILABLE: bool = cfg!(any(
    feature = "rustls-aws-lc",
    feature = "rustls-ring",
    feature = "native-tls"
));

/// Why an https URL cannot be reached by this build.
pub(crate) const MISSING: &str = "https needs a TLS backend, and lmstack was built without one: \
enable one of its features rustls-aws-lc, rustls-ring or native-tls";

/// Whether a URL of `scheme` (`https`, `HTTPS`, `http`…) is out of this
/// build's reach: https, and no TLS backend was compiled in.
pub(crate) fn unreachable(scheme: &str) -> bool {
    !AVAILABLE && scheme.eq_ignore_ascii_case("https")
}

/// A client builder with the TLS backend the features chose. With
/// `rustls-ring` alone (no aws-lc-rs, no native TLS), ring becomes rustls'
/// process-wide crypto provider unless the application installed one: reqwest
/// reads the process's provider when it builds a client, and has none of its
/// own without aws-lc-rs.
pub(crate) fn client_builder() -> reqwest::ClientBuilder {
    #[cfg(all(
        feature = "rustls-ring",
        not(feature = "rustls-aws-lc"),
        not(feature = "native-tls")
    ))]
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may install one first: theirs is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    reqwest::Client::builder()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_needs_a_backend() {
        assert!(!unreachable("http"));
        assert_eq!(unreachable("https"), !AVAILABLE);
        assert_eq!(unreachable("HTTPS"), !AVAILABLE);
    }

    #[test]
    fn a_client_builds_with_the_chosen_backend() {
        client_builder().build().expect("a client");
    }
}

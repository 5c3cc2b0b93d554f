//! An https URL in a build without a TLS backend (`http` but none of
//! `rustls-aws-lc`, `rustls-ring`, `native-tls`): refused before anything is
//! sent, by an error that names the features. With a backend the same request
//! goes out (and fails to connect).

use bytes::Bytes;
use lmstack::provider::transport::{HttpConfig, HttpTransport};
use tower::ServiceExt;

const TLS: bool = cfg!(any(
    feature = "rustls-aws-lc",
    feature = "rustls-ring",
    feature = "native-tls"
));

#[tokio::test]
async fn https_without_a_tls_backend_is_refused_naming_the_features() {
    let transport = HttpTransport::new("openai", HttpConfig::default()).unwrap();
    // The discard port of loopback: nothing answers TLS there.
    let request = http::Request::post("https://127.0.0.1:9/v1/chat/completions")
        .body(Bytes::new())
        .unwrap();
    let error = transport.oneshot(request).await.expect_err("no answer");
    let text = error.to_string();
    assert_eq!(
        text.contains("rustls-aws-lc, rustls-ring or native-tls"),
        !TLS,
        "{text}"
    );
}

//! The command line under hostile input: credentials in a base URL.

use std::process::Output;

use crate::common::cli::lmstack;

/// Everything a run printed.
fn printed(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn chat_shows_no_credentials_of_the_base_url() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let closed = format!("http://user:PASS@{addr}/v1?key=SECRET#SECRET");
    for (base_url, failure) in [
        (closed.as_str(), "could not connect"),
        ("http://user:PASS@bad host/v1?key=SECRET", "invalid request"),
    ] {
        let output = lmstack(
            &[
                "chat",
                "--provider",
                "openai",
                "--model",
                "m",
                "--base-url",
                base_url,
                "hi",
            ],
            b"",
        );
        let text = printed(&output);
        assert!(!output.status.success(), "{text}");
        assert!(text.contains(failure), "{text}");
        for secret in ["PASS", "SECRET"] {
            assert!(!text.contains(secret), "{base_url}: {text}");
        }
    }
}

//! The MCP client over streamable HTTP against a scripted loopback server: the
//! bearer token is sent, never shown, and a server that refuses the session is a
//! clear error naming the URL.

#![cfg(feature = "mcp")]

use std::time::{Duration, Instant};

use crate::common::server::{Answer, Server};
use lmstack::function::mcp::{McpConfig, McpError, McpServer};

#[tokio::test]
async fn the_bearer_token_is_sent_and_a_refusal_is_a_clear_error_without_it() {
    let refusal = Answer::error(401, br#"{"error":"invalid token"}"#, &[]);
    let server = Server::start(vec![refusal]).await;
    let url = format!("http://{}/mcp", server.addr);
    let config = McpConfig::http(&url).bearer("s3cret-token");
    let error = McpServer::connect(config).await.unwrap_err();

    let (headers, body) = &server.requests()[0];
    assert_eq!(headers["authorization"], "Bearer s3cret-token");
    assert_eq!(body["method"], "initialize");
    assert!(matches!(error, McpError::Start { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains(&url), "{message}");
    assert!(message.contains("401"), "{message}");
    assert!(!message.contains("s3cret"), "{message}");
    assert!(!format!("{error:?}").contains("s3cret"));
}

#[tokio::test]
async fn a_server_that_never_answers_the_handshake_is_given_up_in_time() {
    let mut silent = Answer::ok("application/json", b"{}", &[1]);
    silent.stall = Duration::from_secs(600);
    let server = Server::start(vec![silent]).await;
    let config = McpConfig::http(format!("http://{}/mcp", server.addr))
        .start_timeout(Duration::from_millis(300));
    let started = Instant::now();
    let error = McpServer::connect(config).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(matches!(error, McpError::StartTimeout { .. }), "{error:?}");
}

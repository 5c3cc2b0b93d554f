//! Citations across wires, through the gateway over HTTP on loopback: an
//! Anthropic upstream's web search citations reach an OpenAI-format client as
//! `url_citation` annotations over the cited text, and an Anthropic-format
//! client as the text blocks' `citations`, streaming and not.

#![cfg(all(feature = "server", feature = "openai", feature = "anthropic"))]

use lmstack::provider::anthropic::{Anthropic, AnthropicConfig};
use lmstack::server::Gateway;
use serde_json::{Value, json};

use crate::common::server::{Answer, Server};
use crate::common::{body_objects, fixture, post_to_gateway};

const CITED: &str = "Claude Shannon was born on April 30, 1916";

/// An upstream answering once with the recorded turn, streamed or whole, cut
/// into small pieces; the gateway serving it as `claude`, and its base URL.
async fn gateway(stream: bool) -> (Server, String) {
    let answer = match stream {
        true => Answer::ok(
            "text/event-stream",
            &fixture("anthropic/hand-made/citations-web-search.sse"),
            &[13],
        ),
        false => Answer::ok(
            "application/json",
            &fixture("anthropic/hand-made/citations-web-search.json"),
            &[13],
        ),
    };
    let upstream = Server::start(vec![answer]).await;
    let claude = Anthropic::new(AnthropicConfig::new(upstream.base_url()).model("claude")).unwrap();
    let gateway = Gateway::new().model("claude", "anthropic", claude, 4);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, gateway.router()).await });
    (upstream, format!("http://{address}"))
}

/// The upstream's citation, as the recorded turn holds it.
fn upstream_citation() -> Value {
    let turn: Value =
        serde_json::from_slice(&fixture("anthropic/hand-made/citations-web-search.json")).unwrap();
    turn["content"][4]["citations"][0].clone()
}

#[tokio::test]
async fn an_anthropic_upstreams_citations_reach_an_openai_client_as_url_annotations() {
    for stream in [false, true] {
        let (_upstream, base) = gateway(stream).await;
        let request = json!({"model": "claude", "stream": stream,
            "messages": [{"role": "user", "content": "When was Claude Shannon born?"}]});
        let (status, body) = post_to_gateway(&base, "/v1/chat/completions", &request).await;
        assert_eq!(status, 200, "{body}");
        let (mut content, mut annotations) = (String::new(), Vec::new());
        for object in body_objects(&body) {
            let message = object
                .pointer("/choices/0/message")
                .or(object.pointer("/choices/0/delta"));
            let Some(message) = message else { continue };
            content.push_str(message["content"].as_str().unwrap_or_default());
            if let Some(Value::Array(found)) = message.get("annotations") {
                annotations.extend(found.iter().cloned());
            }
        }
        assert_eq!(annotations.len(), 1, "stream {stream}: {body}");
        let cited = &annotations[0]["url_citation"];
        let citation = upstream_citation();
        assert_eq!(annotations[0]["type"], "url_citation");
        assert_eq!(
            (&cited["url"], &cited["title"]),
            (&citation["url"], &citation["title"])
        );
        let (start, end) = (
            cited["start_index"].as_u64().unwrap(),
            cited["end_index"].as_u64().unwrap(),
        );
        let words: String = content
            .chars()
            .skip(start as usize)
            .take((end - start) as usize)
            .collect();
        assert_eq!(words, CITED, "stream {stream}: {content}");
    }
}

#[tokio::test]
async fn an_anthropic_upstreams_citations_reach_an_anthropic_client_on_the_cited_text() {
    for stream in [false, true] {
        let (_upstream, base) = gateway(stream).await;
        let request = json!({"model": "claude", "stream": stream, "max_tokens": 256,
            "messages": [{"role": "user", "content": "When was Claude Shannon born?"}]});
        let (status, body) = post_to_gateway(&base, "/v1/messages", &request).await;
        assert_eq!(status, 200, "{body}");
        // Each text block with its citations, from the body or the stream.
        let mut blocks: Vec<(String, Vec<Value>)> = Vec::new();
        for object in body_objects(&body) {
            match object["type"].as_str() {
                Some("message") => {
                    for block in object["content"].as_array().unwrap() {
                        if block["type"] == "text" {
                            let citations = block["citations"].as_array().cloned();
                            let text = block["text"].as_str().unwrap().to_owned();
                            blocks.push((text, citations.unwrap_or_default()));
                        }
                    }
                }
                Some("content_block_start") if object["content_block"]["type"] == "text" => {
                    blocks.push((String::new(), Vec::new()));
                }
                Some("content_block_delta") => {
                    let delta = &object["delta"];
                    if let Some((text, citations)) = blocks.last_mut() {
                        match delta["type"].as_str() {
                            Some("text_delta") => text.push_str(delta["text"].as_str().unwrap()),
                            Some("citations_delta") => citations.push(delta["citation"].clone()),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        let cited: Vec<&(String, Vec<Value>)> = blocks
            .iter()
            .filter(|(_, citations)| !citations.is_empty())
            .collect();
        assert_eq!(cited.len(), 1, "stream {stream}: {body}");
        assert_eq!(cited[0].1, [upstream_citation()], "stream {stream}");
        // Whole, the block is the cited text; streamed, it holds the text
        // before it in the same run too (a stream cannot cut what it sent).
        match stream {
            false => assert_eq!(cited[0].0, CITED),
            true => assert!(cited[0].0.ends_with(CITED), "{}", cited[0].0),
        }
    }
}

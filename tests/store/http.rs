//! A stored conversation, its media by reference, continued with every wire
//! over real HTTP on loopback: the provider resolves the references through its
//! media store and sends the real bytes; without a store nothing is sent.

#![cfg(all(feature = "openai", feature = "anthropic", feature = "gemini"))]

use crate::common;

use std::sync::Arc;

use common::server::{Answer, Server};
use common::{cassette, fixture, json_cassette};
use lmstack::provider::anthropic::Messages;
use lmstack::provider::gemini::GenerateContent;
use lmstack::provider::openai_chat::ChatCompletions;
use lmstack::provider::{Provider, ProviderConfig, Wire};
use lmstack::store::{self, FileStore, MediaRef, MediaStore};
use lmstack::{ChatRequest, ContentBlock, Error, Media, MediaSource, Message, Role, ToolCall};
use lmstack::{ToolResult, ToolSpec};
use serde_json::json;
use tower::ServiceExt;

const PNG: &[u8] =
    b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";

/// A recorded non-streaming answer of each wire.
fn answer<W: Wire>() -> Vec<u8> {
    match W::KIND.name() {
        "openai" => cassette("openai/fantasy/gpt-4o-multi_tool.yaml")[0]
            .response
            .clone()
            .into_bytes(),
        "anthropic" => json_cassette(
            "anthropic/anthropic-sdk-python/10e53c1d-51be-4c64-b5bf-99adb3fa4719.json",
        )[0]
        .response
        .clone()
        .into_bytes(),
        _ => fixture("google/vercel-ai/google-tool-call.json"),
    }
}

/// A conversation with an image in the user's turn and in a tool result, as it
/// was before it was stored.
fn conversation() -> Vec<Message> {
    let image = ContentBlock::image_bytes("image/png", PNG);
    vec![
        Message::multimodal(
            Role::User,
            vec![
                ContentBlock::text("What is in this picture?"),
                image.clone(),
            ],
        ),
        Message::tool_calls(vec![ToolCall::new("call_1", "zoom", json!({"x": 0}))]),
        Message::tool_results(vec![ToolResult::new(
            "call_1",
            "zoom",
            vec![ContentBlock::text("zoomed"), image],
        )]),
    ]
}

fn request(messages: Vec<Message>) -> ChatRequest {
    let mut request = ChatRequest::new(messages);
    request.options.tools = vec![ToolSpec::new(
        "zoom",
        "Zooms in",
        json!({"type": "object", "properties": {"x": {"type": "integer"}}}),
    )];
    request
}

/// The conversation stored in `store`, loaded back with its media by
/// reference (as the JSON lines of a saved conversation hold it).
fn stored(store: &dyn MediaStore) -> Vec<Message> {
    let mut messages = conversation();
    store::dehydrate(&mut messages, store).unwrap();
    let lines: Vec<String> = messages
        .iter()
        .map(|m| serde_json::to_string(m).unwrap())
        .collect();
    lines
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

async fn continued_over_loopback<W: Wire>() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn MediaStore> = Arc::new(FileStore::new(dir.path()));
    let messages = stored(&*store);
    let reference = MediaRef::of(PNG).to_string();
    assert!(
        serde_json::to_string(&messages)
            .unwrap()
            .contains(&reference)
    );

    let server = Server::start(vec![Answer::ok("application/json", &answer::<W>(), &[64])]).await;
    let config = ProviderConfig::<W>::new(server.base_url())
        .model("test-model")
        .media_store(store);
    let provider = Provider::new(config).unwrap();
    let reply = provider.oneshot(request(messages)).await;
    reply.unwrap().collect().await.unwrap();

    let sent = server.requests()[0].1.to_string();
    let data = match Media::from_bytes("image/png", PNG).source {
        MediaSource::Base64 { data, .. } => data,
        _ => unreachable!(),
    };
    // In the user's turn and in the tool result (natively or injected).
    assert!(
        sent.matches(&*data).count() >= 2,
        "{}: {sent}",
        W::KIND.name()
    );
    assert!(!sent.contains("sha256:"), "{}: {sent}", W::KIND.name());
}

#[tokio::test]
async fn openai_sends_the_bytes_of_a_stored_image() {
    continued_over_loopback::<ChatCompletions>().await;
}

#[tokio::test]
async fn anthropic_sends_the_bytes_of_a_stored_image() {
    continued_over_loopback::<Messages>().await;
}

#[tokio::test]
async fn gemini_sends_the_bytes_of_a_stored_image() {
    continued_over_loopback::<GenerateContent>().await;
}

/// Without a store, or with one that lacks the blob, the call fails before
/// anything is sent, naming the reference.
async fn refused_before_sending<W: Wire>() {
    let dir = tempfile::tempdir().unwrap();
    let messages = stored(&FileStore::new(dir.path()));
    let reference = MediaRef::of(PNG).to_string();
    let empty = tempfile::tempdir().unwrap();
    for store in [None, Some(Arc::new(FileStore::new(empty.path())))] {
        let server =
            Server::start(vec![Answer::ok("application/json", &answer::<W>(), &[64])]).await;
        let mut config = ProviderConfig::<W>::new(server.base_url()).model("test-model");
        if let Some(store) = store.clone() {
            config = config.media_store(store);
        }
        let provider = Provider::new(config).unwrap();
        let error = provider
            .oneshot(request(messages.clone()))
            .await
            .unwrap_err();
        assert!(
            matches!(error, Error::InvalidRequest(_)),
            "{}: {error:?}",
            W::KIND.name()
        );
        let message = error.to_string();
        assert!(message.contains(&reference), "{message}");
        assert!(
            message.starts_with(&format!("invalid request: {}:", W::KIND.name())),
            "{message}"
        );
        if store.is_none() {
            assert!(message.contains("media_store"), "{message}");
        } else {
            assert!(message.contains("is not in the store"), "{message}");
        }
        assert!(server.requests().is_empty(), "nothing is sent");
    }
}

#[tokio::test]
async fn openai_refuses_an_unresolved_reference_before_sending() {
    refused_before_sending::<ChatCompletions>().await;
}

#[tokio::test]
async fn anthropic_refuses_an_unresolved_reference_before_sending() {
    refused_before_sending::<Messages>().await;
}

#[tokio::test]
async fn gemini_refuses_an_unresolved_reference_before_sending() {
    refused_before_sending::<GenerateContent>().await;
}

/// A wire's lowering called directly on a reference is an error, not a panic
/// and not a reference on the wire.
#[test]
fn a_lowering_given_a_reference_is_an_error_naming_it() {
    let reference = MediaRef::of(PNG);
    let blocks = [
        ContentBlock::Image(Media::reference("image/png", reference)),
        ContentBlock::Document(Media::reference("application/pdf", reference)),
        ContentBlock::Audio(Media::reference("audio/wav", reference)),
    ];
    for block in blocks {
        let audio = matches!(block, ContentBlock::Audio(_));
        let mut request = request(vec![Message::multimodal(Role::User, vec![block])]);
        request.options.model = Some("test-model".into());
        let mut results = vec![
            ("openai", ChatCompletions::default().lower(&request)),
            ("gemini", GenerateContent::default().lower(&request)),
        ];
        if !audio {
            // The Messages API takes no audio at all: refused for that first.
            results.push(("anthropic", Messages::default().lower(&request)));
        }
        for (name, result) in results {
            let error = result.unwrap_err();
            assert!(
                matches!(error, Error::InvalidRequest(_)),
                "{name}: {error:?}"
            );
            let message = error.to_string();
            assert!(message.contains(&reference.to_string()), "{message}");
            assert!(message.contains(name), "{message}");
        }
    }
}

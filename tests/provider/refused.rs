//! What no wire takes is refused before a byte is sent: a request without
//! messages, a tool result that answers no earlier call, and — where the wire
//! needs one — a request without a model.

use crate::common::server::Server;
use lmstack::provider::anthropic::Messages;
use lmstack::provider::gemini::GenerateContent;
use lmstack::provider::openai_chat::ChatCompletions;
use lmstack::provider::{Provider, ProviderConfig, Wire};
use lmstack::{ChatRequest, Error, Message, ToolCall, ToolResult};
use serde_json::json;
use tower::ServiceExt;

/// The error `request` fails with through a provider of wire `W` (with the
/// model `model`, if any) over loopback, and whether any request reached the
/// server.
async fn refused<W: Wire>(model: Option<&str>, request: ChatRequest) -> (Error, bool) {
    let server = Server::start(vec![]).await;
    let mut config = ProviderConfig::<W>::new(server.base_url());
    if let Some(model) = model {
        config = config.model(model);
    }
    let error = Provider::new(config)
        .unwrap()
        .oneshot(request)
        .await
        .expect_err("refused");
    (error, !server.requests().is_empty())
}

fn unpaired() -> ChatRequest {
    ChatRequest::new(vec![
        Message::user("Add 2 and 3"),
        Message::tool_calls(vec![ToolCall::new(
            "call_1",
            "add",
            json!({"a": 2, "b": 3}),
        )]),
        Message::tool_results(vec![
            ToolResult::text("call_1", "add", "5"),
            ToolResult::text("call_9", "add", "7"),
        ]),
    ])
}

async fn each_rule<W: Wire>() {
    let name = W::KIND.name();
    let (error, sent) = refused::<W>(Some("m"), ChatRequest::new(vec![])).await;
    assert!(!sent, "{name}");
    assert_eq!(
        error.to_string(),
        format!("invalid request: {name}: the request holds no messages")
    );

    let (error, sent) = refused::<W>(Some("m"), unpaired()).await;
    assert!(!sent, "{name}");
    let Error::ToolPairing {
        stage,
        message,
        call_id,
        ..
    } = error
    else {
        panic!("{name}: {error}")
    };
    assert_eq!((stage, message, call_id.as_str()), (name, 2, "call_9"));
}

#[tokio::test]
async fn no_messages_and_an_unpaired_result_are_refused_by_every_wire_before_sending() {
    each_rule::<ChatCompletions>().await;
    each_rule::<Messages>().await;
    each_rule::<GenerateContent>().await;
}

#[tokio::test]
async fn a_wire_that_needs_a_model_refuses_a_request_without_one_before_sending() {
    let hello = || ChatRequest::new(vec![Message::user("Hi")]);
    for (error, sent) in [
        refused::<Messages>(None, hello()).await,
        refused::<GenerateContent>(None, hello()).await,
        refused::<Messages>(Some(""), hello()).await,
    ] {
        assert!(!sent);
        let text = error.to_string();
        assert!(
            text.contains(": the request names no model; name one in the request or with `ProviderConfig::model`"),
            "{text}"
        );
    }
    // Chat Completions servers that serve one model take none.
    let config = ProviderConfig::<ChatCompletions>::new("http://127.0.0.1:9/v1");
    let http = Provider::new(config)
        .unwrap()
        .http_request(hello())
        .unwrap();
    let body: serde_json::Value = serde_json::from_slice(http.body()).unwrap();
    assert_eq!(body.get("model"), None);
}

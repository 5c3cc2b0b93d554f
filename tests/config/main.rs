//! `lmstack::config`: a model's configuration — built in code, or read from
//! TOML as `lmstack serve` reads it — becomes a stack that calls a loopback
//! server of each wire as configured (the upstream's model, the key in the
//! wire's header, the wire's endpoint); the tables of docs/serve.md read; and
//! `AnyProvider` builds the exact request of each wire.

#![cfg(all(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic",
    feature = "gemini"
))]

#[path = "../common/mod.rs"]
mod common;

use std::collections::BTreeMap;

use common::server::{Answer, Server};
use lmstack::config::{ModelConfig, NaturalTools};
use lmstack::natural::Dialect;
use lmstack::provider::{ApiKey, Kind, REDACTED};
use lmstack::{ChatRequest, Message};
use serde_json::json;
use tower::ServiceExt;

/// A whole reply saying "Hi" in `kind`'s wire.
fn hi(kind: Kind) -> Answer {
    let body = match kind {
        Kind::OpenAiChat => json!({"id": "c1", "object": "chat.completion", "created": 1,
            "model": "up", "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Hi"}}]}),
        Kind::OpenAiResponses => {
            json!({"id": "resp_1", "object": "response", "status": "completed",
            "output": [{"type": "message", "id": "msg_1", "role": "assistant",
            "content": [{"type": "output_text", "text": "Hi", "annotations": []}]}]})
        }
        Kind::Anthropic => json!({"id": "msg_1", "type": "message", "role": "assistant",
            "model": "up", "content": [{"type": "text", "text": "Hi"}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}}),
        Kind::Gemini => json!({"candidates": [{"content": {"role": "model",
            "parts": [{"text": "Hi"}]}, "finishReason": "STOP"}]}),
    };
    Answer::ok(
        "application/json",
        body.to_string().as_bytes(),
        &[usize::MAX],
    )
}

/// The header each wire sends its key in, and the key as it is sent.
fn key_header(kind: Kind, key: &str) -> (&'static str, String) {
    match kind {
        Kind::OpenAiChat | Kind::OpenAiResponses => ("authorization", format!("Bearer {key}")),
        Kind::Anthropic => ("x-api-key", key.to_owned()),
        Kind::Gemini => ("x-goog-api-key", key.to_owned()),
    }
}

/// The model a wire's request asked for: in the body, or (Gemini) the path.
fn asked_model(kind: Kind, uri: &str, body: &serde_json::Value) -> String {
    match kind {
        Kind::Gemini => uri
            .strip_prefix("/v1/models/")
            .and_then(|rest| rest.strip_suffix(":generateContent"))
            .unwrap_or(uri)
            .to_owned(),
        _ => body["model"].as_str().unwrap_or_default().to_owned(),
    }
}

/// The text of the first message of a reply (a usage message may follow).
fn said(messages: Vec<Message>) -> String {
    let first = serde_json::to_value(&messages[0]).unwrap();
    first["text"].as_str().unwrap_or_default().to_owned()
}

/// A request naming the gateway's model, as a client of it would.
fn request() -> ChatRequest {
    let mut request = ChatRequest::new(vec![Message::user("Hello")]);
    request.options.model = Some("served-name".into());
    request
}

#[tokio::test]
async fn a_stack_built_in_code_asks_the_upstream_for_its_model_with_the_key_of_each_wire() {
    for kind in Kind::ALL {
        let server = Server::start(vec![hi(kind)]).await;
        let config = ModelConfig::new(kind)
            .base_url(server.base_url())
            .model("upstream-model")
            .api_key(ApiKey::new("sk-test"))
            .retry(false);
        let (stack, secrets) = config.stack("served-name").await.unwrap();
        let reply = stack.oneshot(request()).await.unwrap();
        assert_eq!(said(reply.collect().await.unwrap()), "Hi", "{kind}");
        let (headers, body) = server.requests().remove(0);
        let uri = server.uris().remove(0);
        assert_eq!(asked_model(kind, &uri, &body), "upstream-model", "{kind}");
        let (name, value) = key_header(kind, "sk-test");
        assert_eq!(headers[name], value.as_str(), "{kind}");
        assert_eq!(secrets.scrub("key sk-test"), format!("key {REDACTED}"));
    }
}

#[tokio::test]
async fn a_stack_read_from_toml_asks_for_its_tables_name_and_sends_no_key_without_one() {
    for kind in Kind::ALL {
        let server = Server::start(vec![hi(kind)]).await;
        let text = format!(
            "provider = \"{kind}\"\nbase_url = \"{}\"\n\
             api_key_env = \"LMSTACK_CONFIG_TEST_NEVER_SET\"\nretry = false\n",
            server.base_url()
        );
        let config: ModelConfig = toml::from_str(&text).unwrap();
        let (stack, _) = config.stack("served-name").await.unwrap();
        let reply = stack.oneshot(request()).await.unwrap();
        assert_eq!(said(reply.collect().await.unwrap()), "Hi", "{kind}");
        let (headers, body) = server.requests().remove(0);
        let uri = server.uris().remove(0);
        // No `model`: the upstream is asked for the table's name.
        assert_eq!(asked_model(kind, &uri, &body), "served-name", "{kind}");
        let (name, _) = key_header(kind, "");
        assert!(!headers.contains_key(name), "{kind}: {headers:?}");
    }
}

#[tokio::test]
async fn natural_tools_put_the_tools_in_the_prompt_and_send_none_natively() {
    let server = Server::start(vec![hi(Kind::OpenAiChat)]).await;
    let config = ModelConfig::new(Kind::OpenAiChat)
        .base_url(server.base_url())
        .natural_tools(NaturalTools::Dialect(Dialect::Hermes));
    let (stack, _) = config.stack("qwen").await.unwrap();
    let mut request = request();
    request.options.tools = vec![lmstack::ToolSpec::new(
        "add",
        "Adds two numbers.",
        json!({"type": "object", "properties": {"a": {"type": "number"}}}),
    )];
    stack
        .oneshot(request)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let (_, body) = server.requests().remove(0);
    assert!(body.get("tools").is_none(), "{body}");
    let system = body["messages"][0]["content"].to_string();
    assert!(
        system.contains("add") && system.contains("<tool_call>"),
        "{system}"
    );
}

/// A reply in OpenAI's wire whose text is `text`.
fn openai_says(text: &str) -> Answer {
    let body = json!({"id": "c1", "object": "chat.completion", "created": 1,
        "model": "up", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": text}}]});
    Answer::ok(
        "application/json",
        body.to_string().as_bytes(),
        &[usize::MAX],
    )
}

#[tokio::test]
async fn native_response_format_false_asks_for_the_format_in_the_prompt_and_checks_the_answer() {
    let format = lmstack::ResponseFormat::json_schema(json!({"type": "object",
        "properties": {"city": {"type": "string"}}, "required": ["city"]}));
    let asked = || {
        let mut request = request();
        request.options.response_format = Some(format.clone());
        request
    };
    let server = Server::start(vec![
        openai_says("{\"city\": \"Paris\"}"),
        openai_says("Sure:\n```json\n{\"city\": \"Paris\"}\n```"),
        openai_says("{\"town\": \"Paris\"}"),
    ])
    .await;
    let natural = |sent_on| {
        ModelConfig::new(Kind::OpenAiChat)
            .base_url(server.base_url())
            .retry(false)
            .natural_tools(NaturalTools::Dialect(Dialect::Hermes))
            .native_response_format(sent_on)
    };
    // By default the format is sent on, as the upstream's own.
    let (stack, _) = natural(true).stack("qwen").await.unwrap();
    let reply = stack
        .oneshot(asked())
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(said(reply), r#"{"city": "Paris"}"#);
    let (_, body) = server.requests().remove(0);
    assert_eq!(body["response_format"]["type"], "json_schema", "{body}");

    // Off: only the prompt asks for it, and the stack reads and checks the answer.
    let (stack, _) = natural(false).stack("qwen").await.unwrap();
    let reply = stack
        .clone()
        .oneshot(asked())
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(said(reply), r#"{"city":"Paris"}"#);
    let (_, body) = server.requests().remove(1);
    assert!(body.get("response_format").is_none(), "{body}");
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("\"required\": [\n    \"city\"\n  ]"),
        "{system}"
    );
    let broken = stack.oneshot(asked()).await.unwrap().collect().await;
    assert!(
        matches!(broken, Err(lmstack::Error::InvalidOutput { .. })),
        "{broken:?}"
    );

    // Without natural tools there is no prompt to ask in: refused.
    let plain = ModelConfig::new(Kind::OpenAiChat).native_response_format(false);
    let error = plain.stack("gpt").await.err().unwrap().to_string();
    assert!(error.contains("needs natural_tools"), "{error}");
}

#[test]
fn a_table_with_an_unknown_field_or_a_key_in_it_is_refused() {
    for (field, value) in [("temperature", "0.5"), ("api_key", "\"sk-1\"")] {
        let text = format!("provider = \"openai\"\n{field} = {value}\n");
        let error = toml::from_str::<ModelConfig>(&text).unwrap_err();
        assert!(error.to_string().contains(field), "{error}");
    }
    let error = toml::from_str::<ModelConfig>("provider = \"bedrock\"").unwrap_err();
    assert!(error.to_string().contains("unknown provider"), "{error}");
}

// The example prices its models, a field of feature `server`.
#[cfg(feature = "server")]
#[test]
fn the_model_tables_of_the_documented_configuration_read() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/serve.md"));
    let docs = docs.unwrap();
    let start = docs.find("```toml\n# lmstack.toml").expect("the example") + "```toml\n".len();
    let text = &docs[start..][..docs[start..].find("```").unwrap()];
    #[derive(serde::Deserialize)]
    struct File {
        models: BTreeMap<String, ModelConfig>,
    }
    let file: File = toml::from_str(text).unwrap();
    let names: Vec<&str> = file.models.keys().map(String::as_str).collect();
    assert_eq!(names, ["claude", "gpt", "local-qwen"]);
    let gpt = &file.models["gpt"];
    assert_eq!(gpt.provider, Some(Kind::OpenAiChat));
    assert_eq!(gpt.model.as_deref(), Some("gpt-4o"));
    assert_eq!(gpt.aliases, ["gpt-4o-2024-08-06"]);
    let qwen = &file.models["local-qwen"];
    assert_eq!(
        qwen.natural_tools,
        Some(NaturalTools::Dialect(Dialect::Hermes))
    );
    assert!(qwen.native_response_format);
    assert_eq!(qwen.mcp.len(), 1);
    assert_eq!(file.models["claude"].max_concurrent, 16);
}

#[test]
fn any_provider_builds_each_wires_exact_request() {
    for kind in Kind::ALL {
        let config = ModelConfig::new(kind)
            .base_url("http://127.0.0.1:9/v1")
            .model("m-1")
            .api_key(ApiKey::new("sk-exact"));
        let (provider, _) = config.provider().unwrap();
        assert_eq!(provider.kind(), kind);
        let sent = provider
            .http_request(ChatRequest::new(vec![Message::user("Hi")]))
            .unwrap();
        let (name, value) = key_header(kind, "sk-exact");
        assert_eq!(sent.headers()[name], value.as_str(), "{kind}");
        let path = match kind {
            Kind::OpenAiChat => "/v1/chat/completions",
            Kind::OpenAiResponses => "/v1/responses",
            Kind::Anthropic => "/v1/messages",
            Kind::Gemini => "/v1/models/m-1:generateContent",
        };
        assert_eq!(sent.uri().path(), path);
        let body: serde_json::Value = serde_json::from_slice(sent.body()).unwrap();
        assert_eq!(
            asked_model(kind, sent.uri().path(), &body),
            "m-1",
            "{kind}: {body}"
        );
    }
}

#[tokio::test]
async fn deployments_take_the_model_tables_fields_as_defaults_and_fall_back_in_turn() {
    let busy = Answer::error(
        529,
        br#"{"type": "error", "error": {"type": "overloaded_error"}}"#,
        &[],
    );
    let anthropic = Server::start(vec![hi(Kind::Anthropic), busy]).await;
    let failing = Answer::error(500, br#"{"error": {"message": "down"}}"#, &[]);
    let openai = Server::start(vec![hi(Kind::OpenAiChat), hi(Kind::OpenAiChat), failing]).await;
    // Nothing listens there: the first deployment refuses connections.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let refused = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    let text = format!(
        "provider = \"anthropic\"\nmodel = \"claude-up\"\nfallbacks = [\"gpt\"]\n\
         failures_to_open = 1\ncool_down_secs = 60\n\
         [[deployments]]\nbase_url = \"{refused}\"\nweight = 3\n\
         [[deployments]]\nbase_url = \"{}\"\n\
         [[deployments]]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-up\"\n",
        anthropic.base_url(),
        openai.base_url()
    );
    let config: ModelConfig = toml::from_str(&text).unwrap();
    assert_eq!(config.upstream_name(), "anthropic+openai");
    assert_eq!(config.fallbacks, ["gpt"]);
    let (stack, _) = config.stack("claude").await.unwrap();
    // The heaviest deployment first: refused, then the next by load.
    let reply = stack.clone().oneshot(request()).await.unwrap();
    assert_eq!(said(reply.collect().await.unwrap()), "Hi");
    let (_, body) = anthropic.requests().remove(0);
    assert_eq!(body["model"], "claude-up", "the model table's model");
    // The refused one cools down; the Anthropic one fails now: the OpenAI one
    // answers, asked for its own model.
    let reply = stack.clone().oneshot(request()).await.unwrap();
    assert_eq!(said(reply.collect().await.unwrap()), "Hi");
    let (_, body) = openai.requests().remove(0);
    assert_eq!(body["model"], "gpt-up", "the deployment's model");
    // The other two failed once and cool down for a minute: the OpenAI one
    // takes the next call, and the next; then it fails too, and no
    // deployment takes a call.
    let reply = stack.clone().oneshot(request()).await.unwrap();
    assert_eq!(said(reply.collect().await.unwrap()), "Hi");
    let error = stack.clone().oneshot(request()).await.err().unwrap();
    assert_eq!(error.http_status(), 502, "{error}");
    let error = stack.oneshot(request()).await.err().unwrap();
    assert_eq!(error.http_status(), 503, "{error}");
    assert_eq!(
        (anthropic.requests().len(), openai.requests().len()),
        (2, 3)
    );
}

#[test]
fn a_model_without_a_provider_or_with_a_weight_of_zero_is_refused() {
    let error = toml::from_str::<ModelConfig>("[[deployments]]\nweight = 0\nprovider = \"openai\"")
        .unwrap_err();
    assert!(error.to_string().contains("nonzero"), "{error}");
    let error = toml::from_str::<ModelConfig>("[[deployments]]\ntemperature = 1").unwrap_err();
    assert!(error.to_string().contains("temperature"), "{error}");
    for text in [
        "model = \"m\"",
        "[[deployments]]\nprovider = \"openai\"\n[[deployments]]",
    ] {
        let config: ModelConfig = toml::from_str(text).unwrap();
        let error = futures::executor::block_on(config.stack("m"))
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("no provider"), "{text}: {error}");
    }
}

#[test]
fn the_documented_deployments_read() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/serve.md"));
    let docs = docs.unwrap();
    let start = docs.find("```toml\n# deployments").expect("the example") + "```toml\n".len();
    let text = &docs[start..][..docs[start..].find("```").unwrap()];
    #[derive(serde::Deserialize)]
    struct File {
        models: BTreeMap<String, ModelConfig>,
    }
    let file: File = toml::from_str(text).unwrap();
    let claude = &file.models["claude"];
    assert_eq!(claude.fallbacks, ["gpt"]);
    assert_eq!(claude.deployments.len(), 3);
    assert_eq!(claude.deployments[0].weight.map(|w| w.get()), Some(2));
    assert_eq!(claude.upstream_name(), "anthropic+openai");
    assert_eq!(file.models["gpt"].upstream_name(), "openai");
}

//! The gateway over real HTTP on loopback: lmstack's own OpenAI and Anthropic
//! providers as its clients (streaming and not), its error answers in each
//! format, its limits, the sealed call ids, and cancellation when a client goes
//! away.

#![cfg(all(feature = "server", feature = "function"))]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use lmstack::provider::anthropic::{Anthropic, AnthropicConfig};
use lmstack::provider::openai_chat::{OpenAi, OpenAiConfig};
use lmstack::server::{BearerToken, Gateway};
use lmstack::testing::ScriptedModel;
use lmstack::{ChatRequest, Error, Event, Message, Metadata, Reply, ToolCall, ToolResult};
use serde_json::{Value, json};
use tower::ServiceExt;

/// Serves `gateway` on a loopback port; its base URL.
async fn serve(gateway: Gateway) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, gateway.router()).await });
    format!("http://{address}")
}

fn openai(base: &str, model: &str) -> OpenAi {
    OpenAi::new(OpenAiConfig::new(format!("{base}/v1")).model(model)).unwrap()
}

fn anthropic(base: &str, model: &str) -> Anthropic {
    let config = AnthropicConfig::new(format!("{base}/v1")).model(model);
    Anthropic::new(config).unwrap()
}

async fn post(base: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test]
async fn both_formats_stream_and_not_reach_the_model_and_read_back_as_its_messages() {
    let model = ScriptedModel::new()
        .reply("Hello over OpenAI.")
        .reply("Hello over OpenAI, streamed.")
        .reply("Hello over Anthropic.")
        .reply("Hello over Anthropic, streamed.");
    let base = serve(Gateway::new().model("demo", "scripted", model.clone(), 4)).await;
    for (i, stream) in [false, true].into_iter().enumerate() {
        let request = ChatRequest::new(vec![Message::user("Hi")]).streaming(stream);
        let messages = openai(&base, "demo")
            .oneshot(request)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let want = ["Hello over OpenAI.", "Hello over OpenAI, streamed."][i];
        assert_eq!(
            messages[0],
            Message::assistant(want).with_metadata(messages[0].metadata().clone())
        );
    }
    for (i, stream) in [false, true].into_iter().enumerate() {
        let request = ChatRequest::new(vec![Message::user("Hi")]).streaming(stream);
        let messages = anthropic(&base, "demo")
            .oneshot(request)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let text = messages.iter().find_map(Message::as_text).unwrap();
        assert_eq!(
            text,
            ["Hello over Anthropic.", "Hello over Anthropic, streamed."][i]
        );
    }
    let asked = model.requests();
    assert_eq!(asked.len(), 4);
    for request in asked {
        assert_eq!(request.messages, [Message::user("Hi")]);
        assert_eq!(request.options.model.as_deref(), Some("demo"));
    }
}

#[tokio::test]
async fn a_calls_metadata_survives_a_client_inside_its_sealed_id() {
    let mut call = ToolCall::new("call_7", "get_weather", json!({"city": "Paris"}));
    let mut signed = Metadata::default();
    signed.insert("thought_signature", json!("CsYBAY0g=="));
    call.metadata = signed.clone();
    let model = ScriptedModel::new()
        .reply_messages(vec![Message::tool_calls(vec![call.clone()])])
        .reply("18°C in Paris.");
    let base = serve(Gateway::new().model("demo", "gemini", model.clone(), 4)).await;
    let client = openai(&base, "demo");
    let first = client
        .clone()
        .oneshot(ChatRequest::new(vec![Message::user("Weather?")]))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let seen = first[0].calls()[0].clone();
    assert!(seen.id.starts_with("lmc_"), "{seen:?}");
    // The client answers the call by the id it saw (and keeps no metadata).
    let answered = ToolCall::new(seen.id.clone(), seen.name.clone(), seen.arguments.clone());
    let history = vec![
        Message::user("Weather?"),
        Message::tool_calls(vec![answered]),
        Message::tool_results(vec![ToolResult::text(seen.id, "get_weather", "18°C")]),
    ];
    client.oneshot(ChatRequest::new(history)).await.unwrap();
    let second = &model.requests()[1];
    let back = &second.messages[1].calls()[0];
    assert_eq!((back.id.as_str(), &back.metadata), ("call_7", &signed));
    assert_eq!(second.messages[2].results()[0].call_id, "call_7");
}

#[tokio::test]
async fn client_mistakes_are_4xx_in_the_clients_format() {
    let base = serve(
        Gateway::new()
            .model("demo", "scripted", ScriptedModel::new(), 4)
            .body_limit(1024),
    )
    .await;
    let (status, body) = post(&base, "/v1/chat/completions", &[], "{not json").await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    let (status, body) = post(
        &base,
        "/v1/chat/completions",
        &[],
        r#"{"model":"demo","messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}"#,
    )
    .await;
    assert_eq!(status, 400);
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("messages[0].content[0].image_url"),
        "{message}"
    );
    let (status, body) = post(
        &base,
        "/v1/messages",
        &[],
        r#"{"model":"nope","max_tokens":5,"messages":[{"role":"user","content":"Hi"}]}"#,
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "not_found_error", "{body}");
    let big = format!(
        r#"{{"model":"demo","messages":[{{"role":"user","content":"{}"}}]}}"#,
        "x".repeat(2048)
    );
    let (status, body) = post(&base, "/v1/chat/completions", &[], &big).await;
    assert_eq!(status, 413);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1024 bytes"),
        "{body}"
    );
}

#[tokio::test]
async fn a_token_is_required_when_one_is_set() {
    let model = ScriptedModel::new().reply("Yes.");
    let gateway = Gateway::new()
        .model("demo", "scripted", model, 4)
        .token(BearerToken::new("s3cret"));
    let base = serve(gateway).await;
    let body = r#"{"model":"demo","messages":[{"role":"user","content":"Hi"}]}"#;
    let (status, refused) = post(
        &base,
        "/v1/chat/completions",
        &[("authorization", "Bearer wrong")],
        body,
    )
    .await;
    assert_eq!(status, 401, "{refused}");
    let (status, _) = post(
        &base,
        "/v1/chat/completions",
        &[("authorization", "Bearer s3cret")],
        body,
    )
    .await;
    assert_eq!(status, 200);
}

/// A stack whose replies never end, and which notes when a reply is dropped.
fn endless(
    dropped: Arc<AtomicBool>,
) -> impl lmstack::service::ChatService<Future: Send> + Clone + Send + Sync + 'static {
    tower::service_fn(move |_request: ChatRequest| {
        let dropped = dropped.clone();
        async move {
            struct Noted(Arc<AtomicBool>);
            impl Drop for Noted {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::SeqCst);
                }
            }
            let noted = Noted(dropped);
            let events = futures::stream::iter(0..).then(move |i| {
                let _keep = &noted;
                async move {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Ok::<_, Error>(Event::text(format!("{i} ")))
                }
            });
            Ok::<_, Error>(Reply::from_stream(events))
        }
    })
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_its_reply_and_frees_its_place() {
    let dropped = Arc::new(AtomicBool::new(false));
    let gateway = Gateway::new().model("slow", "scripted", endless(dropped.clone()), 1);
    let metrics = gateway.metrics().clone();
    let base = serve(gateway).await;
    let body = r#"{"model":"slow","stream":true,"messages":[{"role":"user","content":"Count"}]}"#;
    let response = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut chunks = response.bytes_stream();
    let first = chunks.next().await.unwrap().unwrap();
    assert!(first.starts_with(b"data: "), "{first:?}");
    // The one place is taken: another request is refused at once.
    let (status, busy) = post(&base, "/v1/chat/completions", &[], body).await;
    assert_eq!(status, 429, "{busy}");
    drop(chunks);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !dropped.load(Ordering::SeqCst) {
        assert!(
            std::time::Instant::now() < deadline,
            "the reply was never dropped"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Its place is free again, and what happened is counted.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !metrics
        .render()
        .contains("lmstack_requests_in_flight{model=\"slow\"} 0")
    {
        assert!(std::time::Instant::now() < deadline, "{}", metrics.render());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let text = reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("lmstack_requests_total{model=\"slow\",format=\"openai\",status=\"429\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn the_models_and_the_health_check() {
    let gateway = Gateway::new()
        .model("b-model", "openai", ScriptedModel::new(), 1)
        .model("a-model", "anthropic", ScriptedModel::new(), 1);
    let base = serve(gateway).await;
    let models: Value = reqwest::get(format!("{base}/v1/models"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a-model", "b-model"]);
    let health = reqwest::get(format!("{base}/health")).await.unwrap();
    assert_eq!(health.status(), 200);
}

#[tokio::test]
async fn an_alias_and_the_default_model_answer_for_names_not_served() {
    let chat = |model: &str| {
        json!({"model": model, "messages": [{"role": "user", "content": "Hi"}]}).to_string()
    };
    // Two turns: the gateway's clone below shares the script.
    let local = ScriptedModel::new().reply("from local").reply("from local");
    // Without a default, a name not served is a 404; an alias is answered,
    // listed, and reported as the model it stands for.
    let gateway = Gateway::new()
        .model("local", "openai", local, 4)
        .model(
            "other",
            "openai",
            ScriptedModel::new().reply("from other"),
            4,
        )
        .alias("claude-haiku-4-5", "local")
        .alias("orphan", "not-served");
    let base = serve(gateway.clone()).await;
    let (status, body) = post(
        &base,
        "/v1/chat/completions",
        &[],
        &chat("claude-haiku-4-5"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "from local");
    assert_eq!(body["model"], "local");
    let (status, _) = post(&base, "/v1/chat/completions", &[], &chat("gpt-5")).await;
    assert_eq!(status, 404);
    let (status, _) = post(&base, "/v1/chat/completions", &[], &chat("orphan")).await;
    assert_eq!(status, 404, "an alias of a model not served");
    let models: Value = reqwest::get(format!("{base}/v1/models"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = (models["data"].as_array().unwrap().iter())
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["local", "other", "claude-haiku-4-5"]);
    let alias = reqwest::get(format!("{base}/v1/models/claude-haiku-4-5"))
        .await
        .unwrap();
    assert_eq!(alias.status(), 200);
    // With a default, any other name is answered by it; a model's own name
    // still reaches that model.
    let base = serve(gateway.default_model("local")).await;
    let (status, body) = post(&base, "/v1/chat/completions", &[], &chat("gpt-5")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "from local");
    let (_, body) = post(&base, "/v1/chat/completions", &[], &chat("other")).await;
    assert_eq!(body["choices"][0]["message"]["content"], "from other");
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Add {
    a: i64,
    b: i64,
}

#[tokio::test]
async fn a_turn_that_calls_the_gateways_tool_and_the_clients_keeps_both_results() {
    use lmstack::function::{FunctionCallLayer, Tool, ToolLoopLayer, ToolRegistry};
    use lmstack::{Role, ToolSpec};
    let add = Tool::typed("add", "Adds", |args: Add| async move {
        Ok::<_, std::convert::Infallible>((args.a + args.b).to_string())
    });
    let model = ScriptedModel::new()
        .reply_messages(vec![
            Message::assistant("Both at once."),
            Message::tool_calls(vec![
                ToolCall::new("call_add", "add", json!({"a": 2, "b": 3})),
                ToolCall::new("call_weather", "get_weather", json!({"city": "Paris"})),
            ]),
        ])
        .reply("5, and 18°C in Paris.");
    let stack = tower::ServiceBuilder::new()
        .layer(ToolLoopLayer::new())
        .layer(FunctionCallLayer::new(ToolRegistry::new([add]).unwrap()))
        .service(model.clone());
    let base = serve(Gateway::new().model("demo", "scripted", stack, 4)).await;
    let weather = ToolSpec::new(
        "get_weather",
        "The weather",
        json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    );
    let client = openai(&base, "demo");
    let first = client
        .clone()
        .oneshot(ChatRequest::new(vec![Message::user("Sum and weather?")]).tool(weather.clone()))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    // The client sees only its own call, which runs the gateway's round along.
    let calls: Vec<&ToolCall> = first.iter().flat_map(|m| m.calls()).collect();
    assert_eq!(calls.len(), 1, "{first:?}");
    assert_eq!(calls[0].name, "get_weather");
    let mut history = vec![Message::user("Sum and weather?")];
    history.extend(
        first
            .iter()
            .filter(|m| m.role() == Role::Assistant)
            .cloned(),
    );
    history.push(Message::tool_results(vec![ToolResult::text(
        calls[0].id.clone(),
        "get_weather",
        "18°C",
    )]));
    let answer = client
        .oneshot(ChatRequest::new(history).tool(weather))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(answer[0].as_text(), Some("5, and 18°C in Paris."));
    // The model's second turn sees its whole first turn: the gateway's call
    // with its result, then the client's call with its result.
    let second = &model.requests()[1].messages;
    let aggregate = second
        .iter()
        .position(|m| matches!(m, Message::ToolAggregate(_)))
        .expect("the gateway's round is back");
    assert_eq!(second[aggregate].calls()[0].id, "call_add");
    assert_eq!(second[aggregate].results()[0].text_content(), "5");
    let client_call = &second[aggregate + 1];
    assert_eq!(client_call.calls()[0].id, "call_weather");
    assert!(
        client_call.calls()[0].metadata.is_empty(),
        "{client_call:?}"
    );
    assert_eq!(second[aggregate + 2].results()[0].call_id, "call_weather");
}

/// A model that says `words` words, each after `pause`.
fn paced(
    pause: Duration,
    words: usize,
) -> impl lmstack::service::ChatService<Future: Send> + Clone + Send + Sync + 'static {
    tower::service_fn(move |_request: ChatRequest| async move {
        let events = futures::stream::iter(0..words).then(move |_| async move {
            tokio::time::sleep(pause).await;
            Ok::<_, Error>(Event::text("word "))
        });
        Ok::<_, Error>(Reply::from_stream(events))
    })
}

#[tokio::test]
async fn a_silent_stream_gets_keep_alives_that_clients_skip() {
    let gateway = Gateway::new()
        .model("slow", "scripted", paced(Duration::from_millis(300), 1), 4)
        .keep_alive(Some(Duration::from_millis(50)));
    let base = serve(gateway).await;
    // A model never silent for a whole interval (with room for a busy machine).
    let chatty = Gateway::new()
        .model("slow", "scripted", paced(Duration::from_millis(5), 60), 4)
        .keep_alive(Some(Duration::from_millis(200)));
    let chatty = serve(chatty).await;
    for (path, body, keep_alive) in [
        (
            "/v1/chat/completions",
            r#"{"model":"slow","stream":true,"messages":[{"role":"user","content":"Hi"}]}"#,
            ": keep-alive\n\n",
        ),
        (
            "/v1/messages",
            r#"{"model":"slow","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"Hi"}]}"#,
            "event: ping\ndata: {\"type\": \"ping\"}\n\n",
        ),
    ] {
        let (status, text) = post(&base, path, &[], body).await;
        assert_eq!(status, 200, "{path}");
        let text = text.as_str().unwrap();
        let first_keep_alive = text.find(keep_alive).expect("a keep-alive");
        assert!(first_keep_alive < text.find("word").unwrap(), "{text}");
        assert!(text.matches(keep_alive).count() >= 2, "{path}: {text}");
        // A stream that is never silent for a whole interval gets none.
        let (status, text) = post(&chatty, path, &[], body).await;
        assert_eq!(status, 200, "{path}");
        let text = text.as_str().unwrap();
        assert_eq!(text.matches("word").count(), 60, "{text}");
        assert!(!text.contains(keep_alive), "{path}: {text}");
    }
    // lmstack's own clients read through them.
    let request = ChatRequest::new(vec![Message::user("Hi")]).streaming(true);
    let text = |messages: Vec<Message>| -> String {
        messages.iter().filter_map(Message::as_text).collect()
    };
    let reply = openai(&base, "slow").oneshot(request.clone());
    assert_eq!(text(reply.await.unwrap().collect().await.unwrap()), "word ");
    let reply = anthropic(&base, "slow").oneshot(request);
    assert_eq!(text(reply.await.unwrap().collect().await.unwrap()), "word ");
}

#[tokio::test]
async fn an_openai_clients_options_reach_an_anthropic_upstream_under_its_names() {
    let model = ScriptedModel::new().reply("Hi.");
    let base = serve(Gateway::new().model("claude", "anthropic", model.clone(), 4)).await;
    let body = r#"{"model":"claude","user":"u-1","seed":7,"top_p":0.5,"logit_bias":{"1":2},
                   "messages":[{"role":"user","content":"Hi"}]}"#;
    let (status, reply) = post(&base, "/v1/chat/completions", &[], body).await;
    assert_eq!(status, 200, "{reply}");
    let extra = &model.requests()[0].options.extra;
    assert_eq!(
        Value::Object(extra.clone()),
        json!({"top_p": 0.5, "metadata": {"user_id": "u-1"}})
    );
}

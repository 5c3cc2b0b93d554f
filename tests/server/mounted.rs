//! The gateway inside an application: nested under a path of an axum router
//! that has a state of its own, and serving a stack that is not `Sync`.

#![cfg(all(feature = "server", feature = "function"))]

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use lmstack::provider::openai_chat::{OpenAi, OpenAiConfig};
use lmstack::server::Gateway;
use lmstack::testing::ScriptedModel;
use lmstack::{ChatRequest, Message};
use tower::ServiceExt;
use tower::util::BoxCloneService;

/// The application's own state.
#[derive(Clone)]
struct App {
    greeting: &'static str,
}

#[tokio::test]
async fn a_gateway_nested_in_an_app_with_state_serves_a_stack_that_is_not_sync() {
    // `BoxCloneService` is `Send` but not `Sync`.
    let stack = BoxCloneService::new(
        ScriptedModel::new()
            .reply("Hello from /llm.")
            .reply("Hello from /llm."),
    );
    let gateway = Gateway::new().model("demo", "scripted", stack, 4);
    let app = Router::new()
        .route(
            "/hello",
            get(|State(app): State<App>| async move { app.greeting }),
        )
        .nest("/llm", gateway.router())
        .with_state(App { greeting: "hi" });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let hello = reqwest::get(format!("http://{address}/hello"))
        .await
        .unwrap();
    assert_eq!(hello.text().await.unwrap(), "hi");
    let health = reqwest::get(format!("http://{address}/llm/health")).await;
    assert_eq!(health.unwrap().status(), 200);
    let config = OpenAiConfig::new(format!("http://{address}/llm/v1")).model("demo");
    let client = OpenAi::new(config).unwrap();
    for stream in [false, true] {
        let request = ChatRequest::new(vec![Message::user("Hi")]).streaming(stream);
        let reply = client.clone().oneshot(request).await.unwrap();
        let messages = reply.collect().await.unwrap();
        let first = serde_json::to_value(&messages[0]).unwrap();
        assert_eq!(first["text"], "Hello from /llm.", "stream: {stream}");
    }
}

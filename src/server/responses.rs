//! `POST /v1/responses`: a chat request in the Responses format, with the
//! conversations it continues by `previous_response_id` loaded from the
//! gateway's [`ResponseStore`] and its own saved there once its reply is
//! complete (unless it says `store: false`).

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use futures::StreamExt;
use serde_json::{Value, json};
use tower::ServiceExt;
use tracing::Instrument;

use super::admit::{Admitted, admit_to};
use super::answer::{Answer, Refusal, answer, json_response, record};
use super::format::{Format, Responses};
use super::gateway::Shared;
use super::response_store::ResponseStore;
use crate::provider::openai_responses::INSTRUCTIONS_KEY;
use crate::service::BoxChatService;
use crate::{ChatRequest, Error, Joiner, Message, Reply};

/// The request's `previous_response_id`, and whether its conversation is to
/// be kept (`store` is not `false`).
struct Continuity {
    previous: Option<String>,
    store: bool,
}

impl Continuity {
    fn of(request: &ChatRequest) -> Self {
        let extra = &request.options.extra;
        Continuity {
            previous: extra
                .get("previous_response_id")
                .and_then(Value::as_str)
                .map(str::to_owned),
            store: extra.get("store") != Some(&Value::Bool(false)),
        }
    }
}

/// `POST /v1/responses`.
pub(super) async fn responses(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let gateway = &shared.gateway;
    let prepare = |request: &ChatRequest, name: &str| {
        let encoder = Responses::encoder(request, name, SystemTime::now());
        (encoder, Continuity::of(request))
    };
    let admitted = match admit_to::<Responses, _>(&shared, &headers, body, None, prepare).await {
        Ok(admitted) => admitted,
        Err(refusal) => return refusal.respond::<Responses>(gateway, started),
    };
    let Admitted {
        mut request,
        name,
        mut served,
        permit,
        prepared: (encoder, continuity),
    } = admitted;
    // The conversation is the gateway's to keep: no upstream knows its id.
    request.options.extra.remove("previous_response_id");
    let store = gateway.responses.0.clone();
    if let Some(previous) = &continuity.previous {
        match store.load(previous).await {
            Ok(Some(history)) => continue_from(&mut request, history),
            Ok(None) => {
                let upstream = Some((name, served.provider.clone()));
                let (status, body) = not_found(previous);
                let message = body["error"]["message"].as_str().unwrap_or_default();
                let error = Error::InvalidRequest(message.to_owned());
                record::<Responses>(gateway, upstream, status, started, Some(&error));
                return json_response(status, body.to_string().into(), "application/json");
            }
            Err(error) => {
                return Refusal::for_model(&name, &served, error)
                    .respond::<Responses>(gateway, started);
            }
        }
    }
    if continuity.store {
        let input: Vec<Message> = request
            .messages
            .iter()
            .filter(|message| message.metadata().get(INSTRUCTIONS_KEY).is_none())
            .cloned()
            .collect();
        let save = |stack| saving(stack, store.clone(), encoder.id().to_owned(), input.clone());
        served.stack = save(served.stack);
        // A fallback's reply is the conversation's as well.
        served.fallbacks = served
            .fallbacks
            .iter()
            .cloned()
            .map(|mut fallback| {
                fallback.served.stack = save(fallback.served.stack);
                fallback
            })
            .collect();
    }
    let answering = Answer::new::<Responses>(gateway, &name, &served, &request, started);
    let span = answering.span().clone();
    let keep_alive = gateway.keep_alive;
    answer::<Responses>(request, encoder, served, permit, keep_alive, answering)
        .instrument(span)
        .await
}

/// Puts the conversation `history` before the request's input, after its
/// instructions.
fn continue_from(request: &mut ChatRequest, history: Vec<Message>) {
    let at = request
        .messages
        .iter()
        .position(|message| message.metadata().get(INSTRUCTIONS_KEY).is_none())
        .unwrap_or(request.messages.len());
    request.messages.splice(at..at, history);
}

/// OpenAI's answer to a `previous_response_id` it does not know.
fn not_found(id: &str) -> (u16, Value) {
    let body = json!({"error": {
        "message": format!("Previous response with id '{id}' not found."),
        "type": "invalid_request_error",
        "param": "previous_response_id",
        "code": "previous_response_not_found",
    }});
    (400, body)
}

/// `stack`, whose replies, once complete without an error, are saved in
/// `store` under `id` after `input` — before the reply's end reaches the
/// client, so that its next request finds them.
fn saving(
    stack: BoxChatService,
    store: Arc<dyn ResponseStore>,
    id: String,
    input: Vec<Message>,
) -> BoxChatService {
    BoxChatService::new(stack.map_response(move |mut reply: Reply| {
        let (store, id, mut conversation) = (store.clone(), id.clone(), input.clone());
        Reply::from_stream(async_stream::stream! {
            let mut joiner = Joiner::new();
            let mut failed = false;
            while let Some(item) = reply.next().await {
                match &item {
                    Ok(event) => joiner.push(event.clone()),
                    Err(_) => failed = true,
                }
                yield item;
            }
            if !failed {
                conversation.extend(joiner.finish());
                if let Err(error) = store.save(&id, conversation).await {
                    tracing::warn!("the response `{id}` could not be stored: {error}");
                }
            }
        })
    }))
}

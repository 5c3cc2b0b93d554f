//! Letting a request in: its access checked, its body read within the
//! gateway's limits, its model found and one of the model's places taken —
//! before the body is decoded, so that a model's `max_concurrent` bounds the
//! memory its decoded requests hold.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, header};
use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::answer::Refusal;
use super::fit::OptionsWire;
use super::format::Decode;
use super::gateway::{Served, Shared};
use super::guard::Route;
use super::sealed_ids::open_request;
use crate::deploy::common_session_key;
use crate::{ChatRequest, Error, SessionKey};

/// A request let in: decoded, its model found, a place taken; and what was
/// prepared from the request as the client sent it.
pub(super) struct Admitted<T> {
    pub(super) request: ChatRequest,
    pub(super) name: String,
    pub(super) served: Served,
    pub(super) permit: OwnedSemaphorePermit,
    pub(super) prepared: T,
}

/// What a route's path says of its request (Gemini's
/// `/v1beta/models/{model}:streamGenerateContent`): the model, and whether
/// the reply streams.
#[derive(Clone, Debug)]
pub(super) struct Named {
    pub(super) model: String,
    pub(super) stream: bool,
}

/// A request let in before its body is decoded: its access checked, its body
/// read, its model found and one of the model's places taken.
pub(super) struct Entered {
    /// The key the client presented, by name.
    pub(super) caller: Option<crate::limit::Caller>,
    /// The body as it came.
    pub(super) bytes: Bytes,
    /// The body's hold on the gateway's budget of bodies being read.
    reading: Option<OwnedSemaphorePermit>,
    /// The model served, by its name.
    pub(super) name: String,
    pub(super) served: Served,
    pub(super) permit: OwnedSemaphorePermit,
    /// What the route's path says of the request.
    pub(super) named: Option<Named>,
    /// The request, when it was decoded already (to read its model).
    pub(super) decoded: Option<ChatRequest>,
}

/// Checks the access, reads the body, finds the model (the one the path
/// names, else the body's), takes one of its places and decodes the body;
/// else the refusal to answer; a model `named` by the path is the decoded
/// request's, with its mode. `prepare` reads
/// the request as the client sent it (with the model's name); its options are
/// fitted to each upstream later, as it reaches one
/// ([`fit`](super::fit)).
pub(super) async fn admit_to<F: Decode, T>(
    shared: &Shared,
    headers: &HeaderMap,
    body: Body,
    named: Option<Named>,
    prepare: impl FnOnce(&ChatRequest, &str) -> T,
) -> Result<Admitted<T>, Refusal> {
    enter::<F>(shared, headers, body, named)
        .await?
        .admit::<F, T>(headers, prepare)
}

/// Checks the access, reads the body, finds the model (the one the path
/// names, else the body's) and takes one of its places; else the refusal to
/// answer.
pub(super) async fn enter<F: Decode>(
    shared: &Shared,
    headers: &HeaderMap,
    body: Body,
    named: Option<Named>,
) -> Result<Entered, Refusal> {
    let gateway = &shared.gateway;
    let early = Refusal::before_model;
    let caller = gateway.guard.check(headers, Route::Chat).map_err(early)?;
    let limits = BodyLimits {
        bytes: gateway.body_limit,
        timeout: gateway.body_timeout,
    };
    let (bytes, reading) = read_body(body, headers, limits, &shared.budget)
        .await
        .map_err(early)?;
    // The model is read first, without decoding the rest; a body it cannot be
    // read from is decoded whole, for the error that names the field at fault.
    let from_path = named.as_ref().map(|named| named.model.clone());
    let (name, decoded) = match from_path.or_else(|| F::model(&bytes)) {
        Some(name) => (name, None),
        None => {
            let request = F::decode(&bytes).map_err(early)?;
            let Some(name) = request.options.model.clone() else {
                let error = Error::InvalidRequest("model: missing field `model`".into());
                return Err(early(error));
            };
            (name, Some(request))
        }
    };
    let Some((served_name, served)) = gateway.served(&name) else {
        let message = format!(
            "the model `{}` is not served here (GET /v1/models lists those that are)",
            shortened(&name)
        );
        return Err(early(refused(404, message)));
    };
    // Counted, logged and answered as the model served (a bounded label).
    let name = served_name.to_owned();
    let Ok(permit) = served.limit.clone().try_acquire_owned() else {
        let message = format!(
            "the model `{name}` is answering its limit of {} requests at once; try again shortly",
            served.max_concurrent
        );
        return Err(Refusal::for_model(&name, served, refused(429, message)));
    };
    Ok(Entered {
        caller,
        bytes,
        reading,
        name,
        served: served.clone(),
        permit,
        named,
        decoded,
    })
}

impl Entered {
    /// Decodes the body (unless it was already) into the request to run: its
    /// model and mode those the path names, what the headers add, its session
    /// and caller in its extensions, its sealed ids opened; `prepare` reads it
    /// as the client sent it.
    pub(super) fn admit<F: Decode, T>(
        self,
        headers: &HeaderMap,
        prepare: impl FnOnce(&ChatRequest, &str) -> T,
    ) -> Result<Admitted<T>, Refusal> {
        let Entered {
            caller,
            bytes,
            reading,
            name,
            served,
            permit,
            named,
            decoded,
        } = self;
        let mut request = match decoded {
            Some(request) => request,
            None => F::decode(&bytes).map_err(|error| Refusal::for_model(&name, &served, error))?,
        };
        drop((bytes, reading));
        if let Some(named) = named {
            request.options.model = Some(named.model);
            request.options.stream = named.stream;
        }
        F::decode_headers(headers, &mut request);
        // The conversation, for the deployments' affinity: by the agents' headers,
        // else by the body's keys read before its options are fitted to an
        // upstream (which may drop them).
        if let Some(session) = session_key(headers).or_else(|| {
            let key = common_session_key(&request)?;
            (key.len() <= SESSION_KEY_LONGEST).then(|| SessionKey::new(key))
        }) {
            request.extensions.insert(session);
        }
        if let Some(caller) = caller {
            request.extensions.insert(caller);
        }
        let prepared = prepare(&request, &name);
        // Fitted to each upstream it goes to (`fit`), from the client's names.
        request.extensions.insert(OptionsWire(F::KIND));
        open_request(&mut request);
        Ok(Admitted {
            request,
            served,
            name,
            permit,
            prepared,
        })
    }
}

/// The headers by which coding agents name their conversation: Claude Code's
/// session id, Codex's window id and session id.
const SESSION_HEADERS: [&str; 3] = [
    "x-claude-code-session-id",
    "x-codex-window-id",
    "session_id",
];

/// The longest session key kept, in bytes.
const SESSION_KEY_LONGEST: usize = 256;

/// The conversation a request belongs to, by the first of the agents' session
/// headers it carries (at most [`SESSION_KEY_LONGEST`] bytes of it).
fn session_key(headers: &HeaderMap) -> Option<SessionKey> {
    SESSION_HEADERS.iter().find_map(|name| {
        let value = headers.get(*name)?.to_str().ok()?.trim();
        (!value.is_empty() && value.len() <= SESSION_KEY_LONGEST).then(|| SessionKey::new(value))
    })
}

pub(super) fn refused(status: u16, message: impl Into<String>) -> Error {
    Error::Refused {
        status,
        message: message.into(),
    }
}

/// At most the first 64 characters of a name a client sent, for a message.
fn shortened(name: &str) -> String {
    const SHOWN: usize = 64;
    match name.char_indices().nth(SHOWN) {
        Some((end, _)) => format!("{}…", &name[..end]),
        None => name.to_owned(),
    }
}

/// The limits on one request's body.
#[derive(Clone, Copy, Debug)]
struct BodyLimits {
    bytes: usize,
    timeout: Duration,
}

/// Reads a body whole within `limits` (413, 408), its bytes taken from the
/// gateway's `budget` as they come (429 when it has no more: the gateway is
/// busy, which the client may retry, not broken): the body, and
/// its bytes' hold on the budget.
async fn read_body(
    body: Body,
    headers: &HeaderMap,
    limits: BodyLimits,
    budget: &Arc<Semaphore>,
) -> Result<(Bytes, Option<OwnedSemaphorePermit>), Error> {
    let limit = limits.bytes;
    let too_large = || {
        let message = format!("the request body is larger than the limit of {limit} bytes");
        refused(413, message)
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|declared| declared > limit as u64) {
        return Err(too_large());
    }
    let read = async {
        let mut chunks = body.into_data_stream();
        let capacity = declared.map_or(0, |declared| declared as usize);
        let mut bytes = Vec::with_capacity(capacity);
        let mut held: Option<OwnedSemaphorePermit> = None;
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|error| {
                refused(400, format!("the request body could not be read: {error}"))
            })?;
            if bytes.len() + chunk.len() > limit {
                return Err(too_large());
            }
            let taken = u32::try_from(chunk.len())
                .ok()
                .and_then(|n| budget.clone().try_acquire_many_owned(n).ok())
                .ok_or_else(|| {
                    refused(
                        429,
                        "the gateway is reading as many request bodies as it holds at once; \
                         try again shortly",
                    )
                })?;
            match &mut held {
                Some(held) => held.merge(taken),
                None => held = Some(taken),
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok((Bytes::from(bytes), held))
    };
    tokio::time::timeout(limits.timeout, read)
        .await
        .unwrap_or_else(|_| {
            let message = format!(
                "the request body did not arrive within {:?}",
                limits.timeout
            );
            Err(refused(408, message))
        })
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn an_agents_session_header_names_the_conversation() {
        let mut headers = HeaderMap::new();
        assert_eq!(session_key(&headers), None);
        headers.insert("session_id", HeaderValue::from_static("codex-1"));
        assert_eq!(session_key(&headers), Some(SessionKey::new("codex-1")));
        headers.insert(
            "x-claude-code-session-id",
            HeaderValue::from_static(" cc-2 "),
        );
        assert_eq!(session_key(&headers), Some(SessionKey::new("cc-2")));
        let long = HeaderValue::from_str(&"k".repeat(257)).unwrap();
        headers.insert("x-claude-code-session-id", long);
        assert_eq!(session_key(&headers), Some(SessionKey::new("codex-1")));
    }
}

//! Tool-call metadata carried through clients inside the call's id.
//!
//! A gateway hands the model's tool calls to its clients, which answer them on
//! their next request. What a call carries besides its id, name and arguments —
//! Gemini 3's `thought_signature`, which Gemini requires back with the call, or the
//! mark of an id the lifting made up — lives in the call's metadata, and clients
//! drop what their wire format has no field for. The call's **id** is the one
//! thing every client sends back unchanged (with the call, and as the result's
//! `call_id`), so it carries the metadata:
//!
//! - [`seal_event`], on the way out, replaces the id of every call that has
//!   metadata by a *sealed* id: [`SEALED_PREFIX`] and the base64url (no padding)
//!   of `{"id": …, "metadata": {…}}` — letters, digits, `-` and `_` only, which
//!   every wire's id grammar allows;
//! - [`open_request`], on the way in, restores each sealed id of the request's
//!   calls and results, and the calls' metadata.
//!
//! The same way, a reply that calls both the gateway's own tools and the
//! client's keeps the gateway's rounds: [`SealCallIds`] holds the client's calls
//! until the reply's `tool_aggregate`s (the calls the gateway ran, with their
//! results) have passed, and seals those rounds into the first client call's id
//! (under [`GATEWAY_ROUNDS_KEY`]); [`open_request`] puts them back in the
//! history, before that call, so the model sees every result of its turn.
//!
//! Reasoning travels the same way where a client's wire has an opaque field
//! for it: [`seal_reasoning`] and [`open_reasoning`].
//!
//! Stateless: nothing is remembered between requests, so any gateway replica can
//! take the next one. An id that is not sealed, or does not open, is left as it
//! is.

use serde::{Deserialize, Serialize};

use crate::message::{CallDetails, ToolCallsMessage};
use crate::provider::sealed::{MAX_SEALED, open, seal};
pub use crate::provider::sealed::{SEALED_REASONING_PREFIX, open_reasoning, seal_reasoning};
use crate::service::{Machine, Output};
use crate::{ChatRequest, Error, Event, Message, Metadata, ToolCall};

/// The start of a sealed call id.
pub const SEALED_PREFIX: &str = "lmc_";

/// The metadata key under which a client's call carries the gateway's own tool
/// rounds of the same reply (its `tool_aggregate` messages).
pub const GATEWAY_ROUNDS_KEY: &str = "gateway_rounds";

/// What a sealed id holds.
#[derive(Serialize, Deserialize)]
struct Sealed {
    id: String,
    metadata: Metadata,
}

/// The id that carries `id` and `metadata`: `id` itself when there is no
/// metadata.
///
/// ```
/// use lmstack::Metadata;
/// use lmstack::server::sealed_ids::{open_id, seal_id};
/// use serde_json::json;
///
/// let mut metadata = Metadata::default();
/// metadata.insert("thought_signature", json!("CsYBAY..."));
/// let sealed = seal_id("call_1", &metadata);
/// assert!(sealed.starts_with("lmc_"));
/// assert_eq!(open_id(&sealed), Some(("call_1".to_owned(), metadata)));
/// assert_eq!(seal_id("call_2", &Metadata::default()), "call_2");
/// ```
pub fn seal_id(id: &str, metadata: &Metadata) -> String {
    if metadata.is_empty() {
        return id.to_owned();
    }
    let sealed = Sealed {
        id: id.to_owned(),
        metadata: metadata.clone(),
    };
    seal(SEALED_PREFIX, &sealed)
}

/// The id and metadata a sealed id carries; `None` for an id that is not sealed
/// or does not open.
pub fn open_id(id: &str) -> Option<(String, Metadata)> {
    let Sealed { id, metadata } = open(SEALED_PREFIX, id)?;
    Some((id, metadata))
}

/// Restores the sealed ids of `request`: each call gets its id and metadata back
/// (metadata the call already has wins), each result its call id; the gateway's
/// rounds a call carried go back in the history, right before its message.
pub fn open_request(request: &mut ChatRequest) {
    let mut messages = Vec::with_capacity(request.messages.len());
    for mut message in request.messages.drain(..) {
        let (calls, results) = match &mut message {
            Message::ToolCalls(message) => (&mut message.calls[..], &mut [][..]),
            Message::ToolResults(message) => (&mut [][..], &mut message.results[..]),
            Message::ToolAggregate(message) => (&mut message.calls[..], &mut message.results[..]),
            _ => {
                messages.push(message);
                continue;
            }
        };
        for call in calls {
            if let Some((id, metadata)) = open_id(&call.id) {
                call.id = id;
                call.metadata.merge_missing(&metadata);
            }
            if let Some(rounds) = call.metadata.remove(GATEWAY_ROUNDS_KEY) {
                messages.extend(serde_json::from_value::<Vec<Message>>(rounds).unwrap_or_default());
            }
        }
        for result in results {
            if let Some((id, _)) = open_id(&result.call_id) {
                result.call_id = id;
            }
        }
        messages.push(message);
    }
    request.messages = messages;
}

/// Seals the calls of a reply's items on their way to a client (see the
/// [module docs](self)): each event as [`seal_event`] does, except that a
/// `tool_calls` message is held until the next event that is not a
/// `tool_aggregate`, and the reply's aggregates so far go into its first call
/// the client runs (those that fit in a sealed id: 128 KiB of JSON; larger
/// rounds are left out, with a warning). Items in, items out: an error passes
/// through, after what was held.
#[derive(Debug, Default)]
pub struct SealCallIds {
    held: Option<ToolCallsMessage>,
    rounds: Vec<Message>,
}

impl SealCallIds {
    /// A sealer for one reply.
    pub fn new() -> Self {
        Self::default()
    }

    fn release(&mut self, out: &mut Output<Result<Event, Error>>) {
        let Some(mut message) = self.held.take() else {
            return;
        };
        let client_call = message
            .calls
            .iter_mut()
            .find(|call| !call.provider_executed);
        if let (Some(call), false) = (client_call, self.rounds.is_empty()) {
            match serde_json::to_value(&self.rounds) {
                Ok(rounds) if rounds.to_string().len() <= MAX_SEALED / 2 => {
                    call.metadata.insert(GATEWAY_ROUNDS_KEY, rounds);
                }
                _ => tracing::warn!(
                    "the gateway's tool rounds are too large to travel with the client's call; \
                     the next request will not show them to the model"
                ),
            }
        }
        message.calls.iter_mut().for_each(seal_call);
        out.push(Ok(Event::message(Message::ToolCalls(message))));
    }
}

impl Machine for SealCallIds {
    type In = Result<Event, Error>;
    type Out = Result<Event, Error>;

    fn push(
        &mut self,
        item: Result<Event, Error>,
        out: &mut Output<Result<Event, Error>>,
    ) -> Result<(), Error> {
        match item {
            Ok(Event::Message {
                message: Message::ToolAggregate(aggregate),
            }) => {
                let round = Message::ToolAggregate(aggregate);
                self.rounds.push(round.clone());
                out.push(Ok(Event::message(round)));
            }
            Ok(Event::Message {
                message: Message::ToolCalls(calls),
            }) => {
                self.release(out);
                self.held = Some(calls);
            }
            Ok(mut event) => {
                self.release(out);
                seal_event(&mut event);
                out.push(Ok(event));
            }
            Err(error) => {
                self.release(out);
                out.push(Err(error));
            }
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Output<Result<Event, Error>>) -> Result<(), Error> {
        self.release(out);
        Ok(())
    }
}

/// Seals the ids of the calls in one event of a reply (see the [module
/// docs](self)).
///
/// A streamed call is sealed with the metadata of the delta that gives its id
/// (the lifting that makes such metadata, Gemini's, gives both at once). The
/// calls of complete messages are sealed with their metadata, and in a
/// `tool_aggregate` the results' call ids with them.
pub fn seal_event(event: &mut Event) {
    match event {
        Event::ToolCallDelta(delta) => {
            if let Some(CallDetails { id: Some(id), .. }) = delta.details.as_deref_mut() {
                *id = seal_reply_id(id, &delta.metadata);
            }
        }
        Event::Message { message } => seal_message(message),
        _ => {}
    }
}

/// Seals the calls of one message, and an aggregate's results with them.
fn seal_message(message: &mut Message) {
    match message {
        Message::ToolCalls(message) => message.calls.iter_mut().for_each(seal_call),
        Message::ToolAggregate(message) => {
            for call in &mut message.calls {
                let before = call.id.clone();
                seal_call(call);
                for result in &mut message.results {
                    if result.call_id == before {
                        result.call_id.clone_from(&call.id);
                    }
                }
            }
        }
        _ => {}
    }
}

fn seal_call(call: &mut ToolCall) {
    call.id = seal_reply_id(&call.id, &call.metadata);
}

/// Metadata a reply's events carry for the client's encoder only, which no
/// lowering reads back: Anthropic's message-level fields ride on a reply's
/// first event, which may be a call. Left out of sealed ids.
#[cfg(feature = "anthropic")]
const NOT_SEALED: &[&str] = &[
    crate::provider::anthropic::MESSAGE_START_KEY,
    crate::provider::anthropic::MESSAGE_DELTA_KEY,
];
#[cfg(not(feature = "anthropic"))]
const NOT_SEALED: &[&str] = &[];

/// [`seal_id`] with the call's metadata but what is [`NOT_SEALED`].
fn seal_reply_id(id: &str, metadata: &Metadata) -> String {
    if !NOT_SEALED.iter().any(|key| metadata.get(key).is_some()) {
        return seal_id(id, metadata);
    }
    let mut kept = metadata.clone();
    for key in NOT_SEALED {
        kept.remove(key);
    }
    seal_id(id, &kept)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{Joiner, ToolCallDelta, ToolResult};

    fn signed() -> Metadata {
        let mut metadata = Metadata::default();
        metadata.insert("thought_signature", json!("sig/+=="));
        metadata.insert("generated_id", json!(true));
        metadata
    }

    #[test]
    fn a_sealed_id_uses_only_what_every_wire_allows_and_opens_to_what_it_holds() {
        let sealed = seal_id("functions.get:0 ünï", &signed());
        assert!(
            sealed
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "{sealed}"
        );
        assert_eq!(
            open_id(&sealed),
            Some(("functions.get:0 ünï".to_owned(), signed()))
        );
        for plain in ["call_1", "lmc_", "lmc_!!", "lmc_e30", "toolu_01"] {
            assert_eq!(open_id(plain), None, "{plain}");
        }
    }

    #[test]
    fn the_ids_of_a_reply_go_out_sealed_and_come_back_open() {
        let mut call = ToolCall::new("c1", "get", json!({"x": 1}));
        call.metadata = signed();
        let plain = ToolCall::new("c2", "put", json!({}));
        let mut streamed = ToolCallDelta::start(0, "c3", "get");
        streamed.metadata = signed();
        let mut events = [
            Event::message(Message::tool_calls(vec![call.clone(), plain.clone()])),
            Event::ToolCallDelta(streamed),
        ];
        events.iter_mut().for_each(seal_event);
        let messages = Joiner::join(events);
        let sealed_calls: Vec<&ToolCall> = messages.iter().flat_map(|m| m.calls()).collect();
        assert!(sealed_calls[0].id.starts_with(SEALED_PREFIX));
        assert_eq!(sealed_calls[1].id, "c2", "no metadata, no seal");
        assert!(sealed_calls[2].id.starts_with(SEALED_PREFIX));

        // A client sends back the calls without their metadata, and the results.
        let back: Vec<ToolCall> = sealed_calls
            .iter()
            .map(|c| ToolCall::new(c.id.clone(), c.name.clone(), c.arguments.clone()))
            .collect();
        let results = back
            .iter()
            .map(|c| ToolResult::text(c.id.clone(), c.name.clone(), "ok"))
            .collect();
        let mut request = ChatRequest::new(vec![
            Message::tool_calls(back),
            Message::tool_results(results),
        ]);
        open_request(&mut request);
        let calls = request.messages[0].calls();
        assert_eq!(calls[0], call);
        assert_eq!(calls[1], plain);
        assert_eq!(
            (calls[2].id.as_str(), &calls[2].metadata),
            ("c3", &signed())
        );
        let ids: Vec<&str> = request.messages[1]
            .results()
            .iter()
            .map(|r| r.call_id.as_str())
            .collect();
        assert_eq!(ids, ["c1", "c2", "c3"]);
    }

    #[test]
    fn an_aggregates_results_follow_their_calls() {
        let mut call = ToolCall::new("c1", "get", json!({}));
        call.metadata = signed();
        let mut message =
            Message::tool_aggregate(vec![call], vec![ToolResult::text("c1", "get", "done")]);
        seal_message(&mut message);
        let sealed = message.calls()[0].id.clone();
        assert!(sealed.starts_with(SEALED_PREFIX));
        assert_eq!(message.results()[0].call_id, sealed);
    }

    #[cfg(feature = "anthropic")]
    #[test]
    fn a_replys_message_level_fields_on_its_first_call_are_not_sealed() {
        use crate::provider::anthropic::MESSAGE_START_KEY;
        let mut delta = ToolCallDelta::start(0, "toolu_1", "get");
        delta
            .metadata
            .insert(MESSAGE_START_KEY, json!({"container": null}));
        let mut event = Event::ToolCallDelta(delta.clone());
        seal_event(&mut event);
        assert_eq!(
            event,
            Event::ToolCallDelta(delta.clone()),
            "nothing else to seal"
        );
        delta.metadata.insert("thought_signature", json!("sig"));
        let mut event = Event::ToolCallDelta(delta);
        seal_event(&mut event);
        let Event::ToolCallDelta(sealed) = event else {
            unreachable!()
        };
        let (id, metadata) = open_id(sealed.id().unwrap()).unwrap();
        assert_eq!(id, "toolu_1");
        assert!(metadata.get(MESSAGE_START_KEY).is_none());
        assert_eq!(metadata.get("thought_signature"), Some(&json!("sig")));
        assert!(
            sealed.metadata.get(MESSAGE_START_KEY).is_some(),
            "kept for the encoder"
        );
    }

    proptest::proptest! {
        #[test]
        fn any_id_and_metadata_open_to_what_was_sealed(
            id in "(?s).{0,40}",
            key in "[a-z_]{1,12}",
            value in "(?s).{0,80}",
        ) {
            // The typed keys have setters of their own.
            proptest::prop_assume!(key != "from_agent");
            let mut metadata = Metadata::default();
            metadata.insert(key, json!(value));
            let sealed = seal_id(&id, &metadata);
            proptest::prop_assert_eq!(open_id(&sealed), Some((id, metadata)));
        }
    }
}

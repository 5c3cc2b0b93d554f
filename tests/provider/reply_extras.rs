//! Same wire, nothing lost, in the reply: an upstream's fields that lmstack
//! does not know — on an OpenAI Chat message or tool call, on an Anthropic
//! `text` or `tool_use` block — lifted and encoded by the same wire come back
//! in place, in both modes; the other wire's encoder writes none of them.

#![cfg(all(feature = "openai", feature = "anthropic"))]

use crate::common;

use common::*;
use lmstack::Event;
use lmstack::provider::body::{BodyDecoder, Lift};
use lmstack::provider::{anthropic, openai_chat};
use lmstack::service::{Machine, Output};
use proptest::prelude::*;
use serde_json::{Map, Value};

/// Lifts a whole body with `lifter`, cut at a few places.
fn lift<L: Lift>(lifter: L, body: &Value) -> Vec<Event> {
    let bytes = body.to_string().into_bytes();
    decode_cut(BodyDecoder::json(lifter), &bytes, &[5, 64, 1])
        .unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// What the OpenAI encoder writes for `events`.
fn openai_reply(events: &[Event], stream: bool) -> String {
    let encoder = openai_chat::ReplyEncoder::new("chatcmpl-x", 1, "m");
    let encoder = if stream {
        encoder.streaming(false)
    } else {
        encoder
    };
    written(encoder, events)
}

/// What the Anthropic encoder writes for `events`.
fn anthropic_reply(events: &[Event], stream: bool) -> String {
    written(anthropic::ReplyEncoder::new("msg_x", "m", stream), events)
}

fn written<M>(mut encoder: M, events: &[Event]) -> String
where
    M: Machine<In = Result<Event, lmstack::Error>, Out = bytes::Bytes>,
{
    let mut out = Output::new();
    for event in events {
        encoder.push(Ok(event.clone()), &mut out).unwrap();
    }
    encoder.finish(&mut out).unwrap();
    out.drain()
        .map(|frame| String::from_utf8(frame.to_vec()).unwrap())
        .collect()
}

/// The probe fields (`x_probe_…`) of the object at `place` in `body`.
fn probes(body: &Value, place: &str) -> Map<String, Value> {
    body.pointer(place)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(name, _)| name.starts_with("x_probe_"))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

/// The probe fields a reply carries, at the places of `places`.
fn probes_at(body: &Value, places: &[String]) -> Vec<Map<String, Value>> {
    places.iter().map(|place| probes(body, place)).collect()
}

/// Recorded whole Chat Completions bodies: text, and parallel calls.
fn openai_bodies() -> Vec<(String, Value)> {
    let mut bodies: Vec<(String, Value)> = cassette("openai/fantasy/gpt-4o-multi_tool.yaml")
        .into_iter()
        .enumerate()
        .map(|(n, exchange)| {
            let body = serde_json::from_str(&exchange.response).unwrap();
            (format!("gpt-4o#{n}"), body)
        })
        .collect();
    let name = "openai/openai-python/parallel_tools.json";
    bodies.push((name.into(), serde_json::from_slice(&fixture(name)).unwrap()));
    bodies
}

/// A streamed Chat Completions reply read back as the places of a whole
/// one: the message's probe fields (of any delta), and each call's (of the
/// fragment that starts it, which carries its `id`).
fn openai_stream_as_places(reply: &str) -> Value {
    let mut message = Map::new();
    let mut calls = Vec::new();
    for frame in body_objects(reply) {
        let Some(delta) = frame.pointer("/choices/0/delta") else {
            continue;
        };
        message.extend(probes(delta, ""));
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            if call.get("id").is_some() {
                calls.push(Value::Object(probes(call, "")));
            }
        }
    }
    message.insert("tool_calls".into(), Value::Array(calls));
    serde_json::json!({"choices": [{"message": message}]})
}

/// Recorded whole Messages bodies: a call; reasoning and text.
fn anthropic_bodies() -> Vec<(String, Value)> {
    [
        "anthropic/vercel-ai/anthropic-json-tool.1.json",
        "anthropic/vercel-ai/anthropic-claude-opus-5-reasoning-high.1.json",
    ]
    .into_iter()
    .map(|name| (name.into(), serde_json::from_slice(&fixture(name)).unwrap()))
    .collect()
}

/// A streamed Messages reply read back as the places of a whole one: the
/// fields of each `content_block_start`'s block, by index.
fn anthropic_stream_as_places(reply: &str) -> Value {
    let blocks: Vec<Value> = body_objects(reply)
        .into_iter()
        .filter(|event| event["type"] == "content_block_start")
        .map(|event| event["content_block"].clone())
        .collect();
    serde_json::json!({ "content": blocks })
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(64)))]

    /// An OpenAI upstream's unknown fields on the message and on each tool
    /// call reach an OpenAI client in place, streamed or whole; an Anthropic
    /// client sees none of them.
    #[test]
    fn an_openai_upstreams_unknown_fields_reach_an_openai_client_only(
        pick in any::<prop::sample::Index>(),
        fields in unknown_fields(),
    ) {
        let (name, body) = pick.get(&openai_bodies()).clone();
        let places: Vec<String> =
            object_places(&body, &["/choices/0/message/tool_calls"]).into_iter().skip(1).collect();
        let places: Vec<String> =
            std::iter::once("/choices/0/message".to_owned()).chain(places).collect();
        let sent = with_unknown_fields(body, &places, &fields);
        let events = lift(openai_chat::Lifter::new(), &sent);
        let whole: Value = serde_json::from_str(&openai_reply(&events, false)).unwrap();
        prop_assert_eq!(probes_at(&whole, &places), probes_at(&sent, &places), "{}: {}", &name, whole);
        let streamed = openai_stream_as_places(&openai_reply(&events, true));
        prop_assert_eq!(probes_at(&streamed, &places), probes_at(&sent, &places), "{}", &name);
        for stream in [false, true] {
            let other = anthropic_reply(&events, stream);
            prop_assert!(!other.contains("x_probe_"), "{}: {}", &name, other);
        }
    }

    /// An Anthropic upstream's unknown fields on its `text` and `tool_use`
    /// blocks reach an Anthropic client in place, streamed or whole; an
    /// OpenAI client sees none of them.
    #[test]
    fn an_anthropic_upstreams_unknown_fields_reach_an_anthropic_client_only(
        pick in any::<prop::sample::Index>(),
        fields in unknown_fields(),
    ) {
        let (name, body) = pick.get(&anthropic_bodies()).clone();
        let places: Vec<String> = object_places(&body, &["/content"])
            .into_iter()
            .filter(|place| {
                let kind = body.pointer(&format!("{place}/type"));
                kind == Some(&"text".into()) || kind == Some(&"tool_use".into())
            })
            .collect();
        let sent = with_unknown_fields(body, &places, &fields);
        let events = lift(anthropic::Lifter::new(), &sent);
        let whole: Value = serde_json::from_str(&anthropic_reply(&events, false)).unwrap();
        prop_assert_eq!(probes_at(&whole, &places), probes_at(&sent, &places), "{}: {}", &name, whole);
        let streamed = anthropic_stream_as_places(&anthropic_reply(&events, true));
        prop_assert_eq!(probes_at(&streamed, &places), probes_at(&sent, &places), "{}", &name);
        for stream in [false, true] {
            let other = openai_reply(&events, stream);
            prop_assert!(!other.contains("x_probe_"), "{}: {}", &name, other);
        }
    }
}

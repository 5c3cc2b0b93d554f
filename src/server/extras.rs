//! A request's provider-specific options (`options.extra`) when the client's
//! format and the upstream's wire differ: the portable ones go on under the
//! upstream's names, the rest are dropped and named — an upstream such as
//! Anthropic's refuses a body field it does not know, so an OpenAI client's
//! `user` or `seed` would otherwise fail every request. Each wire names its
//! portable options itself (its `portable` module); this only pairs two.

use serde_json::{Map, Value};

use crate::ToolSpec;
use crate::provider::Kind;
use crate::provider::portable::PortableNames;
use crate::provider::{anthropic, openai_chat};

/// Carries `extra`, decoded from a request of wire `from`, over to an
/// upstream of wire `to` (`None`, an upstream of no known wire, or the same
/// wire leave it as it is). Returns the keys dropped. (`n` above 1 was refused
/// when the request was decoded.)
pub(crate) fn carry(extra: &mut Map<String, Value>, from: Kind, to: Option<Kind>) -> Vec<String> {
    let (Some(reader), Some(writer)) = (names(from), to.and_then(names)) else {
        return Vec::new();
    };
    if Some(from) == to || extra.is_empty() {
        return Vec::new();
    }
    // A Gemini client's options sit in its `generationConfig` and others.
    #[cfg(feature = "gemini")]
    if from == Kind::Gemini {
        crate::provider::gemini::portable::spread(extra);
    }
    let mut dropped = Vec::new();
    let mut carried = Map::new();
    for (key, value) in std::mem::take(extra) {
        let written = match (reader.read)(&key, &value) {
            Some((option, value)) => (writer.write)(option, value, &mut carried),
            None => reader.own.contains(&key.as_str()),
        };
        if !written {
            dropped.push(key);
        }
    }
    *extra = carried;
    dropped
}

/// The fields of the request's tools that a client of wire `from` sent and an
/// upstream of another wire `to` has no place for (Anthropic's
/// `defer_loading`, OpenAI's `strict`), each named once, for the gateway's
/// warning; none for the same wire.
pub(crate) fn dropped_tool_fields(tools: &[ToolSpec], from: Kind, to: Option<Kind>) -> Vec<String> {
    if to.is_none_or(|to| to == from) {
        return Vec::new();
    }
    let mut names: Vec<String> = Vec::new();
    let mut name = |field: &str| {
        if !names.iter().any(|named| named == field) {
            names.push(field.to_owned());
        }
    };
    for tool in tools {
        match from {
            Kind::Anthropic => tool.extra.keys().for_each(|field| name(field)),
            Kind::OpenAiChat => {
                let kept = tool.extra.get(openai_chat::EXTRA_KEY);
                for place in ["tool", "function"] {
                    let fields = kept
                        .and_then(|kept| kept.get(place))
                        .and_then(Value::as_object);
                    fields
                        .into_iter()
                        .flatten()
                        .for_each(|(field, _)| name(field));
                }
            }
            #[cfg(feature = "openai-responses")]
            Kind::OpenAiResponses => {
                // A custom tool's object and a function's namespace are
                // carried (a function of one string argument; the calls'
                // namespace); the rest (`strict`, a custom tool's `format`)
                // is this wire's alone.
                const CARRIED: [&str; 4] = ["type", "name", "description", "namespace"];
                let kept = tool.extra.get(crate::provider::openai_responses::EXTRA_KEY);
                let fields = kept.and_then(Value::as_object).into_iter().flatten();
                fields
                    .filter(|(field, _)| !CARRIED.contains(&field.as_str()))
                    .for_each(|(field, _)| name(field));
            }
            _ => {}
        }
    }
    names
        .into_iter()
        .map(|field| format!("tool field `{field}`"))
        .collect()
}

/// How `kind` names the portable options, where this build has the wire.
fn names(kind: Kind) -> Option<&'static PortableNames> {
    match kind {
        Kind::OpenAiChat => Some(&openai_chat::portable::PORTABLE),
        #[cfg(feature = "openai-responses")]
        Kind::OpenAiResponses => Some(&crate::provider::openai_responses::portable::PORTABLE),
        #[cfg(not(feature = "openai-responses"))]
        Kind::OpenAiResponses => None,
        Kind::Anthropic => Some(&anthropic::portable::PORTABLE),
        #[cfg(feature = "gemini")]
        Kind::Gemini => Some(&crate::provider::gemini::portable::PORTABLE),
        #[cfg(not(feature = "gemini"))]
        Kind::Gemini => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn carried(extra: Value, from: &str, to: &str) -> (Value, Vec<String>) {
        let Value::Object(mut extra) = extra else {
            panic!("an object")
        };
        let dropped = carry(&mut extra, from.parse().unwrap(), to.parse().ok());
        (Value::Object(extra), dropped)
    }

    #[test]
    fn an_openai_clients_options_go_to_anthropic_under_its_names() {
        let extra = json!({"stop": ["END"], "top_p": 0.9, "user": "u-1", "seed": 7, "n": 1,
                           "stream_options": {"include_usage": true}, "logit_bias": {"1": 2}});
        let (extra, dropped) = carried(extra, "openai", "anthropic");
        assert_eq!(
            extra,
            json!({"stop": ["END"], "top_p": 0.9, "metadata": {"user_id": "u-1"}})
        );
        assert_eq!(dropped, ["seed", "logit_bias"]);
    }

    #[test]
    fn an_anthropic_clients_options_go_to_openai_and_gemini_under_their_names() {
        let extra = json!({"stop": ["END"], "top_k": 5, "metadata": {"user_id": "u-1"},
                           "thinking": {"type": "enabled", "budget_tokens": 1024}});
        let (openai, dropped) = carried(extra.clone(), "anthropic", "openai");
        assert_eq!(openai, json!({"stop": ["END"], "user": "u-1"}));
        assert_eq!(dropped, ["top_k", "thinking"]);
        let (gemini, dropped) = carried(extra, "anthropic", "gemini");
        assert_eq!(
            gemini,
            json!({"generationConfig": {"stopSequences": ["END"], "topK": 5}})
        );
        assert_eq!(dropped, ["metadata", "thinking"]);
    }

    #[cfg(feature = "gemini")]
    #[test]
    fn a_gemini_clients_options_come_out_of_its_generation_config() {
        let extra = json!({"generationConfig": {"topP": 0.9, "topK": 64, "stopSequences": ["END"],
                           "thinkingConfig": {"includeThoughts": true}}, "safetySettings": [],
                           "systemInstruction": {"role": "user"}});
        let (anthropic, dropped) = carried(extra.clone(), "gemini", "anthropic");
        assert_eq!(
            anthropic,
            json!({"top_p": 0.9, "top_k": 64, "stop": ["END"]})
        );
        assert_eq!(
            dropped,
            ["safetySettings", "generationConfig.thinkingConfig"],
            "what was dropped, by its own name: not the system instruction's role"
        );
        let (openai, dropped) = carried(extra.clone(), "gemini", "openai");
        assert_eq!(openai, json!({"top_p": 0.9, "stop": ["END"]}));
        assert_eq!(
            dropped,
            ["safetySettings", "topK", "generationConfig.thinkingConfig"]
        );
        assert_eq!(carried(extra.clone(), "gemini", "gemini"), (extra, vec![]));
    }

    #[test]
    fn the_same_wire_or_an_unknown_one_keeps_everything() {
        let extra = json!({"logit_bias": {"1": 2}, "n": 3});
        assert_eq!(
            carried(extra.clone(), "openai", "openai"),
            (extra.clone(), vec![])
        );
        assert_eq!(
            carried(extra.clone(), "openai", "scripted"),
            (extra, vec![])
        );
    }

    #[test]
    fn tool_fields_another_wire_has_no_place_for_are_named_once() {
        let mut deferred = ToolSpec::new("a", "", json!({}));
        deferred.extra.insert("defer_loading".into(), json!(true));
        let mut strict = ToolSpec::new("b", "", json!({}));
        strict.extra.insert(
            openai_chat::EXTRA_KEY.into(),
            json!({"function": {"strict": true}, "tool": {"x-kind": 1}}),
        );
        let anthropic = [deferred.clone(), deferred];
        let named =
            |tools: &[ToolSpec], from, to: &str| dropped_tool_fields(tools, from, to.parse().ok());
        assert_eq!(
            named(&anthropic, Kind::Anthropic, "openai"),
            ["tool field `defer_loading`"]
        );
        assert!(
            named(&anthropic, Kind::Anthropic, "anthropic").is_empty(),
            "same wire"
        );
        assert!(
            named(&anthropic, Kind::Anthropic, "scripted").is_empty(),
            "no wire"
        );
        assert_eq!(
            named(&[strict], Kind::OpenAiChat, "anthropic"),
            ["tool field `x-kind`", "tool field `strict`"]
        );
    }

    #[cfg(feature = "openai-responses")]
    #[test]
    fn a_responses_clients_tool_fields_are_named_but_what_is_carried() {
        use crate::provider::openai_responses::EXTRA_KEY;
        let mut custom = ToolSpec::new("apply_patch", "", json!({}));
        custom.extra.insert(
            EXTRA_KEY.into(),
            json!({"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}}),
        );
        let mut function = ToolSpec::new("close_agent", "", json!({}));
        function.extra.insert(
            EXTRA_KEY.into(),
            json!({"strict": false, "namespace": {"type": "namespace", "name": "multi_agent_v1"}}),
        );
        let named = dropped_tool_fields(
            &[custom, function],
            Kind::OpenAiResponses,
            Some(Kind::Anthropic),
        );
        assert_eq!(named, ["tool field `format`", "tool field `strict`"]);
    }
}

//! A request's provider-specific options (`options.extra`) when the client's
//! format and the upstream's wire differ: the portable ones go on under the
//! upstream's names, the rest are dropped and named — an upstream such as
//! Anthropic's refuses a body field it does not know, so an OpenAI client's
//! `user` or `seed` would otherwise fail every request.

use serde_json::{Map, Value, json};

/// Carries `extra`, decoded from a request in format `from` (`openai`,
/// `anthropic`), over to an upstream of wire `to` (`openai`, `anthropic`,
/// `gemini`; any other name, or the same, leaves it as it is). Returns the keys
/// dropped. (`n` above 1 was refused when the request was decoded.)
///
/// Portable: `stop` and `top_p` everywhere, `top_k` to Anthropic and Gemini,
/// `seed` to OpenAI and Gemini, the end user (OpenAI's `user`, Anthropic's
/// `metadata.user_id`) between OpenAI and Anthropic.
pub(crate) fn carry(extra: &mut Map<String, Value>, from: &str, to: &str) -> Vec<String> {
    let known = ["openai", "anthropic", "gemini"];
    if from == to || !known.contains(&from) || !known.contains(&to) || extra.is_empty() {
        return Vec::new();
    }
    let mut dropped = Vec::new();
    let mut carried = Map::new();
    let mut generation = Map::new();
    for (key, value) in std::mem::take(extra) {
        match (key.as_str(), to) {
            ("stop" | "top_p", "openai" | "anthropic") => {
                carried.insert(key, value);
            }
            ("top_k", "anthropic") | ("seed", "openai") => {
                carried.insert(key, value);
            }
            ("stop", "gemini") => {
                let stops = match value {
                    Value::String(stop) => json!([stop]),
                    stops => stops,
                };
                generation.insert("stopSequences".into(), stops);
            }
            ("top_p", "gemini") => {
                generation.insert("topP".into(), value);
            }
            ("top_k", "gemini") => {
                generation.insert("topK".into(), value);
            }
            ("seed", "gemini") => {
                generation.insert("seed".into(), value);
            }
            ("user", "anthropic") if value.is_string() => {
                carried.insert("metadata".into(), json!({"user_id": value}));
            }
            ("metadata", "openai") if value.get("user_id").is_some_and(Value::is_string) => {
                carried.insert("user".into(), value["user_id"].clone());
            }
            // Asked for by the client's format itself, not by the client.
            ("n", _) | ("stream_options", _) => {}
            _ => dropped.push(key),
        }
    }
    if !generation.is_empty() {
        carried.insert("generationConfig".into(), generation.into());
    }
    *extra = carried;
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;

    fn carried(extra: Value, from: &str, to: &str) -> (Value, Vec<String>) {
        let Value::Object(mut extra) = extra else {
            panic!("an object")
        };
        let dropped = carry(&mut extra, from, to);
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
}

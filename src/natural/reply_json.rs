//! The JSON value in a model's reply, for tools that ask a model for JSON.

use memchr::memchr2_iter;
use serde_json::Value;

/// The most `{` / `[` positions in prose tried as the start of a value, so that
/// a long reply full of brackets costs a bounded number of passes.
const CANDIDATES: usize = 16;

/// The JSON value a model's reply holds, found with the JSON protocol dialect's
/// fallbacks: the whole reply; else the body of a code fence (```` ```json ````
/// or ```` ``` ````); else the first `{` or `[` in the prose from which a value
/// parses (of the first 16). `None` when there is none.
///
/// Models asked for "JSON only" still wrap it in fences or prose; this reads all
/// three shapes.
///
/// ```
/// use lmstack::natural::json_in_reply;
/// use serde_json::json;
///
/// let reply = "Here are the boxes:\n```json\n{\"boxes\": []}\n```\nAnything else?";
/// assert_eq!(json_in_reply(reply), Some(json!({"boxes": []})));
/// assert_eq!(json_in_reply("I see [1, 2] things."), Some(json!([1, 2])));
/// assert_eq!(json_in_reply("No JSON here."), None);
/// ```
pub fn json_in_reply(reply: &str) -> Option<Value> {
    whole(reply)
        .or_else(|| fences(reply).find_map(whole))
        .or_else(|| {
            memchr2_iter(b'{', b'[', reply.as_bytes())
                .take(CANDIDATES)
                .find_map(|at| first_value(&reply[at..]))
        })
}

/// `text`, trimmed, when it is one JSON value.
fn whole(text: &str) -> Option<Value> {
    serde_json::from_str(text.trim()).ok()
}

/// The value at the start of `text`, whatever follows it.
fn first_value(text: &str) -> Option<Value> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .next()?
        .ok()
}

/// The bodies of the code fences in `text`, in order (an unclosed last fence
/// runs to the end).
fn fences(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let open = rest.find("```")?;
        let after = &rest[open + 3..];
        // The info string (`json`) runs to the end of the fence's line.
        let body = &after[after.find('\n').map_or(after.len(), |n| n + 1)..];
        let (inside, next) = match body.find("```") {
            Some(close) => (&body[..close], &body[close + 3..]),
            None => (body, ""),
        };
        rest = next;
        Some(inside)
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_whole_reply_a_fence_or_the_first_value_in_prose() {
        assert_eq!(json_in_reply(" {\"a\": 1}\n"), Some(json!({"a": 1})));
        assert_eq!(
            json_in_reply("```\n[1]\n```\n```json\n{\"b\": 2}\n```"),
            Some(json!([1]))
        );
        assert_eq!(
            json_in_reply("text ```json\nnot json\n``` then {\"c\": 3} and {\"d\": 4}"),
            Some(json!({"c": 3}))
        );
        assert_eq!(
            json_in_reply("unclosed ```json\n{\"e\": 5}\n"),
            Some(json!({"e": 5}))
        );
    }

    #[test]
    fn brackets_that_start_no_value_are_skipped_and_bounded() {
        assert_eq!(
            json_in_reply("a [b] c {d} then [1, {\"x\": true}]"),
            Some(json!([1, {"x": true}]))
        );
        assert_eq!(json_in_reply("{ [ { ["), None);
        // Past the sixteenth candidate nothing more is tried.
        let late = format!("{}[7]", "[x ".repeat(CANDIDATES));
        assert_eq!(json_in_reply(&late), None);
        let in_time = format!("{}[7]", "[x ".repeat(CANDIDATES - 1));
        assert_eq!(json_in_reply(&in_time), Some(json!([7])));
    }
}

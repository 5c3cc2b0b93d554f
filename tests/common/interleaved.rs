//! Parallel tool calls whose fragments interleave, as a wire may send them:
//! the calls, the order of their fragments, and the bodies of each wire that
//! carry them (OpenAI Chat chunks keyed by `index`, Anthropic blocks keyed by
//! `index`).

use lmstack::ToolCall;
use proptest::prelude::*;
use serde_json::{Value, json};

/// Calls cut into fragments, and the order the fragments are sent in.
#[derive(Clone, Debug)]
pub struct Interleaved {
    /// The calls, in the order they start.
    pub calls: Vec<ToolCall>,
    /// Each call's arguments text, cut into fragments (none empty).
    pub fragments: Vec<Vec<String>>,
    /// The fragments sent, in order: (call, fragment of it). Each call's own
    /// fragments keep their order, and calls start in the order of `calls`.
    pub order: Vec<(usize, usize)>,
}

impl Interleaved {
    /// Calls numbered `call_<n>`, `tool_<n>`, with the given arguments, each cut
    /// at the given byte counts (cycled; on character boundaries), sent in the
    /// order given by `picks`: each pick chooses among the calls with fragments
    /// left (modulo their count), the next call to start included.
    pub fn new(arguments: &[Value], cuts: &[usize], picks: &[usize]) -> Self {
        let calls: Vec<ToolCall> = arguments
            .iter()
            .enumerate()
            .map(|(n, args)| ToolCall::new(format!("call_{n}"), format!("tool_{n}"), args.clone()))
            .collect();
        let mut cuts = cuts.iter().cycle();
        let fragments = arguments
            .iter()
            .map(|args| {
                let text = args.to_string();
                let mut pieces = Vec::new();
                let mut rest = text.as_str();
                while !rest.is_empty() {
                    let mut at = (*cuts.next().unwrap_or(&usize::MAX)).clamp(1, rest.len());
                    while !rest.is_char_boundary(at) {
                        at += 1;
                    }
                    pieces.push(rest[..at].to_owned());
                    rest = &rest[at..];
                }
                pieces
            })
            .collect::<Vec<Vec<String>>>();
        let mut sent = vec![0; calls.len()];
        let mut started = 0;
        let mut order = Vec::new();
        let mut picks = picks.iter().cycle();
        loop {
            let open: Vec<usize> = (0..started.min(calls.len()))
                .filter(|&call| sent[call] < fragments[call].len())
                .chain((started < calls.len()).then_some(started))
                .collect();
            if open.is_empty() {
                break;
            }
            let call = open[picks.next().unwrap_or(&0) % open.len()];
            started = started.max(call + 1);
            order.push((call, sent[call]));
            sent[call] += 1;
        }
        Interleaved {
            calls,
            fragments,
            order,
        }
    }

    /// True when some fragment of a call comes after another call started.
    pub fn interleaves(&self) -> bool {
        self.order
            .windows(2)
            .any(|pair| pair[1].0 < pair[0].0 && pair[1].1 > 0)
    }

    /// The OpenAI Chat stream: one chunk per fragment, the first of each call
    /// with its `id` and name, then the finish and usage chunks and `[DONE]`.
    pub fn openai_sse(&self) -> Vec<u8> {
        let chunk = |delta: Value, finish: Value| {
            json!({"id": "chatcmpl-i", "object": "chat.completion.chunk", "created": 1,
                   "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        let mut chunks = vec![chunk(
            json!({"role": "assistant", "content": null}),
            Value::Null,
        )];
        for &(call, n) in &self.order {
            let mut fragment =
                json!({"index": call, "function": {"arguments": self.fragments[call][n]}});
            if n == 0 {
                fragment["id"] = self.calls[call].id.clone().into();
                fragment["type"] = "function".into();
                fragment["function"]["name"] = self.calls[call].name.clone().into();
            }
            chunks.push(chunk(json!({"tool_calls": [fragment]}), Value::Null));
        }
        chunks.push(chunk(json!({}), "tool_calls".into()));
        chunks.push(json!({"id": "chatcmpl-i", "choices": [],
                           "usage": {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}}));
        super::sse(&chunks)
    }

    /// The OpenAI Chat non-streaming body: every call whole.
    pub fn openai_json(&self) -> Vec<u8> {
        let calls: Vec<Value> = self
            .calls
            .iter()
            .map(|call| json!({"id": call.id, "type": "function",
                               "function": {"name": call.name, "arguments": call.arguments.to_string()}}))
            .collect();
        json!({"id": "chatcmpl-i", "object": "chat.completion", "created": 1, "model": "m",
               "choices": [{"index": 0, "finish_reason": "tool_calls",
                            "message": {"role": "assistant", "content": null, "tool_calls": calls}}],
               "usage": {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}})
        .to_string()
        .into_bytes()
    }

    /// The Anthropic stream: a `tool_use` block per call at its index, started
    /// at its first fragment and stopped after its last, deltas interleaved.
    pub fn typed_sse(&self) -> Vec<u8> {
        let mut events = vec![json!({"type": "message_start", "message": {"id": "msg_i",
            "type": "message", "role": "assistant", "content": [], "model": "m",
            "usage": {"input_tokens": 5, "output_tokens": 1}}})];
        for &(call, n) in &self.order {
            if n == 0 {
                events.push(json!({"type": "content_block_start", "index": call,
                    "content_block": {"type": "tool_use", "id": self.calls[call].id,
                                      "name": self.calls[call].name, "input": {}}}));
            }
            events.push(json!({"type": "content_block_delta", "index": call,
                "delta": {"type": "input_json_delta", "partial_json": self.fragments[call][n]}}));
            if n + 1 == self.fragments[call].len() {
                events.push(json!({"type": "content_block_stop", "index": call}));
            }
        }
        events.push(
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                           "usage": {"output_tokens": 9}}),
        );
        events.push(json!({"type": "message_stop"}));
        super::typed_sse(&events)
    }
}

/// An arguments object whose strings hold what could confuse a reader of
/// partial JSON: braces, brackets, quotes, backslashes, non-ASCII text.
pub fn arguments() -> impl Strategy<Value = Value> {
    let text = prop::sample::select(vec![
        "", "{", "}", "]", "\"", "\\", "é", "Paris", "a}b{c", "\\\"}",
    ]);
    let leaf = prop_oneof![
        prop::collection::vec(text, 0..3).prop_map(|parts| Value::from(parts.concat())),
        any::<i32>().prop_map(Value::from),
        Just(Value::Null),
    ];
    let value = leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-c]", inner, 0..3)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    });
    prop::collection::btree_map("[a-z]{1,3}", value, 0..4)
        .prop_map(|map| Value::Object(map.into_iter().collect()))
}

/// Two or three calls, cut and interleaved in any way.
pub fn interleaved() -> impl Strategy<Value = Interleaved> {
    (
        prop::collection::vec(arguments(), 2..=3),
        prop::collection::vec(1usize..12, 1..8),
        prop::collection::vec(0usize..6, 1..16),
    )
        .prop_map(|(arguments, cuts, picks)| Interleaved::new(&arguments, &cuts, &picks))
}

/// Fixed examples: two calls, and three, whose fragments alternate.
pub fn alternating() -> Vec<Interleaved> {
    let two = [
        json!({"city": "Paris", "unit": "celsius"}),
        json!({"q": "a}b{\"c", "n": [1, 2]}),
    ];
    let three = [
        json!({"city": "Paris"}),
        json!({"city": "Tokyo", "days": 3}),
        json!({"path": "C:\\tmp\\{x}", "lines": [1, [2]]}),
    ];
    vec![
        Interleaved::new(&two, &[4, 3], &[1, 1, 0, 1, 0]),
        Interleaved::new(&three, &[3, 5], &[1, 1, 1, 0, 2, 1]),
    ]
}

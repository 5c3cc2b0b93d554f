//! The parser on arbitrary text: no panic, and streaming agrees with parsing the
//! whole text, for every dialect and policy.

use lmstack::natural::{Dialect, NaturalToolUseParser, OnInvalid};
use lmstack::service::{Machine, Output};
use lmstack::testing::Chunking;
use lmstack::{Event, Joiner, ToolSpec};
use proptest::prelude::*;
use serde_json::json;

fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec::new(
        "f",
        "",
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "s": {"type": "string"}}}),
    )]
}

/// Text that is mostly markup pieces, so that arbitrary combinations of them
/// (broken, nested, split) are explored, plus any unicode.
fn text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        any::<String>(),
        Just("<tool_call".to_string()),
        Just("</tool_call>".to_string()),
        Just(" name=\"f\">".to_string()),
        Just("<function=f>".to_string()),
        Just("<parameter=a>".to_string()),
        Just("</parameter>".to_string()),
        Just("</function>".to_string()),
        Just("<function_calls><invoke name=\"f\">".to_string()),
        Just("<parameter name=\"s\">".to_string()),
        Just("</invoke></function_calls>".to_string()),
        Just("<think>".to_string()),
        Just("</think>".to_string()),
        Just("```".to_string()),
        Just("a <3 <= b\n  ".to_string()),
        Just("{\"name\": \"f\", \"arguments\": {\"a\": 1,".to_string()),
        Just(
            "{\"type\": \"tool_use\", \"tool_uses\": [{\"name\": \"f\", \"params\": {".to_string()
        ),
        Just("\"\\\\\"}]},\n ".to_string()),
        Just("<tool_call name=\"f\" id=\"x\">".to_string()),
        Just("<tool_response name=\"f\" id=\"x\">\n".to_string()),
        Just("<tool_response>".to_string()),
        Just("\n</tool_response>".to_string()),
        Just("\n---\n".to_string()),
        Just("[image 1: image/png]".to_string()),
        // The model families' markers.
        Just("<|tool_call|>[".to_string()),
        Just("[TOOL_CALLS]".to_string()),
        Just("[THINK]".to_string()),
        Just("[/THINK]".to_string()),
        Just("f[ARGS]".to_string()),
        Just("f[CALL_ID]a1[ARGS]{\"a\": [1, \"]\"]".to_string()),
        Just("<|python_tag|>".to_string()),
        Just("; ".to_string()),
        Just("<|python_start|>".to_string()),
        Just("<|python_end|>".to_string()),
        Just("\n[f(s='''a\\u00e9'''), f(a=(1,), s={'k': [None]})".to_string()),
        Just("\n{\"name\": \"f\", \"parameters\": {\"a\": 1}};".to_string()),
        Just("[f(a=1, s='x\\'y'), f(s=\"z\")]".to_string()),
        Just("<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0".to_string()),
        Just("<|tool_call_argument_begin|>".to_string()),
        Just("<|tool_call_end|><|tool_calls_section_end|>".to_string()),
        Just(
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n"
                .to_string()
        ),
        Just("<｜tool▁call▁begin｜>f<｜tool▁sep｜>".to_string()),
        Just("<｜tool▁call▁end｜><｜tool▁calls▁end｜>".to_string()),
        Just("<｜tool▁".to_string()),
        Just("<|tool_call_section_begin|>\n<|tool_call_begin|>".to_string()),
        Just("\n```<｜tool▁call▁end｜>\n".to_string()),
        Just("<|channel|>analysis<|message|>".to_string()),
        Just("<|channel|>commentary to=functions.f <|constrain|>json<|message|>".to_string()),
        Just("<|start|>assistant<|channel|>final<|message|>".to_string()),
        Just(
            "<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{\"a\": 1"
                .to_string()
        ),
        Just("<|constrain|>".to_string()),
        Just("<|call|>".to_string()),
        Just("<|end|>".to_string()),
        Just("<|return|>".to_string()),
        Just("<minimax:tool_call>\n<invoke name=\"f\">".to_string()),
        Just("</minimax:tool_call>".to_string()),
        Just("<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1".to_string()),
        Just("</arg_value>".to_string()),
    ];
    prop::collection::vec(piece, 0..12).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(512),
        ..ProptestConfig::default()
    }))]

    #[test]
    fn arbitrary_text_never_panics_and_streaming_agrees(
        text in text(),
        dialect in prop::sample::select(Dialect::ALL.to_vec()),
        policy in prop::sample::select(vec![OnInvalid::Text, OnInvalid::Mark, OnInvalid::Error]),
        transcript in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let parser = NaturalToolUseParser::new()
            .dialect(dialect)
            .on_invalid(policy)
            .transcript(transcript)
            .call_limit(512);
        let whole = parser.parse(&text, &tools());
        let mut machine = parser.machine(&tools(), 0).unwrap();
        let mut out = Output::new();
        let streamed = Chunking::Random { seed, max: 9 }
            .split(&text)
            .into_iter()
            .try_for_each(|piece| machine.push(Event::text(piece), &mut out))
            .and_then(|()| machine.finish(&mut out))
            .map(|()| Joiner::join(out.drain()));
        match (whole, streamed) {
            (Ok(whole), Ok(streamed)) => prop_assert_eq!(whole, streamed),
            (Err(whole), Err(streamed)) => prop_assert_eq!(whole.to_string(), streamed.to_string()),
            (whole, streamed) => prop_assert!(false, "{:?} vs {:?}", whole, streamed),
        }
    }
}

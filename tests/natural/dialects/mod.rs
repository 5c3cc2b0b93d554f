//! The model families' own dialects, one module per family. Each runs the unit
//! classes of the parser's tests on the checks in `harness`: markers split at
//! every byte, two calls in one piece, an unknown tool, malformed and truncated
//! arguments, unicode in and around, text before, between and after, near-miss
//! markers kept exactly, and the same messages streamed as whole.

pub mod harness;

mod deepseek;
mod glm;
mod granite;
mod harmony;
mod kimi;
mod llama3_json;
mod minimax;
mod mistral;
mod pythonic;

use lmstack::Message;
use lmstack::natural::Dialect;
use serde_json::json;

/// Every family's dialect also reads the tagged form, which the transformer
/// falls back to for a call the family's form cannot carry, with the text
/// around it kept.
#[test]
fn every_family_reads_the_tagged_form_too() {
    let families = Dialect::ALL
        .into_iter()
        .filter(|&d| d != Dialect::Tagged && d.reads(Dialect::Tagged) && d != Dialect::Auto);
    let text =
        "Checking.\n<tool_call name=\"get_weather\">{\"city\": \"Zürich\"}</tool_call>\nDone.";
    let mut read = Vec::new();
    for dialect in families {
        assert_eq!(
            harness::parse(dialect, text),
            vec![
                Message::assistant("Checking.\n"),
                Message::tool_calls(vec![harness::call(
                    "call_1",
                    "get_weather",
                    json!({"city": "Zürich"})
                )]),
                Message::assistant("\nDone."),
            ],
            "{dialect}"
        );
        read.push(dialect.name());
    }
    assert_eq!(
        read,
        [
            "mistral",
            "llama3-json",
            "pythonic",
            "kimi-k2",
            "deepseek",
            "glm",
            "harmony",
            "minimax",
            "granite"
        ]
    );
}

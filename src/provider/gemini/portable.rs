//! The portable options as `generateContent` names them, in its
//! `generationConfig`: `stopSequences` (always an array), `topP`, `topK`,
//! `seed`. It has no end user, and no reasoning effort every model takes.

use serde_json::{Map, Value};

use crate::provider::portable::{Portable, PortableNames};

/// Gemini's names for the portable options.
pub(crate) const PORTABLE: PortableNames = PortableNames {
    read: |_, _| None,
    write,
    own: &[],
};

fn write(option: Portable, value: Value, extra: &mut Map<String, Value>) -> bool {
    let (key, value) = match (option, value) {
        (Portable::Stop, Value::String(stop)) => ("stopSequences", Value::from(vec![stop])),
        (Portable::Stop, stops) => ("stopSequences", stops),
        (Portable::TopP, value) => ("topP", value),
        (Portable::TopK, value) => ("topK", value),
        (Portable::Seed, value) => ("seed", value),
        // `thinkingLevel` is Gemini 3's, `thinkingBudget` 2.5's: which one an
        // upstream takes is not known here.
        (Portable::EndUser | Portable::ReasoningEffort, _) => return false,
    };
    let config = extra
        .entry("generationConfig")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(config) = config {
        config.insert(key.into(), value);
    }
    true
}

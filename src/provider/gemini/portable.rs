//! The portable options as `generateContent` names them, in its
//! `generationConfig`: `stopSequences` (always an array), `topP`, `topK`,
//! `seed`. It has no end user, and no reasoning effort every model takes.

use serde_json::{Map, Value};

use crate::provider::portable::{Portable, PortableNames};

/// Gemini's names for the portable options: read from the top of `extra`,
/// where [`spread`] brings them; written into `generationConfig`.
pub(crate) const PORTABLE: PortableNames = PortableNames {
    read,
    write,
    own: &[],
};

/// The portable options of `generationConfig`, by their names.
const OPTIONS: [(&str, Portable); 4] = [
    ("stopSequences", Portable::Stop),
    ("topP", Portable::TopP),
    ("topK", Portable::TopK),
    ("seed", Portable::Seed),
];

fn read(key: &str, value: &Value) -> Option<(Portable, Value)> {
    let (_, option) = OPTIONS.iter().find(|(name, _)| *name == key)?;
    Some((*option, value.clone()))
}

/// Brings a Gemini client's portable options out of its `generationConfig`
/// to the top of `extra`, under their names, for another wire to read
/// (`generationConfig` goes when nothing else is left in it).
pub(crate) fn spread(extra: &mut Map<String, Value>) {
    let Some(Value::Object(config)) = extra.get_mut("generationConfig") else {
        return;
    };
    let moved: Vec<(&str, Value)> = OPTIONS
        .iter()
        .filter_map(|(name, _)| Some((*name, config.shift_remove(*name)?)))
        .collect();
    if config.is_empty() {
        extra.shift_remove("generationConfig");
    }
    for (name, value) in moved {
        extra.insert(name.into(), value);
    }
}

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

//! The portable options as `generateContent` names them, in its
//! `generationConfig`: `stopSequences` (always an array), `topP`, `topK`,
//! `seed`. It has no end user.

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

/// Brings a Gemini client's options out of the objects they sit in to the
/// top of `extra`, for another wire to read: the portable ones of
/// `generationConfig` under their own names, every other field of
/// `generationConfig`, `systemInstruction` and `toolConfig` under a dotted
/// name (`generationConfig.thinkingConfig`), so that what is dropped is named
/// as it is — all but the system instruction's `role`, which says nothing
/// off Gemini (its text is the system prompt on every wire).
pub(crate) fn spread(extra: &mut Map<String, Value>) {
    for object in ["systemInstruction", "generationConfig", "toolConfig"] {
        let Some(Value::Object(fields)) = extra.get(object) else {
            continue;
        };
        let fields = fields.clone();
        extra.shift_remove(object);
        for (key, value) in fields {
            let portable = object == "generationConfig" && read(&key, &value).is_some();
            let name = match portable {
                true => key,
                false if object == "systemInstruction" && key == "role" => continue,
                false => format!("{object}.{key}"),
            };
            extra.insert(name, value);
        }
    }
}

fn write(option: Portable, value: Value, extra: &mut Map<String, Value>) -> bool {
    let (key, value) = match (option, value) {
        (Portable::Stop, Value::String(stop)) => ("stopSequences", Value::from(vec![stop])),
        (Portable::Stop, stops) => ("stopSequences", stops),
        (Portable::TopP, value) => ("topP", value),
        (Portable::TopK, value) => ("topK", value),
        (Portable::Seed, value) => ("seed", value),
        (Portable::EndUser, _) => return false,
    };
    let config = extra
        .entry("generationConfig")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(config) = config {
        config.insert(key.into(), value);
    }
    true
}

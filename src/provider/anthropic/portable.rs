//! The portable options as Messages names them: `stop` (written as
//! `stop_sequences` by the lowering), `top_p`, `top_k`, and the end user as
//! `metadata.user_id`.

use serde_json::{Map, Value, json};

use crate::provider::portable::{Portable, PortableNames, read_common, write_common};

const OPTIONS: [Portable; 3] = [Portable::Stop, Portable::TopP, Portable::TopK];

/// Messages' names for the portable options.
pub(crate) const PORTABLE: PortableNames = PortableNames {
    read,
    write,
    // The tool choice's fields (`disable_parallel_tool_use`): no other wire
    // has a place for them.
    own: &[super::TOOL_CHOICE_KEY],
};

fn read(key: &str, value: &Value) -> Option<(Portable, Value)> {
    match key {
        "metadata" => value
            .get("user_id")
            .filter(|id| id.is_string())
            .map(|id| (Portable::EndUser, id.clone())),
        _ => read_common(key, value, &OPTIONS),
    }
}

fn write(option: Portable, value: Value, extra: &mut Map<String, Value>) -> bool {
    if option != Portable::EndUser {
        return write_common(option, value, extra, &OPTIONS);
    }
    extra.insert("metadata".into(), json!({ "user_id": value }));
    true
}

//! The portable options as the Responses API names them: `top_p`, the end
//! user as `user`, and `reasoning.effort` (`none` to `xhigh`; the rest of
//! `reasoning`, its `summary`, has no equivalent elsewhere). It has no stop
//! sequences, top-k or seed.

use serde_json::{Map, Value, json};

use crate::provider::portable::{
    EFFORTS, Portable, PortableNames, effort_within, read_common, write_common,
};

const OPTIONS: [Portable; 2] = [Portable::TopP, Portable::EndUser];

/// The Responses API's names for the portable options.
pub(crate) const PORTABLE: PortableNames = PortableNames {
    read,
    write,
    // The client's conversation with the gateway itself.
    own: &["previous_response_id", "store", "include"],
};

fn read(key: &str, value: &Value) -> Option<(Portable, Value)> {
    match key {
        "reasoning" => value
            .get("effort")
            .filter(|effort| effort.is_string())
            .map(|effort| (Portable::ReasoningEffort, effort.clone())),
        _ => read_common(key, value, &OPTIONS),
    }
}

fn write(option: Portable, value: Value, extra: &mut Map<String, Value>) -> bool {
    if option != Portable::ReasoningEffort {
        return write_common(option, value, extra, &OPTIONS);
    }
    let effort = effort_within(value, &EFFORTS[..6]);
    extra.insert("reasoning".into(), json!({ "effort": effort }));
    true
}

//! The portable options as Chat Completions names them: `stop`, `top_p`,
//! `seed`, the end user as `user`, and `reasoning_effort` (`none` to
//! `xhigh`).

use serde_json::{Map, Value};

use crate::provider::portable::{
    EFFORTS, Portable, PortableNames, effort_within, read_common, write_common,
};

const OPTIONS: [Portable; 4] = [
    Portable::Stop,
    Portable::TopP,
    Portable::Seed,
    Portable::EndUser,
];

/// Chat Completions' names for the portable options.
pub(crate) const PORTABLE: PortableNames = PortableNames {
    read,
    write,
    // Asked for by the format itself, not by the client.
    own: &["n", "stream_options"],
};

fn read(key: &str, value: &Value) -> Option<(Portable, Value)> {
    match key {
        "reasoning_effort" => Some((Portable::ReasoningEffort, value.clone())),
        _ => read_common(key, value, &OPTIONS),
    }
}

fn write(option: Portable, value: Value, extra: &mut Map<String, Value>) -> bool {
    if option != Portable::ReasoningEffort {
        return write_common(option, value, extra, &OPTIONS);
    }
    let effort = effort_within(value, &EFFORTS[..6]);
    extra.insert("reasoning_effort".into(), effort);
    true
}

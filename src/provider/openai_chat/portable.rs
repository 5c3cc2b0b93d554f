//! The portable options as Chat Completions names them: `stop`, `top_p`,
//! `seed`, and the end user as `user`.

use serde_json::{Map, Value};

use crate::provider::portable::{Portable, PortableNames, read_common, write_common};

const OPTIONS: [Portable; 3] = [Portable::Stop, Portable::TopP, Portable::Seed];

/// Chat Completions' names for the portable options.
pub(crate) const PORTABLE: PortableNames = PortableNames {
    read,
    write,
    // Asked for by the format itself, not by the client.
    own: &["n", "stream_options"],
};

fn read(key: &str, value: &Value) -> Option<(Portable, Value)> {
    match key {
        "user" => value
            .is_string()
            .then(|| (Portable::EndUser, value.clone())),
        _ => read_common(key, value, &OPTIONS),
    }
}

fn write(option: Portable, value: Value, extra: &mut Map<String, Value>) -> bool {
    if option != Portable::EndUser {
        return write_common(option, value, extra, &OPTIONS);
    }
    extra.insert("user".into(), value);
    true
}

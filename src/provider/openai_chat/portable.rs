//! The portable options as Chat Completions names them: `stop`, `top_p`,
//! `seed`, and the end user as `user`.

use serde_json::{Map, Value};

use crate::provider::portable::{Portable, PortableNames, read_common, write_common};

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
    read_common(key, value, &OPTIONS)
}

fn write(option: Portable, value: Value, extra: &mut Map<String, Value>) -> bool {
    write_common(option, value, extra, &OPTIONS)
}

//! The portable options as the Responses API names them: `top_p`, and the end
//! user as `user`. It has no stop sequences, top-k or seed.

use serde_json::{Map, Value};

use crate::provider::portable::{Portable, PortableNames, read_common, write_common};

const OPTIONS: [Portable; 2] = [Portable::TopP, Portable::EndUser];

/// The Responses API's names for the portable options.
pub(crate) const PORTABLE: PortableNames = PortableNames {
    read,
    write,
    // The client's conversation with the gateway itself.
    own: &["previous_response_id", "store", "include"],
};

fn read(key: &str, value: &Value) -> Option<(Portable, Value)> {
    read_common(key, value, &OPTIONS)
}

fn write(option: Portable, value: Value, extra: &mut Map<String, Value>) -> bool {
    write_common(option, value, extra, &OPTIONS)
}

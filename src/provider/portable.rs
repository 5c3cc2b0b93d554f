//! The request options that mean the same on every wire, each wire naming
//! them its own way. A gateway carries them from a client's wire to an
//! upstream's: read under the client's names, written under the upstream's.

use serde_json::{Map, Value};

/// An option every wire may have, under its own name on each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Portable {
    /// Stop sequences: one string, or an array of strings.
    Stop,
    /// Nucleus sampling.
    TopP,
    /// Top-k sampling.
    TopK,
    /// The sampling seed.
    Seed,
    /// The end user's id, a string.
    EndUser,
}

/// How one wire names the portable options in a request's `options.extra`.
#[derive(Debug)]
pub(crate) struct PortableNames {
    /// The portable option a key of this wire holds, and its value in the
    /// portable form; `None` when the key is the wire's own.
    pub read: fn(key: &str, value: &Value) -> Option<(Portable, Value)>,
    /// Writes an option into `extra` under this wire's name; `false` when the
    /// wire has no such option.
    pub write: fn(option: Portable, value: Value, extra: &mut Map<String, Value>) -> bool,
    /// Keys a client of this wire sends for the wire itself (streaming
    /// options): never carried, never reported as dropped.
    pub own: &'static [&'static str],
}

/// The options under the names most wires share (`stop`, `top_p`, `top_k`,
/// `seed`, and the end user as `user`, a string) that `wire` has, read as
/// they are.
pub(crate) fn read_common(
    key: &str,
    value: &Value,
    wire: &[Portable],
) -> Option<(Portable, Value)> {
    let option = match key {
        "stop" => Portable::Stop,
        "top_p" => Portable::TopP,
        "top_k" => Portable::TopK,
        "seed" => Portable::Seed,
        "user" if value.is_string() => Portable::EndUser,
        _ => return None,
    };
    wire.contains(&option).then(|| (option, value.clone()))
}

/// Writes `option` under its common name when `wire` has it.
pub(crate) fn write_common(
    option: Portable,
    value: Value,
    extra: &mut Map<String, Value>,
    wire: &[Portable],
) -> bool {
    let key = match option {
        Portable::Stop => "stop",
        Portable::TopP => "top_p",
        Portable::TopK => "top_k",
        Portable::Seed => "seed",
        Portable::EndUser => "user",
    };
    if !wire.contains(&option) {
        return false;
    }
    extra.insert(key.into(), value);
    true
}

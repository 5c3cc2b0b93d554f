//! `cache_control` on the wire ↔ the canonical [`CacheControl`]: taken out of a
//! block's, a message's or a tool's fields when decoding, put back when
//! lowering, in the same place.
//!
//! The wire form is `{"type":"ephemeral"}`, with `"ttl":"5m"` or `"1h"` when
//! the client names one; the canonical form drops the `type` (`ephemeral` is
//! the only one).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::message::{CacheControl, CacheTtl};

/// The field's name on every block and tool.
const FIELD: &str = "cache_control";

/// `cache_control` as the Messages API writes it.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    #[serde(rename = "type")]
    kind: Ephemeral,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ttl: Option<CacheTtl>,
}

/// The one cache type.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Ephemeral {
    Ephemeral,
}

/// Takes `cache_control` out of `fields`: `Ok(None)` when absent, an error
/// message (for the client) when it is not `{"type":"ephemeral","ttl"?}`.
pub(crate) fn take(fields: &mut Map<String, Value>) -> Result<Option<CacheControl>, String> {
    let Some(value) = fields.shift_remove(FIELD) else {
        return Ok(None);
    };
    let wire: Wire = serde_json::from_value(value).map_err(|error| {
        format!("{FIELD}: {error} (expected {{\"type\":\"ephemeral\",\"ttl\"?: \"5m\"|\"1h\"}})")
    })?;
    Ok(Some(CacheControl { ttl: wire.ttl }))
}

/// Writes `cache` into `fields` as the wire's `cache_control` (nothing for
/// `None`).
pub(crate) fn put(fields: &mut Map<String, Value>, cache: Option<CacheControl>) {
    if let Some(cache) = cache {
        let wire = Wire {
            kind: Ephemeral::Ephemeral,
            ttl: cache.ttl,
        };
        // A struct of unit enums: writing it cannot fail.
        fields.insert(FIELD.into(), serde_json::to_value(wire).unwrap_or_default());
    }
}

/// `fields` with `cache` put in.
pub(crate) fn with(
    mut fields: Map<String, Value>,
    cache: Option<CacheControl>,
) -> Map<String, Value> {
    put(&mut fields, cache);
    fields
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn take_reads_every_ttl_and_put_writes_it_back_in_the_same_form() {
        for wire in [
            json!({"type": "ephemeral"}),
            json!({"type": "ephemeral", "ttl": "5m"}),
            json!({"type": "ephemeral", "ttl": "1h"}),
        ] {
            let mut fields = Map::new();
            fields.insert(FIELD.into(), wire.clone());
            let cache = take(&mut fields).unwrap();
            assert!(fields.is_empty(), "taken out");
            assert_eq!(with(Map::new(), cache)[FIELD], wire);
        }
        assert_eq!(take(&mut Map::new()), Ok(None));
    }

    #[test]
    fn take_refuses_another_type_or_ttl() {
        for wire in [
            json!({"type": "persistent"}),
            json!({"type": "ephemeral", "ttl": "2h"}),
            json!("ephemeral"),
        ] {
            let mut fields = Map::new();
            fields.insert(FIELD.into(), wire);
            let error = take(&mut fields).unwrap_err();
            assert!(error.starts_with("cache_control: "), "{error}");
        }
    }
}

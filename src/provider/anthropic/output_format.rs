//! [`ResponseFormat`] as Messages writes it: `output_config.format`,
//! `{"type":"json_schema","schema":{…}}` (generally available, no beta
//! header; the beta's top-level `output_format` is read too). Messages has no
//! `name`, no `strict` (a schema is always followed) and no JSON-object mode:
//! `json_object` is not sent, and the provider's check of the reply still
//! holds the model to it.

use serde_json::{Map, Value, json};

use crate::{Error, ResponseFormat};

const CONFIG: &str = "output_config";
const FORMAT: &str = "format";
/// The beta's name, replaced by `output_config.format`.
const BETA: &str = "output_format";

/// Writes `format` into the body's flattened fields `extra`, beside any
/// other `output_config` setting there (`effort`).
pub(super) fn lower(format: &ResponseFormat, extra: &mut Map<String, Value>) {
    let Some(schema) = format.schema() else {
        return;
    };
    let format = json!({"type": "json_schema", "schema": schema});
    match extra.get_mut(CONFIG) {
        Some(Value::Object(config)) => {
            config.insert(FORMAT.into(), format);
        }
        _ => {
            extra.insert(CONFIG.into(), json!({ FORMAT: format }));
        }
    }
}

/// Takes a client's format out of `extra` (`output_config.format`, else
/// `output_format`), leaving the rest of `output_config`. A format that is not
/// a `json_schema` with a schema object is [`Error::InvalidRequest`].
pub(super) fn decode(extra: &mut Map<String, Value>) -> Result<Option<ResponseFormat>, Error> {
    let (format, at) = match extra.get_mut(CONFIG) {
        Some(Value::Object(config)) if config.contains_key(FORMAT) => {
            let format = config.remove(FORMAT);
            if config.is_empty() {
                extra.remove(CONFIG);
            }
            (format, "output_config.format")
        }
        _ => (extra.remove(BETA), BETA),
    };
    let Some(format) = format.filter(|format| !format.is_null()) else {
        return Ok(None);
    };
    match (
        format.get("type").and_then(Value::as_str),
        format.get("schema"),
    ) {
        (Some("json_schema"), Some(schema)) if schema.is_object() => {
            Ok(Some(ResponseFormat::json_schema(schema.clone())))
        }
        _ => Err(Error::InvalidRequest(format!(
            "{at}: only `{{\"type\": \"json_schema\", \"schema\": {{…}}}}` is served"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_joins_the_other_settings_and_reads_back() {
        let format = ResponseFormat::json_schema(json!({"type": "object"}));
        let mut extra = Map::new();
        extra.insert(CONFIG.into(), json!({"effort": "low"}));
        lower(&format, &mut extra);
        let expected = json!({"effort": "low", "format": {"type": "json_schema", "schema": {"type": "object"}}});
        assert_eq!(extra[CONFIG], expected);
        assert_eq!(decode(&mut extra).unwrap(), Some(format));
        assert_eq!(Value::Object(extra), json!({CONFIG: {"effort": "low"}}));
    }

    #[test]
    fn the_beta_name_is_read_and_json_object_is_not_sent() {
        let mut extra = Map::new();
        extra.insert(BETA.into(), json!({"type": "json_schema", "schema": {}}));
        assert_eq!(
            decode(&mut extra).unwrap(),
            Some(ResponseFormat::json_schema(json!({})))
        );
        assert!(extra.is_empty());
        lower(&ResponseFormat::JsonObject, &mut extra);
        assert!(extra.is_empty());
        extra.insert(BETA.into(), json!({"type": "text"}));
        assert!(decode(&mut extra).is_err());
    }
}

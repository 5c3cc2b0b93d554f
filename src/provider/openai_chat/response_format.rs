//! [`ResponseFormat`] as Chat Completions writes it: `response_format`,
//! `{"type":"json_object"}` or
//! `{"type":"json_schema","json_schema":{"name","schema","strict"}}`.

use serde_json::{Value, json};

use crate::provider::openai_shared::{json_schema_fields, read_json_format};
use crate::{Error, ResponseFormat};

/// The wire's `response_format` for `format`.
pub(super) fn lower(format: &ResponseFormat) -> Value {
    match format {
        ResponseFormat::JsonObject => json!({"type": "json_object"}),
        ResponseFormat::JsonSchema {
            name,
            schema,
            strict,
        } => {
            let json_schema = json_schema_fields(name.as_deref(), schema, *strict);
            json!({"type": "json_schema", "json_schema": json_schema})
        }
    }
}

/// A client's `response_format`: `Ok(Ok(format))` for JSON, `Ok(Err(value))`
/// for `text` (the default) or a type the canonical model does not know,
/// kept as it came. A `json_schema` without its schema is
/// [`Error::InvalidRequest`].
pub(super) fn decode(value: Value) -> Result<Result<ResponseFormat, Value>, Error> {
    let kind = value.get("type").and_then(Value::as_str);
    let at = "response_format.json_schema";
    match read_json_format(kind, value.get("json_schema"), at)? {
        Some(format) => Ok(Ok(format)),
        None => Ok(Err(value)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::openai_shared::DEFAULT_SCHEMA_NAME as DEFAULT_NAME;

    #[test]
    fn lowered_formats_read_back() {
        let formats = [
            ResponseFormat::JsonObject,
            ResponseFormat::json_schema(json!({"type": "object"})),
            ResponseFormat::JsonSchema {
                name: Some("city".into()),
                schema: json!({"type": "object", "required": ["name"]}),
                strict: Some(true),
            },
        ];
        for format in formats {
            let read = decode(lower(&format)).unwrap().unwrap();
            let named = match (&format, read) {
                (
                    ResponseFormat::JsonSchema { name: None, .. },
                    ResponseFormat::JsonSchema {
                        name,
                        schema,
                        strict,
                    },
                ) => {
                    assert_eq!(name.as_deref(), Some(DEFAULT_NAME));
                    ResponseFormat::JsonSchema {
                        name: None,
                        schema,
                        strict,
                    }
                }
                (_, read) => read,
            };
            assert_eq!(named, format);
        }
    }

    #[test]
    fn a_schema_is_lowered_to_the_wires_form() {
        let format = ResponseFormat::JsonSchema {
            name: None,
            schema: json!({"type": "object"}),
            strict: Some(true),
        };
        assert_eq!(
            lower(&format),
            json!({"type": "json_schema",
                   "json_schema": {"name": "response", "schema": {"type": "object"}, "strict": true}})
        );
        assert_eq!(
            lower(&ResponseFormat::JsonObject),
            json!({"type": "json_object"})
        );
    }

    #[test]
    fn text_and_other_types_stay_as_they_came() {
        for other in [
            json!({"type": "text"}),
            json!({"type": "grammar", "grammar": "x"}),
        ] {
            assert_eq!(decode(other.clone()).unwrap(), Err(other));
        }
        assert!(decode(json!({"type": "json_schema", "json_schema": {"name": "n"}})).is_err());
    }
}

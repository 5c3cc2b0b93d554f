//! JSON Schema checks of tool arguments, with validators compiled once per tool
//! and shared across requests.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use jsonschema::Validator;
use serde_json::Value;

use crate::{Error, ToolSpec};

/// Compiled validators by tool name. A tool whose schema changes is compiled
/// again; one whose schema is the same reuses its validator.
#[derive(Debug, Default)]
pub(crate) struct SchemaCache {
    validators: Mutex<HashMap<String, (Value, Arc<Validator>)>>,
}

impl SchemaCache {
    /// The validator of `tool`'s parameters schema.
    pub(crate) fn validator(&self, tool: &ToolSpec) -> Result<Arc<Validator>, Error> {
        let mut validators = self
            .validators
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((schema, validator)) = validators.get(&tool.name)
            && *schema == tool.parameters
        {
            return Ok(validator.clone());
        }
        let validator = jsonschema::validator_for(&tool.parameters).map_err(|error| {
            Error::InvalidRequest(format!(
                "the JSON Schema of tool `{}` is not valid: {error}",
                tool.name
            ))
        })?;
        let validator = Arc::new(validator);
        validators.insert(
            tool.name.clone(),
            (tool.parameters.clone(), validator.clone()),
        );
        Ok(validator)
    }
}

/// Checks `arguments`; the error lists every violation with where it is.
pub(crate) fn check(validator: &Validator, tool: &str, arguments: &Value) -> Result<(), String> {
    // The common case first: `is_valid` stops at once and builds no errors.
    if validator.is_valid(arguments) {
        return Ok(());
    }
    let problems: Vec<String> = validator
        .iter_errors(arguments)
        .map(|error| {
            let path = error.instance_path().to_string();
            if path.is_empty() {
                error.to_string()
            } else {
                format!("at `{path}`: {error}")
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the arguments of `{tool}` do not match its schema: {}",
            problems.join("; ")
        ))
    }
}

/// How the schema types one named parameter, for dialects that write values as
/// raw text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParamKind {
    /// A string: the raw text is the value.
    String,
    /// Not a string (number, boolean, array, object, null): the text is JSON.
    Json,
    /// Unknown: JSON when the text is a non-string JSON value, else the text.
    Unknown,
}

impl ParamKind {
    /// The kind of `param` in an object schema.
    pub(crate) fn of(schema: &Value, param: &str) -> ParamKind {
        let Some(property) = schema.get("properties").and_then(|p| p.get(param)) else {
            return ParamKind::Unknown;
        };
        match property.get("type") {
            Some(Value::String(kind)) if kind == "string" => ParamKind::String,
            Some(Value::String(_)) => ParamKind::Json,
            Some(Value::Array(kinds)) => {
                let non_null: Vec<&Value> = kinds.iter().filter(|k| *k != "null").collect();
                match non_null.as_slice() {
                    [only] if *only == "string" => ParamKind::String,
                    kinds if kinds.iter().all(|k| *k != "string") => ParamKind::Json,
                    _ => ParamKind::Unknown,
                }
            }
            _ if property
                .get("enum")
                .and_then(Value::as_array)
                .is_some_and(|values| values.iter().all(Value::is_string)) =>
            {
                ParamKind::String
            }
            _ => ParamKind::Unknown,
        }
    }

    /// The JSON value for raw text of this kind.
    pub(crate) fn value(self, raw: &str) -> Value {
        if self != ParamKind::String
            && let Ok(value) = serde_json::from_str::<Value>(raw.trim())
            && (self == ParamKind::Json || !value.is_string())
        {
            return value;
        }
        Value::String(raw.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn validators_are_compiled_once_per_schema() {
        let cache = SchemaCache::default();
        let tool = ToolSpec::new("t", "", json!({"type": "object", "required": ["a"]}));
        let first = cache.validator(&tool).unwrap();
        assert!(Arc::ptr_eq(&first, &cache.validator(&tool).unwrap()));
        let changed = ToolSpec::new("t", "", json!({"type": "object"}));
        assert!(!Arc::ptr_eq(&first, &cache.validator(&changed).unwrap()));
    }

    #[test]
    fn violations_say_where() {
        let cache = SchemaCache::default();
        let tool = ToolSpec::new(
            "t",
            "",
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n", "m"]}),
        );
        let validator = cache.validator(&tool).unwrap();
        assert!(check(&validator, "t", &json!({"n": 1, "m": 0})).is_ok());
        let message = check(&validator, "t", &json!({"n": "x"})).unwrap_err();
        assert!(
            message.contains("`/n`") && message.contains("\"m\""),
            "{message}"
        );
    }

    #[test]
    fn invalid_schemas_are_request_errors() {
        let cache = SchemaCache::default();
        let tool = ToolSpec::new("t", "", json!({"type": 12}));
        assert!(matches!(
            cache.validator(&tool),
            Err(Error::InvalidRequest(_))
        ));
    }

    #[test]
    fn parameter_kinds_follow_the_schema() {
        let schema = json!({"properties": {
            "s": {"type": "string"}, "n": {"type": "number"}, "o": {"type": ["string", "null"]},
            "m": {"type": ["string", "integer"]}, "e": {"enum": ["a", "b"]}, "x": {}
        }});
        let kinds: Vec<ParamKind> = ["s", "n", "o", "m", "e", "x", "missing"]
            .iter()
            .map(|p| ParamKind::of(&schema, p))
            .collect();
        use ParamKind::*;
        assert_eq!(
            kinds,
            vec![String, Json, String, Unknown, String, Unknown, Unknown]
        );
        assert_eq!(Json.value(" 42\n"), json!(42));
        assert_eq!(Json.value("not json"), json!("not json"));
        assert_eq!(Unknown.value("[1, 2]"), json!([1, 2]));
        assert_eq!(Unknown.value("\"quoted\""), json!("\"quoted\""));
        assert_eq!(String.value("42"), json!("42"));
    }
}

//! JSON Schema checks of tool arguments, with validators compiled once per tool
//! and shared across requests.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use jsonschema::Validator;
use serde::de::IgnoredAny;
use serde_json::Value;

use crate::validation::violations;
use crate::{Error, ToolSpec};

/// Compiled schemas by tool name. A tool whose schema changes is compiled
/// again; one whose schema is the same reuses its compiled form.
#[derive(Debug, Default)]
pub(crate) struct SchemaCache {
    validators: Mutex<HashMap<String, (Value, Arc<Compiled>)>>,
}

/// A tool's parameters schema, compiled: its validator, and how it types each
/// of its named parameters (for the dialects that write values as raw text).
#[derive(Debug)]
pub(crate) struct Compiled {
    pub(crate) validator: Validator,
    /// Each property's kind, sorted by name.
    kinds: Vec<(String, ParamKind)>,
}

impl Compiled {
    fn new(schema: &Value, validator: Validator) -> Self {
        let mut kinds: Vec<(String, ParamKind)> = schema
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|properties| properties.keys())
            .map(|name| (name.clone(), ParamKind::of(schema, name)))
            .collect();
        kinds.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Compiled { validator, kinds }
    }

    /// How the schema types `param` ([`ParamKind::of`], looked up).
    pub(crate) fn kind(&self, param: &str) -> ParamKind {
        self.kinds
            .binary_search_by(|(name, _)| name.as_str().cmp(param))
            .map_or(ParamKind::Unknown, |at| self.kinds[at].1)
    }
}

impl SchemaCache {
    /// `tool`'s parameters schema, compiled.
    pub(crate) fn compiled(&self, tool: &ToolSpec) -> Result<Arc<Compiled>, Error> {
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
        let compiled = Arc::new(Compiled::new(&tool.parameters, validator));
        validators.insert(
            tool.name.clone(),
            (tool.parameters.clone(), compiled.clone()),
        );
        Ok(compiled)
    }
}

/// Checks `arguments`; the error lists every violation with where it is.
pub(crate) fn check(validator: &Validator, tool: &str, arguments: &Value) -> Result<(), String> {
    violations(validator, arguments).map_err(|problems| {
        format!("the arguments of `{tool}` do not match its schema: {problems}")
    })
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

    /// The JSON text of raw text of this kind: the trimmed text itself when
    /// it is JSON of this kind (a string is never JSON, unknown is JSON when
    /// it is not a JSON string), else the text as a JSON string.
    pub(crate) fn json(self, raw: &str) -> Cow<'_, str> {
        let trimmed = raw.trim();
        let json = match self {
            ParamKind::String => false,
            ParamKind::Json => true,
            ParamKind::Unknown => !trimmed.starts_with('"'),
        };
        if json && serde_json::from_str::<IgnoredAny>(trimmed).is_ok() {
            return Cow::Borrowed(trimmed);
        }
        Cow::Owned(serde_json::to_string(raw).expect("a string serialises"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The value [`ParamKind::json`] stands for, built the plain way.
    fn value(kind: ParamKind, raw: &str) -> Value {
        if kind != ParamKind::String
            && let Ok(value) = serde_json::from_str::<Value>(raw.trim())
            && (kind == ParamKind::Json || !value.is_string())
        {
            return value;
        }
        Value::String(raw.to_owned())
    }

    #[test]
    fn validators_are_compiled_once_per_schema() {
        let cache = SchemaCache::default();
        let tool = ToolSpec::new("t", "", json!({"type": "object", "required": ["a"]}));
        let first = cache.compiled(&tool).unwrap();
        assert!(Arc::ptr_eq(&first, &cache.compiled(&tool).unwrap()));
        let changed = ToolSpec::new("t", "", json!({"type": "object"}));
        assert!(!Arc::ptr_eq(&first, &cache.compiled(&changed).unwrap()));
    }

    #[test]
    fn violations_say_where() {
        let cache = SchemaCache::default();
        let tool = ToolSpec::new(
            "t",
            "",
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n", "m"]}),
        );
        let validator = &cache.compiled(&tool).unwrap().validator;
        assert!(check(validator, "t", &json!({"n": 1, "m": 0})).is_ok());
        let message = check(validator, "t", &json!({"n": "x"})).unwrap_err();
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
            cache.compiled(&tool),
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
        // The compiled schema looks the same kinds up.
        let compiled = SchemaCache::default()
            .compiled(&ToolSpec::new("t", "", schema))
            .unwrap();
        let looked_up: Vec<ParamKind> = ["s", "n", "o", "m", "e", "x", "missing"]
            .iter()
            .map(|p| compiled.kind(p))
            .collect();
        assert_eq!(looked_up, kinds);
        for (kind, raw) in [
            (Json, " 42\n"),
            (Json, "not json"),
            (Json, "\"quoted\""),
            (Json, "{\"a\": [1, 2.5]}"),
            (Unknown, "[1, 2]"),
            (Unknown, "\"quoted\""),
            (Unknown, "two words"),
            (String, "7"),
        ] {
            let json: Value = serde_json::from_str(&kind.json(raw)).unwrap();
            assert_eq!(json, value(kind, raw), "{kind:?} {raw:?}");
        }
        assert_eq!(value(Json, " 42\n"), json!(42));
        assert_eq!(value(Json, "not json"), json!("not json"));
        assert_eq!(value(Unknown, "[1, 2]"), json!([1, 2]));
        assert_eq!(value(Unknown, "\"quoted\""), json!("\"quoted\""));
        assert_eq!(value(String, "42"), json!("42"));
    }
}

//! JSON Schema violations, said in one line: what the tools' arguments and a
//! structured reply are checked with.

use jsonschema::Validator;
use serde_json::Value;

/// Checks `value` against `validator`; the error lists every violation with
/// where it is, joined by `; `.
pub(crate) fn violations(validator: &Validator, value: &Value) -> Result<(), String> {
    // The common case first: `is_valid` stops at once and builds no errors.
    if validator.is_valid(value) {
        return Ok(());
    }
    let problems: Vec<String> = validator
        .iter_errors(value)
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
        Err(problems.join("; "))
    }
}

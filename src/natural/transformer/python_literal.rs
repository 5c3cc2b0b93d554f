//! Python literals and names, for the pythonic call form.

use serde_json::Value;

use crate::natural::scan::NAME_LIMIT;

/// A Python keyword-argument or function name: ASCII letters, digits, `_`,
/// not starting with a digit, at most [`NAME_LIMIT`] bytes, and not one of
/// Python's keywords (which Python, and parsers built on its `ast`, refuse).
pub(super) fn identifier(name: &str) -> bool {
    name.len() <= NAME_LIMIT
        && name.bytes().next().is_some_and(|b| !b.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !PYTHON_KEYWORDS.contains(&name)
}

/// Python's keywords (the soft ones, `match` or `type`, are names too).
const PYTHON_KEYWORDS: [&str; 35] = [
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// A JSON value as a Python literal: `None`, `True`/`False`, numbers, strings
/// in double quotes with Python's escapes, lists, dicts.
pub(super) fn python(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(number) => out.push_str(&number.to_string()),
        Value::String(text) => python_string(out, text),
        Value::Array(items) => {
            out.push('[');
            joined(out, items, ", ", python);
            out.push(']');
        }
        Value::Object(members) => {
            out.push('{');
            joined(out, members, ", ", |out, (key, item)| {
                python_string(out, key);
                out.push_str(": ");
                python(out, item);
            });
            out.push('}');
        }
    }
}

/// A Python string literal in double quotes.
fn python_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Writes each of `items` with `write`, `separator` between them.
pub(super) fn joined<I: IntoIterator>(
    out: &mut String,
    items: I,
    separator: &str,
    mut write: impl FnMut(&mut String, I::Item),
) {
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push_str(separator);
        }
        write(out, item);
    }
}

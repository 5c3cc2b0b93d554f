//! How the transformer spells JSON in text: pretty, or on one line as Python's
//! `json.dumps` writes it, with `</` escaped so that no closing tag can end it.

use serde::Serialize;
use serde_json::Value;

/// Pretty JSON, two spaces of indent.
pub(crate) fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).expect("a value serialises")
}

/// `text` with `</` escaped as `<\/` (the same JSON), so that no tag can end it.
pub(crate) fn escape_tags(text: &str) -> String {
    text.replace("</", "<\\/")
}

/// [`spaced`] JSON with `</` escaped: one line that no tag can end.
pub(crate) fn one_line(value: &impl Serialize) -> String {
    escape_tags(&spaced(value))
}

/// One-line JSON with a space after `:` and `,`, as Python's `json.dumps` writes
/// it (the form Hermes and Qwen chat templates show their models).
fn spaced(value: &impl Serialize) -> String {
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, Spaced);
    value
        .serialize(&mut serializer)
        .expect("a value serialises");
    String::from_utf8(out).expect("JSON is UTF-8")
}

/// The formatter of [`spaced`].
struct Spaced;

impl serde_json::ser::Formatter for Spaced {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        comma(writer, first)
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        comma(writer, first)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
    ) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

/// `, ` before every item but the first.
fn comma<W: ?Sized + std::io::Write>(writer: &mut W, first: bool) -> std::io::Result<()> {
    if first {
        Ok(())
    } else {
        writer.write_all(b", ")
    }
}

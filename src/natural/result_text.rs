//! The text form of tool results: written by the transformer, read back by the
//! parser, both here so that they cannot drift apart.
//!
//! ```text
//! <tool_response name="get_weather" id="call_1">
//! 18°C and sunny
//! </tool_response>
//!
//! <tool_response>
//! {"name": "get_weather", "id": "call_1", "content": "18°C and sunny"}
//! </tool_response>
//! ```
//!
//! The *body* of a result holds its content blocks, one after another on their
//! own lines. A text block is written as plain text; a text that is compact JSON
//! of an object or an array as pretty JSON; a text that would be misread (empty,
//! JSON-looking, holding `</tool_response>` or a placeholder line) as a JSON
//! string. An image, document or audio block cannot live in text: it is written
//! as a placeholder line (`[image 1: image/png]`, `[audio 2: audio/wav]`,
//! numbered within the message) and travels as a content block of the same
//! message.

use serde::Serialize;
use serde_json::Value;

use super::dialect::Dialect;
use super::json_text::{escape_tags, one_line, pretty};
use super::markers::TAGGED;
use super::metadata::PLACEHOLDERS_KEY;
use crate::{ContentBlock, Media, MediaSource, ToolResult};

/// Writes the opening tag of the tagged form's `element` with its `name` and
/// `id` attributes, without its `>`.
pub(crate) fn open_tag(out: &mut String, element: &str, name: &str, id: Option<&str>) {
    out.push('<');
    out.push_str(element);
    out.push_str(" name=");
    push_attr(out, name);
    if let Some(id) = id {
        out.push_str(" id=");
        push_attr(out, id);
    }
}

/// An attribute value in quotes: `"` unless the value holds one, then `'`.
fn push_attr(out: &mut String, value: &str) {
    let quote = if value.contains('"') { '\'' } else { '"' };
    out.push(quote);
    out.push_str(value);
    out.push(quote);
}

/// Writes one result — in Hermes's form for Hermes, in the tagged form for
/// every other dialect; its call id only when `ids` is set. Its media blocks are
/// numbered from `media.len() + 1` and pushed to `media`, each with the offset
/// in `out` just after its placeholder line, where the block belongs.
pub(crate) fn write_result(
    out: &mut String,
    result: &ToolResult,
    dialect: Dialect,
    ids: bool,
    media: &mut Vec<(usize, ContentBlock)>,
) {
    let id = ids.then_some(result.call_id.as_str());
    match dialect {
        Dialect::Hermes => {
            let first = media.len();
            let content = match structured(&result.content) {
                Some(value) => value,
                None => {
                    let mut body = String::new();
                    write_body(&mut body, &result.content, media);
                    Value::String(body)
                }
            };
            #[derive(Serialize)]
            struct Wire<'a> {
                name: &'a str,
                #[serde(skip_serializing_if = "Option::is_none")]
                id: Option<&'a str>,
                content: Value,
                #[serde(skip_serializing_if = "std::ops::Not::not")]
                is_error: bool,
            }
            let wire = Wire {
                name: &result.name,
                id,
                content,
                is_error: result.is_error,
            };
            out.push('<');
            out.push_str(TAGGED.response);
            out.push_str(">\n");
            out.push_str(&one_line(&wire));
            // Placeholders sit inside a JSON string here: the blocks follow the line.
            out.push('\n');
            let at = out.len();
            media[first..]
                .iter_mut()
                .for_each(|(offset, _)| *offset = at);
            out.push_str(TAGGED.response_close);
        }
        _ => {
            open_tag(out, TAGGED.response, &result.name, id);
            if result.is_error {
                out.push_str(" is_error=\"true\"");
            }
            out.push_str(">\n");
            write_body(out, &result.content, media);
            out.push('\n');
            out.push_str(TAGGED.response_close);
        }
    }
}

/// The content of a single text block holding compact JSON of an object or an
/// array, as that JSON (the Hermes `content` is then the value itself).
fn structured(content: &[ContentBlock]) -> Option<Value> {
    match content {
        [ContentBlock::Text { text, .. }] => compact_structure(text),
        _ => None,
    }
}

/// `text` parsed, when it is exactly the compact JSON of an object or array.
fn compact_structure(text: &str) -> Option<Value> {
    if !text.starts_with(['{', '[']) {
        return None;
    }
    let value: Value = serde_json::from_str(text).ok()?;
    (value.is_object() || value.is_array())
        .then(|| serde_json::to_string(&value).ok())
        .flatten()
        .filter(|compact| compact == text)
        .map(|_| value)
}

/// Writes the body: the blocks on their own lines.
fn write_body(out: &mut String, content: &[ContentBlock], media: &mut Vec<(usize, ContentBlock)>) {
    for (i, block) in content.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        match block {
            ContentBlock::Text { text, .. } => write_text(out, text),
            ContentBlock::Image(m) | ContentBlock::Document(m) | ContentBlock::Audio(m) => {
                let kind = MediaKind::of(block).map_or("media", MediaKind::name);
                out.push_str(&format!("[{kind} {}: {}]", media.len() + 1, describe(m)));
                media.push((out.len() + 1, block.clone()));
            }
        }
    }
}

fn write_text(out: &mut String, text: &str) {
    if let Some(value) = compact_structure(text) {
        out.push_str(&escape_tags(&pretty(&value)));
    } else if misread(text) {
        let quoted = serde_json::to_string(text).expect("a string serialises");
        out.push_str(&escape_tags(&quoted));
    } else {
        out.push_str(text);
    }
}

/// True when `text` written plainly would not read back as itself.
fn misread(text: &str) -> bool {
    text.is_empty()
        || text.contains(TAGGED.response_close)
        || text.lines().any(|line| placeholder(line).is_some())
        || serde_json::from_str::<Value>(text)
            .is_ok_and(|value| value.is_object() || value.is_array() || value.is_string())
}

/// What a placeholder line says of its media.
fn describe(media: &Media) -> String {
    let mut text = match &media.source {
        MediaSource::Base64 { media_type, .. } | MediaSource::Ref { media_type, .. } => {
            media_type.clone()
        }
        MediaSource::Url { url, .. } => url.clone(),
    };
    if let Some(name) = &media.name {
        text.push_str(", ");
        text.push_str(name);
    }
    text.replace([']', '\n'], " ")
}

/// The kind of media a placeholder line stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MediaKind {
    Image,
    Document,
    Audio,
}

impl MediaKind {
    const ALL: [MediaKind; 3] = [MediaKind::Image, MediaKind::Document, MediaKind::Audio];

    /// The kind of a media block (`None` for text).
    pub(crate) fn of(block: &ContentBlock) -> Option<MediaKind> {
        match block {
            ContentBlock::Image(_) => Some(MediaKind::Image),
            ContentBlock::Document(_) => Some(MediaKind::Document),
            ContentBlock::Audio(_) => Some(MediaKind::Audio),
            ContentBlock::Text { .. } => None,
        }
    }

    /// The word a placeholder line opens with.
    fn name(self) -> &'static str {
        match self {
            MediaKind::Image => "image",
            MediaKind::Document => "document",
            MediaKind::Audio => "audio",
        }
    }
}

/// Reads a placeholder line: `[image 3: …]` → (image, 3).
pub(crate) fn placeholder(line: &str) -> Option<(MediaKind, usize)> {
    let inner = line.strip_prefix('[')?.strip_suffix(']')?;
    let (kind, rest) = MediaKind::ALL.into_iter().find_map(|kind| {
        let rest = inner.strip_prefix(kind.name())?.strip_prefix(' ')?;
        Some((kind, rest))
    })?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let number = rest[..digits].parse().ok()?;
    let tail = &rest[digits..];
    let plain = tail.is_empty() || (tail.starts_with(": ") && !tail.contains(']'));
    (plain && number > 0).then_some((kind, number))
}

/// Reads a result body back into content blocks. A placeholder line becomes a
/// text block holding just that line, and its index is listed in `placeholders`
/// so that the caller can swap it for its media.
pub(crate) fn read_body(body: &str, placeholders: &mut Vec<usize>) -> Vec<ContentBlock> {
    let mut content = Vec::new();
    let mut text: Option<String> = None;
    for line in body.split('\n') {
        if placeholder(line).is_some() {
            if let Some(text) = text.take() {
                content.push(ContentBlock::text(read_text(&text)));
            }
            placeholders.push(content.len());
            content.push(ContentBlock::text(line));
        } else if let Some(text) = &mut text {
            text.push('\n');
            text.push_str(line);
        } else {
            text = Some(line.to_owned());
        }
    }
    match text {
        Some(text) if !(text.is_empty() && content.is_empty() && body.is_empty()) => {
            content.push(ContentBlock::text(read_text(&text)));
        }
        _ => {}
    }
    content
}

fn read_text(text: &str) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::String(text)) => text,
        Ok(value @ (Value::Object(_) | Value::Array(_))) => {
            serde_json::to_string(&value).expect("a value serialises")
        }
        _ => text.to_owned(),
    }
}

/// Reads a result back: `tagged` holds the tag's `name`, `id` and `is_error`;
/// without it the body is the Hermes JSON form, or a plain body (as Qwen chat
/// templates write it) whose call is known only by its place.
pub(crate) fn read_result(tagged: Option<(String, String, bool)>, body: &str) -> ToolResult {
    let body = unwrap_body(body);
    let mut placeholders = Vec::new();
    let mut result = match tagged {
        Some((name, call_id, is_error)) => ToolResult {
            is_error,
            ..ToolResult::new(call_id, name, read_body(body, &mut placeholders))
        },
        None => read_hermes(body, &mut placeholders)
            .unwrap_or_else(|| ToolResult::new("", "", read_body(body, &mut placeholders))),
    };
    if !placeholders.is_empty() {
        result
            .metadata
            .insert(PLACEHOLDERS_KEY, placeholders.into());
    }
    result
}

/// The Hermes form: `{"name", "id", "content", "is_error"}`.
fn read_hermes(body: &str, placeholders: &mut Vec<usize>) -> Option<ToolResult> {
    let Value::Object(mut object) = serde_json::from_str(body.trim()).ok()? else {
        return None;
    };
    let content = object.remove("content")?;
    let text = |value: Option<Value>| match value {
        Some(Value::String(text)) => text,
        _ => String::new(),
    };
    let content = match content {
        Value::String(body) => read_body(&body, placeholders),
        value => vec![ContentBlock::text(
            serde_json::to_string(&value).expect("a value serialises"),
        )],
    };
    let id = object
        .remove("id")
        .or_else(|| object.remove("tool_call_id"));
    Some(ToolResult {
        is_error: object.remove("is_error") == Some(Value::Bool(true)),
        ..ToolResult::new(text(id), text(object.remove("name")), content)
    })
}

/// Strips the newline after the opening tag and the one before the closing tag.
fn unwrap_body(body: &str) -> &str {
    let body = body.strip_prefix('\n').unwrap_or(body);
    body.strip_suffix('\n').unwrap_or(body)
}

/// Splits `text` at the media offsets and puts each block in its place.
pub(super) fn interleave(text: &str, media: Vec<(usize, ContentBlock)>) -> Vec<ContentBlock> {
    let mut content = Vec::with_capacity(2 * media.len() + 1);
    let mut from = 0;
    for (at, block) in media {
        if at > from {
            content.push(ContentBlock::text(&text[from..at]));
            from = at;
        }
        content.push(block);
    }
    if from < text.len() {
        content.push(ContentBlock::text(&text[from..]));
    }
    content
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(content: &[ContentBlock]) -> String {
        let mut out = String::new();
        write_body(&mut out, content, &mut Vec::new());
        out
    }

    #[test]
    fn every_text_reads_back_as_itself() {
        for text in [
            "18°C",
            "42",
            "true",
            "null",
            "",
            "\"quoted\"",
            "{\"a\":1}",
            "{\"a\": 1}",
            "[1,2]",
            "{\n  \"a\": 1\n}",
            "ends with a newline\n",
            "\nstarts with one",
            "a</tool_response>b",
            "[image 1: image/png]",
            "before\n[document 2]\nafter",
            "{not json",
        ] {
            let written = body(&[ContentBlock::text(text)]);
            assert_eq!(
                read_body(&written, &mut Vec::new()),
                vec![ContentBlock::text(text)],
                "{written:?}"
            );
        }
    }

    #[test]
    fn structured_text_is_pretty_and_plain_text_is_plain() {
        assert_eq!(
            body(&[ContentBlock::text("{\"a\":[1,2]}")]),
            "{\n  \"a\": [\n    1,\n    2\n  ]\n}"
        );
        assert_eq!(
            body(&[ContentBlock::text("18°C and sunny")]),
            "18°C and sunny"
        );
        assert_eq!(body(&[ContentBlock::text("42")]), "42");
        assert_eq!(
            body(&[ContentBlock::text("{\"a\": 1}")]),
            "\"{\\\"a\\\": 1}\""
        );
    }

    #[test]
    fn media_become_numbered_placeholders_at_their_place() {
        let image = ContentBlock::image_bytes("image/png", b"png");
        let document = ContentBlock::Document(
            Media::from_bytes("application/pdf", b"%PDF").with_name("r.pdf"),
        );
        let audio = ContentBlock::audio_bytes("audio/wav", b"RIFF");
        let mut media = Vec::new();
        let mut out = String::from("x");
        write_body(
            &mut out,
            &[
                ContentBlock::text("Drawn."),
                image.clone(),
                document.clone(),
                audio.clone(),
            ],
            &mut media,
        );
        assert_eq!(
            out,
            "xDrawn.\n[image 1: image/png]\n[document 2: application/pdf, r.pdf]\n[audio 3: audio/wav]"
        );
        assert_eq!(media[0], (out.find("\n[doc").unwrap() + 1, image));
        assert_eq!(media[1], (out.find("\n[audio").unwrap() + 1, document));
        assert_eq!(media[2], (out.len() + 1, audio));
        let mut placeholders = Vec::new();
        let read = read_body(&out[1..], &mut placeholders);
        assert_eq!(read[1], ContentBlock::text("[image 1: image/png]"));
        assert_eq!(placeholders, [1, 2, 3]);
        assert_eq!(
            placeholder("[document 2: application/pdf, r.pdf]"),
            Some((MediaKind::Document, 2))
        );
        assert_eq!(
            placeholder("[audio 3: audio/wav]"),
            Some((MediaKind::Audio, 3))
        );
        assert_eq!(placeholder("[audio3: audio/wav]"), None);
        assert_eq!(placeholder("[image 0]"), None);
        assert_eq!(placeholder("[image 1] and more"), None);
    }

    #[test]
    fn hermes_results_carry_everything_in_json() {
        let result = ToolResult {
            is_error: true,
            ..ToolResult::text("call_1", "f", "a</b>")
        };
        let mut out = String::new();
        write_result(&mut out, &result, Dialect::Hermes, true, &mut Vec::new());
        assert_eq!(
            out,
            "<tool_response>\n{\"name\": \"f\", \"id\": \"call_1\", \"content\": \"a<\\/b>\", \"is_error\": true}\n</tool_response>"
        );
        let body = out
            .strip_prefix("<tool_response>")
            .unwrap()
            .strip_suffix(TAGGED.response_close)
            .unwrap();
        assert_eq!(read_result(None, body), result);
        let structured = ToolResult::text("c", "f", "{\"a\":1}");
        let mut out = String::new();
        write_result(
            &mut out,
            &structured,
            Dialect::Hermes,
            true,
            &mut Vec::new(),
        );
        assert!(out.contains("\"content\": {\"a\": 1}"), "{out}");
        assert_eq!(
            read_result(None, "{\"content\": 42}").content,
            vec![ContentBlock::text("42")]
        );
    }
}

//! The text form of tool calls and tool results: written by the transformer,
//! read back by the parser. Both sides live here so that they cannot drift apart.
//!
//! A call, in the tagged and Hermes dialects (the families' own forms are
//! listed at [`RenderDialect`]):
//!
//! ```text
//! <tool_call name="get_weather" id="call_1">
//! {
//!   "city": "Paris"
//! }
//! </tool_call>
//!
//! <tool_call>
//! {"name": "get_weather", "id": "call_1", "arguments": {"city": "Paris"}}
//! </tool_call>
//! ```
//!
//! A result:
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

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::dialect::Dialect;
use super::scan::NAME_LIMIT;
use super::scan::xml_value::reads_raw_value;

use crate::{ContentBlock, InvalidCall, Media, MediaSource, Metadata, ToolCall, ToolResult};

/// The closing tag of a result.
pub(crate) const RESPONSE_CLOSE: &str = "</tool_response>";

/// The line between consecutive calls, and between consecutive results.
pub(crate) const SEPARATOR: &str = "\n---\n";

/// The dialects the transformer writes calls in: the tagged form, and each
/// model family's own call form. Results are always written in the tagged form
/// (Hermes: its JSON form), which every family's reading takes back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RenderDialect {
    /// `<tool_call name="F" id="…">` + pretty JSON arguments;
    /// `<tool_response name="F" id="…">` + the result (the default).
    #[default]
    Tagged,
    /// Hermes / Qwen2.5: `<tool_call>{"name": F, "id": …, "arguments": {…}}</tool_call>`;
    /// `<tool_response>{"name": F, "id": …, "content": …}</tool_response>`.
    Hermes,
    /// Mistral tokenizer v11+: `[TOOL_CALLS]F[CALL_ID]id[ARGS]{…}`, one marker
    /// per call.
    Mistral,
    /// Llama 3.x: `{"name": F, "parameters": {…}}`, one call per line.
    Llama3Json,
    /// Llama 4, Llama 3.2 1B/3B: `[f(a=1, b="x"), g()]`.
    Pythonic,
    /// Kimi K2: `<|tool_calls_section_begin|><|tool_call_begin|>functions.F:0<|tool_call_argument_begin|>{…}<|tool_call_end|><|tool_calls_section_end|>`.
    KimiK2,
    /// DeepSeek V3.1: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>F<｜tool▁sep｜>{…}<｜tool▁call▁end｜><｜tool▁calls▁end｜>`.
    DeepSeek,
    /// GLM-4.5/4.6: `<tool_call>F\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call>`.
    Glm,
    /// gpt-oss: `<|start|>assistant<|channel|>commentary to=functions.F <|constrain|>json<|message|>{…}<|call|>`.
    Harmony,
    /// MiniMax-M2: `<minimax:tool_call>\n<invoke name="F">\n<parameter name="p">v</parameter>\n</invoke>\n</minimax:tool_call>`.
    MiniMax,
    /// Granite 3.x: `<|tool_call|>[{"name": F, "arguments": {…}}]`.
    Granite,
}

impl RenderDialect {
    /// Every dialect the transformer writes.
    pub const ALL: [RenderDialect; 11] = [
        RenderDialect::Tagged,
        RenderDialect::Hermes,
        RenderDialect::Mistral,
        RenderDialect::Llama3Json,
        RenderDialect::Pythonic,
        RenderDialect::KimiK2,
        RenderDialect::DeepSeek,
        RenderDialect::Glm,
        RenderDialect::Harmony,
        RenderDialect::MiniMax,
        RenderDialect::Granite,
    ];

    /// The form a model was trained on, guessed from its name
    /// ([`Dialect::for_model`]): its family's own, Hermes for the Qwen family
    /// (Qwen3-Coder included), tagged for models it does not know.
    ///
    /// ```
    /// use lmstack::natural::RenderDialect;
    /// assert_eq!(RenderDialect::for_model("Qwen/Qwen2.5-7B-Instruct"), RenderDialect::Hermes);
    /// assert_eq!(RenderDialect::for_model("mistralai/Devstral-Small-2507"), RenderDialect::Mistral);
    /// assert_eq!(RenderDialect::for_model("openai/gpt-oss-20b"), RenderDialect::Harmony);
    /// assert_eq!(RenderDialect::for_model("smollm2-135m"), RenderDialect::Tagged);
    /// ```
    pub fn for_model(model: &str) -> Self {
        match Dialect::for_model(model) {
            Dialect::Qwen3Coder => RenderDialect::Hermes,
            native => RenderDialect::ALL
                .into_iter()
                .find(|written| written.dialect() == native)
                .unwrap_or_default(),
        }
    }

    /// The parser's dialect that reads what this one writes (a family's
    /// dialect also reads the tagged form its form falls back to).
    pub fn dialect(self) -> Dialect {
        match self {
            RenderDialect::Tagged => Dialect::Tagged,
            RenderDialect::Hermes => Dialect::Hermes,
            RenderDialect::Mistral => Dialect::Mistral,
            RenderDialect::Llama3Json => Dialect::Llama3Json,
            RenderDialect::Pythonic => Dialect::Pythonic,
            RenderDialect::KimiK2 => Dialect::KimiK2,
            RenderDialect::DeepSeek => Dialect::DeepSeek,
            RenderDialect::Glm => Dialect::Glm,
            RenderDialect::Harmony => Dialect::Harmony,
            RenderDialect::MiniMax => Dialect::MiniMax,
            RenderDialect::Granite => Dialect::Granite,
        }
    }

    /// The parser's dialect to read this one with when the text may hold
    /// other forms too: `auto` when it reads this form (tagged, Hermes, GLM,
    /// MiniMax), else [`dialect`](Self::dialect).
    pub fn read_by(self) -> Dialect {
        if Dialect::Auto.reads(self.dialect()) {
            Dialect::Auto
        } else {
            self.dialect()
        }
    }

    /// The CLI name: the name of the parser's dialect that reads it
    /// (`tagged`, `hermes`, `mistral`, `llama3-json`, `pythonic`, `kimi-k2`,
    /// `deepseek`, `glm`, `harmony`, `minimax`, `granite`).
    pub fn name(self) -> &'static str {
        self.dialect().name()
    }

    /// True when the form has a place for a call's id; the other forms keep
    /// ids in the message's metadata, as `call_ids(false)` does.
    pub(crate) fn writes_ids(self) -> bool {
        matches!(
            self,
            RenderDialect::Tagged | RenderDialect::Hermes | RenderDialect::Mistral
        )
    }

    /// What opens a run of calls, goes between two of them, and closes it.
    fn joints(self) -> (&'static str, &'static str, &'static str) {
        match self {
            RenderDialect::Tagged | RenderDialect::Hermes => ("", SEPARATOR, ""),
            RenderDialect::Mistral | RenderDialect::Harmony => ("", "", ""),
            RenderDialect::Llama3Json | RenderDialect::Glm => ("", "\n", ""),
            RenderDialect::Pythonic => ("[", ", ", "]"),
            RenderDialect::KimiK2 => (
                "<|tool_calls_section_begin|>",
                "",
                "<|tool_calls_section_end|>",
            ),
            RenderDialect::DeepSeek => ("<｜tool▁calls▁begin｜>", "", "<｜tool▁calls▁end｜>"),
            RenderDialect::MiniMax => ("<minimax:tool_call>\n", "\n", "\n</minimax:tool_call>"),
            RenderDialect::Granite => ("<|tool_call|>[", ", ", "]"),
        }
    }

    /// The tags around an XML form's parameter: before its key, between its
    /// key and its value, after its value.
    fn xml_tags(self) -> Option<(&'static str, &'static str, &'static str)> {
        match self {
            RenderDialect::Glm => Some(("<arg_key>", "</arg_key>\n<arg_value>", "</arg_value>")),
            RenderDialect::MiniMax => Some(("<parameter name=\"", "\">", "</parameter>")),
            _ => None,
        }
    }

    /// True when this form writes `call` so that it reads back as itself: its
    /// name (and id, when written) fit the form's bare text, and every value
    /// reads back as the same value. Otherwise the call goes in the tagged form.
    fn carries(self, call: &ToolCall, ids: bool) -> bool {
        let object = call.arguments.as_object();
        match self {
            RenderDialect::Tagged | RenderDialect::Hermes => true,
            RenderDialect::Llama3Json | RenderDialect::Granite => object.is_some(),
            RenderDialect::Pythonic => {
                identifier(&call.name)
                    && object.is_some_and(|args| args.keys().all(|key| identifier(key)))
            }
            RenderDialect::Mistral => {
                bare_name(&call.name) && object.is_some() && (!ids || bare_name(&call.id))
            }
            RenderDialect::KimiK2 | RenderDialect::DeepSeek | RenderDialect::Harmony => {
                bare_name(&call.name) && object.is_some()
            }
            RenderDialect::Glm | RenderDialect::MiniMax => {
                bare_name(&call.name)
                    && object.is_some_and(|args| {
                        args.iter()
                            .all(|(key, value)| bare_name(key) && xml_value(value, self).is_some())
                    })
            }
        }
    }
}

impl std::fmt::Display for RenderDialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for RenderDialect {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        RenderDialect::ALL
            .into_iter()
            .find(|dialect| dialect.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = RenderDialect::ALL.iter().map(|d| d.name()).collect();
                format!(
                    "unknown dialect `{name}`; the transformer writes: {}",
                    names.join(", ")
                )
            })
    }
}

/// A name a form writes bare: ASCII letters, digits, `_`, `-`, `.`, at most
/// [`NAME_LIMIT`] bytes.
fn bare_name(name: &str) -> bool {
    (1..=NAME_LIMIT).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// A Python keyword-argument or function name: ASCII letters, digits, `_`,
/// not starting with a digit, at most [`NAME_LIMIT`] bytes, and not one of
/// Python's keywords (which Python, and parsers built on its `ast`, refuse).
fn identifier(name: &str) -> bool {
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

/// Writes calls in a row, joined as the dialect joins several calls of one
/// message; a call its form cannot carry (see [`RenderDialect::carries`]) is
/// written in the tagged form, apart from the others by `---` lines. Ids only
/// when `ids` is set; `first` is the number, in the conversation, of the first
/// call (Kimi K2's ids count the conversation's calls).
pub(crate) fn write_calls(
    out: &mut String,
    calls: &[ToolCall],
    dialect: RenderDialect,
    ids: bool,
    first: usize,
) {
    let mut number = first;
    let form = |call: &ToolCall| {
        if dialect.carries(call, ids) {
            dialect
        } else {
            RenderDialect::Tagged
        }
    };
    for (i, run) in calls.chunk_by(|a, b| form(a) == form(b)).enumerate() {
        if i > 0 {
            out.push_str(SEPARATOR);
        }
        let form = form(&run[0]);
        let (open, join, close) = form.joints();
        out.push_str(open);
        for (index, call) in run.iter().enumerate() {
            if index > 0 {
                out.push_str(join);
            }
            let id = ids.then_some(call.id.as_str());
            write_call(out, &call.name, id, number, &call.arguments, form);
            number += 1;
        }
        out.push_str(close);
    }
}

/// A sample call with arguments `arguments`, as a model should write it (no id).
pub(crate) fn write_example(
    out: &mut String,
    name: &str,
    arguments: &Value,
    dialect: RenderDialect,
) {
    write_calls(
        out,
        &[ToolCall::new("", name, arguments.clone())],
        dialect,
        false,
        0,
    );
}

/// Writes one call in `dialect`'s form, which carries it; `number` is its
/// number in the conversation (Kimi K2's ids count calls).
fn write_call(
    out: &mut String,
    name: &str,
    id: Option<&str>,
    number: usize,
    arguments: &Value,
    dialect: RenderDialect,
) {
    match dialect {
        RenderDialect::Tagged => {
            out.push_str("<tool_call name=");
            push_attr(out, name);
            if let Some(id) = id {
                out.push_str(" id=");
                push_attr(out, id);
            }
            out.push_str(">\n");
            out.push_str(&pretty(arguments));
            out.push_str("\n</tool_call>");
        }
        RenderDialect::Hermes => {
            out.push_str("<tool_call>\n");
            json_call(out, name, id, "arguments", arguments);
            out.push_str("\n</tool_call>");
        }
        RenderDialect::Llama3Json => json_call(out, name, None, "parameters", arguments),
        RenderDialect::Granite => json_call(out, name, None, "arguments", arguments),
        RenderDialect::Mistral => {
            out.push_str("[TOOL_CALLS]");
            out.push_str(name);
            if let Some(id) = id {
                out.push_str("[CALL_ID]");
                out.push_str(id);
            }
            out.push_str("[ARGS]");
            out.push_str(&json(arguments));
        }
        RenderDialect::KimiK2 => {
            out.push_str(&format!(
                "<|tool_call_begin|>functions.{name}:{number}<|tool_call_argument_begin|>{}<|tool_call_end|>",
                json(arguments)
            ));
        }
        RenderDialect::DeepSeek => {
            out.push_str(&format!(
                "<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>{}<｜tool▁call▁end｜>",
                json(arguments)
            ));
        }
        RenderDialect::Harmony => {
            out.push_str(&format!(
                "<|start|>assistant<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>{}<|call|>",
                json(arguments)
            ));
        }
        RenderDialect::Pythonic => {
            out.push_str(name);
            out.push('(');
            for (i, (key, value)) in arguments.as_object().into_iter().flatten().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(key);
                out.push('=');
                python(out, value);
            }
            out.push(')');
        }
        RenderDialect::Glm => {
            out.push_str("<tool_call>");
            out.push_str(name);
            out.push('\n');
            write_params(out, arguments, dialect);
            out.push_str("</tool_call>");
        }
        RenderDialect::MiniMax => {
            out.push_str("<invoke name=\"");
            out.push_str(name);
            out.push_str("\">\n");
            write_params(out, arguments, dialect);
            out.push_str("</invoke>");
        }
    }
}

/// `{"name": F, ["id": …, ]"KEY": {…}}`, one line.
fn json_call(out: &mut String, name: &str, id: Option<&str>, key: &str, arguments: &Value) {
    out.push_str("{\"name\": ");
    out.push_str(&json(&Value::from(name)));
    if let Some(id) = id {
        out.push_str(", \"id\": ");
        out.push_str(&json(&Value::from(id)));
    }
    out.push_str(&format!(", \"{key}\": {}}}", json(arguments)));
}

/// One-line JSON with `</` escaped as `<\/`, so that no tag can end it.
fn json(value: &Value) -> String {
    spaced(value).replace("</", "<\\/")
}

/// An XML form's parameters, one per line, each value as [`xml_value`] writes it.
fn write_params(out: &mut String, arguments: &Value, dialect: RenderDialect) {
    let Some((open, between, close)) = dialect.xml_tags() else {
        return;
    };
    for (key, value) in arguments.as_object().into_iter().flatten() {
        out.push_str(open);
        out.push_str(key);
        out.push_str(between);
        out.push_str(&xml_value(value, dialect).unwrap_or_default());
        out.push_str(close);
        out.push('\n');
    }
}

/// A value as the XML forms (GLM, MiniMax) write it: a string raw, anything
/// else as JSON (as their templates do); `None` for a value that would not
/// read back as itself whatever the schema says — a string that reads as
/// another JSON value or holds the closing tag (which this parser would read
/// back, but a reader that takes the first closing tag would not), or a value
/// the parser's scan would not give back whole ([`reads_raw_value`]: a tag in
/// it that ends a value without the closing tag — the next parameter, the end
/// of the call or block — or a wrapping newline).
fn xml_value(value: &Value, dialect: RenderDialect) -> Option<String> {
    let text = match value {
        Value::String(text) => {
            let other_json =
                serde_json::from_str::<Value>(text.trim()).is_ok_and(|v| !v.is_string());
            let close = dialect.xml_tags().map_or("", |(_, _, close)| close);
            (!other_json && !text.contains(close)).then(|| text.clone())?
        }
        value => json(value),
    };
    reads_raw_value(dialect == RenderDialect::Glm, &text).then_some(text)
}

/// A JSON value as a Python literal: `None`, `True`/`False`, numbers, strings
/// in double quotes with Python's escapes, lists, dicts.
fn python(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(number) => out.push_str(&number.to_string()),
        Value::String(text) => python_string(out, text),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                python(out, item);
            }
            out.push(']');
        }
        Value::Object(members) => {
            out.push('{');
            for (i, (key, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                python_string(out, key);
                out.push_str(": ");
                python(out, item);
            }
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

/// Writes one result — in Hermes's form for Hermes, in the tagged form for
/// every other dialect; its call id only when `ids` is set. Its media blocks are
/// numbered from `media.len() + 1` and pushed to `media`, each with the offset
/// in `out` just after its placeholder line, where the block belongs.
pub(crate) fn write_result(
    out: &mut String,
    result: &ToolResult,
    dialect: RenderDialect,
    ids: bool,
    media: &mut Vec<(usize, ContentBlock)>,
) {
    let id = ids.then_some(result.call_id.as_str());
    match dialect {
        RenderDialect::Hermes => {
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
            out.push_str("<tool_response>\n");
            out.push_str(&spaced(&wire).replace("</", "<\\/"));
            // Placeholders sit inside a JSON string here: the blocks follow the line.
            out.push('\n');
            let at = out.len();
            media[first..]
                .iter_mut()
                .for_each(|(offset, _)| *offset = at);
            out.push_str(RESPONSE_CLOSE);
        }
        _ => {
            out.push_str("<tool_response name=");
            push_attr(out, &result.name);
            if let Some(id) = id {
                out.push_str(" id=");
                push_attr(out, id);
            }
            if result.is_error {
                out.push_str(" is_error=\"true\"");
            }
            out.push_str(">\n");
            write_body(out, &result.content, media);
            out.push('\n');
            out.push_str(RESPONSE_CLOSE);
        }
    }
}

/// The content of a single text block holding compact JSON of an object or an
/// array, as that JSON (the Hermes `content` is then the value itself).
fn structured(content: &[ContentBlock]) -> Option<Value> {
    match content {
        [ContentBlock::Text { text }] => compact_structure(text),
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
            ContentBlock::Text { text } => write_text(out, text),
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
        out.push_str(&pretty(&value).replace("</", "<\\/"));
    } else if misread(text) {
        let quoted = serde_json::to_string(text).expect("a string serialises");
        out.push_str(&quoted.replace("</", "<\\/"));
    } else {
        out.push_str(text);
    }
}

/// True when `text` written plainly would not read back as itself.
fn misread(text: &str) -> bool {
    text.is_empty()
        || text.contains(RESPONSE_CLOSE)
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

/// The metadata key of a result read back whose content holds placeholder
/// lines: the indexes of the text blocks that stand for media.
pub(crate) const PLACEHOLDERS_KEY: &str = "media_placeholders";

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

/// One aggregate of a message in the single form, as kept under
/// `tool_aggregates`: how many call/response pairs of the message are its, and
/// its own metadata.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Part {
    pub(crate) pairs: usize,
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub(crate) metadata: Metadata,
}

/// The data of a call and its result that has no place in the text.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Extras {
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    call_metadata: Metadata,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    provider_executed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    invalid: Option<InvalidCall>,
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    result_metadata: Metadata,
}

/// The extras of `calls` and their `results` (in call order, or none), by call
/// id; `None` when there are none.
pub(crate) fn extras(calls: &[ToolCall], results: &[ToolResult]) -> Option<Value> {
    let mut by_id = serde_json::Map::new();
    for (i, call) in calls.iter().enumerate() {
        let extras = Extras {
            call_metadata: call.metadata.clone(),
            provider_executed: call.provider_executed,
            invalid: call.invalid.clone(),
            result_metadata: results
                .get(i)
                .map(|r| r.metadata.clone())
                .unwrap_or_default(),
        };
        let value = serde_json::to_value(extras).expect("extras serialise");
        if value.as_object().is_some_and(|object| !object.is_empty()) {
            by_id.insert(call.id.clone(), value);
        }
    }
    (!by_id.is_empty()).then_some(Value::Object(by_id))
}

/// Puts the extras written by [`extras`] back on the calls and results they
/// belong to.
pub(crate) fn apply_extras(extras: &Value, calls: &mut [ToolCall], results: &mut [ToolResult]) {
    let Some(by_id) = extras.as_object() else {
        return;
    };
    for call in calls {
        let Some(extras) = by_id.get(&call.id) else {
            continue;
        };
        let Ok(extras) = Extras::deserialize(extras) else {
            continue;
        };
        call.metadata = extras.call_metadata;
        call.provider_executed = extras.provider_executed;
        call.invalid = extras.invalid;
        if let Some(result) = results.iter_mut().find(|r| r.call_id == call.id) {
            result.metadata = extras.result_metadata;
        }
    }
}

/// Strips the newline after the opening tag and the one before the closing tag.
fn unwrap_body(body: &str) -> &str {
    let body = body.strip_prefix('\n').unwrap_or(body);
    body.strip_suffix('\n').unwrap_or(body)
}

/// An attribute value in quotes: `"` unless the value holds one, then `'`.
fn push_attr(out: &mut String, value: &str) {
    let quote = if value.contains('"') { '\'' } else { '"' };
    out.push(quote);
    out.push_str(value);
    out.push(quote);
}

/// Pretty JSON, two spaces of indent.
fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).expect("a value serialises")
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

/// The metadata key under which call and result data that has no place in the
/// text (their own metadata, `provider_executed`, `invalid`) is kept.
pub const TOOL_METADATA_KEY: &str = "tool_metadata";

/// The metadata key of a single-form message holding several aggregates, or
/// other sources' metadata: each aggregate's pair count and own metadata, in
/// order (`[{"pairs": 2, "metadata": {…}}]`).
pub const TOOL_AGGREGATES_KEY: &str = "tool_aggregates";

/// The metadata key that keeps the call ids the text leaves out (see
/// [`NaturalToolUseTransformer::call_ids`](super::NaturalToolUseTransformer::call_ids)): the call id of every call and
/// response block of the message, in order.
pub const TOOL_CALL_IDS_KEY: &str = "tool_call_ids";

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
    use serde_json::json;

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
        write_result(
            &mut out,
            &result,
            RenderDialect::Hermes,
            true,
            &mut Vec::new(),
        );
        assert_eq!(
            out,
            "<tool_response>\n{\"name\": \"f\", \"id\": \"call_1\", \"content\": \"a<\\/b>\", \"is_error\": true}\n</tool_response>"
        );
        let body = out
            .strip_prefix("<tool_response>")
            .unwrap()
            .strip_suffix(RESPONSE_CLOSE)
            .unwrap();
        assert_eq!(read_result(None, body), result);
        let structured = ToolResult::text("c", "f", "{\"a\":1}");
        let mut out = String::new();
        write_result(
            &mut out,
            &structured,
            RenderDialect::Hermes,
            true,
            &mut Vec::new(),
        );
        assert!(out.contains("\"content\": {\"a\": 1}"), "{out}");
        assert_eq!(
            read_result(None, "{\"content\": 42}").content,
            vec![ContentBlock::text("42")]
        );
    }

    /// `calls` written in `dialect`, with ids where its form has a place.
    fn written(dialect: RenderDialect, calls: &[ToolCall]) -> String {
        let mut out = String::new();
        write_calls(&mut out, calls, dialect, dialect.writes_ids(), 0);
        out
    }

    /// The exact text of one call, and of two, in `dialect`.
    fn check_form(dialect: RenderDialect, one: &str, two: &str) {
        let weather = ToolCall::new("call_1", "get_weather", json!({"city": "Paris"}));
        let add = ToolCall::new("call_2", "add", json!({"a": 1, "b": true}));
        assert_eq!(
            written(dialect, std::slice::from_ref(&weather)),
            one,
            "{dialect}"
        );
        assert_eq!(written(dialect, &[weather, add]), two, "{dialect}");
    }

    #[test]
    fn tagged_and_hermes_calls() {
        let weather = "<tool_call name=\"get_weather\" id=\"call_1\">\n{\n  \"city\": \"Paris\"\n}\n</tool_call>";
        check_form(
            RenderDialect::Tagged,
            weather,
            &format!(
                "{weather}\n---\n<tool_call name=\"add\" id=\"call_2\">\n{{\n  \"a\": 1,\n  \"b\": true\n}}\n</tool_call>"
            ),
        );
        let weather = "<tool_call>\n{\"name\": \"get_weather\", \"id\": \"call_1\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
        check_form(
            RenderDialect::Hermes,
            weather,
            &format!(
                "{weather}\n---\n<tool_call>\n{{\"name\": \"add\", \"id\": \"call_2\", \"arguments\": {{\"a\": 1, \"b\": true}}}}\n</tool_call>"
            ),
        );
    }

    #[test]
    fn mistral_calls_one_marker_each_with_their_ids() {
        check_form(
            RenderDialect::Mistral,
            "[TOOL_CALLS]get_weather[CALL_ID]call_1[ARGS]{\"city\": \"Paris\"}",
            "[TOOL_CALLS]get_weather[CALL_ID]call_1[ARGS]{\"city\": \"Paris\"}\
             [TOOL_CALLS]add[CALL_ID]call_2[ARGS]{\"a\": 1, \"b\": true}",
        );
    }

    #[test]
    fn llama3_json_calls_one_per_line() {
        check_form(
            RenderDialect::Llama3Json,
            "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
            "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n\
             {\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": true}}",
        );
    }

    #[test]
    fn pythonic_calls_in_one_list() {
        check_form(
            RenderDialect::Pythonic,
            "[get_weather(city=\"Paris\")]",
            "[get_weather(city=\"Paris\"), add(a=1, b=True)]",
        );
    }

    #[test]
    fn kimi_k2_calls_in_one_section_numbered() {
        check_form(
            RenderDialect::KimiK2,
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0\
             <|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_calls_section_end|>",
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0\
             <|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|>\
             <|tool_call_begin|>functions.add:1<|tool_call_argument_begin|>{\"a\": 1, \"b\": true}\
             <|tool_call_end|><|tool_calls_section_end|>",
        );
    }

    #[test]
    fn deepseek_calls_in_one_section() {
        check_form(
            RenderDialect::DeepSeek,
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}\
             <｜tool▁call▁end｜><｜tool▁calls▁end｜>",
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}\
             <｜tool▁call▁end｜><｜tool▁call▁begin｜>add<｜tool▁sep｜>{\"a\": 1, \"b\": true}\
             <｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        );
    }

    #[test]
    fn glm_calls_one_block_each() {
        check_form(
            RenderDialect::Glm,
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>",
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>\n\
             <tool_call>add\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n\
             <arg_key>b</arg_key>\n<arg_value>true</arg_value>\n</tool_call>",
        );
    }

    #[test]
    fn harmony_calls_one_message_each() {
        check_form(
            RenderDialect::Harmony,
            "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json\
             <|message|>{\"city\": \"Paris\"}<|call|>",
            "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json\
             <|message|>{\"city\": \"Paris\"}<|call|>\
             <|start|>assistant<|channel|>commentary to=functions.add <|constrain|>json\
             <|message|>{\"a\": 1, \"b\": true}<|call|>",
        );
    }

    #[test]
    fn minimax_calls_as_invokes_of_one_block() {
        check_form(
            RenderDialect::MiniMax,
            "<minimax:tool_call>\n<invoke name=\"get_weather\">\n\
             <parameter name=\"city\">Paris</parameter>\n</invoke>\n</minimax:tool_call>",
            "<minimax:tool_call>\n<invoke name=\"get_weather\">\n\
             <parameter name=\"city\">Paris</parameter>\n</invoke>\n<invoke name=\"add\">\n\
             <parameter name=\"a\">1</parameter>\n<parameter name=\"b\">true</parameter>\n\
             </invoke>\n</minimax:tool_call>",
        );
    }

    #[test]
    fn granite_calls_in_one_list() {
        check_form(
            RenderDialect::Granite,
            "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]",
            "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, \
             {\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": true}}]",
        );
    }

    #[test]
    fn python_literals_and_xml_values() {
        let call = ToolCall::new(
            "c",
            "f",
            json!({"s": "a\"b\\c\nd\u{1}é", "n": null, "l": [1.5, false], "d": {"k": "v"}}),
        );
        assert_eq!(
            written(RenderDialect::Pythonic, &[call]),
            "[f(s=\"a\\\"b\\\\c\\nd\\u0001é\", n=None, l=[1.5, False], d={\"k\": \"v\"})]"
        );
        let call = ToolCall::new("c", "f", json!({"l": ["</arg_value>"], "s": "x y"}));
        assert_eq!(
            written(RenderDialect::Glm, &[call]),
            "<tool_call>f\n<arg_key>l</arg_key>\n<arg_value>[\"<\\/arg_value>\"]</arg_value>\n\
             <arg_key>s</arg_key>\n<arg_value>x y</arg_value>\n</tool_call>"
        );
    }

    /// A call whose form cannot carry it goes in the tagged form, between the
    /// runs of the others.
    #[test]
    fn calls_a_form_cannot_carry_are_tagged() {
        let plain = ToolCall::new("c1", "f", json!({"s": "x"}));
        for (dialect, awkward) in [
            // Would read back as a number, or end the value early.
            (RenderDialect::Glm, json!({"s": "1"})),
            (RenderDialect::Glm, json!({"s": "a</arg_value>b"})),
            (RenderDialect::MiniMax, json!({"s": "true"})),
            (RenderDialect::MiniMax, json!({"s": "a</parameter>b"})),
            (RenderDialect::MiniMax, json!({"s": "\nx"})),
            // A tag that ends a value although its closing tag is not there:
            // the next parameter, the end of the call or of the block.
            (RenderDialect::Glm, json!({"s": "</tool_call>"})),
            (RenderDialect::Glm, json!({"s": "a<arg_key>b</arg_key>"})),
            (RenderDialect::Glm, json!({"l": ["<arg_key>"]})),
            (RenderDialect::MiniMax, json!({"s": "a</invoke>"})),
            (
                RenderDialect::MiniMax,
                json!({"s": "</minimax:tool_call> b"}),
            ),
            (
                RenderDialect::MiniMax,
                json!({"d": {"k": "<parameter name='p'>"}}),
            ),
            (RenderDialect::Pythonic, json!({"not-an-identifier": 1})),
            (RenderDialect::Pythonic, json!({"class": 1})),
            (RenderDialect::Llama3Json, json!("not an object")),
        ] {
            let odd = ToolCall::new("c2", "f", awkward);
            let mut tagged = String::new();
            write_calls(
                &mut tagged,
                std::slice::from_ref(&odd),
                RenderDialect::Tagged,
                false,
                0,
            );
            let own = written(dialect, std::slice::from_ref(&plain));
            assert_eq!(
                written(dialect, &[plain.clone(), odd, plain.clone()]),
                format!("{own}{SEPARATOR}{tagged}{SEPARATOR}{own}"),
                "{dialect}"
            );
        }
        let spaced = ToolCall::new("c 1", "get weather", json!({}));
        let long = ToolCall::new("c1", "f".repeat(NAME_LIMIT + 1), json!({}));
        for dialect in [
            RenderDialect::KimiK2,
            RenderDialect::Mistral,
            RenderDialect::Pythonic,
        ] {
            assert!(written(dialect, std::slice::from_ref(&long)).starts_with("<tool_call name="));
            assert!(
                written(dialect, std::slice::from_ref(&spaced)).starts_with("<tool_call name=")
            );
        }
        let odd_id = ToolCall::new("call 1", "f", json!({}));
        assert_eq!(
            written(RenderDialect::Mistral, &[odd_id]),
            "<tool_call name=\"f\" id=\"call 1\">\n{}\n</tool_call>"
        );
    }

    #[test]
    fn every_family_is_written_in_its_own_form() {
        for (model, dialect) in [
            ("Qwen/Qwen2.5-7B-Instruct", RenderDialect::Hermes),
            ("Qwen/Qwen3-Coder-30B-A3B-Instruct", RenderDialect::Hermes),
            ("NousResearch/Hermes-3-Llama-3.1-8B", RenderDialect::Hermes),
            (
                "mistralai/Mistral-Small-3.2-24B-Instruct-2506",
                RenderDialect::Mistral,
            ),
            ("mistralai/Devstral-Small-2507", RenderDialect::Mistral),
            ("mistralai/Magistral-Small-2509", RenderDialect::Mistral),
            (
                "meta-llama/Llama-3.1-8B-Instruct",
                RenderDialect::Llama3Json,
            ),
            (
                "meta-llama/Llama-3.3-70B-Instruct",
                RenderDialect::Llama3Json,
            ),
            ("meta-llama/Llama-3.2-3B-Instruct", RenderDialect::Pythonic),
            (
                "meta-llama/Llama-4-Scout-17B-16E-Instruct",
                RenderDialect::Pythonic,
            ),
            ("moonshotai/Kimi-K2-Instruct-0905", RenderDialect::KimiK2),
            ("deepseek-ai/DeepSeek-V3.1", RenderDialect::DeepSeek),
            ("zai-org/GLM-4.6", RenderDialect::Glm),
            ("openai/gpt-oss-20b", RenderDialect::Harmony),
            ("MiniMaxAI/MiniMax-M2", RenderDialect::MiniMax),
            (
                "ibm-granite/granite-3.3-8b-instruct",
                RenderDialect::Granite,
            ),
            ("HuggingFaceTB/SmolLM2-135M-Instruct", RenderDialect::Tagged),
        ] {
            assert_eq!(RenderDialect::for_model(model), dialect, "{model}");
        }
    }

    #[test]
    fn dialects_are_named_as_the_parser_names_them() {
        for dialect in RenderDialect::ALL {
            assert_eq!(dialect.name(), dialect.dialect().name());
            assert_eq!(dialect.name().parse::<RenderDialect>(), Ok(dialect));
        }
        let error = "claude-xml".parse::<RenderDialect>().unwrap_err();
        assert!(error.ends_with("tagged, hermes, mistral, llama3-json, pythonic, kimi-k2, deepseek, glm, harmony, minimax, granite"), "{error}");
    }
}

//! What OpenAI's two wires — Chat Completions ([`openai_chat`](super::openai_chat))
//! and Responses ([`openai_responses`](super::openai_responses)) — agree on,
//! written once: the metadata keys both read, the usage details and their
//! canonical meaning, a `url_citation`'s payload, and a JSON Schema output
//! format's fields.

#![cfg_attr(
    not(all(feature = "openai", feature = "openai-responses")),
    allow(dead_code)
)]

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::message::{
    Citation, CitationSource, InvalidCall, InvalidCallKind, Metadata, TextSpan, Usage,
};
use crate::provider::body::token_count;
use crate::{Error, ResponseFormat, ToolCall, ToolChoice};

/// The metadata key that marks assistant text as a refusal (`true`): Chat
/// Completions' `refusal` field, a Responses `refusal` content part.
pub const REFUSAL_KEY: &str = "refusal";

/// The metadata key that marks system text as a `developer` message (`true`):
/// the decoders set it, the lowerings send such a message back with the
/// `developer` role; every other wire reads it as system text.
pub const DEVELOPER_KEY: &str = "developer";

/// The input tokens read from and written to the cache (both counted in the
/// input tokens): Chat Completions' `usage.prompt_tokens_details`, Responses'
/// `usage.input_tokens_details`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PromptTokensDetails {
    /// Input tokens read from the cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// Input tokens written to the cache (Responses reports them; on Chat
    /// Completions, the field OpenRouter and the servers that report cache
    /// writes use).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
}

impl PromptTokensDetails {
    /// The details of these counts; `None` when neither is known.
    pub fn new(cached_tokens: Option<u64>, cache_write_tokens: Option<u64>) -> Option<Self> {
        (cached_tokens.is_some() || cache_write_tokens.is_some()).then_some(PromptTokensDetails {
            cached_tokens,
            cache_write_tokens,
        })
    }

    /// The details under `path` of `usage` (`/prompt_tokens_details`), read
    /// leniently (a count that is not a number is absent).
    pub(crate) fn read_lenient(usage: &Value, path: &str) -> Option<Self> {
        Self::new(
            token_count(usage, &format!("{path}/cached_tokens")),
            token_count(usage, &format!("{path}/cache_write_tokens")),
        )
    }
}

/// The output tokens spent reasoning (counted in the output tokens): Chat
/// Completions' `usage.completion_tokens_details`, Responses'
/// `usage.output_tokens_details`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CompletionTokensDetails {
    /// Output tokens spent reasoning.
    pub reasoning_tokens: u64,
}

/// A function tool's name, description and parameters: Chat Completions'
/// `function` object, and the Responses API's function tool (flat, beside
/// its `type`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionDefinition {
    /// The tool's name.
    pub name: String,
    /// What the tool does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of the arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// Structured outputs: the arguments must match the schema exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// Every other field, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An error answer: `{"error": {"message", "type", "param", "code"}}`.
///
/// ```
/// use lmstack::provider::openai_chat::types::{ErrorBody, ErrorObject};
///
/// let body = ErrorBody { error: ErrorObject {
///     message: "Slow down".into(), kind: "rate_limit_error".into(), param: None, code: None,
/// } };
/// assert_eq!(
///     serde_json::to_string(&body).unwrap(),
///     r#"{"error":{"message":"Slow down","type":"rate_limit_error","param":null,"code":null}}"#
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorObject,
}

/// The object inside an [`ErrorBody`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// What went wrong.
    pub message: String,
    /// `invalid_request_error`, `rate_limit_error`, `server_error`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// The request field at fault.
    pub param: Option<String>,
    /// A machine-readable code.
    pub code: Option<String>,
}

/// The canonical usage of an OpenAI usage: `input` already counts the cache
/// reads and writes, `output` the reasoning; the details absent stay absent.
pub(crate) fn lift_usage(
    input: u64,
    output: u64,
    details: Option<PromptTokensDetails>,
    reasoning: Option<CompletionTokensDetails>,
    metadata: Metadata,
) -> Usage {
    let mut usage = Usage {
        input_tokens: input,
        output_tokens: output,
        cached_input_tokens: details.as_ref().and_then(|d| d.cached_tokens),
        reasoning_tokens: reasoning.map(|d| d.reasoning_tokens),
        metadata,
    };
    if let Some(written) = details.and_then(|d| d.cache_write_tokens) {
        usage.set_cache_write_input_tokens(written);
    }
    usage
}

/// A `url_citation`'s payload: a web page and the characters of the text it
/// supports (Chat Completions nests it under `url_citation`, Responses writes
/// it flat in the annotation).
#[derive(Serialize, Deserialize)]
struct UrlCitation {
    url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    title: Option<String>,
    start_index: usize,
    end_index: usize,
}

/// The citation a `url_citation` payload (`payload`) makes, its span moved
/// back by `offset` characters; `None` when it is not one.
pub(crate) fn lift_url_citation(payload: &Value, offset: usize) -> Option<Citation> {
    let cited = UrlCitation::deserialize(payload).ok()?;
    Some(Citation::url(cited.url, cited.title).with_span(
        cited.start_index.saturating_sub(offset),
        cited.end_index.saturating_sub(offset),
    ))
}

/// The `url_citation` payload of a citation of a web page, its range moved by
/// `offset` characters (where its text begins); `None` for another source. A
/// citation without a span covers nothing (`0..0` past `offset`).
pub(crate) fn lower_url_citation(citation: &Citation, offset: usize) -> Option<Map<String, Value>> {
    let CitationSource::Url { url, title, .. } = &citation.source else {
        return None;
    };
    let span = citation.span.unwrap_or(TextSpan { start: 0, end: 0 });
    let cited = UrlCitation {
        url: url.clone(),
        title: title.clone(),
        start_index: span.start.saturating_add(offset),
        end_index: span.end.saturating_add(offset),
    };
    match serde_json::to_value(cited) {
        Ok(Value::Object(payload)) => Some(payload),
        _ => None,
    }
}

/// The name OpenAI requires of a JSON Schema output format, when the format
/// has none.
pub(crate) const DEFAULT_SCHEMA_NAME: &str = "response";

/// A JSON Schema output format's fields as both wires write them (`name`,
/// `schema`, `strict`): Chat Completions under `response_format.json_schema`,
/// Responses in `text.format` beside its `type`.
pub(crate) fn json_schema_fields(
    name: Option<&str>,
    schema: &Value,
    strict: Option<bool>,
) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("name".into(), name.unwrap_or(DEFAULT_SCHEMA_NAME).into());
    fields.insert("schema".into(), schema.clone());
    if let Some(strict) = strict {
        fields.insert("strict".into(), strict.into());
    }
    fields
}

/// The HTTP status and the OpenAI error body for `error` (both wires answer
/// errors in this shape): `{"error": {"message", "type", "param", "code"}}`,
/// the status from [`Error::http_status`], the type following the status
/// (`invalid_request_error` for 400, 413 and 422, `rate_limit_error` for 429,
/// `server_error` for 5xx); an upstream provider's own `param` and `code` are
/// passed on; the message does not say where the upstream lives.
pub(crate) fn error_body(error: &Error) -> (u16, Value) {
    let status = error.http_status();
    let kind = match status {
        400..=404 | 408 | 413 | 415 | 422 => "invalid_request_error",
        429 => "rate_limit_error",
        _ => "server_error",
    };
    let upstream = error.provider_error();
    let message = match error {
        Error::InvalidRequest(message) | Error::Refused { message, .. } => message.clone(),
        other => other.client_message(),
    };
    let body = ErrorBody {
        error: ErrorObject {
            message,
            kind: kind.into(),
            param: upstream.and_then(|upstream| upstream.param.clone()),
            code: upstream
                .and_then(|upstream| upstream.code.clone())
                .or_else(|| (status == 429).then(|| "rate_limit_exceeded".into())),
        },
    };
    (status, serde_json::to_value(body).unwrap_or_default())
}

/// A client's call whose arguments are JSON text: parsed, or kept raw and
/// marked invalid (as the joiner does with a model's malformed arguments), so
/// that lowering writes it back as it came.
pub(crate) fn read_call(id: String, name: String, arguments: String) -> ToolCall {
    if arguments.trim().is_empty() {
        return ToolCall::new(id, name, Value::Object(Map::new()));
    }
    match serde_json::from_str(&arguments) {
        Ok(value) => ToolCall::new(id, name, value),
        Err(error) => ToolCall {
            invalid: Some(InvalidCall {
                kind: InvalidCallKind::MalformedArguments,
                message: format!("the arguments are not valid JSON: {error}"),
                raw: Some(arguments),
            }),
            ..ToolCall::new(id, name, Value::Null)
        },
    }
}

/// A client's JSON output format, by its `type`: `json_object`, or
/// `json_schema` with its `name`, `schema` and `strict` in `fields` (Chat
/// Completions' `response_format.json_schema`, Responses' `text.format`
/// itself); `Ok(None)` for `text` or another type. A `json_schema` without its
/// schema is [`Error::InvalidRequest`] naming `at`.
pub(crate) fn read_json_format(
    kind: Option<&str>,
    fields: Option<&Value>,
    at: &str,
) -> Result<Option<ResponseFormat>, Error> {
    Ok(Some(match kind {
        Some("json_object") => ResponseFormat::JsonObject,
        Some("json_schema") => {
            let field = |key: &str| fields.and_then(|object| object.get(key));
            let Some(schema) = field("schema").filter(|schema| schema.is_object()) else {
                return Err(Error::InvalidRequest(format!(
                    "{at}.schema: a JSON Schema object is needed"
                )));
            };
            ResponseFormat::JsonSchema {
                name: field("name").and_then(Value::as_str).map(str::to_owned),
                schema: schema.clone(),
                strict: field("strict").and_then(Value::as_bool),
            }
        }
        _ => return Ok(None),
    }))
}

/// A client's request body read as the wire's type `T`: bad input is
/// [`Error::InvalidRequest`] naming the field at fault (`messages[0].role:
/// …`), the whole body read (nothing after the JSON value).
pub(crate) fn read_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Error> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let wire: T = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        invalid(&path, &without_position(error.inner()))
    })?;
    deserializer
        .end()
        .map_err(|error| invalid(".", &without_position(&error)))?;
    Ok(wire)
}

/// A serde_json error's message without its ` at line L column C` (the path
/// names the place).
fn without_position(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rfind(" at line ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// A client's `tool_choice` given as a mode, as both OpenAI wires write it:
/// `auto`, `none` or `required`.
pub(crate) fn tool_choice_mode(mode: &str) -> Result<ToolChoice, Error> {
    match mode {
        "auto" => Ok(ToolChoice::Auto),
        "none" => Ok(ToolChoice::None),
        "required" => Ok(ToolChoice::Required),
        other => Err(invalid(
            "tool_choice",
            &format!("`{other}` is not auto, none or required"),
        )),
    }
}

pub(crate) fn invalid(path: &str, message: &str) -> Error {
    if path == "." || path.is_empty() {
        Error::InvalidRequest(message.to_owned())
    } else {
        Error::InvalidRequest(format!("{path}: {message}"))
    }
}

/// A base64 `data:` URI's media type and data (copied once, into the media's
/// shared string); `None` when `url` is not a `data:` URI at all.
pub(crate) fn data_uri<'a>(url: &'a str, at: &str) -> Result<Option<(&'a str, &'a str)>, Error> {
    let Some(rest) = url
        .get(..5)
        .filter(|scheme| scheme.eq_ignore_ascii_case("data:"))
        .map(|_| &url[5..])
    else {
        return Ok(None);
    };
    let (header, data) = rest
        .split_once(',')
        .ok_or_else(|| invalid(at, "a `data:` URI needs a comma before its data"))?;
    let media_type = header
        .strip_suffix(";base64")
        .filter(|media_type| !media_type.is_empty())
        .ok_or_else(|| invalid(at, "only base64 `data:` URIs with a media type are read"))?;
    Ok(Some((media_type, data)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_wires_read_a_tool_choice_mode_and_refuse_others_by_name() {
        let body = |choice: &str| {
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                   "input": "hi", "tool_choice": choice})
            .to_string()
        };
        for (mode, expected) in [
            ("auto", ToolChoice::Auto),
            ("none", ToolChoice::None),
            ("required", ToolChoice::Required),
        ] {
            #[cfg(feature = "openai")]
            {
                let chat = crate::provider::openai_chat::decode_request(body(mode).as_bytes());
                assert_eq!(chat.unwrap().options.tool_choice, Some(expected.clone()));
            }
            #[cfg(feature = "openai-responses")]
            {
                let responses =
                    crate::provider::openai_responses::decode_request(body(mode).as_bytes());
                assert_eq!(responses.unwrap().options.tool_choice, Some(expected));
            }
        }
        let refused = tool_choice_mode("any").unwrap_err().to_string();
        assert!(
            refused.contains("tool_choice: `any` is not auto, none or required"),
            "{refused}"
        );
    }

    #[test]
    fn a_url_citation_lifts_and_lowers_back_with_its_offset() {
        let payload =
            json!({"url": "https://a.example", "title": "A", "start_index": 7, "end_index": 9});
        let citation = lift_url_citation(&payload, 5).unwrap();
        assert_eq!(
            citation.span.map(|span| (span.start, span.end)),
            Some((2, 4))
        );
        assert_eq!(
            lower_url_citation(&citation, 5).map(Value::Object),
            Some(payload)
        );
        assert!(lift_url_citation(&json!({"url": 1}), 0).is_none());
    }

    #[test]
    fn usage_keeps_absent_details_absent_and_writes_cache_writes() {
        let usage = lift_usage(10, 4, None, None, Metadata::new());
        assert_eq!(
            (usage.cached_input_tokens, usage.reasoning_tokens),
            (None, None)
        );
        let details = PromptTokensDetails::read_lenient(
            &json!({"d": {"cached_tokens": 3, "cache_write_tokens": 2}}),
            "/d",
        );
        let reasoning = Some(CompletionTokensDetails {
            reasoning_tokens: 1,
        });
        let usage = lift_usage(10, 4, details, reasoning, Metadata::new());
        assert_eq!(usage.cached_input_tokens, Some(3));
        assert_eq!(usage.cache_write_input_tokens(), Some(2));
        assert_eq!(usage.reasoning_tokens, Some(1));
    }
}

//! The gateway's Gemini routes: `POST /v1beta/models/{model}:generateContent`,
//! `:streamGenerateContent` (`?alt=sse` → SSE, else a JSON array) and
//! `:countTokens`; `GET /v1beta/models` and `GET /v1beta/models/{model}` in
//! Google's shape. A path segment holds both the model and the method
//! (`gemini-2.5-flash:streamGenerateContent`), which axum's path syntax cannot
//! split: the segment is read here. The key of `?key=` is passed on as
//! `x-goog-api-key`, which the access check takes as it takes `x-api-key`.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::Response;
use axum::routing::get;

use super::admit::{Named, refused};
use super::answer::{Refusal, json_response};
use super::format::{CountTokens, GenerateContent, GenerateContentArray};
use super::gateway::{Shared, chat_named, count};
use super::guard::Route;
use crate::provider::gemini;

/// Adds the Gemini routes to the gateway's router.
pub(super) fn route(router: Router<Arc<Shared>>) -> Router<Arc<Shared>> {
    router
        .route("/v1beta/models", get(models))
        .route("/v1beta/models/{*rest}", get(model).post(method))
}

/// What a method's path segment names.
#[derive(Debug, PartialEq, Eq)]
enum Method {
    Generate,
    Stream { sse: bool },
    Count,
}

/// The model and the method of a segment `NAME:method` (the name maybe
/// `models/NAME`), with the query's `alt`; `None` for no method known.
fn parse(rest: &str, query: &Query) -> Option<(String, Method)> {
    let (model, method) = rest.rsplit_once(':')?;
    let method = match method {
        "generateContent" => Method::Generate,
        "streamGenerateContent" => Method::Stream {
            sse: query.alt.as_deref() == Some("sse"),
        },
        "countTokens" => Method::Count,
        _ => return None,
    };
    let model = model.strip_prefix("models/").unwrap_or(model);
    Some((model.to_owned(), method))
}

/// The query parameters a Gemini client sends.
#[derive(Debug, Default)]
struct Query {
    alt: Option<String>,
    key: Option<String>,
}

impl Query {
    fn read(query: Option<&str>) -> Self {
        let mut read = Query::default();
        for pair in query.unwrap_or_default().split('&') {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_encoding::percent_decode_str(value)
                .decode_utf8_lossy()
                .into_owned();
            match name {
                "alt" => read.alt = Some(value),
                "key" => read.key = Some(value),
                _ => {}
            }
        }
        read
    }
}

/// The headers with the query's key as `x-goog-api-key`, unless a key
/// header came.
fn with_key(mut headers: HeaderMap, query: &Query) -> HeaderMap {
    if let Some(key) = &query.key
        && !headers.contains_key("x-goog-api-key")
        && let Ok(value) = HeaderValue::from_str(key)
    {
        headers.insert("x-goog-api-key", value);
    }
    headers
}

/// `POST /v1beta/models/{model}:{method}`.
async fn method(
    State(shared): State<Arc<Shared>>,
    Path(rest): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let query = Query::read(query.as_deref());
    let headers = with_key(headers, &query);
    let Some((model, method)) = parse(&rest, &query) else {
        let error = refused(
            404,
            "no such method: POST /v1beta/models/{model}:generateContent, \
             :streamGenerateContent or :countTokens",
        );
        return refuse(&shared, error);
    };
    let named = |stream| Some(Named { model, stream });
    match method {
        Method::Generate => {
            chat_named::<GenerateContent>(shared, headers, body, named(false)).await
        }
        Method::Stream { sse: true } => {
            chat_named::<GenerateContent>(shared, headers, body, named(true)).await
        }
        Method::Stream { sse: false } => {
            chat_named::<GenerateContentArray>(shared, headers, body, named(true)).await
        }
        Method::Count => {
            let answer = |tokens| serde_json::json!({ "totalTokens": tokens });
            count::<CountTokens, GenerateContent>(&shared, &headers, body, named(false), answer)
                .await
        }
    }
}

/// `error`'s answer, in Google's shape.
fn refuse(shared: &Shared, error: crate::Error) -> Response {
    let started = std::time::Instant::now();
    Refusal::before_model(error).respond::<GenerateContent>(&shared.gateway, started)
}

/// The refusal of a `GET`, if it is refused.
fn refuse_read(shared: &Shared, headers: &HeaderMap) -> Option<Response> {
    let error = shared.gateway.guard.check(headers, Route::Read).err()?;
    Some(refuse(shared, error))
}

/// `GET /v1beta/models`.
async fn models(
    State(shared): State<Arc<Shared>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let headers = with_key(headers, &Query::read(query.as_deref()));
    if let Some(refused) = refuse_read(&shared, &headers) {
        return refused;
    }
    let names: Vec<&str> = shared.gateway.listed_names().collect();
    let body = gemini::models_body(&names);
    json_response(200, body.to_string().into(), "application/json")
}

/// `GET /v1beta/models/{model}`: one model served; 404 for one that is not.
async fn model(
    State(shared): State<Arc<Shared>>,
    Path(rest): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let headers = with_key(headers, &Query::read(query.as_deref()));
    if let Some(refused) = refuse_read(&shared, &headers) {
        return refused;
    }
    let name = rest.strip_prefix("models/").unwrap_or(&rest);
    if !shared.gateway.listed_names().any(|listed| listed == name) {
        let error = refused(
            404,
            "no such model is served here (GET /v1beta/models lists those that are)",
        );
        return refuse(&shared, error);
    }
    let body = &gemini::models_body(&[name])["models"][0];
    json_response(200, body.to_string().into(), "application/json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_names_its_model_and_method() {
        let sse = Query::read(Some("alt=sse&key=k%2B1"));
        assert_eq!(sse.key.as_deref(), Some("k+1"));
        assert_eq!(
            parse("gemini-2.5-flash:streamGenerateContent", &sse),
            Some(("gemini-2.5-flash".into(), Method::Stream { sse: true }))
        );
        let none = Query::read(None);
        assert_eq!(
            parse("models/a:b:streamGenerateContent", &none),
            Some(("a:b".into(), Method::Stream { sse: false }))
        );
        assert_eq!(
            parse("m:countTokens", &none),
            Some(("m".into(), Method::Count))
        );
        assert_eq!(parse("m:embedContent", &none), None);
        assert_eq!(parse("m", &none), None);
    }
}

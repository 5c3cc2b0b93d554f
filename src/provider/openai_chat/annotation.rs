//! Chat Completions `annotations` ↔ canonical [`Citation`]s.
//!
//! A message (or a stream's delta) may hold `annotations`: `url_citation`s,
//! each a web page and the character range of `content` it supports:
//!
//! ```json
//! {"type":"url_citation","url_citation":{"url":"https://a.example","title":"A","start_index":0,"end_index":12}}
//! ```
//!
//! That is a canonical citation of a [`CitationSource::Url`](crate::CitationSource::Url); citations of
//! other sources have no place on this wire. Annotations of other types are
//! dropped.

use serde_json::Value;

use crate::message::Citation;
use crate::provider::openai_shared::{lift_url_citation, lower_url_citation};

/// The canonical form of one annotation (`None`: not a `url_citation`, or a
/// malformed one).
///
/// ```
/// use lmstack::provider::openai_chat::annotation;
/// let wire = serde_json::json!({"type": "url_citation", "url_citation":
///     {"url": "https://a.example", "title": "A", "start_index": 2, "end_index": 5}});
/// let citation = annotation::lift(&wire).unwrap();
/// assert_eq!(citation.span.map(|span| (span.start, span.end)), Some((2, 5)));
/// assert_eq!(annotation::lower(&citation, 0), Some(wire));
/// ```
pub fn lift(annotation: &Value) -> Option<Citation> {
    if annotation.get("type")? != "url_citation" {
        return None;
    }
    lift_url_citation(annotation.get("url_citation")?, 0)
}

/// The annotation of a citation of a web page, its range moved by `offset`
/// characters (where its text begins in `content`); `None` for another source.
/// A citation without a span covers nothing (`0..0` past `offset`).
pub fn lower(citation: &Citation, offset: usize) -> Option<Value> {
    let cited = lower_url_citation(citation, offset)?;
    Some(serde_json::json!({"type": "url_citation", "url_citation": cited}))
}

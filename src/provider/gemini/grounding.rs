//! Gemini's grounding (`groundingMetadata`) → canonical [`Citation`]s.
//!
//! A candidate grounded in Google Search holds its sources in
//! `groundingChunks` (`{"web": {"uri", "title"}}`) and, in
//! `groundingSupports`, which text each supports: a `segment`
//! (`startIndex`, `endIndex`: UTF-8 byte offsets into the candidate's text,
//! a missing `startIndex` being 0) and the `groundingChunkIndices` of its
//! sources. Each pair of a support and a web chunk is one citation of a web
//! page, spanning the segment in characters. Chunks of other kinds
//! (`retrievedContext`, `maps`) and segments that do not fall on the text's
//! character boundaries are left out.

use serde::Deserialize;
use serde_json::Value;

use crate::message::Citation;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Grounding {
    #[serde(default)]
    grounding_chunks: Vec<Chunk>,
    #[serde(default)]
    grounding_supports: Vec<Support>,
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    web: Option<Web>,
}

#[derive(Deserialize)]
struct Web {
    uri: String,
    #[serde(default)]
    title: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Support {
    #[serde(default)]
    segment: Option<Segment>,
    #[serde(default)]
    grounding_chunk_indices: Vec<usize>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Segment {
    #[serde(default)]
    start_index: usize,
    #[serde(default)]
    end_index: usize,
}

/// The citations of a candidate's `groundingMetadata`, whose text is `text`
/// (none when it is not grounding metadata).
///
/// ```
/// use lmstack::provider::gemini::grounding;
/// let metadata = serde_json::json!({
///     "groundingChunks": [{"web": {"uri": "https://a.example", "title": "a.example"}}],
///     "groundingSupports": [{"segment": {"startIndex": 3, "endIndex": 7}, "groundingChunkIndices": [0]}]
/// });
/// let citations = grounding::citations(&metadata, "Já sei.");
/// assert_eq!(citations[0].span.map(|span| (span.start, span.end)), Some((2, 6)));
/// ```
pub fn citations(metadata: &Value, text: &str) -> Vec<Citation> {
    let Ok(grounding) = Grounding::deserialize(metadata) else {
        return Vec::new();
    };
    let chars = |byte: usize| text.get(..byte).map(|before| before.chars().count());
    let mut citations = Vec::new();
    for support in &grounding.grounding_supports {
        let Some(segment) = &support.segment else {
            continue;
        };
        let (Some(start), Some(end)) = (chars(segment.start_index), chars(segment.end_index))
        else {
            continue;
        };
        for &index in &support.grounding_chunk_indices {
            if let Some(Chunk { web: Some(web) }) = grounding.grounding_chunks.get(index) {
                let citation = Citation::url(web.uri.clone(), web.title.clone());
                citations.push(citation.with_span(start, end.max(start)));
            }
        }
    }
    citations
}

//! Anthropic's text citations ↔ canonical [`Citation`]s.
//!
//! A text block's `citations` (and a stream's `citations_delta`) hold one
//! object per citation, tagged by `type`: `char_location`, `page_location`,
//! `content_block_location` (a document of the request),
//! `web_search_result_location` (a web page) and `search_result_location`
//! (a search result block of the request). A citation of another type is
//! dropped. Each supports the whole text of its block. `cited_text` is
//! written on every type, and `encrypted_index` on a web page, which the wire
//! requires; an empty one is read as absent. Titles are written `null` when
//! absent, as the wire does.
//!
//! A request's history carries them too, on the assistant's text blocks:
//! decoding types them when [`lower`] gives each back as it came.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::message::{Citation, CitationSource, DocumentLocation, LocationUnit};

/// One citation as the wire writes it (each variant named as its `type`).
#[allow(clippy::enum_variant_names)]
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Wire {
    CharLocation {
        #[serde(flatten)]
        document: Document,
        start_char_index: u64,
        end_char_index: u64,
    },
    PageLocation {
        #[serde(flatten)]
        document: Document,
        start_page_number: u64,
        end_page_number: u64,
    },
    ContentBlockLocation {
        #[serde(flatten)]
        document: Document,
        start_block_index: u64,
        end_block_index: u64,
    },
    WebSearchResultLocation {
        #[serde(default)]
        cited_text: String,
        url: String,
        #[serde(default)]
        title: Option<String>,
        #[serde(default)]
        encrypted_index: String,
    },
    SearchResultLocation {
        #[serde(default)]
        cited_text: String,
        search_result_index: u32,
        source: String,
        #[serde(default)]
        title: Option<String>,
        start_block_index: u32,
        end_block_index: u32,
    },
}

/// The fields every document location has.
#[derive(Serialize, Deserialize)]
struct Document {
    #[serde(default)]
    cited_text: String,
    document_index: u32,
    #[serde(default)]
    document_title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    file_id: Option<String>,
}

/// The canonical form of one wire citation (`None`: a type not known, or a
/// malformed one).
///
/// ```
/// use lmstack::provider::anthropic::citation;
/// let wire = serde_json::json!({"type": "web_search_result_location", "url": "https://a.example",
///     "title": "A", "encrypted_index": "Eo8B", "cited_text": "a"});
/// let citation = citation::lift(&wire).unwrap();
/// assert_eq!(citation::lower(&citation), wire);
/// ```
pub fn lift(wire: &Value) -> Option<Citation> {
    let document = |document: Document, unit, start, end| Citation {
        source: CitationSource::Document {
            document_index: document.document_index,
            document_title: document.document_title,
            file_id: document.file_id,
            location: DocumentLocation { unit, start, end },
        },
        cited_text: given(document.cited_text),
        span: None,
    };
    Some(match Wire::deserialize(wire).ok()? {
        Wire::CharLocation {
            document: doc,
            start_char_index,
            end_char_index,
        } => document(doc, LocationUnit::Char, start_char_index, end_char_index),
        Wire::PageLocation {
            document: doc,
            start_page_number,
            end_page_number,
        } => document(doc, LocationUnit::Page, start_page_number, end_page_number),
        Wire::ContentBlockLocation {
            document: doc,
            start_block_index,
            end_block_index,
        } => document(
            doc,
            LocationUnit::ContentBlock,
            start_block_index,
            end_block_index,
        ),
        Wire::WebSearchResultLocation {
            cited_text,
            url,
            title,
            encrypted_index,
        } => Citation {
            source: CitationSource::Url {
                url,
                title,
                encrypted_index: given(encrypted_index),
            },
            cited_text: given(cited_text),
            span: None,
        },
        Wire::SearchResultLocation {
            cited_text,
            search_result_index,
            source,
            title,
            start_block_index,
            end_block_index,
        } => Citation {
            source: CitationSource::SearchResult {
                search_result_index,
                source,
                title,
                start_block_index,
                end_block_index,
            },
            cited_text: given(cited_text),
            span: None,
        },
    })
}

/// An empty text is a field not given.
fn given(text: String) -> Option<String> {
    Some(text).filter(|text| !text.is_empty())
}

/// The wire form of a citation (its span is the block it is written in).
/// `cited_text`, and a web page's `encrypted_index`, which the wire requires,
/// are empty when the citation has none (one from another wire).
pub fn lower(citation: &Citation) -> Value {
    let cited_text = citation.cited_text.clone().unwrap_or_default();
    let wire = match citation.source.clone() {
        CitationSource::Url {
            url,
            title,
            encrypted_index,
        } => Wire::WebSearchResultLocation {
            cited_text,
            url,
            title,
            encrypted_index: encrypted_index.unwrap_or_default(),
        },
        CitationSource::Document {
            document_index,
            document_title,
            file_id,
            location: DocumentLocation { unit, start, end },
        } => {
            let document = Document {
                cited_text,
                document_index,
                document_title,
                file_id,
            };
            match unit {
                LocationUnit::Char => Wire::CharLocation {
                    document,
                    start_char_index: start,
                    end_char_index: end,
                },
                LocationUnit::Page => Wire::PageLocation {
                    document,
                    start_page_number: start,
                    end_page_number: end,
                },
                LocationUnit::ContentBlock => Wire::ContentBlockLocation {
                    document,
                    start_block_index: start,
                    end_block_index: end,
                },
            }
        }
        CitationSource::SearchResult {
            search_result_index,
            source,
            title,
            start_block_index,
            end_block_index,
        } => Wire::SearchResultLocation {
            cited_text,
            search_result_index,
            source,
            title,
            start_block_index,
            end_block_index,
        },
    };
    // Wire types: maps with string keys, which always serialise.
    serde_json::to_value(wire).unwrap_or_default()
}

/// Whether the lowering sends `citation` back: all but a web page cited
/// without its `encrypted_index` (one from another wire), which the API
/// requires.
pub(super) fn sent_back(citation: &Citation) -> bool {
    !matches!(
        &citation.source,
        CitationSource::Url {
            encrypted_index: None,
            ..
        }
    )
}

/// A request's text block's `citations`, typed and each spanning the block's
/// `text`, taken out of the block's other `fields`: when every one is a
/// citation the lowering sends back as it came (a field left out where the
/// lowering writes `null` counts as the same). Otherwise — a citation of an
/// unknown type or with fields the canonical model has no place for — they
/// stay in `fields`, raw, and none are typed.
///
/// ```text
/// {"type":"text","text":"Paris.","citations":[{"type":"char_location", …}]}
///   → "Paris." with a document citation spanning 0..6
/// ```
pub(super) fn take(fields: &mut Map<String, Value>, text: &str) -> Vec<Citation> {
    let Some(Value::Array(items)) = fields.get("citations") else {
        return Vec::new();
    };
    let typed: Option<Vec<Citation>> = items
        .iter()
        .map(|item| {
            lift(item)
                .filter(|citation| sent_back(citation) && same(&lower(citation), item))
                .map(|citation| citation.with_span(0, text.chars().count()))
        })
        .collect();
    match typed {
        Some(typed) if !typed.is_empty() => {
            fields.remove("citations");
            typed
        }
        _ => Vec::new(),
    }
}

/// Two wire citations alike but for fields one writes `null` and the other
/// leaves out.
fn same(written: &Value, sent: &Value) -> bool {
    let given = |value: &Value| match value {
        Value::Object(fields) => fields
            .iter()
            .filter(|(_, value)| !value.is_null())
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect::<Map<String, Value>>(),
        _ => Map::new(),
    };
    given(written) == given(sent)
}

/// A text cut into the blocks its citations cover, as the wire gives each
/// block its citations: a cut at each end of a citation's span, each piece
/// with the citations whose span holds it. Citations without a span, or with
/// one past the text, go to the last piece. Pieces of no text are left out,
/// unless the text is empty and cited.
pub(super) fn split<'a>(
    text: &'a str,
    citations: &'a [Citation],
) -> Vec<(&'a str, Vec<&'a Citation>)> {
    let length = text.chars().count();
    let fits = |citation: &&Citation| {
        citation
            .span
            .is_some_and(|span| span.start < span.end && span.end <= length)
    };
    let mut cuts: Vec<usize> = citations
        .iter()
        .filter(fits)
        .flat_map(|citation| citation.span.map(|span| [span.start, span.end]))
        .flatten()
        .chain([0, length])
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    // Byte offsets of the cuts (each a char boundary, the end included).
    let mut bytes = text.char_indices().map(|(at, _)| at).chain([text.len()]);
    let mut taken = 0;
    let offsets: Vec<usize> = cuts
        .iter()
        .map(|&cut| {
            let offset = bytes.nth(cut - taken).unwrap_or(text.len());
            taken = cut + 1;
            offset
        })
        .collect();
    let mut pieces: Vec<(&str, Vec<&Citation>)> = offsets
        .windows(2)
        .zip(cuts.windows(2))
        .map(|(range, chars)| {
            let cited = citations
                .iter()
                .filter(fits)
                .filter(|citation| {
                    citation
                        .span
                        .is_some_and(|span| span.start <= chars[0] && chars[1] <= span.end)
                })
                .collect();
            (&text[range[0]..range[1]], cited)
        })
        .collect();
    if pieces.is_empty() {
        pieces.push((text, Vec::new()));
    }
    let rest = citations.iter().filter(|citation| !fits(citation));
    if let Some((_, last)) = pieces.last_mut() {
        last.extend(rest);
    }
    pieces.retain(|(piece, cited)| !piece.is_empty() || !cited.is_empty());
    pieces
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_text_is_cut_at_the_ends_of_its_citations_spans() {
        let a = Citation::url("https://a", None).with_span(2, 4);
        let b = Citation::url("https://b", None);
        let citations = [a.clone(), b.clone()];
        let pieces = split("héllo", &citations);
        assert_eq!(pieces, [("hé", vec![]), ("ll", vec![&a]), ("o", vec![&b])]);
        assert_eq!(split("", &[]), []);
        assert_eq!(split("", &citations[1..]), [("", vec![&b])]);
    }

    #[test]
    fn request_citations_are_typed_only_when_they_come_back_as_they_came() {
        let page = json!({"type": "web_search_result_location", "url": "https://a",
            "encrypted_index": "Eo8B", "cited_text": "a"});
        let mut fields = Map::new();
        fields.insert("citations".into(), json!([page]));
        let typed = take(&mut fields, "héllo");
        let expected = Citation {
            source: CitationSource::Url {
                url: "https://a".into(),
                title: None,
                encrypted_index: Some("Eo8B".into()),
            },
            cited_text: Some("a".into()),
            span: None,
        }
        .with_span(0, 5);
        assert_eq!(typed, [expected]);
        assert!(fields.is_empty());

        // An unknown field, an unknown type, a web page without its index:
        // all of the block's citations stay raw.
        for odd in [
            json!({"type": "char_location", "cited_text": "a", "document_index": 0,
                "start_char_index": 0, "end_char_index": 1, "x_new": 1}),
            json!({"type": "x_location"}),
            json!({"type": "web_search_result_location", "url": "https://b", "cited_text": ""}),
        ] {
            let raw = json!([page, odd]);
            let mut fields = Map::new();
            fields.insert("citations".into(), raw.clone());
            assert_eq!(take(&mut fields, "héllo"), []);
            assert_eq!(fields["citations"], raw);
        }
    }
}

//! Citations: where the assistant's text says its words come from.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::metadata::Metadata;

/// A source that a piece of assistant text cites: a web page, a place in a
/// document of the request, or a search result the request gave.
///
/// Citations travel in the metadata of the text they support, under
/// [`Citation::KEY`], as a JSON array ([`Metadata::citations`] reads it,
/// [`Metadata::add_citations`] appends to it): in a text message, and in a
/// text delta, whose citations the [`Joiner`](super::Joiner) appends to the
/// message's (a metadata key, not a field: an `Event` stays within 64 bytes).
///
/// `span` is the text supported, as character offsets (Unicode scalar values)
/// `[start, end)` into the text message's text; in a text delta, into the text
/// of the message being joined. JSON form (`type` names the kind of source):
///
/// ```json
/// {"type":"url","url":"https://example.com/a","title":"A","cited_text":"…","span":{"start":0,"end":12}}
/// {"type":"document","document_index":0,"document_title":"Memo","location":{"unit":"char","start":0,"end":20},"cited_text":"…"}
/// {"type":"search_result","search_result_index":0,"source":"https://kb/1","title":"KB","start_block_index":0,"end_block_index":1}
/// ```
///
/// ```
/// use lmstack::{Citation, CitationSource, Metadata, TextSpan};
/// let citation = Citation::url("https://example.com", Some("Example".into())).with_span(0, 5);
/// let mut metadata = Metadata::new();
/// metadata.add_citations([citation.clone()]);
/// assert_eq!(metadata.citations(), [citation]);
/// assert_eq!(
///     serde_json::to_string(&metadata).unwrap(),
///     r#"{"citations":[{"type":"url","url":"https://example.com","title":"Example","span":{"start":0,"end":5}}]}"#
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Citation {
    /// What is cited.
    #[serde(flatten)]
    pub source: CitationSource,
    /// The source's words that are cited, when the provider gives them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cited_text: Option<String>,
    /// The text supported, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<TextSpan>,
}

/// Character offsets `[start, end)` into a text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextSpan {
    /// The first character.
    pub start: usize,
    /// One past the last character.
    pub end: usize,
}

/// What a [`Citation`] cites.
///
/// A web page maps between every wire (Anthropic `web_search_result_location`,
/// OpenAI `url_citation`, a Gemini web grounding chunk); the other kinds are
/// Anthropic's, and reach only that wire.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CitationSource {
    /// A web page.
    Url {
        /// Its URL.
        url: String,
        /// Its title.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// Anthropic's opaque reference to the search result, sent back with
        /// the citation.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        encrypted_index: Option<String>,
    },
    /// A place in a document of the request.
    Document {
        /// The document's position among the request's documents.
        document_index: u32,
        /// The document's title.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        document_title: Option<String>,
        /// The uploaded file the document came from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file_id: Option<String>,
        /// Where in the document.
        location: DocumentLocation,
    },
    /// Blocks of a search result the request gave.
    SearchResult {
        /// The result's position among the request's search results.
        search_result_index: u32,
        /// The result's source (a URL or a name).
        source: String,
        /// The result's title.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// The first block cited.
        start_block_index: u32,
        /// One past the last block cited.
        end_block_index: u32,
    },
}

/// A range of a document, `[start, end)` in the unit named.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocumentLocation {
    /// What the numbers count.
    pub unit: LocationUnit,
    /// The first unit cited.
    pub start: u64,
    /// One past the last unit cited.
    pub end: u64,
}

/// What a [`DocumentLocation`] counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LocationUnit {
    /// Characters of a plain-text document.
    Char,
    /// Pages of a PDF (numbered from 1).
    Page,
    /// Content blocks of a custom-content document.
    ContentBlock,
}

impl Citation {
    /// The metadata key that holds citations.
    pub const KEY: &'static str = "citations";

    /// A citation of a web page.
    pub fn url(url: impl Into<String>, title: Option<String>) -> Self {
        Citation {
            source: CitationSource::Url {
                url: url.into(),
                title,
                encrypted_index: None,
            },
            cited_text: None,
            span: None,
        }
    }

    /// Sets the text supported.
    pub fn with_span(mut self, start: usize, end: usize) -> Self {
        self.span = Some(TextSpan { start, end });
        self
    }
}

impl Metadata {
    /// The citations held under [`Citation::KEY`] (entries that are no
    /// citation are skipped).
    pub fn citations(&self) -> Vec<Citation> {
        match self.get(Citation::KEY) {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|item| Citation::deserialize(item).ok())
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Appends citations to those held under [`Citation::KEY`].
    pub fn add_citations(&mut self, citations: impl IntoIterator<Item = Citation>) {
        let mut items = citations
            .into_iter()
            .filter_map(|citation| serde_json::to_value(citation).ok())
            .peekable();
        if items.peek().is_none() {
            return;
        }
        match self.remove(Citation::KEY) {
            Some(Value::Array(mut held)) => {
                held.extend(items);
                self.insert(Citation::KEY, Value::Array(held));
            }
            _ => {
                self.insert(Citation::KEY, Value::Array(items.collect()));
            }
        }
    }
}

/// Moves the citations of a later piece of the same text onto the text's own
/// (citations add up, where other metadata keys keep their first value).
pub(crate) fn append_citations(text: &mut Metadata, piece: &mut Metadata) {
    if !matches!(text.get(Citation::KEY), Some(Value::Array(_))) {
        return;
    }
    if let Some(Value::Array(later)) = piece.remove(Citation::KEY)
        && let Some(Value::Array(mut held)) = text.remove(Citation::KEY)
    {
        held.extend(later);
        text.insert(Citation::KEY, Value::Array(held));
    }
}

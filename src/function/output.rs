//! What a tool returns: text, JSON, images, documents, audio and files, made
//! into a tool result under the layer's media policy.

use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;

use super::media::MediaPolicy;
use crate::{ContentBlock, MediaSource, Metadata, ToolResult};

/// What a tool returns: text, JSON, images, documents, audio and files, in
/// order, and whether it is an error.
///
/// Images, documents and audio — from bytes, files, or inline blocks — are checked by
/// the layer's [`MediaPolicy`] when the result is made, and so is the size of the
/// text; a file is read only then (lazily, after the tool returned, off the async
/// threads, within the call's time limit). Content the policy refuses turns the
/// result into an error result that says why.
///
/// ```
/// use lmstack::function::{MediaPolicy, ToolOutput};
/// use lmstack::{ContentBlock, ToolResult};
/// let png: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
/// let output = ToolOutput::text("Here is the chart:").with(ToolOutput::media(png, "image/png"));
/// let result = output.into_result("call_1", "chart", &MediaPolicy::new());
/// assert_eq!(
///     result,
///     ToolResult::new(
///         "call_1",
///         "chart",
///         vec![ContentBlock::text("Here is the chart:"), ContentBlock::image_bytes("image/png", png)]
///     )
/// );
///
/// // A file is read under the policy's root, which is unset here: an error result.
/// let refused = ToolOutput::file("report.pdf").into_result("call_2", "report", &MediaPolicy::new());
/// assert!(refused.is_error);
/// assert!(refused.text_content().contains("no file root is configured"));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolOutput {
    parts: Vec<Part>,
    is_error: bool,
    metadata: Metadata,
}

#[derive(Clone, Debug, PartialEq)]
enum Part {
    Block(ContentBlock),
    Bytes {
        bytes: Vec<u8>,
        media_type: String,
    },
    File {
        path: PathBuf,
        media_type: Option<String>,
    },
}

impl Part {
    /// The size of its text, in bytes: 0 for media.
    fn text_len(&self) -> usize {
        match self {
            Part::Block(ContentBlock::Text { text, .. }) => text.len(),
            _ => 0,
        }
    }
}

impl ToolOutput {
    /// Empty output.
    pub fn new() -> Self {
        Self::default()
    }

    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::block(ContentBlock::text(text))
    }

    /// Any value as JSON text. A value that cannot be serialised gives an error
    /// output saying so.
    pub fn json<T: Serialize + ?Sized>(value: &T) -> Self {
        match serde_json::to_string(value) {
            Ok(text) => Self::text(text),
            Err(error) => Self::error(format!("the result could not be written as JSON: {error}")),
        }
    }

    /// One content block. An inline (base64) image, document or audio clip is
    /// checked against the media policy like [`media`](Self::media) when the
    /// result is made; text and media by URL are passed on as they are.
    pub fn block(block: ContentBlock) -> Self {
        ToolOutput {
            parts: vec![Part::Block(block)],
            ..Self::default()
        }
    }

    /// An image, document or audio clip from bytes of the claimed MIME type;
    /// checked against the media policy (sniffed type, allow-list, size) when
    /// the result is made.
    pub fn media(bytes: impl Into<Vec<u8>>, media_type: impl Into<String>) -> Self {
        ToolOutput {
            parts: vec![Part::Bytes {
                bytes: bytes.into(),
                media_type: media_type.into(),
            }],
            ..Self::default()
        }
    }

    /// An image, document or audio clip read from a file under the media
    /// policy's root, when the result is made; its type is sniffed from its
    /// bytes.
    pub fn file(path: impl Into<PathBuf>) -> Self {
        ToolOutput {
            parts: vec![Part::File {
                path: path.into(),
                media_type: None,
            }],
            ..Self::default()
        }
    }

    /// Like [`file`](Self::file), with a claimed MIME type the bytes must match.
    pub fn file_as(path: impl Into<PathBuf>, media_type: impl Into<String>) -> Self {
        ToolOutput {
            parts: vec![Part::File {
                path: path.into(),
                media_type: Some(media_type.into()),
            }],
            ..Self::default()
        }
    }

    /// An error output: the model is told the call failed, and why.
    pub fn error(message: impl Into<String>) -> Self {
        Self::text(message).into_error()
    }

    /// Appends the parts of `more`; the result is an error if either is.
    pub fn with(mut self, more: ToolOutput) -> Self {
        self.parts.extend(more.parts);
        self.is_error |= more.is_error;
        self.metadata.merge_missing(&more.metadata);
        self
    }

    /// Marks the output as an error.
    pub fn into_error(mut self) -> Self {
        self.is_error = true;
        self
    }

    /// Sets the metadata the result will carry.
    pub fn with_metadata(mut self, metadata: Metadata) -> Self {
        self.metadata = metadata;
        self
    }

    /// True for an error output.
    pub fn is_error(&self) -> bool {
        self.is_error
    }

    /// True when making the result checks media or reads files (work done off the
    /// async threads).
    pub fn has_media(&self) -> bool {
        self.parts.iter().any(|part| match part {
            Part::Block(block) => block
                .as_media()
                .is_some_and(|media| matches!(media.source, MediaSource::Base64 { .. })),
            Part::Bytes { .. } | Part::File { .. } => true,
        })
    }

    /// Makes the result of call `call_id` of tool `name`: the size of the text is
    /// checked, media is checked and files are read under `policy` (blocking IO when
    /// there are files). Refused content makes an error result that says why.
    pub fn into_result(self, call_id: &str, name: &str, policy: &MediaPolicy) -> ToolResult {
        let text: usize = self.parts.iter().map(Part::text_len).sum();
        let content: Result<Vec<ContentBlock>, _> = policy.check_text(text).and_then(|()| {
            self.parts
                .into_iter()
                .map(|part| match part {
                    Part::Block(block) => policy.check_block(block),
                    Part::Bytes { bytes, media_type } => policy.block(&bytes, Some(&media_type)),
                    Part::File { path, media_type } => {
                        policy.read_block(&path, media_type.as_deref())
                    }
                })
                .collect()
        });
        match content {
            Ok(content) => ToolResult {
                call_id: call_id.to_owned(),
                name: name.to_owned(),
                content,
                is_error: self.is_error,
                metadata: self.metadata,
            },
            Err(error) => ToolResult {
                metadata: self.metadata,
                ..ToolResult::error(
                    call_id,
                    name,
                    format!("The tool `{name}` returned content that was refused: {error}."),
                )
            },
        }
    }
}

impl From<String> for ToolOutput {
    fn from(text: String) -> Self {
        Self::text(text)
    }
}

impl From<&str> for ToolOutput {
    fn from(text: &str) -> Self {
        Self::text(text)
    }
}

impl From<Value> for ToolOutput {
    /// JSON text; a JSON string becomes its text.
    fn from(value: Value) -> Self {
        match value {
            Value::String(text) => Self::text(text),
            other => Self::text(other.to_string()),
        }
    }
}

impl From<ContentBlock> for ToolOutput {
    fn from(block: ContentBlock) -> Self {
        Self::block(block)
    }
}

impl From<Vec<ContentBlock>> for ToolOutput {
    fn from(blocks: Vec<ContentBlock>) -> Self {
        ToolOutput {
            parts: blocks.into_iter().map(Part::Block).collect(),
            ..Self::default()
        }
    }
}

impl<T: Serialize> From<Json<T>> for ToolOutput {
    fn from(Json(value): Json<T>) -> Self {
        Self::json(&value)
    }
}

/// Wraps a serialisable value so that a tool can return it as JSON.
///
/// ```
/// use lmstack::function::{Json, ToolOutput};
/// #[derive(serde::Serialize)]
/// struct Weather { celsius: i32 }
/// let output = ToolOutput::from(Json(Weather { celsius: 18 }));
/// assert_eq!(output, ToolOutput::text(r#"{"celsius":18}"#));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Json<T>(pub T);

//! An MCP tool result made into a tool output: block by block, in order, media
//! kept as media (never flattened to text).
//!
//! | MCP | canonical |
//! |---|---|
//! | `TextContent` | text block |
//! | `ImageContent` | image block (checked by the media policy) |
//! | `AudioContent` | audio block (checked by the media policy) |
//! | `EmbeddedResource`, text | text block naming the URI |
//! | `EmbeddedResource`, blob | image, audio or document block by its MIME type; text by a `text/*` type |
//! | `ResourceLink` | text block with its URI, name, type and description |
//! | `structuredContent` | JSON text when there is no content; else kept in the result's metadata |
//! | `isError: true` | an error result with its content |

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rmcp::model::{CallToolResult, ContentBlock as McpBlock, Resource, ResourceContents};
use serde_json::Value;

use crate::function::ToolOutput;
use crate::{ContentBlock, Media, Metadata};

/// The metadata key under which a result's `structuredContent` is kept when it
/// has content blocks too.
pub const STRUCTURED_CONTENT_KEY: &str = "structured_content";

/// The tool output of an MCP tool result.
pub(super) fn output(result: CallToolResult) -> ToolOutput {
    let CallToolResult {
        content,
        structured_content,
        is_error,
        ..
    } = result;
    let mut output = match (content.is_empty(), &structured_content) {
        (true, Some(structured)) => ToolOutput::text(structured.to_string()),
        _ => ToolOutput::from(content.into_iter().map(block).collect::<Vec<_>>()),
    };
    if let Some(structured) = structured_content {
        let mut metadata = Metadata::default();
        metadata.insert(STRUCTURED_CONTENT_KEY, structured);
        output = output.with_metadata(metadata);
    }
    if is_error == Some(true) {
        output = output.into_error();
    }
    output
}

/// One MCP content block as a canonical block.
fn block(block: McpBlock) -> ContentBlock {
    match block {
        McpBlock::Text(text) => ContentBlock::text(text.text),
        McpBlock::Image(image) => ContentBlock::Image(Media::base64(image.mime_type, image.data)),
        McpBlock::Audio(audio) => ContentBlock::Audio(Media::base64(audio.mime_type, audio.data)),
        McpBlock::Resource(embedded) => resource(embedded.resource),
        McpBlock::ResourceLink(link) => ContentBlock::text(link_text(&link)),
        other => ContentBlock::text(format!(
            "(The tool returned a content block of a kind lmstack does not know: {})",
            serde_json::to_string(&other).unwrap_or_default()
        )),
    }
}

/// An embedded resource: text names its URI; a blob is media by its type, or text
/// when its type is textual and it is UTF-8.
fn resource(contents: ResourceContents) -> ContentBlock {
    match contents {
        ResourceContents::TextResourceContents {
            uri,
            mime_type,
            text,
            ..
        } => ContentBlock::text(resource_text(&uri, mime_type.as_deref(), &text)),
        ResourceContents::BlobResourceContents {
            uri,
            mime_type,
            blob,
            ..
        } => {
            let media_type = mime_type.unwrap_or_else(|| "application/octet-stream".to_owned());
            if is_textual(&media_type)
                && let Some(text) = STANDARD
                    .decode(blob.as_bytes())
                    .ok()
                    .and_then(|bytes| String::from_utf8(bytes).ok())
            {
                return ContentBlock::text(resource_text(&uri, Some(&media_type), &text));
            }
            let media = Media::base64(media_type.as_str(), blob).with_name(uri);
            match media_type.split('/').next() {
                Some("image") => ContentBlock::Image(media),
                Some("audio") => ContentBlock::Audio(media),
                _ => ContentBlock::Document(media),
            }
        }
        other => ContentBlock::text(format!(
            "(The tool returned a resource of a kind lmstack does not know: {})",
            serde_json::to_string(&other).unwrap_or_default()
        )),
    }
}

/// Text, JSON, XML and the like: types a model reads as text.
fn is_textual(media_type: &str) -> bool {
    let essence = crate::message::mime_essence(media_type);
    let essence = essence.as_str();
    essence.starts_with("text/")
        || essence.ends_with("+json")
        || essence.ends_with("+xml")
        || matches!(
            essence,
            "application/json" | "application/xml" | "application/yaml"
        )
}

fn resource_text(uri: &str, media_type: Option<&str>, text: &str) -> String {
    match media_type {
        Some(media_type) => format!("Resource {uri} ({media_type}):\n{text}"),
        None => format!("Resource {uri}:\n{text}"),
    }
}

fn link_text(link: &Resource) -> String {
    let mut text = format!("Resource link: {}", link.uri);
    let name = link.title.as_deref().unwrap_or(&link.name);
    text.push_str(&format!("\nName: {name}"));
    if let Some(media_type) = &link.mime_type {
        text.push_str(&format!("\nType: {media_type}"));
    }
    if let Some(description) = &link.description {
        text.push_str(&format!("\nDescription: {description}"));
    }
    text
}

/// The JSON of a structured result, for tests and callers that read it back.
pub fn structured_content(metadata: &Metadata) -> Option<&Value> {
    metadata.get(STRUCTURED_CONTENT_KEY)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::function::MediaPolicy;
    use crate::{ToolResult, function::sniff};

    /// A real PNG: server-everything's tiny image, cut to its header.
    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

    fn result_of(wire: Value) -> ToolResult {
        let result: CallToolResult = serde_json::from_value(wire).unwrap();
        output(result).into_result("c1", "t", &MediaPolicy::new())
    }

    #[test]
    fn text_image_text_keeps_its_order_and_its_image() {
        let result = result_of(json!({"content": [
            {"type": "text", "text": "Here it is:"},
            {"type": "image", "data": PNG, "mimeType": "image/png"},
            {"type": "text", "text": "The image above."},
            {"type": "image", "data": PNG, "mimeType": "image/png",
             "annotations": {"audience": ["user"], "priority": 0.5}},
        ]}));
        assert!(!result.is_error, "{result:?}");
        let kinds: Vec<&str> = result
            .content
            .iter()
            .map(|b| match b {
                ContentBlock::Text { .. } => "text",
                ContentBlock::Image(_) => "image",
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["text", "image", "text", "image"]);
        let bytes = result.content[1]
            .as_media()
            .unwrap()
            .decode()
            .unwrap()
            .unwrap();
        assert_eq!(sniff(&bytes), Some("image/png"));
    }

    #[test]
    fn an_image_whose_bytes_are_not_its_claimed_type_is_refused() {
        let result = result_of(json!({"content": [
            {"type": "image", "data": PNG, "mimeType": "image/jpeg"},
        ]}));
        assert!(result.is_error);
        assert!(result.text_content().contains("refused"), "{result:?}");
    }

    #[test]
    fn resources_become_text_naming_their_uri_or_media_by_type() {
        let result = result_of(json!({"content": [
            {"type": "resource", "resource": {"uri": "demo://text/1", "mimeType": "text/plain", "text": "hello"}},
            {"type": "resource", "resource": {"uri": "demo://blob/2", "mimeType": "text/plain", "blob": "aGk="}},
            {"type": "resource", "resource": {"uri": "file:///chart.png", "mimeType": "image/png", "blob": PNG}},
            {"type": "resource_link", "uri": "demo://blob/3", "name": "Blob 3", "mimeType": "text/plain", "description": "Resource 3"},
        ]}));
        assert!(!result.is_error, "{result:?}");
        assert_eq!(
            result.content[0].as_text(),
            Some("Resource demo://text/1 (text/plain):\nhello")
        );
        assert_eq!(
            result.content[1].as_text(),
            Some("Resource demo://blob/2 (text/plain):\nhi")
        );
        let ContentBlock::Image(image) = &result.content[2] else {
            panic!("{result:?}")
        };
        assert_eq!(image.name.as_deref(), Some("file:///chart.png"));
        assert_eq!(
            result.content[3].as_text(),
            Some(
                "Resource link: demo://blob/3\nName: Blob 3\nType: text/plain\nDescription: Resource 3"
            )
        );
    }

    #[test]
    fn structured_content_is_text_without_content_and_metadata_beside_it() {
        let alone = result_of(json!({"content": [], "structuredContent": {"t": 33}}));
        assert_eq!(alone.text_content(), r#"{"t":33}"#);
        let beside = result_of(json!({
            "content": [{"type": "text", "text": "33 degrees"}],
            "structuredContent": {"t": 33}
        }));
        assert_eq!(beside.text_content(), "33 degrees");
        assert_eq!(
            structured_content(&beside.metadata),
            Some(&json!({"t": 33}))
        );
    }

    #[test]
    fn is_error_makes_an_error_result_with_its_content() {
        let result = result_of(json!({
            "content": [{"type": "text", "text": "Tool x not found"}],
            "isError": true
        }));
        assert!(result.is_error);
        assert_eq!(result.text_content(), "Tool x not found");
    }
}

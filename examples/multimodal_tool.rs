//! A multimodal tool: it hands the model a document from disk. The function layer
//! reads the file under its media policy — inside a root directory, type sniffed
//! from the bytes, allow-list, size limit — and refuses what breaks the policy.
//!
//! Run with `cargo run --example multimodal_tool`; its tests run with `cargo test`.

use std::path::Path;

use lmstack::function::{FunctionCallLayer, MediaPolicy, Tool, ToolOutput, ToolRegistry};
use lmstack::testing::ScriptedModel;
use lmstack::{ChatRequest, ContentBlock, Message, ToolCall};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tower::{Layer, ServiceExt};

/// The arguments of `open_report`.
#[derive(Deserialize, JsonSchema)]
struct Report {
    /// The report's file name, relative to the reports directory.
    path: String,
}

/// A one-page PDF that says "Q3: revenue up 12%".
const REPORT: &str = "%PDF-1.4
1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj
2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj
3 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 300 100] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >> endobj
4 0 obj << /Length 44 >> stream
BT /F1 18 Tf 20 50 Td (Q3: revenue up 12%) Tj ET
endstream endobj
5 0 obj << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> endobj
trailer << /Root 1 0 R >>
%%EOF
";

/// The function layer over a model that opens the report, then tries to escape
/// the reports directory; the reply's messages.
async fn open_reports(reports: &Path) -> Result<Vec<Message>, lmstack::Error> {
    // The tool only names the file; the layer reads it lazily, after the tool returned.
    let open_report = Tool::typed(
        "open_report",
        "Opens a report (PDF)",
        |args: Report| async move {
            ToolOutput::text(format!("Here is {}:", args.path))
                .with(ToolOutput::file_as(args.path, "application/pdf"))
        },
    );
    let layer = FunctionCallLayer::new(ToolRegistry::new([open_report])?)
        .media(MediaPolicy::new().root(reports).max_bytes(5 * 1024 * 1024));

    let model = ScriptedModel::new().reply_messages(vec![Message::tool_calls(vec![
        ToolCall::new("call_1", "open_report", json!({"path": "q3.pdf"})),
        ToolCall::new("call_2", "open_report", json!({"path": "../../etc/passwd"})),
    ])]);
    let request = ChatRequest::new(vec![Message::user("Summarise the Q3 report")]);
    layer.layer(model).oneshot(request).await?.collect().await
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let reports = tempfile::tempdir()?;
    std::fs::write(reports.path().join("q3.pdf"), REPORT)?;
    let messages = open_reports(reports.path()).await?;

    for result in messages[0].results() {
        println!("{} (error: {}):", result.call_id, result.is_error);
        for block in &result.content {
            match block {
                ContentBlock::Text { text, .. } => println!("  text: {text}"),
                ContentBlock::Document(media)
                | ContentBlock::Image(media)
                | ContentBlock::Audio(media) => println!(
                    "  {} {:?}, {} bytes as base64",
                    media.media_type().unwrap_or("media"),
                    media.name.as_deref().unwrap_or(""),
                    media.data_uri().map_or(0, |uri| uri.len()),
                ),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lmstack::Media;

    #[tokio::test]
    async fn the_report_is_read_and_the_escape_refused() {
        let reports = tempfile::tempdir().unwrap();
        std::fs::write(reports.path().join("q3.pdf"), REPORT).unwrap();
        let messages = open_reports(reports.path()).await.unwrap();
        let results = messages[0].results();
        assert!(!results[0].is_error);
        assert_eq!(
            results[0].content,
            vec![
                ContentBlock::text("Here is q3.pdf:"),
                ContentBlock::Document(
                    Media::from_bytes("application/pdf", REPORT.as_bytes()).with_name("q3.pdf")
                ),
            ]
        );
        assert!(results[1].is_error);
        assert_eq!(
            results[1].text_content(),
            "The tool `open_report` returned content that was refused: ../../etc/passwd is outside the directory tools may read."
        );
    }

    #[tokio::test]
    async fn a_file_that_is_not_what_it_claims_is_refused() {
        let reports = tempfile::tempdir().unwrap();
        std::fs::write(reports.path().join("q3.pdf"), b"\x89PNG\r\n\x1a\n").unwrap();
        let messages = open_reports(reports.path()).await.unwrap();
        let refused = &messages[0].results()[0];
        assert!(refused.is_error);
        assert!(
            refused
                .text_content()
                .ends_with("declared as application/pdf but its bytes are image/png."),
            "{refused:?}"
        );
    }
}

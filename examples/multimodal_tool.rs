//! A multimodal tool: it hands the model a document from disk. The function layer
//! reads the file under its media policy — inside a root directory, type sniffed
//! from the bytes, allow-list, size limit — and refuses what breaks the policy.
//!
//! Run with `cargo run --example multimodal_tool`.

use std::convert::Infallible;

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

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let reports = tempfile::tempdir()?;
    std::fs::write(reports.path().join("q3.pdf"), REPORT)?;

    // The tool only names the file; the layer reads it lazily, after the tool returned.
    let open_report = Tool::typed(
        "open_report",
        "Opens a report (PDF)",
        |args: Report| async move {
            Ok::<_, Infallible>(
                ToolOutput::text(format!("Here is {}:", args.path))
                    .with(ToolOutput::file_as(args.path, "application/pdf")),
            )
        },
    );
    let layer = FunctionCallLayer::new(ToolRegistry::new([open_report])?).media(
        MediaPolicy::new()
            .root(reports.path())
            .max_bytes(5 * 1024 * 1024),
    );

    let model = ScriptedModel::new().reply_messages(vec![Message::tool_calls(vec![
        ToolCall::new("call_1", "open_report", json!({"path": "q3.pdf"})),
        ToolCall::new("call_2", "open_report", json!({"path": "../../etc/passwd"})),
    ])]);
    let request = ChatRequest::new(vec![Message::user("Summarise the Q3 report")]);
    let messages = layer.layer(model).oneshot(request).await?.collect().await?;

    for result in messages[0].results() {
        println!("{} (error: {}):", result.call_id, result.is_error);
        for block in &result.content {
            match block {
                ContentBlock::Text { text } => println!("  text: {text}"),
                ContentBlock::Document(media) | ContentBlock::Image(media) => println!(
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

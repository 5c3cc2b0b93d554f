//! `lmstack demo`: the whole pipeline offline, with no keys.
//!
//! The stack is ToolLoop → FunctionCall → NaturalToolUse → a scripted model that
//! plays a text-only model: the tools are described in its system prompt; over
//! two rounds it writes `<tool_call>` text, which the parser turns into calls,
//! the function layer runs with real tools (a calculator, a clock and
//! `draw_boxes`, which returns an annotated picture), and the loop feeds the
//! results back, written as `<tool_response>` text (the picture as an image of
//! the same message).

use std::io::{self, IsTerminal};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use futures::StreamExt;
use image::{ImageFormat, Rgba, RgbaImage};
use lmstack::function::{FunctionCallLayer, MediaPolicy, ToolLoopLayer, ToolRegistry};
use lmstack::natural::NaturalToolUse;
use lmstack::testing::{Chunking, ScriptedModel};
use lmstack::{ChatRequest, ContentBlock, Error, Message, Reply, Role};
use tower::{ServiceBuilder, ServiceExt};

use crate::{show, tools};

/// Options of `lmstack demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Print the messages as JSON lines (lmstack's canonical form) instead of text.
    #[arg(long)]
    json: bool,
    /// Then print what the text-only model read in its last round: the tools in
    /// its system prompt, and the calls and results written as text.
    #[arg(long)]
    model_view: bool,
}

/// What the user asks.
const QUESTION: &str =
    "What is 1234 × 5678, what time is it, and can you mark the house and the sun in this picture?";

/// The model's first round: it calls the three tools, in natural `<tool_call>` text.
const ROUND_ONE: &str = r#"I'll use the tools for all three.
<tool_call name="calculator">
{"expression": "1234 * 5678"}
</tool_call>
<tool_call name="current_time">
{}
</tool_call>
<tool_call name="draw_boxes">
{"image": "scene.png", "boxes": [
  {"label": "house", "x": 52, "y": 92, "width": 112, "height": 70},
  {"label": "sun", "x": 236, "y": 22, "width": 52, "height": 52, "color": "orange"}
]}
</tool_call>"#;

/// The model's second round: it answers from the results (and "looks at" the image).
const ROUND_TWO: &str = "1234 × 5678 = 7,006,652 — the calculator agrees. \
The clock tool gave me the current time above (UTC). \
And in the annotated picture, the red box frames the house and the orange box the sun, \
each labelled at its top-left corner.";

/// Runs the demo.
pub fn run(args: DemoArgs) -> ExitCode {
    crate::block_on(demo(&args))
}

async fn demo(args: &DemoArgs) -> Result<(), Error> {
    let workspace = tempfile::tempdir().map_err(failure("cannot make a directory"))?;
    let scene = scene().map_err(failure("cannot draw the picture"))?;
    std::fs::write(workspace.path().join("scene.png"), &scene)
        .map_err(failure("cannot write the picture"))?;
    let media = MediaPolicy::new().root(workspace.path());

    let terminal = !args.json && io::stdout().is_terminal();
    let model = ScriptedModel::new()
        .chunking(Chunking::Random { seed: 5, max: 8 })
        .reply(ROUND_ONE)
        .reply(ROUND_TWO);
    let stack = ServiceBuilder::new()
        .layer(ToolLoopLayer::new())
        .layer(FunctionCallLayer::new(ToolRegistry::new(tools::all(&media))?).media(media))
        .layer(NaturalToolUse::new())
        // On a terminal, stream at a readable pace, as a model would.
        .map_response(move |reply: Reply| if terminal { paced(reply) } else { reply })
        .service(model.clone());

    let request = ChatRequest::new(vec![Message::multimodal(
        Role::User,
        vec![
            ContentBlock::text(QUESTION),
            ContentBlock::image_bytes("image/png", &scene),
        ],
    )])
    .streaming(true);
    let reply = stack.oneshot(request).await?;
    if args.json {
        show::json_lines(reply).await?;
    } else {
        show::text(reply, &format!("user: {QUESTION} [scene.png]")).await?;
    }
    match model.requests().last() {
        Some(last) if args.model_view => {
            println!("\n═══ what the text-only model read in its last round ═══\n");
            show::request(&last.messages)
        }
        _ => Ok(()),
    }
}

/// Turns another error into the demo's, saying what failed.
fn failure<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> Error {
    move |error| Error::stage("demo", format!("{what}: {error}"))
}

/// A reply whose events arrive a little apart.
fn paced(reply: Reply) -> Reply {
    Reply::from_stream(reply.then(|item| async move {
        tokio::time::sleep(Duration::from_millis(12)).await;
        item
    }))
}

/// The demo's picture: a house and the sun, 320×200, as PNG.
fn scene() -> Result<Vec<u8>, image::ImageError> {
    let (width, height, horizon) = (320u32, 200u32, 150u32);
    let mut image = RgbaImage::from_fn(width, height, |x, y| {
        if y >= horizon {
            return Rgba([70, 150, 60, 255]);
        }
        let (dx, dy) = (x as f32 - 262.0, y as f32 - 48.0);
        if dx * dx + dy * dy <= 22.0 * 22.0 {
            return Rgba([255, 205, 40, 255]);
        }
        let t = y as f32 / horizon as f32;
        Rgba([(120.0 + 90.0 * t) as u8, (180.0 + 50.0 * t) as u8, 250, 255])
    });
    let mut paint = |x0: u32, y0: u32, x1: u32, y1: u32, color: [u8; 3]| {
        for y in y0..y1 {
            for x in x0..x1 {
                image.put_pixel(x, y, Rgba([color[0], color[1], color[2], 255]));
            }
        }
    };
    paint(62, 112, 154, 160, [200, 170, 120]); // walls
    paint(98, 130, 118, 160, [110, 70, 40]); // door
    paint(72, 122, 90, 138, [170, 210, 240]); // window
    paint(128, 122, 146, 138, [170, 210, 240]); // window
    for row in 0..20 {
        // the roof, a triangle above the walls
        paint(
            108 - 2 * row - 4,
            92 + row,
            108 + 2 * row + 4,
            93 + row,
            [170, 50, 40],
        );
    }
    let mut png = Vec::new();
    image.write_to(&mut io::Cursor::new(&mut png), ImageFormat::Png)?;
    Ok(png)
}

//! `lmstack demo`: the whole pipeline offline, with no keys.
//!
//! The stack is ToolLoop → FunctionCall → NaturalToolUse → a scripted model that
//! plays a text-only model: the tools are described in its system prompt; over
//! two rounds it writes `<tool_call>` text, which the parser turns into calls,
//! the function layer runs with real tools (a calculator, a clock and
//! `draw_boxes`, which returns an annotated picture), and the loop feeds the
//! results back, written as `<tool_response>` text (the picture as an image of
//! the same message).

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use futures::StreamExt;
use image::{ImageFormat, Rgba, RgbaImage};
use lmstack::function::{FunctionCallLayer, MediaPolicy, ToolLoopLayer, ToolRegistry};
use lmstack::natural::NaturalToolUse;
use lmstack::testing::{Chunking, ScriptedModel};
use lmstack::{ChatRequest, ContentBlock, Error, Event, Joiner, Message, Reply, Role};
use tower::{ServiceBuilder, ServiceExt};

use crate::tools;

/// Options of `lmstack demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Print the messages as JSON lines (lmstack's canonical form) instead of text.
    #[arg(long)]
    json: bool,
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
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(demo(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
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
        .layer(NaturalToolUse::new().layer())
        // On a terminal, stream at a readable pace, as a model would.
        .map_response(move |reply: Reply| if terminal { paced(reply) } else { reply })
        .service(model);

    let request = ChatRequest::new(vec![Message::multimodal(
        Role::User,
        vec![
            ContentBlock::text(QUESTION),
            ContentBlock::image_bytes("image/png", &scene),
        ],
    )])
    .streaming(true);
    let reply = stack.oneshot(request).await?;
    let mut out = io::stdout().lock();
    if args.json {
        print_json(reply, &mut out).await
    } else {
        print_text(reply, &mut out).await
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

/// Prints each message as a JSON line as soon as it is complete.
async fn print_json(mut reply: Reply, out: &mut impl Write) -> Result<(), Error> {
    let mut joiner = Joiner::new();
    while let Some(item) = reply.next().await {
        joiner.push(item?);
        for message in joiner.take_completed() {
            write_json(out, &message)?;
        }
    }
    for message in joiner.finish() {
        write_json(out, &message)?;
    }
    Ok(())
}

fn write_json(out: &mut impl Write, message: &Message) -> Result<(), Error> {
    let line = serde_json::to_string(message).map_err(|e| Error::json("a message", e))?;
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(failure("cannot write the output"))
}

/// Prints text as it streams, and each tool call with its result. Whitespace
/// between tool calls is not shown.
async fn print_text(mut reply: Reply, out: &mut impl Write) -> Result<(), Error> {
    let mut text = format!("user: {QUESTION} [scene.png]\n");
    // Whether the next text starts a new assistant turn on screen, and the
    // whitespace at the end of the text so far, shown only if more text follows.
    let (mut new_turn, mut spaces) = (true, String::new());
    while let Some(item) = reply.next().await {
        match item? {
            Event::TextDelta(delta) => {
                let piece = if new_turn {
                    delta.text.trim_start()
                } else {
                    &delta.text
                };
                let body = piece.trim_end();
                if !body.is_empty() {
                    if new_turn {
                        text.push_str("\nassistant: ");
                        new_turn = false;
                    }
                    text.push_str(&spaces);
                    text.push_str(body);
                    spaces.clear();
                }
                spaces.push_str(&piece[body.len()..]);
            }
            Event::Message {
                message: Message::ToolAggregate(aggregate),
            } => {
                if !new_turn {
                    text.push('\n');
                }
                spaces.clear();
                for (call, result) in aggregate.calls.iter().zip(&aggregate.results) {
                    text.push_str(&format!("  ⚙ {} {}\n", call.name, call.arguments));
                    let mark = if result.is_error { "✗" } else { "→" };
                    for block in &result.content {
                        text.push_str(&format!("    {mark} {}\n", describe(block)));
                    }
                }
                new_turn = true;
            }
            _ => {}
        }
        write!(out, "{text}")
            .and_then(|()| out.flush())
            .map_err(failure("cannot write the output"))?;
        text.clear();
    }
    writeln!(out).map_err(failure("cannot write the output"))
}

/// One line about a content block.
fn describe(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text { text } => text.clone(),
        ContentBlock::Image(media) | ContentBlock::Document(media) => {
            let size = media
                .decode()
                .and_then(Result::ok)
                .map_or(0, |bytes| bytes.len());
            format!(
                "[{} {}, {:.1} KiB]",
                media.media_type().unwrap_or("media"),
                media.name.as_deref().unwrap_or("inline"),
                size as f64 / 1024.0
            )
        }
    }
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

//! `lmstack demo`: the whole pipeline offline, with no keys.
//!
//! The stack is ToolLoop → FunctionCall → NaturalToolUse → a scripted model that
//! plays a text-only model: the tools are described in its system prompt; over
//! three rounds it writes `<tool_call>` text, which the parser turns into calls,
//! the function layer runs with real tools, and the loop feeds the results back,
//! written as `<tool_response>` text. Round one computes, reads the clock and
//! asks `detect_boxes` where the house and the sun are — the tool asks the same
//! scripted model, playing a vision model this time, and reads the boxes from
//! its JSON; round two hands those boxes to `draw_boxes`, which returns the
//! annotated picture (as an image of the results message); round three answers.

use std::io::{self, IsTerminal};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use futures::StreamExt;
use image::{ImageFormat, Rgba, RgbaImage};
use lmstack::BoxChatService;
use lmstack::function::{FunctionCallLayer, MediaPolicy, ToolLoopLayer, ToolRegistry};
use lmstack::natural::NaturalToolUse;
use lmstack::service::ChatService;
use lmstack::testing::{Chunking, ScriptedModel};
use lmstack::{ChatRequest, ContentBlock, Error, Message, Reply, Role};
use tower::util::BoxCloneSyncService;
use tower::{ServiceBuilder, ServiceExt};

use crate::{conversation, show, tools};

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
    /// Leave the annotated picture and the conversation log (timestamped JSON
    /// lines, conversation.jsonl, with its images by reference in media/) in
    /// this directory, made if needed.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// What the user asks.
const QUESTION: &str = "What is 1234 × 5678, what time is it, \
and can you find the house and the sun in this picture and mark them?";

/// The model's first round: it calls three tools, in natural `<tool_call>` text.
const ROUND_ONE: &str = r#"I'll compute, read the clock, and ask the vision model where the house and the sun are.
<tool_call name="calculator">
{"expression": "1234 * 5678"}
</tool_call>
<tool_call name="current_time">
{}
</tool_call>
<tool_call name="detect_boxes">
{"image": "scene.png", "labels": ["house", "sun"]}
</tool_call>"#;

/// The same scripted model, asked by `detect_boxes`, playing a vision model: it
/// answers in prose around fenced JSON, as vision models do.
const VISION: &str = r#"I can see both objects. Here are their boxes:
```json
{"boxes": [
  {"label": "house", "confidence": 0.94, "box": [0.19, 0.46, 0.48, 0.8]},
  {"label": "sun", "confidence": 0.9, "box": [0.75, 0.13, 0.89, 0.35]}
]}
```"#;

/// The model's second round: it passes the boxes on to `draw_boxes`.
const ROUND_TWO: &str = r#"The vision model found both; I'll mark them.
<tool_call name="draw_boxes">
{"image": "scene.png", "boxes": [
  {"label": "house", "confidence": 0.94, "x1": 0.19, "y1": 0.46, "x2": 0.48, "y2": 0.8},
  {"label": "sun", "confidence": 0.9, "x1": 0.75, "y1": 0.13, "x2": 0.89, "y2": 0.35, "color": "orange"}
]}
</tool_call>"#;

/// The model's last round: it answers from the results (and "looks at" the image).
const ROUND_THREE: &str = "1234 × 5678 = 7,006,652 — the calculator agrees. \
The clock tool gave me the current time above (UTC). \
And in the annotated picture, the red box frames the house (confidence 0.94) \
and the orange box the sun (0.90), each labelled above its top-left corner.";

/// The name of the conversation log in `--out`.
const LOG: &str = "conversation.jsonl";

/// Runs the demo.
pub fn run(args: DemoArgs) -> ExitCode {
    crate::block_on(demo(&args))
}

async fn demo(args: &DemoArgs) -> Result<(), Error> {
    let workspace = Workspace::new()?;
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out).map_err(failure("cannot make the --out directory"))?;
    }
    let log = match &args.out {
        Some(out) => Some(
            std::fs::File::create(out.join(LOG))
                .map(|file| conversation::log(&out.join(LOG), file))
                .map_err(failure("cannot write the conversation log"))?,
        ),
        None => None,
    };

    let terminal = !args.json && io::stdout().is_terminal();
    let model = model();
    // On a terminal, stream at a readable pace, as a model would.
    let paced = ServiceBuilder::new()
        .map_response(move |reply: Reply| if terminal { paced(reply) } else { reply })
        .service(model.clone());
    let stack = ServiceBuilder::new()
        .option_layer(log.clone())
        .service(stack(&model, paced, workspace.media(), args.out.clone())?);
    let scene = &workspace.scene;

    let request = ChatRequest::new(vec![Message::multimodal(
        Role::User,
        vec![
            ContentBlock::text(QUESTION),
            ContentBlock::image_bytes("image/png", scene),
        ],
    )])
    .streaming(true);
    let reply = stack.oneshot(request).await?;
    if args.json {
        show::json_lines(reply).await?;
    } else {
        show::text(reply, &format!("user: {QUESTION} [scene.png]")).await?;
    }
    if let (Some(log), Some(out)) = (log, &args.out) {
        log.flush().await;
        saved(out, args.json);
    }
    match model.requests().last() {
        Some(last) if args.model_view => {
            println!("\n═══ what the text-only model read in its last round ═══\n");
            show::request(&last.messages)
        }
        _ => Ok(()),
    }
}

/// Where the demo's tools work: a temporary directory holding the scene.
pub struct Workspace {
    dir: tempfile::TempDir,
    /// The scene, as PNG.
    pub scene: Vec<u8>,
}

impl Workspace {
    /// A directory with the scene in it, as `scene.png`.
    pub fn new() -> Result<Self, Error> {
        let dir = tempfile::tempdir().map_err(failure("cannot make a directory"))?;
        let scene = scene().map_err(failure("cannot draw the picture"))?;
        std::fs::write(dir.path().join("scene.png"), &scene)
            .map_err(failure("cannot write the picture"))?;
        Ok(Workspace { dir, scene })
    }

    /// The media policy of the tools: they read under this directory.
    pub fn media(&self) -> MediaPolicy {
        MediaPolicy::new().root(self.dir.path())
    }
}

/// The scripted text-only model of one demo conversation (which also plays the
/// vision model `detect_boxes` asks).
pub fn model() -> ScriptedModel {
    ScriptedModel::new()
        .chunking(Chunking::Random { seed: 5, max: 8 })
        .reply(ROUND_ONE)
        .reply(VISION)
        .reply(ROUND_TWO)
        .reply(ROUND_THREE)
}

/// The demo's stack: ToolLoop → FunctionCall (the demo tools: images read under
/// `media`'s root, `detect_boxes` asking `model`, pictures saved in `out`) →
/// NaturalToolUse → `inner`, which is `model` (paced, on a terminal).
pub fn stack<S>(
    model: &ScriptedModel,
    inner: S,
    media: MediaPolicy,
    out: Option<PathBuf>,
) -> Result<BoxChatService, Error>
where
    S: ChatService + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
{
    let tools = tools::all(&media, BoxCloneSyncService::new(model.clone()), out);
    let stack = ServiceBuilder::new()
        .layer(ToolLoopLayer::new())
        .layer(FunctionCallLayer::new(ToolRegistry::new(tools)?).media(media))
        .layer(NaturalToolUse::new())
        .service(inner.map_err(Into::into));
    Ok(BoxCloneSyncService::new(stack))
}

/// Says where the conversation log is (`draw_boxes` names the picture it saved):
/// on stdout, or on stderr when stdout carries JSON lines.
fn saved(out: &Path, json: bool) {
    let note = format!("the conversation log: {}", out.join(LOG).display());
    if json {
        eprintln!("{note}");
    } else {
        println!("\n{note}");
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

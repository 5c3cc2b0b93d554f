//! `draw_boxes`: draws labelled rectangles on an image and returns the annotated
//! image to the model.

use std::io::Cursor;
use std::path::Path;

use image::{ImageFormat, ImageReader, Limits, Rgba, RgbaImage};
use lmstack::function::{MediaPolicy, Tool, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

use super::font;

/// The arguments of `draw_boxes`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Arguments {
    /// The image to annotate: a PNG or JPEG file in the tools' directory.
    pub image: String,
    /// The rectangles to draw.
    #[schemars(length(min = 1, max = 50))]
    pub boxes: Vec<LabelledBox>,
}

/// A labelled rectangle, in pixels from the image's top-left corner.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct LabelledBox {
    /// What the box marks.
    #[schemars(length(max = 40))]
    pub label: String,
    /// The left edge.
    pub x: u32,
    /// The top edge.
    pub y: u32,
    /// The width.
    #[schemars(range(min = 1))]
    pub width: u32,
    /// The height.
    #[schemars(range(min = 1))]
    pub height: u32,
    /// The colour; a different one per box when left out.
    pub color: Option<Color>,
}

/// Box colours.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Color {
    Red,
    Blue,
    Green,
    Orange,
    Purple,
    Cyan,
    Magenta,
    Yellow,
    White,
    Black,
}

impl Color {
    const CYCLE: [Color; 6] = [
        Color::Red,
        Color::Blue,
        Color::Green,
        Color::Orange,
        Color::Purple,
        Color::Magenta,
    ];

    fn rgba(self) -> Rgba<u8> {
        let [r, g, b] = match self {
            Color::Red => [220, 30, 40],
            Color::Blue => [30, 90, 230],
            Color::Green => [20, 160, 60],
            Color::Orange => [245, 140, 20],
            Color::Purple => [130, 50, 200],
            Color::Cyan => [0, 190, 210],
            Color::Magenta => [220, 40, 180],
            Color::Yellow => [250, 215, 0],
            Color::White => [255, 255, 255],
            Color::Black => [0, 0, 0],
        };
        Rgba([r, g, b, 255])
    }

    /// Text colour that reads on this colour.
    fn ink(self) -> Rgba<u8> {
        match self {
            Color::Yellow | Color::White | Color::Cyan => Rgba([0, 0, 0, 255]),
            _ => Rgba([255, 255, 255, 255]),
        }
    }
}

/// The largest image decoded, per side, in pixels.
const MAX_SIDE: u32 = 8192;
/// The most memory the decoder may take.
const MAX_DECODE_BYTES: u64 = 256 * 1024 * 1024;

/// The tool; it reads images under `media`'s root.
pub fn tool(media: MediaPolicy) -> Tool {
    Tool::typed(
        "draw_boxes",
        "Draws labelled rectangles on an image (PNG or JPEG) and returns the annotated image.",
        move |args: Arguments| {
            let media = media.clone();
            async move {
                tokio::task::spawn_blocking(move || annotate(&media, &args))
                    .await
                    .map_err(|error| error.to_string())?
            }
        },
    )
}

/// Draws the boxes of `args` and returns a summary and the annotated PNG.
pub fn annotate(media: &MediaPolicy, args: &Arguments) -> Result<ToolOutput, String> {
    let bytes = media
        .read(Path::new(&args.image))
        .map_err(|e| e.to_string())?;
    let format = match media.check(&bytes, None).map_err(|e| e.to_string())? {
        "image/png" => ImageFormat::Png,
        "image/jpeg" => ImageFormat::Jpeg,
        other => {
            return Err(format!(
                "{} is {other}; draw_boxes reads PNG and JPEG",
                args.image
            ));
        }
    };
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
    reader.limits(limits);
    let mut image = reader
        .decode()
        .map_err(|e| format!("cannot decode {}: {e}", args.image))?
        .to_rgba8();
    for (i, labelled) in args.boxes.iter().enumerate() {
        let color = labelled
            .color
            .unwrap_or(Color::CYCLE[i % Color::CYCLE.len()]);
        draw_box(&mut image, labelled, color)
            .map_err(|problem| format!("box {} ({:?}): {problem}", i + 1, labelled.label))?;
    }
    let (width, height) = image.dimensions();
    let mut png = Vec::new();
    image
        .write_to(&mut Cursor::new(&mut png), ImageFormat::Png)
        .map_err(|e| format!("cannot encode the annotated image: {e}"))?;
    let labels: Vec<&str> = args.boxes.iter().map(|b| b.label.as_str()).collect();
    let summary = format!(
        "Drew {} box{} on {} ({width}×{height} px): {}.",
        labels.len(),
        if labels.len() == 1 { "" } else { "es" },
        args.image,
        labels.join(", ")
    );
    Ok(ToolOutput::text(summary).with(ToolOutput::media(png, "image/png")))
}

/// Draws one box: its outline, and its label on a bar of its colour above it (or
/// inside its top edge when there is no room above).
fn draw_box(image: &mut RgbaImage, labelled: &LabelledBox, color: Color) -> Result<(), String> {
    let (width, height) = image.dimensions();
    if labelled.width == 0 || labelled.height == 0 {
        return Err("a box needs a width and a height".into());
    }
    if labelled.x >= width || labelled.y >= height {
        return Err(format!("it starts outside the {width}×{height} image"));
    }
    let right = labelled.x.saturating_add(labelled.width).min(width) - 1;
    let bottom = labelled.y.saturating_add(labelled.height).min(height) - 1;
    let thickness = (width.min(height) / 150).clamp(2, 6);
    let paint = color.rgba();
    fill(
        image,
        labelled.x,
        labelled.y,
        right,
        labelled.y + thickness - 1,
        paint,
    );
    // A box thinner than the outline is filled (no underflow near the origin).
    fill(
        image,
        labelled.x,
        (bottom + 1).saturating_sub(thickness),
        right,
        bottom,
        paint,
    );
    fill(
        image,
        labelled.x,
        labelled.y,
        labelled.x + thickness - 1,
        bottom,
        paint,
    );
    fill(
        image,
        (right + 1).saturating_sub(thickness),
        labelled.y,
        right,
        bottom,
        paint,
    );

    let scale = if height >= 200 { 2 } else { 1 };
    let bar = (font::HEIGHT + 2) * scale;
    let top = if labelled.y >= bar {
        labelled.y - bar
    } else {
        labelled.y
    };
    let glyphs = (width.saturating_sub(labelled.x) / ((font::WIDTH + 1) * scale)).saturating_sub(1);
    let text: String = labelled.label.chars().take(glyphs as usize).collect();
    let text_width = (text.chars().count() as u32 * (font::WIDTH + 1) + 1) * scale;
    fill(
        image,
        labelled.x,
        top,
        labelled.x + text_width,
        top + bar - 1,
        paint,
    );
    for (i, c) in (0u32..).zip(text.chars()) {
        let glyph = font::glyph(c);
        let left = labelled.x + (1 + i * (font::WIDTH + 1)) * scale;
        for gy in 0..font::HEIGHT {
            for gx in 0..font::WIDTH {
                if font::lit(&glyph, gx, gy) {
                    let (px, py) = (left + gx * scale, top + (1 + gy) * scale);
                    fill(image, px, py, px + scale - 1, py + scale - 1, color.ink());
                }
            }
        }
    }
    Ok(())
}

/// Fills the rectangle between two corners (inclusive), clipped to the image.
fn fill(image: &mut RgbaImage, x0: u32, y0: u32, x1: u32, y1: u32, color: Rgba<u8>) {
    let (width, height) = image.dimensions();
    for y in y0..=y1.min(height.saturating_sub(1)) {
        for x in x0..=x1.min(width.saturating_sub(1)) {
            image.put_pixel(x, y, color);
        }
    }
}

#[cfg(test)]
mod tests {
    use lmstack::ContentBlock;

    use super::*;

    fn blank_png(width: u32, height: u32) -> Vec<u8> {
        let image = RgbaImage::from_pixel(width, height, Rgba([200, 200, 200, 255]));
        let mut png = Vec::new();
        image
            .write_to(&mut Cursor::new(&mut png), ImageFormat::Png)
            .unwrap();
        png
    }

    fn workspace(png: &[u8]) -> (tempfile::TempDir, MediaPolicy) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("in.png"), png).unwrap();
        let media = MediaPolicy::new().root(dir.path());
        (dir, media)
    }

    fn boxed(label: &str, x: u32, y: u32, width: u32, height: u32) -> LabelledBox {
        LabelledBox {
            label: label.into(),
            x,
            y,
            width,
            height,
            color: None,
        }
    }

    #[test]
    fn draws_outlines_and_labels_and_returns_a_png() {
        let (_dir, media) = workspace(&blank_png(320, 200));
        let args = Arguments {
            image: "in.png".into(),
            boxes: vec![
                boxed("house", 40, 80, 100, 80),
                LabelledBox {
                    color: Some(Color::Yellow),
                    ..boxed("sun", 240, 20, 50, 50)
                },
            ],
        };
        let result = annotate(&media, &args)
            .unwrap()
            .into_result("c1", "draw_boxes", &media);
        assert!(!result.is_error, "{result:?}");
        assert_eq!(
            result.text_content(),
            "Drew 2 boxes on in.png (320×200 px): house, sun."
        );
        let ContentBlock::Image(media_block) = &result.content[1] else {
            panic!("an image: {result:?}");
        };
        assert_eq!(media_block.media_type(), Some("image/png"));
        let annotated = image::load_from_memory(&media_block.decode().unwrap().unwrap())
            .unwrap()
            .to_rgba8();
        assert_eq!(annotated.dimensions(), (320, 200));
        assert_eq!(
            *annotated.get_pixel(40, 120),
            Color::Red.rgba(),
            "left edge of box 1"
        );
        assert_eq!(
            *annotated.get_pixel(139, 159),
            Color::Red.rgba(),
            "bottom-right corner"
        );
        assert_eq!(
            *annotated.get_pixel(90, 120),
            Rgba([200, 200, 200, 255]),
            "inside is untouched"
        );
        assert_eq!(*annotated.get_pixel(289, 69), Color::Yellow.rgba());
        // The label bar sits above the box, with ink in it.
        let bar: Vec<_> = (40..100)
            .flat_map(|x| (62..80).map(move |y| (x, y)))
            .collect();
        assert!(
            bar.iter()
                .any(|&(x, y)| *annotated.get_pixel(x, y) == Color::Red.ink())
        );
    }

    #[test]
    fn boxes_are_clipped_and_bad_boxes_are_refused() {
        let (_dir, media) = workspace(&blank_png(64, 48));
        let clipped = Arguments {
            image: "in.png".into(),
            boxes: vec![boxed("edge", 50, 40, 500, 500)],
        };
        assert!(annotate(&media, &clipped).is_ok());
        let outside = Arguments {
            image: "in.png".into(),
            boxes: vec![boxed("far", 64, 0, 5, 5)],
        };
        assert_eq!(
            annotate(&media, &outside).unwrap_err(),
            "box 1 (\"far\"): it starts outside the 64×48 image"
        );
    }

    #[test]
    fn boxes_thinner_than_the_outline_at_the_origin_are_filled() {
        let mut image = RgbaImage::from_pixel(64, 48, Rgba([200, 200, 200, 255]));
        for (width, height) in [(1, 1), (1, 30), (30, 1)] {
            let labelled = LabelledBox {
                color: Some(Color::Blue),
                ..boxed("", 0, 0, width, height)
            };
            draw_box(&mut image, &labelled, Color::Blue).unwrap();
            assert_eq!(*image.get_pixel(0, 0), Color::Blue.rgba());
            assert_eq!(
                *image.get_pixel(width - 1, height - 1),
                Color::Blue.rgba(),
                "{width}×{height}"
            );
        }
        assert_eq!(*image.get_pixel(5, 5), Rgba([200, 200, 200, 255]));
    }

    #[test]
    fn images_are_read_only_inside_the_root() {
        let (_dir, media) = workspace(&blank_png(8, 8));
        let args = Arguments {
            image: "../in.png".into(),
            boxes: vec![boxed("x", 0, 0, 2, 2)],
        };
        assert_eq!(
            annotate(&media, &args).unwrap_err(),
            "../in.png is outside the directory tools may read"
        );
    }
}

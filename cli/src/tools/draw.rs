//! `draw_boxes`: draws labelled rectangles on an image, returns the annotated
//! image to the model and, when given a directory, saves it there.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use image::{Rgba, RgbaImage};
use lmstack::function::{MediaPolicy, Tool, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

use super::font;
use super::picture::{self, Picture};

/// The arguments of `draw_boxes`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Arguments {
    /// The image to annotate: a PNG or JPEG file in the tools' directory.
    pub image: String,
    /// The rectangles to draw.
    #[schemars(length(min = 1, max = 50))]
    pub boxes: Vec<LabelledBox>,
}

/// A labelled rectangle.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct LabelledBox {
    /// What the box marks.
    #[schemars(length(max = 40))]
    pub label: String,
    /// Where it is.
    #[serde(flatten)]
    pub place: Place,
    /// How sure a detector was, from 0 to 1; written after the label.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub confidence: Option<f64>,
    /// The colour; a different one per box when left out.
    pub color: Option<Color>,
}

/// Where a box is: in pixels, or in fractions of the image's size (as
/// `detect_boxes` gives them).
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum Place {
    /// Pixels from the image's top-left corner.
    Pixels {
        /// The left edge.
        x: u32,
        /// The top edge.
        y: u32,
        /// The width.
        #[schemars(range(min = 1))]
        width: u32,
        /// The height.
        #[schemars(range(min = 1))]
        height: u32,
    },
    /// Corners as fractions of the image's width and height, from its top-left
    /// corner: (x1, y1) top-left, (x2, y2) bottom-right.
    Normalized {
        /// The left edge, from 0 to 1.
        #[schemars(range(min = 0.0, max = 1.0))]
        x1: f64,
        /// The top edge, from 0 to 1.
        #[schemars(range(min = 0.0, max = 1.0))]
        y1: f64,
        /// The right edge, from 0 to 1.
        #[schemars(range(min = 0.0, max = 1.0))]
        x2: f64,
        /// The bottom edge, from 0 to 1.
        #[schemars(range(min = 0.0, max = 1.0))]
        y2: f64,
    },
}

/// A rectangle in pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rect {
    x: u32,
    y: u32,
    width: u32,
    height: u32,
}

impl Place {
    /// The rectangle on an image of this size.
    fn on(self, width: u32, height: u32) -> Result<Rect, String> {
        match self {
            Place::Pixels {
                x,
                y,
                width,
                height,
            } => Ok(Rect {
                x,
                y,
                width,
                height,
            }),
            Place::Normalized { x1, y1, x2, y2 } => {
                if !(x1 < x2 && y1 < y2) {
                    return Err("(x2, y2) must lie right of and below (x1, y1)".into());
                }
                let at = |fraction: f64, side: u32| {
                    (fraction.clamp(0.0, 1.0) * f64::from(side)).round() as u32
                };
                let (left, top) = (
                    at(x1, width).min(width.saturating_sub(1)),
                    at(y1, height).min(height.saturating_sub(1)),
                );
                Ok(Rect {
                    x: left,
                    y: top,
                    width: at(x2, width).saturating_sub(left).max(1),
                    height: at(y2, height).saturating_sub(top).max(1),
                })
            }
        }
    }
}

impl LabelledBox {
    /// The text above the box: its label, and its confidence when known.
    fn caption(&self) -> String {
        match self.confidence {
            Some(confidence) => format!("{} {confidence:.2}", self.label),
            None => self.label.clone(),
        }
    }
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

/// The tool; it reads images under `media`'s root, and saves each annotated
/// image in `save` when given.
pub fn tool(media: MediaPolicy, save: Option<PathBuf>) -> Tool {
    Tool::typed(
        "draw_boxes",
        "Draws labelled rectangles on an image (PNG or JPEG) and returns the annotated image. \
         Boxes are in pixels (x, y, width, height) or, as detect_boxes returns them, \
         corners normalized to 0..1 (x1, y1, x2, y2) with an optional confidence.",
        move |args: Arguments| {
            let (media, save) = (media.clone(), save.clone());
            async move {
                tokio::task::spawn_blocking(move || annotate(&media, save.as_deref(), &args))
                    .await
                    .map_err(|error| error.to_string())?
            }
        },
    )
}

/// Draws the boxes of `args`, saves the result in `save` when given, and returns
/// a summary and the annotated PNG.
pub fn annotate(
    media: &MediaPolicy,
    save: Option<&Path>,
    args: &Arguments,
) -> Result<ToolOutput, String> {
    let mut image = Picture::read(media, &args.image)?.decode()?;
    let (width, height) = image.dimensions();
    for (i, labelled) in args.boxes.iter().enumerate() {
        let color = labelled
            .color
            .unwrap_or(Color::CYCLE[i % Color::CYCLE.len()]);
        labelled
            .place
            .on(width, height)
            .and_then(|rect| draw_box(&mut image, rect, &labelled.caption(), color))
            .map_err(|problem| format!("box {} ({:?}): {problem}", i + 1, labelled.label))?;
    }
    let png = picture::png(&image)?;
    let captions: Vec<String> = args.boxes.iter().map(LabelledBox::caption).collect();
    let mut summary = format!(
        "Drew {} box{} on {} ({width}×{height} px): {}.",
        captions.len(),
        if captions.len() == 1 { "" } else { "es" },
        args.image,
        captions.join(", ")
    );
    if let Some(dir) = save {
        let saved = save_new(dir, &args.image, &png)
            .map_err(|e| format!("cannot save the annotated image in {}: {e}", dir.display()))?;
        summary.push_str(&format!(" Saved as {}.", saved.display()));
    }
    Ok(ToolOutput::text(summary).with(ToolOutput::media(png, "image/png")))
}

/// Writes `png` in `dir` under a name made from `source`'s
/// (`scene.png` → `scene-boxes.png`, then `scene-boxes-2.png`, …), never over a
/// file that exists; returns its path.
fn save_new(dir: &Path, source: &str, png: &[u8]) -> io::Result<PathBuf> {
    let stem = Path::new(source)
        .file_stem()
        .and_then(|stem| stem.to_str())
        .unwrap_or("image");
    for n in 1..=1000 {
        let name = match n {
            1 => format!("{stem}-boxes.png"),
            n => format!("{stem}-boxes-{n}.png"),
        };
        let path = dir.join(name);
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(mut file) => {
                file.write_all(png)?;
                return Ok(path);
            }
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(error),
        }
    }
    Err(io::Error::other(
        "a thousand annotated copies are there already",
    ))
}

/// Draws one box: its outline, and its label on a bar of its colour above it (or
/// inside its top edge when there is no room above).
fn draw_box(image: &mut RgbaImage, rect: Rect, caption: &str, color: Color) -> Result<(), String> {
    let (width, height) = image.dimensions();
    if rect.width == 0 || rect.height == 0 {
        return Err("a box needs a width and a height".into());
    }
    if rect.x >= width || rect.y >= height {
        return Err(format!("it starts outside the {width}×{height} image"));
    }
    let right = rect.x.saturating_add(rect.width).min(width) - 1;
    let bottom = rect.y.saturating_add(rect.height).min(height) - 1;
    let thickness = (width.min(height) / 150).clamp(2, 6);
    let paint = color.rgba();
    fill(image, rect.x, rect.y, right, rect.y + thickness - 1, paint);
    // A box thinner than the outline is filled (no underflow near the origin).
    fill(
        image,
        rect.x,
        (bottom + 1).saturating_sub(thickness),
        right,
        bottom,
        paint,
    );
    fill(image, rect.x, rect.y, rect.x + thickness - 1, bottom, paint);
    fill(
        image,
        (right + 1).saturating_sub(thickness),
        rect.y,
        right,
        bottom,
        paint,
    );

    let scale = if height >= 200 { 2 } else { 1 };
    let bar = (font::HEIGHT + 2) * scale;
    let top = if rect.y >= bar { rect.y - bar } else { rect.y };
    // The caption as far as it fits across the image; moved left when it would
    // run past the right edge.
    let advance = (font::WIDTH + 1) * scale;
    let glyphs = (width / advance).saturating_sub(1);
    let text: String = caption.chars().take(glyphs as usize).collect();
    let text_width = (text.chars().count() as u32 * (font::WIDTH + 1) + 1) * scale;
    let start = rect.x.min(width.saturating_sub(text_width + 1));
    fill(image, start, top, start + text_width, top + bar - 1, paint);
    for (i, c) in (0u32..).zip(text.chars()) {
        let glyph = font::glyph(c);
        let left = start + (1 + i * (font::WIDTH + 1)) * scale;
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
        picture::png(&image).unwrap()
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
            place: Place::Pixels {
                x,
                y,
                width,
                height,
            },
            confidence: None,
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
        let result = annotate(&media, None, &args)
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
        assert!(annotate(&media, None, &clipped).is_ok());
        let outside = Arguments {
            image: "in.png".into(),
            boxes: vec![boxed("far", 64, 0, 5, 5)],
        };
        assert_eq!(
            annotate(&media, None, &outside).unwrap_err(),
            "box 1 (\"far\"): it starts outside the 64×48 image"
        );
    }

    #[test]
    fn boxes_thinner_than_the_outline_at_the_origin_are_filled() {
        let mut image = RgbaImage::from_pixel(64, 48, Rgba([200, 200, 200, 255]));
        for (width, height) in [(1, 1), (1, 30), (30, 1)] {
            let rect = Rect {
                x: 0,
                y: 0,
                width,
                height,
            };
            draw_box(&mut image, rect, "", Color::Blue).unwrap();
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
            annotate(&media, None, &args).unwrap_err(),
            "../in.png is outside the directory tools may read"
        );
    }

    #[test]
    fn normalized_boxes_land_where_their_fractions_say_with_the_confidence_written() {
        let (dir, media) = workspace(&blank_png(200, 100));
        let args: Arguments = serde_json::from_value(serde_json::json!({
            "image": "in.png",
            "boxes": [{"label": "cat", "confidence": 0.875,
                       "x1": 0.25, "y1": 0.5, "x2": 0.75, "y2": 0.9, "color": "green"}]
        }))
        .unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let result =
            annotate(&media, Some(&out), &args)
                .unwrap()
                .into_result("c1", "draw_boxes", &media);
        let saved = out.join("in-boxes.png");
        assert_eq!(
            result.text_content(),
            format!(
                "Drew 1 box on in.png (200×100 px): cat 0.88. Saved as {}.",
                saved.display()
            )
        );
        let annotated = image::open(&saved).unwrap().to_rgba8();
        let green = Color::Green.rgba();
        // Corners at (50, 50) and (149, 89): the outline is there, the inside is not.
        assert_eq!(*annotated.get_pixel(50, 70), green, "left edge");
        assert_eq!(*annotated.get_pixel(149, 70), green, "right edge");
        assert_eq!(*annotated.get_pixel(100, 89), green, "bottom edge");
        assert_eq!(*annotated.get_pixel(48, 70), Rgba([200, 200, 200, 255]));
        assert_eq!(*annotated.get_pixel(152, 70), Rgba([200, 200, 200, 255]));
        assert_eq!(*annotated.get_pixel(100, 70), Rgba([200, 200, 200, 255]));
        // The caption bar above the box holds ink.
        assert!(
            (50..120).any(|x| (41..50).any(|y| *annotated.get_pixel(x, y) == Color::Green.ink()))
        );
        // A second picture from the same source gets a name of its own.
        annotate(&media, Some(&out), &args).unwrap();
        assert!(out.join("in-boxes-2.png").is_file());
        assert_eq!(
            std::fs::read(&saved).unwrap(),
            std::fs::read(out.join("in-boxes-2.png")).unwrap()
        );
    }

    #[test]
    fn an_inverted_normalized_box_is_refused() {
        let (_dir, media) = workspace(&blank_png(64, 48));
        let args: Arguments = serde_json::from_value(serde_json::json!({
            "image": "in.png",
            "boxes": [{"label": "x", "x1": 0.5, "y1": 0.1, "x2": 0.2, "y2": 0.4}]
        }))
        .unwrap();
        assert_eq!(
            annotate(&media, None, &args).unwrap_err(),
            "box 1 (\"x\"): (x2, y2) must lie right of and below (x1, y1)"
        );
    }
}

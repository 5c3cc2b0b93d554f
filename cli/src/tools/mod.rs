//! The tools of `lmstack demo` (and of `lmstack chat`): a calculator, the current
//! time, `detect_boxes`, which asks a vision model where things are in an image,
//! and `draw_boxes`, which returns an annotated image to the model.

pub mod calculator;
pub mod clock;
pub mod detect;
pub mod draw;
mod font;
mod picture;

use std::path::PathBuf;

use lmstack::function::{MediaPolicy, Tool};

/// All the tools: the image tools read images under `media`'s root,
/// `detect_boxes` asks `vision`, and `draw_boxes` saves what it draws in `save`
/// when given.
pub fn all(media: &MediaPolicy, vision: detect::Vision, save: Option<PathBuf>) -> Vec<Tool> {
    vec![
        calculator::tool(),
        clock::tool(),
        detect::tool(media.clone(), vision),
        draw::tool(media.clone(), save),
    ]
}

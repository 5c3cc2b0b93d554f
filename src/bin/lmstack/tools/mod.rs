//! The tools of `lmstack demo` (and of `lmstack chat`): a calculator, the current
//! time, and `draw_boxes`, which returns an annotated image to the model.

pub mod calculator;
pub mod clock;
pub mod draw;
mod font;

use lmstack::function::{MediaPolicy, Tool};

/// All the tools; `draw_boxes` reads images under `media`'s root.
pub fn all(media: &MediaPolicy) -> Vec<Tool> {
    vec![calculator::tool(), clock::tool(), draw::tool(media.clone())]
}

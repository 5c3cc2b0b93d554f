//! `detect_boxes`: asks a vision model — through an lmstack stack, the same
//! provider the chat uses — where the named items are in an image, and returns
//! their boxes with corners normalized to [0, 1], ready for `draw_boxes`.

use lmstack::function::{MediaPolicy, Tool, ToolOutput};
use lmstack::natural::json_in_reply;
use lmstack::{ChatRequest, ContentBlock, Error, Message, Reply, Role};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tower::ServiceExt;
use tower::util::BoxCloneSyncService;

use super::picture::Picture;

/// The model the detector asks: any chat stack that reads images.
pub type Vision = BoxCloneSyncService<ChatRequest, Reply, Error>;

/// The arguments of `detect_boxes`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Arguments {
    /// The image to look at: a PNG or JPEG file in the tools' directory.
    pub image: String,
    /// What to find, such as `["house", "sun"]`; every instance of each is boxed.
    #[schemars(length(min = 1, max = 20))]
    pub labels: Vec<String>,
}

/// What the detector found.
#[derive(Debug, PartialEq, Serialize)]
pub struct Detections {
    /// The image looked at.
    pub image: String,
    /// Its width in pixels.
    pub width: u32,
    /// Its height in pixels.
    pub height: u32,
    /// The boxes, in the order the vision model gave them.
    pub boxes: Vec<Detection>,
}

/// One item found: its label (as asked), the vision model's confidence when it
/// gave one, and its corners as fractions of the image's width and height.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Detection {
    pub label: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    pub x1: f64,
    pub y1: f64,
    pub x2: f64,
    pub y2: f64,
}

/// What the vision model is told.
const INSTRUCTIONS: &str = "You find objects in images. Answer with JSON only, in this form:
{\"boxes\": [{\"label\": \"cat\", \"confidence\": 0.93, \"box\": [x1, y1, x2, y2]}]}
where (x1, y1) is the top-left and (x2, y2) the bottom-right corner of the object, \
as fractions of the image's width and height (0 to 1, from the top-left corner of the image), \
and confidence is how sure you are, from 0 to 1. Give one entry for every instance of each \
requested label that you see; leave out labels you cannot see.";

/// The most of the vision model's reply quoted when it holds no boxes.
const QUOTE: usize = 300;

/// The tool; it reads images under `media`'s root and asks `vision`.
pub fn tool(media: MediaPolicy, vision: Vision) -> Tool {
    Tool::typed(
        "detect_boxes",
        "Finds the named items in an image (PNG or JPEG) with a vision model and returns \
         their bounding boxes: a label, a confidence and corners x1, y1, x2, y2 as fractions \
         (0..1) of the image's width and height — pass them to draw_boxes as they are.",
        move |args: Arguments| {
            let (media, vision) = (media.clone(), vision.clone());
            async move {
                detect(&media, vision, args)
                    .await
                    .map(|d| ToolOutput::json(&d))
            }
        },
    )
}

/// Asks `vision` for the boxes of `args.labels` in `args.image`.
pub async fn detect(
    media: &MediaPolicy,
    vision: Vision,
    args: Arguments,
) -> Result<Detections, String> {
    let picture = {
        let (media, name) = (media.clone(), args.image.clone());
        tokio::task::spawn_blocking(move || {
            let picture = Picture::read(&media, &name)?;
            let size = picture.dimensions()?;
            Ok::<_, String>((picture, size))
        })
        .await
        .map_err(|e| e.to_string())??
    };
    let ((picture, (width, height)), labels) = (picture, args.labels);
    let request = ChatRequest::new(vec![
        Message::system(INSTRUCTIONS),
        Message::multimodal(
            Role::User,
            vec![
                ContentBlock::text(format!("Find: {}.", labels.join(", "))),
                ContentBlock::image_bytes(picture.media_type, &picture.bytes),
            ],
        ),
    ]);
    let asked = |e: Error| format!("the vision model failed: {e}");
    let reply = vision.oneshot(request).await.map_err(asked)?;
    let said: String = reply
        .collect()
        .await
        .map_err(asked)?
        .iter()
        .filter(|message| message.role() == Role::Assistant)
        .filter_map(Message::as_text)
        .collect();
    let boxes = read_boxes(&said, &labels, (width, height));
    if boxes.is_empty() {
        let quoted: String = said.chars().take(QUOTE).collect();
        return Err(format!(
            "the vision model's reply held no usable boxes for {}; it said: {quoted:?}",
            labels.join(", ")
        ));
    }
    Ok(Detections {
        image: args.image,
        width,
        height,
        boxes,
    })
}

/// The usable boxes of the requested labels in a vision model's reply.
///
/// The reply's JSON is found as the JSON dialect finds it (whole, fenced, or in
/// prose). Boxes are read from a list, or from the first list under `boxes`,
/// `detections`, `objects` or `results`; each entry names its item by `label`,
/// `name` or `class`, may give `confidence` or `score` (0..1), and gives its
/// corners as `box` / `bbox` / `bounding_box` (`[x1, y1, x2, y2]` or an object),
/// as fields `x1`, `y1`, `x2`, `y2`, or as Gemini's `box_2d` (`[y1, x1, y2, x2]`
/// in thousandths). Corners above 1 are read as pixels (so is Qwen-VL's
/// `bbox_2d`). Labels match the requested ones case-insensitively; entries of
/// other labels, or whose box is empty or lies outside the image, are left out.
pub fn read_boxes(reply: &str, labels: &[String], size: (u32, u32)) -> Vec<Detection> {
    let Some(value) = json_in_reply(reply) else {
        return Vec::new();
    };
    let entries = match value {
        Value::Array(entries) => entries,
        Value::Object(mut object) => ["boxes", "detections", "objects", "results"]
            .iter()
            .find_map(|key| match object.remove(*key) {
                Some(Value::Array(entries)) => Some(entries),
                _ => None,
            })
            .unwrap_or_else(|| vec![Value::Object(object)]),
        _ => Vec::new(),
    };
    entries
        .iter()
        .filter_map(Value::as_object)
        .filter_map(|entry| detection(entry, labels, size))
        .collect()
}

/// One entry as a detection, when it is one of `labels` with a usable box.
fn detection(entry: &Map<String, Value>, labels: &[String], size: (u32, u32)) -> Option<Detection> {
    let named = first(entry, &["label", "name", "class"])?.as_str()?.trim();
    let label = labels
        .iter()
        .find(|l| l.trim().eq_ignore_ascii_case(named))?;
    let confidence = first(entry, &["confidence", "score"])
        .and_then(Value::as_f64)
        .filter(|c| (0.0..=1.0).contains(c));
    let [x1, y1, x2, y2] = corners(entry, size)?;
    Some(Detection {
        label: label.clone(),
        confidence,
        x1,
        y1,
        x2,
        y2,
    })
}

/// An entry's corners, normalized, ordered and rounded to 4 places.
fn corners(entry: &Map<String, Value>, (width, height): (u32, u32)) -> Option<[f64; 4]> {
    let (mut c, pixels) = if let Some(gemini) = entry.get("box_2d") {
        let [y1, x1, y2, x2] = four(gemini)?;
        ([x1, y1, x2, y2].map(|v| v / 1000.0), false)
    } else if let Some(qwen) = entry.get("bbox_2d") {
        (four(qwen)?, true)
    } else {
        let c = match first(entry, &["box", "bbox", "bounding_box"]) {
            Some(value) => four(value)?,
            None => fields(entry)?,
        };
        (c, c.iter().any(|v| *v > 1.0))
    };
    if pixels {
        c = [
            c[0] / f64::from(width),
            c[1] / f64::from(height),
            c[2] / f64::from(width),
            c[3] / f64::from(height),
        ];
    }
    // A little past the edge is rounding; more is not this image.
    if c.iter()
        .any(|v| !v.is_finite() || !(-0.01..=1.01).contains(v))
    {
        return None;
    }
    let round = |v: f64| (v.clamp(0.0, 1.0) * 1e4).round() / 1e4;
    let [x1, x2] = [round(c[0].min(c[2])), round(c[0].max(c[2]))];
    let [y1, y2] = [round(c[1].min(c[3])), round(c[1].max(c[3]))];
    (x1 < x2 && y1 < y2).then_some([x1, y1, x2, y2])
}

/// Four numbers: a list of four, or an object's corner fields.
fn four(value: &Value) -> Option<[f64; 4]> {
    match value {
        Value::Array(list) => numbers(list.iter().map(Some)),
        Value::Object(object) => fields(object),
        _ => None,
    }
}

/// An object's `x1`, `y1`, `x2`, `y2`.
fn fields(object: &Map<String, Value>) -> Option<[f64; 4]> {
    numbers(
        ["x1", "y1", "x2", "y2"]
            .map(|key| object.get(key))
            .into_iter(),
    )
}

/// Exactly four numbers.
fn numbers<'a>(values: impl Iterator<Item = Option<&'a Value>>) -> Option<[f64; 4]> {
    let numbers: Vec<f64> = values
        .map(|value| value.and_then(Value::as_f64))
        .collect::<Option<_>>()?;
    numbers.try_into().ok()
}

/// The value of the first of `keys` that `entry` has.
fn first<'a>(entry: &'a Map<String, Value>, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().find_map(|key| entry.get(*key))
}

#[cfg(test)]
mod tests {
    use image::{Rgba, RgbaImage};
    use lmstack::testing::ScriptedModel;

    use super::super::picture;
    use super::*;

    /// A 40×20 PNG in a directory the tools may read, and a model that answers `reply`.
    fn setup(reply: &str) -> (tempfile::TempDir, MediaPolicy, ScriptedModel) {
        let dir = tempfile::tempdir().unwrap();
        let png = picture::png(&RgbaImage::from_pixel(40, 20, Rgba([9, 9, 9, 255]))).unwrap();
        std::fs::write(dir.path().join("in.png"), png).unwrap();
        let media = MediaPolicy::new().root(dir.path());
        (dir, media, ScriptedModel::new().reply(reply))
    }

    fn asking(image: &str) -> Arguments {
        Arguments {
            image: image.into(),
            labels: vec!["house".into()],
        }
    }

    #[tokio::test]
    async fn the_vision_model_is_shown_the_image_and_asked_for_the_labels() {
        let (_dir, media, model) =
            setup(r#"{"boxes": [{"label": "house", "confidence": 0.5, "box": [0, 0, 0.5, 1]}]}"#);
        let found = detect(&media, Vision::new(model.clone()), asking("in.png"))
            .await
            .unwrap();
        assert_eq!(
            found,
            Detections {
                image: "in.png".into(),
                width: 40,
                height: 20,
                boxes: vec![found_box("house", Some(0.5), [0.0, 0.0, 0.5, 1.0])],
            }
        );
        let request = &model.requests()[0];
        assert_eq!(request.messages[0], Message::system(INSTRUCTIONS));
        let Message::Multimodal(asked) = &request.messages[1] else {
            panic!("{:?}", request.messages[1]);
        };
        assert_eq!(asked.content[0], ContentBlock::text("Find: house."));
        let ContentBlock::Image(image) = &asked.content[1] else {
            panic!("{asked:?}");
        };
        assert_eq!(image.media_type(), Some("image/png"));
        assert!(request.options.tools.is_empty());
    }

    #[tokio::test]
    async fn a_reply_without_boxes_or_a_failed_model_is_an_error_that_says_so() {
        let (_dir, media, model) = setup("I cannot see any house, sorry.");
        assert_eq!(
            detect(&media, Vision::new(model), asking("in.png"))
                .await
                .unwrap_err(),
            "the vision model's reply held no usable boxes for house; \
             it said: \"I cannot see any house, sorry.\""
        );
        let (_dir, media, model) = setup("unused");
        let failing = ScriptedModel::new().fail("the GPU is on fire");
        assert!(
            detect(&media, Vision::new(failing), asking("in.png"))
                .await
                .unwrap_err()
                .starts_with("the vision model failed: ")
        );
        assert_eq!(
            detect(&media, Vision::new(model.clone()), asking("../in.png"))
                .await
                .unwrap_err(),
            "../in.png is outside the directory tools may read"
        );
        assert!(model.requests().is_empty(), "no image, no question");
    }

    fn labels() -> Vec<String> {
        vec!["house".into(), "sun".into()]
    }

    fn found_box(label: &str, confidence: Option<f64>, c: [f64; 4]) -> Detection {
        Detection {
            label: label.into(),
            confidence,
            x1: c[0],
            y1: c[1],
            x2: c[2],
            y2: c[3],
        }
    }

    #[test]
    fn the_asked_form_in_a_fence_with_several_instances() {
        let reply = "Sure:\n```json\n{\"boxes\": [\
            {\"label\": \"House\", \"confidence\": 0.9, \"box\": [0.1, 0.2, 0.5, 0.8]},\
            {\"label\": \"house\", \"confidence\": 0.7, \"box\": [0.6, 0.2, 0.9, 0.8]},\
            {\"label\": \"tree\", \"confidence\": 0.8, \"box\": [0.0, 0.0, 0.1, 0.1]},\
            {\"label\": \"sun\", \"box\": [0.9, 0.3, 0.8, 0.1]}]}\n```";
        assert_eq!(
            read_boxes(reply, &labels(), (320, 200)),
            [
                found_box("house", Some(0.9), [0.1, 0.2, 0.5, 0.8]),
                found_box("house", Some(0.7), [0.6, 0.2, 0.9, 0.8]),
                found_box("sun", None, [0.8, 0.1, 0.9, 0.3]),
            ]
        );
    }

    #[test]
    fn gemini_thousandths_qwen_pixels_and_corner_fields() {
        let reply = r#"[
            {"label": "house", "box_2d": [460, 190, 800, 480]},
            {"name": "sun", "score": 0.8, "bbox_2d": [240, 26, 284, 70]},
            {"class": "sun", "x1": 0.75, "y1": 0.13, "x2": 0.89, "y2": 0.35},
            {"label": "sun", "bbox": {"x1": 32, "y1": 20, "x2": 64, "y2": 40}}
        ]"#;
        assert_eq!(
            read_boxes(reply, &labels(), (320, 200)),
            [
                found_box("house", None, [0.19, 0.46, 0.48, 0.8]),
                found_box("sun", Some(0.8), [0.75, 0.13, 0.8875, 0.35]),
                found_box("sun", None, [0.75, 0.13, 0.89, 0.35]),
                found_box("sun", None, [0.1, 0.1, 0.2, 0.2]),
            ]
        );
    }

    #[test]
    fn unusable_boxes_are_left_out() {
        let reply = r#"{"detections": [
            {"label": "house", "box": [0.2, 0.2, 0.2, 0.5]},
            {"label": "house", "box": [10, 10, 900, 50]},
            {"label": "house", "box": [0.1, 0.2, 0.3]},
            {"label": "house", "box": ["a", 0, 1, 1]},
            {"box": [0.1, 0.1, 0.2, 0.2]},
            {"label": "sun", "confidence": 7, "box": [0.1, 0.1, 0.2, 0.2]}
        ]}"#;
        assert_eq!(
            read_boxes(reply, &labels(), (320, 200)),
            [found_box("sun", None, [0.1, 0.1, 0.2, 0.2])]
        );
        assert!(read_boxes("I see a house and a sun.", &labels(), (320, 200)).is_empty());
        assert!(read_boxes("{\"boxes\": []}", &labels(), (320, 200)).is_empty());
    }
}

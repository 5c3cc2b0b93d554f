//! `lmstack demo`: the offline pipeline runs real tools from a scripted text-only
//! model's `<tool_call>` text, over two rounds.

use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lmstack::{ContentBlock, Message, Role};

fn demo(args: &[&str]) -> (String, Duration) {
    let start = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_lmstack"))
        .arg("demo")
        .args(args)
        .output()
        .expect("the lmstack binary runs");
    let elapsed = start.elapsed();
    assert!(
        output.status.success(),
        "demo failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    (String::from_utf8(output.stdout).unwrap(), elapsed)
}

#[test]
fn json_output_is_tool_calls_their_results_then_the_final_text() {
    let (stdout, elapsed) = demo(&["--json"]);
    assert!(
        elapsed < Duration::from_secs(20),
        "the demo took {elapsed:?}"
    );
    let messages: Vec<Message> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();

    let results: Vec<_> = messages
        .iter()
        .flat_map(|m| m.calls().iter().zip(m.results()))
        .map(|(call, result)| {
            assert_eq!(call.id, result.call_id);
            assert!(!result.is_error, "{result:?}");
            (call.name.as_str(), result)
        })
        .collect();
    let names: Vec<&str> = results.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        names,
        ["calculator", "current_time", "detect_boxes", "draw_boxes"]
    );

    assert_eq!(results[0].1.text_content(), "1234 * 5678 = 7006652");

    let now: serde_json::Value = serde_json::from_str(&results[1].1.text_content()).unwrap();
    let unix = now["unix_seconds"].as_u64().unwrap();
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(unix <= wall && wall - unix < 60, "{now}");
    assert!(now["utc"].as_str().unwrap().ends_with('Z'));

    // detect_boxes read the boxes from the vision model's fenced JSON ...
    let detected: serde_json::Value = serde_json::from_str(&results[2].1.text_content()).unwrap();
    assert_eq!(
        detected,
        serde_json::json!({"image": "scene.png", "width": 320, "height": 200, "boxes": [
            {"label": "house", "confidence": 0.94, "x1": 0.19, "y1": 0.46, "x2": 0.48, "y2": 0.8},
            {"label": "sun", "confidence": 0.9, "x1": 0.75, "y1": 0.13, "x2": 0.89, "y2": 0.35}
        ]})
    );
    // ... and draw_boxes drew them (no --out: nothing saved).
    let drawn = &results[3].1;
    assert_eq!(
        drawn.text_content(),
        "Drew 2 boxes on scene.png (320×200 px): house 0.94, sun 0.90."
    );
    let Some(ContentBlock::Image(png)) = drawn.content.get(1) else {
        panic!("draw_boxes returns an image: {drawn:?}");
    };
    assert_eq!(png.media_type(), Some("image/png"));
    let image = image::load_from_memory(&png.decode().unwrap().unwrap()).unwrap();
    assert_eq!((image.width(), image.height()), (320, 200));

    // The answer comes last, after every result.
    let last_aggregate = messages
        .iter()
        .rposition(|m| matches!(m, Message::ToolAggregate(_)))
        .unwrap();
    let final_text = messages.last().unwrap();
    assert!(last_aggregate < messages.len() - 1);
    assert_eq!(final_text.role(), Role::Assistant);
    assert!(
        final_text
            .as_text()
            .unwrap()
            .starts_with("1234 × 5678 = 7,006,652"),
        "{final_text:?}"
    );
}

#[test]
fn text_output_shows_the_conversation_and_each_tool_call() {
    let (stdout, _) = demo(&[]);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("user: What is 1234 × 5678"),
        "{stdout}"
    );
    let position = |needle: &str| {
        lines
            .iter()
            .position(|line| line.contains(needle))
            .unwrap_or_else(|| panic!("{needle:?} missing from:\n{stdout}"))
    };
    let calculator = position("⚙ calculator {\"expression\":\"1234 * 5678\"}");
    assert_eq!(lines[calculator + 1].trim(), "→ 1234 * 5678 = 7006652");
    assert!(position("⚙ current_time {}") > calculator);
    assert!(
        position("⚙ detect_boxes {\"image\":\"scene.png\",\"labels\":[\"house\",\"sun\"]}")
            > calculator
    );
    let image = position("→ [image/png inline,");
    assert!(image > position("⚙ draw_boxes"));
    assert!(position("assistant: 1234 × 5678 = 7,006,652") > image);
}

#[test]
fn the_model_view_shows_the_tools_and_the_calls_and_results_as_text() {
    let (stdout, _) = demo(&["--model-view"]);
    let view = &stdout[stdout
        .find("what the text-only model read")
        .expect("the view is printed")..];
    let system = view
        .find("── system ──\n# Tools\n")
        .expect("the tools section");
    let call = view
        .find("── assistant ──\nI'll compute, read the clock, and ask the vision model where the house and the sun are.\n<tool_call name=\"calculator\" id=\"call_1\">")
        .expect("the calls as assistant text");
    let result = view
        .find("── user ──\n<tool_response name=\"calculator\" id=\"call_1\">\n1234 * 5678 = 7006652\n</tool_response>\n---\n")
        .expect("the results as user text");
    let image = view
        .find("[image 1: image/png]\n[image/png inline")
        .expect("the picture beside its placeholder");
    assert!(system < call && call < result && result < image, "{view}");
    assert_eq!(view.matches("# Tools").count(), 1);
}

#[test]
fn out_keeps_the_annotated_picture_where_the_boxes_say_and_the_conversation_log() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let (stdout, _) = demo(&["--out", dir.to_str().unwrap()]);
    let picture = dir.join("scene-boxes.png");
    assert!(
        stdout.contains(&format!("Saved as {}.", picture.display())),
        "the picture's name is printed: {stdout}"
    );
    let log = dir.join("conversation.jsonl");
    assert!(stdout.contains(&format!("the conversation log: {}", log.display())));

    // The boxes sit where the normalized corners say on the 320×200 picture:
    // the house from (0.19, 0.46) to (0.48, 0.8), the sun from (0.75, 0.13) to
    // (0.89, 0.35); red and orange outlines.
    let image = image::open(&picture).unwrap().to_rgba8();
    assert_eq!(image.dimensions(), (320, 200));
    let red = image::Rgba([220, 30, 40, 255]);
    let orange = image::Rgba([245, 140, 20, 255]);
    let house = [(61, 130), (153, 130), (100, 159), (100, 93)];
    let sun = [(240, 50), (284, 50), (262, 69), (262, 27)];
    for (x, y) in house {
        assert_eq!(*image.get_pixel(x, y), red, "house outline at ({x}, {y})");
    }
    for (x, y) in sun {
        assert_eq!(*image.get_pixel(x, y), orange, "sun outline at ({x}, {y})");
    }
    // Inside the boxes the scene is untouched: the door, the sun's middle.
    assert_eq!(*image.get_pixel(108, 150), image::Rgba([110, 70, 40, 255]));
    assert_eq!(*image.get_pixel(262, 48), image::Rgba([255, 205, 40, 255]));

    // The log is a transcript: the request with the picture, the reply's events,
    // the end; its pictures by reference, each stored once in media/.
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !text.contains("\"data\":\"iVBOR"),
        "no inline PNG in the log"
    );
    let references = text.matches("\"ref\":\"sha256:").count();
    assert!(
        references >= 2,
        "the scene and the annotated picture: {references}"
    );
    let store = lmstack::store::FileStore::new(dir.join("media"));
    let exchanges = lmstack::transcript::read_with_store(text.as_bytes(), &store).unwrap();
    assert_eq!(exchanges.len(), 1);
    let exchange = &exchanges[0];
    assert!(
        exchange.complete && exchange.error.is_none(),
        "{exchange:?}"
    );
    let asked = &exchange.request.messages[0];
    let Message::Multimodal(asked) = asked else {
        panic!("{asked:?}");
    };
    let ContentBlock::Image(scene) = &asked.content[1] else {
        panic!("{asked:?}");
    };
    let scene = image::load_from_memory(&scene.decode().unwrap().unwrap()).unwrap();
    assert_eq!((scene.width(), scene.height()), (320, 200));
    let told = lmstack::Joiner::join(exchange.events.clone());
    let called: Vec<&str> = told
        .iter()
        .flat_map(|m| m.calls())
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        called,
        ["calculator", "current_time", "detect_boxes", "draw_boxes"]
    );
}

//! `lmstack demo`: the offline pipeline runs real tools from a scripted text-only
//! model's `<tool_call>` text, over two rounds.

#![cfg(all(feature = "cli", feature = "demo"))]

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
    assert_eq!(names, ["calculator", "current_time", "draw_boxes"]);

    assert_eq!(results[0].1.text_content(), "1234 * 5678 = 7006652");

    let now: serde_json::Value = serde_json::from_str(&results[1].1.text_content()).unwrap();
    let unix = now["unix_seconds"].as_u64().unwrap();
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(unix <= wall && wall - unix < 60, "{now}");
    assert!(now["utc"].as_str().unwrap().ends_with('Z'));

    let drawn = &results[2].1;
    assert_eq!(
        drawn.text_content(),
        "Drew 2 boxes on scene.png (320×200 px): house, sun."
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
        .find("── assistant ──\nI'll use the tools for all three.\n<tool_call name=\"calculator\" id=\"call_1\">")
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

//! Multimodal tool results: the media policy's checks on bytes and files, and media
//! results through the function layer.

#![cfg(feature = "function")]

use std::convert::Infallible;
use std::path::Path;

use lmstack::function::{
    FunctionCallLayer, MediaError, MediaPolicy, Tool, ToolOutput, ToolRegistry, sniff,
};
use lmstack::testing::ScriptedModel;
use lmstack::{ChatRequest, ContentBlock, Media, Message, ToolCall};
use serde_json::json;
use tower::{Layer, ServiceExt};

const PNG: &[u8] =
    b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";
const JPEG: &[u8] = b"\xff\xd8\xff\xe0\0\x10JFIF\0";
const PDF: &[u8] = b"%PDF-1.7\n1 0 obj\n";

#[test]
fn bytes_must_be_what_they_claim_to_be() {
    let policy = MediaPolicy::new();
    assert_eq!(
        policy.block(PNG, Some("image/png")).unwrap(),
        ContentBlock::image_bytes("image/png", PNG)
    );
    // Parameters and case do not matter; `image/jpg` is read as `image/jpeg`.
    assert_eq!(
        policy.check(JPEG, Some("Image/JPG; q=1")).unwrap(),
        "image/jpeg"
    );
    let error = policy.block(PNG, Some("image/jpeg")).unwrap_err();
    assert!(
        matches!(&error, MediaError::Mismatch { claimed, actual: "image/png" } if claimed == "image/jpeg"),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "the content was declared as image/jpeg but its bytes are image/png"
    );
    let error = policy
        .block(b"MZ\x90\0\x03", Some("image/png"))
        .unwrap_err();
    assert!(
        matches!(error, MediaError::Unrecognised { .. }),
        "{error:?}"
    );
}

#[test]
fn inline_blocks_a_tool_builds_pass_the_same_checks_as_bytes() {
    let policy = MediaPolicy::new();
    let refused = |block: ContentBlock, policy: &MediaPolicy| {
        let error = policy.check_block(block.clone()).unwrap_err();
        let result = ToolOutput::block(block).into_result("c1", "t", policy);
        assert!(result.is_error, "{result:?}");
        assert_eq!(
            result.text_content(),
            format!("The tool `t` returned content that was refused: {error}.")
        );
        error
    };
    let png = ContentBlock::image_bytes("image/png", PNG);
    assert_eq!(policy.check_block(png.clone()).unwrap(), png);
    assert_eq!(
        ToolOutput::from(vec![ContentBlock::text("see"), png.clone()])
            .into_result("c1", "t", &policy)
            .content,
        vec![ContentBlock::text("see"), png.clone()]
    );

    let error = refused(ContentBlock::image_bytes("image/jpeg", PNG), &policy);
    assert!(matches!(error, MediaError::Mismatch { .. }), "{error:?}");
    let error = refused(
        ContentBlock::image_bytes("image/png", b"MZ\x90\0\x03"),
        &policy,
    );
    assert!(
        matches!(error, MediaError::Unrecognised { .. }),
        "{error:?}"
    );
    let only_png = MediaPolicy::new().allow_only(["image/png"]);
    let error = refused(
        ContentBlock::document_bytes("application/pdf", PDF),
        &only_png,
    );
    assert!(
        matches!(
            error,
            MediaError::NotAllowed {
                media_type: "application/pdf",
                ..
            }
        ),
        "{error:?}"
    );
    let small = MediaPolicy::new().max_bytes(PNG.len() - 1);
    let error = refused(png.clone(), &small);
    assert!(
        matches!(error, MediaError::TooLarge { size, .. } if size == PNG.len() as u64),
        "{error:?}"
    );
    assert!(
        MediaPolicy::new()
            .max_bytes(PNG.len())
            .check_block(png)
            .is_ok()
    );
    let error = refused(
        ContentBlock::Image(Media::base64("image/png", "not base64!")),
        &policy,
    );
    assert!(matches!(error, MediaError::InvalidBase64(_)), "{error:?}");

    // The block comes back with the sniffed type, its kind by that type, its name kept.
    assert_eq!(
        policy
            .check_block(ContentBlock::Image(
                Media::from_bytes("image/jpg", JPEG).with_name("a.jpg")
            ))
            .unwrap(),
        ContentBlock::Image(Media::from_bytes("image/jpeg", JPEG).with_name("a.jpg"))
    );
    assert_eq!(
        policy
            .check_block(ContentBlock::Image(Media::from_bytes(
                "application/pdf",
                PDF
            )))
            .unwrap(),
        ContentBlock::document_bytes("application/pdf", PDF)
    );
    // Text, and media by URL (no bytes to inspect), pass as they are.
    for block in [
        ContentBlock::text("hi"),
        ContentBlock::image_url("https://example.com/a.png"),
    ] {
        assert_eq!(policy.check_block(block.clone()).unwrap(), block);
    }
}

/// The first bytes of a WAV file: a RIFF header and the `fmt ` chunk.
const WAV: &[u8] = b"RIFF\x24\0\0\0WAVEfmt \x10\0\0\0\x01\0\x01\0";
/// An MP3 file opening with an ID3v2.4 tag.
const MP3_ID3: &[u8] = b"ID3\x04\0\0\0\0\x01\x00TIT2";
/// An MP3 file opening with a frame: MPEG-1 layer III, 128 kbit/s, 44.1 kHz.
const MP3_FRAME: &[u8] = b"\xff\xfb\x90\x64\0\0\0\0";
const OGG: &[u8] = b"OggS\0\x02\0\0\0\0\0\0\0\0";
const FLAC: &[u8] = b"fLaC\x80\0\0\x22\x10\0";

#[test]
fn audio_is_sniffed_by_its_magic_bytes() {
    for (bytes, media_type) in [
        (WAV, "audio/wav"),
        (MP3_ID3, "audio/mpeg"),
        (MP3_FRAME, "audio/mpeg"),
        // MPEG-2 layer III, 64 kbit/s, 22.05 kHz.
        (b"\xff\xf3\x80\xc4".as_slice(), "audio/mpeg"),
        (OGG, "audio/ogg"),
        (FLAC, "audio/flac"),
    ] {
        assert_eq!(sniff(bytes), Some(media_type), "{bytes:?}");
    }
    // A WebP is a RIFF file too.
    assert_eq!(sniff(b"RIFF\x24\0\0\0WEBPVP8 "), Some("image/webp"));
    assert_eq!(sniff(b"RIFF\x24\0\0\0AVI LIST"), None);
    // Frame sync with layer II, a free or bad bitrate, or a reserved rate: not MP3.
    for not_mp3 in [
        b"\xff\xfd\x90\x64",
        b"\xff\xfb\x00\x64",
        b"\xff\xfb\xf0\x64",
        b"\xff\xfb\x9c\x64",
    ] {
        assert_eq!(sniff(not_mp3), None, "{not_mp3:?}");
    }
    // AAC (ADTS) shares the sync but has layer 0; JPEG starts 0xFF 0xD8.
    assert_eq!(sniff(b"\xff\xf1\x50\x80"), None);
    assert_eq!(sniff(JPEG), Some("image/jpeg"));
    // Text that merely starts like a signature stays text.
    for text in ["ID3 tags are metadata", "OggS is a page", "fLaC!"] {
        assert_eq!(sniff(text.as_bytes()), Some("text/plain"), "{text}");
    }
}

#[test]
fn audio_bytes_must_be_what_they_claim_to_be() {
    let policy = MediaPolicy::new();
    assert_eq!(
        policy.block(WAV, Some("audio/wav")).unwrap(),
        ContentBlock::audio_bytes("audio/wav", WAV)
    );
    assert_eq!(
        policy.block(MP3_FRAME, None).unwrap(),
        ContentBlock::audio_bytes("audio/mpeg", MP3_FRAME)
    );
    // The common aliases are read as the canonical types.
    for (bytes, claimed, actual) in [
        (WAV, "audio/x-wav", "audio/wav"),
        (WAV, "Audio/Wave", "audio/wav"),
        (MP3_ID3, "audio/mp3", "audio/mpeg"),
    ] {
        assert_eq!(
            policy.check(bytes, Some(claimed)).unwrap(),
            actual,
            "{claimed}"
        );
    }
    let error = policy.block(PNG, Some("audio/wav")).unwrap_err();
    assert!(
        matches!(&error, MediaError::Mismatch { claimed, actual: "image/png" } if claimed == "audio/wav"),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "the content was declared as audio/wav but its bytes are image/png"
    );
    let error = policy.block(MP3_FRAME, Some("audio/wav")).unwrap_err();
    assert!(
        matches!(
            error,
            MediaError::Mismatch {
                actual: "audio/mpeg",
                ..
            }
        ),
        "{error:?}"
    );
}

#[test]
fn wav_and_mp3_are_allowed_by_default_and_other_audio_on_request() {
    let policy = MediaPolicy::new();
    for bytes in [OGG, FLAC] {
        let error = policy.block(bytes, None).unwrap_err();
        assert!(matches!(error, MediaError::NotAllowed { .. }), "{error:?}");
    }
    let policy = policy.allow("audio/ogg").allow("audio/x-flac");
    assert_eq!(
        policy.block(OGG, Some("audio/ogg")).unwrap(),
        ContentBlock::audio_bytes("audio/ogg", OGG)
    );
    assert_eq!(policy.check(FLAC, None).unwrap(), "audio/flac");
    let error = MediaPolicy::new()
        .max_bytes(WAV.len() - 1)
        .block(WAV, None)
        .unwrap_err();
    assert!(matches!(error, MediaError::TooLarge { .. }), "{error:?}");
    let images_only = MediaPolicy::new().allow_only(["image/png"]);
    let error = images_only.check(WAV, None).unwrap_err();
    assert_eq!(
        error.to_string(),
        "audio/wav is not allowed (allowed: image/png)"
    );
}

#[test]
fn inline_audio_blocks_are_checked_and_retyped_by_their_bytes() {
    let policy = MediaPolicy::new();
    // An MP3 a tool filed as a document, under an alias, comes back as audio.
    let block = ContentBlock::Document(Media::from_bytes("audio/mp3", MP3_ID3).with_name("a.mp3"));
    assert_eq!(
        policy.check_block(block).unwrap(),
        ContentBlock::Audio(Media::from_bytes("audio/mpeg", MP3_ID3).with_name("a.mp3"))
    );
    let lying = ContentBlock::audio_bytes("audio/wav", PNG);
    let result = ToolOutput::block(lying).into_result("c1", "speak", &policy);
    assert!(result.is_error, "{result:?}");
    assert!(
        result
            .text_content()
            .contains("declared as audio/wav but its bytes are image/png"),
        "{}",
        result.text_content()
    );
    let result = ToolOutput::text("Said:")
        .with(ToolOutput::media(WAV, "audio/wav"))
        .into_result("c2", "speak", &policy);
    assert_eq!(
        result.content,
        [
            ContentBlock::text("Said:"),
            ContentBlock::audio_bytes("audio/wav", WAV)
        ]
    );
}

#[test]
fn a_pdf_becomes_a_document_block() {
    let block = MediaPolicy::new().block(PDF, None).unwrap();
    assert_eq!(block, ContentBlock::document_bytes("application/pdf", PDF));
}

#[test]
fn only_allowed_types_pass() {
    let text = "plain notes\n".as_bytes();
    let error = MediaPolicy::new()
        .block(text, Some("text/plain"))
        .unwrap_err();
    assert!(
        matches!(
            error,
            MediaError::NotAllowed {
                media_type: "text/plain",
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        MediaPolicy::new()
            .allow("text/plain")
            .block(text, None)
            .is_ok()
    );
    let only_png = MediaPolicy::new().allow_only(["image/png"]);
    assert!(only_png.check(PNG, None).is_ok());
    let error = only_png.check(JPEG, None).unwrap_err();
    assert_eq!(
        error.to_string(),
        "image/jpeg is not allowed (allowed: image/png)"
    );
}

#[test]
fn content_over_the_size_limit_is_refused() {
    assert_eq!(MediaPolicy::new().limit(), 20 * 1024 * 1024);
    let policy = MediaPolicy::new().max_bytes(PNG.len() - 1);
    let error = policy.block(PNG, Some("image/png")).unwrap_err();
    assert!(
        matches!(error, MediaError::TooLarge { size, limit } if size == PNG.len() as u64 && limit == PNG.len() - 1),
        "{error:?}"
    );
    assert!(
        MediaPolicy::new()
            .max_bytes(PNG.len())
            .check(PNG, None)
            .is_ok()
    );
}

fn workspace() -> (tempfile::TempDir, MediaPolicy) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("charts")).unwrap();
    std::fs::write(dir.path().join("charts/sales.png"), PNG).unwrap();
    std::fs::write(dir.path().join("report.pdf"), PDF).unwrap();
    let policy = MediaPolicy::new().root(dir.path());
    (dir, policy)
}

#[test]
fn files_inside_the_root_are_read_and_named() {
    let (dir, policy) = workspace();
    let block = policy
        .read_block(Path::new("charts/sales.png"), Some("image/png"))
        .unwrap();
    assert_eq!(
        block,
        ContentBlock::Image(Media::from_bytes("image/png", PNG).with_name("sales.png"))
    );
    // An absolute path inside the root is fine too.
    let absolute = dir.path().join("report.pdf");
    assert!(matches!(
        policy.read_block(&absolute, None).unwrap(),
        ContentBlock::Document(_)
    ));
    let error = policy
        .read_block(Path::new("report.pdf"), Some("image/png"))
        .unwrap_err();
    assert!(matches!(error, MediaError::Mismatch { .. }), "{error:?}");
    std::fs::write(dir.path().join("voice.wav"), WAV).unwrap();
    assert_eq!(
        policy.read_block(Path::new("voice.wav"), None).unwrap(),
        ContentBlock::Audio(Media::from_bytes("audio/wav", WAV).with_name("voice.wav"))
    );
}

#[test]
fn paths_cannot_leave_the_root() {
    let (dir, policy) = workspace();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.png"), PNG).unwrap();

    for path in [
        Path::new("../secret.png").to_owned(),
        Path::new("charts/../../secret.png").to_owned(),
        outside.path().join("secret.png"),
    ] {
        let error = policy.read(&path).unwrap_err();
        assert!(
            matches!(error, MediaError::OutsideRoot { .. }),
            "{path:?}: {error:?}"
        );
    }
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(
            outside.path().join("secret.png"),
            dir.path().join("link.png"),
        )
        .unwrap();
        let error = policy.read(Path::new("link.png")).unwrap_err();
        assert!(matches!(error, MediaError::OutsideRoot { .. }), "{error:?}");
        assert_eq!(
            error.to_string(),
            "link.png is outside the directory tools may read"
        );
    }
}

#[test]
fn without_a_root_no_file_is_read() {
    let (dir, _) = workspace();
    let error = MediaPolicy::new()
        .read(&dir.path().join("report.pdf"))
        .unwrap_err();
    assert!(matches!(error, MediaError::NoRoot), "{error:?}");
}

#[test]
fn files_over_the_limit_missing_files_and_directories_are_refused() {
    let (_dir, policy) = workspace();
    let small = policy.clone().max_bytes(8);
    let error = small.read(Path::new("charts/sales.png")).unwrap_err();
    assert!(
        matches!(error, MediaError::TooLarge { size, limit: 8 } if size == PNG.len() as u64),
        "{error:?}"
    );
    let error = policy.read(Path::new("charts")).unwrap_err();
    assert!(matches!(error, MediaError::NotAFile { .. }), "{error:?}");
    let error = policy.read(Path::new("missing.png")).unwrap_err();
    assert!(matches!(error, MediaError::Io { .. }), "{error:?}");
    assert!(
        error.to_string().starts_with("cannot read missing.png: "),
        "{error}"
    );
}

#[tokio::test]
async fn tools_return_images_and_files_through_the_layer() {
    let (dir, policy) = workspace();
    let chart = Tool::dynamic("chart", "", json!({"type": "object"}), |_| async {
        Ok::<_, Infallible>(
            ToolOutput::text("Sales by month:")
                .with(ToolOutput::media(PNG, "image/png"))
                .with(ToolOutput::file("report.pdf")),
        )
    });
    let liar = Tool::dynamic("liar", "", json!({"type": "object"}), |_| async {
        Ok::<_, Infallible>(ToolOutput::media(PNG, "image/jpeg"))
    });
    let escape = Tool::dynamic("escape", "", json!({"type": "object"}), |_| async {
        Ok::<_, Infallible>(ToolOutput::file("../../etc/passwd"))
    });
    let inline_liar = Tool::dynamic("inline_liar", "", json!({"type": "object"}), |_| async {
        Ok::<_, Infallible>(ContentBlock::image_bytes("image/gif", PNG))
    });
    let layer =
        FunctionCallLayer::new(ToolRegistry::new([chart, liar, escape, inline_liar]).unwrap())
            .media(policy);
    let model = ScriptedModel::new().reply_messages(vec![Message::tool_calls(vec![
        ToolCall::new("c1", "chart", json!({})),
        ToolCall::new("c2", "liar", json!({})),
        ToolCall::new("c3", "escape", json!({})),
        ToolCall::new("c4", "inline_liar", json!({})),
    ])]);
    let request = ChatRequest::new(vec![Message::user("chart it")]).streaming(true);
    let messages = layer
        .layer(model)
        .oneshot(request)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let results = messages[0].results();
    assert_eq!(
        results[0].content,
        vec![
            ContentBlock::text("Sales by month:"),
            ContentBlock::image_bytes("image/png", PNG),
            ContentBlock::Document(
                Media::from_bytes("application/pdf", PDF).with_name("report.pdf")
            ),
        ]
    );
    assert!(!results[0].is_error);
    assert!(results[1].is_error);
    assert_eq!(
        results[1].text_content(),
        "The tool `liar` returned content that was refused: the content was declared as image/jpeg but its bytes are image/png."
    );
    assert!(results[2].is_error);
    assert!(
        results[2]
            .text_content()
            .contains("is outside the directory tools may read"),
        "{:?}",
        results[2]
    );
    assert!(results[3].is_error);
    assert_eq!(
        results[3].text_content(),
        "The tool `inline_liar` returned content that was refused: the content was declared as image/gif but its bytes are image/png."
    );
    drop(dir);
}

//! Media stores: bytes kept once by content address, verified when read, and
//! stored conversations (transcripts, JSON lines of messages) that keep their
//! media by reference and get it back whole.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::executor::block_on;
use lmstack::store::{self, FileStore, MediaRef, MediaStore, MemoryStore, StoreError};
use lmstack::testing::ScriptedModel;
use lmstack::transcript::{self, SharedBuffer, TranscriptLayer};
use lmstack::{ChatRequest, ContentBlock, Event, Media, MediaSource, Message, Role, ToolResult};
use proptest::prelude::*;
use tower::{Layer, ServiceExt};

const PNG: &[u8] =
    b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found
}

fn base64(bytes: &[u8]) -> String {
    match ContentBlock::image_bytes("image/png", bytes) {
        ContentBlock::Image(Media {
            source: MediaSource::Base64 { data, .. },
            ..
        }) => data.to_string(),
        other => panic!("not inline: {other:?}"),
    }
}

#[test]
fn the_same_bytes_put_twice_are_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    let first = store.put(PNG, "image/png").unwrap();
    let second = store.put(PNG, "image/png").unwrap();
    assert_eq!(first, second);
    assert_eq!(first, MediaRef::of(PNG));
    let other = store.put(b"%PDF-1.7", "application/pdf").unwrap();
    assert_ne!(other, first);
    let mut names: Vec<String> = files(dir.path())
        .iter()
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut expected = vec![first.hex(), other.hex()];
    expected.sort();
    assert_eq!(names, expected);
    assert_eq!(store.get(&first).unwrap(), PNG);
}

#[test]
fn a_corrupted_blob_is_an_error_naming_its_reference() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    let reference = store.put(PNG, "image/png").unwrap();
    let path = store.path(&reference);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[3] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();

    let error = store.get(&reference).unwrap_err();
    assert!(matches!(error, StoreError::Corrupt { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains(&reference.to_string()), "{message}");
    assert!(message.contains("corrupt"), "{message}");

    // A truncated blob, of another size, is put again whole.
    std::fs::write(&path, &PNG[..4]).unwrap();
    assert!(matches!(
        store.get(&reference),
        Err(StoreError::Corrupt { .. })
    ));
    assert_eq!(store.put(PNG, "image/png").unwrap(), reference);
    assert_eq!(store.get(&reference).unwrap(), PNG);
}

#[test]
fn a_missing_blob_is_an_error_naming_its_reference() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("not yet made"));
    let reference = MediaRef::of(b"never put");
    let error = store.get(&reference).unwrap_err();
    assert!(matches!(error, StoreError::Missing { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        format!("media store: {reference} is not in the store")
    );
    let memory = MemoryStore::new().get(&reference).unwrap_err();
    assert_eq!(memory.to_string(), error.to_string());
}

#[test]
fn references_that_are_not_a_sha256_digest_are_refused() {
    let hex = MediaRef::of(PNG).hex();
    for bad in [
        "sha256:../../etc/passwd".to_owned(),
        format!("sha256:../{}", &hex[3..]),
        format!("sha256:{}/..", &hex[3..]),
        format!("sha256:{}", hex.to_uppercase()),
        format!("md5:{hex}"),
        hex.clone(),
        format!("sha256:{hex}\0"),
        "sha256:".to_owned(),
    ] {
        let error = bad.parse::<MediaRef>().unwrap_err();
        assert!(
            error.to_string().contains("is not a media reference"),
            "{error}"
        );
        // Nor does the JSON form accept it.
        let block = serde_json::json!({"type": "image", "media_type": "image/png", "ref": bad});
        let error = serde_json::from_value::<ContentBlock>(block).unwrap_err();
        assert!(
            error.to_string().contains("is not a media reference"),
            "{error}"
        );
    }
    // The file of a valid reference is inside the root, named by its digest.
    let root = Path::new("store-root");
    let path = FileStore::new(root).path(&MediaRef::of(PNG));
    assert_eq!(path, root.join("sha256").join(&hex[..2]).join(&hex));
}

#[test]
fn writes_leave_no_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileStore::new(dir.path()));
    let blobs: Vec<Vec<u8>> = (0..8u8).map(|i| vec![i; 1000 + usize::from(i)]).collect();
    // Threads putting the same bytes at the same time.
    std::thread::scope(|scope| {
        for _ in 0..4 {
            let store = store.clone();
            let blobs = &blobs;
            scope.spawn(move || {
                for blob in blobs {
                    store.put(blob, "application/octet-stream").unwrap();
                }
            });
        }
    });
    // A put over the limit writes nothing.
    let small = FileStore::new(dir.path()).max_bytes(10);
    let error = small.put(&[7; 11], "image/png").unwrap_err();
    assert!(matches!(error, StoreError::TooLarge { .. }), "{error:?}");

    let names: BTreeSet<String> = files(dir.path())
        .iter()
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let expected: BTreeSet<String> = blobs.iter().map(|b| MediaRef::of(b).hex()).collect();
    assert_eq!(names, expected, "only the blobs, no temporary files");
    for blob in &blobs {
        assert_eq!(&store.get(&MediaRef::of(blob)).unwrap(), blob);
    }
}

#[test]
fn a_blob_over_the_limit_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let reference = FileStore::new(dir.path())
        .put(&[1; 100], "image/png")
        .unwrap();
    let error = FileStore::new(dir.path())
        .max_bytes(99)
        .get(&reference)
        .unwrap_err();
    assert!(matches!(error, StoreError::TooLarge { .. }), "{error:?}");
    assert!(
        error.to_string().contains(&reference.to_string()),
        "{error}"
    );
}

/// A conversation that repeats one image in two turns, as every request of a
/// chat does: the history grows, the image stays.
fn turns() -> Vec<ChatRequest> {
    let image = ContentBlock::image_bytes("image/png", PNG);
    let first = vec![Message::multimodal(
        Role::User,
        vec![ContentBlock::text("What is this?"), image.clone()],
    )];
    let mut second = first.clone();
    second.push(Message::assistant("A pixel."));
    second.push(Message::tool_results(vec![ToolResult::new(
        "call_1",
        "zoom",
        vec![
            image,
            ContentBlock::audio_bytes("audio/wav", b"RIFF\0\0\0\0WAVE"),
        ],
    )]));
    vec![ChatRequest::new(first), ChatRequest::new(second)]
}

/// Records `requests` through a transcript layer with `store` (if any).
fn record(requests: &[ChatRequest], store: Option<Arc<dyn MediaStore>>) -> (String, u64) {
    let buffer = SharedBuffer::default();
    let mut recorder = TranscriptLayer::new(buffer.clone());
    if let Some(store) = store {
        recorder = recorder.media_store(store);
    }
    let mut script = ScriptedModel::new();
    for _ in requests {
        script = script.reply("A pixel.");
    }
    let model = recorder.layer(script);
    block_on(async {
        for request in requests {
            let reply = model.clone().oneshot(request.clone()).await.unwrap();
            reply.collect().await.unwrap();
        }
        recorder.flush().await;
    });
    let text = String::from_utf8(buffer.contents()).unwrap();
    (text, recorder.write_errors())
}

#[test]
fn a_transcript_with_a_store_keeps_media_by_reference_and_reads_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileStore::new(dir.path()));
    let requests = turns();
    let (text, errors) = record(&requests, Some(store.clone()));
    assert_eq!(errors, 0);
    assert!(text.contains(r#""ref":"sha256:"#), "{text}");
    assert!(!text.contains(&base64(PNG)), "{text}");
    assert!(!text.contains(r#""data""#), "{text}");
    assert_eq!(
        text.matches(&MediaRef::of(PNG).to_string()).count(),
        3,
        "{text}"
    );
    // The image of three blocks, and the audio clip: two files.
    assert_eq!(files(dir.path()).len(), 2);

    let exchanges = transcript::read_with_store(text.as_bytes(), &*store).unwrap();
    let recorded: Vec<ChatRequest> = exchanges.into_iter().map(|e| e.request).collect();
    assert_eq!(recorded, requests);

    // Read without the store, the references stay.
    let plain = transcript::read(text.as_bytes()).unwrap();
    let media = &plain[0].request.messages;
    let text_form = serde_json::to_string(media).unwrap();
    assert!(text_form.contains(r#""ref":"sha256:"#), "{text_form}");

    // A blob gone from the store: reading back names it.
    std::fs::remove_file(store.path(&MediaRef::of(PNG))).unwrap();
    let error = transcript::read_with_store(text.as_bytes(), &*store).unwrap_err();
    assert!(
        error.to_string().contains(&MediaRef::of(PNG).to_string()),
        "{error}"
    );
}

#[test]
fn a_transcript_without_a_store_keeps_media_inline() {
    let requests = turns();
    let (text, errors) = record(&requests, None);
    assert_eq!(errors, 0);
    assert!(!text.contains(r#""ref""#), "{text}");
    assert_eq!(text.matches(&base64(PNG)).count(), 3, "{text}");
    let exchanges = transcript::read(text.as_bytes()).unwrap();
    assert_eq!(exchanges[1].request, requests[1]);
}

/// A store that refuses everything.
struct Broken;

impl MediaStore for Broken {
    fn put(&self, _: &[u8], _: &str) -> Result<MediaRef, StoreError> {
        Err(StoreError::Other("the disk is full".into()))
    }

    fn get(&self, reference: &MediaRef) -> Result<Vec<u8>, StoreError> {
        Err(StoreError::Missing {
            reference: *reference,
        })
    }
}

#[test]
fn media_a_store_refuses_stays_inline_in_the_transcript_and_is_counted() {
    let requests = turns();
    let (text, errors) = record(&requests, Some(Arc::new(Broken)));
    // Three images and an audio clip, none stored.
    assert_eq!(errors, 4);
    assert_eq!(text.matches(&base64(PNG)).count(), 3, "{text}");
    let exchanges = transcript::read_with_store(text.as_bytes(), &Broken).unwrap();
    assert_eq!(exchanges[1].request, requests[1]);
}

#[test]
fn message_events_are_recorded_by_reference_too() {
    let store = Arc::new(MemoryStore::new());
    let buffer = SharedBuffer::default();
    let recorder = TranscriptLayer::new(buffer.clone()).media_store(store.clone());
    let image = Message::multimodal(
        Role::Assistant,
        vec![ContentBlock::image_bytes("image/png", PNG)],
    );
    let model = recorder.layer(ScriptedModel::new().reply_events(vec![Event::Message {
        message: image.clone(),
    }]));
    let reply = block_on(async {
        let reply = model
            .oneshot(ChatRequest::new(vec![Message::user("Draw")]))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        recorder.flush().await;
        reply
    });
    assert_eq!(reply, vec![image.clone()], "the reply itself stays inline");
    let text = String::from_utf8(buffer.contents()).unwrap();
    assert!(!text.contains(&base64(PNG)), "{text}");
    let exchanges = transcript::read_with_store(text.as_bytes(), &*store).unwrap();
    assert_eq!(exchanges[0].events, vec![Event::Message { message: image }]);
}

#[test]
fn a_conversation_saved_as_json_lines_by_reference_loads_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    let conversation = turns().pop().unwrap().messages;

    let mut stored = conversation.clone();
    store::dehydrate(&mut stored, &store).unwrap();
    let lines: String = stored
        .iter()
        .map(|message| serde_json::to_string(message).unwrap() + "\n")
        .collect();
    assert!(!lines.contains(&base64(PNG)), "{lines}");

    let mut loaded: Vec<Message> = lines
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(loaded, stored);
    store::rehydrate(&mut loaded, &store).unwrap();
    assert_eq!(loaded, conversation);
}

fn media_types() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("image/png"),
        Just("image/jpeg"),
        Just("application/pdf"),
        Just("audio/wav"),
        Just("application/octet-stream"),
    ]
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::default()))]

    #[test]
    fn dehydrating_then_rehydrating_gives_the_same_messages(
        blobs in proptest::collection::vec(
            (proptest::collection::vec(any::<u8>(), 0..600), media_types(), any::<bool>()),
            1..6,
        ),
    ) {
        let content: Vec<ContentBlock> = blobs
            .iter()
            .map(|(bytes, media_type, named)| {
                let media = Media::from_bytes(*media_type, bytes);
                let media = if *named { media.with_name("file") } else { media };
                if media_type.starts_with("image/") {
                    ContentBlock::Image(media)
                } else if media_type.starts_with("audio/") {
                    ContentBlock::Audio(media)
                } else {
                    ContentBlock::Document(media)
                }
            })
            .collect();
        let original = vec![
            Message::multimodal(Role::User, content.clone()),
            Message::tool_results(vec![ToolResult::new("c", "t", content)]),
        ];
        let store = MemoryStore::new();
        let mut stored = original.clone();
        store::dehydrate(&mut stored, &store).unwrap();
        let distinct: BTreeSet<&Vec<u8>> = blobs.iter().map(|(bytes, _, _)| bytes).collect();
        prop_assert_eq!(store.len(), distinct.len());
        // Through the JSON form, as a stored conversation goes.
        let json = serde_json::to_string(&stored).unwrap();
        prop_assert!(!json.contains("\"data\""));
        let mut loaded: Vec<Message> = serde_json::from_str(&json).unwrap();
        store::rehydrate(&mut loaded, &store).unwrap();
        prop_assert_eq!(loaded, original);
    }
}

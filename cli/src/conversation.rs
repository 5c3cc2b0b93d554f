//! A conversation in a file: JSON lines of lmstack's canonical messages, one
//! message a line (the JSON `--json` prints), with media by reference: images
//! and other media are kept once each, by SHA-256, in the [media store beside
//! the file](store_beside). `/save` writes one, `--resume` reads it back;
//! [`save`] and [`load`] are the only two places that do.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use lmstack::store::{self, FileStore};
use lmstack::transcript::TranscriptLayer;
use lmstack::{Error, Message};

use crate::input::Limit;

/// The media store of a conversation or log file: the directory `media` beside it.
pub fn store_beside(path: &Path) -> FileStore {
    FileStore::new(path.parent().unwrap_or(Path::new("")).join("media"))
}

/// A transcript layer writing to `file` (at `path`), its media by reference in
/// the store beside it.
pub fn log(path: &Path, file: File) -> TranscriptLayer {
    TranscriptLayer::new(file).media_store(Arc::new(store_beside(path)))
}

/// Writes `messages` to the file at `path`, replacing it; their media go to the
/// store beside it.
pub fn save(path: &Path, messages: &[Message]) -> Result<(), Error> {
    let failed = |error: &dyn std::fmt::Display| {
        Error::InvalidRequest(format!("writing {}: {error}", path.display()))
    };
    let mut messages = messages.to_vec();
    store::dehydrate(&mut messages, &store_beside(path))?;
    let mut file = BufWriter::new(File::create(path).map_err(|error| failed(&error))?);
    for message in &messages {
        serde_json::to_writer(&mut file, message).map_err(|error| failed(&error))?;
        file.write_all(b"\n").map_err(|error| failed(&error))?;
    }
    file.flush().map_err(|error| failed(&error))
}

/// Reads the messages of the file at `path` (within `limit`), their media back
/// from the store beside it; blank lines are skipped. A line that is not a
/// message is an error naming the file and the line; a missing or corrupted
/// blob, one naming its reference.
pub fn load(path: &Path, limit: Limit) -> Result<Vec<Message>, Error> {
    let mut input = limit.file(path, "the conversation to resume")?;
    let mut messages = Vec::new();
    let mut number = 0;
    while let Some(line) = input.line()? {
        number += 1;
        if line.trim_ascii().is_empty() {
            continue;
        }
        let message = serde_json::from_slice(&line).map_err(|error| {
            Error::InvalidRequest(format!(
                "{} line {number}: not a canonical message: {error}",
                path.display()
            ))
        })?;
        messages.push(message);
    }
    store::rehydrate(&mut messages, &store_beside(path))?;
    Ok(messages)
}

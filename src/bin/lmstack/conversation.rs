//! A conversation in a file: JSON lines of lmstack's canonical messages, one
//! message a line (the JSON `--json` prints). `/save` writes one, `--resume`
//! reads it back; [`save`] and [`load`] are the only two places that do.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use lmstack::{Error, Message};

use crate::input::Limit;

/// Writes `messages` to the file at `path`, replacing it.
pub fn save(path: &Path, messages: &[Message]) -> Result<(), Error> {
    let failed = |error: &dyn std::fmt::Display| {
        Error::InvalidRequest(format!("writing {}: {error}", path.display()))
    };
    let mut file = BufWriter::new(File::create(path).map_err(|error| failed(&error))?);
    for message in messages {
        serde_json::to_writer(&mut file, message).map_err(|error| failed(&error))?;
        file.write_all(b"\n").map_err(|error| failed(&error))?;
    }
    file.flush().map_err(|error| failed(&error))
}

/// Reads the messages of the file at `path` (within `limit`); blank lines are
/// skipped. A line that is not a message is an error naming the file and the
/// line.
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
    Ok(messages)
}

//! The commands' input — stdin, and the files they are given — read within a
//! limit (`--max-input`): past it a command fails with a clear error, so no
//! input, however large or endless, makes it hold more than that much.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Take};
use std::path::Path;

use lmstack::Error;
use serde::de::DeserializeOwned;

/// The default of `--max-input`: 64 MiB.
const DEFAULT_MAX_INPUT: usize = 64 << 20;

/// How much is read from the source at a time.
const CHUNK: usize = 64 << 10;

/// The `--max-input` option of the commands that read input.
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct Limit {
    /// The most bytes read from stdin, and from each file given: a command
    /// given more fails rather than read on.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_INPUT)]
    max_input: usize,
}

impl Limit {
    /// The limit, in bytes.
    pub fn bytes(self) -> usize {
        self.max_input
    }

    /// Stdin, read within the limit.
    pub fn stdin(self) -> Input<io::StdinLock<'static>> {
        Input::new(io::stdin().lock(), "stdin", self.max_input)
    }

    /// The file at `path`, read within the limit; `what` names it in errors.
    pub fn file(self, path: &Path, what: &'static str) -> Result<Input<File>, Error> {
        let file = File::open(path).map_err(|error| {
            Error::InvalidRequest(format!("reading {}: {error}", path.display()))
        })?;
        Ok(Input::new(file, what, self.max_input))
    }
}

/// An input read within a limit: every read fails with
/// [`Error::LimitExceeded`] once more than the limit has come from the source.
pub struct Input<R> {
    /// The source, from which at most one byte more than the limit is taken.
    reader: BufReader<Take<R>>,
    what: &'static str,
    limit: usize,
}

impl<R: Read> Input<R> {
    fn new(source: R, what: &'static str, limit: usize) -> Self {
        let taken = source.take((limit as u64).saturating_add(1));
        Input {
            reader: BufReader::with_capacity(CHUNK, taken),
            what,
            limit,
        }
    }

    /// The next piece of the input, as it arrives; `None` at its end.
    pub fn chunk(&mut self) -> Result<Option<Vec<u8>>, Error> {
        let piece = match self.reader.fill_buf() {
            Ok(piece) => piece.to_vec(),
            Err(error) => return Err(self.unreadable(error)),
        };
        self.reader.consume(piece.len());
        self.check()?;
        Ok((!piece.is_empty()).then_some(piece))
    }

    /// The next line, without its `\n`; `None` at the end of the input.
    pub fn line(&mut self) -> Result<Option<Vec<u8>>, Error> {
        let mut line = Vec::new();
        if let Err(error) = self.reader.read_until(b'\n', &mut line) {
            return Err(self.unreadable(error));
        }
        self.check()?;
        if line.is_empty() {
            return Ok(None);
        }
        if line.ends_with(b"\n") {
            line.pop();
        }
        Ok(Some(line))
    }

    /// The rest of the input as one JSON value, decoded as it is read: its
    /// bytes are never held beside the value. `invalid` words a JSON error.
    pub fn json<T: DeserializeOwned>(
        mut self,
        invalid: impl FnOnce(serde_json::Error) -> Error,
    ) -> Result<T, Error> {
        let value = serde_json::from_reader(&mut self.reader);
        self.check()?;
        value.map_err(|error| match error.is_io() {
            true => self.unreadable(error.into()),
            false => invalid(error),
        })
    }

    /// Fails once the source gave more than the limit: the one byte over it.
    fn check(&self) -> Result<(), Error> {
        if self.reader.get_ref().limit() == 0 {
            return Err(Error::LimitExceeded {
                stage: "lmstack",
                what: self.what,
                limit: self.limit,
            });
        }
        Ok(())
    }

    fn unreadable(&self, error: io::Error) -> Error {
        Error::InvalidRequest(format!("reading {}: {error}", self.what))
    }
}

//! Checked media for tool results: bytes or files become image, document and
//! audio blocks.

use std::fmt;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::{ContentBlock, Media, MediaSource};

/// What media a tool may hand to the model, where it may read files from, and how
/// much text it may return.
///
/// Every image, document or audio clip a tool returns from bytes, a file or an
/// inline content block goes through the policy of its
/// [`FunctionCallLayer`](super::FunctionCallLayer):
///
/// - the type is **sniffed from the magic bytes** and must agree with the type the
///   tool claimed (`image/jpg` is read as `image/jpeg`, `audio/x-wav` and
///   `audio/wave` as `audio/wav`, `audio/mp3` as `audio/mpeg`);
/// - the type must be on the **allow-list** (by default PNG, JPEG, GIF, WebP, PDF,
///   WAV and MP3: MCP servers return audio, and both audio types are the ones
///   every provider with audio input takes; OGG and FLAC are recognised but must
///   be [allowed](Self::allow));
/// - the content must fit the **size limit** (20 MiB by default), checked before a
///   file is read and again while reading it;
/// - a file path is resolved **inside the configured root** — relative paths from the
///   root, `..` refused, symbolic links followed and checked — and without a root no
///   file is read at all; it must name a **regular file**, checked before it is
///   opened (a named pipe or a device could block the read for ever).
///
/// The text of a result — all its text blocks together — has a limit too
/// ([`max_text_bytes`](Self::max_text_bytes), 1 MiB by default).
///
/// ```
/// use lmstack::function::{MediaError, MediaPolicy};
/// let policy = MediaPolicy::new();
/// let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
/// assert!(policy.block(png, Some("image/png")).is_ok());
/// assert!(matches!(
///     policy.block(png, Some("image/jpeg")),
///     Err(MediaError::Mismatch { .. })
/// ));
/// assert!(matches!(
///     MediaPolicy::new().max_bytes(4).block(png, None),
///     Err(MediaError::TooLarge { .. })
/// ));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MediaPolicy {
    allowed: Vec<String>,
    max_bytes: usize,
    max_text_bytes: usize,
    root: Option<PathBuf>,
}

impl Default for MediaPolicy {
    fn default() -> Self {
        Self::new()
    }
}

impl MediaPolicy {
    /// The default size limit: 20 MiB.
    pub const DEFAULT_MAX_BYTES: usize = 20 * 1024 * 1024;

    /// The default limit of a result's text: 1 MiB, some 250 000 tokens, more than
    /// most models' context.
    pub const DEFAULT_MAX_TEXT_BYTES: usize = 1024 * 1024;

    /// The types allowed by default: images, PDF, and the audio types Chat
    /// Completions and Gemini both take (WAV and MP3).
    pub const DEFAULT_ALLOWED: &'static [&'static str] = &[
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "application/pdf",
        "audio/wav",
        "audio/mpeg",
    ];

    /// The default policy: the default allow-list and size limits, and no file root
    /// (tools cannot return files).
    pub fn new() -> Self {
        MediaPolicy {
            allowed: Self::DEFAULT_ALLOWED
                .iter()
                .map(|t| (*t).to_owned())
                .collect(),
            max_bytes: Self::DEFAULT_MAX_BYTES,
            max_text_bytes: Self::DEFAULT_MAX_TEXT_BYTES,
            root: None,
        }
    }

    /// Lets tools return files from inside `root` (a directory).
    pub fn root(mut self, root: impl Into<PathBuf>) -> Self {
        self.root = Some(root.into());
        self
    }

    /// Sets the size limit, in bytes, of one image, document or audio clip.
    pub fn max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// Sets the limit, in bytes, of the text of one result (its text blocks
    /// together). A result over it becomes an error result naming the size and the
    /// limit.
    pub fn max_text_bytes(mut self, max_text_bytes: usize) -> Self {
        self.max_text_bytes = max_text_bytes;
        self
    }

    /// Adds a type to the allow-list. Only types that [`sniff`] recognises can ever
    /// pass: that is how a claim is checked.
    pub fn allow(mut self, media_type: &str) -> Self {
        let media_type = normalise(media_type);
        if !self.allowed.contains(&media_type) {
            self.allowed.push(media_type);
        }
        self
    }

    /// Replaces the allow-list.
    pub fn allow_only<'a>(mut self, media_types: impl IntoIterator<Item = &'a str>) -> Self {
        self.allowed.clear();
        media_types
            .into_iter()
            .fold(self, |policy, media_type| policy.allow(media_type))
    }

    /// The size limit, in bytes.
    pub fn limit(&self) -> usize {
        self.max_bytes
    }

    /// The limit of a result's text, in bytes.
    pub fn text_limit(&self) -> usize {
        self.max_text_bytes
    }

    /// Checks the size of a result's text, `size` bytes, against the text limit.
    pub(super) fn check_text(&self, size: usize) -> Result<(), MediaError> {
        if size > self.max_text_bytes {
            return Err(MediaError::TextTooLarge {
                size,
                limit: self.max_text_bytes,
            });
        }
        Ok(())
    }

    /// Checks `bytes` against the policy and returns their type: the size, the
    /// sniffed type, its agreement with `claimed` (when given), the allow-list.
    pub fn check(&self, bytes: &[u8], claimed: Option<&str>) -> Result<&'static str, MediaError> {
        if bytes.len() > self.max_bytes {
            return Err(MediaError::TooLarge {
                size: bytes.len() as u64,
                limit: self.max_bytes,
            });
        }
        let claimed = claimed.map(normalise);
        let actual = sniff(bytes).ok_or_else(|| MediaError::Unrecognised {
            claimed: claimed.clone(),
        })?;
        if let Some(claimed) = claimed
            && claimed != actual
        {
            return Err(MediaError::Mismatch { claimed, actual });
        }
        if !self.allowed.iter().any(|allowed| allowed == actual) {
            return Err(MediaError::NotAllowed {
                media_type: actual,
                allowed: self.allowed.clone(),
            });
        }
        Ok(actual)
    }

    /// Checks `bytes` and makes a content block of them: an image for `image/*`
    /// types, an audio clip for `audio/*` types, a document otherwise, inline as
    /// base64.
    pub fn block(&self, bytes: &[u8], claimed: Option<&str>) -> Result<ContentBlock, MediaError> {
        let media_type = self.check(bytes, claimed)?;
        Ok(ContentBlock::of_media(Media::from_bytes(media_type, bytes)))
    }

    /// Checks a content block a tool built itself as [`block`](Self::block)
    /// checks bytes: an inline (base64) image, document or audio clip must fit
    /// the size limit, be what its `media_type` claims and be on the allow-list;
    /// it comes back with the sniffed type, as an image, audio clip or document
    /// by that type, its data and name kept. Text, and media by URL or by
    /// reference, pass unchanged: there are no bytes to inspect. (A reference
    /// names bytes the application put in its own
    /// [`MediaStore`](crate::store::MediaStore); they are checked against their
    /// digest, not against this policy, when a provider resolves them.)
    pub fn check_block(&self, block: ContentBlock) -> Result<ContentBlock, MediaError> {
        let (ContentBlock::Image(media)
        | ContentBlock::Document(media)
        | ContentBlock::Audio(media)) = &block
        else {
            return Ok(block);
        };
        let MediaSource::Base64 { media_type, data } = &media.source else {
            return Ok(block);
        };
        // Refused undecoded when the data is over the limit (exact for valid base64).
        let padding = data.bytes().rev().take_while(|&b| b == b'=').count();
        let size = (data.len() / 4 * 3).saturating_sub(padding);
        if size > self.max_bytes {
            return Err(MediaError::TooLarge {
                size: size as u64,
                limit: self.max_bytes,
            });
        }
        let bytes = STANDARD
            .decode(data.as_bytes())
            .map_err(|error| MediaError::InvalidBase64(error.to_string()))?;
        let actual = self.check(&bytes, Some(media_type))?;
        Ok(ContentBlock::of_media(Media {
            name: media.name.clone(),
            cache_control: media.cache_control,
            ..Media::base64(actual, data.clone())
        }))
    }

    /// Reads a file from inside the root and checks it like [`block`](Self::block);
    /// the block is named after the file. This does blocking IO.
    pub fn read_block(
        &self,
        path: &Path,
        claimed: Option<&str>,
    ) -> Result<ContentBlock, MediaError> {
        let bytes = self.read(path)?;
        let mut block = self.block(&bytes, claimed)?;
        if let (
            ContentBlock::Image(media) | ContentBlock::Document(media) | ContentBlock::Audio(media),
            Some(name),
        ) = (&mut block, path.file_name())
        {
            media.name = Some(name.to_string_lossy().into_owned());
        }
        Ok(block)
    }

    /// Reads a file from inside the root, refusing it unread when it is not a
    /// regular file or is larger than the limit. The content is not checked; see
    /// [`check`](Self::check). This does blocking IO.
    pub fn read(&self, path: &Path) -> Result<Vec<u8>, MediaError> {
        let real = self.resolve(path)?;
        let io_error = |source| MediaError::Io {
            path: path.to_owned(),
            source,
        };
        // The type is checked before the open, which would block on a named pipe,
        // and again on the opened file, in case the path changed in between.
        self.check_file(path, &real.symlink_metadata().map_err(io_error)?)?;
        let file = open_without_blocking(&real).map_err(io_error)?;
        let size = self.check_file(path, &file.metadata().map_err(io_error)?)?;
        // The file may grow between the check and the read: read one byte past the
        // limit at most.
        let mut bytes = Vec::with_capacity(size as usize);
        file.take(self.max_bytes as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(io_error)?;
        if bytes.len() > self.max_bytes {
            return Err(MediaError::TooLarge {
                size: bytes.len() as u64,
                limit: self.max_bytes,
            });
        }
        Ok(bytes)
    }

    /// The size of the file at `path` (as the tool gave it) by its metadata, if it
    /// is a regular file within the limit.
    fn check_file(&self, path: &Path, metadata: &Metadata) -> Result<u64, MediaError> {
        if !metadata.is_file() {
            return Err(MediaError::NotAFile {
                path: path.to_owned(),
            });
        }
        if metadata.len() > self.max_bytes as u64 {
            return Err(MediaError::TooLarge {
                size: metadata.len(),
                limit: self.max_bytes,
            });
        }
        Ok(metadata.len())
    }

    /// The real path of `path` inside the root: relative paths start at the root,
    /// `..` is refused, and the resolved path (symbolic links followed) must lie
    /// inside the resolved root. This does blocking IO.
    pub fn resolve(&self, path: &Path) -> Result<PathBuf, MediaError> {
        let root = self.root.as_deref().ok_or(MediaError::NoRoot)?;
        let outside = || MediaError::OutsideRoot {
            path: path.to_owned(),
        };
        if path.components().any(|c| c == Component::ParentDir) {
            return Err(outside());
        }
        let given = root;
        let root = root.canonicalize().map_err(|source| MediaError::Io {
            path: root.to_owned(),
            source,
        })?;
        // An absolute path elsewhere is refused before it is looked at.
        if path.is_absolute() && !path.starts_with(given) && !path.starts_with(&root) {
            return Err(outside());
        }
        let real = root
            .join(path)
            .canonicalize()
            .map_err(|source| MediaError::Io {
                path: path.to_owned(),
                source,
            })?;
        if !real.starts_with(&root) {
            return Err(outside());
        }
        Ok(real)
    }
}

/// Opens a resolved path for reading. On unix without waiting (`O_NONBLOCK`, which
/// reads of a regular file ignore), so that a named pipe put in the place of a
/// checked file cannot block the open for ever, and without following a symbolic
/// link put there (`O_NOFOLLOW`: the resolved path has none).
fn open_without_blocking(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NONBLOCK | libc::O_NOFOLLOW,
    );
    options.open(path)
}

/// Why media was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MediaError {
    /// The content is larger than the limit.
    #[error("the content is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// Its size, in bytes.
        size: u64,
        /// The limit, in bytes.
        limit: usize,
    },
    /// The text of a result is larger than the text limit.
    #[error("the text is {size} bytes, over the limit of {limit} bytes")]
    TextTooLarge {
        /// Its size, in bytes.
        size: usize,
        /// The limit, in bytes.
        limit: usize,
    },
    /// The magic bytes match no type lmstack recognises.
    #[error(
        "the content is not a recognised type (PNG, JPEG, GIF, WebP, PDF, WAV, MP3, OGG, FLAC or plain text){}",
        Claim(claimed.as_deref())
    )]
    Unrecognised {
        /// The type the tool claimed.
        claimed: Option<String>,
    },
    /// The magic bytes disagree with the claimed type.
    #[error("the content was declared as {claimed} but its bytes are {actual}")]
    Mismatch {
        /// The type the tool claimed.
        claimed: String,
        /// The type of the bytes.
        actual: &'static str,
    },
    /// The type is not on the allow-list.
    #[error("{media_type} is not allowed (allowed: {})", allowed.join(", "))]
    NotAllowed {
        /// The type of the bytes.
        media_type: &'static str,
        /// The allow-list.
        allowed: Vec<String>,
    },
    /// Inline media whose data is not valid base64.
    #[error("the inline data is not valid base64: {0}")]
    InvalidBase64(String),
    /// No root is configured, so no file may be read.
    #[error("tools may not return files: no file root is configured")]
    NoRoot,
    /// The path leads outside the root.
    #[error("{} is outside the directory tools may read", path.display())]
    OutsideRoot {
        /// The path as the tool gave it.
        path: PathBuf,
    },
    /// The path is not a regular file.
    #[error("{} is not a regular file", path.display())]
    NotAFile {
        /// The path as the tool gave it.
        path: PathBuf,
    },
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The path as the tool gave it.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// Formats an optional claimed type as ` (declared as …)`.
struct Claim<'a>(Option<&'a str>);

impl fmt::Display for Claim<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(claimed) => write!(f, " (declared as {claimed})"),
            None => Ok(()),
        }
    }
}

/// The type of `bytes` from their magic bytes: `image/png`, `image/jpeg`,
/// `image/gif`, `image/webp`, `application/pdf`, `audio/wav` (`RIFF…WAVE`),
/// `audio/mpeg` (an ID3v2 tag, or an MPEG layer III frame header), `audio/ogg`
/// (`OggS`), `audio/flac` (`fLaC`), or `text/plain` for UTF-8 text without
/// control characters other than whitespace. `None` when nothing matches (and
/// for empty content).
///
/// ```
/// use lmstack::function::sniff;
/// assert_eq!(sniff(b"%PDF-1.7\n"), Some("application/pdf"));
/// assert_eq!(sniff(b"GIF89a\x01\x00"), Some("image/gif"));
/// assert_eq!(sniff(b"RIFF\x24\0\0\0WAVEfmt "), Some("audio/wav"));
/// assert_eq!(sniff(b"\xff\xfb\x90\x64"), Some("audio/mpeg"));
/// assert_eq!(sniff("héllo\n".as_bytes()), Some("text/plain"));
/// assert_eq!(sniff(b"\x00\x01\x02"), None);
/// ```
pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
    const SIGNATURES: &[(&[u8], &str)] = &[
        (b"\x89PNG\r\n\x1a\n", "image/png"),
        (b"\xff\xd8\xff", "image/jpeg"),
        (b"GIF87a", "image/gif"),
        (b"GIF89a", "image/gif"),
        (b"%PDF-", "application/pdf"),
    ];
    if let Some((_, media_type)) = SIGNATURES
        .iter()
        .find(|(magic, _)| bytes.starts_with(magic))
    {
        return Some(media_type);
    }
    if let Some(media_type) = riff(bytes).or_else(|| audio(bytes)) {
        return Some(media_type);
    }
    let text = std::str::from_utf8(bytes).ok()?;
    let plain = !text.is_empty()
        && !text
            .chars()
            .any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r' | '\x0c'));
    plain.then_some("text/plain")
}

/// The type of a RIFF container: WebP or WAV.
fn riff(bytes: &[u8]) -> Option<&'static str> {
    if bytes.len() < 12 || &bytes[..4] != b"RIFF" {
        return None;
    }
    match &bytes[8..12] {
        b"WEBP" => Some("image/webp"),
        b"WAVE" => Some("audio/wav"),
        _ => None,
    }
}

/// The type of MP3, OGG or FLAC audio by its first bytes. Each signature is
/// checked with the byte after it, so that text which happens to start with
/// `ID3`, `OggS` or `fLaC` stays text.
fn audio(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        // ID3v2: major version 2 to 4, then a revision, flags, and a size of
        // four 7-bit bytes.
        [b'I', b'D', b'3', 2..=4, _, _, size @ ..]
            if size.len() >= 4 && size[..4].iter().all(|b| b & 0x80 == 0) =>
        {
            Some("audio/mpeg")
        }
        [b'O', b'g', b'g', b'S', 0, ..] => Some("audio/ogg"),
        // The first metadata block is STREAMINFO (type 0, maybe marked last).
        [b'f', b'L', b'a', b'C', header, ..] if header & 0x7f == 0 => Some("audio/flac"),
        [0xff, second, third, ..] if mpeg_layer_3(*second, *third) => Some("audio/mpeg"),
        _ => None,
    }
}

/// Whether `0xFF second third` opens an MPEG audio layer III frame: the rest of
/// the 11-bit frame sync, a version other than the reserved one, layer III, a
/// bitrate index other than free (0) and bad (15), a sampling rate index other
/// than the reserved 3.
fn mpeg_layer_3(second: u8, third: u8) -> bool {
    let sync = second & 0xe0 == 0xe0;
    let version = (second >> 3) & 0b11;
    let layer = (second >> 1) & 0b11;
    let bitrate = third >> 4;
    let rate = (third >> 2) & 0b11;
    sync && version != 0b01 && layer == 0b01 && !matches!(bitrate, 0 | 15) && rate != 0b11
}

/// A MIME type in the form the policy compares: lower case, without parameters,
/// `image/jpg` read as `image/jpeg`, `audio/x-wav` and `audio/wave` as
/// `audio/wav`, `audio/mp3` as `audio/mpeg`.
fn normalise(media_type: &str) -> String {
    let essence = crate::message::mime_essence(media_type);
    match essence.as_str() {
        "image/jpg" | "image/pjpeg" => "image/jpeg".to_owned(),
        "audio/x-wav" | "audio/wave" | "audio/vnd.wave" => "audio/wav".to_owned(),
        "audio/mp3" | "audio/x-mp3" | "audio/mpeg3" => "audio/mpeg".to_owned(),
        "audio/x-flac" => "audio/flac".to_owned(),
        _ => essence,
    }
}

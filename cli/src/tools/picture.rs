//! Reading the pictures the tools work on: PNG or JPEG files under the media
//! policy's root, decoded within limits.

use std::io::Cursor;
use std::path::Path;

use image::{ImageFormat, ImageReader, Limits, RgbaImage};
use lmstack::function::MediaPolicy;

/// The largest image decoded, per side, in pixels.
const MAX_SIDE: u32 = 8192;
/// The most memory the decoder may take.
const MAX_DECODE_BYTES: u64 = 256 * 1024 * 1024;

/// A picture file, read and checked but not decoded.
pub struct Picture {
    /// The name the model gave.
    pub name: String,
    /// The file's bytes.
    pub bytes: Vec<u8>,
    /// `image/png` or `image/jpeg`, sniffed from the bytes.
    pub media_type: &'static str,
}

impl Picture {
    /// Reads `name` under `media`'s root; anything but PNG or JPEG is refused.
    pub fn read(media: &MediaPolicy, name: &str) -> Result<Picture, String> {
        let bytes = media.read(Path::new(name)).map_err(|e| e.to_string())?;
        let media_type = media.check(&bytes, None).map_err(|e| e.to_string())?;
        if !matches!(media_type, "image/png" | "image/jpeg") {
            return Err(format!(
                "{name} is {media_type}; the tools read PNG and JPEG"
            ));
        }
        Ok(Picture {
            name: name.to_owned(),
            bytes,
            media_type,
        })
    }

    /// Its width and height, from the header alone.
    pub fn dimensions(&self) -> Result<(u32, u32), String> {
        let (width, height) = self
            .reader()
            .into_dimensions()
            .map_err(|e| format!("cannot read {}: {e}", self.name))?;
        if width == 0 || height == 0 || width > MAX_SIDE || height > MAX_SIDE {
            return Err(format!(
                "{} is {width}×{height} px; the tools read up to {MAX_SIDE} px a side",
                self.name
            ));
        }
        Ok((width, height))
    }

    /// The decoded picture.
    pub fn decode(&self) -> Result<RgbaImage, String> {
        let mut reader = self.reader();
        let mut limits = Limits::default();
        limits.max_image_width = Some(MAX_SIDE);
        limits.max_image_height = Some(MAX_SIDE);
        limits.max_alloc = Some(MAX_DECODE_BYTES);
        reader.limits(limits);
        Ok(reader
            .decode()
            .map_err(|e| format!("cannot decode {}: {e}", self.name))?
            .to_rgba8())
    }

    fn reader(&self) -> ImageReader<Cursor<&[u8]>> {
        let format = match self.media_type {
            "image/png" => ImageFormat::Png,
            _ => ImageFormat::Jpeg,
        };
        ImageReader::with_format(Cursor::new(&self.bytes), format)
    }
}

/// `image` as PNG bytes.
pub fn png(image: &RgbaImage) -> Result<Vec<u8>, String> {
    let mut png = Vec::new();
    image
        .write_to(&mut Cursor::new(&mut png), ImageFormat::Png)
        .map_err(|e| format!("cannot encode the image: {e}"))?;
    Ok(png)
}

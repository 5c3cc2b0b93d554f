//! Ways to cut text into stream deltas.

/// How a scripted reply's text is cut into deltas. Every cut falls on a UTF-8
/// character boundary, so a piece may be longer than asked when a character is
/// wider than the requested size.
///
/// ```
/// use lmstack::testing::Chunking;
/// assert_eq!(Chunking::Bytes(2).split("héllo"), vec!["hé", "ll", "o"]);
/// assert_eq!(Chunking::Chars.split("añb"), vec!["a", "ñ", "b"]);
/// assert_eq!(Chunking::Whole.split("abc"), vec!["abc"]);
/// let random = Chunking::Random { seed: 7, max: 5 }.split("the quick brown fox");
/// assert_eq!(random.concat(), "the quick brown fox");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chunking {
    /// One piece.
    Whole,
    /// Pieces of this many bytes (at least 1), rounded up to a character boundary.
    Bytes(usize),
    /// One piece per character.
    Chars,
    /// Pieces of 1 to `max` bytes, drawn from a generator seeded with `seed`; the
    /// same seed cuts the same text the same way.
    Random {
        /// The generator's seed.
        seed: u64,
        /// The largest piece, in bytes (at least 1).
        max: usize,
    },
}

impl Default for Chunking {
    /// Four bytes: about one token.
    fn default() -> Self {
        Chunking::Bytes(4)
    }
}

impl Chunking {
    /// Cuts `text`; the pieces concatenate to `text`. Empty text gives no piece.
    pub fn split<'a>(&self, text: &'a str) -> Vec<&'a str> {
        match *self {
            Chunking::Whole if text.is_empty() => Vec::new(),
            Chunking::Whole => vec![text],
            Chunking::Bytes(size) => cut(text, || size.max(1)),
            Chunking::Chars => cut(text, || 1),
            Chunking::Random { seed, max } => {
                let mut rng = fastrand::Rng::with_seed(seed);
                cut(text, || rng.usize(1..=max.max(1)))
            }
        }
    }
}

/// Cuts `text` into pieces of `next_size()` bytes, each end moved forward to the
/// next character boundary.
fn cut(text: &str, mut next_size: impl FnMut() -> usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + next_size()).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        pieces.push(&text[start..end]);
        start = end;
    }
    pieces
}

//! Finding literal markers such as `</think>` in text that arrives in pieces.

use memchr::memchr;

/// Finds the first of a few literal markers, holding back a partial marker at
/// the end of a piece. Every marker starts with `<` and holds no other `<`, so a
/// partial match that fails never hides the start of another: the byte that broke
/// it is looked at again, and nothing else is.
#[derive(Debug)]
pub(crate) struct MarkerFinder {
    markers: Vec<Box<str>>,
    held: String,
}

/// What [`MarkerFinder::find`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// Marker `index` ends at byte `end` of the piece.
    Marker { index: usize, end: usize },
    /// No marker: the piece was used up (maybe holding a partial marker).
    More,
}

impl MarkerFinder {
    /// A finder for `markers`.
    pub(crate) fn new<I, S>(markers: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<Box<str>>,
    {
        let markers: Vec<Box<str>> = markers.into_iter().map(Into::into).collect();
        debug_assert!(
            markers
                .iter()
                .all(|m| m.starts_with('<') && !m[1..].contains('<'))
        );
        MarkerFinder {
            markers,
            held: String::new(),
        }
    }

    /// Scans `input`, handing the text before a marker to `text`.
    pub(crate) fn find(&mut self, input: &str, text: &mut impl FnMut(&str)) -> Found {
        let bytes = input.as_bytes();
        let mut pos = 0;
        if !self.held.is_empty() {
            while pos < bytes.len() {
                let next = bytes[pos];
                let len = self.held.len();
                let mut extends = false;
                for (index, marker) in self.markers.iter().enumerate() {
                    let marker = marker.as_bytes();
                    if marker.len() > len && marker.starts_with(self.held.as_bytes()) && marker[len] == next {
                        if marker.len() == len + 1 {
                            self.held.clear();
                            return Found::Marker { index, end: pos + 1 };
                        }
                        extends = true;
                    }
                }
                if !extends {
                    text(&self.held);
                    self.held.clear();
                    break;
                }
                self.held.push(next as char);
                pos += 1;
            }
            if !self.held.is_empty() {
                return Found::More;
            }
        }
        let from = pos;
        while let Some(offset) = memchr(b'<', &bytes[pos..]) {
            let at = pos + offset;
            let rest = &bytes[at..];
            let mut partial = false;
            for (index, marker) in self.markers.iter().enumerate() {
                let marker = marker.as_bytes();
                if rest.starts_with(marker) {
                    emit(text, &input[from..at]);
                    return Found::Marker {
                        index,
                        end: at + marker.len(),
                    };
                }
                partial |= marker.len() > rest.len() && marker.starts_with(rest);
            }
            if partial {
                emit(text, &input[from..at]);
                self.held.push_str(&input[at..]);
                return Found::More;
            }
            pos = at + 1;
        }
        emit(text, &input[from..]);
        Found::More
    }

    /// Ends the input: hands a held partial marker on as text.
    pub(crate) fn flush(&mut self, text: &mut impl FnMut(&str)) {
        if !self.held.is_empty() {
            text(&self.held);
            self.held.clear();
        }
    }
}

fn emit(text: &mut impl FnMut(&str), piece: &str) {
    if !piece.is_empty() {
        text(piece);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run(finder: &mut MarkerFinder, pieces: &[&str]) -> (String, Option<(usize, String)>) {
        let mut text = String::new();
        for (n, piece) in pieces.iter().enumerate() {
            if let Found::Marker { index, end } = finder.find(piece, &mut |t| text.push_str(t)) {
                let rest = format!("{}{}", &piece[end..], pieces[n + 1..].concat());
                return (text, Some((index, rest)));
            }
        }
        finder.flush(&mut |t| text.push_str(t));
        (text, None)
    }

    proptest! {
        #[test]
        fn finds_the_marker_wherever_the_input_is_cut(
            before in "[a-z<>/ ]{0,20}",
            after in "[a-z<>/ ]{0,10}",
            cuts in prop::collection::vec(0usize..40, 0..6),
        ) {
            let input = format!("{before}</think>{after}");
            let mut bounds: Vec<usize> = cuts.into_iter().filter(|c| *c < input.len()).collect();
            bounds.sort_unstable();
            bounds.dedup();
            let mut pieces = Vec::new();
            let mut start = 0;
            for end in bounds.into_iter().chain([input.len()]) {
                pieces.push(&input[start..end]);
                start = end;
            }
            let mut finder = MarkerFinder::new(["</think>"]);
            let (text, found) = run(&mut finder, &pieces);
            let first = input.find("</think>").unwrap();
            prop_assert_eq!(text, &input[..first]);
            prop_assert_eq!(found, Some((0, input[first + 8..].to_owned())));
        }
    }

    #[test]
    fn a_broken_partial_marker_is_text_and_the_breaking_byte_is_seen_again() {
        let mut finder = MarkerFinder::new(["</think>"]);
        let (text, found) = run(&mut finder, &["a </thi", "<", "/think> b"]);
        assert_eq!(text, "a </thi");
        assert_eq!(found, Some((0, " b".into())));
    }

    #[test]
    fn a_partial_marker_at_the_end_is_released() {
        let mut finder = MarkerFinder::new(["</think>", "</tool_call>"]);
        assert_eq!(run(&mut finder, &["x </to"]), ("x </to".into(), None));
    }
}

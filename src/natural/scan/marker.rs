//! Finding literal markers such as `</think>` in text that arrives in pieces.

use memchr::memchr;

use crate::text::floor_char_boundary;

/// Finds the first of a few literal markers, holding back a partial marker at
/// the end of a piece. Every marker starts with the same byte (`<`, or `[` for
/// Mistral's `[/THINK]`) and holds no other, so a partial match that fails never
/// hides the start of another: the byte that broke it is looked at again, and
/// nothing else is.
#[derive(Debug)]
pub(crate) struct MarkerFinder {
    markers: Vec<Box<str>>,
    /// The byte every marker starts with.
    first: u8,
    /// A marker begun at the end of a piece.
    partial: MarkerMatch,
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
        let first = markers.first().map_or(b'<', |marker| marker.as_bytes()[0]);
        debug_assert!(
            markers
                .iter()
                .all(|m| { m.as_bytes()[0] == first && !m.as_bytes()[1..].contains(&first) })
        );
        MarkerFinder {
            markers,
            first,
            partial: MarkerMatch::default(),
        }
    }

    /// Scans `input`, handing the text before a marker to `text`.
    pub(crate) fn find(&mut self, input: &str, text: &mut impl FnMut(&str)) -> Found {
        let bytes = input.as_bytes();
        let mut pos = 0;
        if !self.partial.held.is_empty() {
            match self.partial.feed(input, &self.markers) {
                Matched::More => return Found::More,
                Matched::Marker { index, end } => return Found::Marker { index, end },
                Matched::Not { at } => {
                    text(&std::mem::take(&mut self.partial.held));
                    pos = at;
                }
            }
        }
        let from = pos;
        while let Some(offset) = memchr(self.first, &bytes[pos..]) {
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
                self.partial.start(&input[at..]);
                return Found::More;
            }
            pos = at + 1;
        }
        emit(text, &input[from..]);
        Found::More
    }

    /// Marker `index`.
    pub(crate) fn marker(&self, index: usize) -> &str {
        &self.markers[index]
    }

    /// Ends the input: hands a held partial marker on as text.
    pub(crate) fn flush(&mut self, text: &mut impl FnMut(&str)) {
        if !self.partial.held.is_empty() {
            text(&std::mem::take(&mut self.partial.held));
        }
    }
}

/// Reads one of a set of literal markers that a model writes as special tokens
/// (`<|tool_call|>`, `[TOOL_CALLS]`, `<｜tool▁calls▁begin｜>`), from its first
/// byte on, across pieces; keeps what it read, so that a near miss is given
/// back as text exactly.
#[derive(Debug, Default)]
pub(crate) struct MarkerMatch {
    held: String,
}

/// What [`MarkerMatch::feed`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Matched {
    /// The piece was used up; the marker may go on.
    More,
    /// Marker `index` ends at byte `end` of the piece.
    Marker { index: usize, end: usize },
    /// No marker: [`held`](MarkerMatch::held) is text, and the piece from byte
    /// `at` on (a character boundary) is to be read again.
    Not { at: usize },
}

impl MarkerMatch {
    /// Starts a marker with the bytes just read (its first character).
    pub(crate) fn start(&mut self, first: &str) {
        self.held.clear();
        self.held.push_str(first);
    }

    /// What was read of the would-be marker.
    pub(crate) fn held(&self) -> &str {
        &self.held
    }

    /// Reads on in `input`, against `markers`.
    pub(crate) fn feed(&mut self, input: &str, markers: &[impl AsRef<str>]) -> Matched {
        let bytes = input.as_bytes();
        let held_len = self.held.len();
        let mut pos = 0;
        while let Some(&next) = bytes.get(pos) {
            let len = held_len + pos;
            let mut extends = false;
            for (index, marker) in markers.iter().enumerate() {
                let marker = marker.as_ref().as_bytes();
                if marker.len() > len
                    && marker.starts_with(self.held.as_bytes())
                    && marker[held_len..len] == bytes[..pos]
                    && marker[len] == next
                {
                    if marker.len() == len + 1 {
                        self.held.clear();
                        return Matched::Marker {
                            index,
                            end: pos + 1,
                        };
                    }
                    extends = true;
                }
            }
            if !extends {
                let pos = floor_char_boundary(input, pos);
                self.held.push_str(&input[..pos]);
                return Matched::Not { at: pos };
            }
            pos += 1;
        }
        self.held.push_str(input);
        Matched::More
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

    proptest! {
        #[test]
        fn a_special_marker_is_matched_or_given_back_whatever_the_cuts(
            after in "(｜tool▁calls▁begin｜|｜tool▁call▁begin｜|｜tool▁|\\|tool_call\\||x)[a-z<]{0,4}",
            cuts in prop::collection::vec(0usize..60, 0..6),
        ) {
            const MARKERS: [&str; 3] = ["<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<|tool_call|>"];
            let input = format!("<{after}>rest");
            let whole = MARKERS.iter().position(|m| input.starts_with(m));
            let points = crate::natural::scan::cut_points(&input[1..], &cuts);
            let mut matcher = MarkerMatch::default();
            matcher.start("<");
            let mut start = 1;
            let mut found = None;
            for end in points.into_iter().map(|p| p + 1) {
                match matcher.feed(&input[start..end], &MARKERS) {
                    Matched::More => start = end,
                    Matched::Marker { index, end: used } => {
                        found = Some((index, start + used));
                        break;
                    }
                    Matched::Not { at } => {
                        let text = format!("{}{}", matcher.held(), &input[start + at..]);
                        prop_assert_eq!(text, input.clone());
                        found = Some((usize::MAX, 0));
                        break;
                    }
                }
            }
            match (whole, found) {
                (Some(index), Some((got, end))) => {
                    prop_assert_eq!(got, index);
                    prop_assert_eq!(end, MARKERS[index].len());
                }
                (None, Some((got, _))) => prop_assert_eq!(got, usize::MAX),
                (_, None) => prop_assert!(false, "the input holds more than a marker"),
            }
        }
    }

    #[test]
    fn a_marker_broken_inside_a_multi_byte_character_is_text_from_a_whole_one() {
        let mut finder = MarkerFinder::new(["<｜tool▁call▁end｜>"]);
        let (text, found) = run(&mut finder, &["a <｜tool", "▁cal", "l▁en｝ b"]);
        assert_eq!(text, "a <｜tool▁call▁en｝ b");
        assert_eq!(found, None);
        let (text, found) = run(&mut finder, &["<｜tool▁", "call▁end｜>c"]);
        assert_eq!(text, "");
        assert_eq!(found, Some((0, "c".into())));
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

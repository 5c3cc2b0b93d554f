//! Text helpers every part shares.

/// The last character boundary of `text` at or before byte `at` (at most
/// `text.len()`): where a cut near `at` may fall without splitting a
/// character. (`str::floor_char_boundary` once the crate's minimum Rust has it.)
pub(crate) fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::floor_char_boundary;

    #[test]
    fn a_cut_inside_a_character_moves_back_to_its_start() {
        let text = "aé€"; // 1 + 2 + 3 bytes
        let cuts: Vec<usize> = (0..=8).map(|at| floor_char_boundary(text, at)).collect();
        assert_eq!(cuts, [0, 1, 1, 3, 3, 3, 6, 6, 6]);
    }
}

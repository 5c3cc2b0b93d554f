//! A command line given as one string (`--server`, `--mcp`) split into its words
//! as a shell would, without running one.

/// Splits `line` into words at unquoted whitespace. Double and single quotes
/// group words; a backslash takes the next character literally (outside single
/// quotes; inside double quotes only before `"` and `\`). Nothing is expanded:
/// `$HOME`, `*` and `~` stay as written. An empty line or an unterminated quote
/// or escape is an error.
pub fn split(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    let unterminated = |what: &str| format!("unterminated {what} in `{line}`");
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => words.extend(word.take()),
            '\'' => {
                let quoted = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => quoted.push(c),
                        None => return Err(unterminated("single quote")),
                    }
                }
            }
            '"' => {
                let quoted = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => quoted.push(c),
                            Some(c) => quoted.extend(['\\', c]),
                            None => return Err(unterminated("double quote")),
                        },
                        Some(c) => quoted.push(c),
                        None => return Err(unterminated("double quote")),
                    }
                }
            }
            '\\' => match chars.next() {
                Some(c) => word.get_or_insert_with(String::new).push(c),
                None => return Err(unterminated("backslash escape")),
            },
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    if words.is_empty() {
        return Err("the command line is empty".to_owned());
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::split;

    fn words(line: &str) -> Vec<String> {
        split(line).unwrap()
    }

    #[test]
    fn plain_words_split_at_any_run_of_whitespace() {
        assert_eq!(
            words("  npx --no-install\tmcp-server-everything \n stdio "),
            ["npx", "--no-install", "mcp-server-everything", "stdio"]
        );
    }

    #[test]
    fn quotes_group_words_and_join_what_touches_them() {
        assert_eq!(
            words(r#"sh -c 'echo "hi there"; exit 3'"#),
            ["sh", "-c", r#"echo "hi there"; exit 3"#]
        );
        assert_eq!(words(r#"a"b c"'d e'f"#), ["ab cd ef"]);
        assert_eq!(words(r#"x '' "" y"#), ["x", "", "", "y"]);
    }

    #[test]
    fn backslashes_escape_outside_single_quotes_only() {
        assert_eq!(words(r"a\ b \'c"), ["a b", "'c"]);
        assert_eq!(words(r#""a\"b\\c\d""#), [r#"a"b\c\d"#]);
        assert_eq!(words(r"'a\b'"), [r"a\b"]);
    }

    #[test]
    fn nothing_is_expanded() {
        assert_eq!(words("echo $HOME ~ *.rs"), ["echo", "$HOME", "~", "*.rs"]);
    }

    #[test]
    fn an_empty_line_and_an_unterminated_quote_are_errors() {
        assert_eq!(split("  ").unwrap_err(), "the command line is empty");
        assert!(
            split("sh -c 'echo")
                .unwrap_err()
                .contains("unterminated single quote")
        );
        assert!(
            split(r#"say "hi"#)
                .unwrap_err()
                .contains("unterminated double quote")
        );
        assert!(
            split(r"end\")
                .unwrap_err()
                .contains("unterminated backslash")
        );
    }
}

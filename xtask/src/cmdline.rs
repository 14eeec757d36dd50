//! Command lines written in the workspace's lists (`book-outputs.txt`, `perf.txt`): how one
//! is split into arguments, and how the workspace's own path is taken out of what a
//! program prints, so a file made on one machine reads the same as one made on another.

use std::path::Path;

/// One line of a chapter's list (`book-outputs.txt`, `perf.txt`): `<name>: <cargo run args>`.
pub struct ListEntry {
    /// The file the line names.
    pub name: String,
    /// The arguments after `cargo run --release -q`, as written.
    pub args: String,
    /// `path:line`, for messages.
    pub source: String,
}

/// The entries of the list at `path` (none if there is no such file), skipping blank lines
/// and `#` comments.
pub fn list_entries(path: &Path) -> Result<Vec<ListEntry>, String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(Vec::new());
    };
    let mut entries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let source = format!("{}:{}", path.display(), i + 1);
        let (name, args) = line
            .split_once(':')
            .ok_or_else(|| format!("{source}: expected `<name>: <cargo run args>`"))?;
        entries.push(ListEntry {
            name: name.trim().to_string(),
            args: args.trim().to_string(),
            source,
        });
    }
    Ok(entries)
}

/// Splits on spaces, except inside double quotes: `-p "a b"` is two arguments, `-p` and
/// `a b`. There are no escapes; a quote left open is an error.
pub fn split_args(line: &str) -> Result<Vec<String>, String> {
    let mut args = Vec::new();
    let mut word: Option<String> = None;
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                word.get_or_insert_default();
            }
            c if c.is_whitespace() && !quoted => args.extend(word.take()),
            c => word.get_or_insert_default().push(c),
        }
    }
    if quoted {
        return Err(format!("an unclosed quote in: {line}"));
    }
    args.extend(word);
    Ok(args)
}

pub fn normalise_paths(text: &str, root: &Path) -> String {
    let mut text = text.to_string();
    for form in [root.canonicalize().ok(), Some(root.to_path_buf())]
        .into_iter()
        .flatten()
    {
        text = text.replace(&form.display().to_string(), ".");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_arguments_keep_their_spaces() {
        assert_eq!(
            split_args(r#"-p ch09-generate -- -p "The capital of France is" -n 8"#).unwrap(),
            [
                "-p",
                "ch09-generate",
                "--",
                "-p",
                "The capital of France is",
                "-n",
                "8"
            ]
        );
        assert_eq!(split_args(r#"a "" b"#).unwrap(), ["a", "", "b"]);
        assert!(split_args(r#"-p "open"#).is_err());
    }
}

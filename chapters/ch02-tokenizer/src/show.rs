//! Showing token pieces to a person: whitespace made visible, broken UTF-8 as hex.

/// A token's bytes as printable text: a space is `␣`, a newline `↵`, a tab `→`, and bytes
/// that are not (yet) a whole UTF-8 character are written `\xF0`.
pub fn visible(piece: &[u8]) -> String {
    let mut out = String::new();
    for chunk in piece.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                ' ' => out.push('␣'),
                '\n' => out.push('↵'),
                '\t' => out.push('→'),
                c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::visible;

    #[test]
    fn whitespace_and_broken_bytes_are_visible() {
        assert_eq!(visible(b" the\n"), "␣the↵");
        assert_eq!(visible(&[0xF0, 0x9F]), "\\xF0\\x9F");
        assert_eq!(visible("é".as_bytes()), "é");
        assert_eq!(visible(b"\x1b"), "\\u{1b}");
    }
}

//! The two texts chapter 2's encode speed is measured on, built the same way by the binary's
//! `bench` (the table the book shows) and by the criterion bench `benches/ch02_encode.rs`:
//!
//! - "mixed": the chapter's corpus and every text of the llama.cpp fixture, repeated to the
//!   size asked for: mostly short pieces (words), where the naive merge loop is fastest;
//! - "long pieces": Chinese and Japanese sentences without spaces. `\p{L}+` takes a whole run
//!   of CJK letters as one piece of about 1 KB, where the naive loop's O(n²) shows.
//!
//! Both are deterministic, so every run measures the same bytes.

/// The corpus (`data/corpus.txt`) plus every text of the fixture
/// (`fixtures/reference/tokenizer-smollm2.json`, given as its JSON), one a line, repeated
/// until it is at least `bytes` long.
pub fn mixed_text(corpus: &str, fixture_json: &str, bytes: usize) -> Result<String, String> {
    let json: serde_json::Value = serde_json::from_str(fixture_json)
        .map_err(|e| format!("the tokenizer fixture is not JSON: {e}"))?;
    let cases = json["cases"]
        .as_array()
        .ok_or("the tokenizer fixture has no cases")?;
    let mut unit = corpus.to_string();
    for case in cases {
        unit.push_str(case["text"].as_str().unwrap_or(""));
        unit.push('\n');
    }
    if unit.is_empty() {
        return Err("the corpus and the fixture are empty".into());
    }
    Ok(unit.repeat(bytes.div_ceil(unit.len())))
}

/// CJK sentences without spaces or punctuation between them, about 1 KB a line, until the
/// text is at least `bytes` long: very long pieces.
pub fn long_piece_text(bytes: usize) -> String {
    let unit = "日本語のテキストは単語の間に空白がありません中文也没有空格这是一个测试東京は日本の首都です";
    let piece = unit.repeat(8); // about 1 KB of letters in one piece
    let mut text = String::new();
    while text.len() < bytes {
        text.push_str(&piece);
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_text_repeats_corpus_and_cases_to_the_size() {
        let fixture = r#"{"cases": [{"text": "Hi"}, {"text": "there"}]}"#;
        let text = mixed_text("ab\n", fixture, 40).unwrap();
        assert_eq!(
            &text[..12],
            "ab\nHi\nthere\n",
            "corpus first, then each case on its line"
        );
        assert_eq!(
            text.len(),
            48,
            "four copies of the 12-byte unit reach 40 bytes"
        );
        assert!(
            mixed_text("", r#"{"cases": []}"#, 10).is_err(),
            "nothing to repeat"
        );
        assert!(
            mixed_text("ab", "{", 10).is_err(),
            "a fixture that is not JSON"
        );
        assert!(
            mixed_text("ab", "{}", 10).is_err(),
            "a fixture without cases"
        );
    }

    #[test]
    fn long_piece_text_is_long_lines_of_letters() {
        let text = long_piece_text(5000);
        assert!(text.len() >= 5000);
        let first = text.lines().next().unwrap();
        assert!(first.len() > 1000, "one line is {} bytes", first.len());
        assert!(
            first.chars().all(char::is_alphabetic),
            "no space or punctuation in a piece"
        );
    }
}

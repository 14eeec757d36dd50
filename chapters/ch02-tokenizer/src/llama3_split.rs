//! Llama 3's split, and its two Qwen variants: GPT-2's pattern reworked for a larger
//! vocabulary.
//!
//! ```text
//! (?i:'s|'t|'re|'ve|'m|'ll|'d)       contractions, now in any case ('S, 'LL)
//! [^\r\n\p{L}\p{N}]?\p{L}+           a word, with any one character before it that is not
//!                                    a newline, letter or digit (" word", "(word", "\tword")
//! \p{N}{1,3}                         at most three digits: "12345" is "123" "45"
//!  ?[^\s\p{L}\p{N}]+[\r\n]*          punctuation and symbols, and the newlines after them
//! \s*[\r\n]+                         whitespace up to and including the last newline
//! \s+(?!\S)|\s+                      other whitespace, as in GPT-2
//! ```
//!
//! Qwen2 takes one digit at a time (`\p{N}`), and Qwen3.5 (`qwen35`) also counts combining
//! marks (`\p{M}`) as part of a word. llama.cpp walks code points by hand for all three
//! (`unicode_regex_split_custom_llama3` and its twins in `unicode.cpp`); this does the same.

use crate::unicode_class::{is_letter, is_mark, is_number, is_whitespace};

/// What distinguishes the three members of the family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Llama3Rules {
    /// The longest run of digits in one piece: 3 for Llama 3, 1 for Qwen.
    pub max_digits: usize,
    /// Combining marks belong to words (Qwen3.5).
    pub marks_are_letters: bool,
}

pub const LLAMA3: Llama3Rules = Llama3Rules {
    max_digits: 3,
    marks_are_letters: false,
};
pub const QWEN2: Llama3Rules = Llama3Rules {
    max_digits: 1,
    marks_are_letters: false,
};
pub const QWEN35: Llama3Rules = Llama3Rules {
    max_digits: 1,
    marks_are_letters: true,
};

pub fn split_llama3(text: &str) -> Vec<&str> {
    split_llama3_with(text, LLAMA3)
}

pub fn split_qwen2(text: &str) -> Vec<&str> {
    split_llama3_with(text, QWEN2)
}

pub fn split_qwen35(text: &str) -> Vec<&str> {
    split_llama3_with(text, QWEN35)
}

// ANCHOR: split_llama3
/// The pattern above, one alternative at a time, first match wins.
pub fn split_llama3_with(text: &str, rules: Llama3Rules) -> Vec<&str> {
    let chars: Vec<(usize, char)> = text.char_indices().collect(); // (byte offset, char)
    let n = chars.len();
    let at = |i: usize| chars.get(i).map(|&(_, c)| c); // None past the end of the piece
    let offset = |i: usize| chars.get(i).map_or(text.len(), |&(o, _)| o);
    let word = |c: char| is_letter(c) || (rules.marks_are_letters && is_mark(c));
    let other = |c: char| !is_whitespace(c) && !word(c) && !is_number(c);
    let newline = |c: char| c == '\r' || c == '\n';
    let run = |class: &dyn Fn(char) -> bool, mut p: usize| {
        while at(p).is_some_and(class) {
            p += 1;
        }
        p
    };

    let mut pieces = Vec::new();
    let mut pos = 0;
    while pos < n {
        let c = chars[pos].1;
        let start = pos;
        let lower = |i: usize| at(i).map(|c| c.to_ascii_lowercase());
        let contraction = match (c, lower(pos + 1), lower(pos + 2)) {
            ('\'', Some('s' | 't' | 'm' | 'd'), _) => 2,
            ('\'', Some('r' | 'v'), Some('e')) | ('\'', Some('l'), Some('l')) => 3,
            _ => 0,
        };
        if contraction > 0 {
            pos += contraction;
        } else if !newline(c) && !is_number(c) && (word(c) || at(pos + 1).is_some_and(word)) {
            pos = run(&word, pos + 1); // the optional lead, or the first letter, then the rest
        } else if is_number(c) {
            pos = run(&is_number, pos).min(pos + rules.max_digits);
        } else if (if c == ' ' { at(pos + 1) } else { Some(c) }).is_some_and(other) {
            pos = run(&other, pos + usize::from(c == ' '));
            pos = run(&newline, pos);
        } else {
            let end = run(&is_whitespace, pos);
            let last_newline = (pos..end).rev().find(|&i| at(i).is_some_and(newline));
            pos = match last_newline {
                Some(i) => i + 1,                            // \s*[\r\n]+
                None if end - pos > 1 && end < n => end - 1, // \s+(?!\S)
                None => end.max(pos + 1),                    // \s+
            };
        }
        pieces.push(&text[offset(start)..offset(pos)]);
    }
    pieces
}
// ANCHOR_END: split_llama3

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama3_groups_digits_by_three_from_the_left() {
        assert_eq!(split_llama3("12345"), ["123", "45"]);
        assert_eq!(split_llama3("x 1234567"), ["x", " ", "123", "456", "7"]);
        assert_eq!(split_qwen2("123"), ["1", "2", "3"]);
    }

    #[test]
    fn llama3_contractions_ignore_case_and_words_take_any_lead() {
        assert_eq!(split_llama3("DON'T"), ["DON", "'T"]);
        assert_eq!(split_llama3("(word)"), ["(word", ")"]);
        assert_eq!(split_llama3("a\tb"), ["a", "\tb"]);
    }

    #[test]
    fn llama3_newlines_end_whitespace_and_follow_punctuation() {
        assert_eq!(split_llama3("a  \n\n b"), ["a", "  \n\n", " b"]);
        assert_eq!(split_llama3("x.\n\ny"), ["x", ".\n\n", "y"]);
        assert_eq!(split_llama3("a   b"), ["a", "  ", " b"]);
        assert_eq!(split_llama3("end   "), ["end", "   "]);
    }

    #[test]
    fn qwen35_keeps_marks_with_their_word() {
        // नमस्ते: the virama ् and the vowel sign े are marks, not letters.
        assert_eq!(split_qwen2("नमस्ते"), ["नमस", "्त", "े"]);
        assert_eq!(split_qwen35("नमस्ते"), ["नमस्ते"]);
    }

    #[test]
    fn pieces_concatenate_to_the_input() {
        for text in ["", " ", "héllo wörld\r\n\t 12345", "🦀🦀 rust's\n\n  x"] {
            for rules in [LLAMA3, QWEN2, QWEN35] {
                let pieces = split_llama3_with(text, rules);
                assert_eq!(pieces.concat(), text);
                assert!(pieces.iter().all(|s| !s.is_empty()));
            }
        }
    }
}

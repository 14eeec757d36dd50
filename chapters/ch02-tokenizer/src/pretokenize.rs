//! The pre-tokenizer: cutting text into pieces that BPE then merges one at a time.
//!
//! BPE never merges across a piece boundary, so the split decides which tokens can exist:
//! with GPT-2's split, " dog" and "." are separate pieces, so no token "dog." is ever used.
//!
//! SmolLM2's `tokenizer.json` asks for two splits in sequence (llama.cpp calls this
//! pre-tokenizer type `smollm`):
//! 1. `Digits(individual_digits)`: every `\p{N}` character becomes a piece of its own,
//!    so "2025" can only ever be the four tokens 2, 0, 2, 5;
//! 2. GPT-2's pattern, applied inside each piece from step 1:
//!    `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
//!
//! Both are written here by hand, over `char`s, the way llama.cpp's `unicode.cpp` does it, so
//! there is no regex engine (and no look-ahead support) to depend on.

use crate::unicode_class::{is_letter, is_number, is_whitespace};

// ANCHOR: pretokenizer
/// Which split a vocabulary was trained with (llama.cpp's `tokenizer.ggml.pre`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreTokenizer {
    /// GPT-2's pattern alone (llama.cpp `gpt-2`, `mpt`, `olmo`, `jais`).
    Gpt2,
    /// Each number character alone, then GPT-2's pattern (llama.cpp `smollm`, also
    /// `starcoder`, `refact`, `command-r`).
    DigitsThenGpt2,
    /// Llama 3's pattern: digits by threes, case-insensitive contractions (`llama-bpe`).
    Llama3,
    /// Llama 3's pattern with one digit per piece (`qwen2`).
    Qwen2,
    /// Qwen2's, with combining marks counted as letters (`qwen35`).
    Qwen35,
    /// Six patterns: newlines, words of the cased scripts, punctuation, trailing spaces,
    /// CJK, number runs (`deepseek-llm`).
    DeepSeekLlm,
    /// Five patterns: newlines, words, punctuation, CJK, single digits (`deepseek-coder`).
    DeepSeekCoder,
    /// Punctuation runs, then GPT-2's pattern, then ASCII digits by threes (`falcon`).
    Falcon,
}

/// One pattern of a split: cuts a piece into its matches and the text between them.
pub type Step = for<'t> fn(&'t str) -> Vec<&'t str>;
// ANCHOR_END: pretokenizer

impl PreTokenizer {
    /// The split a GGUF names in `tokenizer.ggml.pre` (the names llama.cpp's
    /// `llama-vocab.cpp` gives each of these patterns), or `None` for a split this chapter
    /// does not implement.
    pub fn from_gguf_name(name: &str) -> Option<PreTokenizer> {
        use PreTokenizer::*;
        match name {
            "gpt2" | "gpt-2" | "mpt" | "olmo" | "jais" | "phi-2" => Some(Gpt2),
            "smollm" | "starcoder" | "refact" | "command-r" => Some(DigitsThenGpt2),
            "llama3" | "llama-v3" | "llama-bpe" => Some(Llama3),
            "qwen2" | "stablelm2" | "deepseek-r1-qwen" | "megrez" => Some(Qwen2),
            "qwen35" => Some(Qwen35),
            "deepseek-llm" => Some(DeepSeekLlm),
            "deepseek-coder" => Some(DeepSeekCoder),
            "falcon" => Some(Falcon),
            _ => None,
        }
    }

    /// The names [`PreTokenizer::from_gguf_name`] knows, for error messages.
    pub const GGUF_NAMES: &'static str = "gpt-2, mpt, olmo, jais, phi-2, smollm, starcoder, \
        refact, command-r, llama-bpe (llama3, llama-v3), qwen2 (stablelm2, \
        deepseek-r1-qwen, megrez), qwen35, deepseek-llm, deepseek-coder, falcon";

    // ANCHOR: pretokenizer_steps
    /// The patterns, in the order they run: each cuts every piece the ones before it made.
    pub fn steps(&self) -> &'static [Step] {
        use crate::llama3_split::{split_llama3, split_qwen2, split_qwen35};
        use crate::regex_pieces::{self as rx, split_matches};
        match self {
            PreTokenizer::Gpt2 => &[split_gpt2],
            PreTokenizer::DigitsThenGpt2 => &[split_digits, split_gpt2],
            PreTokenizer::Llama3 => &[split_llama3],
            PreTokenizer::Qwen2 => &[split_qwen2],
            PreTokenizer::Qwen35 => &[split_qwen35],
            PreTokenizer::DeepSeekLlm => &[
                |t| split_matches(t, rx::newline),
                |t| split_matches(t, rx::deepseek_word),
                |t| split_matches(t, rx::deepseek_punctuation),
                |t| split_matches(t, rx::trailing_space),
                |t| split_matches(t, rx::cjk),
                |t| split_matches(t, rx::numbers),
            ],
            PreTokenizer::DeepSeekCoder => &[
                |t| split_matches(t, rx::newline),
                |t| split_matches(t, rx::space_letters),
                |t| split_matches(t, rx::space_punctuation),
                |t| split_matches(t, rx::cjk),
                |t| split_matches(t, rx::one_number),
            ],
            PreTokenizer::Falcon => &[
                |t| split_matches(t, rx::falcon_punctuation),
                split_gpt2,
                |t| split_matches(t, rx::three_digits),
            ],
        }
    }

    /// Cuts `text` into pieces; concatenating them gives `text` back.
    pub fn split<'t>(&self, text: &'t str) -> Vec<&'t str> {
        let mut pieces = vec![text];
        for step in self.steps() {
            pieces = pieces.into_iter().flat_map(|p| step(p)).collect();
        }
        pieces.retain(|p| !p.is_empty());
        pieces
    }

    /// Llama 3's tokenizer looks a whole piece up before merging it: a piece that is a
    /// token is that token, even where the merges would build it differently (llama.cpp's
    /// `ignore_merges`).
    pub fn ignores_merges(&self) -> bool {
        *self == PreTokenizer::Llama3
    }
}
// ANCHOR_END: pretokenizer_steps

// ANCHOR: split_digits
/// Step 1: every number character (`\p{N}`) becomes its own piece; the text between them
/// stays in one piece. `"in 2025!"` -> `["in ", "2", "0", "2", "5", "!"]`.
pub fn split_digits(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0; // byte offset where the current non-number run began
    for (at, c) in text.char_indices() {
        if is_number(c) {
            if start < at {
                pieces.push(&text[start..at]);
            }
            let end = at + c.len_utf8();
            pieces.push(&text[at..end]);
            start = end;
        }
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}
// ANCHOR_END: split_digits

// ANCHOR: split_gpt2
/// Step 2: GPT-2's pattern, one alternative at a time, first match wins:
///
/// ```text
/// 's|'t|'re|'ve|'m|'ll|'d     English contractions
///  ?\p{L}+                    a word, with the space before it
///  ?\p{N}+                    a number, with the space before it
///  ?[^\s\p{L}\p{N}]+          punctuation and symbols, with the space before them
/// \s+(?!\S)                   a run of spaces, minus the last one if a word follows
/// \s+                         whatever whitespace is left
/// ```
pub fn split_gpt2(text: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = text.char_indices().collect(); // (byte offset, char)
    let n = chars.len();
    let at = |i: usize| chars.get(i).map(|&(_, c)| c); // None past the end of the piece
    let offset = |i: usize| chars.get(i).map_or(text.len(), |&(o, _)| o);
    let is_other = |c: char| !is_whitespace(c) && !is_letter(c) && !is_number(c);

    let mut pieces = Vec::new();
    let mut pos = 0;
    while pos < n {
        let c = chars[pos].1;
        let start = pos;

        // 's 't 'm 'd, then 're 've 'll (lowercase only, as in GPT-2)
        let contraction = match (c, at(pos + 1), at(pos + 2)) {
            ('\'', Some('s' | 't' | 'm' | 'd'), _) => 2,
            ('\'', Some('r'), Some('e')) | ('\'', Some('v'), Some('e')) => 3,
            ('\'', Some('l'), Some('l')) => 3,
            _ => 0,
        };
        if contraction > 0 {
            pos += contraction;
        } else {
            // The class of the first char after an optional leading space.
            let lead = if c == ' ' { at(pos + 1) } else { Some(c) };
            let run_of = |class: &dyn Fn(char) -> bool, mut p: usize| {
                while at(p).is_some_and(class) {
                    p += 1;
                }
                p
            };
            let skip_space = usize::from(c == ' ');
            match lead {
                Some(l) if is_letter(l) => pos = run_of(&is_letter, pos + skip_space),
                Some(l) if is_number(l) => pos = run_of(&is_number, pos + skip_space),
                Some(l) if is_other(l) => pos = run_of(&is_other, pos + skip_space),
                _ => {
                    let spaces = run_of(&is_whitespace, pos) - pos;
                    pos += if spaces > 1 && pos + spaces < n {
                        spaces - 1 // leave the last space to start the next word
                    } else {
                        spaces.max(1)
                    };
                }
            }
        }
        pieces.push(&text[offset(start)..offset(pos)]);
    }
    pieces
}
// ANCHOR_END: split_gpt2

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_are_isolated() {
        assert_eq!(split_digits("in 2025!"), ["in ", "2", "0", "2", "5", "!"]);
        assert_eq!(split_digits("٣Ⅻ½x"), ["٣", "Ⅻ", "½", "x"]);
        assert_eq!(split_digits(""), Vec::<&str>::new());
        assert_eq!(split_digits("abc"), ["abc"]);
    }

    #[test]
    fn gpt2_words_keep_their_leading_space() {
        assert_eq!(
            split_gpt2("Hello world! 123"),
            ["Hello", " world", "!", " 123"]
        );
        assert_eq!(split_gpt2("don't we'll"), ["don", "'t", " we", "'ll"]);
        assert_eq!(
            split_gpt2("DON'T"),
            ["DON", "'", "T"],
            "contractions are lowercase only"
        );
        assert_eq!(split_gpt2("a+=b;"), ["a", "+=", "b", ";"]);
    }

    #[test]
    fn gpt2_space_runs_give_their_last_space_to_the_next_word() {
        assert_eq!(
            split_gpt2("  multiple   spaces"),
            [" ", " multiple", "  ", " spaces"]
        );
        assert_eq!(
            split_gpt2("end   "),
            ["end", "   "],
            "trailing run stays whole"
        );
        assert_eq!(split_gpt2("a\n\nb"), ["a", "\n", "\n", "b"]);
        assert_eq!(split_gpt2("x \t!"), ["x", " ", "\t", "!"]);
    }

    #[test]
    fn smollm_splits_digits_before_gpt2() {
        let p = PreTokenizer::DigitsThenGpt2;
        assert_eq!(
            p.split("Hello world! 123"),
            ["Hello", " world", "!", " ", "1", "2", "3"]
        );
        assert_eq!(
            p.split("a  1"),
            ["a", "  ", "1"],
            "the space run ends its piece"
        );
    }

    #[test]
    fn deepseek_llm_leaves_arabic_whole_and_sweeps_devanagari_into_runs() {
        let p = PreTokenizer::DeepSeekLlm;
        assert_eq!(p.split("مرحبا بك"), ["مرحبا بك"]);
        assert_eq!(p.split("नमस्ते दुनिया"), ["नमस्ते", " ", "दुनिया"]);
        assert_eq!(p.split("Hi 42\n"), ["Hi", " ", "42", "\n"]);
    }

    #[test]
    fn gguf_names() {
        assert_eq!(
            PreTokenizer::from_gguf_name("smollm"),
            Some(PreTokenizer::DigitsThenGpt2)
        );
        assert_eq!(
            PreTokenizer::from_gguf_name("gpt2"),
            Some(PreTokenizer::Gpt2)
        );
        assert_eq!(
            PreTokenizer::from_gguf_name("llama-bpe"),
            Some(PreTokenizer::Llama3)
        );
        assert_eq!(PreTokenizer::from_gguf_name("bloom"), None);
    }

    const ALL: [PreTokenizer; 8] = [
        PreTokenizer::Gpt2,
        PreTokenizer::DigitsThenGpt2,
        PreTokenizer::Llama3,
        PreTokenizer::Qwen2,
        PreTokenizer::Qwen35,
        PreTokenizer::DeepSeekLlm,
        PreTokenizer::DeepSeekCoder,
        PreTokenizer::Falcon,
    ];

    #[test]
    fn pieces_concatenate_to_the_input() {
        for text in [
            "",
            " ",
            "héllo wörld",
            "日本語のテキスト",
            "🦀🦀 rust's",
            "tab\tnew\nline  \n",
        ] {
            for p in ALL {
                assert_eq!(p.split(text).concat(), text);
                assert!(p.split(text).iter().all(|s| !s.is_empty()));
            }
        }
    }
}

//! The splits llama.cpp has no hand-written walk for: DeepSeek's and Falcon's.
//!
//! These vocabularies list several patterns, applied one after the other: each pattern cuts
//! every piece the previous ones left into its matches *and the text between them* (nothing
//! is dropped). llama.cpp runs them through C++'s `std::regex`, which knows nothing of
//! Unicode categories, after two rewrites of its own (`unicode_regex_split` in
//! `unicode.cpp`):
//!
//! - a pattern that names a category (`\p{L}`) runs on a copy of the text where every
//!   non-ASCII character is replaced by one byte standing for its category (all letters by
//!   0xD2, all numbers by 0xD1 ...), and `\p{L}` becomes `[\xD2A-Za-z]`;
//! - in either case, non-ASCII whitespace becomes U+000B, since `std::regex`'s `\s` only
//!   knows ASCII. So `\s` is still `is_whitespace`, but U+3000 (the ideographic space) never
//!   matches a character class that lists it.
//!
//! Each pattern here is one short matcher: given the characters and a position, how long is
//! the match that starts there (0: none). [`split_matches`] turns a matcher into a split,
//! searching left to right as `std::regex_iterator` does.

use std::sync::LazyLock;

use crate::unicode_class::{is_letter, is_number, is_punctuation, is_whitespace};

/// How many characters of `chars` the pattern matches from `at` (0 if it does not).
pub type Matcher = fn(chars: &[char], at: usize) -> usize;

// ANCHOR: split_matches
/// Cuts `text` into the matches of `matcher`, leftmost first, and the runs between them.
pub fn split_matches(text: &str, matcher: Matcher) -> Vec<&str> {
    let (offsets, chars): (Vec<usize>, Vec<char>) = text.char_indices().unzip();
    let offset = |i: usize| offsets.get(i).copied().unwrap_or(text.len());
    let mut pieces = Vec::new();
    let (mut gap_start, mut pos) = (0, 0);
    while pos < chars.len() {
        let len = matcher(&chars, pos);
        if len == 0 {
            pos += 1; // no match here: this character joins the gap
            continue;
        }
        if gap_start < pos {
            pieces.push(&text[offset(gap_start)..offset(pos)]);
        }
        pieces.push(&text[offset(pos)..offset(pos + len)]);
        pos += len;
        gap_start = pos;
    }
    if gap_start < chars.len() {
        pieces.push(&text[offset(gap_start)..]);
    }
    pieces
}
// ANCHOR_END: split_matches

/// How `std::regex` sees a character in a pattern without categories: non-ASCII whitespace
/// turned into U+000B, everything else itself.
fn as_std_regex_sees(c: char) -> char {
    if !c.is_ascii() && is_whitespace(c) {
        '\u{0B}'
    } else {
        c
    }
}

/// The length of the run of characters in `class` from `at`.
fn run(chars: &[char], at: usize, class: impl Fn(char) -> bool) -> usize {
    chars[at..].iter().take_while(|&&c| class(c)).count()
}

/// `\s?X+`: one optional whitespace character, then a run of `class`.
fn space_then_run(chars: &[char], at: usize, class: impl Fn(char) -> bool) -> usize {
    if is_whitespace(chars[at]) && at + 1 < chars.len() {
        let after = run(chars, at + 1, &class);
        if after > 0 {
            return 1 + after;
        }
    }
    run(chars, at, class)
}

// ANCHOR: char_class
/// A character class as a `tokenizer.json` writes one, between its brackets: single
/// characters and inclusive ranges `a-z`, compared by code point as `std::regex` does.
pub struct CharClass {
    ranges: Vec<(char, char)>,
}

impl CharClass {
    pub fn parse(spec: &str) -> CharClass {
        let chars: Vec<char> = spec.chars().collect();
        let mut ranges = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            if i + 2 < chars.len() && chars[i + 1] == '-' {
                ranges.push((chars[i], chars[i + 2]));
                i += 3;
            } else {
                ranges.push((chars[i], chars[i]));
                i += 1;
            }
        }
        CharClass { ranges }
    }

    /// Whether `std::regex` would find `c` in the class (see `as_std_regex_sees`).
    pub fn contains(&self, c: char) -> bool {
        let c = as_std_regex_sees(c);
        self.ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi)
    }
}
// ANCHOR_END: char_class

/// DeepSeek-LLM's letters: the cased scripts (Latin, Greek, Cyrillic, Armenian, Georgian,
/// Cherokee, Glagolitic, Coptic, Deseret ...) and not, for instance, Arabic or Devanagari.
static DEEPSEEK_LETTERS: LazyLock<CharClass> = LazyLock::new(|| {
    CharClass::parse(
        "A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃",
    )
});
/// DeepSeek-LLM's punctuation: ASCII punctuation and symbols, their full-width forms,
/// curly quotes, and U+3000..U+3002 (ideographic space, comma, full stop).
static DEEPSEEK_PUNCTUATION: LazyLock<CharClass> =
    LazyLock::new(|| CharClass::parse("!-/:-~！-／：-～‘-‟\u{3000}-。"));
/// CJK ideographs (U+4E00..U+9FA5), everything from U+0800 to U+4E00, Hangul syllables.
static CJK: LazyLock<CharClass> = LazyLock::new(|| CharClass::parse("一-龥ࠀ-一가-\u{D7FF}"));

// ANCHOR: deepseek
/// `[\r\n]`: each newline character alone.
pub fn newline(chars: &[char], at: usize) -> usize {
    usize::from(matches!(chars[at], '\r' | '\n'))
}

/// `\s+$`: the whitespace that ends the piece.
pub fn trailing_space(chars: &[char], at: usize) -> usize {
    let len = run(chars, at, is_whitespace);
    if at + len == chars.len() { len } else { 0 }
}

/// `[一-龥ࠀ-一가-퟿]+`: CJK ideographs, Hangul syllables, and U+0800..U+4E00.
pub fn cjk(chars: &[char], at: usize) -> usize {
    run(chars, at, |c| CJK.contains(c))
}

/// `\p{N}+` and `\p{N}`.
pub fn numbers(chars: &[char], at: usize) -> usize {
    run(chars, at, is_number)
}
pub fn one_number(chars: &[char], at: usize) -> usize {
    usize::from(is_number(chars[at]))
}

/// DeepSeek-LLM's `\s?[A-Za-zµÀ-ÖØ-ö...]+`: a word, in the cased scripts its class lists
/// (Latin, Greek, Cyrillic, Armenian, Georgian, Cherokee, Glagolitic, Coptic ...).
pub fn deepseek_word(chars: &[char], at: usize) -> usize {
    space_then_run(chars, at, |c| DEEPSEEK_LETTERS.contains(c))
}

/// DeepSeek-LLM's `\s?[!-/:-~！-／：-～‘-‟　-。]+`: ASCII punctuation and symbols, their
/// full-width forms, curly quotes, and the ideographic space, comma and full stop.
pub fn deepseek_punctuation(chars: &[char], at: usize) -> usize {
    space_then_run(chars, at, |c| DEEPSEEK_PUNCTUATION.contains(c))
}

/// DeepSeek-Coder's `\s?\p{L}+` and `\s?\p{P}+`.
pub fn space_letters(chars: &[char], at: usize) -> usize {
    space_then_run(chars, at, is_letter)
}
pub fn space_punctuation(chars: &[char], at: usize) -> usize {
    space_then_run(chars, at, is_punctuation)
}
// ANCHOR_END: deepseek

// ANCHOR: falcon
/// Falcon's `[\p{P}\$\+<=>\^~\|`]+`: punctuation, and the nine ASCII symbols.
pub fn falcon_punctuation(chars: &[char], at: usize) -> usize {
    run(chars, at, |c| is_punctuation(c) || "$+<=>^~|`".contains(c))
}

/// Falcon's `[0-9][0-9][0-9]`: three ASCII digits.
pub fn three_digits(chars: &[char], at: usize) -> usize {
    let digits = run(chars, at, |c| c.is_ascii_digit());
    if digits >= 3 { 3 } else { 0 }
}
// ANCHOR_END: falcon

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &str, m: Matcher) -> Vec<&str> {
        split_matches(text, m)
    }

    #[test]
    fn matches_and_the_gaps_between_them_are_pieces() {
        assert_eq!(split("a\r\nb", newline), ["a", "\r", "\n", "b"]);
        assert_eq!(split("12345x", three_digits), ["123", "45x"]);
        assert_eq!(split("ab  ", trailing_space), ["ab", "  "]);
        assert_eq!(split("a  b", trailing_space), ["a  b"]);
        assert_eq!(split("", newline), Vec::<&str>::new());
    }

    #[test]
    fn deepseek_classes() {
        assert_eq!(split("hi Ωmega!", deepseek_word), ["hi", " Ωmega", "!"]);
        assert_eq!(split("1, 2", deepseek_punctuation), ["1", ",", " 2"]);
        // `:-~` spans the ASCII letters too: words must be cut out before this pattern runs.
        assert_eq!(split("x, y", deepseek_punctuation), ["x,", " y"]);
        assert!(DEEPSEEK_LETTERS.contains('K') && !DEEPSEEK_LETTERS.contains('ب'));
        // U+3000 is listed, but std::regex sees the ideographic space as U+000B.
        assert!(!DEEPSEEK_PUNCTUATION.contains('\u{3000}') && DEEPSEEK_PUNCTUATION.contains('。'));
        assert_eq!(split("日本語abc", cjk), ["日本語", "abc"]);
    }

    #[test]
    fn falcon_punctuation_counts_nine_ascii_symbols() {
        assert_eq!(split("a+=b", falcon_punctuation), ["a", "+=", "b"]);
        assert_eq!(
            split("x€y", falcon_punctuation),
            ["x€y"],
            "€ is a symbol, not P"
        );
    }
}

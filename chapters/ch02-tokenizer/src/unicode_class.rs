//! The three character classes the pre-tokenizer needs: `\p{L}`, `\p{N}` and `\s`.
//!
//! llama.cpp does not use a regex engine for the GPT-2 split; it walks code points and asks a
//! table generated from Python's `regex` module for their flags. So these three functions must
//! answer exactly what that module answers:
//!
//! | regex   | meaning                                        | Rust                             |
//! |---------|------------------------------------------------|----------------------------------|
//! | `\p{L}` | general category Lu, Ll, Lt, Lm or Lo          | none in std: a category table    |
//! | `\p{N}` | general category Nd, Nl or No                  | `char::is_numeric` (exactly)     |
//! | `\s`    | the White_Space property (25 code points)      | `char::is_whitespace` (exactly)  |
//!
//! `char::is_alphabetic` is *not* `\p{L}`: it is the Alphabetic property, which adds some
//! 1,700 characters: letter numbers such as `Ⅻ` (Nl), combining marks (`ा`, the Devanagari
//! vowel sign AA, is Mc) and circled letters such as `Ⓐ` (So). Using it would glue a Hindi
//! vowel sign to its word, where llama.cpp starts a new "punctuation and symbols" piece at
//! it. So `is_letter` looks the general category up in the
//! `unicode-general-category` crate. The tests below pin both claims down.

use unicode_general_category::{GeneralCategory, get_general_category};

// ANCHOR: classes
/// `\p{L}`: a letter of any script.
pub fn is_letter(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphabetic();
    }
    matches!(
        get_general_category(c),
        GeneralCategory::UppercaseLetter
            | GeneralCategory::LowercaseLetter
            | GeneralCategory::TitlecaseLetter
            | GeneralCategory::ModifierLetter
            | GeneralCategory::OtherLetter
    )
}

/// `\p{N}`: a digit, letter number or other number (`7`, `٣`, `Ⅻ`, `½`).
pub fn is_number(c: char) -> bool {
    c.is_numeric()
}

/// `\s`: the Unicode White_Space property.
pub fn is_whitespace(c: char) -> bool {
    c.is_whitespace()
}
// ANCHOR_END: classes

// ANCHOR: more_classes
/// `\p{M}`: a combining mark (Mn, Mc or Me), such as the Devanagari vowel sign `ा`.
/// Qwen3.5's split keeps marks with the letters before them.
pub fn is_mark(c: char) -> bool {
    !c.is_ascii()
        && matches!(
            get_general_category(c),
            GeneralCategory::NonspacingMark
                | GeneralCategory::SpacingMark
                | GeneralCategory::EnclosingMark
        )
}

/// `\p{P}`: punctuation (Pc, Pd, Ps, Pe, Pi, Pf, Po). In ASCII that is `!"#%&'()*,-./:;?@[\]_{}`;
/// `$+<=>^`|~` are symbols (`\p{S}`), not punctuation.
pub fn is_punctuation(c: char) -> bool {
    matches!(
        get_general_category(c),
        GeneralCategory::ConnectorPunctuation
            | GeneralCategory::DashPunctuation
            | GeneralCategory::OpenPunctuation
            | GeneralCategory::ClosePunctuation
            | GeneralCategory::InitialPunctuation
            | GeneralCategory::FinalPunctuation
            | GeneralCategory::OtherPunctuation
    )
}
// ANCHOR_END: more_classes

#[cfg(test)]
mod tests {
    use super::*;

    fn all_chars() -> impl Iterator<Item = char> {
        (0..=0x10FFFFu32).filter_map(char::from_u32)
    }

    fn category_is_number(c: char) -> bool {
        matches!(
            get_general_category(c),
            GeneralCategory::DecimalNumber
                | GeneralCategory::LetterNumber
                | GeneralCategory::OtherNumber
        )
    }

    #[test]
    fn is_numeric_is_exactly_the_n_categories() {
        // std and the crate may follow different Unicode versions: compare only where the
        // crate knows the character.
        let differ: Vec<char> = all_chars()
            .filter(|&c| get_general_category(c) != GeneralCategory::Unassigned)
            .filter(|&c| c.is_numeric() != category_is_number(c))
            .collect();
        assert!(
            differ.is_empty(),
            "char::is_numeric disagrees with \\p{{N}} on {differ:?}"
        );
    }

    #[test]
    fn is_alphabetic_is_not_the_l_categories() {
        // (Skipping chars that std's newer Unicode tables know and the crate does not.)
        let extra: Vec<char> = all_chars()
            .filter(|&c| get_general_category(c) != GeneralCategory::Unassigned)
            .filter(|&c| c.is_alphabetic() && !is_letter(c))
            .collect();
        assert!(
            extra.contains(&'\u{093E}'),
            "the Devanagari vowel sign AA is Alphabetic, not \\p{{L}}"
        );
        assert!(
            extra.contains(&'Ⅻ'),
            "the Roman numeral twelve is Alphabetic, not \\p{{L}}"
        );
        assert!(
            extra.contains(&'Ⓐ'),
            "the circled A is Alphabetic, not \\p{{L}}"
        );
        assert!(extra.len() > 1000, "only {} chars differ", extra.len());
        // The other direction is (nearly) empty: every \p{L} char is Alphabetic.
        let missing = all_chars()
            .filter(|&c| is_letter(c) && !c.is_alphabetic())
            .count();
        assert!(missing < 10, "{missing} letters are not Alphabetic");
    }

    #[test]
    fn whitespace_is_the_25_white_space_code_points() {
        // The list llama.cpp's table generator gets from Python's `regex` module for `\s`.
        let expected: Vec<u32> = [
            0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003,
            0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F,
            0x3000,
        ]
        .to_vec();
        let got: Vec<u32> = all_chars()
            .filter(|&c| is_whitespace(c))
            .map(|c| c as u32)
            .collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn ascii_fast_path_agrees_with_the_table() {
        for c in (0u8..128).map(char::from) {
            let by_table = matches!(
                get_general_category(c),
                GeneralCategory::UppercaseLetter | GeneralCategory::LowercaseLetter
            );
            assert_eq!(is_letter(c), by_table, "{c:?}");
        }
    }

    #[test]
    fn ascii_punctuation_is_the_23_llama_cpp_lists() {
        // llama.cpp's category collapse spells ASCII \p{P} as `!-#%-*,-/:-;?-@\[-\]_\{\}`.
        let p: String = (0u8..128)
            .map(char::from)
            .filter(|&c| is_punctuation(c))
            .collect();
        assert_eq!(p, "!\"#%&'()*,-./:;?@[\\]_{}");
        assert!(is_mark('\u{093E}') && !is_mark('a') && !is_letter('\u{093E}'));
    }

    /// Maximal runs of `text` whose characters all do, or all do not, satisfy `class`.
    fn runs(text: &str, class: impl Fn(char) -> bool) -> Vec<&str> {
        let mut out = Vec::new();
        let mut start = 0;
        let mut prev: Option<bool> = None;
        for (i, c) in text.char_indices() {
            if prev.is_some_and(|p| p != class(c)) {
                out.push(&text[start..i]);
                start = i;
            }
            prev = Some(class(c));
        }
        if start < text.len() {
            out.push(&text[start..]);
        }
        out
    }

    /// The book's Devanagari example, checked: \p{L} cuts नमस्ते at both combining marks,
    /// `is_alphabetic` (which counts the vowel sign े but not the virama ्) at the virama only.
    #[test]
    fn namaste_splits_differently_under_the_two_definitions() {
        assert_eq!(runs("नमस्ते", is_letter), vec!["नमस", "्", "त", "े"]);
        assert_eq!(runs("नमस्ते", char::is_alphabetic), vec!["नमस", "्", "ते"]);
    }
}

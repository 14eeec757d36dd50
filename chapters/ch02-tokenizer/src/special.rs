//! Special tokens in text: cutting `<|im_start|>user` into the token `<|im_start|>` and the
//! text `user` *before* any pre-tokenizing or merging happens.
//!
//! The order matches llama.cpp's `tokenizer_st_partition`: special tokens are tried longest
//! first, and each one is cut out of every text fragment that is left. So when two special
//! tokens overlap in the text, the longer one wins even if the shorter one starts earlier.

use crate::vocab::TokenId;

/// A special token as the partitioner sees it.
#[derive(Clone, Debug)]
pub struct SpecialToken {
    pub id: TokenId,
    pub text: String,
    /// Only parsed when the caller asks for special tokens (control tokens); otherwise
    /// always parsed (user-defined added tokens).
    pub needs_parse_special: bool,
    /// Eat the whitespace just before / after the token (a flag of some added tokens).
    pub lstrip: bool,
    pub rstrip: bool,
}

/// A piece of the input: text still to be tokenized, or a token already found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fragment<'t> {
    Text(&'t str),
    Token(TokenId),
}

/// C's `isspace`, which llama.cpp uses for lstrip/rstrip.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

// ANCHOR: partition
/// Cuts the special tokens out of `text`. `specials` must be sorted longest first.
pub fn partition<'t>(
    text: &'t str,
    specials: &[SpecialToken],
    parse_special: bool,
) -> Vec<Fragment<'t>> {
    let mut fragments = vec![Fragment::Text(text)];
    if text.is_empty() {
        fragments.clear();
    }
    for special in specials {
        if special.needs_parse_special && !parse_special {
            continue; // a control token in plain-text mode is just text
        }
        let mut next = Vec::with_capacity(fragments.len());
        for fragment in fragments {
            let Fragment::Text(mut rest) = fragment else {
                next.push(fragment);
                continue;
            };
            while let Some(at) = rest.find(&special.text) {
                let mut left = &rest[..at];
                if special.lstrip {
                    left = left.trim_end_matches(|c: char| c.is_ascii() && is_c_space(c as u8));
                }
                if !left.is_empty() {
                    next.push(Fragment::Text(left));
                }
                next.push(Fragment::Token(special.id));
                rest = &rest[at + special.text.len()..];
                if special.rstrip {
                    rest = rest.trim_start_matches(|c: char| c.is_ascii() && is_c_space(c as u8));
                }
            }
            if !rest.is_empty() {
                next.push(Fragment::Text(rest));
            }
        }
        fragments = next;
    }
    fragments
}
// ANCHOR_END: partition

#[cfg(test)]
mod tests {
    use super::*;
    use Fragment::{Text, Token};

    fn special(id: TokenId, text: &str, needs_parse_special: bool) -> SpecialToken {
        SpecialToken {
            id,
            text: text.into(),
            needs_parse_special,
            lstrip: false,
            rstrip: false,
        }
    }

    #[test]
    fn control_tokens_only_when_asked() {
        let s = [special(1, "<|im_start|>", true)];
        let text = "<|im_start|>user\nhi";
        assert_eq!(partition(text, &s, true), [Token(1), Text("user\nhi")]);
        assert_eq!(partition(text, &s, false), [Text(text)]);
    }

    #[test]
    fn user_defined_tokens_always() {
        let s = [special(7, "<tool>", false)];
        assert_eq!(
            partition("a<tool>b<tool>", &s, false),
            [Text("a"), Token(7), Text("b"), Token(7)]
        );
    }

    #[test]
    fn longest_first_even_when_a_shorter_one_starts_earlier() {
        // "ab" starts first, but "bcd" is longer and is cut out first.
        let s = [special(2, "bcd", true), special(1, "ab", true)];
        assert_eq!(partition("abcd", &s, true), [Text("a"), Token(2)]);
    }

    #[test]
    fn strip_flags_eat_neighbouring_whitespace() {
        let mut s = special(3, "<mask>", true);
        s.lstrip = true;
        s.rstrip = true;
        assert_eq!(
            partition("a  <mask>\n b", &[s], true),
            [Text("a"), Token(3), Text("b")]
        );
    }

    #[test]
    fn empty_text_has_no_fragments() {
        assert!(partition("", &[special(1, "<s>", true)], true).is_empty());
    }
}

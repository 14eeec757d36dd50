//! Chapter 2 exercises. Each function below is a small piece of the tokenizer; fill in the
//! body, then run `cargo xtask exercises ch02` (or
//! `cargo test -p ch02-tokenizer --features exercises --test exercises`).
#![allow(unused_variables)]

use std::collections::HashMap;

/// Exercise 1: the byte to unicode table.
///
/// Return GPT-2's stand-in character for every byte, so that `table[b]` is how byte `b` is
/// written in a byte-level vocabulary. Bytes `!`..=`~`, 0xA1..=0xAC and 0xAE..=0xFF stand
/// for themselves (their Latin-1 character). The 68 others get U+0100, U+0101, ... in
/// increasing byte order, so byte 0 is `Ā` (U+0100) and a space (0x20) is `Ġ` (U+0120).
///
/// Hint: walk the bytes 0..=255 once, with a counter that starts at 0x100 and goes up by one
/// each time you hand out a stand-in. `char::from(b)` gives the Latin-1 character of a byte,
/// `char::from_u32(n)` any other.
pub fn bytes_to_unicode() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 0x100;
    for b in 0..=255u8 {
        table[b as usize] = if matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF) {
            char::from(b)
        } else {
            next += 1;
            char::from_u32(next - 1).unwrap()
        };
    }
    table
}

/// Exercise 2: one BPE merge step.
///
/// `pieces` is a word in the middle of being encoded, e.g. `["h", "e", "l", "l", "o"]`, and
/// `ranks` the merge list: `ranks[("l", "l")] = 0` means "l l" is the first merge learned.
/// Find the adjacent pair with the lowest rank (the leftmost one if the same pair occurs
/// twice), fuse it into one string, and return the new list. Return `None` when no adjacent
/// pair is in `ranks`: the word is fully merged.
///
/// Hint: one pass over `pieces.windows(2)` finds the best position; keep it only when its rank
/// is strictly lower than the best so far, so the leftmost wins ties.
pub fn merge_step(
    pieces: &[String],
    ranks: &HashMap<(String, String), u32>,
) -> Option<Vec<String>> {
    let mut best: Option<(u32, usize)> = None;
    for (i, w) in pieces.windows(2).enumerate() {
        if let Some(&rank) = ranks.get(&(w[0].clone(), w[1].clone()))
            && best.is_none_or(|(b, _)| rank < b)
        {
            best = Some((rank, i));
        }
    }
    let (_, i) = best?;
    let mut out = pieces.to_vec();
    let right = out.remove(i + 1);
    out[i].push_str(&right);
    Some(out)
}

/// Exercise 3: the digit pre-split.
///
/// SmolLM2 splits every number character into a piece of its own before GPT-2's split runs:
/// `"in 2025!"` becomes `["in ", "2", "0", "2", "5", "!"]`. Text between numbers stays in one
/// piece, and no piece is empty. "Number character" means Unicode's `\p{N}`, which is what
/// `char::is_numeric` tests, so `"٣"` (Arabic-Indic three) and `"½"` count too.
///
/// Hint: `text.char_indices()` gives each char with its byte offset; remember where the
/// current run of non-numbers started, and slice `text` (no copying: return `&str`s).
pub fn split_digits(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (at, c) in text.char_indices() {
        if c.is_numeric() {
            if start < at {
                out.push(&text[start..at]);
            }
            start = at + c.len_utf8();
            out.push(&text[at..start]);
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// Exercise 4: an unfinished UTF-8 character.
///
/// A stream decoder must not print half a character. Given the bytes decoded so far, return
/// how many bytes at the end begin a character whose remaining bytes have not arrived yet
/// (0 to 3). For `"a🦀"` cut after the first two bytes of the crab (F0 9F), the answer is 2;
/// for complete text it is 0. Only the last character can be unfinished. Assume the bytes
/// are a prefix of valid UTF-8.
///
/// Hint: a UTF-8 character starts with 0xxxxxxx (1 byte), 110xxxxx (2), 1110xxxx (3) or
/// 11110xxx (4); continuation bytes are 10xxxxxx. Look back at most 3 bytes for the last
/// start byte and compare the length it announces with the bytes that follow it.
pub fn incomplete_tail_len(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(4) {
        let b = bytes[bytes.len() - back];
        if b & 0b1100_0000 == 0b1000_0000 {
            continue; // a continuation byte: the start is further back
        }
        let announced = match b {
            0x00..=0x7F => 1,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            _ => 4,
        };
        return if back < announced { back } else { 0 };
    }
    0
}

/// Exercise 5: one SentencePiece merge.
///
/// SentencePiece has no merge list: it fuses the adjacent pair whose concatenation is the
/// vocabulary piece with the *highest* score (`scores` maps every piece to its score; a
/// concatenation that is not in `scores` cannot be fused). On a tie the leftmost pair wins.
/// Return the new list, or `None` when no adjacent pair can be fused. For
/// `["▁", "h", "e", "l", "l", "o"]` with `scores["ll"] = -2.0` the best (if nothing scores
/// higher) gives `["▁", "h", "e", "ll", "o"]`.
///
/// Hint: like exercise 2, but look up `left + right` in `scores`, and keep a candidate only
/// when its score is strictly greater than the best so far.
pub fn spm_merge_step(pieces: &[String], scores: &HashMap<String, f32>) -> Option<Vec<String>> {
    let mut best: Option<(f32, usize)> = None;
    for (i, w) in pieces.windows(2).enumerate() {
        if let Some(&score) = scores.get(&format!("{}{}", w[0], w[1]))
            && best.is_none_or(|(b, _)| score > b)
        {
            best = Some((score, i));
        }
    }
    let (_, i) = best?;
    let mut out = pieces.to_vec();
    let right = out.remove(i + 1);
    out[i].push_str(&right);
    Some(out)
}

/// Exercise 6: Llama 3's digit groups.
///
/// Llama 3's split writes numbers as `\p{N}{1,3}`: a run of number characters is cut into
/// pieces of at most three, counted from the left, so `"12345"` is `["123", "45"]` (not
/// `["12", "345"]`, the way we group thousands). Return the pieces of `text` where every run
/// of number characters (`char::is_numeric`) is cut that way and the text between runs stays
/// one piece: `"pi 3.14159"` gives `["pi ", "3", ".", "141", "59"]`. No piece is empty.
///
/// Hint: like exercise 3, but inside a run of numbers, close the piece when it reaches three
/// characters or when the run ends. Count characters, not bytes (`"٣٤٥"` is three).
pub fn split_digit_groups(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0; // where the current piece began
    let mut digits = 0; // number characters in the current piece, if it is a number group
    for (at, c) in text.char_indices() {
        let is_digit = c.is_numeric();
        // A piece ends before `c` when `c` changes the kind, or a group already holds three.
        let ends = start < at && (is_digit != (digits > 0) || digits == 3);
        if ends {
            out.push(&text[start..at]);
            start = at;
            digits = 0;
        }
        if is_digit {
            digits += 1;
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

//! Exercises for chapter 12. Fill in each `todo!()`, then run `cargo xtask exercises ch12`.
#![allow(unused_variables, unused_imports)]

use crate::matcher::{ArrAt, MAX_DIGITS, Num, NumPart};

/// Exercise 1: the number frame.
///
/// Return the number after byte `b`, or `None` when `b` cannot continue it (then the
/// matcher tries `b` as whatever follows the number, if the number can end here). JSON's
/// grammar: an optional `-`; then `0`, or a digit 1–9 and more digits; then optionally `.`
/// and digits; then optionally `e` or `E`, an optional `+` or `-`, and digits. `digits`
/// counts the digits of the current part (a lone `0` counts none), and a part takes at
/// most [`MAX_DIGITS`]. A number with `integer` set takes no fraction and no exponent.
///
/// Hint: a `match` on `(n.part, b)`, one arm per move: `(Minus, b'0')` goes to `Zero`,
/// `(Minus, digit)` to `Int` with one digit, `(Zero | Int, b'.')` to `Dot` unless
/// `integer`, and so on. See "A byte at a time".
pub fn number_step(n: Num, b: u8) -> Option<Num> {
    // TODO: the move from `n.part` that byte `b` makes, with the digit count updated.
    todo!("exercise 1: the number frame")
}

/// Exercise 2: the plain-token shortcut.
///
/// Inside a string that has no length limit, between characters, which tokens continue it
/// whatever they are? Return true for a token that is not empty, is whole UTF-8, and holds
/// no quote (`"`), no backslash and no control byte (below 0x20). The mask sets all of
/// them at once instead of walking them.
///
/// Hint: `std::str::from_utf8(bytes).is_ok()` checks the UTF-8; a token that ends in the
/// middle of a character is not plain (the string's next byte would have to finish it).
/// See "Most tokens are plain text".
pub fn is_plain(bytes: &[u8]) -> bool {
    // TODO: not empty, valid UTF-8, and none of `"`, `\`, or a byte below 0x20.
    todo!("exercise 2: plain tokens")
}

/// Exercise 3: the shortest object.
///
/// An object node's shortest text: `{`, then each *required* member in the schema's
/// order as `key:value` (no spaces), separated by commas, then `}`. `members` lists every
/// property as `(key, shortest value, required)`, the key already as JSON text with its
/// quotes (`"\"name\""`), the value as its node's shortest text (`"\"\""` for a string).
///
/// Hint: optional members are left out: the shortest way to finish never writes them.
/// See "A grammar for JSON values".
pub fn shortest_object(members: &[(&str, &str, bool)]) -> String {
    // TODO: `{`, the required members joined by `,`, `}`.
    todo!("exercise 3: the shortest object")
}

/// Exercise 4: skipping a refused block.
///
/// `tokens` is sorted by bytes, and `tokens[i]` begins with `prefix`, which the grammar
/// refused. Every token that begins with `prefix` is refused too, and they sit together
/// from `i` on. Return the index of the first token after `i` that does not begin with
/// `prefix` (`tokens.len()` if there is none), in O(log n) steps.
///
/// Hint: a binary search over `i + 1..tokens.len()` for the first token that does not
/// `starts_with(prefix)`: the tokens that do come first, so the answer is a partition
/// point (`<[T]>::partition_point` does it for you). See "The sorted walk".
pub fn block_end(tokens: &[&[u8]], i: usize, prefix: &[u8]) -> usize {
    // TODO: the first index after `i` whose token does not begin with `prefix`.
    todo!("exercise 4: skip a refused block")
}

/// Exercise 5: closing an array under `minItems`.
///
/// The shortest text that closes an array frame: `count` items begun so far, at least
/// `min` wanted (the schema's `minItems`), each item's shortest text being `item`. Where the
/// array stands (`at`) matters: just after `[` (`ArrAt::Open`) an item may come or the array
/// may close; just after a `,` (`ArrAt::Item`) an item must come; just after an item
/// (`ArrAt::Member`) a `,` or the `]`. So with `min` = 2 and `item` = `0`: after `[` the
/// text is `0,0]`, after `[5,` it is `0]`, after `[5` it is `,0]`, and after `[5,6` it is `]`.
///
/// Hint: first the item that must come (after a comma, or after `[` when `min > 0`), then
/// `,item` until there are `min`, then `]`. See "The shortest way out".
pub fn close_array(at: ArrAt, count: u32, min: u32, item: &str) -> String {
    // TODO: the item owed now, if any; then `,` and an item until `min`; then `]`.
    todo!("exercise 5: close an array")
}

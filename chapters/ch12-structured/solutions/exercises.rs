//! Reference solutions for chapter 12's exercises (`cargo xtask solution ch12 N`).

use crate::matcher::{ArrAt, MAX_DIGITS, Num, NumPart};

/// Exercise 1: the number frame.
pub fn number_step(n: Num, b: u8) -> Option<Num> {
    use NumPart::*;
    let digit = b.is_ascii_digit();
    let (part, digits) = match (n.part, b) {
        (Minus, b'0') => (Zero, 0),
        (Minus, _) if digit => (Int, 1),
        (Int | Frac | Exp, _) if digit && n.digits < MAX_DIGITS => (n.part, n.digits + 1),
        (Zero | Int, b'.') if !n.integer => (Dot, 0),
        (Dot, _) if digit => (Frac, 1),
        (Zero | Int | Frac, b'e' | b'E') if !n.integer => (E, 0),
        (E, b'+' | b'-') => (ESign, 0),
        (E | ESign, _) if digit => (Exp, 1),
        _ => return None,
    };
    Some(Num {
        part,
        digits,
        integer: n.integer,
    })
}

/// Exercise 2: the plain-token shortcut.
pub fn is_plain(bytes: &[u8]) -> bool {
    !bytes.is_empty()
        && std::str::from_utf8(bytes).is_ok()
        && !bytes.iter().any(|&b| b == b'"' || b == b'\\' || b < 0x20)
}

/// Exercise 3: the shortest object.
pub fn shortest_object(members: &[(&str, &str, bool)]) -> String {
    let required: Vec<String> = members
        .iter()
        .filter(|(_, _, required)| *required)
        .map(|(key, value, _)| format!("{key}:{value}"))
        .collect();
    format!("{{{}}}", required.join(","))
}

/// Exercise 4: skipping a refused block.
pub fn block_end(tokens: &[&[u8]], i: usize, prefix: &[u8]) -> usize {
    let after = &tokens[i + 1..];
    i + 1 + after.partition_point(|t| t.starts_with(prefix))
}

/// Exercise 5: closing an array under `minItems`.
pub fn close_array(at: ArrAt, count: u32, min: u32, item: &str) -> String {
    let mut out = String::new();
    let mut have = count;
    if at == ArrAt::Item || (at == ArrAt::Open && min > 0) {
        out.push_str(item);
        have += 1;
    }
    for _ in have..min {
        out.push(',');
        out.push_str(item);
    }
    out.push(']');
    out
}

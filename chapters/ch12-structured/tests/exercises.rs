#![cfg(feature = "exercises")]
//! One test per exercise.

use ch12_structured::exercises::*;
use ch12_structured::matcher::{MAX_DIGITS, Num, NumPart};

/// The number a text leaves, read by [`number_step`] from its first byte's state.
fn read_number(text: &str, integer: bool) -> Option<Num> {
    let bytes = text.as_bytes();
    let part = match bytes.first()? {
        b'-' => NumPart::Minus,
        b'0' => NumPart::Zero,
        b'1'..=b'9' => NumPart::Int,
        _ => return None,
    };
    let mut n = Num {
        part,
        digits: u8::from(part == NumPart::Int),
        integer,
    };
    for &b in &bytes[1..] {
        n = number_step(n, b)?;
    }
    Some(n)
}

#[test]
fn ex1_number_frame() {
    for ok in ["0", "-0", "12", "-7.25", "1e9", "6.02E+23", "1.5e-3", "0.0"] {
        let n = read_number(ok, false);
        assert!(
            n.is_some_and(|n| n.can_end()),
            "{ok:?} is a JSON number, but the frame refused it or cannot end there ({n:?})"
        );
    }
    for (bad, why) in [
        (
            "01",
            "a leading zero is a whole integer part: `0` then `1` is refused",
        ),
        ("-.5", "a minus needs a digit after it"),
        ("1.e3", "a dot needs a digit after it"),
        ("1e", "an exponent needs a digit"),
        ("+1", "JSON numbers have no leading plus"),
        ("1.5.2", "one fraction only"),
    ] {
        assert!(
            read_number(bad, false).is_none_or(|n| !n.can_end()),
            "{bad:?} is not a JSON number: {why}"
        );
    }
    assert!(
        read_number("3.5", true).is_none(),
        "an integer (`\"type\": \"integer\"`) takes no fraction: `.` must be refused"
    );
    let most = "9".repeat(MAX_DIGITS as usize);
    assert!(
        read_number(&most, false).is_some(),
        "{MAX_DIGITS} digits are allowed"
    );
    assert!(
        read_number(&format!("{most}9"), false).is_none(),
        "a part of more than {MAX_DIGITS} digits is refused, so a model cannot write digits forever"
    );
    // every state and every byte, against the matcher's own frame
    let parts = [
        NumPart::Minus,
        NumPart::Zero,
        NumPart::Int,
        NumPart::Dot,
        NumPart::Frac,
        NumPart::E,
        NumPart::ESign,
        NumPart::Exp,
    ];
    for part in parts {
        for digits in 0..=MAX_DIGITS {
            for integer in [false, true] {
                let n = Num {
                    part,
                    digits,
                    integer,
                };
                for b in 0..=255u8 {
                    assert_eq!(
                        number_step(n, b),
                        n.step(b),
                        "in part {part:?} with {digits} digits (integer: {integer}), the byte {:?}",
                        b as char
                    );
                }
            }
        }
    }
}

#[test]
fn ex2_plain_tokens() {
    for plain in ["hello", " world", "é", "日本", "a b c", "'", "{", "}", ":"] {
        assert!(
            is_plain(plain.as_bytes()),
            "{plain:?} continues any free string: it should be plain"
        );
    }
    let cases: [(&[u8], &str); 6] = [
        (b"", "an empty token writes nothing"),
        (
            b"a\"",
            "a quote may close the string, so the walk must look at it",
        ),
        (
            b"\\n",
            "a backslash begins an escape, which the walk must check",
        ),
        (b"a\nb", "a control byte inside a string must be escaped"),
        (
            &[0xe6, 0x97],
            "a token that stops inside a UTF-8 character is not whole",
        ),
        (&[0xff], "0xff is never UTF-8"),
    ];
    for (bytes, why) in cases {
        assert!(
            !is_plain(bytes),
            "{:?} is not plain: {why}",
            String::from_utf8_lossy(bytes)
        );
    }
}

#[test]
fn ex3_shortest_object() {
    assert_eq!(
        shortest_object(&[]),
        "{}",
        "an object with no properties is shortest as `{{}}`"
    );
    assert_eq!(
        shortest_object(&[("\"a\"", "0", false)]),
        "{}",
        "an optional member is left out of the shortest text"
    );
    assert_eq!(
        shortest_object(&[
            ("\"name\"", "\"\"", true),
            ("\"note\"", "null", false),
            ("\"age\"", "0", true)
        ]),
        r#"{"name":"","age":0}"#,
        "the required members, in order, with commas between them and no spaces"
    );
    // the same rule as the grammar's, on a compiled schema
    use ch12_structured::grammar::Node;
    use ch12_structured::schema::{Limits, compile_text};
    let g = compile_text(
        r#"{"type":"object","properties":{"id":{"type":"integer"},"tags":{"type":"array","minItems":1,"items":{"type":"boolean"}},
            "nick":{"type":"string"},"kind":{"enum":["cat","dog"]}},"required":["id","tags","kind"]}"#,
        Limits::default(),
    )
    .unwrap();
    let Node::Object { props, .. } = g.node(g.root) else {
        unreachable!("an object schema compiles to an object node")
    };
    let texts: Vec<(String, String, bool)> = props
        .iter()
        .map(|p| {
            let key = String::from_utf8(p.key.clone()).unwrap();
            let value = String::from_utf8(g.shortest(p.value).to_vec()).unwrap();
            (key, value, p.required)
        })
        .collect();
    let members: Vec<(&str, &str, bool)> = texts
        .iter()
        .map(|(k, v, r)| (k.as_str(), v.as_str(), *r))
        .collect();
    assert_eq!(
        shortest_object(&members),
        String::from_utf8_lossy(g.shortest(g.root)),
        "the grammar's own shortest text of this schema"
    );
}

#[test]
fn ex4_skip_a_refused_block() {
    // a sorted vocabulary with long runs of shared prefixes
    let mut words: Vec<Vec<u8>> = Vec::new();
    for a in [b'"', b',', b'a', b'b', b'n'] {
        words.push(vec![a]);
        for b in b'a'..=b'z' {
            words.push(vec![a, b]);
            for c in [b'a', b'e', b'x'] {
                words.push(vec![a, b, c]);
            }
        }
    }
    words.sort();
    let tokens: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
    for i in 0..tokens.len() {
        for len in 1..=tokens[i].len() {
            let prefix = &tokens[i][..len];
            let expected = (i + 1..tokens.len())
                .find(|&j| !tokens[j].starts_with(prefix))
                .unwrap_or(tokens.len());
            assert_eq!(
                block_end(&tokens, i, prefix),
                expected,
                "from token {:?} (index {i}), the tokens that begin with {:?} end at index {expected}",
                String::from_utf8_lossy(tokens[i]),
                String::from_utf8_lossy(prefix)
            );
        }
    }
}

#[test]
fn ex5_close_an_array() {
    use ch12_structured::matcher::{ArrAt, Matcher};
    use ch12_structured::schema::{Limits, compile_text};
    assert_eq!(
        close_array(ArrAt::Open, 0, 0, "0"),
        "]",
        "after `[` with no minItems, `]` alone closes the array"
    );
    assert_eq!(
        close_array(ArrAt::Open, 0, 2, "0"),
        "0,0]",
        "after `[` with minItems 2, two items must come first"
    );
    assert_eq!(
        close_array(ArrAt::Item, 1, 2, "0"),
        "0]",
        "after `[5,` an item is owed (the comma promised one), and it makes two"
    );
    assert_eq!(
        close_array(ArrAt::Item, 3, 0, "null"),
        "null]",
        "after a comma an item must come even when minItems is met"
    );
    assert_eq!(
        close_array(ArrAt::Member, 1, 3, "\"\""),
        r#","",""]"#,
        "after `[\"a\"` with minItems 3, two more items, each after a comma"
    );
    assert_eq!(
        close_array(ArrAt::Member, 4, 2, "0"),
        "]",
        "after an item, with minItems met, `]` alone closes it"
    );
    // the matcher's own shortest way out, at every place in an array of minItems 3
    let g = compile_text(
        r#"{"type":"array","items":{"type":"boolean"},"minItems":3}"#,
        Limits::default(),
    )
    .unwrap();
    for (text, at, count) in [
        ("[", ArrAt::Open, 0),
        ("[ ", ArrAt::Open, 0),
        ("[true", ArrAt::Member, 1),
        ("[true,", ArrAt::Item, 1),
        ("[true, false", ArrAt::Member, 2),
        ("[true,false,", ArrAt::Item, 2),
        ("[true,false,true", ArrAt::Member, 3),
    ] {
        let mut m = Matcher::new(&g);
        assert!(m.accept(text.as_bytes()), "{text:?}");
        assert_eq!(
            close_array(at, count, 3, "true"),
            String::from_utf8_lossy(&m.completion()),
            "after {text:?} (minItems 3): the grammar's own shortest way out"
        );
    }
}

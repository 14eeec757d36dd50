#![cfg(feature = "exercises")]
//! One test per exercise: each checks your function against hand-worked cases and against the
//! chapter's own implementation. Run with `cargo xtask exercises ch02`.

use std::collections::HashMap;

use ch02_tokenizer::exercises;
use ch02_tokenizer::spm::toy_vocabulary;
use ch02_tokenizer::train::train;
use ch02_tokenizer::{PreTokenizer, Tokenizer, byte_level, llama3_split, pretokenize, stream};

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn ex1_the_byte_to_unicode_table() {
    let table = exercises::bytes_to_unicode();
    assert_eq!(
        table[b'a' as usize], 'a',
        "printable ASCII bytes stand for themselves: 'a' is 'a'"
    );
    assert_eq!(
        table[0], 'Ā',
        "byte 0 is the first unprintable byte, so it gets U+0100 'Ā'"
    );
    assert_eq!(
        table[b' ' as usize], 'Ġ',
        "a space (0x20) is the 33rd unprintable byte: U+0120 'Ġ'"
    );
    assert_eq!(
        table[b'\n' as usize], 'Ċ',
        "a newline (0x0A) gets U+010A 'Ċ'"
    );
    assert_eq!(
        table[0xE9], 'é',
        "0xE9 is in the Latin-1 range 0xAE..=0xFF: it stays 'é'"
    );
    assert_eq!(
        table[0xAD], '\u{143}',
        "the soft hyphen 0xAD is the 68th and last stand-in, U+0143"
    );
    let reference = byte_level::bytes_to_unicode();
    for b in 0..256 {
        assert_eq!(
            table[b], reference[b],
            "byte {b:#04x} should be spelled {:?}",
            reference[b]
        );
    }
}

#[test]
fn ex2_one_bpe_merge_step() {
    let ranks: HashMap<(String, String), u32> = [
        (("l", "l"), 0),
        (("h", "e"), 1),
        (("he", "ll"), 2),
        (("l", "o"), 3),
    ]
    .into_iter()
    .map(|((a, b), r)| ((a.to_string(), b.to_string()), r))
    .collect();
    let step = |p: &[&str]| exercises::merge_step(&strings(p), &ranks);
    assert_eq!(
        step(&["h", "e", "l", "l", "o"]),
        Some(strings(&["h", "e", "ll", "o"])),
        "l+l has rank 0, so it is fused first"
    );
    assert_eq!(
        step(&["h", "e", "ll", "o"]),
        Some(strings(&["he", "ll", "o"])),
        "then h+e (rank 1)"
    );
    assert_eq!(
        step(&["he", "ll", "o"]),
        Some(strings(&["hell", "o"])),
        "then he+ll (rank 2)"
    );
    assert_eq!(
        step(&["hell", "o"]),
        None,
        "hell+o is not a merge: the word is done"
    );
    assert_eq!(
        step(&["l", "l", "l"]),
        Some(strings(&["ll", "l"])),
        "l l l: the leftmost l+l wins the tie"
    );
    assert_eq!(step(&[]), None, "an empty word has nothing to merge");

    // Against the chapter's encoder: merge to the end, compare with its tokens.
    let trained = train(
        include_str!("../data/corpus.txt"),
        150,
        PreTokenizer::DigitsThenGpt2,
    )
    .unwrap();
    let ranks: HashMap<(String, String), u32> = trained
        .merges
        .iter()
        .enumerate()
        .map(|(r, (a, b, _))| ((a.clone(), b.clone()), r as u32))
        .collect();
    let bl = byte_level::ByteLevel::new();
    let tok = &trained.tokenizer;
    for word in [
        "tokenizer",
        " the",
        " merges",
        " learned",
        "ing",
        " decoding",
    ] {
        let mut pieces: Vec<String> = word.bytes().map(|b| bl.char_of(b).to_string()).collect();
        while let Some(next) = exercises::merge_step(&pieces, &ranks) {
            pieces = next;
        }
        let expected: Vec<String> = tok
            .encode(word, false)
            .iter()
            .map(|&id| tok.vocab().text(id).unwrap().to_string())
            .collect();
        assert_eq!(
            pieces, expected,
            "merging {word:?} step by step should end where the encoder ends"
        );
    }
}

#[test]
fn ex3_the_digit_pre_split() {
    assert_eq!(
        exercises::split_digits("in 2025!"),
        ["in ", "2", "0", "2", "5", "!"],
        "each digit alone, text between kept whole"
    );
    assert_eq!(
        exercises::split_digits("42"),
        ["4", "2"],
        "two digits are two pieces"
    );
    assert_eq!(
        exercises::split_digits("no numbers"),
        ["no numbers"],
        "text without digits is one piece"
    );
    assert_eq!(
        exercises::split_digits(""),
        Vec::<&str>::new(),
        "empty text has no pieces (not one empty piece)"
    );
    assert_eq!(
        exercises::split_digits("٣½x"),
        ["٣", "½", "x"],
        "\\p{{N}} includes other scripts' digits and fractions"
    );
    for text in [
        "Hello world! 123",
        "1,000,000.5",
        "v2.0-rc1 🦀 x²",
        "عدد ٤٥",
        "Ⅻ o'clock",
    ] {
        assert_eq!(
            exercises::split_digits(text),
            pretokenize::split_digits(text),
            "splitting {text:?}"
        );
    }
}

#[test]
fn ex4_an_unfinished_utf8_character() {
    let crab = "a🦀".as_bytes(); // 61 F0 9F A6 80
    assert_eq!(
        exercises::incomplete_tail_len(b"abc"),
        0,
        "plain ASCII is always complete"
    );
    assert_eq!(
        exercises::incomplete_tail_len(&crab[..2]),
        1,
        "F0 announces 4 bytes and only 1 has arrived"
    );
    assert_eq!(
        exercises::incomplete_tail_len(&crab[..3]),
        2,
        "F0 9F: 2 of 4 bytes"
    );
    assert_eq!(
        exercises::incomplete_tail_len(&crab[..4]),
        3,
        "F0 9F A6: 3 of 4 bytes"
    );
    assert_eq!(
        exercises::incomplete_tail_len(crab),
        0,
        "all 4 bytes of the crab are there"
    );
    assert_eq!(
        exercises::incomplete_tail_len(b""),
        0,
        "nothing is unfinished in no bytes"
    );
    for text in ["é", "日本", "x€y", "🦀🦀", "ह्"] {
        let bytes = text.as_bytes();
        for cut in 0..=bytes.len() {
            assert_eq!(
                exercises::incomplete_tail_len(&bytes[..cut]),
                stream::incomplete_tail_len(&bytes[..cut]),
                "{text:?} cut after {cut} bytes ({:02X?})",
                &bytes[..cut]
            );
        }
    }
}

#[test]
fn ex5_one_sentencepiece_merge() {
    let vocab = toy_vocabulary();
    let scores: HashMap<String, f32> = vocab.iter().map(|(t, s, _)| (t.clone(), *s)).collect();
    let step = |p: &[&str]| exercises::spm_merge_step(&strings(p), &scores);
    let start = ["▁", "h", "e", "l", "l", "o"];
    assert_eq!(
        step(&start),
        Some(strings(&["▁", "h", "e", "ll", "o"])),
        "ll scores -2, the highest of ▁h, he, el, ll, lo"
    );
    assert_eq!(
        step(&["▁", "h", "e", "ll", "o"]),
        Some(strings(&["▁", "he", "ll", "o"])),
        "then he (-3)"
    );
    assert_eq!(
        step(&["▁", "w", "o", "r", "l", "d"]),
        Some(strings(&["▁w", "o", "r", "l", "d"])),
        "▁w (-7) beats or (-8) and ld (-10)"
    );
    assert_eq!(
        step(&["▁", "he", "ld"]),
        None,
        "neither ▁he nor held is in the vocabulary"
    );
    let tied: HashMap<String, f32> = [("ab".to_string(), -1.0)].into_iter().collect();
    assert_eq!(
        exercises::spm_merge_step(&strings(&["a", "b", "a", "b"]), &tied),
        Some(strings(&["ab", "a", "b"])),
        "on equal scores the leftmost pair fuses first"
    );

    // Against the chapter's SentencePiece encoder on the toy vocabulary.
    let tok = Tokenizer::sentencepiece(
        vocab.iter().map(|(t, _, k)| (t, *k)),
        vocab.iter().map(|t| t.1).collect(),
        true,
    )
    .unwrap();
    for text in ["hello world", "held", "world hello", "hello"] {
        let mut pieces: Vec<String> = format!("▁{}", text.replace(' ', "▁"))
            .chars()
            .map(String::from)
            .collect();
        while let Some(next) = exercises::spm_merge_step(&pieces, &scores) {
            pieces = next;
        }
        let expected: Vec<String> = tok
            .encode(text, false)
            .iter()
            .map(|&id| tok.vocab().text(id).unwrap().to_string())
            .collect();
        assert_eq!(
            pieces, expected,
            "merging {text:?} step by step should end where the encoder ends"
        );
    }
}

#[test]
fn ex6_llama3_digit_groups() {
    let split = exercises::split_digit_groups;
    assert_eq!(
        split("12345"),
        ["123", "45"],
        "groups of three are counted from the left: 12345 is 123 then 45"
    );
    assert_eq!(split("123"), ["123"], "three digits are one group");
    assert_eq!(
        split("1234567"),
        ["123", "456", "7"],
        "seven digits: two full groups and one left over"
    );
    assert_eq!(
        split("pi 3.14159"),
        ["pi ", "3", ".", "141", "59"],
        "the text between numbers stays whole, and the point ends a run"
    );
    assert_eq!(split(""), Vec::<&str>::new(), "empty text has no pieces");
    assert_eq!(split("abc"), ["abc"], "text without numbers is one piece");
    assert_eq!(
        split("٣٤٥٦"),
        ["٣٤٥", "٦"],
        "Arabic-Indic digits are \\p{{N}} too, and a group is three characters, not bytes"
    );
    assert_eq!(
        split("x²³⁴⁵y"),
        ["x", "²³⁴", "⁵", "y"],
        "superscripts are numbers"
    );
    // A run of numbers alone is split exactly as the chapter's Llama 3 split does.
    for run in ["1", "22", "4444", "55555", "666666", "7777777", "½¾٣Ⅻ5"] {
        assert_eq!(
            split(run),
            llama3_split::split_llama3(run),
            "{run:?} should be cut as Llama 3 cuts it"
        );
    }
}

//! The mask on the two real vocabularies: the sorted walk gives exactly the tokens the
//! matcher accepts one by one, at every byte of a few documents; and every vocabulary has
//! the single-byte tokens the "always closes" promise rests on.

use std::sync::OnceLock;

use ch01_tensors::models;
use ch02_tokenizer::TokenId;
use ch08_gguf::GgufFile;
use ch12_structured::grammar::Grammar;
use ch12_structured::mask::{TokenIndex, TokenSet};
use ch12_structured::matcher::Matcher;
use ch12_structured::schema::{Limits, compile_text};

fn index(path: std::path::PathBuf) -> TokenIndex {
    let path = models::require(&path).unwrap_or_else(|e| panic!("{e}"));
    let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let tok = ch08_gguf::tokenizer(&file.gguf).unwrap_or_else(|e| panic!("{e}"));
    TokenIndex::from_tokenizer(&tok.tokenizer, tok.end_ids.clone())
}

fn smollm2() -> &'static TokenIndex {
    static I: OnceLock<TokenIndex> = OnceLock::new();
    I.get_or_init(|| index(models::smollm2_gguf()))
}

fn gemma3() -> &'static TokenIndex {
    static I: OnceLock<TokenIndex> = OnceLock::new();
    I.get_or_init(|| index(models::gemma3_gguf()))
}

const PERSON: &str = r#"{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
    "tags":{"type":"array","items":{"enum":["a","b c"]}},"note":{"anyOf":[{"type":"string","maxLength":5},{"type":"null"}]}},
    "required":["name","age"]}"#;

/// At every prefix of `doc`: the mask equals asking each token alone.
fn check(ix: &TokenIndex, g: &Grammar, doc: &str, every: usize) {
    let mut set = TokenSet::empty(ix.vocab_size());
    for cut in (0..=doc.len()).step_by(every) {
        let mut m = Matcher::new(g);
        assert!(m.accept(&doc.as_bytes()[..cut]), "{doc:?} cut at {cut}");
        ix.mask(&m, &mut set);
        let one_by_one = (0..ix.vocab_size() as TokenId)
            .filter(|&id| ix.allows(&m, id))
            .count();
        assert_eq!(set.count(), one_by_one, "{:?}", &doc[..cut]);
        for id in set.iter() {
            assert!(ix.allows(&m, id), "{:?} then token {id}", &doc[..cut]);
        }
    }
}

#[test]
fn smollm2_masks_equal_one_by_one() {
    let g = compile_text(PERSON, Limits::default()).unwrap();
    check(
        smollm2(),
        &g,
        r#"{"name": "Zoë \"Z\"", "age": -3, "tags": ["b c", "a"], "note": "short"}"#,
        1,
    );
    check(
        smollm2(),
        &Grammar::any_object(),
        r#"{"x": [1.5e-3, true, null, {"y": "\u00e9"}]}"#,
        3,
    );
}

#[test]
fn gemma3_masks_equal_one_by_one() {
    let g = compile_text(PERSON, Limits::default()).unwrap();
    check(
        gemma3(),
        &g,
        r#"{"name": "日本", "age": 7, "note": null}"#,
        2,
    );
}

#[test]
fn every_byte_has_a_token() {
    for (name, ix) in [("SmolLM2", smollm2()), ("Gemma-3", gemma3())] {
        let singles: Vec<u8> = (0..ix.vocab_size() as TokenId)
            .filter_map(|id| match ix.piece(id) {
                [b] => Some(*b),
                _ => None,
            })
            .collect();
        // what a completion can hold: printable ASCII, and the continuation bytes that
        // finish a UTF-8 character a token left open
        for b in (0x20u8..0x7f).chain(0x80..=0xbf) {
            assert!(
                singles.contains(&b),
                "{name}: no token is the single byte {b:#04x}, so a completion that needs it \
                 might not fit in its budget"
            );
        }
    }
}

//! SentencePiece encoding on the hand-made vocabulary of `spm::toy_vocabulary` (Gemma-3's
//! real vocabulary is tested in chapter 8, where it is read from the GGUF).

use ch02_tokenizer::spm::toy_vocabulary;
use ch02_tokenizer::{StreamDecoder, TokenKind, Tokenizer};

fn toy(add_space_prefix: bool) -> Tokenizer {
    let v = toy_vocabulary();
    let scores = v.iter().map(|t| t.1).collect();
    let tokens = v.into_iter().map(|(t, _, k)| (t, k));
    Tokenizer::sentencepiece(tokens, scores, add_space_prefix).unwrap()
}

fn texts(tok: &Tokenizer, ids: &[u32]) -> Vec<String> {
    ids.iter()
        .map(|&id| tok.vocab().text(id).unwrap().to_string())
        .collect()
}

#[test]
fn highest_score_first_builds_whole_words() {
    let tok = toy(true);
    let ids = tok.encode("hello world", false);
    assert_eq!(texts(&tok, &ids), ["▁hello", "▁world"]);
    assert_eq!(
        tok.decode(&ids).unwrap(),
        "hello world",
        "the prefix space is removed again"
    );
}

#[test]
fn without_prefix_space() {
    let tok = toy(false);
    assert_eq!(texts(&tok, &tok.encode("hello", false)), ["hello"]);
    assert_eq!(texts(&tok, &tok.encode("held", false)), ["he", "ld"]);
}

#[test]
fn pieces_that_are_not_words_stay_apart() {
    let tok = toy(true);
    // ▁ h e l d: "he" (-3) fuses, then "ld" (-10); "▁he" and "held" are not pieces.
    assert_eq!(texts(&tok, &tok.encode("held", false)), ["▁", "he", "ld"]);
}

#[test]
fn unknown_characters_fall_back_to_bytes() {
    let tok = toy(true);
    let ids = tok.encode("€", false); // U+20AC = E2 82 AC
    assert_eq!(texts(&tok, &ids), ["▁", "<0xE2>", "<0x82>", "<0xAC>"]);
    assert_eq!(tok.decode(&ids).unwrap(), "€");
    let mut stream = StreamDecoder::from_start(&tok);
    let chunks: Vec<String> = ids.iter().map(|&id| stream.push(id).unwrap()).collect();
    assert_eq!(
        chunks,
        ["", "", "", "€"],
        "the euro sign is printed once its third byte arrives"
    );
}

#[test]
fn without_byte_tokens_it_is_unknown() {
    let v: Vec<_> = toy_vocabulary()
        .into_iter()
        .filter(|t| t.2 != TokenKind::Byte)
        .collect();
    let scores = v.iter().map(|t| t.1).collect();
    let tok =
        Tokenizer::sentencepiece(v.into_iter().map(|(t, _, k)| (t, k)), scores, true).unwrap();
    assert_eq!(
        texts(&tok, &tok.encode("hello €", false)),
        ["▁hello", "▁", "<unk>"]
    );
}

#[test]
fn special_tokens_and_the_prefix_space() {
    let tok = toy(true);
    let ids = tok.encode("<s>hello", true);
    assert_eq!(
        texts(&tok, &ids),
        ["<s>", "▁hello"],
        "a prefix space follows a special token"
    );
    assert_eq!(
        texts(&tok, &tok.encode("<s>", false))[0],
        "▁",
        "<s> is plain text without parsing"
    );
}

#[test]
fn scores_must_match_tokens() {
    let err = Tokenizer::sentencepiece(vec![("a", TokenKind::Normal)], vec![], false).unwrap_err();
    assert!(err.to_string().contains("1 tokens but 0 scores"), "{err}");
}

/// Generated tokens continue the prompt: the first one keeps its space, as llama.cpp
/// prints it (`common_token_to_piece` strips nothing). Only a text's own first token loses
/// the space its encoder added.
#[test]
fn a_generated_token_keeps_its_leading_space() {
    let tok = toy(true);
    let prompt = tok.encode("hello", false);
    assert_eq!(texts(&tok, &prompt), ["▁hello"]);
    let generated = tok.token_id("▁world").unwrap();
    let mut stream = StreamDecoder::new(&tok);
    let printed = stream.push(generated).unwrap();
    assert_eq!(
        format!("{}{printed}", tok.decode(&prompt).unwrap()),
        "hello world",
        "the prompt \"hello\" then the generated token ▁world printed {printed:?}: \
         its space was dropped as if it began the text"
    );
    let mut whole = StreamDecoder::from_start(&tok);
    assert_eq!(
        whole.push(prompt[0]).unwrap(),
        "hello",
        "streaming a text from its start drops the prefix space, as decode does"
    );
}

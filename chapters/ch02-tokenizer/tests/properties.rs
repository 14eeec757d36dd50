//! Property tests on SmolLM2's real vocabulary: random text survives the round trip, the fast
//! merge equals the naive one, and streaming decode equals whole decode.

mod common;

use ch02_tokenizer::{MergeLoop, StreamDecoder, Tokenizer};
use proptest::prelude::*;
use std::sync::OnceLock;

fn tok() -> &'static Tokenizer {
    static TOK: OnceLock<Tokenizer> = OnceLock::new();
    TOK.get_or_init(common::smollm2)
}

/// Text made of fragments that stress the pre-tokenizer: contractions, space runs, digits,
/// other scripts, emoji, control characters and special-token text.
fn tricky_text() -> impl Strategy<Value = String> {
    let fragment = prop_oneof![
        Just("'s".to_string()),
        Just("'ll".to_string()),
        Just("'S".to_string()),
        Just(" ".to_string()),
        Just("  ".to_string()),
        Just("\n".to_string()),
        Just("\t".to_string()),
        Just("\r\n".to_string()),
        Just("<|im_start|>".to_string()),
        Just("<|im_end|>".to_string()),
        Just("🦀".to_string()),
        Just("\u{0004}".to_string()),
        Just("\u{a0}".to_string()),
        Just("हिन्दी".to_string()),
        "[a-zA-Z]{1,8}",
        "[0-9]{1,5}",
        "[!-/:-@]{1,3}",
        "[à-ÿ]{1,4}",
        "[一-龥]{1,3}",
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(fragment, 0..24).prop_map(|v| v.concat())
}

fn stream_decode(tok: &Tokenizer, ids: &[u32]) -> String {
    let mut stream = StreamDecoder::from_start(tok);
    let mut text: String = ids.iter().map(|&id| stream.push(id).unwrap()).collect();
    text.push_str(&stream.finish());
    text
}

proptest! {
    // No regression files written into the source tree; a failure prints its minimal input.
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn round_trip_random_unicode(text in any::<String>()) {
        let tok = tok();
        for special in [false, true] {
            let ids = tok.encode(&text, special);
            prop_assert_eq!(tok.decode(&ids).unwrap(), common::encodable(tok, &text));
        }
    }

    #[test]
    fn round_trip_tricky_text(text in tricky_text()) {
        let tok = tok();
        for special in [false, true] {
            let ids = tok.encode(&text, special);
            prop_assert_eq!(tok.decode(&ids).unwrap(), common::encodable(tok, &text));
        }
    }

    #[test]
    fn heap_merge_equals_naive_merge(text in tricky_text()) {
        let tok = tok();
        let reference = tok.encode_naive(&text, true);
        prop_assert_eq!(&tok.encode_using(&text, true, MergeLoop::Heap), &reference);
        prop_assert_eq!(&tok.encode(&text, true), &reference);
    }

    #[test]
    fn streaming_equals_whole_decode_of_encoded_text(text in tricky_text()) {
        let tok = tok();
        let ids = tok.encode(&text, true);
        prop_assert_eq!(stream_decode(tok, &ids), tok.decode(&ids).unwrap());
    }

    #[test]
    fn streaming_equals_whole_decode_of_random_ids(ids in prop::collection::vec(0u32..49152, 0..40)) {
        // Random ids make random byte soup: broken characters in every position.
        let tok = tok();
        prop_assert_eq!(stream_decode(tok, &ids), tok.decode(&ids).unwrap());
    }
}

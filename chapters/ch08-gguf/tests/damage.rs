//! The GGUF parser against random damage to the corpus's valid file: bytes flipped, large
//! u64 and u32 values written over counts, lengths, types and offsets. Whatever the bytes,
//! `Ok` or `Err`, never a panic; and a damaged file that still parses must survive being
//! read through every accessor.

use std::panic::{AssertUnwindSafe, catch_unwind};

use ch08_gguf::Gguf;
use proptest::prelude::*;

mod common;
use common::{panic_text, touch_everything, valid_bytes};

/// One change to the valid file.
#[derive(Clone, Debug)]
enum Damage {
    /// XOR one byte with a mask.
    Flip { at: prop::sample::Index, mask: u8 },
    /// Write a little-endian u64 (a count, a length, a dimension, an offset).
    U64 { at: prop::sample::Index, value: u64 },
    /// Write a little-endian u32 (a version, a value type, n_dims, a ggml type).
    U32 { at: prop::sample::Index, value: u32 },
}

fn damage() -> impl Strategy<Value = Damage> {
    let big = prop_oneof![
        Just(0u64),
        Just(1),
        Just(u64::MAX),
        Just(1 << 62),
        Just(1 << 32),
        Just(i64::MAX as u64 + 1),
        0..4096u64,
        any::<u64>(),
    ];
    prop_oneof![
        (any::<prop::sample::Index>(), 1..=255u8).prop_map(|(at, mask)| Damage::Flip { at, mask }),
        (any::<prop::sample::Index>(), big).prop_map(|(at, value)| Damage::U64 { at, value }),
        (
            any::<prop::sample::Index>(),
            prop_oneof![0..16u32, 0..64u32, any::<u32>()]
        )
            .prop_map(|(at, value)| Damage::U32 { at, value }),
    ]
}

fn apply(bytes: &mut [u8], d: &Damage) {
    let mut put = |at: &prop::sample::Index, le: &[u8]| {
        let start = at.index(bytes.len() - le.len() + 1);
        bytes[start..start + le.len()].copy_from_slice(le);
    };
    match d {
        Damage::Flip { at, mask } => {
            let i = at.index(bytes.len());
            bytes[i] ^= mask;
        }
        Damage::U64 { at, value } => put(at, &value.to_le_bytes()),
        Damage::U32 { at, value } => put(at, &value.to_le_bytes()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn damaging_the_valid_file_never_panics(damages in prop::collection::vec(damage(), 1..6)) {
        let mut bytes = valid_bytes();
        for d in &damages {
            apply(&mut bytes, d);
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            if let Ok(g) = Gguf::parse(&bytes) {
                touch_everything(&g, &bytes);
            }
        }));
        if let Err(p) = outcome {
            prop_assert!(
                false,
                "valid.gguf with {damages:?} made the parser (or a reader of its result) panic: {}",
                panic_text(&*p)
            );
        }
    }
}

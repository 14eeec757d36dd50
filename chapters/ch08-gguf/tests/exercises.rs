#![cfg(feature = "exercises")]
//! One test per exercise, each against hand-made cases and the chapter's own code.

use ch02_tokenizer::TokenKind;
use ch08_gguf::exercises::*;

fn gguf_string(len: u64, body: &[u8]) -> Vec<u8> {
    let mut v = len.to_le_bytes().to_vec();
    v.extend_from_slice(body);
    v
}

#[test]
fn ex1_read_a_metadata_string() {
    let mut buf = b"xx".to_vec();
    buf.extend(gguf_string(5, b"llama"));
    buf.extend(gguf_string(0, b""));
    let got = read_string(&buf, 2);
    assert!(
        got == Some(("llama".into(), 15)),
        "at byte 2 of {buf:?} is the string \"llama\" (length 5, then 5 bytes), ending at byte 15; you returned {got:?}"
    );
    let got = read_string(&buf, 15);
    assert!(
        got == Some((String::new(), 23)),
        "an empty string is just its 8-byte length: expected (\"\", 23), you returned {got:?}"
    );
    for (what, bytes, pos) in [
        (
            "a length longer than the bytes left",
            gguf_string(6, b"llama"),
            0,
        ),
        ("a length of 2^64 - 1", gguf_string(u64::MAX, b"llama"), 0),
        ("a length of 2^63", gguf_string(1 << 63, b"x"), 0),
        ("only 7 bytes of length", vec![5, 0, 0, 0, 0, 0, 0], 0),
        ("a position past the end", gguf_string(1, b"a"), 100),
        ("bytes that are not UTF-8", gguf_string(2, &[0xc3, 0x28]), 0),
    ] {
        let got = read_string(&bytes, pos);
        assert!(got.is_none(), "{what} must give None, you returned {got:?}");
    }
}

/// (dims, values per block, bytes per block, expected bytes, what the case is).
type SizeCase = (&'static [u64], u64, u64, Option<u64>, &'static str);

#[test]
fn ex2_a_tensor_s_byte_size() {
    let cases: [SizeCase; 7] = [
        (
            &[576, 1536],
            32,
            20,
            Some(552_960),
            "a Q4_1 (1536, 576) matrix",
        ),
        (
            &[576, 49152],
            32,
            34,
            Some(30_081_024),
            "SmolLM2's Q8_0 embedding",
        ),
        (&[576], 1, 4, Some(2304), "an F32 norm of 576"),
        (
            &[33, 2],
            32,
            34,
            None,
            "a Q8_0 row of 33 values (not whole blocks)",
        ),
        (&[], 1, 4, None, "a tensor with no dimensions"),
        (
            &[1 << 32, 1 << 32, 2],
            1,
            1,
            None,
            "2^65 values (the element count overflows)",
        ),
        (
            &[1 << 40, 1 << 20],
            1,
            1 << 8,
            None,
            "2^60 values × 256 bytes (the byte count overflows)",
        ),
    ];
    for (dims, bv, bb, want, what) in cases {
        let got = tensor_bytes(dims, bv, bb);
        assert!(
            got == want,
            "{what}: dims {dims:?}, {bv} values per {bb}-byte block: expected {want:?}, you returned {got:?}"
        );
    }
    // Agrees with the chapter's own GgmlType::byte_size on the real types.
    for id in [0u32, 2, 3, 8, 12, 14] {
        let ty = ch08_gguf::GgmlType::from_id(id).unwrap();
        let dims = [256, 7, 3];
        let want = ty.byte_size("t", &dims).ok();
        let got = tensor_bytes(&dims, ty.block_values(), ty.block_bytes());
        assert!(
            got == want,
            "{ty} {dims:?}: expected {want:?}, you returned {got:?}"
        );
    }
}

#[test]
fn ex3_a_tensor_s_data_offset() {
    let cases = [
        (
            1_785_652,
            32,
            0,
            Some(1_785_664),
            "a header that needs 12 bytes of padding",
        ),
        (
            1_785_664,
            32,
            0,
            Some(1_785_664),
            "SmolLM2's first tensor (no padding)",
        ),
        (
            1_785_652,
            32,
            30_081_024,
            Some(1_785_664 + 30_081_024),
            "a later tensor",
        ),
        (
            64,
            32,
            0,
            Some(64),
            "a header that ends on a boundary needs no padding",
        ),
        (65, 64, 128, Some(256), "alignment 64"),
        (100, 24, 0, None, "alignment 24 (not a power of two)"),
        (100, 0, 0, None, "alignment 0"),
        (100, 32, 16, None, "an offset of 16 with alignment 32"),
        (
            u64::MAX - 3,
            32,
            0,
            None,
            "a header end whose padding overflows",
        ),
        (64, 32, u64::MAX - 31, None, "an offset whose sum overflows"),
    ];
    for (end, align, off, want, what) in cases {
        let got = tensor_start(end, align, off);
        assert!(
            got == want,
            "{what}: header ends at {end}, alignment {align}, offset {off}: expected {want:?}, you returned {got:?}"
        );
    }
}

#[test]
fn ex4_un_permute_q_and_k_rows() {
    let got: Vec<usize> = (0..4).map(|r| stored_row(r, 4)).collect();
    assert!(
        got == [0, 2, 1, 3],
        "head_dim 4: chapter 3's rows 0..4 are stored at [0, 2, 1, 3], you returned {got:?}"
    );
    let got: Vec<usize> = (8..16).map(|r| stored_row(r, 8)).collect();
    assert!(
        got == [8, 10, 12, 14, 9, 11, 13, 15],
        "the second head of 8 (rows 8..16): expected [8, 10, 12, 14, 9, 11, 13, 15], you returned {got:?}"
    );
    // Against the chapter's byte-level version, on SmolLM2's query shape (9 heads of 64).
    let rows = 576;
    let stored: Vec<u8> = (0..rows).flat_map(|r| (r as u16).to_le_bytes()).collect();
    let fixed = ch08_gguf::model::unpermute_rows(&stored, 2, 64);
    for r in 0..rows {
        let want = u16::from_le_bytes([fixed[2 * r], fixed[2 * r + 1]]) as usize;
        let got = stored_row(r, 64);
        assert!(
            got == want,
            "head_dim 64, row {r}: stored at {want}, you returned {got}"
        );
    }
}

#[test]
fn ex5_the_vocabulary_from_metadata() {
    let tokens: Vec<String> = ["<unk>", "<s>", "a", "<0x0A>", "<pad>", "<|x|>"]
        .map(String::from)
        .to_vec();
    let got = vocab_entries(&tokens, &[2, 3, 1, 6, 5, 4]);
    let want = vec![
        ("<unk>".to_string(), TokenKind::Unknown),
        ("<s>".to_string(), TokenKind::Control),
        ("a".to_string(), TokenKind::Normal),
        ("<0x0A>".to_string(), TokenKind::Byte),
        ("<pad>".to_string(), TokenKind::Unused),
        ("<|x|>".to_string(), TokenKind::UserDefined),
    ];
    assert!(
        got == Ok(want.clone()),
        "types [2, 3, 1, 6, 5, 4]: expected {want:?}, you returned {got:?}"
    );
    match vocab_entries(&tokens, &[1, 1, 1]) {
        Err(e) => assert!(
            e.contains('6') && e.contains('3'),
            "6 tokens but 3 types: your error should say both numbers, it says {e:?}"
        ),
        Ok(v) => panic!("6 tokens but 3 types must be an error, you returned {v:?}"),
    }
    match vocab_entries(&tokens, &[1, 1, 9, 1, 1, 1]) {
        Err(e) => assert!(
            e.contains("\"a\"") || e.contains(" 2"),
            "token 2 (\"a\") has type 9: your error should name the token, it says {e:?}"
        ),
        Ok(v) => panic!("a token type of 9 must be an error, you returned {v:?}"),
    }
}

#[test]
fn ex6_unpack_a_q4_k_scale_and_min() {
    // Pack eight known pairs by hand, the way llama.cpp's quantizer does, then unpack them.
    let pairs: [(u8, u8); 8] = [
        (1, 2),
        (63, 0),
        (17, 40),
        (5, 63),
        (33, 9),
        (62, 48),
        (0, 31),
        (47, 16),
    ];
    let mut s = [0u8; 12];
    for (j, &(sc, m)) in pairs.iter().enumerate() {
        if j < 4 {
            s[j] = sc;
            s[j + 4] = m;
        } else {
            s[j + 4] = (sc & 0x0f) | ((m & 0x0f) << 4);
            s[j - 4] |= (sc >> 4) << 6;
            s[j] |= (m >> 4) << 6;
        }
    }
    for (j, &want) in pairs.iter().enumerate() {
        let got = q4_k_scale_min(j, &s);
        assert!(
            got == want,
            "pair {j} of the packed bytes {s:?}: expected (scale, min) {want:?}, you returned {got:?}"
        );
    }
    // Against the chapter's own unpacking, on every byte pattern of one byte at a time.
    for at in 0..12 {
        for v in [0x00u8, 0x3f, 0x40, 0xc0, 0xff, 0x5a] {
            let mut s = [0x21u8; 12];
            s[at] = v;
            for j in 0..8 {
                let want = ch07_simd_parallel::layout::kquant::scale_min_k4(j, &s);
                let got = q4_k_scale_min(j, &s);
                assert!(
                    got == want,
                    "bytes {s:?}, pair {j}: expected {want:?}, you returned {got:?}"
                );
            }
        }
    }
}

/// `n` Q5_0 or Q4_K blocks of random bytes, each block's f16 scale fields set to ordinary
/// numbers (`scales` of them at its start: Q5_0 has one, Q4_K two).
fn random_blocks(n: usize, bytes: usize, scales: usize, seed: u64) -> Vec<u8> {
    let x = ch01_tensors::random::uniform(n * bytes, seed);
    let mut out: Vec<u8> = x.iter().map(|v| ((v + 1.0) * 127.9) as u8).collect();
    for (i, b) in out.chunks_exact_mut(bytes).enumerate() {
        for s in 0..scales {
            let h = ch06_quantization::f16::f32_to_f16(0.01 + 0.003 * ((i + s) % 7) as f32);
            b[2 * s..2 * s + 2].copy_from_slice(&h.to_le_bytes());
        }
    }
    out
}

#[test]
fn ex7_q5_0_s_fifth_bits_in_a_packed_lane() {
    use ch06_quantization::Format;
    use ch06_quantization::matrix::Q32;
    use ch07_simd_parallel::layout::eights::unpack_block;
    use ch07_simd_parallel::layout::packed::{GroupLayout, Packed};
    let (nb, bb) = (3, 22);
    let src = random_blocks(8 * nb, bb, 1, 71);
    let packed = Packed::new(Format::Q5_0, 8, 32 * nb, &src).expect("eight whole rows");
    let gb = packed.layout.group_block_bytes();
    for b in 0..nb {
        let blk = &packed.group(0)[b * gb..(b + 1) * gb];
        for r in 0..8 {
            let q = unpack_block(Q32::Q5_0, &src[(r * nb + b) * bb..][..bb]).q;
            for c in 0..4 {
                let want: [u8; 8] =
                    std::array::from_fn(|i| q[4 * c + i % 4 + if i >= 4 { 16 } else { 0 }]);
                let got = packed_q5_0_quants(blk, r, c);
                assert!(
                    got == want,
                    "block {b}, row {r}, chunk {c}: elements {}..{} and {}..{} are {want:?} \
                     (chapter 7's unpack_block of the row's own block), yours are {got:?}",
                    4 * c,
                    4 * c + 4,
                    16 + 4 * c,
                    20 + 4 * c
                );
            }
        }
    }
}

#[test]
fn ex8_one_token_s_lane_of_the_eight_token_q4_k_kernel() {
    use ch07_simd_parallel::layout::eights_k::{EightsK, RowsK, dot8_q4_k, unpack_q4_k};
    use ch07_simd_parallel::layout::kquant::{Q4_K_BYTES, quantize_q8_k_row};
    let nb = 3;
    let row = random_blocks(nb, Q4_K_BYTES, 2, 81);
    let mut rows = RowsK::default();
    rows.unpack(Q4_K_BYTES, &[&row], unpack_q4_k);
    let acts: Vec<_> = (0..8u64)
        .map(|t| quantize_q8_k_row(&ch01_tensors::random::uniform(256 * nb, 90 + t)))
        .collect();
    let a = EightsK::new(std::array::from_fn(|t| acts[t].as_slice()));
    let want = dot8_q4_k(&rows, 0, &a);
    for (t, &want) in want.iter().enumerate() {
        let mut got = 0.0f32;
        for b in 0..nb {
            got += eights_q4_k_lane(&rows.row(0)[b], &a, b, t);
        }
        assert!(
            got.to_bits() == want.to_bits(),
            "token {t}: your lanes add up to {got} over {nb} blocks, the scalar twin \
             eights_k::dot8_q4_k gives {want} (quant l of token t is at 32·(l/4) + 4t + l%4; the \
             mins meet a.sums; then d·d_a·sum_q − dmin·d_a·sum_m)"
        );
    }
}

#[test]
fn ex9_qwen3_s_qk_norm() {
    // three heads of four values: one loud, one quiet, one all zeros
    let weight = [1.0, 0.5, 2.0, 1.5];
    let row = [
        100.0, -50.0, 20.0, 80.0, //
        0.01, 0.02, -0.03, 0.04, //
        0.0, 0.0, 0.0, 0.0,
    ];
    let eps = 1e-6;
    let mut got = row;
    qk_norm(&mut got, &weight, eps);
    // the chapter's own: the layer's RMSNorm over rows of head_dim
    let want = ch08_gguf::engine::rmsnorm_rows(&row, &weight, eps);
    for h in 0..3 {
        for i in 0..4 {
            let (g, w) = (got[4 * h + i], want[4 * h + i]);
            assert!(
                (g - w).abs() <= 1e-4 * w.abs().max(1.0),
                "head {h}, value {i}: expected {w}, you gave {g}. Each head is normalised by its \
                 own mean of squares (head 1 is quiet, and after the norm it should be as large \
                 as head 0); the whole row: {got:?}"
            );
        }
    }
}

#[test]
fn ex10_gemma_2_s_soft_capped_attention_weights() {
    // one score far above the others: capped at 5, it no longer takes all the weight
    let mut got = [100.0f32, 0.0];
    softcapped_weights(&mut got, 1.0, 5.0);
    let e5 = 5.0f32.exp();
    let want0 = e5 / (e5 + 1.0);
    assert!(
        (got[0] - want0).abs() < 1e-3,
        "scores [100, 0], cap 5: the 100 counts as 5·tanh(20) ≈ 5, so key 0 gets e^5/(e^5+1) = \
         {want0:.4} of the weight; you gave {:.4} (did the cap come before the softmax?)",
        got[0]
    );
    // against the chapter's own soft-cap and a plain softmax
    let raw = [3.0f32, -1.5, 8.0, 0.25, 12.0];
    let (scale, cap) = (0.5, 4.0);
    let mut want: Vec<f32> = raw.iter().map(|s| s * scale).collect();
    ch08_gguf::engine::softcap(&mut want, cap);
    let max = want.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = want.iter().map(|s| (s - max).exp()).sum();
    want.iter_mut().for_each(|s| *s = (*s - max).exp() / sum);
    let mut got = raw;
    softcapped_weights(&mut got, scale, cap);
    let total: f32 = got.iter().sum();
    assert!(
        (total - 1.0).abs() < 1e-5,
        "attention weights sum to 1; yours sum to {total} ({got:?})"
    );
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() < 1e-5,
            "scores {raw:?}, scale {scale}, cap {cap}: key {k}'s weight should be {w:.6} \
             (scale, then cap·tanh(s/cap), then softmax), you gave {g:.6}"
        );
    }
}

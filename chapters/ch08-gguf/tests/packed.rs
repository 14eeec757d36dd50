//! Q4_0, Q4_1, Q5_0, Q4_K and Q6_K matrices interleaved eight rows at a time ([`Packed`]):
//! the file's rows come back out of the groups unchanged, and a group's kernel on every level
//! this CPU has gives the one-row scalar dot of each row and token (chapter 6's; the others',
//! chapter 8's), bit for bit (random rows, any finite f16 scale, one to nine tokens, and the
//! extremes of the 16-bit sums).

use ch06_quantization::Format;
use ch06_quantization::blocks::{BlockQ8_0, BlockQ8_1};
use ch06_quantization::dot::{dot_q4_0_q8_0, dot_q4_1_q8_1};
use ch07_simd_parallel::Isa;
use ch07_simd_parallel::huge::Arena;
use ch07_simd_parallel::kernels::for_isa;
use ch07_simd_parallel::layout::eights::{Rows32, unpack_block};
use ch07_simd_parallel::layout::eights_k::{RowsK, unpack_q4_k, unpack_q6_k};
use ch07_simd_parallel::layout::kquant::{
    BlockQ8K, KQuant, Q8_0Wide, dot_q4_k_q8_k, dot_q5_0_q8_0, dot_q6_k_q8_k,
};
use ch08_gguf::matrix::{Packed, PackedToken};
use proptest::prelude::*;

/// `h` (f16 bits) made finite: an infinity or NaN loses its exponent's top bit.
fn finite(h: u16) -> u16 {
    if h & 0x7c00 == 0x7c00 { h & 0x83ff } else { h }
}

/// `rows` rows of `nb` blocks of `format` as a file stores them: nibbles from `q`, each
/// block's f16 fields (d, and Q4_1's m) from `h`, Q5_0's fifth bits from `qh`.
fn file_rows(format: Format, rows: usize, nb: usize, q: &[u8], h: &[u16], qh: &[u32]) -> Vec<u8> {
    let fields = if format == Format::Q4_1 { 2 } else { 1 };
    (0..rows * nb)
        .flat_map(|i| {
            let mut block: Vec<u8> = (0..fields)
                .flat_map(|f| finite(h[fields * i + f]).to_le_bytes())
                .collect();
            if format == Format::Q5_0 {
                block.extend(qh[i % qh.len()].to_le_bytes());
            }
            block.extend(&q[i * 16..][..16]);
            block
        })
        .collect()
}

/// One token's activations for `format`, `nb` blocks: quants from `q`, f16 fields from `h`.
enum Token {
    Q8_0(Vec<BlockQ8_0>, Vec<i32>),
    Q8_1(Vec<BlockQ8_1>),
    Wide(Vec<Q8_0Wide>),
    /// For Q4_K, or Q6_K if the flag is set.
    K(Vec<BlockQ8K>, bool),
}

fn token(format: Format, nb: usize, q: &[i8], h: &[u16]) -> Token {
    let qs = |b: usize| -> [i8; 32] { q[b * 32..][..32].try_into().unwrap() };
    if format == Format::Q5_0 {
        // chapter 8 widens chapter 6's Q8_0 blocks: the scale as f32, and Σ qs
        let f = |b: usize| ch06_quantization::f16::f16_to_f32_fast(h[b] & 0x7bff);
        return Token::Wide((0..nb).map(|b| Q8_0Wide::new(f(b), qs(b))).collect());
    }
    if format == Format::Q4_1 {
        let a = (0..nb)
            .map(|b| BlockQ8_1 {
                d: h[2 * b] & 0x7bff,
                s: h[2 * b + 1] & 0xfbff,
                qs: qs(b),
            })
            .collect();
        Token::Q8_1(a)
    } else {
        let a: Vec<BlockQ8_0> = (0..nb)
            .map(|b| BlockQ8_0 {
                d: h[b] & 0x7bff,
                qs: qs(b),
            })
            .collect();
        let sums = a
            .iter()
            .map(|b| b.qs.iter().map(|&q| i32::from(q)).sum())
            .collect();
        Token::Q8_0(a, sums)
    }
}

impl Token {
    fn packed(&self) -> PackedToken<'_> {
        match self {
            Token::Q8_0(a, s) => PackedToken::Q4_0(a, s),
            Token::Q8_1(a) => PackedToken::Q4_1(a),
            Token::Wide(a) => PackedToken::Q5_0(a),
            Token::K(a, q6_k) => PackedToken::K(a, if *q6_k { KQuant::Q6_K } else { KQuant::Q4_K }),
        }
    }
    /// Chapter 6's scalar dot of a row as the file stores it.
    fn dot(&self, row: &[u8]) -> f32 {
        match self {
            Token::Q8_0(a, _) => dot_q4_0_q8_0(row, a),
            Token::Q8_1(a) => dot_q4_1_q8_1(row, a),
            // chapter 8's row product: the blocks' dots added in order
            Token::Wide(a) => row
                .chunks_exact(22)
                .zip(a)
                .fold(0.0, |acc, (b, a)| acc + dot_q5_0_q8_0(b, a)),
            Token::K(a, q6_k) => {
                row.chunks_exact(if *q6_k { 210 } else { 144 })
                    .zip(a)
                    .fold(0.0, |acc, (b, a)| match q6_k {
                        false => acc + dot_q4_k_q8_k(b, a),
                        true => acc + dot_q6_k_q8_k(b, a),
                    })
            }
        }
    }
}

/// Packs `w` (`rows` rows of `nb` blocks), checks that every row comes back as it was, and
/// that every group against `tokens`, on every level, gives chapter 6's dots. Returns how
/// many SIMD levels ran.
fn check(format: Format, rows: usize, nb: usize, w: &[u8], tokens: &[Token]) -> usize {
    let cols = format.block_values() * nb;
    let p = Packed::new(format, rows, cols, w).expect("whole groups of rows");
    // the same groups in a piece of an arena (huge pages, where the OS gives them), as the
    // loader packs a model's matrices
    let arena = Arena::new(w.len());
    let in_arena = Packed::new_in(format, rows, cols, w, arena.as_ref()).expect("whole groups");
    for g in 0..rows / 8 {
        assert!(
            in_arena.group(g) == p.group(g),
            "{format:?} group {g} packed into the arena differs from the one on the heap"
        );
    }
    let row_len = w.len() / rows;
    for r in 0..rows {
        assert!(
            p.row_bytes(r) == w[r * row_len..(r + 1) * row_len],
            "{format:?} row {r} does not come back out of its group as the file stored it"
        );
    }
    let mut all = Vec::new();
    p.rows_into(0..rows, &mut all);
    assert!(
        all == w,
        "{format:?}: the rows taken out together differ from the file's"
    );
    // the blocks unpacked straight from the groups, by chapter 7's portable code and by each
    // level's gathers, are those of the file's rows unpacked, for ranges that start and end
    // inside a group too (one buffer for all, as a prefill keeps one from tile to tile)
    let ranges = [0..rows, rows.min(5) - 1..rows, 1..rows - 3];
    let file = |rs: std::ops::Range<usize>| -> Vec<&[u8]> {
        rs.map(|r| &w[r * row_len..(r + 1) * row_len]).collect()
    };
    if let Some(q32) = format.q32() {
        let (mut got, mut want) = (Rows32::default(), Rows32::default());
        for (who, isa) in [("Packed::unpack_rows32", None)].into_iter().chain(
            Isa::available()
                .into_iter()
                .map(|i| ("unpack_packed32", Some(i))),
        ) {
            for rs in ranges.clone() {
                match isa {
                    None => p.unpack_rows32(rs.clone(), &mut got),
                    Some(isa) => for_isa(isa).expect("a level this CPU has").unpack_packed32(
                        &p,
                        rs.clone(),
                        &mut got,
                    ),
                }
                want.unpack(format.block_bytes(), &file(rs.clone()), |b| {
                    unpack_block(q32, b)
                });
                let same = got.blocks == want.blocks
                    && got.data.len() == want.data.len()
                    && got.data.iter().zip(&want.data).all(|(x, y)| {
                        x.q == y.q
                            && x.d.to_bits() == y.d.to_bits()
                            && x.m.to_bits() == y.m.to_bits()
                    });
                assert!(
                    same,
                    "{format:?}: rows {rs:?} unpacked from the groups ({who}, {isa:?}) differ from \
                     the file's rows unpacked"
                );
            }
        }
    }
    if let Some(kquant) = format.kquant() {
        let (mut got, mut want) = (RowsK::default(), RowsK::default());
        for isa in Isa::available() {
            let k = for_isa(isa).expect("a level this CPU has");
            for rs in ranges.clone() {
                k.unpack_packed_k(&p, rs.clone(), &mut got);
                match kquant {
                    KQuant::Q4_K => {
                        want.unpack(format.block_bytes(), &file(rs.clone()), unpack_q4_k)
                    }
                    KQuant::Q6_K => {
                        want.unpack(format.block_bytes(), &file(rs.clone()), unpack_q6_k)
                    }
                }
                let same = got.blocks == want.blocks
                    && got.data.len() == want.data.len()
                    && got.data.iter().zip(&want.data).all(|(x, y)| {
                        x.q == y.q && x.sm == y.sm && x.d.map(f32::to_bits) == y.d.map(f32::to_bits)
                    });
                assert!(
                    same,
                    "{format:?}: rows {rs:?} unpacked from the groups on {isa:?} differ from the \
                     file's rows unpacked"
                );
            }
        }
    }
    let packed: Vec<PackedToken> = tokens.iter().map(Token::packed).collect();
    let mut simd = 0;
    for isa in Isa::available() {
        simd += usize::from(isa != Isa::Scalar);
        for g in 0..rows / 8 {
            let mut out = vec![[0.0f32; 8]; tokens.len()];
            for_isa(isa)
                .expect("a level this CPU has")
                .packed8(p.group(g), &packed, &mut out);
            for (t, (got, tok)) in out.iter().zip(tokens).enumerate() {
                for (lane, got) in got.iter().enumerate() {
                    let r = 8 * g + lane;
                    let want = tok.dot(&w[r * row_len..(r + 1) * row_len]);
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "packed {format:?} on {isa:?}: row {r}, token {t} of {} is {got}, \
                         the one-row scalar dot of the row as stored is {want}",
                        tokens.len()
                    );
                }
            }
        }
    }
    simd
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn packed_groups_give_the_one_row_dots(
        kind in 0usize..3,
        groups in 1usize..=3,
        nb in 1usize..=12,
        n_tokens in 1usize..=9,
        wq in proptest::collection::vec(any::<u8>(), 24 * 12 * 16),
        wh in proptest::collection::vec(any::<u16>(), 24 * 12 * 2),
        aq in proptest::collection::vec(any::<i8>(), 9 * 12 * 32),
        ah in proptest::collection::vec(any::<u16>(), 9 * 12 * 2),
        qh in proptest::collection::vec(any::<u32>(), 24 * 12),
    ) {
        let format = [Format::Q4_0, Format::Q4_1, Format::Q5_0][kind];
        let rows = 8 * groups;
        let w = file_rows(format, rows, nb, &wq, &wh, &qh);
        let tokens: Vec<Token> = (0..n_tokens)
            .map(|t| token(format, nb, &aq[t * nb * 32..], &ah[t * nb * 2..]))
            .collect();
        check(format, rows, nb, &w, &tokens);
    }
}

#[test]
fn packed_groups_are_exact_at_the_extremes() {
    let mut simd = 0;
    for format in [
        Format::Q4_0,
        Format::Q4_1,
        Format::Q5_0,
        Format::Q4_K,
        Format::Q6_K,
    ] {
        // every quant at its largest (Q5_0: 31, with all fifth bits; the K-quants' scales:
        // all bits set) against −128 or 127: the 16-bit pair sums at their largest
        for (wq, aq) in [
            (0xffu8, -128i8),
            (0xff, 127),
            (0x00, -128),
            (0x0f, 127),
            (0xf0, -127),
            (0x7f, 127),
            (0x80, -127),
        ] {
            let (rows, nb) = (16, if format.kquant().is_some() { 3 } else { 20 });
            let (w, tokens): (Vec<u8>, Vec<Token>) = if format.kquant().is_some() {
                let q6_k = format == Format::Q6_K;
                let w = vec![wq; rows * nb * 210];
                let tokens = (0..5).map(|_| k_token(q6_k, nb, &vec![aq; nb * 256], &[0x3800; 3]));
                let f16s = [0x3c00, 0xb800].repeat(rows * nb);
                (k_rows(q6_k, rows, nb, &w, &f16s), tokens.collect())
            } else {
                let f16s = [0x3c00, 0xb800].repeat(rows * nb);
                let w = vec![wq; rows * nb * 16];
                let w = file_rows(format, rows, nb, &w, &f16s, &[u32::MAX, 0x0f0f_f0f0, 0]);
                let a = [0x3800, 0x4000].repeat(nb);
                let tokens = (0..5).map(|_| token(format, nb, &vec![aq; nb * 32], &a));
                (w, tokens.collect())
            };
            simd += check(format, rows, nb, &w, &tokens);
        }
    }
    if Isa::Avx2.supported() {
        assert!(
            simd > 0,
            "the AVX2 level should have run its packed kernels"
        );
    }
}

/// `rows` rows of `nb` Q4_K (or `q6_k`) blocks: random bytes from `q`, the f16 fields
/// (Q4_K's d and dmin, Q6_K's d) from `h`, made finite.
fn k_rows(q6_k: bool, rows: usize, nb: usize, q: &[u8], h: &[u16]) -> Vec<u8> {
    let (bytes, fields) = if q6_k { (210, 1) } else { (144, 2) };
    (0..rows * nb)
        .flat_map(|i| {
            let mut block = q[i * bytes..][..bytes].to_vec();
            let at = if q6_k { 208 } else { 0 };
            for f in 0..fields {
                let v = finite(h[fields * i + f]).to_le_bytes();
                block[at + 2 * f..at + 2 * f + 2].copy_from_slice(&v);
            }
            block
        })
        .collect()
}

/// A token's Q8_K blocks: quants from `q`, each block's sums of 16 as Q8_K keeps them.
fn k_token(q6_k: bool, nb: usize, q: &[i8], d: &[u16]) -> Token {
    let blocks = (0..nb)
        .map(|b| {
            let qs: [i8; 256] = q[256 * b..][..256].try_into().unwrap();
            let bsums =
                std::array::from_fn(|g| qs[16 * g..][..16].iter().map(|&v| i16::from(v)).sum());
            let d = ch06_quantization::f16::f16_to_f32_fast(d[b] & 0x7bff);
            BlockQ8K { d, qs, bsums }
        })
        .collect();
    Token::K(blocks, q6_k)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn packed_k_quant_groups_give_the_one_row_dots(
        q6_k in any::<bool>(),
        groups in 1usize..=2,
        nb in 1usize..=3,
        n_tokens in 1usize..=9,
        wq in proptest::collection::vec(any::<u8>(), 16 * 3 * 210),
        wh in proptest::collection::vec(any::<u16>(), 16 * 3 * 2),
        aq in proptest::collection::vec(any::<i8>(), 9 * 3 * 256),
        ad in proptest::collection::vec(any::<u16>(), 9 * 3),
    ) {
        let format = if q6_k { Format::Q6_K } else { Format::Q4_K };
        let rows = 8 * groups;
        let w = k_rows(q6_k, rows, nb, &wq, &wh);
        let tokens: Vec<Token> = (0..n_tokens)
            .map(|t| k_token(q6_k, nb, &aq[t * nb * 256..], &ad[t * nb..]))
            .collect();
        check(format, rows, nb, &w, &tokens);
    }
}

#[test]
fn only_whole_groups_of_rows_are_packed() {
    let w = vec![0u8; 12 * 20];
    assert!(
        Packed::new(Format::Q4_1, 12, 32, &w).is_none(),
        "12 rows are not whole eights"
    );
    assert!(
        Packed::new(Format::Q4_0, 8, 33, &[0u8; 8 * 18]).is_none(),
        "33 columns are not whole blocks"
    );
    assert!(
        Packed::new(Format::Q4_0, 8, 32, &[0u8; 8 * 18 - 1]).is_none(),
        "a short buffer"
    );
    assert!(Packed::new(Format::Q4_0, 8, 32, &[0u8; 8 * 18]).is_some());
    assert!(Packed::new(Format::Q5_0, 8, 32, &[0u8; 8 * 22]).is_some());
    assert!(
        Packed::new(Format::Q4_K, 8, 32, &[0u8; 8 * 18]).is_none(),
        "a K-quant's blocks are 256 columns"
    );
    assert!(Packed::new(Format::Q4_K, 8, 256, &[0u8; 8 * 144]).is_some());
    assert!(Packed::new(Format::Q6_K, 8, 512, &[0u8; 16 * 210]).is_some());
}

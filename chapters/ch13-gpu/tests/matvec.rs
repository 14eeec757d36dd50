//! Each product shader against chapter 6's scalar dot products on the same blocks: random
//! blocks of awkward shapes, and real tensors of SmolLM2's file. Runs on any adapter; CI's
//! is Mesa's lavapipe (`bash scripts/test-deps.sh`).
//!
//! The tolerance, derived. The GPU multiplies the very blocks the CPU does: the input is
//! quantized by chapter 6's functions on the host (`acts::quantize`), so each block's
//! integer dot `sumi` is the same integer on both, and each block's term
//! `t_b = sumi·(d_w·d_a)` (Q4_1: `(d_w·d_a)·sumi + m·s`) is the same few float operations.
//! Two things differ:
//! 1. the order the `n` terms of a row are added in (the CPU left to right, the GPU in 32
//!    lane sums and a tree). Any order of `n − 1` additions in f32 is within
//!    `γ(n−1)·Σ|t_b|` of the exact sum (Higham, *Accuracy and Stability of Numerical
//!    Algorithms*, §4.2), `γ(k) = k·u/(1 − k·u)`, `u = 2⁻²⁴`; the CPU's and the GPU's
//!    results are each that close to it, so within twice that of each other;
//! 2. a shader compiler may fuse a multiply and an add (an FMA), which rounds once where
//!    the CPU rounds twice: at most 2 roundings per term, `2u·|parts of t_b|`.
//!
//! So `|gpu − cpu| ≤ (2·γ(n−1) + 2u)·Σ_b mag_b`, with `mag_b` the magnitudes of a term's
//! parts; [`bound`] computes it per row, rounded up by 1% for γ's denominator.
//!
//! The K-quants (Q4_K, Q6_K) adapt it. The CPU (chapter 7's `dot_q4_k_q8_k`) adds a whole
//! super-block's integers first, `Q = Σ_s scale_s·dot_s` and `Mi = Σ_s min_s·sum_s`, and
//! rounds once per super-block: `(d·d_a)·Q − (dmin·d_a)·Mi`. The GPU takes one block of 32 (a
//! sub-block) per step, with the same exact integers for that sub-block, so it adds the
//! parts `D·q_s` and `−M·m_s` (`D = d·d_a`, `M = dmin·d_a`, the same f32 products on both)
//! one sub-block at a time. Both are sums of the same exact parts `p`: the GPU's P of them
//! (two a sub-block for Q4_K, one for Q6_K), the CPU's fewer, grouped by super-block.
//! Each part costs at most two roundings (integer to f32, the multiply; an FMA only removes
//! one), and at most P − 1 additions join them, so each side is within `γ(P+1)·Σ|p|` of
//! the exact sum (Higham §3.1 and §4.2; `|D·Q| ≤ Σ_s |D·q_s|` covers the CPU's grouping):
//! `|gpu − cpu| ≤ 2·γ(P+1)·Σ|p|`. [`cpu_row`] gets every `|p|` from the CPU's own dot on a
//! copy of the activations with all but one sub-block (or its sums) zeroed.

use ch01_tensors::models;
use ch06_quantization::Format;
use ch06_quantization::blocks::{BlockQ4_1, BlockQ8_0, BlockQ8_1, QK};
use ch06_quantization::dot::{dot_q4_0_q8_0, dot_q4_1_q8_1, dot_q8_0_q8_0};
use ch06_quantization::quantize::{quantize_q4_0, quantize_q4_1, quantize_q8_0, quantize_q8_1};
use ch07_simd_parallel::layout::kquant::{
    BlockQ8K, Q8_0Wide, QK_K, dot_q4_k_q8_k, dot_q5_0_q8_0, dot_q6_k_q8_k, quantize_q8_k,
};
use ch13_gpu::matvec::Reduction;
use ch13_gpu::random::{self, Rng};
use ch13_gpu::split::{SplitMatrix, matvec_split};
use ch13_gpu::{Error, Gpu, GpuMatrix, MatVec, matvec};

fn gpu() -> Gpu {
    Gpu::open().unwrap_or_else(|e| {
        panic!("{e}\nthe GPU tests need a Vulkan adapter; run: bash scripts/test-deps.sh")
    })
}

/// One row's CPU product (chapter 6's dot, left to right) and `Σ mag_b`.
fn cpu_row(format: Format, row: &[u8], x: &[f32]) -> (f32, f64) {
    let nb = row.len() / format.block_bytes();
    let bb = format.block_bytes();
    let xs = x.as_chunks::<QK>().0;
    let mut mag = 0.0f64;
    let value = match format {
        Format::Q4_0 | Format::Q8_0 => {
            let a: Vec<BlockQ8_0> = xs.iter().map(quantize_q8_0).collect();
            let dot = if format == Format::Q4_0 {
                dot_q4_0_q8_0
            } else {
                dot_q8_0_q8_0
            };
            for b in 0..nb {
                mag += f64::from(dot(&row[b * bb..(b + 1) * bb], &a[b..b + 1]).abs());
            }
            dot(row, &a)
        }
        Format::Q4_1 => {
            let a: Vec<BlockQ8_1> = xs.iter().map(quantize_q8_1).collect();
            for b in 0..nb {
                let block = &row[b * bb..(b + 1) * bb];
                let t = dot_q4_1_q8_1(block, &a[b..b + 1]);
                let ms = BlockQ4_1(block.try_into().unwrap()).min() * a[b].sum();
                mag += f64::from((t - ms).abs()) + f64::from(ms.abs());
            }
            dot_q4_1_q8_1(row, &a)
        }
        Format::Q5_0 => {
            // chapter 7's scalar Q5_0 block dot, added left to right as chapter 6's dots add
            let mut sum = 0.0f32;
            for (b, x) in xs.iter().enumerate().take(nb) {
                let t = dot_q5_0_q8_0(
                    &row[b * bb..(b + 1) * bb],
                    &Q8_0Wide::from(&quantize_q8_0(x)),
                );
                mag += f64::from(t.abs());
                sum += t;
            }
            sum
        }
        Format::Q4_K | Format::Q6_K => {
            let dot = if format == Format::Q4_K {
                dot_q4_k_q8_k
            } else {
                dot_q6_k_q8_k
            };
            let a: Vec<BlockQ8K> = x.as_chunks::<QK_K>().0.iter().map(quantize_q8_k).collect();
            // the super-blocks' terms added left to right, as chapter 7's scalar row dot does
            let mut sum = 0.0f32;
            for (b, a) in a.iter().enumerate() {
                let block = &row[b * bb..(b + 1) * bb];
                sum += dot(block, a);
                mag += k_parts(dot, block, a, format == Format::Q4_K);
            }
            sum
        }
        Format::F32 | Format::Int8 => unreachable!("no shader for {format:?}"),
    };
    (value, mag)
}

/// `Σ|p|` over one K-quant super-block's parts as the GPU adds them (the module's comment):
/// per sub-block of 32, `|D·q_s|` (the CPU's dot with every other sub-block's quants and
/// every sum zeroed) and, for Q4_K, `|M·m_s|` (with every quant and every other sum zeroed).
fn k_parts(dot: fn(&[u8], &BlockQ8K) -> f32, block: &[u8], a: &BlockQ8K, mins: bool) -> f64 {
    let mut mag = 0.0f64;
    for s in 0..8 {
        let mut only = a.clone();
        only.bsums = [0; 16];
        for (l, q) in only.qs.iter_mut().enumerate() {
            if l / 32 != s {
                *q = 0;
            }
        }
        mag += f64::from(dot(block, &only).abs());
        if mins {
            let mut sums = a.clone();
            sums.qs = [0; QK_K];
            for (g, v) in sums.bsums.iter_mut().enumerate() {
                if g / 2 != s {
                    *v = 0;
                }
            }
            mag += f64::from(dot(block, &sums).abs());
        }
    }
    mag
}

/// The largest `|gpu − cpu|` the two orders of summation allow (the module's comment), for
/// a row of `cols` values of `format`.
fn bound(format: Format, cols: usize, mag: f64) -> f64 {
    let u = f64::from(f32::EPSILON) / 2.0;
    let gamma = |k: usize| k as f64 * u; // γ's denominator: the 1% below
    let blocks = cols / QK;
    match format {
        Format::Q4_0 | Format::Q8_0 | Format::Q4_1 | Format::Q5_0 => {
            (2.0 * gamma(blocks.max(1) - 1) + 2.0 * u) * mag * 1.01
        }
        // P parts: two a sub-block of 32 (scale and min) for Q4_K, one for Q6_K
        Format::Q4_K => 2.0 * gamma(2 * blocks + 1) * mag * 1.01,
        Format::Q6_K => 2.0 * gamma(blocks + 1) * mag * 1.01,
        Format::F32 | Format::Int8 => unreachable!("no shader for {format:?}"),
    }
}

/// Runs the product on the GPU and checks every row against the CPU's, with a message
/// that names the first row out of bounds.
fn check(gpu: &Gpu, shaders: &MatVec, what: &str, m: &GpuMatrix, blocks: &[u8], x: &[f32]) {
    let got = matvec(gpu, shaders, m, x).unwrap_or_else(|e| panic!("{what}: {e}"));
    check_rows(what, m.format, m.rows, m.cols, blocks, x, &got);
}

/// `got`, the GPU's product of `blocks` and `x`, against the CPU's, row by row.
fn check_rows(
    what: &str,
    format: Format,
    rows: usize,
    cols: usize,
    blocks: &[u8],
    x: &[f32],
    got: &[f32],
) {
    let m = Shape { format, rows, cols };
    assert_eq!(got.len(), m.rows, "{what}: one value per row");
    let row_bytes = m.format.row_bytes(m.cols);
    let mut worst = 0.0f64;
    for (r, &g) in got.iter().enumerate() {
        let (want, mag) = cpu_row(m.format, &blocks[r * row_bytes..(r + 1) * row_bytes], x);
        let diff = (f64::from(g) - f64::from(want)).abs();
        let allowed = bound(m.format, m.cols, mag);
        assert!(
            diff <= allowed,
            "{what}: row {r} of {}: the GPU gives {g}, the CPU {want}; they differ by {diff:e}, \
             more than the {allowed:e} a different order of f32 additions can explain",
            m.rows
        );
        if allowed > 0.0 {
            worst = worst.max(diff / allowed);
        }
    }
    eprintln!(
        "{what}: {} rows agree, worst at {:.3} of the bound",
        m.rows, worst
    );
}

struct Shape {
    format: Format,
    rows: usize,
    cols: usize,
}

/// `rows × cols` random weights quantized to `format` by chapter 6, as raw blocks.
/// Q5_0 and the K-quants have no quantizer in this book (their files come quantized):
/// random raw blocks.
fn quantized(format: Format, rows: usize, cols: usize, rng: &mut Rng) -> Vec<u8> {
    if matches!(format, Format::Q5_0 | Format::Q4_K | Format::Q6_K) {
        return random::blocks(format, rows, cols, rng);
    }
    let mut out = vec![0u8; rows * format.row_bytes(cols)];
    let values: Vec<f32> = (0..rows * cols).map(|_| rng.signed()).collect();
    let bb = format.block_bytes();
    for (x, block) in values
        .as_chunks::<QK>()
        .0
        .iter()
        .zip(out.chunks_exact_mut(bb))
    {
        match format {
            Format::Q4_0 => quantize_q4_0(x, block.try_into().unwrap()),
            Format::Q4_1 => quantize_q4_1(x, block.try_into().unwrap()),
            Format::Q8_0 => quantize_q8_0(x).write(block.try_into().unwrap()),
            _ => unreachable!(),
        }
    }
    out
}

/// The product shaders with each reduction: workgroup memory, and subgroups (lavapipe has
/// them; an adapter without them fails here, saying so).
fn both(gpu: &Gpu) -> [MatVec; 2] {
    [Reduction::Workgroup, Reduction::Subgroup]
        .map(|r| MatVec::with(gpu, r).unwrap_or_else(|e| panic!("the {} reduction: {e}", r.name())))
}

/// Shapes that miss every multiple: rows not a multiple of 4 (the rows a workgroup takes),
/// blocks a row not a multiple of 32 (the lanes that share a row), one block, one row.
const SHAPES: [(usize, usize); 6] = [
    (1, 32),
    (5, 32 * 45),
    (7, 32 * 33),
    (130, 32 * 64),
    (3, 32 * 100),
    (64, 32 * 17),
];

/// The same for the K-quants, whose rows are whole super-blocks of 256 (8 blocks of 32):
/// rows not a multiple of 4, blocks a row 8, 40, 72, 136, 256 and 24.
const K_SHAPES: [(usize, usize); 6] = [
    (1, 256),
    (5, 256 * 5),
    (7, 256 * 9),
    (130, 256 * 17),
    (3, 256 * 32),
    (66, 256 * 3),
];

fn shapes(format: Format) -> [(usize, usize); 6] {
    if format.block_values() == QK_K {
        K_SHAPES
    } else {
        SHAPES
    }
}

#[test]
fn every_shader_matches_the_cpu_on_quantized_random_rows() {
    let gpu = gpu();
    let mut rng = Rng::new(60);
    for shaders in both(&gpu) {
        let reduction = shaders.reduction.name();
        for format in ch13_gpu::matvec::FORMATS {
            for (rows, cols) in shapes(format) {
                let blocks = quantized(format, rows, cols, &mut rng);
                let x: Vec<f32> = (0..cols).map(|_| 3.0 * rng.signed()).collect();
                let m = GpuMatrix::from_blocks(&gpu, format, rows, cols, &blocks).unwrap();
                let what = format!("{} {rows}x{cols}, {reduction} reduction", format.name());
                check(&gpu, &shaders, &what, &m, &blocks, &x);
            }
        }
    }
}

#[test]
fn every_shader_matches_the_cpu_on_raw_random_blocks() {
    // Every quant byte random (Q8_0's −128 too, which quantizing never makes), scales
    // of both signs for Q4_1's minimum: the shader reads what is there, not what it expects.
    let gpu = gpu();
    let mut rng = Rng::new(13);
    for shaders in both(&gpu) {
        let reduction = shaders.reduction.name();
        for format in ch13_gpu::matvec::FORMATS {
            let k = format.block_values() / QK; // 8 for the K-quants
            for (rows, cols) in [(9, 32 * 47 * k), (33, 32 * 3 * k)] {
                let blocks = random::blocks(format, rows, cols, &mut rng);
                let x: Vec<f32> = (0..cols).map(|_| rng.signed()).collect();
                let m = GpuMatrix::from_blocks(&gpu, format, rows, cols, &blocks).unwrap();
                let what = format!("raw {} {rows}x{cols}, {reduction} reduction", format.name());
                check(&gpu, &shaders, &what, &m, &blocks, &x);
            }
        }
    }
}

/// Tensors `names` of the file at `path`, each against the CPU; the formats they held.
fn check_tensors(path: &std::path::Path, names: &[&str], seed: u64) -> Vec<Format> {
    let path = models::require(path).unwrap_or_else(|e| panic!("{e}"));
    let file = ch08_gguf::GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let gpu = gpu();
    let shaders = MatVec::new(&gpu).unwrap_or_else(|e| panic!("{e}"));
    let mut rng = Rng::new(seed);
    let mut formats = Vec::new();
    for name in names {
        let info = file.info(name).unwrap_or_else(|e| panic!("{e}"));
        let data = file.data(info);
        let m = GpuMatrix::from_tensor(&gpu, info, data).unwrap_or_else(|e| panic!("{e}"));
        formats.push(m.format);
        let x: Vec<f32> = (0..m.cols).map(|_| rng.signed()).collect();
        check(&gpu, &shaders, name, &m, data, &x);
    }
    formats
}

#[test]
fn smollm2_tensors_match_the_cpu() {
    // The Q4_1 file's products, and its Q8_0 embedding (the tied output matrix).
    let names = [
        "blk.0.attn_q.weight",
        "blk.0.attn_k.weight",
        "blk.3.ffn_down.weight",
        "blk.29.ffn_up.weight",
        "token_embd.weight",
    ];
    let formats = check_tensors(&models::smollm2_gguf(), &names, 135);
    assert!(
        formats.contains(&Format::Q4_1) && formats.contains(&Format::Q8_0),
        "SmolLM2's file should hold Q4_1 and Q8_0 tensors; it held {formats:?}"
    );
}

#[test]
fn gemma3_q5_0_tensors_match_the_cpu() {
    let names = [
        "blk.0.attn_q.weight",
        "blk.0.attn_k.weight",
        "blk.5.ffn_up.weight",
    ];
    let formats = check_tensors(&models::gemma3_gguf(), &names, 270);
    assert!(
        formats.iter().all(|&f| f == Format::Q5_0),
        "these Gemma-3 tensors should be Q5_0; they were {formats:?}"
    );
}

#[test]
fn gemma3_k_quant_tensors_match_the_cpu() {
    // Q4_K_M's two K-quants: Q4_K attention outputs and FFN down-projections, Q6_K for some
    // of the down-projections.
    let names = [
        "blk.0.attn_output.weight",
        "blk.2.ffn_down.weight",
        "blk.0.ffn_down.weight",
    ];
    let formats = check_tensors(&models::gemma3_gguf(), &names, 256);
    assert_eq!(
        formats,
        [Format::Q4_K, Format::Q4_K, Format::Q6_K],
        "Gemma-3's Q4_K_M file should hold these tensors as Q4_K, Q4_K, Q6_K"
    );
}

#[test]
fn a_matrix_split_over_several_buffers_gives_the_unsplit_bits() {
    // A limit of 100 rows a binding: parts of whole steps of the offset alignment, the last
    // part shorter. Every row is the same shader on the same blocks: the same bits.
    let gpu = gpu();
    let shaders = MatVec::new(&gpu).unwrap_or_else(|e| panic!("{e}"));
    let mut rng = Rng::new(128);
    for format in [Format::Q8_0, Format::Q4_K] {
        let (rows, cols) = (300, 512);
        let blocks = random::blocks(format, rows, cols, &mut rng);
        let x: Vec<f32> = (0..cols).map(|_| rng.signed()).collect();
        let whole = GpuMatrix::from_blocks(&gpu, format, rows, cols, &blocks).unwrap();
        let want = matvec(&gpu, &shaders, &whole, &x).unwrap();
        let limit = (100 * format.row_bytes(cols)) as u64;
        let split = SplitMatrix::with_limit(&gpu, format, rows, cols, &blocks, limit).unwrap();
        let sizes: Vec<usize> = split.parts.iter().map(|(_, p)| p.rows).collect();
        assert!(
            sizes.len() > 2 && sizes.iter().sum::<usize>() == rows,
            "{}: 300 rows under a 100-row limit should be three parts or more, all the rows; \
             they were {sizes:?}",
            format.name()
        );
        let got = matvec_split(&gpu, &shaders, &split, &x).unwrap();
        for (r, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{}: row {r} split into parts of {sizes:?} gives {g}, unsplit {w}",
                format.name()
            );
        }
    }
    let blocks = vec![0u8; 300 * Format::Q8_0.row_bytes(512)];
    match SplitMatrix::with_limit(&gpu, Format::Q8_0, 300, 512, &blocks, 100) {
        Err(Error::Input(e)) => eprintln!("a limit below one row: {e}"),
        Err(e) => panic!("a limit below one row should be an input error, not {e}"),
        Ok(_) => panic!("a limit below one row was accepted"),
    }
}

#[test]
fn gemma3_embedding_split_matches_the_cpu() {
    // 262144 rows of 640 Q8_0 weights, 170 MiB: more than lavapipe's 128 MiB binding, so
    // here it is split; the tied output matrix, all its rows against the CPU.
    let path = models::require(&models::gemma3_gguf()).unwrap_or_else(|e| panic!("{e}"));
    let file = ch08_gguf::GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let gpu = gpu();
    let shaders = MatVec::new(&gpu).unwrap_or_else(|e| panic!("{e}"));
    let info = file
        .info("token_embd.weight")
        .unwrap_or_else(|e| panic!("{e}"));
    let data = file.data(info);
    let (cols, rows) = (info.dims[0] as usize, info.dims[1] as usize);
    let format = info.ty.format().unwrap();
    let m =
        SplitMatrix::from_blocks(&gpu, format, rows, cols, data).unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "token_embd.weight: {} bytes in {} part(s) (this device's binding limit: {})",
        data.len(),
        m.parts.len(),
        gpu.limits.max_storage_buffer_binding_size
    );
    let mut rng = Rng::new(640);
    let x: Vec<f32> = (0..cols).map(|_| rng.signed()).collect();
    let got = matvec_split(&gpu, &shaders, &m, &x).unwrap_or_else(|e| panic!("{e}"));
    check_rows("token_embd.weight", format, rows, cols, data, &x, &got);
}

#[test]
fn bad_shapes_and_formats_are_errors() {
    let gpu = gpu();
    let shaders = MatVec::new(&gpu).unwrap_or_else(|e| panic!("{e}"));
    let blocks = vec![0u8; 2 * Format::Q4_0.row_bytes(64)];
    let input = |r: Result<GpuMatrix, Error>, what: &str| match r {
        Err(Error::Input(m)) => eprintln!("{what}: {m}"),
        Err(e) => panic!("{what}: an input error was expected, not {e}"),
        Ok(_) => panic!("{what}: accepted"),
    };
    input(
        GpuMatrix::from_blocks(&gpu, Format::Q4_0, 3, 64, &blocks),
        "too few bytes",
    );
    input(
        GpuMatrix::from_blocks(&gpu, Format::Q4_0, 2, 48, &blocks),
        "half a block",
    );
    let int8 = vec![0u8; 2 * Format::Int8.row_bytes(256)];
    let no_shader = GpuMatrix::from_blocks(&gpu, Format::Int8, 2, 256, &int8);
    input(no_shader, "no Int8 shader");
    let k_blocks = vec![0u8; 2 * Format::Q4_K.row_bytes(256)];
    input(
        GpuMatrix::from_blocks(&gpu, Format::Q4_K, 2, 128, &k_blocks[..144]),
        "half a super-block",
    );
    input(
        GpuMatrix::from_blocks(&gpu, Format::Q4_0, usize::MAX, 64, &blocks),
        "huge",
    );
    let m = GpuMatrix::from_blocks(&gpu, Format::Q4_0, 2, 64, &blocks).unwrap();
    match matvec(&gpu, &shaders, &m, &[1.0; 32]) {
        Err(Error::Input(e)) => eprintln!("short vector: {e}"),
        other => panic!(
            "a short vector should be an input error: {:?}",
            other.map(|v| v.len())
        ),
    }
}

//! The tiled product (prefill, many tokens a dispatch) against chapter 8's CPU product of
//! the same blocks and the same tokens, and against the matrix-vector shader token by token.
//!
//! Against the CPU every output must be the same bits. The tiled shader multiplies the same
//! blocks by the same quantized activations with the format's `term`, the CPU's rounding of
//! a block of 32 (a K-quant's: of a whole super-block), and adds each row's terms left to
//! right, as chapter 6's scalar dot does and chapter 8's `Matrix::matmul` does on every path
//! (its documented promise: the scalar kernel's bits). The same roundings in the same order
//! give the same bits, as long as the compiler keeps each term rounded on its own before it
//! joins the sum (`alone` in `shaders/matmul.wgsl`). Each output is held to the
//! matrix-vector test's bound (`common/mod.rs`) first, so that a wrong product reads as one,
//! and then to the CPU's bits.
//!
//! The matrix-vector shader adds in 32 lane sums and a tree, another order: the tiled
//! product is held to the same bound against it (both are sums of the very same terms), and
//! how many of its outputs are the same bits is printed.

mod common;

use ch01_tensors::models;
use ch06_quantization::{Bytes, Format, QMatrix};
use ch08_gguf::matrix::{KMatrix, Matrix};
use ch13_gpu::matmul::{MatMul, TILE_ROWS, TILE_TOKENS, Tiled, Tiling, matmul};
use ch13_gpu::matvec::FORMATS;
use ch13_gpu::quantize::{Quantize, QuantizeStep};
use ch13_gpu::random::{self, Rng};
use ch13_gpu::{Error, GpuMatrix, MatVec, matvec};
use common::{bound, cpu_row, gpu};

/// Chapter 8's matrix over `blocks`: chapter 6's for Q4_0, Q8_0, Q4_1, a KMatrix for the rest.
fn cpu_matrix(format: Format, rows: usize, cols: usize, blocks: &[u8]) -> Matrix {
    let bytes = Bytes::from_vec(blocks.to_vec());
    let m = match format {
        Format::Q4_0 | Format::Q8_0 | Format::Q4_1 => {
            QMatrix::from_blocks(format, rows, cols, bytes).map(Matrix::Q)
        }
        Format::Q5_0 | Format::Q4_K | Format::Q6_K => {
            KMatrix::new(format, rows, cols, bytes).map(Matrix::K)
        }
        Format::F32 | Format::Int8 => unreachable!("no shader for {format:?}"),
    };
    m.unwrap_or_else(|e| panic!("{}: {e}", format.name()))
}

/// A shape per format that misses every multiple: rows past a whole number of tiles, and a
/// row's blocks past a whole number of steps of 8 (the K-quants' rows are whole
/// super-blocks, 8 blocks each, so theirs are whole steps).
fn shape(format: Format) -> (usize, usize) {
    if format.block_values() == 256 {
        (2 * TILE_ROWS + 5, 256 * 5)
    } else {
        (2 * TILE_ROWS + 5, 32 * 45)
    }
}

/// Output `(t, r)` of the tiled product, `got`, is the CPU's `want` to the bit (the module's
/// comment says why it must be).
fn same_as_cpu(what: &str, t: usize, r: usize, got: f32, want: f32) {
    assert!(
        got.to_bits() == want.to_bits(),
        "{what}: token {t}, row {r}: the tiled product gives {got:e}, chapter 8's CPU product \
         {want:e}: close, but not the same bits, so the shader did not add this row's terms \
         as the CPU does, each rounded on its own and then added left to right"
    );
}

/// Token counts: one, fewer than a tile, whole tiles, and whole tiles and a part.
const TOKENS: [usize; 4] = [1, 7, 64, 2 * TILE_TOKENS + 5];

#[test]
fn the_tiled_product_matches_the_cpu_and_the_matrix_vector_shader() {
    let gpu = gpu();
    let shaders = MatVec::new(&gpu).unwrap();
    let (kernels, many) = ch08_gguf::kernels().unwrap_or_else(|e| panic!("{e}"));
    let mut rng = Rng::new(0x60);
    // both tilings (one token an invocation; four, where the format unpacks a block once)
    for (tiling, format) in Tiling::ALL
        .into_iter()
        .flat_map(|t| FORMATS.map(|f| (t, f)))
    {
        let tiled = MatMul::with(&gpu, tiling).unwrap();
        let (rows, cols) = shape(format);
        let blocks = random::blocks(format, rows, cols, &mut rng);
        let m = GpuMatrix::from_blocks(&gpu, format, rows, cols, &blocks).unwrap();
        let cpu = cpu_matrix(format, rows, cols, &blocks);
        let row_bytes = format.row_bytes(cols);
        for tokens in TOKENS {
            let what = format!(
                "{} {rows}x{cols}, {tokens} tokens, tiling {}",
                format.name(),
                tiling.name()
            );
            let x: Vec<f32> = (0..tokens * cols).map(|_| 2.0 * rng.signed()).collect();
            let got =
                matmul(&gpu, &tiled, &m, &x, tokens).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(got.len(), tokens * rows, "{what}: (tokens, rows) outputs");
            let mut want = vec![0.0f32; tokens * rows];
            cpu.matmul(kernels, many, &mut want, &x, tokens);
            let (mut same_matvec, mut worst) = (0, 0.0f64);
            for t in 0..tokens {
                let xt = &x[t * cols..(t + 1) * cols];
                let one = matvec(&gpu, &shaders, &m, xt).unwrap_or_else(|e| panic!("{what}: {e}"));
                for r in 0..rows {
                    let g = got[t * rows + r];
                    let (_, mag) = cpu_row(format, &blocks[r * row_bytes..(r + 1) * row_bytes], xt);
                    let allowed = bound(format, cols, mag);
                    for (other, name) in [
                        (want[t * rows + r], "chapter 8's CPU product"),
                        (one[r], "the matrix-vector shader"),
                    ] {
                        let diff = (f64::from(g) - f64::from(other)).abs();
                        assert!(
                            diff <= allowed,
                            "{what}: token {t}, row {r}: the tiled product gives {g}, {name} \
                             {other}; they differ by {diff:e}, more than the {allowed:e} a \
                             different order of f32 additions can explain"
                        );
                        if allowed > 0.0 {
                            worst = worst.max(diff / allowed);
                        }
                    }
                    same_as_cpu(&what, t, r, g, want[t * rows + r]);
                    same_matvec += usize::from(g.to_bits() == one[r].to_bits());
                }
            }
            let n = tokens * rows;
            eprintln!(
                "{what}: the same bits as the CPU in all {n} outputs; as the matrix-vector \
                 shader in {same_matvec} of {n}, the others within the bound (worst at \
                 {worst:.3} of it)"
            );
        }
    }
}

#[test]
fn tokens_quantized_on_the_gpu_give_the_same_product() {
    // The many tokens' rows quantized in one dispatch over all their blocks, then the tiled
    // product, in one submission: the same bits as `matmul`, which quantizes on the host.
    let gpu = gpu();
    let (tiled, quantize) = (MatMul::new(&gpu).unwrap(), Quantize::new(&gpu).unwrap());
    let mut rng = Rng::new(61);
    let tokens = TILE_TOKENS + 3;
    for format in FORMATS {
        let (rows, cols) = shape(format);
        let blocks = random::blocks(format, rows, cols, &mut rng);
        let m = GpuMatrix::from_blocks(&gpu, format, rows, cols, &blocks).unwrap();
        let x: Vec<f32> = (0..tokens * cols).map(|_| rng.signed()).collect();
        let input = gpu.upload_f32("x", &x, wgpu::BufferUsages::empty());
        let product = Tiled::new(&gpu, &tiled, &m, tokens).unwrap();
        let activation = format.activation().unwrap();
        let blocks_all = tokens * cols / 32;
        let step = QuantizeStep::new(
            &gpu,
            &quantize,
            activation,
            &input,
            &product.acts,
            blocks_all,
        )
        .unwrap();
        gpu.submit_pass("quantize, then the tiled product", |pass| {
            step.record(pass);
            product.record(pass);
        })
        .unwrap();
        let on_gpu = gpu.read_f32(&product.out, tokens * rows).unwrap();
        let on_host = matmul(&gpu, &tiled, &m, &x, tokens).unwrap();
        for (i, (g, h)) in on_gpu.iter().zip(&on_host).enumerate() {
            assert_eq!(
                g.to_bits(),
                h.to_bits(),
                "{}: token {}, row {}: quantized on the GPU {g}, on the host {h}",
                format.name(),
                i / rows,
                i % rows
            );
        }
    }
}

#[test]
fn fewer_tokens_through_the_same_binding() {
    // Bound for 37 tokens, run for 5: the same bits as a product bound for 5.
    let gpu = gpu();
    let tiled = MatMul::new(&gpu).unwrap();
    let mut rng = Rng::new(62);
    let (format, (rows, cols)) = (Format::Q4_0, shape(Format::Q4_0));
    let blocks = random::blocks(format, rows, cols, &mut rng);
    let m = GpuMatrix::from_blocks(&gpu, format, rows, cols, &blocks).unwrap();
    let x: Vec<f32> = (0..5 * cols).map(|_| rng.signed()).collect();
    let mut product = Tiled::new(&gpu, &tiled, &m, 2 * TILE_TOKENS + 5).unwrap();
    for bad in [0, 2 * TILE_TOKENS + 6] {
        assert!(
            matches!(product.set_tokens(&gpu, bad), Err(Error::Input(_))),
            "{bad} tokens should be refused by a product bound for {}",
            2 * TILE_TOKENS + 5
        );
    }
    product.set_tokens(&gpu, 5).unwrap();
    let words = ch13_gpu::acts::quantize(format.activation().unwrap(), &x).unwrap();
    product.write_input(&gpu, &words).unwrap();
    gpu.submit_pass("5 tokens of 37", |pass| product.record(pass))
        .unwrap();
    let got = gpu.read_f32(&product.out, 5 * rows).unwrap();
    let want = matmul(&gpu, &tiled, &m, &x, 5).unwrap();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            g.to_bits(),
            w.to_bits(),
            "token {}, row {}: bound for 37 and run for 5 gives {g}, bound for 5 {w}",
            i / rows,
            i % rows
        );
    }
}

/// Tensors `names` of the file at `path`, each times `tokens` random tokens, against chapter
/// 8's product: within the bound, then the same bits; the formats they held.
fn check_tensors(path: &std::path::Path, names: &[&str], tokens: usize) -> Vec<Format> {
    let path = models::require(path).unwrap_or_else(|e| panic!("{e}"));
    let file = ch08_gguf::GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let gpu = gpu();
    let tiled = MatMul::new(&gpu).unwrap();
    let (kernels, many) = ch08_gguf::kernels().unwrap_or_else(|e| panic!("{e}"));
    let mut rng = Rng::new(tokens as u64);
    let mut formats = Vec::new();
    for name in names {
        let info = file.info(name).unwrap_or_else(|e| panic!("{e}"));
        let data = file.data(info);
        let m = GpuMatrix::from_tensor(&gpu, info, data).unwrap_or_else(|e| panic!("{e}"));
        let (format, rows, cols) = (m.format, m.rows, m.cols);
        formats.push(format);
        let x: Vec<f32> = (0..tokens * cols).map(|_| rng.signed()).collect();
        let got = matmul(&gpu, &tiled, &m, &x, tokens).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut want = vec![0.0f32; tokens * rows];
        cpu_matrix(format, rows, cols, data).matmul(kernels, many, &mut want, &x, tokens);
        let row_bytes = format.row_bytes(cols);
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            let (t, r) = (i / rows, i % rows);
            let row = &data[r * row_bytes..(r + 1) * row_bytes];
            let (_, mag) = cpu_row(format, row, &x[t * cols..(t + 1) * cols]);
            let (diff, allowed) = (
                (f64::from(g) - f64::from(w)).abs(),
                bound(format, cols, mag),
            );
            assert!(
                diff <= allowed,
                "{name}: token {t}, row {r}: the tiled product gives {g}, chapter 8's {w}; \
                 they differ by {diff:e}, more than the bound {allowed:e}"
            );
            same_as_cpu(name, t, r, g, w);
        }
        eprintln!(
            "{name} ({}, {rows}x{cols}), {tokens} tokens: the same bits as the CPU in all {} \
             outputs",
            format.name(),
            got.len()
        );
    }
    formats
}

#[test]
fn real_tensors_match_the_cpu() {
    let smollm2 = [
        "blk.0.attn_q.weight",
        "blk.3.ffn_down.weight",
        "token_embd.weight",
    ];
    let formats = check_tensors(&models::smollm2_gguf(), &smollm2, 5);
    assert!(
        formats.contains(&Format::Q4_1) && formats.contains(&Format::Q8_0),
        "SmolLM2's file should hold Q4_1 and Q8_0 tensors; it held {formats:?}"
    );
    let gemma3 = [
        "blk.0.attn_q.weight",
        "blk.0.attn_output.weight",
        "blk.0.ffn_down.weight",
    ];
    let formats = check_tensors(&models::gemma3_gguf(), &gemma3, 19);
    assert_eq!(
        formats,
        [Format::Q5_0, Format::Q4_K, Format::Q6_K],
        "Gemma-3's Q4_K_M file should hold these tensors as Q5_0, Q4_K, Q6_K"
    );
}

#[test]
fn bad_token_counts_and_inputs_are_errors() {
    let gpu = gpu();
    let tiled = MatMul::new(&gpu).unwrap();
    let blocks = vec![0u8; 2 * Format::Q4_0.row_bytes(64)];
    let m = GpuMatrix::from_blocks(&gpu, Format::Q4_0, 2, 64, &blocks).unwrap();
    let input = |r: Result<Vec<f32>, Error>, what: &str| match r {
        Err(Error::Input(e)) => eprintln!("{what}: {e}"),
        Err(e) => panic!("{what}: an input error was expected, not {e}"),
        Ok(v) => panic!("{what}: accepted, {} values", v.len()),
    };
    input(matmul(&gpu, &tiled, &m, &[], 0), "no tokens");
    input(
        matmul(&gpu, &tiled, &m, &[1.0; 64 * 3 - 32], 3),
        "half a token short",
    );
    input(
        matmul(&gpu, &tiled, &m, &[1.0; 64], usize::MAX),
        "tokens past any buffer",
    );
    match Tiled::new(&gpu, &tiled, &m, usize::MAX / 2) {
        Err(Error::Input(e)) => eprintln!("huge: {e}"),
        Err(e) => panic!("huge: an input error was expected, not {e}"),
        Ok(_) => panic!("huge: accepted"),
    }
    let product = Tiled::new(&gpu, &tiled, &m, 3).unwrap();
    assert!(
        matches!(product.write_input(&gpu, &[0; 10]), Err(Error::Input(_))),
        "one block for three tokens of two should be refused"
    );
}

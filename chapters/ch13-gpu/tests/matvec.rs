//! Each product shader against chapters 6 and 7's scalar dot products on the same blocks:
//! random blocks of awkward shapes, and real tensors of SmolLM2's and Gemma-3's files. Runs
//! on any adapter; CI's is Mesa's lavapipe (`bash scripts/test-deps.sh`). The tolerance is
//! derived in `common/mod.rs`.

mod common;

use ch01_tensors::models;
use ch06_quantization::Format;
use ch06_quantization::blocks::QK;
use ch06_quantization::quantize::{quantize_q4_0, quantize_q4_1, quantize_q8_0};
use ch07_simd_parallel::layout::kquant::QK_K;
use ch13_gpu::matvec::{IN_ORDER_MOST_TERMS, Layout, Reading, Reduction};
use ch13_gpu::random::{self, Rng};
use ch13_gpu::{Error, Gpu, GpuMatrix, MatVec, matvec};
use common::{check, cpu_row, gpu};

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

/// With the products adding in the CPU's order ([`Reduction::InOrder`]) every row of every
/// format is the CPU's dot, bit for bit: chapter 6's for the blocks of 32, chapter 7's
/// super-block dots added left to right for the K-quants. A row longer than the order's
/// workgroup memory holds is refused.
#[test]
fn in_the_cpu_s_order_products_are_the_cpu_s_bit_for_bit() {
    let gpu = gpu();
    let shaders = MatVec::with(&gpu, Reduction::InOrder).unwrap_or_else(|e| panic!("{e}"));
    let mut rng = Rng::new(61);
    for format in ch13_gpu::matvec::FORMATS {
        for (rows, cols) in shapes(format) {
            let blocks = quantized(format, rows, cols, &mut rng);
            let x: Vec<f32> = (0..cols).map(|_| 3.0 * rng.signed()).collect();
            let m = GpuMatrix::from_blocks(&gpu, format, rows, cols, &blocks).unwrap();
            let what = format!("{} {rows}x{cols}, in order", format.name());
            let got = matvec(&gpu, &shaders, &m, &x).unwrap();
            let rb = format.row_bytes(cols);
            for (r, g) in got.iter().enumerate() {
                let (want, _) = cpu_row(format, &blocks[r * rb..(r + 1) * rb], &x);
                assert_eq!(
                    g.to_bits(),
                    want.to_bits(),
                    "{what}: row {r} is {g} on the GPU, {want} on the CPU"
                );
            }
        }
    }
    let cols = 32 * (IN_ORDER_MOST_TERMS + 1);
    let zeros = vec![0u8; Format::Q8_0.row_bytes(cols)];
    let m = GpuMatrix::from_blocks(&gpu, Format::Q8_0, 1, cols, &zeros).unwrap();
    match matvec(&gpu, &shaders, &m, &vec![0.0; cols]) {
        Err(Error::Input(e)) => eprintln!("too long a row in order: {e}"),
        other => panic!(
            "a row of {cols} columns in order should be refused: {:?}",
            other.map(|v| v.len())
        ),
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

/// How the lanes read their blocks (each from storage, or the workgroup's rows staged
/// through workgroup memory) and how many rows each lane takes (its rows share the
/// activation blocks it reads) change which invocation adds what, not the additions: every
/// layout gives the bits of one row a lane reading directly, with both reductions, every
/// format, on shapes whose last workgroup is part empty, whose last step is part full, and
/// (Q4_0, Q5_0: an odd number of blocks) whose rows start mid-word. A layout the shaders do
/// not have is refused.
#[test]
fn every_layout_gives_the_same_bits() {
    let gpu = gpu();
    let mut rng = Rng::new(84);
    let layouts = [
        (Reading::Direct, 2),
        (Reading::Direct, 4),
        (Reading::Direct, 8),
    ]
    .into_iter()
    .chain([(Reading::Staged, 1), (Reading::Staged, 2)])
    .map(|(reading, rows_each)| Layout { reading, rows_each });
    for reduction in [Reduction::Workgroup, Reduction::Subgroup] {
        let build = |layout: Layout| {
            MatVec::with_layout(&gpu, reduction, layout).unwrap_or_else(|e| panic!("{e}"))
        };
        let first = build(Layout::IN_ORDER); // reading directly, one row a lane
        let all: Vec<MatVec> = layouts.clone().map(build).collect();
        for format in ch13_gpu::matvec::FORMATS {
            let k = format.block_values() / QK;
            for (rows, cols) in [
                (5, 32 * 33 * k),
                (37, 32 * 3 * k),
                (66, 32 * k),
                (9, 32 * 64 * k),
            ] {
                let blocks = random::blocks(format, rows, cols, &mut rng);
                let x: Vec<f32> = (0..cols).map(|_| rng.signed()).collect();
                let m = GpuMatrix::from_blocks(&gpu, format, rows, cols, &blocks).unwrap();
                let one = matvec(&gpu, &first, &m, &x).unwrap();
                for shaders in &all {
                    let got = matvec(&gpu, shaders, &m, &x).unwrap();
                    let same = one
                        .iter()
                        .zip(&got)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(
                        same && got.len() == rows,
                        "{} {rows}x{cols}, {} reduction: the layout {} gives other products \
                         than one row a lane read directly:\n{got:?}\nagainst\n{one:?}",
                        format.name(),
                        reduction.name(),
                        shaders.layout.name()
                    );
                }
            }
        }
    }
    let wrong = [
        (Reduction::Workgroup, Reading::Direct, 3),
        (Reduction::Subgroup, Reading::Staged, 4),
        (Reduction::InOrder, Reading::Staged, 1),
        (Reduction::InOrder, Reading::Direct, 2),
    ];
    for (reduction, reading, rows_each) in wrong {
        let layout = Layout { reading, rows_each };
        match MatVec::with_layout(&gpu, reduction, layout) {
            Err(Error::Input(e)) => eprintln!("{}: {e}", layout.name()),
            Err(e) => panic!("{}: an input error was expected, not {e}", layout.name()),
            Ok(_) => panic!(
                "{} ({} reduction) was accepted",
                layout.name(),
                reduction.name()
            ),
        }
    }
}

/// A stack of three matrices of one format (`GpuMatrix::stacked`: Q, K and V's shape, rows
/// that are not multiples of a workgroup's 4 or a tile's 32) in one dispatch, one output
/// each, against each matrix alone: the same bits, one token (the matrix-vector product)
/// and five (the tiled product), every format.
#[test]
fn a_stack_of_matrices_gives_each_its_own_product() {
    let gpu = gpu();
    let shaders = MatVec::new(&gpu).unwrap_or_else(|e| panic!("{e}"));
    let tiled = ch13_gpu::matmul::MatMul::new(&gpu).unwrap();
    let mut rng = Rng::new(72);
    let parts = [45, 6, 13];
    for format in ch13_gpu::matvec::FORMATS {
        let cols = format.block_values() * 3;
        let blocks: Vec<Vec<u8>> = parts
            .iter()
            .map(|&rows| quantized(format, rows, cols, &mut rng))
            .collect();
        let stack: Vec<(usize, &[u8])> = parts
            .iter()
            .zip(&blocks)
            .map(|(r, b)| (*r, &b[..]))
            .collect();
        let m = GpuMatrix::stacked(&gpu, format, cols, &stack).unwrap_or_else(|e| panic!("{e}"));
        for tokens in [1, 5] {
            let x: Vec<f32> = (0..tokens * cols).map(|_| rng.signed()).collect();
            let act = format.activation().unwrap();
            let words = ch13_gpu::acts::quantize(act, &x).unwrap();
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            let acts = gpu.storage("acts", bytes.len(), wgpu::BufferUsages::COPY_DST);
            gpu.queue.write_buffer(&acts, 0, &bytes);
            let out = |r: usize| gpu.storage("out", r * tokens * 4, wgpu::BufferUsages::COPY_SRC);
            let outs: Vec<_> = parts.iter().map(|&r| out(r)).collect();
            let refs: Vec<_> = outs.iter().collect();
            let record = |m: &GpuMatrix, outs: &[&wgpu::Buffer]| -> ch13_gpu::bind::Op {
                match tokens {
                    1 => ch13_gpu::bind::Op::Product(
                        ch13_gpu::Product::into(&gpu, &shaders, m, &acts, outs).unwrap(),
                    ),
                    n => ch13_gpu::bind::Op::Tiled(
                        ch13_gpu::matmul::Tiled::into(&gpu, &tiled, m, &acts, outs, n).unwrap(),
                    ),
                }
            };
            let op = record(&m, &refs);
            gpu.submit_pass("a stack", |pass| op.record(pass)).unwrap();
            for (i, (&rows, b)) in parts.iter().zip(&blocks).enumerate() {
                let alone = GpuMatrix::from_blocks(&gpu, format, rows, cols, b).unwrap();
                let own = out(rows);
                let op = record(&alone, &[&own]);
                gpu.submit_pass("alone", |pass| op.record(pass)).unwrap();
                let want = gpu.read_f32(&own, rows * tokens).unwrap();
                let got = gpu.read_f32(&outs[i], rows * tokens).unwrap();
                assert!(
                    want.iter()
                        .zip(&got)
                        .all(|(w, g)| w.to_bits() == g.to_bits()),
                    "{} x {tokens} tokens: matrix {i} of the stack ({rows} rows) gives other \
                     products in the stack than alone: {got:?} against {want:?}",
                    format.name()
                );
            }
        }
    }
    // four matrices, more than the shaders' outputs; a stack with one output too few
    let b = quantized(Format::Q4_0, 1, 32, &mut rng);
    let four = [(1, &b[..]); 4];
    assert!(GpuMatrix::stacked(&gpu, Format::Q4_0, 32, &four).is_err());
    let two = GpuMatrix::stacked(&gpu, Format::Q4_0, 32, &four[..2]).unwrap();
    let acts = gpu.storage("acts", 64, wgpu::BufferUsages::empty());
    let out = gpu.storage("out", 64, wgpu::BufferUsages::empty());
    assert!(ch13_gpu::Product::into(&gpu, &shaders, &two, &acts, &[&out]).is_err());
}

/// The reduction that adds a row in one `subgroupAdd` (`reduce_subgroup_32.wgsl`) is right
/// only where subgroups are exactly the groups of 32 lanes. Elsewhere (lavapipe's subgroups
/// are 8) it adds the wrong lanes, the check that guards it sees other sums, and the
/// products keep the general reduction.
#[test]
fn one_add_a_row_only_where_subgroups_are_the_groups_of_32() {
    use ch13_gpu::matvec::whole_subgroups_agree;
    let gpu = gpu();
    if !gpu.found.subgroups {
        eprintln!(
            "{}: no subgroup operations, nothing to check",
            gpu.info.name
        );
        return;
    }
    let (min, max) = (gpu.info.subgroup_min_size, gpu.info.subgroup_max_size);
    for layout in [Layout::CPU, Layout::GPU] {
        let agree = whole_subgroups_agree(&gpu, layout).unwrap();
        if (min, max) != (32, 32) {
            assert!(
                !agree,
                "{}: subgroups of {min} to {max}, yet one subgroupAdd a row gave the general \
                 reduction's sums ({}): the check cannot tell",
                gpu.info.name,
                layout.name()
            );
        }
        let shaders = MatVec::with_layout(&gpu, Reduction::Subgroup, layout).unwrap();
        assert_eq!(
            shaders.whole_subgroups,
            agree && (min, max) == (32, 32),
            "{}: the products' reduction ({}) does not follow the check",
            gpu.info.name,
            layout.name()
        );
        eprintln!(
            "{} ({}): subgroups of {min} to {max}, one subgroupAdd a row {}",
            gpu.info.name,
            layout.name(),
            if shaders.whole_subgroups {
                "used"
            } else {
                "not used"
            }
        );
    }
}

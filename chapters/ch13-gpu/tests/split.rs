//! A matrix split by rows over several buffers (`split.rs`): the same bits as unsplit, and
//! Gemma-3's embedding, larger than lavapipe's largest binding, against the CPU.

mod common;

use ch01_tensors::models;
use ch06_quantization::Format;
use ch13_gpu::random::{self, Rng};
use ch13_gpu::split::{SplitMatrix, matvec_split};
use ch13_gpu::{Error, GpuMatrix, MatVec, matvec};
use common::{check_rows, gpu};

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

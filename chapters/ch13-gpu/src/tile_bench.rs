//! `ch13-gpu tiles`: the tiled product of `tokens` tokens against the same tokens as that
//! many matrix-vector dispatches (a prompt run as decode steps), on one matrix shape of
//! random blocks. A measurement hook for a GPU to run, not a claim: the page quotes no
//! number from it.
//!
//! Both are recorded into one submission and timed with [`bench`](mod@crate::bench)'s loop.
//! As in `kernels`, the matrix is uploaded as several copies ([`bench::WORKING_SET`] bytes in
//! all) and the products cycle through them, so the matrix-vector dispatches read their
//! weights from memory and not from a cache that one small matrix would fit in.

use ch06_quantization::Format;
use serde_json::{Value, json};

use crate::acts;
use crate::bench::{self, WORKING_SET};
use crate::gpu::{Error, Gpu, Result};
use crate::matmul::{MatMul, TILE_ROWS, TILE_TOKENS, Tiled};
use crate::matvec::{FORMATS, GpuMatrix, MatVec, Product};
use crate::random::{self, Rng};

/// What `tiles` was asked: `--format`, `--rows`, `--cols`, `--tokens`, `--secs`.
pub struct Shape {
    pub format: Format,
    pub rows: usize,
    pub cols: usize,
    pub tokens: usize,
}

impl Shape {
    /// Checks the shape before anything is made from it: a format with shaders, whole
    /// blocks, and sizes a bench can upload (at most 65536 a side, 4096 tokens).
    pub fn check(&self) -> Result<()> {
        let f = self.format;
        if !FORMATS.contains(&f) {
            return Err(Error::Input(format!("--format {}: no shader", f.name())));
        }
        if !(1..=65536).contains(&self.rows) || !(1..=65536).contains(&self.cols) {
            return Err(Error::Input("--rows and --cols: 1 to 65536".into()));
        }
        if !self.cols.is_multiple_of(f.block_values()) {
            return Err(Error::Input(format!(
                "--cols {}: not whole {} blocks of {}",
                self.cols,
                f.name(),
                f.block_values()
            )));
        }
        if !(1..=4096).contains(&self.tokens) {
            return Err(Error::Input("--tokens: 1 to 4096".into()));
        }
        Ok(())
    }
}

/// Times both ways; a JSON object.
pub fn run(gpu: &Gpu, s: &Shape, secs: f64) -> Result<Value> {
    s.check()?;
    let (format, rows, cols, tokens) = (s.format, s.rows, s.cols, s.tokens);
    let mut rng = Rng::new(0x7113 + rows as u64 * 3 + cols as u64);
    let blocks = random::blocks(format, rows, cols, &mut rng);
    let copies = WORKING_SET.div_ceil(blocks.len()).clamp(1, 512);
    let matrices = (0..copies)
        .map(|_| GpuMatrix::from_blocks(gpu, format, rows, cols, &blocks))
        .collect::<Result<Vec<_>>>()?;
    let x: Vec<f32> = (0..tokens * cols).map(|_| rng.signed()).collect();
    let activation = format.activation().expect("a block format");
    let words = acts::quantize(activation, &x)?;
    let one_token = &words[..words.len() / tokens];

    let (tiled_shaders, vec_shaders) = (MatMul::new(gpu)?, MatVec::new(gpu)?);
    let tiled = matrices
        .iter()
        .map(|m| Tiled::new(gpu, &tiled_shaders, m, tokens))
        .collect::<Result<Vec<_>>>()?;
    let products = matrices
        .iter()
        .map(|m| Product::new(gpu, &vec_shaders, m))
        .collect::<Result<Vec<_>>>()?;
    for t in &tiled {
        t.write_input(gpu, &words)?;
    }
    for p in &products {
        p.write_input(gpu, one_token)?; // the values do not change the time
    }
    // `n` prompts' worth: n tiled dispatches, or n · tokens matrix-vector ones
    let record = |n: usize, tiles: bool| -> Result<f64> {
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            if tiles {
                tiled
                    .iter()
                    .cycle()
                    .take(n)
                    .for_each(|t| t.record(&mut pass));
            } else {
                let each = products.iter().cycle().take(n * tokens);
                each.for_each(|p| p.record(&mut pass));
            }
        }
        bench::submit_timed(gpu, vec![encoder.finish()], false)
    };
    // once each, inside an error scope: a shader that fails says so here
    gpu.checked("the matrix-vector products", || record(1, false))??;
    gpu.checked("the tiled product", || record(1, true))??;
    let most = (bench::MOST / tokens).max(1);
    let (n_tiled, t_tiled) = bench::time_until(secs, |n| record(n.min(most), true))?;
    let (n_vec, t_vec) = bench::time_until(secs, |n| record(n.min(most), false))?;
    let (n_tiled, n_vec) = (n_tiled.min(most), n_vec.min(most));
    let flops = 2.0 * rows as f64 * cols as f64 * tokens as f64;
    let per = |n: usize, t: f64, dispatches: usize| {
        let each = t / n as f64;
        json!({
            "dispatches": dispatches,
            "us_per_prompt": each * 1e6,
            "tokens_per_s": tokens as f64 / each,
            "gops": flops / each / 1e9,
            "weight_gbps": (blocks.len() * dispatches) as f64 / each / 1e9,
        })
    };
    Ok(json!({
        "adapter": { "name": gpu.info.name, "backend": gpu.info.backend.to_str() },
        "format": format.name(),
        "rows": rows,
        "cols": cols,
        "tokens": tokens,
        "tile": { "rows": TILE_ROWS, "tokens": TILE_TOKENS },
        "weight_bytes": blocks.len(),
        "copies": copies,
        "reduction": vec_shaders.reduction_name(),
        "tiled": per(n_tiled, t_tiled, 1),
        "matvec": per(n_vec, t_vec, tokens),
        "tiled_over_matvec": t_vec / n_vec as f64 / (t_tiled / n_tiled as f64),
    }))
}

/// The JSON as three lines.
pub fn text(r: &Value) -> String {
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let line = |name: &str, k: &Value| {
        format!(
            "{name:<34} {:>12.1} µs  {:>10.1} tok/s  {:>8.1} GOP/s  {:>7.1} GB/s of weights\n",
            f(&k["us_per_prompt"]),
            f(&k["tokens_per_s"]),
            f(&k["gops"]),
            f(&k["weight_gbps"])
        )
    };
    let mut out = format!(
        "{} {}x{} against {} tokens on {} (tiles of {} rows x {} tokens)\n",
        r["format"].as_str().unwrap_or(""),
        r["rows"],
        r["cols"],
        r["tokens"],
        r["adapter"]["name"].as_str().unwrap_or(""),
        r["tile"]["rows"],
        r["tile"]["tokens"],
    );
    out += &line("tiled, one dispatch", &r["tiled"]);
    let each = format!("matrix-vector, {} dispatches", r["tokens"]);
    out += &line(&each, &r["matvec"]);
    out += &format!(
        "matrix-vector time / tiled time: {:.2}\n",
        f(&r["tiled_over_matvec"])
    );
    out
}

//! Milliseconds of each kind of product at 1 to 32 rows (a batch's tokens), 2 threads: where
//! a batched step's time goes as the batch grows.
use std::time::Instant;
fn main() -> Result<(), String> {
    let path = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(ch01_tensors::models::smollm2_gguf);
    let m = ch08_gguf::load(&path).map_err(|e| e.to_string())?;
    let e = m.engine()?;
    let model = &m.model;
    let l = &model.layers[0];
    let mats: [(&str, &ch08_gguf::matrix::Matrix); 4] = [
        ("lm head", model.lm_head()),
        ("gate", &l.w_gate),
        ("down", &l.w_down),
        ("q", &l.wq),
    ];
    ch07_simd_parallel::pool::in_pool(2, || {
        for (name, w) in mats {
            print!("{name:8} {:>12}", w.format_name());
            for rows in [1, 2, 4, 8, 12, 16, 24, 32] {
                let x: Vec<f32> = (0..rows * w.cols())
                    .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
                    .collect();
                let mut out = vec![0.0f32; rows * w.rows()];
                let reps = if name == "lm head" { 3 } else { 30 };
                let mut best = f64::MAX;
                for _ in 0..reps {
                    let t = Instant::now();
                    w.matmul(e.kernels, e.kkernels, &mut out, &x, rows);
                    best = best.min(t.elapsed().as_secs_f64());
                }
                print!(" {rows}:{:.3}", best * 1e3 / rows as f64);
            }
            println!("  (ms per row)");
        }
    })
}

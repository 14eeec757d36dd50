//! Where a decode step of B rows spends its time: chapter 8's per-op profile at B = 1, 8, 16.
fn main() -> Result<(), String> {
    let path = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(ch01_tensors::models::smollm2_gguf);
    let m = ch08_gguf::load(&path).map_err(|e| e.to_string())?;
    let e = m.engine()?;
    for rows in [1, 8, 16] {
        let (ops, total) = ch08_gguf::bench::profile(&e, 2, rows, 128, 3)?;
        println!("{rows} rows: {total:.2} ms");
        for o in ops {
            println!("  {:<30} {:8.2} ms", o.op, o.ms);
        }
    }
    Ok(())
}

//! Demo 3: a safetensors file opened through mmap, and what is inside it.

use std::path::PathBuf;
use std::time::Instant;

use ch01_tensors::safetensors::{self, SafeTensors};
use ch01_tensors::{Tensor, models};
use serde_json::{Value, json};

pub fn demo_safetensors(
    model: Option<PathBuf>,
    text: bool,
) -> Result<Value, Box<dyn std::error::Error>> {
    if text {
        println!("\n== 3. Loading safetensors through mmap ==");
    }
    let (path, source) = match model {
        Some(path) => (path, "model"),
        None => {
            let path =
                std::env::temp_dir().join(format!("ch01-demo-{}.safetensors", std::process::id()));
            write_small_file(&path)?;
            if text {
                let missing = models::smollm2_hf_dir().join("model.safetensors");
                println!(
                    "SmolLM2 is not prepared ({} is missing),",
                    missing.display()
                );
                println!(
                    "so this demo writes and loads a small file instead. To get the model, run"
                );
                println!("    cargo run --release -p ch01-tensors -- --fetch");
                println!("or  {}", models::FETCH_HINT);
            }
            (path, "demo file")
        }
    };
    let result = list_file(&path, source, text);
    if source == "demo file" {
        let _ = std::fs::remove_file(&path);
    }
    let mut report = result?;
    report["source"] = json!(source);
    Ok(report)
}

fn write_small_file(path: &std::path::Path) -> Result<(), ch01_tensors::Error> {
    let embed = Tensor::from_vec((0..12).map(|v| v as f32 / 4.0).collect(), &[4, 3])?; // (vocab, dim)
    let norm = Tensor::from_vec(vec![1.0, 1.0, 1.0], &[3])?; // (dim,)
    let proj = Tensor::from_vec((0..6).map(|v| v as f32).collect(), &[2, 3])?; // (out, dim)
    safetensors::write(
        path,
        &[
            ("embed.weight", &embed),
            ("norm.weight", &norm),
            ("proj.weight", &proj),
        ],
    )
}

fn list_file(
    path: &std::path::Path,
    source: &str,
    text: bool,
) -> Result<Value, Box<dyn std::error::Error>> {
    let start = Instant::now();
    let st = SafeTensors::open(path)?;
    let open_ms = start.elapsed().as_secs_f64() * 1e3;

    let start = Instant::now();
    let names = st.names();
    let tensors = names
        .iter()
        .map(|n| st.tensor(n))
        .collect::<Result<Vec<_>, _>>()?;
    let views_ms = start.elapsed().as_secs_f64() * 1e3;
    let params: usize = tensors.iter().map(Tensor::numel).sum();
    let mapped = tensors.iter().filter(|t| t.is_mapped()).count();

    // Read one float every 4 KiB (one per page), twice. Opening mapped the file but read
    // nothing: the first read of a page is a page fault, in which the OS maps that page
    // (and a few neighbours) in, reading it from disk unless it is in the page cache.
    let mut touch_ms = [0.0; 2];
    let mut pages = 0;
    for ms in &mut touch_ms {
        let start = Instant::now();
        let (mut sum, mut touched) = (0.0f32, 0);
        for t in &tensors {
            let values = t
                .as_slice()
                .ok_or("a freshly loaded tensor is contiguous")?;
            for v in values.iter().step_by(1024) {
                sum += v;
                touched += 1;
            }
        }
        std::hint::black_box(sum); // keep the optimizer from dropping the reads
        *ms = start.elapsed().as_secs_f64() * 1e3;
        pages = touched;
    }

    // The demo file has a per-process name; print a fixed one so the output is reproducible.
    let file_name = match source {
        "model" => path
            .file_name()
            .map_or_else(|| "?".into(), |n| n.to_string_lossy()),
        _ => "(small demo file)".into(),
    };
    if text {
        println!(
            "file {file_name}: {} bytes, {} tensors, {params} parameters",
            st.file_size(),
            st.len()
        );
        println!("opened (file mapped, header parsed and validated) in {open_ms:.2} ms");
        println!(
            "{mapped} of {} tensors are zero-copy views of the mapped file; all of them made in {views_ms:.3} ms",
            st.len()
        );
        println!(
            "reading one float every 4 KiB ({pages} reads): first time {:.2} ms, second time {:.2} ms",
            touch_ms[0], touch_ms[1]
        );
        println!(
            "  (the first time pays for page faults: the OS maps the file in lazily, as it is touched)"
        );
        println!("first tensors (sorted by name):");
        for name in names.iter().take(6) {
            let info = st.info(name).ok_or("listed name has no info")?;
            println!("  {name:<48} {:<4} {:?}", info.dtype.as_str(), info.shape);
        }
        if names.len() > 6 {
            println!("  ... and {} more", names.len() - 6);
        }
        if let Some(first) = tensors
            .first()
            .filter(|t| t.shape().len() == 2 && t.shape()[0] >= 1 && t.shape()[1] >= 3)
        {
            let row0 = first.row(0).narrow(0, 0, 3)?; // a view of a view of the mapped file
            println!("{}.row(0).narrow(0, 0, 3) = {row0:.5}", names[0]);
        }
    }
    Ok(
        json!({ "file": file_name, "bytes": st.file_size(), "tensors": st.len(), "params": params,
               "zero_copy": mapped,  "open_ms": open_ms, "views_ms": views_ms,
               "page_touches": pages, "first_touch_ms": touch_ms[0], "second_touch_ms": touch_ms[1] }),
    )
}

//! How speed and memory grow with the model: one row per GGUF file (ours and llama.cpp,
//! prefill and decode, the decode ceiling the memory's bandwidth allows, peak memory), as a
//! Markdown table and a figure. Measuring is the binary's `scale` command; this is the part
//! that needs no model and no llama.cpp, so it is tested on its own.

use std::fmt::Write;

use ch05_kv_cache::plot::{Series, line_chart};
use serde::Serialize;

/// One file's measurements.
#[derive(Clone, Debug, Serialize)]
pub struct ScaleRow {
    /// The file's name (`llama-7b-q4_0.gguf`).
    pub model: String,
    /// Values in all the file's tensors (the embedding counted once, as the file holds it).
    pub params: u64,
    pub file_bytes: u64,
    /// Weight bytes one decode step reads (every layer matrix, the LM head, one embedding row).
    pub bytes_per_token: u64,
    pub ours_pp512_tok_s: f64,
    pub llama_cpp_pp512_tok_s: f64,
    pub ours_tg128_tok_s: f64,
    pub llama_cpp_tg128_tok_s: f64,
    /// Read bandwidth ÷ bytes a token: the fastest decode the memory allows.
    pub ceiling_tok_s: f64,
    /// Peak resident memory of a whole process (cold, 32-token prompt, one token).
    pub ours_peak_rss_bytes: u64,
    pub llama_cpp_peak_rss_bytes: u64,
}

/// How the rows were measured, for the table's caption.
pub struct Setup<'a> {
    pub threads: usize,
    pub rounds: usize,
    pub isa: &'a str,
    pub bandwidth_gb_s: f64,
}

/// A parameter count as people write it: `135M`, `1.24B`.
pub fn params_label(n: u64) -> String {
    if n >= 1_000_000_000 {
        format!("{:.2}B", n as f64 / 1e9)
    } else {
        format!("{:.0}M", n as f64 / 1e6)
    }
}

fn mb(bytes: u64) -> String {
    format!("{:.0}", bytes as f64 / 1e6)
}

/// `a / b` as a ratio cell, or `–` when `b` is not a positive number.
fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 && (a / b).is_finite() {
        format!("{:.2}×", a / b)
    } else {
        "–".into()
    }
}

/// The table: one row per file, speeds in tok/s, sizes in MB (10⁶ bytes).
pub fn markdown(rows: &[ScaleRow], s: &Setup) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{} threads, {} alternating round(s) of ours and llama-bench per file, medians ({} \
         kernels). Read bandwidth {:.1} GB/s; the ceiling is that bandwidth over the bytes a \
         decode step reads, and ours tg128 is given as a share of it. Peak RSS: a whole \
         process, file evicted, 32-token prompt, one token (ours / llama-completion). The \
         `llama-*` files are synthetic: random weights in a real model's shape, for speed \
         and memory only.\n",
        s.threads, s.rounds, s.isa, s.bandwidth_gb_s
    );
    t.push_str(
        "| model | params | file MB | ours pp512 | llama.cpp pp512 | ratio | ours tg128 \
         | llama.cpp tg128 | ratio | MB a token | ceiling tok/s | ours % of ceiling \
         | peak RSS MB, ours / llama.cpp |\n",
    );
    t.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in rows {
        let share = if r.ceiling_tok_s > 0.0 {
            format!("{:.0}%", 100.0 * r.ours_tg128_tok_s / r.ceiling_tok_s)
        } else {
            "–".into()
        };
        let _ = writeln!(
            t,
            "| {} | {} | {} | {:.1} | {:.1} | {} | {:.1} | {:.1} | {} | {} | {:.1} | {share} | {} / {} |",
            r.model,
            params_label(r.params),
            mb(r.file_bytes),
            r.ours_pp512_tok_s,
            r.llama_cpp_pp512_tok_s,
            ratio(r.ours_pp512_tok_s, r.llama_cpp_pp512_tok_s),
            r.ours_tg128_tok_s,
            r.llama_cpp_tg128_tok_s,
            ratio(r.ours_tg128_tok_s, r.llama_cpp_tg128_tok_s),
            mb(r.bytes_per_token),
            r.ceiling_tok_s,
            mb(r.ours_peak_rss_bytes),
            mb(r.llama_cpp_peak_rss_bytes),
        );
    }
    t
}

/// tok/s against parameters (millions, both axes logarithmic): ours and llama.cpp, prefill
/// and decode, and the decode ceiling. A line joins files of different sizes, so a second
/// file of a size already drawn (a 7B in another quantization mix) is left out of the
/// figure; the table has it.
pub fn svg(rows: &[ScaleRow], threads: usize) -> String {
    let mut drawn: Vec<&ScaleRow> = Vec::new();
    for r in rows {
        if !drawn.iter().any(|d| d.params == r.params) {
            drawn.push(r);
        }
    }
    drawn.sort_by_key(|r| r.params);
    let x = |r: &ScaleRow| r.params as f64 / 1e6;
    let series = |name: &str, color: &'static str, y: fn(&ScaleRow) -> f64| Series {
        name: name.into(),
        color,
        points: drawn.iter().map(|r| (x(r), y(r))).collect(),
    };
    let ticks: Vec<f64> = drawn.iter().map(|r| x(r).round()).collect();
    line_chart(
        &format!("Speed against size, {threads} threads"),
        "parameters (millions)",
        "tokens per second",
        &ticks,
        &[
            series("ours, pp512", "#1f77b4", |r| r.ours_pp512_tok_s),
            series("llama.cpp, pp512", "#aec7e8", |r| r.llama_cpp_pp512_tok_s),
            series("ours, tg128", "#d62728", |r| r.ours_tg128_tok_s),
            series("llama.cpp, tg128", "#ff9896", |r| r.llama_cpp_tg128_tok_s),
            series("decode ceiling (bandwidth)", "#999", |r| r.ceiling_tok_s),
        ],
    )
}

/// The files `scale` measures when given none: the two real models, then synthetic
/// Llama shapes at 1B, 3B and 7B in Q4_0, the 7B again in the Q4_K_M-like mix, and a 9B
/// (Yi-1.5-9B's shape) in Q4_0: five gigabytes of weights, to run in six of memory.
pub const DEFAULT_FILES: [&str; 7] = [
    "smollm2",
    "gemma3",
    "llama-1b-q4_0",
    "llama-3b-q4_0",
    "llama-7b-q4_0",
    "llama-7b-q4_k_m",
    "llama-9b-q4_0",
];

/// The shapes and mixes `scripts/make_synthetic_gguf.py` writes.
pub const SYNTHETIC_SHAPES: [&str; 4] = ["1b", "3b", "7b", "9b"];
pub const SYNTHETIC_MIXES: [&str; 2] = ["q4_0", "q4_k_m"];

/// `llama-7b-q4_k_m` → `("7b", "q4_k_m")`: a synthetic file's name, which the script's
/// `--shape` and `--mix` make; `None` for anything else.
pub fn synthetic_spec(name: &str) -> Option<(&'static str, &'static str)> {
    let rest = name.strip_prefix("llama-")?;
    let (shape, mix) = rest.split_once('-')?;
    let shape = SYNTHETIC_SHAPES.iter().find(|s| **s == shape)?;
    let mix = SYNTHETIC_MIXES.iter().find(|m| **m == mix)?;
    Some((shape, mix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(model: &str, params: u64, tg: f64) -> ScaleRow {
        ScaleRow {
            model: model.into(),
            params,
            file_bytes: 700_000_000,
            bytes_per_token: 650_000_000,
            ours_pp512_tok_s: 100.0,
            llama_cpp_pp512_tok_s: 80.0,
            ours_tg128_tok_s: tg,
            llama_cpp_tg128_tok_s: 20.0,
            ceiling_tok_s: 40.0,
            ours_peak_rss_bytes: 750_000_000,
            llama_cpp_peak_rss_bytes: 800_000_000,
        }
    }

    #[test]
    fn synthetic_names_are_the_scripts_shapes_and_mixes() {
        assert_eq!(synthetic_spec("llama-7b-q4_k_m"), Some(("7b", "q4_k_m")));
        assert_eq!(synthetic_spec("llama-1b-q4_0"), Some(("1b", "q4_0")));
        for bad in [
            "llama-2b-q4_0",
            "llama-7b-q8_0",
            "llama-7b",
            "7b-q4_0",
            "smollm2",
        ] {
            assert_eq!(synthetic_spec(bad), None, "{bad} is not a synthetic name");
        }
    }

    #[test]
    fn parameter_counts_read_as_people_write_them() {
        assert_eq!(params_label(134_515_008), "135M");
        assert_eq!(params_label(1_235_814_400), "1.24B");
        assert_eq!(params_label(6_738_415_616), "6.74B");
    }

    #[test]
    fn the_table_has_a_row_per_file_and_every_column() {
        let s = Setup {
            threads: 2,
            rounds: 1,
            isa: "avx2",
            bandwidth_gb_s: 26.0,
        };
        let t = markdown(
            &[
                row("a.gguf", 134_515_008, 30.0),
                row("b", 1_235_814_400, 0.0),
            ],
            &s,
        );
        let lines: Vec<&str> = t.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(lines.len(), 4, "header, rule and two rows:\n{t}");
        let columns = lines[0].matches('|').count();
        for l in &lines {
            assert_eq!(
                l.matches('|').count(),
                columns,
                "a row with a missing cell: {l}"
            );
        }
        assert!(
            lines[2].contains("| a.gguf | 135M | 700 | 100.0 | 80.0 | 1.25× | 30.0 | 20.0 | 1.50× | 650 | 40.0 | 75% | 750 / 800 |"),
            "{}",
            lines[2]
        );
        assert!(t.starts_with("2 threads, 1 alternating round(s)") && t.contains("26.0 GB/s"));
        // a zero rate from llama.cpp does not make an infinite ratio
        let mut z = row("z", 1, 1.0);
        z.llama_cpp_pp512_tok_s = 0.0;
        z.ceiling_tok_s = 0.0;
        let t = markdown(&[z], &s);
        assert!(!t.contains("inf") && !t.contains("NaN"), "{t}");
    }

    #[test]
    fn the_figure_draws_one_point_per_size_and_series() {
        let rows = [
            row("small", 135_000_000, 30.0),
            row("big", 7_000_000_000, 5.0),
            row("big, other mix", 7_000_000_000, 4.0),
        ];
        let svg = svg(&rows, 2);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(
            svg.matches("<circle").count(),
            2 * 5,
            "two sizes, five series"
        );
        assert!(
            svg.contains(">135<") && svg.contains(">7000<"),
            "x ticks at the sizes"
        );
    }
}

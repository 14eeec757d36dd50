//! `ch13-gpu bench`: a model on the GPU, timed through the whole step: a prompt of `pp`
//! tokens run as a prefill (a submission for each piece of up to the decoder's chunk of
//! tokens, the products tiled), then `tg` greedy tokens from an empty cache (llama-bench's
//! tg test starts at position 0 too, so the race compares the same attention), each one
//! submission and a 4-byte read-back, two steps in flight as the generator runs them
//! ([`Decoder::greedy`]); the same `tg` tokens one step at a time (the host waits for each
//! token before it records the next step), and what recording a step costs the host; with
//! `per_dispatch`, the same `tg` tokens again with
//! every dispatch submitted on its own, to measure what one submission a token saves; with
//! `profile`, the same `tg` tokens again with the GPU's clock read between dispatches
//! ([`Decoder::step_timed`]), their time summed by what each dispatch is: where a step's
//! time goes on this adapter.
//! Random token ids (fixed seed) as the prompt, as llama-bench does.

use std::time::Instant;

use serde_json::{Value, json};

use crate::gpu::{Error, Gpu, Result};
use crate::model::GpuModel;
use crate::step::Decoder;

/// What `bench` does besides pp and tg: the tg tokens again with a submission per
/// dispatch (`--per-dispatch`), or with the GPU's clock between dispatches (`--profile`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Extra {
    pub per_dispatch: bool,
    pub profile: bool,
}

/// The most tokens either phase may take.
pub const MAX_TOKENS: usize = 4096;

/// Runs the benchmark; `progress` hears each phase before it starts.
pub fn run(
    gpu: &Gpu,
    model: &GpuModel,
    pp: usize,
    tg: usize,
    extra: Extra,
    progress: &mut dyn FnMut(&str),
) -> Result<Value> {
    if !(1..=MAX_TOKENS).contains(&pp) || !(1..=MAX_TOKENS).contains(&tg) {
        return Err(Error::Input(format!(
            "--pp and --tg must be 1 to {MAX_TOKENS} tokens"
        )));
    }
    let vocab = model.shape.vocab as u64;
    let capacity = pp.max(tg);
    if capacity > model.max_pos {
        return Err(Error::Input(format!(
            "{capacity} tokens do not fit the model's {} positions",
            model.max_pos
        )));
    }
    let tuned = crate::tune::shaders_for(gpu, model, progress)?;
    let decoder = Decoder::new(gpu, &tuned.shaders, model, capacity)?;
    let pieces = pp.div_ceil(decoder.chunk);
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let prompt: Vec<u32> = (0..pp)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % vocab) as u32
        })
        .collect();
    progress(&format!(
        "pp{pp}: a prefill in {pieces} piece(s) of up to {} tokens",
        decoder.chunk
    ));
    let start = Instant::now();
    let mut next = decoder.prefill(&prompt, 0, false)?.0;
    let pp_s = start.elapsed().as_secs_f64();
    progress(&format!("tg{tg}: one submission a token, two in flight"));
    // from an empty cache, as llama-bench's tg test runs: each step writes its position's
    // key and value before it reads positions 0..=pos, so the prompt's are never read
    let start = Instant::now();
    decoder.greedy(next, 0, tg, &mut |t| {
        next = t;
        true
    })?;
    let tg_s = start.elapsed().as_secs_f64();
    progress(&format!("tg{tg}: one step at a time"));
    let start = Instant::now();
    for pos in 0..tg {
        next = decoder.step(next, pos, false)?.0;
    }
    let one_s = start.elapsed().as_secs_f64();
    let record_s = decoder.record_seconds(tg);
    let mut report = json!({
        "adapter": gpu.info.name,
        "backend": format!("{:?}", gpu.info.backend),
        "dispatches_per_token": decoder.dispatches(),
        "prefill_chunk": decoder.chunk,
        "pp": pp, "pp_tok_s": pp as f64 / pp_s,
        "tg": tg, "tg_tok_s": tg as f64 / tg_s,
        "tg_tok_s_one_in_flight": tg as f64 / one_s,
        "record_us_per_token": record_s * 1e6,
        "reduction": tuned.shaders.matvec.reduction_name(),
        "layout": tuned.shaders.matvec.layout.name(),
        "layouts_tried": tuned.tried.iter()
            .map(|(l, rate)| json!({ "layout": l.name(), "tok_s": rate }))
            .collect::<Vec<_>>(),
        "tiling": tuned.shaders.matmul.tiling.name(),
        "tilings_tried": tuned.tilings.iter()
            .map(|(t, rate)| json!({ "tiling": t.name(), "tok_s": rate }))
            .collect::<Vec<_>>(),
    });
    if extra.per_dispatch {
        progress(&format!("tg{tg}: a submission per dispatch"));
        let start = Instant::now();
        for pos in 0..tg {
            next = decoder.step_per_dispatch(next, pos)?;
        }
        report["tg_tok_s_submit_per_dispatch"] = json!(tg as f64 / start.elapsed().as_secs_f64());
    }
    if extra.profile {
        progress(&format!("tg{tg}: the GPU's clock between dispatches"));
        report["profile"] = profiled(&decoder, next, tg)?;
    }
    Ok(report)
}

/// `tg` steps from an empty cache, each timed dispatch by dispatch; the nanoseconds summed
/// by what each dispatch is, the costliest first.
fn profiled(decoder: &Decoder, mut next: u32, tg: usize) -> Result<Value> {
    let names = decoder.op_names();
    let mut total = vec![0.0f64; names.len()];
    for pos in 0..tg {
        let (best, ns) = decoder.step_timed(next, pos)?;
        for (t, n) in total.iter_mut().zip(ns) {
            *t += n;
        }
        next = best;
    }
    // (name, dispatches a token, ns a token) by name, in the order first met
    let mut kinds: Vec<(String, usize, f64)> = Vec::new();
    for (name, ns) in names.iter().zip(&total) {
        match kinds.iter_mut().find(|k| &k.0 == name) {
            Some(k) => (k.1, k.2) = (k.1 + 1, k.2 + ns / tg as f64),
            None => kinds.push((name.clone(), 1, ns / tg as f64)),
        }
    }
    kinds.sort_by(|a, b| b.2.total_cmp(&a.2));
    let step: f64 = kinds.iter().map(|k| k.2).sum();
    let ops: Vec<Value> = kinds
        .iter()
        .map(|(what, n, ns)| {
            json!({
                "what": what,
                "dispatches": n,
                "us_per_token": ns / 1e3,
                "us_per_dispatch": ns / 1e3 / *n as f64,
                "share": ns / step,
            })
        })
        .collect();
    Ok(json!({ "tokens": tg, "us_per_token": step / 1e3, "ops": ops }))
}

/// The report as lines of text.
pub fn text(r: &Value) -> String {
    let mut out = format!(
        "{} ({}): {} dispatches a token\n  pp{} {:.2} tok/s, a submission for each {} tokens\n  tg{} {:.2} tok/s, one submission a token, two in flight\n",
        r["adapter"].as_str().unwrap_or_default(),
        r["backend"].as_str().unwrap_or_default(),
        r["dispatches_per_token"],
        r["pp"],
        r["pp_tok_s"].as_f64().unwrap_or(0.0),
        r["prefill_chunk"],
        r["tg"],
        r["tg_tok_s"].as_f64().unwrap_or(0.0),
    );
    out += &tried(r, "layout", "the products' layout", "step");
    out += &tried(r, "tiling", "the tiled products' tiling", "prefill");
    if let Some(v) = r["tg_tok_s_one_in_flight"].as_f64() {
        out += &format!(
            "  tg{} {v:.2} tok/s, one step at a time ({:.0} µs of the host's recording a step)\n",
            r["tg"],
            r["record_us_per_token"].as_f64().unwrap_or(0.0)
        );
    }
    if let Some(v) = r["tg_tok_s_submit_per_dispatch"].as_f64() {
        out += &format!("  tg{} {v:.2} tok/s, a submission per dispatch\n", r["tg"]);
    }
    let p = &r["profile"];
    if let Some(ops) = p["ops"].as_array() {
        let f = |v: &Value| v.as_f64().unwrap_or(0.0);
        out += &format!(
            "  by the GPU's clock, {:.1} µs a token over {} tokens:\n    {:<28} {:>10} {:>12} {:>14} {:>7}\n",
            f(&p["us_per_token"]),
            p["tokens"],
            "dispatch",
            "a token",
            "µs a token",
            "µs each",
            "share"
        );
        for o in ops {
            out += &format!(
                "    {:<28} {:>10} {:>12.1} {:>14.2} {:>6.1}%\n",
                o["what"].as_str().unwrap_or_default(),
                o["dispatches"],
                f(&o["us_per_token"]),
                f(&o["us_per_dispatch"]),
                100.0 * f(&o["share"])
            );
        }
    }
    out
}

/// A line for what choosing the report's `key` (`layout`, `tiling`) tried, each with its
/// rate; empty where nothing was tried.
fn tried(r: &Value, key: &str, what: &str, timed: &str) -> String {
    let Some(tried) = r[format!("{key}s_tried")]
        .as_array()
        .filter(|t| !t.is_empty())
    else {
        return String::new();
    };
    let each: Vec<String> = tried
        .iter()
        .map(|t| {
            let tok_s = t["tok_s"].as_f64().unwrap_or(0.0);
            format!("{} {tok_s:.1}", t[key].as_str().unwrap_or_default())
        })
        .collect();
    format!(
        "  {what} {}, the fastest {timed} of: {} tok/s\n",
        r[key].as_str().unwrap_or_default(),
        each.join(", ")
    )
}

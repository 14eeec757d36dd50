//! The binary's generate and bench commands: chapter 9's prompt handling (its chat template, its
//! sampler, its stop strings, its `--json` fields) with the GPU's decode step.

use std::io::Write;
use std::path::PathBuf;

use ch01_tensors::models;
use ch04_forward::model::{highest, position_lines, positions_json};
use ch09_generate::chat::sandbox::Sandbox;
use ch09_generate::chat::{Chat, Message};
use ch09_generate::{Sampler, SamplerConfig};
use ch13_gpu::Gpu;
use ch13_gpu::model::GpuModel;
use ch13_gpu::step::Decoder;
use serde_json::json;

/// What `ch13-gpu -m MODEL -p TEXT …` was asked.
pub struct Generate {
    pub model: Option<PathBuf>,
    pub prompt: Option<String>,
    pub n: usize,
    pub chat: bool,
    pub system: Option<String>,
    pub stops: Vec<String>,
    pub sampling: SamplerConfig,
}

/// The model's path: `-m`, or the shipped SmolLM2, which must have been fetched.
fn model_path(g: &Generate) -> Result<PathBuf, String> {
    match &g.model {
        Some(p) if !p.exists() => Err(format!("{}: no such file", p.display())),
        Some(p) => Ok(p.clone()),
        None => models::require(&models::smollm2_gguf()),
    }
}

/// The prompt's tokens as chapter 9 makes them: the text with its control tokens parsed,
/// or with `--chat` a user turn in the model's chat template.
fn prompt_ids(g: &Generate, m: &ch08_gguf::Loaded) -> Result<Vec<u32>, String> {
    let text = g.prompt.as_deref().unwrap_or_default();
    if !g.chat {
        return Ok(m.tokenizer.encode_prompt(text, true));
    }
    let chat = Chat::of_model(m, Some(Sandbox::this_program()?))?;
    let mut messages = Vec::new();
    if let Some(s) = &g.system {
        messages.push(Message::new("system", s));
    }
    messages.push(Message::new("user", text));
    chat.prompt_ids(&m.tokenizer, &messages)
}

/// Generates, streaming the text (or printing one JSON object with `json`).
pub fn generate(g: &Generate, json: bool) -> Result<(), ch13_gpu::Error> {
    use ch13_gpu::Error::{Gpu as GpuError, Input};
    let path = model_path(g).map_err(Input)?;
    let m = ch08_gguf::load(&path).map_err(|e| Input(format!("{}: {e}", path.display())))?;
    let prompt = prompt_ids(g, &m).map_err(Input)?;
    let gpu = Gpu::open()?;
    let model = GpuModel::upload(&gpu, &m.model)?;
    let shaders = ch13_gpu::tune::shaders_for(&gpu, &model, &mut |_| ())?.shaders;
    let capacity = prompt.len().saturating_add(g.n).min(model.max_pos);
    let decoder = Decoder::new(&gpu, &shaders, &model, capacity.max(1))?;
    let mut sampler = Sampler::new(g.sampling.clone());
    let mut out = std::io::stdout();
    if !json && !g.chat {
        print!("{}", g.prompt.as_deref().unwrap_or_default());
        let _ = out.flush();
    }
    let run = ch13_gpu::generate::generate(
        &decoder,
        &m.tokenizer.tokenizer,
        &m.model.config.eos_token_ids,
        &prompt,
        g.n,
        &mut sampler,
        &g.stops,
        &mut |piece| {
            if !json {
                let _ = write!(out, "{piece}");
                let _ = out.flush();
            }
        },
    )
    .map_err(GpuError)?;
    if json {
        println!(
            "{:#}",
            json!({
                "prompt_ids": prompt, "generated_ids": run.ids, "text": run.text,
                "stop_reason": run.stop.name(),
                "adapter": gpu.info.name, "dispatches_per_token": decoder.dispatches(),
                "timings": {"prefill_ms": run.prefill_seconds * 1e3,
                            "prefill_tok_s": prompt.len() as f64 / run.prefill_seconds.max(1e-9),
                            "decode_tok_s": run.decode_tok_s()},
            })
        );
        return Ok(());
    }
    eprintln!(
        "\n---\n{} prompt tokens in {:.1} ms (a prefill); {} generated at {:.1} tok/s on {}, \
         {} dispatches a token; stopped: {}",
        prompt.len(),
        run.prefill_seconds * 1e3,
        run.ids.len(),
        run.decode_tok_s(),
        gpu.info.name,
        decoder.dispatches(),
        run.stop.name()
    );
    Ok(())
}

/// `bench`: the model on the GPU (`ch13_gpu::decode_bench`), or with `compare` (its rounds)
/// the race against llama.cpp's Vulkan backend (`ch13_gpu::compare`).
pub fn bench(
    g: &Generate,
    (pp, tg): (usize, usize),
    extra: ch13_gpu::decode_bench::Extra,
    compare: Option<usize>,
    json: bool,
) -> Result<(), ch13_gpu::Error> {
    use ch13_gpu::{Error::Input, compare, decode_bench};
    let gpu = Gpu::open()?;
    if compare.is_some() {
        compare::raceable(&gpu)?; // first: without a GPU there is nothing to race
    }
    let path = model_path(g).map_err(Input)?;
    let m = ch08_gguf::load(&path).map_err(|e| Input(format!("{}: {e}", path.display())))?;
    let model = GpuModel::upload(&gpu, &m.model)?;
    let say = |line: String| {
        if !json {
            eprintln!("{line}");
        }
    };
    let (mut report, text): (serde_json::Value, fn(&serde_json::Value) -> String) = match compare {
        Some(rounds) => {
            let r = compare::run(
                &gpu,
                &model,
                &path,
                (pp, tg),
                rounds,
                &mut |l| say(l.into()),
            )?;
            (r, compare::text)
        }
        None => {
            let r = decode_bench::run(&gpu, &model, pp, tg, extra, &mut |what| {
                say(format!("timing {what}"))
            })?;
            (r, decode_bench::text)
        }
    };
    report["model"] = json!(models::shown(&path));
    if json {
        println!("{report}");
    } else {
        print!("{}", text(&report));
    }
    Ok(())
}

/// `logits`: `ids` teacher-forced, one decode step each from position 0 (a cache of as many
/// positions, which the model must have), the logits after each read back: the GPU's argmax
/// and the `top` highest (chapter 4's `highest`), in the JSON `ch08-gguf logits` prints for the CPU engine, so that a machine
/// without Rust can hold the GPU to the CPU (`scripts/gpu-race.sh` does): with
/// `LLM_BOOK_GPU_REDUCTION=in-order` every value the same bits.
pub fn logits(g: &Generate, ids: &[u32], top: usize, json: bool) -> Result<(), ch13_gpu::Error> {
    use ch13_gpu::Error::Input;
    let path = model_path(g).map_err(Input)?;
    let m = ch08_gguf::load(&path).map_err(|e| Input(format!("{}: {e}", path.display())))?;
    let gpu = Gpu::open()?;
    let model = GpuModel::upload(&gpu, &m.model)?;
    let shaders = ch13_gpu::tune::shaders_for(&gpu, &model, &mut |_| ())?.shaders;
    let decoder = Decoder::new(&gpu, &shaders, &model, ids.len())?;
    let mut positions = Vec::with_capacity(ids.len());
    for (pos, &id) in ids.iter().enumerate() {
        let (argmax, row) = decoder.step(id, pos, true)?;
        let row = row.ok_or(ch13_gpu::Error::Gpu("the step read back no logits".into()))?;
        positions.push((argmax as usize, highest(&row, top)));
    }
    let reduction = shaders.matvec.reduction_name();
    if json {
        let positions = positions_json(&positions);
        let adapter = &gpu.info.name;
        let v =
            json!({"ids": ids, "positions": positions, "adapter": adapter, "reduction": reduction});
        println!("{v}");
        return Ok(());
    }
    println!("{} ({reduction})", gpu.info.name);
    for line in position_lines(ids, &positions) {
        println!("{line}");
    }
    Ok(())
}

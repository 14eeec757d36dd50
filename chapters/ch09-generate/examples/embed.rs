//! The generator as a library: load a GGUF, generate, get the text.
//!
//! `cargo run --release -p ch09-generate --example embed -- MODEL.gguf "The capital of France is"`

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: embed MODEL.gguf PROMPT")?;
    let prompt = args.next().ok_or("usage: embed MODEL.gguf PROMPT")?;
    // ANCHOR: embed
    let model = ch08_gguf::load(std::path::Path::new(&path)).map_err(|e| e.to_string())?;
    let ids = model.tokenizer.encode_prompt(&prompt, true);
    let mut sampler = ch09_generate::Sampler::new(ch09_generate::SamplerConfig::default());
    let out = ch09_generate::generate(
        &model.engine()?,
        &model.tokenizer.tokenizer,
        &model.model.config.eos_token_ids,
        &ids,
        32,
        &mut sampler,
        &[],
        &mut |piece| print!("{piece}"),
    )?;
    // ANCHOR_END: embed
    println!("\n({} tokens, stopped: {})", out.ids.len(), out.stop.name());
    Ok(())
}

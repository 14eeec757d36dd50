//! `loadtest --compare --clients 1`: one client's stream against chapter 9's generator on
//! the same requests, in this process, with no server between the engine and the text. The
//! server's worth is in serving many; one stream through it should cost next to nothing.

use std::net::SocketAddr;
use std::path::Path;

use ch09_generate::{Sampler, SamplerConfig};

use super::client::{get_json, one, streamed_tok_s};
use super::mix::{Planned, plan};
use super::options::{LoadOptions, TEMPERATURE, TOP_P};

/// Decode tok/s of one client's streams from the server at `addr` and of chapter 9's
/// generator, over the requests of the mix that run to their end, taken in turn (request 1
/// through the server, then through the generator, then request 2, ...) so that the shared
/// machine's drift falls on both alike. Each is the tokens after the first over the time
/// they took, summed over the requests.
pub fn stream_and_generator(
    rt: &tokio::runtime::Runtime,
    addr: SocketAddr,
    o: &LoadOptions,
    model: &Path,
    threads: usize,
) -> Result<(f64, f64), String> {
    let m = ch08_gguf::load(model).map_err(|e| format!("{}: {e}", model.display()))?;
    let engine = m.engine()?;
    let name = rt.block_on(get_json(addr, "/v1/models"))?["data"][0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // ANCHOR: in_turn
    let (mut gaps_ms, mut alone) = (Vec::new(), (0usize, 0.0f64));
    for p in plan(o).iter().filter(|p| p.cancel_after.is_none()) {
        let seen = rt.block_on(one(addr, &name, p));
        if let Some(e) = seen.error {
            return Err(format!("one client's stream: {e}"));
        }
        gaps_ms.extend(seen.gaps_ms);
        let g = ch07_simd_parallel::pool::in_pool(threads, || generate(&m, &engine, p))??;
        alone.0 += g.ids.len().saturating_sub(1);
        alone.1 += g.decode_seconds;
    }
    // ANCHOR_END: in_turn
    if gaps_ms.is_empty() || alone.0 == 0 {
        return Err("no request of the mix ran to its end".into());
    }
    Ok((streamed_tok_s(&gaps_ms), alone.0 as f64 / alone.1))
}

/// Request `p` through chapter 9's generator, sampled as the server samples it.
fn generate(
    m: &ch08_gguf::Loaded,
    engine: &ch08_gguf::engine::Engine,
    p: &Planned,
) -> Result<ch09_generate::Generation, String> {
    let ids = m.tokenizer.encode_prompt(&p.prompt, true);
    let mut sampler = Sampler::new(SamplerConfig {
        temperature: TEMPERATURE,
        top_p: TOP_P,
        seed: p.seed,
        ..SamplerConfig::default()
    });
    ch09_generate::generate(
        engine,
        &m.tokenizer.tokenizer,
        &[],
        &ids,
        p.reply,
        &mut sampler,
        &[],
        &mut |_| {},
    )
}

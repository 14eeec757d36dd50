//! Gemma-3-270M from its Q4_K_M GGUF: its formats against the `gguf` package, its
//! SentencePiece tokenizer and its logits against llama.cpp's, its perplexity.
//!
//! `cargo test --release -p ch08-gguf --test gemma3 -- --nocapture` prints the numbers. A
//! missing model fails with the command that fetches it.

use std::sync::OnceLock;

use ch01_tensors::models;
use ch04_forward::check;
use ch04_forward::model::argmax;
use ch04_forward::reference::{self, GreedyFixture, LogitsFixture};
use ch08_gguf::engine::{Engine, Model};
use ch08_gguf::{GgufFile, GgufTokenizer};
use serde_json::Value;

struct Gemma {
    file: GgufFile,
    model: Model,
    tok: GgufTokenizer,
}

fn gemma() -> &'static Gemma {
    static G: OnceLock<Gemma> = OnceLock::new();
    G.get_or_init(|| {
        let path = models::require(&models::gemma3_gguf()).unwrap_or_else(|e| panic!("{e}"));
        let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}"));
        let model = ch08_gguf::arch::load_model(&file).unwrap_or_else(|e| panic!("{e}"));
        let tok = ch08_gguf::tokenizer(&file.gguf).unwrap_or_else(|e| panic!("{e}"));
        Gemma { file, model, tok }
    })
}

fn engine(m: &Model) -> Engine<'_> {
    let (isa, k) = ch07_simd_parallel::kernels::detect().unwrap();
    Engine::new(
        m,
        k,
        ch07_simd_parallel::kernels::for_isa(isa).expect("a level this CPU runs"),
    )
}

#[test]
fn every_format_dequantizes_as_the_gguf_package_does() {
    let path = models::workspace_root().join("fixtures/quant/gemma3-rows.json");
    let fx: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let g = gemma();
    let rows = fx["rows"].as_array().unwrap();
    assert!(rows.len() >= 8, "{} rows in the fixture", rows.len());
    for row in rows {
        let (ty, name, r) = (
            row["type"].as_str().unwrap(),
            row["tensor"].as_str().unwrap(),
            row["row"].as_u64().unwrap() as usize,
        );
        let want: Vec<f32> = serde_json::from_value(row["values"].clone()).unwrap();
        let info = g.file.info(name).unwrap();
        assert_eq!(info.ty.name(), ty);
        let cols = info.dims[0] as usize;
        let row_len = info.size as usize / info.dims[1] as usize;
        let row_bytes = &g.file.data(info)[r * row_len..(r + 1) * row_len];
        let mut got = vec![0.0f32; cols];
        dequantize(ty, row_bytes, &mut got);
        for (j, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!(
                a.to_bits() == b.to_bits(),
                "{name} row {r} value {j}: ours {a}, the gguf package's {b}, not the same bits"
            );
        }
    }
}

fn dequantize(ty: &str, bytes: &[u8], out: &mut [f32]) {
    use ch07_simd_parallel::layout::kquant::*;
    match ty {
        "Q4_K" => bytes
            .chunks_exact(Q4_K_BYTES)
            .zip(out.chunks_exact_mut(QK_K))
            .for_each(|(b, o)| dequantize_q4_k(b, o.try_into().unwrap())),
        "Q6_K" => bytes
            .chunks_exact(Q6_K_BYTES)
            .zip(out.chunks_exact_mut(QK_K))
            .for_each(|(b, o)| dequantize_q6_k(b, o.try_into().unwrap())),
        "Q5_0" => bytes
            .chunks_exact(Q5_0_BYTES)
            .zip(out.chunks_exact_mut(32))
            .for_each(|(b, o)| dequantize_q5_0(b, o.try_into().unwrap())),
        "Q8_0" => bytes
            .chunks_exact(34)
            .zip(out.chunks_exact_mut(32))
            .for_each(|(b, o)| {
                let blk = ch06_quantization::blocks::BlockQ8_0::from_bytes(b.try_into().unwrap());
                ch06_quantization::quantize::dequantize_q8_0(&blk, o.try_into().unwrap())
            }),
        other => panic!("no dequantizer for {other}"),
    }
}

#[test]
fn the_sentencepiece_tokenizer_from_the_file_matches_llama_cpp() {
    let tok = &gemma().tok.tokenizer;
    let path = models::workspace_root().join("fixtures/reference/tokenizer-gemma3.json");
    let fx: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let cases = fx["cases"].as_array().expect("a cases array");
    let mut failures = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let text = c["text"].as_str().unwrap();
        for (special, key) in [(false, "ids"), (true, "ids_special")] {
            let want: Vec<u32> = serde_json::from_value(c[key].clone()).unwrap();
            let got = tok.encode(text, special);
            if got != want {
                failures.push(format!(
                    "case {i} {:?} (special {special}): llama.cpp {want:?}, ours {got:?}",
                    text.chars().take(40).collect::<String>()
                ));
            }
        }
    }
    eprintln!(
        "Gemma-3 tokenizer from GGUF metadata: {}/{} encodings equal llama.cpp's",
        2 * cases.len() - failures.len(),
        2 * cases.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn logits_match_llama_cpp_on_the_same_file() {
    let fx: LogitsFixture =
        reference::load_named("logits-gemma3-q4_k_m.json").unwrap_or_else(|e| panic!("{e}"));
    let m = &gemma().model;
    let e = engine(m);
    let vocab = m.config.vocab_size;
    let (mut agree, mut positions, mut worst) = (0, 0, 0.0f64);
    let mut misses = Vec::new();
    for p in &fx.prompts {
        let logits = e.window_logits(&p.ids).unwrap();
        let c = check::compare_logits(&logits, vocab, p);
        eprintln!(
            "{:<26} argmax {}/{}, max |Δ logit| over top-20 {:.3}",
            check::short(&p.prompt),
            c.argmax_agree,
            c.positions,
            c.max_diff
        );
        for &t in &c.argmax_differ {
            let top = &p.positions[t].top;
            let margin = f64::from(top[0].1) - f64::from(top[1].1);
            eprintln!("  miss at position {t}: llama.cpp's top two are {margin:.3} apart");
            misses.push((check::short(&p.prompt), t, margin));
        }
        agree += c.argmax_agree;
        positions += c.positions;
        worst = worst.max(c.max_diff);
    }
    eprintln!("Gemma-3: argmax {agree}/{positions}, max |Δ logit| {worst:.3}");
    assert!(worst < 2.0, "top-20 logits differ by up to {worst:.3}");
    for (prompt, t, margin) in &misses {
        assert!(
            *margin < worst,
            "prompt {prompt}, position {t}: a different top token where llama.cpp's top two are \
             {margin:.3} apart, more than the {worst:.3} the runs differ by: not a near-tie"
        );
    }
}

#[test]
fn greedy_text_follows_llama_cpp_until_a_near_tie() {
    let fx: GreedyFixture =
        reference::load_named("greedy-gemma3-q4_k_m.json").unwrap_or_else(|e| panic!("{e}"));
    let m = &gemma().model;
    let e = engine(m);
    let vocab = m.config.vocab_size;
    let (mut agree, mut total) = (0, 0);
    for p in &fx.prompts {
        // Teacher-forced: every next token at once.
        let mut ids = p.prompt_ids.clone();
        ids.extend(&p.ids);
        let logits = e.window_logits(&ids).unwrap();
        for (j, &want) in p.ids.iter().enumerate() {
            let row = &logits[(p.prompt_ids.len() - 1 + j) * vocab..][..vocab];
            let got = argmax(row);
            total += 1;
            if got as u32 == want {
                agree += 1;
            } else {
                let margin = row[got] - row[want as usize];
                eprintln!(
                    "{}: token {j}: ours {got}, llama.cpp {want}, {margin:.3} apart",
                    check::short(&p.prompt)
                );
                assert!(
                    margin < 0.5,
                    "{}: token {j}: not a near-tie ({margin:.3})",
                    check::short(&p.prompt)
                );
            }
        }
        // Free-running.
        let run = e
            .greedy(&p.prompt_ids, p.ids.len(), false, &mut |_| {})
            .unwrap();
        let same = check::same_prefix(&run.ids, &p.ids);
        eprintln!(
            "{:<26} free-running: {same}/{} tokens equal",
            check::short(&p.prompt),
            p.ids.len()
        );
    }
    eprintln!("Gemma-3 teacher-forced: {agree}/{total} next tokens equal llama.cpp's");
    assert!(agree * 100 >= total * 95, "only {agree}/{total}");
}

#[test]
fn perplexity_is_within_1_percent_of_llama_cpp_s() {
    let g = gemma();
    let text = std::fs::read_to_string(
        models::workspace_root().join("fixtures/reference/perplexity-text.txt"),
    )
    .unwrap();
    let ids = g.tok.tokenizer.encode(&text, false);
    let fx: Value = serde_json::from_str(
        &std::fs::read_to_string(
            models::workspace_root().join("fixtures/reference/perplexity.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let theirs = &fx["models"]["gemma3-q4_k_m"];
    assert_eq!(
        theirs["text_tokens"].as_u64(),
        Some(ids.len() as u64),
        "the text tokenizes differently"
    );
    let e = engine(&g.model);
    let bos = g.tok.bos.filter(|_| g.tok.add_bos);
    let (mut nll, mut scored) = (0.0f64, 0usize);
    for chunk in ids.chunks(256) {
        let window: Vec<u32> = bos.into_iter().chain(chunk.iter().copied()).collect();
        let logits = e.window_logits(&window).unwrap();
        let vocab = g.model.config.vocab_size;
        for pos in 1..window.len() {
            let row = &logits[(pos - 1) * vocab..pos * vocab];
            let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
            let logz = row
                .iter()
                .map(|&v| (v as f64 - max).exp())
                .sum::<f64>()
                .ln()
                + max;
            nll += logz - row[window[pos] as usize] as f64;
            scored += 1;
        }
    }
    let ppl = (nll / scored as f64).exp();
    let want = theirs["perplexity"].as_f64().unwrap();
    eprintln!("Gemma-3 perplexity {ppl:.4} (llama.cpp {want}), {scored} tokens scored");
    assert_eq!(Some(scored as u64), theirs["scored_tokens"].as_u64());
    assert!(
        (ppl / want - 1.0).abs() < 0.01,
        "perplexity {ppl:.4} vs llama.cpp's {want}"
    );
}

#[test]
fn the_ring_buffer_gives_the_full_cache_s_logits() {
    // 700 tokens in chunks of 64: the sliding layers' rings (512 + 64 slots) wrap.
    let g = gemma();
    let mut e = engine(&g.model);
    e.chunk = 64;
    let text = std::fs::read_to_string(
        models::workspace_root().join("fixtures/reference/perplexity-text.txt"),
    )
    .unwrap();
    let ids: Vec<u32> = g
        .tok
        .tokenizer
        .encode(&text, false)
        .into_iter()
        .cycle()
        .take(700)
        .collect();
    let mut ring = e.new_cache(2048).unwrap();
    let mut full = ch05_kv_cache::KvCache::new(e.layout(), 2048);
    use ch05_kv_cache::KvStore;
    assert!(
        ring.reserved_bytes() * 2 < full.reserved_bytes(),
        "the ring ({} bytes) should hold far less than the full cache ({})",
        ring.reserved_bytes(),
        full.reserved_bytes()
    );
    let a = e.forward(&mut ring, &ids, 0).unwrap();
    let b = e.forward(&mut full, &ids, 0).unwrap();
    assert!(
        a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
        "after 700 tokens the ring buffer's logits differ from the full cache's"
    );
    // And decoding on from there, one token at a time.
    let mut next = argmax(&a) as u32;
    for pos in ids.len()..ids.len() + 8 {
        let a = e.forward(&mut ring, &[next], pos).unwrap();
        let b = e.forward(&mut full, &[next], pos).unwrap();
        assert!(
            a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
            "decoding at position {pos}, the ring buffer's logits differ from the full cache's"
        );
        next = argmax(&a) as u32;
    }
}

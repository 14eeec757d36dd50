//! The loader and the engine against hostile files that parse: a small synthetic file of
//! each architecture (`synth`, and Gemma-3 made from its Gemma-2 file) with one metadata
//! value or one tensor changed, opened, loaded, given a tokenizer and run for a few greedy
//! steps. Whatever was changed, the answer is a model that runs or an error, never a panic.
//! `tests/damage.rs` and the corpus hold the parser to the same rule; this is the rest of
//! the way to a token.
//!
//! Each architecture has 500 to 620 such files (every metadata value set to each of a list of
//! hostile values or removed, every array, the vocabulary's too, cut, emptied or given one
//! odd element; every tensor reshaped, retyped or removed). A run makes one in
//! [`SAMPLE`] of them, a different share for each architecture;
//! `LLM_BOOK_HOSTILE_ALL=1 cargo test --release -p ch08-gguf --test hostile_models` makes
//! them all (3 902, four minutes on two cores), and `LLM_BOOK_HOSTILE_SHOW=1` (with
//! `--nocapture`) prints each refusal.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

mod common;
use common::panic_text;

use ch08_gguf::gguf_write::Writer;
use ch08_gguf::synth::hostile::{Change, apply, as_gemma3, changes, rewrite};
use ch08_gguf::synth::{self, Arch, Shape, Spec, Weights};
use ch08_gguf::{GgmlType, Gguf, GgufFile, TensorInfo, Value, arch, engine::Engine};

/// One file in this many is made in a normal run.
const SAMPLE: usize = 16;

/// The valid file for `arch`: the tests' small shape, Q8_0 matrices.
fn valid(arch: Arch) -> Vec<u8> {
    valid_with(arch, Weights::Q8_0)
}

/// The valid file for `arch` with `weights`.
fn valid_with(arch: Arch, weights: Weights) -> Vec<u8> {
    let spec = Spec {
        arch,
        weights,
        shape: Shape::parse("small").expect("the small shape"),
        seed: 1,
        vocab: None,
    };
    synth::build(&spec)
        .unwrap_or_else(|e| panic!("making the {} file: {e}", arch.name()))
        .to_bytes()
}

/// Open, load, tokenizer, three tokens of prompt and two greedy steps: what happened.
fn run(path: &Path) -> Result<(), String> {
    let file = GgufFile::open(path).map_err(|e| format!("open: {e}"))?;
    let model = arch::load_model(&file).map_err(|e| format!("load: {e}"))?;
    ch08_gguf::tokenizer(&file.gguf).map_err(|e| format!("tokenizer: {e}"))?;
    let (k, kk) = ch08_gguf::kernels().expect("this CPU's kernels");
    let engine = Engine::new(&model, k, kk);
    engine
        .greedy(&[1, 2, 3], 2, false, &mut |_| {})
        .map_err(|e| format!("generate: {e}"))?;
    Ok(())
}

/// A directory of this test's own, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Makes `arch`'s share of the files and runs each; panics listing the changes that made
/// the loader or the engine panic.
fn hostile(arch: Arch) {
    hostile_file(arch.name(), valid(arch), arch_index(arch));
}

/// `arch`'s place in the list, which picks its share of the files.
fn arch_index(arch: Arch) -> usize {
    Arch::ALL.iter().position(|&a| a == arch).unwrap_or(0)
}

/// [`hostile`] for the file `bytes` of architecture `name`, the `index`th file.
fn hostile_file(name: &str, bytes: Vec<u8>, index: usize) {
    let g = Gguf::parse(&bytes).expect("the synthetic file parses");
    let all = std::env::var_os("LLM_BOOK_HOSTILE_ALL").is_some();
    let show = std::env::var_os("LLM_BOOK_HOSTILE_SHOW").is_some();
    let offset = index % SAMPLE;
    let dir = Scratch(
        std::env::temp_dir().join(format!("llm-book-hostile-{name}-{}", std::process::id())),
    );
    std::fs::create_dir_all(&dir.0).expect("a scratch directory");
    let (mut made, mut ran, mut panics) = (0, 0, Vec::new());
    for (i, change) in changes(&g).into_iter().enumerate() {
        if !all && i % SAMPLE != offset {
            continue;
        }
        let Some(file) = apply(&bytes, &g, &change) else {
            continue;
        };
        let path = dir.0.join(format!("{i}.gguf"));
        std::fs::write(&path, &file).expect("writing a scratch file");
        made += 1;
        match catch_unwind(AssertUnwindSafe(|| run(&path))) {
            Ok(Ok(())) => ran += 1,
            Ok(Err(e)) if show => println!("{change:?}: {e}"),
            Ok(Err(_)) => {}
            Err(p) => panics.push(format!("{change:?}: {}", panic_text(&*p))),
        }
        std::fs::remove_file(&path).expect("removing a scratch file");
    }
    println!(
        "{name}: {made} changed files, {ran} ran, {} refused, {} panicked",
        made - ran - panics.len(),
        panics.len()
    );
    assert!(made > 0, "no changed {name} file was made");
    assert!(
        panics.is_empty(),
        "a file that parses must load and run, or fail with an error; these panicked instead:\n{}",
        panics.join("\n")
    );
}

#[test]
fn llama3() {
    hostile(Arch::Llama3);
}

#[test]
fn mistral() {
    hostile(Arch::Mistral);
}

#[test]
fn qwen2() {
    hostile(Arch::Qwen2);
}

#[test]
fn qwen3() {
    hostile(Arch::Qwen3);
}

#[test]
fn phi3() {
    hostile(Arch::Phi3);
}

#[test]
fn gemma2() {
    hostile(Arch::Gemma2);
}

/// Gemma-3, which the synthetic files lack, from the Gemma-2 file (`hostile::as_gemma3`):
/// first run unchanged, then changed as the others are.
#[test]
fn gemma3() {
    let bytes = as_gemma3(&valid(Arch::Gemma2)).expect("a Gemma-3 file from the Gemma-2 one");
    let dir = Scratch(std::env::temp_dir().join(format!("llm-book-gemma3-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).expect("a scratch directory");
    let path = dir.0.join("gemma3.gguf");
    std::fs::write(&path, &bytes).expect("a scratch file");
    run(&path).unwrap_or_else(|e| panic!("the Gemma-3 file made from Gemma-2's: {e}"));
    hostile_file("gemma3", bytes, Arch::ALL.len());
}

/// A hyper-parameter JSON cannot hold (NaN, infinity) is refused by its key, not replaced by
/// chapter 3's default as a missing key would be.
#[test]
fn non_finite_hyper_parameters_are_refused_by_name() {
    let bytes = valid(Arch::Llama3);
    let g = Gguf::parse(&bytes).expect("the synthetic file parses");
    for key in [
        "llama.attention.layer_norm_rms_epsilon",
        "llama.rope.freq_base",
    ] {
        for x in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let change = Change::Key(key.into(), Some(Value::F32(x)));
            let file = apply(&bytes, &g, &change).expect("a file");
            let changed = Gguf::parse(&file).expect("the changed file parses");
            match ch08_gguf::config::config(&changed) {
                Ok(c) => panic!(
                    "{key} = {x} was taken (rms_norm_eps {}, rope_theta {}): a value JSON \
                     cannot hold must be refused, not read as a missing key",
                    c.rms_norm_eps, c.rope_theta
                ),
                Err(e) => assert!(
                    e.to_string().contains(key),
                    "{key} = {x}: the error should name the key: {e}"
                ),
            }
        }
    }
}

/// `attention.value_length` other than the key heads' width: refused, since every head of
/// chapter 3's attention is as wide for its values as for its keys.
#[test]
fn value_heads_of_another_width_are_refused() {
    let bytes = valid(Arch::Qwen3);
    let g = Gguf::parse(&bytes).expect("the synthetic file parses");
    let key = "qwen3.attention.value_length";
    let width = g
        .get(key)
        .and_then(Value::as_i128)
        .expect("the file says it");
    let change = Change::Key(key.into(), Some(Value::U32(width as u32 / 2)));
    let file = apply(&bytes, &g, &change).expect("a file");
    let changed = Gguf::parse(&file).expect("the changed file parses");
    let e = ch08_gguf::config::config(&changed)
        .err()
        .unwrap_or_else(|| panic!("{key} = {} was taken", width / 2));
    assert!(
        e.to_string().contains(key),
        "the error should name {key}: {e}"
    );
}

/// The Llama 3 file with F32 matrices and every value of tensor `name` set to `value`.
fn with_values(name: &str, value: f32) -> Vec<u8> {
    let bytes = valid_with(Arch::Llama3, Weights::F32);
    let g = Gguf::parse(&bytes).expect("the synthetic file parses");
    let key = |k: &str, v: &Value| Some((k.to_string(), v.clone()));
    let tensor = |w: &mut Writer, t: &TensorInfo, data: &[u8]| {
        let mut data = data.to_vec();
        if t.name == name {
            assert_eq!(t.ty, GgmlType::F32, "{name} is F32");
            data = std::iter::repeat_n(value.to_le_bytes(), data.len() / 4)
                .flatten()
                .collect();
        }
        w.tensor(&t.name, &t.dims, t.ty, data)
    };
    rewrite(&bytes, &g, key, tensor).expect("the same file with other values")
}

/// A file whose numbers overflow (here a norm's weights of infinity, before F32 matrices)
/// is an error that says so, not tokens drawn from NaN: at the last layer's output when a
/// layer overflows, at the logits when only the final norm does.
#[test]
fn numbers_that_overflow_are_an_error_not_tokens() {
    let dir =
        Scratch(std::env::temp_dir().join(format!("llm-book-overflow-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).expect("a scratch directory");
    for (tensor, what) in [
        ("blk.1.attn_norm.weight", "last layer's output"),
        ("output_norm.weight", "logits"),
    ] {
        let path = dir.0.join(format!("{tensor}.gguf"));
        std::fs::write(&path, with_values(tensor, f32::INFINITY)).expect("a scratch file");
        let e = run(&path)
            .err()
            .unwrap_or_else(|| panic!("{tensor} all infinite: tokens came out of it"));
        assert!(
            e.contains(what) && e.contains("infinite or NaN"),
            "{tensor} all infinite: the error should say the {what} overflowed: {e}"
        );
    }
}

/// `engine::finite` finds an infinity or a NaN wherever it is (in any of its sixteen lanes,
/// or among the last few values after them), and passes the largest finite values.
#[test]
fn finite_finds_every_infinity_and_nan() {
    let n = 16 * 5 + 7;
    let values: Vec<f32> = (0..n).map(|i| (i as f32 - 40.0) * 1e36).collect();
    assert!(ch08_gguf::engine::finite("values", &values).is_ok());
    assert!(ch08_gguf::engine::finite("extremes", &[f32::MAX, -f32::MAX, -0.0]).is_ok());
    for bad in [f32::NAN, -f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        for at in 0..n {
            let mut x = values.clone();
            x[at] = bad;
            assert!(
                ch08_gguf::engine::finite("values", &x).is_err(),
                "{bad} at {at} of {n} was not found"
            );
        }
    }
}

//! The loader and the engine against hostile files that parse: a small synthetic file of
//! each architecture (`synth`) with one metadata value or one tensor changed, opened,
//! loaded, given a tokenizer and run for a few greedy steps. Whatever was changed, the
//! answer is a model that runs or an error, never a panic. `tests/damage.rs` and the corpus
//! hold the parser to the same rule; this is the rest of the way to a token.
//!
//! Each architecture has about 600 such files (every metadata value set to each of a list of
//! hostile values or removed; every tensor reshaped, retyped or removed). A run makes one in
//! [`SAMPLE`] of them, a different share for each architecture;
//! `LLM_BOOK_HOSTILE_ALL=1 cargo test --release -p ch08-gguf --test hostile_models` makes
//! them all (about ten minutes on two cores).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use ch08_gguf::gguf_write::Writer;
use ch08_gguf::synth::{self, Arch, Shape, Spec, Weights};
use ch08_gguf::{GgmlType, Gguf, GgufFile, Value, arch, engine::Engine};

/// One file in this many is made in a normal run.
const SAMPLE: usize = 16;

/// One change to a valid file.
#[derive(Clone, Debug)]
enum Change {
    /// Metadata key `.0` set to `.1`, or removed (`None`).
    Key(String, Option<Value>),
    /// Tensor `.0` given dims `.1` and type `.2` (new bytes when either changed), or
    /// removed (`None`).
    Tensor(String, Option<(Vec<u64>, GgmlType)>),
}

/// The valid file for `arch`: the tests' small shape, Q8_0 matrices.
fn valid(arch: Arch) -> Vec<u8> {
    let spec = Spec {
        arch,
        weights: Weights::Q8_0,
        shape: Shape::parse("small").expect("the small shape"),
        seed: 1,
        vocab: None,
    };
    synth::build(&spec)
        .unwrap_or_else(|e| panic!("making the {} file: {e}", arch.name()))
        .to_bytes()
}

/// Every change this test knows for the file `g`.
fn changes(g: &Gguf) -> Vec<Change> {
    let mut out = Vec::new();
    for (key, value) in &g.metadata {
        let mut values: Vec<Value> = match value {
            // the vocabulary's own arrays are the tokenizer tests' business
            Value::Array(_) if key.starts_with("tokenizer.ggml.") => continue,
            Value::F32(_) | Value::F64(_) => [0.0, -1.0, f32::NAN, f32::INFINITY, 1e30, 1e-30]
                .into_iter()
                .map(Value::F32)
                .collect(),
            Value::Array(_) | Value::String(_) => vec![Value::U32(3)],
            _ => [0, 1, 2, 3, 5, 7, 33, 1000, 1 << 31, 1 << 40, u64::MAX]
                .into_iter()
                .map(Value::U64)
                .collect(),
        };
        values.extend([Value::String("x".into()), Value::I32(-1)]);
        out.extend(
            values
                .into_iter()
                .map(|v| Change::Key(key.clone(), Some(v))),
        );
        out.push(Change::Key(key.clone(), None));
    }
    for t in &g.tensors {
        let d = &t.dims;
        let with = |i: usize, f: &dyn Fn(u64) -> u64| {
            let (mut d, i) = (d.clone(), i.min(d.len() - 1));
            d[i] = f(d[i]);
            d
        };
        let mut shapes = vec![
            d.iter().rev().copied().collect(),
            with(1, &|n| n + 1),
            with(1, &|n| n.saturating_sub(1)),
            with(0, &|n| n + 32),
            with(0, &|n| 2 * n),
            d.iter().copied().chain([1]).collect(),
            vec![d.iter().product()],
        ];
        shapes.retain(|s| s != d);
        let reshaped = shapes.into_iter().map(|s| Some((s, t.ty)));
        let types = [
            GgmlType::F32,
            GgmlType::F16,
            GgmlType::Q4_0,
            GgmlType::Q4_1,
            GgmlType::Q5_0,
            GgmlType::Q8_0,
            GgmlType::Q4_K,
            GgmlType::Q6_K,
        ];
        let retyped = types
            .into_iter()
            .filter(|&ty| ty != t.ty)
            .map(|ty| Some((d.clone(), ty)));
        for to in reshaped.chain(retyped).chain([None]) {
            out.push(Change::Tensor(t.name.clone(), to));
        }
    }
    out
}

/// `bytes` with `change` made, or `None` when no file can hold it (a type whose blocks do
/// not divide the new row).
fn apply(bytes: &[u8], g: &Gguf, change: &Change) -> Option<Vec<u8>> {
    let mut w = Writer::new();
    for (k, v) in &g.metadata {
        match change {
            Change::Key(key, None) if key == k => {}
            Change::Key(key, Some(value)) if key == k => w.set(k, value.clone()),
            _ => w.set(k, v.clone()),
        }
    }
    for t in &g.tensors {
        let at = usize::try_from(g.absolute_offset(t)).expect("a small file");
        let data = &bytes[at..at + t.size as usize];
        let (dims, ty, data) = match change {
            Change::Tensor(name, None) if *name == t.name => continue,
            Change::Tensor(name, Some((dims, ty))) if *name == t.name => {
                let size = ty.byte_size(name, dims).ok()?;
                // any bytes: a pattern, so that every block's scale is some number
                let data = (0..size).map(|i| (i * 37 % 251) as u8).collect();
                (dims.clone(), *ty, data)
            }
            _ => (t.dims.clone(), t.ty, data.to_vec()),
        };
        w.tensor(&t.name, &dims, ty, data).ok()?;
    }
    Some(w.to_bytes())
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
    let bytes = valid(arch);
    let g = Gguf::parse(&bytes).expect("the synthetic file parses");
    let all = std::env::var_os("LLM_BOOK_HOSTILE_ALL").is_some();
    let offset = Arch::ALL.iter().position(|&a| a == arch).unwrap_or(0) % SAMPLE;
    let dir = Scratch(std::env::temp_dir().join(format!(
        "llm-book-hostile-{}-{}",
        arch.name(),
        std::process::id()
    )));
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
            Ok(Err(_)) => {}
            Err(p) => {
                let text = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                panics.push(format!("{change:?}: {text}"));
            }
        }
        std::fs::remove_file(&path).expect("removing a scratch file");
    }
    println!(
        "{}: {made} changed files, {ran} ran, {} refused, {} panicked",
        arch.name(),
        made - ran - panics.len(),
        panics.len()
    );
    assert!(made > 0, "no changed {} file was made", arch.name());
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

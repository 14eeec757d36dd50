//! Both models end to end, briefly: from each of llama.cpp's four greedy prompts, the first
//! eight greedy tokens (a prefill of the prompt, then a decode step a token) must be the x86
//! run's, which `fixtures/x86/first-tokens.json` holds. This is the end-to-end check cheap
//! enough to run under an emulator: `cargo xtask arm` runs it on two emulated ARM CPUs, where
//! the full greedy tests (64 tokens a prompt, teacher-forced and free-running) would take
//! most of an hour. On x86 it checks that the file is still what the engine gives (every x86
//! level gives the same bits, so the same tokens); `LLM_BOOK_BLESS=1` rewrites it from an x86
//! run. The fixture's tokens are llama.cpp's up to the first near-tie of our logits (three of
//! the eight runs part from llama.cpp's within eight tokens, each at a near-tie): the ARM run
//! must follow ours, not llama.cpp's. `LLM_BOOK_FIRST_PROMPTS=N` takes the first N prompts
//! only.
//!
//! A missing model fails with the command that fetches it.

use std::collections::BTreeMap;

use ch01_tensors::models;
use ch04_forward::check;
use ch04_forward::reference::{self, GreedyFixture};
use ch08_gguf::engine::Engine;

/// Greedy tokens followed after each prompt.
const TOKENS: usize = 8;

/// The x86 run's tokens: model name → one list of [`TOKENS`] ids per prompt.
type Tokens = BTreeMap<String, Vec<Vec<u32>>>;

fn fixture_path() -> std::path::PathBuf {
    models::workspace_root().join("fixtures/x86/first-tokens.json")
}

/// The x86 run's tokens for `name`, or `None` when blessing (then they are written).
fn x86_tokens(name: &str) -> Option<Vec<Vec<u32>>> {
    if std::env::var_os("LLM_BOOK_BLESS").is_some() {
        if !cfg!(target_arch = "x86_64") {
            panic!("LLM_BOOK_BLESS: the fixture holds the x86 run's tokens; bless it on x86-64");
        }
        return None;
    }
    let path = fixture_path();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; make it on x86-64 with LLM_BOOK_BLESS=1 cargo test --release -p ch08-gguf \
             --test first_tokens",
            path.display()
        )
    });
    let all: Tokens =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Some(
        all.get(name)
            .unwrap_or_else(|| panic!("{} has no tokens for {name}", path.display()))
            .clone(),
    )
}

/// Adds `name`'s tokens to the fixture file (each test blesses its own model), a prompt's
/// list a line.
fn bless(name: &str, ids: Vec<Vec<u32>>) {
    static FILE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = FILE.lock().unwrap_or_else(|e| e.into_inner());
    let path = fixture_path();
    let mut all: Tokens = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    all.insert(name.to_string(), ids);
    std::fs::create_dir_all(path.parent().expect("a folder")).expect("fixtures/x86");
    let models: Vec<String> = all
        .iter()
        .map(|(name, lists)| {
            let lines: Vec<String> = lists.iter().map(|l| format!("    {l:?}")).collect();
            format!("  {name:?}: [\n{}\n  ]", lines.join(",\n"))
        })
        .collect();
    let text = format!("{{\n{}\n}}\n", models.join(",\n"));
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    eprintln!("{name}: wrote {}", path.display());
}

/// Greedy from the prompts of llama.cpp's `fixture` for [`TOKENS`] tokens each, against the
/// x86 run's.
fn follows(name: &str, engine: &Engine<'_>, fixture: &str) {
    let fx: GreedyFixture = reference::load_named(fixture).unwrap_or_else(|e| panic!("{e}"));
    let prompts = std::env::var("LLM_BOOK_FIRST_PROMPTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(fx.prompts.len());
    let isa = ch07_simd_parallel::kernels::detect()
        .map(|(isa, _)| isa.name())
        .unwrap_or("?");
    let want = x86_tokens(name);
    let mut ours = Vec::new();
    for (i, p) in fx.prompts.iter().enumerate().take(prompts) {
        let run = engine
            .greedy(&p.prompt_ids, TOKENS, false, &mut |_| {})
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let llama = check::same_prefix(&run.ids, &p.ids);
        eprintln!(
            "{name} on the {isa} kernels, {:<26} {:?} ({llama}/{TOKENS} llama.cpp's)",
            check::short(&p.prompt),
            run.ids
        );
        if let Some(want) = &want {
            let same = check::same_prefix(&run.ids, &want[i]);
            assert_eq!(
                same,
                TOKENS,
                "{name} on the {isa} kernels, prompt {:?}: greedy token {same} is {:?}, the \
                 x86 run's is {} ({})",
                check::short(&p.prompt),
                run.ids.get(same),
                want[i][same],
                fixture_path().display()
            );
        }
        ours.push(run.ids);
    }
    if want.is_none() {
        bless(name, ours);
    }
}

#[test]
fn smollm2_s_first_greedy_tokens_are_llama_cpp_s() {
    let path = models::require(&models::smollm2_gguf()).unwrap_or_else(|e| panic!("{e}"));
    let loaded =
        ch08_gguf::load(&path).unwrap_or_else(|e| panic!("loading {}: {e}", path.display()));
    let engine = loaded.engine().unwrap_or_else(|e| panic!("{e}"));
    follows("SmolLM2", &engine, "greedy-smollm2-q4_1.json");
}

#[test]
fn gemma3_s_first_greedy_tokens_are_llama_cpp_s() {
    let path = models::require(&models::gemma3_gguf()).unwrap_or_else(|e| panic!("{e}"));
    let file = ch08_gguf::GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let model = ch08_gguf::arch::load_model(&file).unwrap_or_else(|e| panic!("{e}"));
    let (isa, k) = ch07_simd_parallel::kernels::detect().unwrap_or_else(|e| panic!("{e}"));
    let kk = ch07_simd_parallel::kernels::for_isa(isa).expect("a level this CPU runs");
    let engine = Engine::new(&model, k, kk);
    follows("Gemma-3", &engine, "greedy-gemma3-q4_k_m.json");
}

//! The binary's exits: help, a bad flag (2), no adapter at all (1, one line saying what to
//! install), and `info` on the adapter this machine has.

use std::process::{Command, Output};

/// The ch13-gpu binary as a command. Where `LLM_BOOK_TEST_RUNNER` holds a program and its
/// arguments (split at spaces), the binary runs through it: `scripts/lavapipe-next.sh` runs
/// it through another C runtime's loader so.
fn binary() -> Command {
    let bin = env!("CARGO_BIN_EXE_ch13-gpu");
    let runner = std::env::var("LLM_BOOK_TEST_RUNNER").unwrap_or_default();
    let mut parts = runner.split_whitespace();
    match parts.next() {
        Some(program) => {
            let mut cmd = Command::new(program);
            cmd.args(parts).arg(bin);
            cmd
        }
        None => Command::new(bin),
    }
}

fn ch13(args: &[&str], no_driver: bool) -> Output {
    let mut cmd = binary();
    cmd.args(args);
    if no_driver {
        // The Vulkan loader finds no driver: the machine has no adapter at all.
        cmd.env("VK_ICD_FILENAMES", "/nonexistent.json")
            .env("VK_DRIVER_FILES", "/nonexistent.json")
            .env("WGPU_BACKEND", "vulkan");
    }
    cmd.output().expect("the ch13-gpu binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn help_and_bad_flags() {
    let help = ch13(&["--help"], false);
    assert!(help.status.success(), "--help exits 0");
    assert!(
        text(&help.stdout).contains("ch13-gpu kernels"),
        "--help shows the usage"
    );
    for bad in [
        &["info", "--bogus"][..],
        &["dance"],
        &[],
        &["kernels", "--secs", "x"],
        &["tiles", "--format", "q9_9"],
        &["logits", "--ids", "1,x"],
        &["logits", "--top", "3"],
        &["logits", "--ids", "1", "--top", "0"],
        &["info", "--ids", "1"],
    ] {
        let out = ch13(bad, false);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{bad:?} is a usage error: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).starts_with("error: "),
            "{bad:?} says what is wrong"
        );
    }
    // a format is named in any case (the K-quants are q4_K and q6_K): past the flags, the
    // run stops at the 0 tokens, not at the name
    let out = ch13(&["tiles", "--format", "Q4_k", "--tokens", "0"], false);
    let err = text(&out.stderr);
    assert!(
        out.status.code() != Some(0) && !err.contains("--format"),
        "--format Q4_k names Q4_K: {err}"
    );
    let out = ch13(&["kernels", "--secs", "0"], false);
    assert_eq!(
        out.status.code(),
        Some(2),
        "--secs 0: {}",
        text(&out.stderr)
    );
}

#[test]
fn no_adapter_is_one_line_and_exit_1() {
    for cmd in [&["info"][..], &["kernels"]] {
        let out = ch13(cmd, true);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{cmd:?} with no driver: {err}");
        let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error")).collect();
        assert_eq!(lines.len(), 1, "{cmd:?}: one error line, got {err:?}");
        assert!(
            lines[0].contains("no GPU adapter") && lines[0].contains("scripts/test-deps.sh"),
            "{cmd:?}: the line says what is missing and how to get it: {err:?}"
        );
    }
}

/// `bench --compare` on lavapipe: llama.cpp's Vulkan backend skips drivers that run on the
/// CPU, so there is nothing to race: one error line and exit 1, before a model or llama-bench
/// is looked for. With `--per-dispatch`, which llama-bench has no counterpart of, a usage
/// error.
#[test]
fn compare_on_a_cpu_driver_says_there_is_no_gpu_to_race() {
    let out = binary()
        .args(["bench", "--compare", "-m", "/nonexistent.gguf"])
        .env("LLM_BOOK_GPU", "llvmpipe")
        .output()
        .expect("the ch13-gpu binary runs");
    let err = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "bench --compare on lavapipe: {err}"
    );
    assert!(
        err.contains("no GPU here to race on"),
        "it says why there is no race: {err}"
    );
    let out = ch13(&["bench", "--compare", "--per-dispatch"], false);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn info_lists_the_adapter_as_json() {
    let out = ch13(&["info", "--json"], false);
    assert!(
        out.status.success(),
        "info --json failed (run bash scripts/test-deps.sh for lavapipe): {}",
        text(&out.stderr)
    );
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).expect("info --json is JSON");
    let first = &all[0];
    for key in [
        "name",
        "backend",
        "device_type",
        "driver",
        "limits",
        "features",
    ] {
        assert!(!first[key].is_null(), "info --json gives {key}: {first}");
    }
    // the tensor-core shapes wgpu offers, listed where (and only where) the feature is on
    let coop = first["cooperative_matrices"]
        .as_array()
        .unwrap_or_else(|| panic!("info --json lists cooperative_matrices: {first}"));
    let feature = first["features"]
        .as_array()
        .is_some_and(|f| f.iter().any(|n| n == "EXPERIMENTAL_COOPERATIVE_MATRIX"));
    assert_eq!(
        !coop.is_empty(),
        feature,
        "cooperative matrix shapes listed exactly where the adapter has the feature: {first}"
    );
    assert!(
        first["limits"]["max_storage_buffer_binding_size"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "the storage binding limit is reported: {first}"
    );
}

/// Generating: greedy, three tokens, the CPU engine's own (chapter 8's greedy on the same
/// prompt ids), with chapter 9's `--json` fields; a stop string ends a greedy run where it
/// appears; a bad model path, a file that is not a GGUF and an unknown
/// `LLM_BOOK_GPU_REDUCTION` are one error line and exit 2.
#[test]
fn generates_the_cpu_engine_s_greedy_tokens() {
    let path = ch01_tensors::models::require(&ch01_tensors::models::smollm2_gguf())
        .unwrap_or_else(|e| panic!("{e}"));
    let model = path.to_str().expect("a UTF-8 path");
    let args = [
        "-m",
        model,
        "-p",
        "The capital of France is",
        "-n",
        "3",
        "--temp",
        "0",
        "--json",
    ];
    let out = ch13(&args, false);
    assert!(
        out.status.success(),
        "generating failed (run bash scripts/test-deps.sh for lavapipe): {}",
        text(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json is JSON");
    let ids = |key: &str| -> Vec<u32> {
        serde_json::from_value(v[key].clone()).unwrap_or_else(|e| panic!("{key}: {e} in {v}"))
    };
    let (prompt, generated) = (ids("prompt_ids"), ids("generated_ids"));
    for key in [
        "text",
        "stop_reason",
        "timings",
        "adapter",
        "dispatches_per_token",
    ] {
        assert!(!v[key].is_null(), "--json gives {key}: {v}");
    }
    let m = ch08_gguf::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let engine = m.engine().unwrap();
    let cpu = engine.greedy(&prompt, 3, false, &mut |_| {}).unwrap().ids;
    assert_eq!(
        generated, cpu,
        "the GPU's greedy tokens after {prompt:?} are not the CPU engine's"
    );
    // greedy runs two steps in flight; a stop string ends the run where it appears (the
    // step queued behind it dropped), with the tokens so far and the text before it
    let run = |extra: &[&str]| -> serde_json::Value {
        let mut a = vec!["-m", model, "-p", "The capital of France is", "-n", "8"];
        a.extend_from_slice(&["--temp", "0", "--json"]);
        a.extend_from_slice(extra);
        let out = ch13(&a, false);
        assert!(out.status.success(), "{a:?}: {}", text(&out.stderr));
        serde_json::from_slice(&out.stdout).expect("--json is JSON")
    };
    let whole = run(&[]);
    let all_text = whole["text"].as_str().unwrap_or_default().to_string();
    let chars: Vec<char> = all_text.chars().collect();
    let stop: String = chars[chars.len() / 2..(chars.len() / 2 + 3).min(chars.len())]
        .iter()
        .collect();
    let at = all_text
        .find(&stop)
        .expect("the stop string is in the text");
    let stopped = run(&["--stop", &stop]);
    let ids_of = |v: &serde_json::Value| -> Vec<u32> {
        serde_json::from_value(v["generated_ids"].clone()).unwrap_or_default()
    };
    let (all_ids, some) = (ids_of(&whole), ids_of(&stopped));
    assert_eq!(stopped["stop_reason"], "stop", "--stop {stop:?}: {stopped}");
    assert_eq!(
        stopped["text"].as_str(),
        Some(&all_text[..at]),
        "--stop {stop:?}: the text before it, of {all_text:?}"
    );
    assert!(
        !some.is_empty() && some.len() < all_ids.len() && all_ids.starts_with(&some),
        "--stop {stop:?}: the tokens {some:?} are not the first of {all_ids:?}"
    );
    for (bad, says) in [
        (&["-m", "/nonexistent.gguf", "-p", "hi"][..], "no such file"),
        (&["-m", "Cargo.toml", "-p", "hi"], "not a GGUF file"),
        (&["-m", model, "-p", "hi", "-n", "0"], "-n must be"),
    ] {
        let out = ch13(bad, false);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {err}");
        assert!(err.contains(says), "{bad:?} says {says:?}: {err}");
    }
    // a reduction misspelt is an error naming the three, not the default quietly
    let out = binary()
        .args(["-m", model, "-p", "hi"])
        .env("LLM_BOOK_GPU_REDUCTION", "inorder")
        .output()
        .expect("the ch13-gpu binary runs");
    let err = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "LLM_BOOK_GPU_REDUCTION=inorder: {err}"
    );
    assert!(
        err.contains("workgroup, subgroup and in-order"),
        "LLM_BOOK_GPU_REDUCTION=inorder names the reductions: {err}"
    );
}

/// `bench` on SmolLM2, two tokens each way, with `extra` (`--per-dispatch`, `--profile`):
/// its JSON, once it has succeeded.
fn bench_json(extra: &str) -> serde_json::Value {
    let path = ch01_tensors::models::require(&ch01_tensors::models::smollm2_gguf())
        .unwrap_or_else(|e| panic!("{e}"));
    let model = path.to_str().expect("a UTF-8 path");
    let args = [
        "bench", "-m", model, "--pp", "2", "--tg", "2", extra, "--json",
    ];
    let out = ch13(&args, false);
    assert!(
        out.status.success(),
        "bench {extra} failed: {}",
        text(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("--json is JSON")
}

/// `bench` on two tokens each way: the JSON has the adapter, the dispatches a token (one
/// norm, products, … per layer: more than the layers), and positive rates for both ways
/// of submitting and both ways of waiting (two steps in flight, a step at a time), and
/// what recording a step costs the host.
#[test]
fn bench_reports_decode_and_the_dispatches_a_token() {
    let v = bench_json("--per-dispatch");
    assert!(v["adapter"].is_string(), "the adapter: {v}");
    let dispatches = v["dispatches_per_token"].as_u64().unwrap_or(0);
    assert!(
        dispatches > 30,
        "SmolLM2's 30 layers take more dispatches than {dispatches}"
    );
    for key in [
        "pp_tok_s",
        "tg_tok_s",
        "tg_tok_s_one_in_flight",
        "record_us_per_token",
        "tg_tok_s_submit_per_dispatch",
    ] {
        assert!(v[key].as_f64().unwrap_or(0.0) > 0.0, "{key}: {v}");
    }
}

/// `bench --profile` on lavapipe (which has timestamps inside a pass): every dispatch of the
/// step is counted once under what it is, the products by format and shape, and the shares
/// add up to the whole step.
#[test]
fn bench_profiles_the_step_dispatch_by_dispatch() {
    let v = bench_json("--profile");
    let p = &v["profile"];
    let ops = p["ops"]
        .as_array()
        .unwrap_or_else(|| panic!("no profile: {v}"));
    let counted: u64 = ops
        .iter()
        .map(|o| o["dispatches"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(
        Some(counted),
        v["dispatches_per_token"].as_u64(),
        "the profile counts {counted} dispatches a token, the step has another number: {p}"
    );
    let shares: f64 = ops.iter().map(|o| o["share"].as_f64().unwrap_or(0.0)).sum();
    assert!(
        (shares - 1.0).abs() < 1e-9,
        "the shares add up to {shares}: {p}"
    );
    let named = |what: &str| ops.iter().any(|o| o["what"] == what);
    for what in [
        "attention",
        "rmsnorm",
        "product q4_1 576x576",
        "product q8_0 49152x576",
    ] {
        assert!(named(what), "no {what:?} in the profile: {p}");
    }
    assert!(
        p["us_per_token"].as_f64().unwrap_or(0.0) > 0.0,
        "a step that takes no time: {p}"
    );
}

/// `logits`, what the race runs on a GPU to hold it to the CPU engine there: with the
/// products in the CPU's order, each position's argmax and top logits are the CPU engine's,
/// bit for bit (its window's logits, in-process); a token past the vocabulary is one error
/// line and exit 2.
#[test]
fn logits_in_the_cpu_s_order_are_the_cpu_engine_s() {
    let path = ch01_tensors::models::require(&ch01_tensors::models::smollm2_gguf())
        .unwrap_or_else(|e| panic!("{e}"));
    let model = path.to_str().expect("a UTF-8 path");
    let ids = [1u32, 450, 3575, 282, 4649, 314];
    let list: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    let list = list.join(",");
    let args = [
        "logits", "-m", model, "--ids", &list, "--top", "3", "--json",
    ];
    let out = binary()
        .args(args)
        .env("LLM_BOOK_GPU_REDUCTION", "in-order")
        .output()
        .expect("the ch13-gpu binary runs");
    assert!(out.status.success(), "logits failed: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json is JSON");
    let m = ch08_gguf::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let cpu = m.engine().unwrap().window_logits(&ids).unwrap();
    let vocab = m.model.config.vocab_size;
    for (t, row) in cpu.chunks_exact(vocab).enumerate() {
        let top = ch04_forward::model::highest(row, 3);
        let pos = &v["positions"][t];
        assert_eq!(pos["argmax"], top[0].0, "position {t}: the argmax: {pos}");
        for (k, &(i, _)) in top.iter().enumerate() {
            let (id, value) = (&pos["top"][k][0], pos["top"][k][1].as_f64());
            assert_eq!(id, i, "position {t}, the {k}-th highest: {pos}");
            let bits = value.map(|x| (x as f32).to_bits());
            assert_eq!(bits, Some(row[i].to_bits()), "position {t}, id {i}: {pos}");
        }
    }
    let out = ch13(&["logits", "-m", model, "--ids", "1,99999999"], false);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("past the vocabulary"), "{err}");
}

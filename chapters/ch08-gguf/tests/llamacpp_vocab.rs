//! Every vocabulary llama.cpp tests its own tokenizer on, against its own test vectors.
//!
//! llama.cpp ships vocabulary-only GGUF files (`ggml-vocab-qwen2.gguf`: metadata, no
//! tensors) with inputs (`.inp`, texts separated by lines `__ggml_vocab_test__`) and the ids
//! its tokenizer gives them (`.out`, one line per text). Its `test-tokenizer-0` tokenizes
//! without BOS and without parsing special tokens; so does this test. One test per
//! vocabulary, each reporting its first mismatch as text, expected ids and ours.
//!
//! `bash scripts/models.sh llamacpp` fetches the files (a missing one fails the test).

use std::path::Path;

use ch01_tensors::models;
use ch08_gguf::GgufFile;

/// One test vector: a text and the ids llama.cpp gives it.
struct Vector {
    text: String,
    ids: Vec<u32>,
}

/// Reads `ggml-vocab-{name}.gguf.inp` and `.out` the way `test-tokenizer-0.cpp` does.
fn vectors(gguf: &Path) -> Vec<Vector> {
    let read = |ext: &str| {
        let path = gguf.with_extension(format!("gguf.{ext}"));
        let path = models::require(&path).unwrap_or_else(|e| panic!("{e}"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let (inp, out) = (read("inp"), read("out"));
    let sep = "\n__ggml_vocab_test__\n";
    let mut texts: Vec<&str> = Vec::new();
    let mut rest = inp.as_str();
    while !rest.is_empty() {
        match rest.find(sep) {
            Some(at) => {
                texts.push(&rest[..at]);
                rest = &rest[at + sep.len()..];
            }
            None => {
                texts.push(rest);
                break;
            }
        }
    }
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        texts.len(),
        lines.len(),
        "{}: {} inputs but {} lines of expected ids",
        gguf.display(),
        texts.len(),
        lines.len()
    );
    texts
        .iter()
        .zip(lines)
        .map(|(text, line)| Vector {
            text: text.to_string(),
            ids: line
                .split_whitespace()
                .map(|t| t.parse().unwrap_or_else(|_| panic!("bad id {t:?}")))
                .collect(),
        })
        .collect()
}

/// Tokenizes every vector of vocabulary `name`; panics with the first mismatch.
fn check(name: &str) {
    let path = models::require(&models::llamacpp_vocab(name)).unwrap_or_else(|e| panic!("{e}"));
    let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{name}: opening the file: {e}"));
    let tok = ch08_gguf::tokenizer(&file.gguf)
        .unwrap_or_else(|e| panic!("{name}: building its tokenizer: {e}"));
    let vectors = vectors(&path);
    assert!(
        vectors.len() >= 20,
        "{name}: only {} vectors",
        vectors.len()
    );
    let mut wrong = Vec::new();
    for (i, v) in vectors.iter().enumerate() {
        let ours = tok.tokenizer.encode(&v.text, false);
        if ours != v.ids {
            wrong.push((i, ours));
        }
    }
    println!(
        "{name}: {} of {} vectors match llama.cpp",
        vectors.len() - wrong.len(),
        vectors.len()
    );
    if let Some((i, ours)) = wrong.first() {
        let v = &vectors[*i];
        let first_diff = v.ids.iter().zip(ours).take_while(|(a, b)| a == b).count();
        panic!(
            "{name}: {} of {} vectors differ from llama.cpp's. The first, vector {i}:\n  \
             text      {:?}\n  llama.cpp {:?}\n  ours      {:?}\n  (they part at id {first_diff})",
            wrong.len(),
            vectors.len(),
            v.text,
            v.ids,
            ours
        );
    }
}

macro_rules! vocab_tests {
    ($($test:ident => $name:literal),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                check($name);
            }
        )*
    };
}

/// The vocabularies whose vectors must all pass.
const SUPPORTED: [&str; 13] = [
    "llama-bpe",
    "qwen2",
    "qwen35",
    "deepseek-llm",
    "deepseek-coder",
    "gpt-2",
    "starcoder",
    "refact",
    "command-r",
    "mpt",
    "falcon",
    "llama-spm",
    "phi-3",
];

vocab_tests! {
    llama_bpe => "llama-bpe",
    qwen2 => "qwen2",
    qwen35 => "qwen35",
    deepseek_llm => "deepseek-llm",
    deepseek_coder => "deepseek-coder",
    gpt_2 => "gpt-2",
    starcoder => "starcoder",
    refact => "refact",
    command_r => "command-r",
    mpt => "mpt",
    falcon => "falcon",
    llama_spm => "llama-spm",
    phi_3 => "phi-3",
}

/// The vocabularies the chapter does not implement are refused by name, with the list of
/// what it does implement, never tokenized wrongly.
#[test]
fn other_tokenizer_models_are_refused_with_the_supported_list() {
    // WordPiece (BERT), Unigram (T5's), and Gemma 4's BPE over SentencePiece-style text.
    for (name, model) in [
        ("bert-bge", "bert"),
        ("nomic-bert-moe", "t5"),
        ("gemma-4", "gemma4"),
    ] {
        let path = models::require(&models::llamacpp_vocab(name)).unwrap_or_else(|e| panic!("{e}"));
        let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let err = match ch08_gguf::tokenizer(&file.gguf) {
            Ok(_) => panic!("{name}: a {model} vocabulary should be refused, not tokenized"),
            Err(e) => e.to_string(),
        };
        assert!(
            err.contains(&format!("{model:?}"))
                && err.contains("\"gpt2\" (byte-level BPE)")
                && err.contains("\"llama\" (SentencePiece)"),
            "{name}: the error should name the model {model:?} and the supported ones, got: {err}"
        );
    }
}

/// A byte-level BPE file whose split the chapter does not know is refused by the split's
/// name (llama.cpp's `aquila` file names none, which llama.cpp reads as `default`).
#[test]
fn an_unknown_split_is_refused_by_name() {
    let path = models::require(&models::llamacpp_vocab("aquila")).unwrap_or_else(|e| panic!("{e}"));
    let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("aquila: {e}"));
    let err = match ch08_gguf::tokenizer(&file.gguf) {
        Ok(_) => panic!("aquila: a file with no pre-tokenizer name should be refused"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("\"default\"") && err.contains("llama-bpe") && err.contains("qwen35"),
        "aquila: the error should name the split \"default\" and the known ones, got: {err}"
    );
}

/// `ch08-gguf tokenize -m FILE --json -- TEXT` on every vocabulary: the ids of llama.cpp's
/// vectors (three of each file: the first, the middle and the last non-empty text).
#[test]
fn the_tokenize_command_reads_every_vocabulary_file() {
    for name in SUPPORTED {
        let path = models::require(&models::llamacpp_vocab(name)).unwrap_or_else(|e| panic!("{e}"));
        let all: Vec<Vector> = vectors(&path)
            .into_iter()
            .filter(|v| !v.text.is_empty())
            .collect();
        for v in [&all[0], &all[all.len() / 2], &all[all.len() - 1]] {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_ch08-gguf"))
                .arg("tokenize")
                .arg("-m")
                .arg(&path)
                .args(["--json", "--", &v.text])
                .output()
                .expect("the binary runs");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{name}: tokenize {:?} failed: {}",
                v.text,
                String::from_utf8_lossy(&out.stderr)
            );
            let json: serde_json::Value = serde_json::from_str(&stdout)
                .unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {stdout}"));
            let ids: Vec<u32> = json["ids"]
                .as_array()
                .unwrap_or_else(|| panic!("{name}: no \"ids\" in {stdout}"))
                .iter()
                .map(|x| x.as_u64().expect("an id") as u32)
                .collect();
            assert_eq!(
                ids, v.ids,
                "{name}: `ch08-gguf tokenize` gives {:?} other ids than llama.cpp",
                v.text
            );
        }
    }
    let bert = models::llamacpp_vocab("bert-bge");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ch08-gguf"))
        .arg("tokenize")
        .arg("-m")
        .arg(&bert)
        .args(["--", "Hello"])
        .output()
        .expect("the binary runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("\"bert\"") && !err.contains("panicked"),
        "bert-bge: tokenize should fail with a clear error, got {:?}: {err}",
        out.status
    );
}

/// The reported bug, on Llama 2's (and Mistral's) SentencePiece vocabulary: greedy text
/// after "The capital of France is" printed "…isAssoci". A generated token continues the
/// prompt, so its leading space stays, as llama.cpp prints it ("…is Associ").
#[test]
fn a_generated_piece_keeps_its_space_after_a_spm_prompt() {
    let path =
        models::require(&models::llamacpp_vocab("llama-spm")).unwrap_or_else(|e| panic!("{e}"));
    let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("llama-spm: {e}"));
    let tok = ch08_gguf::tokenizer(&file.gguf).unwrap_or_else(|e| panic!("llama-spm: {e}"));
    let tok = &tok.tokenizer;
    let prompt = tok.encode("The capital of France is", false);
    let associ = tok
        .token_id("▁Associ")
        .expect("Llama 2's vocabulary has the token ▁Associ");
    let mut stream = ch02_tokenizer::StreamDecoder::new(tok);
    let printed = stream.push(associ).unwrap();
    let shown = format!("{}{printed}", tok.decode(&prompt).unwrap());
    assert_eq!(
        shown, "The capital of France is Associ",
        "the prompt, then the generated ▁Associ: the generated piece lost its space"
    );
}

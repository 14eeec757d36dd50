"""Writes the llama.cpp reference fixtures in fixtures/reference/.

    bash scripts/models.sh all
    .venv/bin/python scripts/make_fixtures.py

llama.cpp runs through llama-cpp-python (pinned below); if it is missing from the venv this
script installs it, which compiles llama.cpp from source (about 15 minutes on 2 cores).
See fixtures/README.md for what each file holds and how it was computed.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import f32_gguf
import models
import reference_forward

LLAMA_CPP_PYTHON = "0.3.36"
# The llama.cpp commit vendored in the llama-cpp-python 0.3.36 source package.
LLAMA_CPP_COMMITS = {"0.3.36": "0c1e57098bba43ac29e6e3b677cdceebdd22334f"}
GGML_TYPE_F32 = 0        # llama_cpp.GGML_TYPE_F32: the KV cache type for the f32 oracle
TOP_K = 20
GREEDY_STEPS = 64
PPL_CHUNK = 256          # text tokens per perplexity window

OUT = models.ROOT / "fixtures" / "reference"
CORPUS = models.ROOT / "scripts" / "tokenizer_corpus.json"
PPL_TEXT = OUT / "perplexity-text.txt"

PARAGRAPH = ("Rust is a systems programming language that focuses on safety, speed, and concurrency. "
             "It prevents many common bugs at compile time by tracking who owns each piece of memory, "
             "so programs can run without a garbage collector and still avoid dangling pointers and "
             "data races. Many teams now use it to write command-line tools, web servers, and embedded firmware.")
CODE = "def fibonacci(n):\n    if n < 2:\n        return n\n    return"
CHAT = {
    "smollm2": "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
               "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "gemma3": "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n",
}


def say(message: str) -> None:
    print(message, flush=True)


def ensure_llama_cpp():
    try:
        import llama_cpp
    except ImportError:
        say(f"==> llama-cpp-python is not installed; installing llama-cpp-python=={LLAMA_CPP_PYTHON}")
        say("    (pip compiles llama.cpp from source: about 15 minutes on 2 cores)")
        cmd = [sys.executable, "-m", "pip", "install", f"llama-cpp-python=={LLAMA_CPP_PYTHON}"]
        if subprocess.run(cmd).returncode != 0:
            raise models.Failure("pip could not build llama-cpp-python; it needs a C/C++ compiler and cmake "
                                 "(Debian/Ubuntu: apt-get install build-essential cmake)")
        import llama_cpp
    plain_cpu_kernels(llama_cpp)
    if llama_cpp.__version__ != LLAMA_CPP_PYTHON:
        say(f"warning: llama-cpp-python {llama_cpp.__version__} installed, fixtures were made with "
            f"{LLAMA_CPP_PYTHON}; numbers may differ slightly")
    return llama_cpp


def plain_cpu_kernels(llama_cpp) -> None:
    """Loads every model with use_extra_bufts = false: no weight repacking, no AMX.

    By default llama.cpp moves weights into "extra" CPU buffer types that pick a different
    kernel per machine (repacked Q4_K/Q4_0 layouts, Intel AMX tiles). That makes the numbers
    depend on the CPU, and on virtual machines that report AMX without enabling it the AMX
    kernel dies with an illegal instruction. Llama() has no flag for it, so we wrap the
    function it gets its default model parameters from.
    """
    import llama_cpp.llama as llama_module

    defaults = llama_module.llama_cpp.llama_model_default_params
    if getattr(defaults, "plain_cpu", False):
        return

    def params():
        p = defaults()
        p.use_extra_bufts = False
        return p

    params.plain_cpu = True
    llama_module.llama_cpp.llama_model_default_params = params


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def to_json(value, indent: str = "") -> str:
    """JSON with one line per leaf record (a position, a tokenizer case), so diffs stay readable."""
    flat = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    if len(flat) <= 1000 or not isinstance(value, (dict, list)):
        return flat
    inner = indent + " "
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k, ensure_ascii=False)}: {to_json(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    return "[\n" + ",\n".join(inner + to_json(v, inner) for v in value) + "\n" + indent + "]"


def write_json(path: Path, value: dict) -> None:
    """Writes `value` to `path` as to_json's text, through a temporary file beside it (a run
    that stops halfway leaves the old file whole), and says so."""
    text = to_json(value) + "\n"
    assert json.loads(text) == value
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    shown = path.relative_to(models.ROOT) if path.is_relative_to(models.ROOT) else path
    say(f"  wrote {shown} ({len(text.encode()) / 1e3:.1f} kB)")


def write(name: str, value: dict) -> None:
    write_json(OUT / name, value)


class Runner:
    """One llama.cpp model: tokenize, logits at every position, greedy decoding."""

    def __init__(self, llama_cpp, key: str, variant: str, path: Path, source_sha: str, f32_kv: bool):
        kwargs = dict(logits_all=True, n_ctx=512, seed=0, n_threads=2, verbose=False, flash_attn=False)
        if f32_kv:
            kwargs.update(type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32)
        self.llm = llama_cpp.Llama(model_path=str(path), **kwargs)
        self.key, self.variant = key, variant
        self.add_bos = bool(self.llm._model.add_bos_token())
        self.header = {
            "model": path.name.split(".")[0] if key == "smollm2" else "gemma-3-270m",
            "variant": variant,
            "model_sha256": source_sha,
            "llama_cpp_python": llama_cpp.__version__,
            "llama_cpp_commit": LLAMA_CPP_COMMITS.get(llama_cpp.__version__, "unknown"),
            "file": path.name,
            "settings": "n_ctx=512, n_threads=2, seed=0, flash_attn=False, use_extra_bufts=False, "
                        + ("F32 KV cache" if f32_kv else "F16 KV cache (default)"),
        }

    def tokenize(self, text: str, add_bos: bool, special: bool) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=special)

    def prompt_ids(self, prompt: str) -> list[int]:
        return self.tokenize(prompt, add_bos=self.add_bos, special=True)

    def logits(self, ids: list[int]) -> np.ndarray:
        """(len(ids), vocab): the logits after each position, from one batched decode."""
        self.llm.reset()
        self.llm.eval(ids)
        return np.array(self.llm.scores[: len(ids)], dtype=np.float32)

    def greedy(self, ids: list[int], steps: int) -> list[int]:
        self.llm.reset()
        self.llm.eval(ids)
        out = []
        while True:
            nxt = int(np.argmax(self.llm.scores[self.llm.n_tokens - 1]))   # logits of the last token fed
            out.append(nxt)
            if len(out) == steps:
                return out
            self.llm.eval([nxt])

    def text(self, ids: list[int]) -> str:
        return self.llm.detokenize(ids).decode("utf-8", errors="replace")


def top_entries(row: np.ndarray) -> dict:
    order = np.argsort(-row, kind="stable")[:TOP_K]    # ties: lower id first, like argmax
    return {"argmax": int(order[0]), "top": [[int(i), round(float(row[i]), 6)] for i in order]}


def prompts_for(key: str) -> list[str]:
    return ["The capital of France is", CHAT[key], CODE, PARAGRAPH]


def tokenizer_fixture(run: Runner, corpus: list[str]) -> dict:
    cases = [{"text": t, "ids": run.tokenize(t, False, False), "ids_special": run.tokenize(t, False, True)}
             for t in corpus]
    return {**run.header, "add_bos": run.add_bos, "cases": cases}


def logits_fixture(run: Runner) -> tuple[dict, dict[str, tuple[list[int], np.ndarray]]]:
    """The fixture, and every prompt's ids and full logits (seq, vocab) for the oracle check."""
    prompts, full = [], {}
    for prompt in prompts_for(run.key):
        ids = run.prompt_ids(prompt)
        logits = run.logits(ids)
        full[prompt] = (ids, logits)
        prompts.append({"prompt": prompt, "ids": ids, "positions": [top_entries(r) for r in logits]})
    return {**run.header, "top_k": TOP_K, "prompts": prompts}, full


def greedy_fixture(run: Runner) -> dict:
    prompts = []
    for prompt in prompts_for(run.key)[:3] + ["Once upon a time"]:
        ids = run.prompt_ids(prompt)
        gen = run.greedy(ids, GREEDY_STEPS)
        prompts.append({"prompt": prompt, "prompt_ids": ids, "ids": gen, "text": run.text(gen)})
    return {**run.header, "steps": GREEDY_STEPS, "prompts": prompts}


def perplexity(run: Runner, text: str) -> dict:
    ids = run.tokenize(text, add_bos=False, special=False)
    bos = [run.llm.token_bos()] if run.add_bos else []
    nll, scored = 0.0, 0
    for start in range(0, len(ids), PPL_CHUNK):
        window = bos + ids[start:start + PPL_CHUNK]
        logits = run.logits(window).astype(np.float64)              # (len(window), vocab)
        logz = np.log(np.exp(logits - logits.max(axis=1, keepdims=True)).sum(axis=1)) + logits.max(axis=1)
        for pos in range(1, len(window)):                            # position pos-1 predicts window[pos]
            nll += logz[pos - 1] - logits[pos - 1, window[pos]]
            scored += 1
    return {"variant": run.variant, "add_bos": run.add_bos, "text_tokens": len(ids), "scored_tokens": scored,
            "mean_nll": round(nll / scored, 6), "perplexity": round(float(np.exp(nll / scored)), 4)}


def main() -> int:
    llama_cpp = ensure_llama_cpp()
    mdir = models.models_dir()
    smol = mdir / models.SMOLLM2.subdir / models.SMOLLM2.filename
    gemma = mdir / models.GEMMA3.subdir / models.GEMMA3.filename
    hf_dir = smol.parent / "hf"
    for path in (smol, gemma, hf_dir / "model.safetensors"):
        if not path.exists():
            raise models.Failure(f"{path} is missing; run `bash scripts/models.sh all` first")
    for path, model in ((smol, models.SMOLLM2), (gemma, models.GEMMA3)):
        if sha256(path) != model.sha256:
            raise models.Failure(f"{path} has the wrong sha256; run `bash scripts/models.sh all` again")

    f32_path = smol.with_name("SmolLM2-135M-Instruct.F32.gguf")
    if not f32_path.exists():
        say(f"==> writing the f32 oracle model {f32_path}")
        f32_gguf.write_f32_copy(smol, f32_path, say)

    corpus = json.loads(CORPUS.read_text(encoding="utf-8"))
    ppl_text = PPL_TEXT.read_text(encoding="utf-8")
    OUT.mkdir(parents=True, exist_ok=True)
    ppl = {"method": (f"text tokenized without BOS and special tokens, cut into windows of {PPL_CHUNK} tokens; "
                      "each window is evaluated from an empty cache, with BOS in front if the model adds BOS; "
                      "every token with at least one token before it in its window is scored; "
                      "perplexity = exp(mean negative log-likelihood), computed in float64 from the f32 logits"),
           "text": "fixtures/reference/perplexity-text.txt",
           "text_sha256": hashlib.sha256(ppl_text.encode("utf-8")).hexdigest(), "models": {}}

    runs = [("smollm2", "q4_1", smol, False), ("smollm2", "f32", f32_path, True), ("gemma3", "q4_k_m", gemma, False)]
    full_logits: dict[str, dict[str, tuple[list[int], np.ndarray]]] = {}
    for key, variant, path, f32_kv in runs:
        start = time.monotonic()
        say(f"==> {key} {variant}: {path.name}")
        source = models.MODELS[key]
        run = Runner(llama_cpp, key, variant, path, source.sha256, f32_kv)
        if variant == "f32":
            run.header["oracle_gguf_sha256"] = sha256(path)
        if variant != "f32":
            write(f"tokenizer-{key}.json", tokenizer_fixture(run, corpus))
        fixture, full_logits[variant] = logits_fixture(run)
        write(f"logits-{key}-{variant}.json", fixture)
        write(f"greedy-{key}-{variant}.json", greedy_fixture(run))
        ppl["models"][f"{key}-{variant}"] = {**run.header, **perplexity(run, ppl_text)}
        say(f"  perplexity {ppl['models'][f'{key}-{variant}']['perplexity']}  ({time.monotonic() - start:.0f} s)")
        del run

    say("==> float64 reference forward pass of SmolLM2 (hf/model.safetensors) vs llama.cpp")
    ref = reference_forward.Llama64(hf_dir)
    check = {"float64_vs_f32_oracle": [], "float64_vs_q4_1": []}
    for prompt, (ids, oracle) in full_logits["f32"].items():
        exact = ref.forward(ids)                                         # (seq, vocab), float64
        d_f32 = float(np.max(np.abs(exact - oracle)))
        d_q = float(np.max(np.abs(exact - full_logits["q4_1"][prompt][1])))
        check["float64_vs_f32_oracle"].append(d_f32)
        check["float64_vs_q4_1"].append(d_q)
        say(f"  {len(ids):3d} tokens: max |float64 - f32 oracle| = {d_f32:.2e}, "
            f"max |float64 - q4_1 run| = {d_q:.2e}  ({prompt[:30]!r})")
    write("perplexity.json", ppl)
    write("oracle-check.json", {
        "what": "max |logit difference| over all positions and the whole vocabulary, per logits prompt, "
                "between an exact float64 numpy forward pass over hf/model.safetensors "
                "(scripts/reference_forward.py) and llama.cpp",
        "prompts": list(full_logits["f32"].keys()),
        **{k: [float(f"{x:.3e}") for x in v] for k, v in check.items()},
    })
    return 0


def run(main) -> None:
    """Exits with `main()`'s status; a models.Failure is one line on stderr and status 1."""
    try:
        sys.exit(main())
    except models.Failure as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    run(main)

"""Writes fixtures/families/: llama.cpp's logits on small synthetic files of every architecture.

    bash scripts/models.sh all
    .venv/bin/python scripts/make_family_fixtures.py                 # the committed cases
    .venv/bin/python scripts/make_family_fixtures.py --shape wide --seed 7 --out /tmp/more

For each case (architecture x weights) `ch08-gguf synth` writes a small model file with
llama.cpp's tensor names and metadata, a real vocabulary and random weights from a seed (see
chapters/ch08-gguf/src/synth.rs) into a temporary folder; llama.cpp (through the pinned
llama-cpp-python) loads it, tokenizes a few prompts with the file's own tokenizer and
evaluates them, and the fixture records the generator's arguments, the file's sha256,
the token ids, and at each position llama.cpp's argmax, the gap between its top two logits
and its top 20 (id, logit). The file itself is deleted: the test makes it again from the
arguments. See fixtures/README.md, "families/".
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

import numpy as np

import models
from make_fixtures import (LLAMA_CPP_COMMITS, GGML_TYPE_F32, TOP_K, CODE, PARAGRAPH, ensure_llama_cpp, run, say,
                           sha256, write_json)

ARCHES = ["llama3", "mistral", "qwen2", "qwen3", "phi3", "gemma2"]
WEIGHTS = ["f32", "q8_0"]
PROMPTS = ["The capital of France is", CODE, PARAGRAPH]
OUT = models.ROOT / "fixtures" / "families"
# llama.cpp is set up for the context this engine gives the file: its own, capped at chapter
# 8's MAX_CONTEXT. The context decides which of Phi-3's RoPE factor sets both engines use
# (the long ones past rope.scaling.original_context_length); for the others it changes nothing.
MAX_CONTEXT = 8192
# The smallest top-two gap a file may have, per weight type: twice tests/families.rs's F32
# bound, so that its argmax is required at every position; none for the quantized files,
# whose near-ties (gap under twice the Q8_0 bound) the test treats as ties.
MIN_GAP = {"f32": 0.002, "q8_0": 0.0, "q4_0": 0.0}
# Gemma-2's F32 files have the wider bound of its f16 GELU table (GELU_F32_BOUND, 2.5e-3).
MIN_GAP_GEMMA2_F32 = 0.005
SEED_TRIES = 50


def synth(args: dict, out: Path) -> None:
    cmd = ["cargo", "run", "--quiet", "--release", "-p", "ch08-gguf", "--", "synth"]
    for key, value in args.items():
        cmd += [f"--{key}", str(value)]
    cmd += ["--out", str(out)]
    if subprocess.run(cmd, cwd=models.ROOT).returncode != 0:
        raise models.Failure(f"`{' '.join(cmd)}` failed")


def engine_context(path: Path) -> int:
    """The file's `{arch}.context_length`, capped at MAX_CONTEXT, as chapter 8's config reads it."""
    from gguf import GGUFReader

    reader = GGUFReader(path)
    field = reader.fields["general.architecture"]
    arch = bytes(field.parts[field.data[0]]).decode()
    field = reader.fields[f"{arch}.context_length"]
    return min(int(field.parts[field.data[0]][0]), MAX_CONTEXT)


def positions(logits: np.ndarray) -> list[dict]:
    rows = []
    for row in logits:
        order = np.argsort(-row, kind="stable")[:TOP_K]     # ties: lower id first, like argmax
        rows.append({"argmax": int(order[0]), "gap": round(float(row[order[0]] - row[order[1]]), 6),
                     "top": [[int(i), round(float(row[i]), 6)] for i in order]})
    return rows


def case(llama_cpp, arch: str, weights: str, seed: int, shape: str, vocab: str | None, tmp: Path) -> dict:
    args = {"arch": arch, "seed": seed, "weights": weights, "shape": shape}
    name = f"{arch}-{weights}" + ("" if shape == "small" else f"-{shape}-{seed}")
    if vocab is not None:
        args["vocab"] = vocab
        name += f"-{vocab}"
    path = tmp / f"{name}.gguf"
    synth(args, path)
    # F32 K and V caches for both weight types: the comparison is of the architecture and
    # the weights' format, not of llama.cpp's F16 cache (ours is F32).
    n_ctx = engine_context(path)
    llm = llama_cpp.Llama(model_path=str(path), logits_all=True, n_ctx=n_ctx, seed=0, n_threads=2,
                          verbose=False, flash_attn=False, type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32)
    add_bos = bool(llm._model.add_bos_token())
    prompts = []
    for prompt in PROMPTS:
        ids = llm.tokenize(prompt.encode("utf-8"), add_bos=add_bos, special=True)
        llm.reset()
        llm.eval(ids)
        logits = np.array(llm.scores[: len(ids)], dtype=np.float32)
        if not np.all(np.isfinite(logits)):
            raise models.Failure(f"{path.name}: llama.cpp's logits are not all finite")
        prompts.append({"prompt": prompt, "ids": ids, "positions": positions(logits)})
    del llm
    gaps = [p["gap"] for pr in prompts for p in pr["positions"]]
    fixture = {
        "case": name,
        "synth": args,
        "file_sha256": sha256(path),
        "file_bytes": path.stat().st_size,
        "llama_cpp_python": llama_cpp.__version__,
        "llama_cpp_commit": LLAMA_CPP_COMMITS.get(llama_cpp.__version__, "unknown"),
        "settings": f"n_ctx={n_ctx}, n_threads=2, seed=0, flash_attn=False, use_extra_bufts=False, F32 KV cache",
        "add_bos": add_bos,
        "top_k": TOP_K,
        "min_gap": min(gaps),
        "prompts": prompts,
    }
    path.unlink()  # ours, made above
    say(f"  {fixture['case']}: {len(gaps)} positions, smallest top-1/top-2 gap {min(gaps):.4f}, "
        f"median {float(np.median(gaps)):.3f}")
    return fixture


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", nargs="*", default=ARCHES, choices=ARCHES)
    ap.add_argument("--weights", nargs="*", default=WEIGHTS, choices=["f32", "q8_0", "q4_0"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shape", default="small", choices=["small", "wide", "0.5b"])
    ap.add_argument("--min-gap", type=float,
                    help=f"the smallest top-two gap a file may have, else the next seed (default {MIN_GAP})")
    ap.add_argument("--vocab", choices=["llama-bpe", "llama-spm", "qwen2", "phi-3", "gemma3"],
                    help="another vocabulary than each architecture's own")
    ap.add_argument("--out", type=Path, default=OUT, help="folder for the JSON files (default fixtures/families)")
    args = ap.parse_args()
    llama_cpp = ensure_llama_cpp()
    args.out.mkdir(parents=True, exist_ok=True)
    failed = []
    with tempfile.TemporaryDirectory(prefix="families-") as tmp:
        for arch in args.arch:
            for weights in args.weights:
                say(f"==> {arch} {weights} (shape {args.shape}, seed {args.seed})")
                try:
                    # The next seed while llama.cpp's top two come closer than --min-gap
                    # somewhere: the test requires its argmax at every position, which is
                    # only meaningful where the top two are further apart than the engines'
                    # differences.
                    for seed in range(args.seed, args.seed + SEED_TRIES):
                        fx = case(llama_cpp, arch, weights, seed, args.shape, args.vocab, Path(tmp))
                        min_gap = (MIN_GAP_GEMMA2_F32 if (arch, weights) == ("gemma2", "f32") else MIN_GAP[weights]) \
                            if args.min_gap is None else args.min_gap
                        if fx["min_gap"] >= min_gap:
                            break
                    else:
                        raise models.Failure(f"{arch} {weights}: no seed in {args.seed}..{seed} keeps every "
                                             f"top-two gap above {min_gap}")
                except (ValueError, RuntimeError) as e:   # llama.cpp refusing the file
                    say(f"  llama.cpp could not load or run it: {e}")
                    failed.append(f"{arch}-{weights}")
                    continue
                write_json(args.out / f"{fx['case']}.json", fx)
    if failed:
        raise models.Failure(f"llama.cpp refused {', '.join(failed)}: a tensor name, shape or key is wrong")
    return 0


if __name__ == "__main__":
    run(main)

#!/usr/bin/env bash
# A decode step of a Qwen2-shaped file against a Llama-shaped file of the same size
# (issue 56: "within 5% of a Llama-shaped file of the same size, in a benchmark").
#
#     bash scripts/bench_families.sh [ROUNDS] [WEIGHTS]     # defaults: 5 rounds, q4_0
#
# Both files come from `ch08-gguf synth` at Qwen2.5-0.5B's size (--shape 0.5b: width 896,
# 24 layers, 14 query heads over 2 KV heads, FFN 4864) with Qwen 2.5's vocabulary and a
# tied head; they differ only in what the architecture adds (qwen2: Q, K and V biases;
# llama: Llama 3's rope_freqs). WEIGHTS is q4_0 (Q4_0 matrices, a Q8_0 embedding) or q8_0.
# They are written once into models/synthetic/ (about 300 MB each in Q4_0) and kept.
# Then `ch08-gguf bench --json` runs on each in alternating rounds, and the medians of
# tg128 and their ratio are printed. Run it on an idle machine: the numbers are speeds.
set -euo pipefail
ROUNDS=${1:-5}
WEIGHTS=${2:-q4_0}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
DIR=${LLM_BOOK_MODELS:-$ROOT/models}/synthetic
mkdir -p "$DIR"
cargo build --release -p ch08-gguf
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/ch08-gguf
QWEN=$DIR/qwen2-0.5b-$WEIGHTS.gguf
LLAMA=$DIR/llama-0.5b-$WEIGHTS-qwen2-vocab.gguf
[ -e "$QWEN" ] || "$BIN" synth --arch qwen2 --shape 0.5b --weights "$WEIGHTS" --seed 1 --out "$QWEN"
[ -e "$LLAMA" ] || "$BIN" synth --arch llama3 --shape 0.5b --weights "$WEIGHTS" --seed 1 --vocab qwen2 --out "$LLAMA"
OUT=$(mktemp -d)
trap 'rm -r "$OUT"' EXIT
for r in $(seq 1 "$ROUNDS"); do
    for f in "$QWEN" "$LLAMA"; do
        echo "round $r: $(basename "$f")"
        "$BIN" bench -m "$f" --runs 1 --json > "$OUT/$(basename "$f" .gguf)-$r.json"
    done
done
python3 - "$OUT" "$(basename "$QWEN" .gguf)" "$(basename "$LLAMA" .gguf)" <<'PY'
import json, statistics, sys
from pathlib import Path
out, qwen, llama = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
def runs(name):
    return [json.loads(p.read_text()) for p in sorted(out.glob(f"{name}-*.json"))]
med = {}
for name in (qwen, llama):
    r = runs(name)
    med[name] = statistics.median(x["tg128_tok_s"] for x in r)
    pp = statistics.median(x["pp512_tok_s"] for x in r)
    print(f"{name:<40} tg128 median {med[name]:8.1f} tok/s   pp512 median {pp:8.1f} tok/s   "
          f"({len(r)} rounds, {r[0]['mb_read_per_token']:.1f} MB read per token)")
ratio = med[qwen] / med[llama]
print(f"qwen2 / llama decode: {ratio:.3f} ({'within' if abs(1 - ratio) <= 0.05 else 'NOT within'} 5%)")
PY

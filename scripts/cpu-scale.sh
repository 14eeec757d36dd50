#!/usr/bin/env bash
# Past two cores: ours against llama.cpp's llama-bench at 2, 4, 8 and 16 threads, on files of
# SmolLM2's, Llama-3.2-1B's and Llama-2-7B's shapes (random Q4_0 weights, Q8_0 embedding), in
# one run, on a machine that has the cores but no Rust, no network and no pip.
#
#   bash scripts/cpu-scale.sh --out DIR [--threads 2,4,8,16] [--shapes smollm2,1b,7b]
#        [--rounds 3] [--budget 450] [--carried .scale] [--llama-bench PATH] [--dry-run]
#
# It builds nothing: it runs what `scripts/cpu-scale-build.sh` put in the carried folder
# (default .scale/, git-ignored): bin/ch08-gguf, bin/llama-bench (AVX-512) or
# bin/llama-bench-avx2 (picked by /proc/cpuinfo), the gguf wheel (and PyYAML's, which it
# imports) and smollm2-vocab.gguf. It needs python3 with numpy. --llama-bench PATH races
# another llama-bench build instead of the one picked.
#
# 1. The log ($OUT/cpu-scale.log) begins with the machine: lscpu, nproc, memory, load.
# 2. The files are made into a temporary folder (removed at the end) by
#    scripts/make_synthetic_gguf.py, from the carried wheel.
# 3. Rounds: each round runs every shape at every thread count (the highest first), each
#    time llama-bench (-p 512 -n 128 -r 1) and then `ch08-gguf bench --runs 1` (one
#    unmeasured run, one measured), so the two alternate and a slow minute of the machine
#    falls on both. Round 2 begins only when round 1 is complete, so when the time is short
#    every cell has at least one round.
# 4. A watchdog: every command runs under `timeout`, within what is left of --budget seconds
#    (default 450, counted from the start, making the files included); a command that runs
#    past it is killed and recorded as timed out, and what is not started in time is
#    recorded as not run. The script ends within the budget and a few seconds.
# 5. $OUT/scale-16/<shape>.md: per thread count, the medians of its rounds, ours and
#    llama.cpp's, pp512 and tg128, and the ratios, headed like every measured file
#    ("Measured on <CPU> (family, model), <level> kernels, <cores> cores, ..., date, commit");
#    $OUT/rounds.tsv: every round's numbers.
#
# With --dry-run the headers say the numbers mean nothing (a rehearsal on a shared machine).
#
# In the book: How fast's "Past two cores" section includes the three files, one table per
# shape, under a sentence naming the machine from the header:
#     {{#include measured/scale-16/smollm2.md}}
#     {{#include measured/scale-16/1b.md}}
#     {{#include measured/scale-16/7b.md}}
# (`cargo xtask book` accepts files in measured/scale-16/ that begin with the header.)
set -euo pipefail
export LC_ALL=C # numbers with a decimal point, whatever the machine's locale

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out=""
threads="2,4,8,16"
shapes="smollm2,1b,7b"
rounds=3
budget=450
carried="$root/.scale"
dry=no
llama_choice=""
python="${SCALE_PYTHON:-python3}"

usage() {
    sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
while [[ $# -gt 0 ]]; do
    case "$1" in
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    --threads) threads="${2:?--threads needs a list}"; shift 2 ;;
    --shapes) shapes="${2:?--shapes needs a list}"; shift 2 ;;
    --rounds) rounds="${2:?--rounds needs a number}"; shift 2 ;;
    --budget) budget="${2:?--budget needs seconds}"; shift 2 ;;
    --carried) carried="${2:?--carried needs a folder}"; shift 2 ;;
    --llama-bench) llama_choice="${2:?--llama-bench needs a path}"; shift 2 ;;
    --dry-run) dry=yes; shift ;;
    -h | --help) usage ;;
    *) echo "error: unknown argument $1" >&2; usage ;;
    esac
done
[[ -n "$out" ]] || { echo "error: --out DIR is required" >&2; usage; }
[[ "$threads" =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "error: --threads takes a list such as 2,4,8,16" >&2; exit 2; }
[[ "$rounds" =~ ^[0-9]+$ ]] && ((rounds >= 1 && rounds <= 20)) || { echo "error: --rounds must be 1 to 20" >&2; exit 2; }
[[ "$budget" =~ ^[0-9]+$ ]] && ((budget >= 30 && budget <= 3600)) || { echo "error: --budget must be 30 to 3600 seconds" >&2; exit 2; }
IFS=, read -r -a thread_list <<<"$threads"
for t in "${thread_list[@]}"; do
    ((t >= 1 && t <= 256)) || { echo "error: --threads: $t is not between 1 and 256" >&2; exit 2; }
done
IFS=, read -r -a shape_list <<<"$shapes"
for s in "${shape_list[@]}"; do
    case "$s" in smollm2 | 1b | 7b) ;; *) echo "error: --shapes: $s is not smollm2, 1b or 7b" >&2; exit 2 ;; esac
done
# the highest thread count first within a round: the fastest, and the one this script is for
mapfile -t thread_list < <(printf '%s\n' "${thread_list[@]}" | sort -rn | uniq)

ours="$carried/bin/ch08-gguf"
wheels=("$carried"/wheels/*.whl)
vocab="$carried/smollm2-vocab.gguf"
for f in "$ours" "$carried/bin/llama-bench" "$carried/bin/llama-bench-avx2" "$vocab" "${wheels[0]}"; do
    [[ -e "$f" ]] || { echo "error: $f is missing; make the folder with: bash scripts/cpu-scale-build.sh" >&2; exit 1; }
done
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { [[ "$flags" == *" $1 "* ]]; }
llama="$carried/bin/llama-bench"
for f in avx512f avx512cd avx512dq avx512bw avx512vl avx512vbmi avx512_vnni avx512_bf16; do
    has "$f" || llama="$carried/bin/llama-bench-avx2"
done
if [[ -n "$llama_choice" ]]; then
    [[ -x "$llama_choice" ]] || { echo "error: --llama-bench: $llama_choice is not an executable file" >&2; exit 1; }
    llama="$llama_choice"
fi
for f in avx2 fma f16c bmi2; do
    has "$f" || { echo "error: this CPU lacks $f; the carried llama-bench builds need it" >&2; exit 1; }
done

mkdir -p "$out/scale-16"
for s in "${shape_list[@]}"; do
    [[ ! -e "$out/scale-16/$s.md" ]] || { echo "error: $out/scale-16/$s.md exists; this script never overwrites a file" >&2; exit 1; }
done
for f in cpu-scale.log rounds.tsv; do
    [[ ! -e "$out/$f" ]] || { echo "error: $out/$f exists; this script never overwrites a file" >&2; exit 1; }
done
log="$out/cpu-scale.log"
tsv="$out/rounds.tsv"
work="$(mktemp -d "${TMPDIR:-/tmp}/cpu-scale-XXXXXX")"
trap 'rm -rf "$work"' EXIT # this run's own files
say() { echo "[$(printf '%4d' "$SECONDS")s] $*" | tee -a "$log" >&2; }

# run SECONDS CMD...: CMD under the watchdog, within what is left of the budget; its status,
# 124 when killed for time, 125 when no time was left to start it.
run() {
    local cap=$1 left=$((budget - SECONDS))
    shift
    ((left > cap)) && left=$cap
    ((left >= 5)) || return 125
    local rc=0
    timeout --kill-after=5 "$left" "$@" || rc=$?
    ((rc == 137)) && rc=124
    return $rc
}

{
    echo "== cpu-scale.sh, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), budget ${budget}s, dry run: $dry"
    echo "== threads ${thread_list[*]}; shapes ${shape_list[*]}; rounds $rounds"
    echo "== uname -a"; uname -a
    echo "== nproc"; nproc
    echo "== lscpu"; lscpu 2>&1 || grep -m1 'model name' /proc/cpuinfo
    echo "== memory"; free -g 2>&1 || head -3 /proc/meminfo
    echo "== load"; cat /proc/loadavg
    echo "== disk (temporary folder)"; df -h "$work" 2>&1 || true
    echo "== llama-bench: $llama"
    echo "== ours: $ours (built from $(cat "$carried/built-from" 2>/dev/null || echo 'an unknown commit'))"
    echo "== python: $("$python" --version 2>&1)"
} >>"$log" 2>&1
load="$(cut -d' ' -f1 /proc/loadavg)"

# JSON from both programs, and the tables at the end, read by Python.
cat >"$work/scale.py" <<'EOF'
import json, math, statistics, sys
def llama(path):
    v = json.load(open(path))
    pick = lambda p, g: next(t["avg_ts"] for t in v if t["n_prompt"] == p and t["n_gen"] == g)
    print(pick(512, 0), pick(0, 128))
def ours(path):
    v = json.load(open(path))
    print(v["pp512_tok_s"], v["tg128_tok_s"], v["isa"])
def tables(tsv, outdir, head, shapes, threads):
    rows = [l.rstrip("\n").split("\t") for l in open(tsv)][1:]
    for shape in shapes.split(","):
        lines = [head, "",
                 f"Synthetic Llama file of {NAMES[shape]}'s shape, random Q4_0 weights (Q8_0 embedding): "
                 "llama-bench (`-p 512 -n 128 -r 1`) and ours (`ch08-gguf bench --runs 1`) alternating, "
                 "medians of the rounds each thread count got.", "",
                 "| threads | rounds | ours pp512 | llama.cpp pp512 | ratio | ours tg128 | llama.cpp tg128 | ratio |",
                 "|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for t in threads.split(","):
            ok = [r for r in rows if r[0] == shape and r[1] == t and r[7] == "ok"]
            bad = sorted({r[7] for r in rows if r[0] == shape and r[1] == t and r[7] != "ok"})
            if not ok:
                lines.append(f"| {t} | 0 | {', '.join(bad) or 'not run'} | | | | | |")
                continue
            med = [statistics.median(float(r[i]) for r in ok) for i in range(3, 7)]
            op, ot, lp, lt = med
            n = str(len(ok)) + (f" ({', '.join(bad)} in others)" if bad else "")
            lines.append(f"| {t} | {n} | {op:.1f} tok/s | {lp:.1f} tok/s | {op / lp:.2f}× "
                         f"| {ot:.1f} tok/s | {lt:.1f} tok/s | {ot / lt:.2f}× |")
        open(f"{outdir}/{shape}.md", "x").write("\n".join(lines) + "\n")
NAMES = {"smollm2": "SmolLM2-135M", "1b": "Llama-3.2-1B", "7b": "Llama-2-7B"}
cmd = sys.argv[1]
if cmd == "llama": llama(sys.argv[2])
elif cmd == "ours": ours(sys.argv[2])
else: tables(*sys.argv[2:])
EOF

export PYTHONPATH="$(IFS=:; echo "${wheels[*]}")${PYTHONPATH:+:$PYTHONPATH}"
if ! "$python" -c "import gguf, numpy; print('== gguf from', gguf.__file__, '; numpy', numpy.__version__)" >>"$log" 2>&1; then
    say "error: $python cannot import gguf and numpy (see the log); set SCALE_PYTHON to one that has numpy"
    exit 1
fi

say "making the files in $work"
made=()
for s in "${shape_list[@]}"; do
    rc=0
    run 200 "$python" "$root/scripts/make_synthetic_gguf.py" --shape "$s" --mix q4_0 \
        --tokenizer-from "$vocab" --out "$work/$s.gguf" >>"$log" 2>"$work/make.err" || rc=$?
    tr '\r' '\n' <"$work/make.err" | grep -v '^ *[0-9]*/[0-9]* tensors' >>"$log" || true # not the progress
    if ((rc == 0)); then
        made+=("$s")
        say "made $s.gguf ($(du -m "$work/$s.gguf" | cut -f1) MB)"
    else
        say "making $s.gguf failed (status $rc; 124: out of time); it is not raced"
    fi
done

printf 'shape\tthreads\tround\tours_pp512\tours_tg128\tllama_pp512\tllama_tg128\tstatus\n' >"$tsv"
level=""
# one measurement: llama-bench, then ours, on one file and thread count
race() {
    local s=$1 t=$2 r=$3 f="$work/$1.gguf" rc=0 lp lt op ot isa
    run 240 "$llama" -m "$f" -p 512 -n 128 -r 1 -o json -t "$t" >"$work/l.json" 2>>"$log" || rc=$?
    if ((rc == 0)) && read -r lp lt < <("$python" "$work/scale.py" llama "$work/l.json" 2>>"$log"); then :; else
        status "$s" "$t" "$r" "$rc" llama-bench; return
    fi
    run 240 "$ours" bench -m "$f" --threads "$t" --runs 1 --json \
        >"$work/o.json" 2>>"$log" || rc=$?
    if ((rc == 0)) && read -r op ot isa < <("$python" "$work/scale.py" ours "$work/o.json" 2>>"$log"); then :; else
        status "$s" "$t" "$r" "$rc" ours; return
    fi
    [[ -n "$level" ]] || say "our binary picked $isa kernels"
    level="$isa"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\tok\n' "$s" "$t" "$r" "$op" "$ot" "$lp" "$lt" >>"$tsv"
    say "$(printf 'round %s, %s, threads %s: ours pp512 %.1f tg128 %.1f; llama.cpp pp512 %.1f tg128 %.1f tok/s (%s kernels)' \
        "$r" "$s" "$t" "$op" "$ot" "$lp" "$lt" "$isa")"
}
status() {
    local what="failed"
    case "$4" in 124) what="timed out" ;; 125) what="not run" ;; esac
    printf '%s\t%s\t%s\t\t\t\t\t%s\n' "$1" "$2" "$3" "$5 $what" >>"$tsv"
    say "round $3, $1, threads $2: $5 $what (status $4)"
}
for ((r = 1; r <= rounds; r++)); do
    for s in "${made[@]}"; do
        for t in "${thread_list[@]}"; do
            race "$s" "$t" "$r"
        done
    done
done

if ((${#made[@]} == 0)); then
    say "error: no file was made; nothing was raced"
    exit 1
fi
cpu="$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
family="$(grep -m1 '^cpu family' /proc/cpuinfo | cut -d: -f2 | xargs)"
model="$(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | cut -d: -f2 | xargs)"
list="$(printf '%s\n' "${thread_list[@]}" | sort -n | paste -sd, -)"
shown="${list//,/, }"
[[ "$shown" == *", "* ]] && shown="${shown%, *} and ${shown##*, }"
commit="$(cat "$carried/built-from" 2>/dev/null || echo unknown)"
llama_kind="AVX-512"
[[ "$llama" == *-avx2 ]] && llama_kind="AVX2"
[[ -n "$llama_choice" ]] && llama_kind="its own flags (--llama-bench $(basename "$llama"))"
head="*Measured on $cpu (family $family, model $model), ${level:-unknown} kernels, $(nproc) cores, $shown threads, load $load at the start, $(date -u +%Y-%m-%d), commit $commit, llama-bench built for $llama_kind: \`bash scripts/cpu-scale.sh\`*"
if [[ $dry == yes ]]; then
    head="$head"$'\n\n'"**Dry run on a shared machine: these numbers mean nothing.**"
fi
"$python" "$work/scale.py" tables "$tsv" "$out/scale-16" "$head" "$(IFS=,; echo "${made[*]}")" "$list"
say "wrote $out/scale-16/{$(IFS=,; echo "${made[*]}")}.md; $((budget - SECONDS))s of the budget left"
cat "$out"/scale-16/*.md | tee -a "$log"

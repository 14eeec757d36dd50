#!/usr/bin/env bash
# Past two cores: ours against llama.cpp's llama-bench at 2, 4, 8 and 16 threads, on files of
# SmolLM2's, Llama-3.2-1B's and Llama-2-7B's shapes (random Q4_0 weights, Q8_0 embedding), in
# one run, on a machine that has the cores but no Rust, no network and no pip.
#
#   bash scripts/cpu-scale.sh --out DIR [--threads 2,4,8,16] [--threads SHAPE=LIST]
#        [--shapes smollm2,1b,7b] [--rounds 3] [--budget 450] [--carried .scale]
#        [--ours NAME=PATH[@VAR=VALUE]...]... [--candidates] [--no-llama] [--tag TAG]
#        [--short N] [--llama-bench PATH] [--dry-run]
#   bash scripts/cpu-scale.sh --regions --out DIR [--threads 16] [--carried DIR] [--candidates]
#
# It builds nothing: it runs what `scripts/cpu-scale-build.sh` put in the carried folder
# (default .scale/, git-ignored): bin/ch08-gguf, bin/llama-bench (AVX-512) or
# bin/llama-bench-avx2 (picked by /proc/cpuinfo), the gguf wheel (and PyYAML's, which it
# imports) and smollm2-vocab.gguf. It needs python3 with numpy. --llama-bench PATH races
# another llama-bench build instead of the one picked. --threads SHAPE=LIST gives one shape
# its own thread counts (a 7B's at 2 threads takes minutes). --ours NAME=PATH (PATH in the
# carried folder, or absolute; each @VAR=VALUE sets an environment variable for it) races
# builds of ours beside each other: the first is the one the tables set against llama.cpp,
# the others get a second table (the same rounds, alternating with the rest); without
# --ours, one build, bin/ch08-gguf. --candidates adds the decode policies below to the
# builds. --no-llama leaves llama-bench out; --tag TAG names the files <shape>-TAG.md,
# cpu-scale-TAG.log and rounds-TAG.tsv, so two runs can share a folder. --short N (8 to
# 512) also races a prefill of N tokens, a chat turn's prompt (llama-bench -p 512,N; ours
# `bench --short N`), in a table of its own: past four threads a short prompt is cut
# differently from pp512's (the few-thread candidate below).
# --regions races nothing: it writes $OUT/scale-16/regions.md, what one parallel region
# costs at 1, 2, 4, ... threads up to the highest of --threads (`ch07-simd-parallel
# regions`, team and rayon), and how a decode step of the SmolLM2-shaped file is cut into
# regions and where its time goes, part by part, with lscpu's topology (`ch08-gguf
# regions`), for each build of ours; it needs bin/ch07-simd-parallel beside bin/ch08-gguf
# and no llama-bench.
#
# The candidates (--candidates; all the same binary, all the same bits, each off unless its
# variable is set), for a small model's decode past eight threads, and one for the prefill:
#   floor-64k   LLM_BOOK_TASK_BYTES=65536: no decode task under 64 KiB of weights (32 KiB
#               unset), so SmolLM2's 576-wide products take half the threads at 16
#   cap-8       LLM_BOOK_DECODE_THREADS=8: a decode region is cut for 8 threads and shared
#               by 8 at most (one a core, if 16 CPUs are 8 cores' hyperthreads); the other
#               helpers spin idle through the step
#   cap-8-park  the same, and LLM_BOOK_IDLE=park: the helpers a region leaves out sleep
#   park        LLM_BOOK_IDLE=park alone: all 16 threads, the helpers a small region leaves
#               out sleep until one has a task for them
#   band-8      LLM_BOOK_PREFILL_BAND=8, for the prefill: a band of tokens a thread, as before
#               2026-11-29 (each of 16 threads takes 32 tokens of a 512-token prompt and
#               unpacks every tile of the weights for them), where by default at most four
#               bands of 32 tokens or more share a product and the other threads split
#               each band's rows
#   few-thread  LLM_BOOK_FEW_PER=thread, for short prompts: a product splits its rows, not
#               its tokens, below 16 tokens a thread (256 at 16 threads), as before
#               2026-11-30, where by default it is 16 tokens a band (and a band 32 or more)
#   no-tune     LLM_BOOK_DECODE_TUNE=0: every decode step on all the threads, as before
#               2026-12-01, where by default from 8 threads the engine times its first
#               steps at the pool's threads, half, a quarter (down to 4) and keeps the most
#               within 5% of the fastest (ch08's engine/tune.rs)
# One lease races them with the default (a few minutes for both commands):
#   bash scripts/cpu-scale.sh --out OUT --regions --threads 16 --candidates
#   bash scripts/cpu-scale.sh --out OUT --tag candidates --shapes smollm2 --threads 8,16 \
#        --candidates --rounds 3
# and the short prompts, ours and llama.cpp:
#   bash scripts/cpu-scale.sh --out OUT --tag short --shapes 1b --threads 8,16 --short 128 \
#        --ours ours=bin/ch08-gguf --ours few-thread=bin/ch08-gguf@LLM_BOOK_FEW_PER=thread
#
# 1. The log ($OUT/cpu-scale.log) begins with the machine: lscpu, nproc, memory, load.
# 2. The files are made into a temporary folder (removed at the end) by
#    scripts/make_synthetic_gguf.py, from the carried wheel.
# 3. Rounds: each round runs every shape at every thread count (the highest first), each
#    time llama-bench (-p 512 -n 128 -r 1) and then each build of ours, `ch08-gguf bench
#    --runs 1` (one unmeasured run, one measured), so they alternate and a slow minute of
#    the machine falls on all. Round 2 begins only when round 1 is complete, so when the time is short
#    every cell has at least one round.
# 4. A watchdog: every command runs under `timeout`, within what is left of --budget seconds
#    (default 450, counted from the start, making the files included); a command that runs
#    past it is killed and recorded as timed out, and what is not started in time is
#    recorded as not run. The script ends within the budget and a few seconds.
# 5. $OUT/scale-16/<shape>.md: per thread count, the medians of its rounds, ours and
#    llama.cpp's, pp512 and tg128, and the ratios (and the other builds', against the
#    first), headed like every measured file
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
declare -A shape_threads=()
ours_specs=()
with_llama=yes
regions=no
candidates=no
tag=""
short=0

usage() {
    sed -n '2,57p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
while [[ $# -gt 0 ]]; do
    case "$1" in
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    --threads)
        case "${2:?--threads needs a list}" in
        *=*) shape_threads["${2%%=*}"]="${2#*=}" ;;
        *) threads="$2" ;;
        esac
        shift 2 ;;
    --ours) ours_specs+=("${2:?--ours needs NAME=PATH}"); shift 2 ;;
    --candidates) candidates=yes; shift ;;
    --no-llama) with_llama=no; shift ;;
    --regions) regions=yes; with_llama=no; shift ;;
    --tag) tag="${2:?--tag needs a name}"; shift 2 ;;
    --short) short="${2:?--short needs a number of tokens}"; shift 2 ;;
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
for list in "$threads" "${shape_threads[@]}"; do
    [[ "$list" =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "error: --threads takes a list such as 2,4,8,16 (or SHAPE=LIST)" >&2; exit 2; }
done
[[ -z "$tag" || "$tag" =~ ^[a-z0-9-]{1,20}$ ]] || { echo "error: --tag takes up to 20 of a-z, 0-9 and -" >&2; exit 2; }
[[ "$rounds" =~ ^[0-9]+$ ]] && ((rounds >= 1 && rounds <= 20)) || { echo "error: --rounds must be 1 to 20" >&2; exit 2; }
[[ "$budget" =~ ^[0-9]+$ ]] && ((budget >= 30 && budget <= 3600)) || { echo "error: --budget must be 30 to 3600 seconds" >&2; exit 2; }
[[ "$short" =~ ^[0-9]+$ ]] && ((short == 0 || (short >= 8 && short <= 512))) || { echo "error: --short must be 8 to 512 tokens" >&2; exit 2; }
for t in ${threads//,/ } ${shape_threads[*]//,/ }; do
    ((t >= 1 && t <= 256)) || { echo "error: --threads: $t is not between 1 and 256" >&2; exit 2; }
done
IFS=, read -r -a shape_list <<<"$shapes"
for s in "${shape_list[@]}" "${!shape_threads[@]}"; do
    case "$s" in smollm2 | 1b | 7b) ;; *) echo "error: --shapes: $s is not smollm2, 1b or 7b" >&2; exit 2 ;; esac
done
# threads_of SHAPE: its thread counts, the highest first within a round: the fastest, and
# the one this script is for
threads_of() { printf '%s\n' ${shape_threads[$1]:-$threads} | tr , '\n' | sort -rn | uniq; }

# the builds of ours: name, program, environment (VAR=VALUE or nothing)
((${#ours_specs[@]} > 0)) || ours_specs=("ours=bin/ch08-gguf")
if [[ $candidates == yes ]]; then
    ours_specs+=(
        "floor-64k=bin/ch08-gguf@LLM_BOOK_TASK_BYTES=65536"
        "cap-8=bin/ch08-gguf@LLM_BOOK_DECODE_THREADS=8"
        "cap-8-park=bin/ch08-gguf@LLM_BOOK_DECODE_THREADS=8@LLM_BOOK_IDLE=park"
        "park=bin/ch08-gguf@LLM_BOOK_IDLE=park"
        "band-8=bin/ch08-gguf@LLM_BOOK_PREFILL_BAND=8"
        "few-thread=bin/ch08-gguf@LLM_BOOK_FEW_PER=thread"
        "no-tune=bin/ch08-gguf@LLM_BOOK_DECODE_TUNE=0"
    )
fi
ours_names=() ours_bins=() ours_envs=()
for spec in "${ours_specs[@]}"; do
    [[ "$spec" =~ ^([a-z0-9-]{1,20})=([^@]+)((@[A-Z_][A-Z0-9_]*=[A-Za-z0-9._-]*)*)$ ]] ||
        { echo "error: --ours $spec is not NAME=PATH[@VAR=VALUE...] (NAME: a-z, 0-9, -)" >&2; exit 2; }
    name="${BASH_REMATCH[1]}" bin="${BASH_REMATCH[2]}" envs="${BASH_REMATCH[3]//@/ }"
    [[ " ${ours_names[*]} " != *" $name "* ]] || { echo "error: --ours: two builds named $name" >&2; exit 2; }
    [[ "$bin" == /* ]] || bin="$carried/$bin"
    [[ -x "$bin" ]] || { echo "error: --ours $spec: $bin is not an executable file" >&2; exit 1; }
    ours_names+=("$name") ours_bins+=("$bin") ours_envs+=("${envs# }")
done
wheels=("$carried"/wheels/*.whl)
vocab="$carried/smollm2-vocab.gguf"
needed=("$vocab" "${wheels[0]}")
if [[ $with_llama == yes ]]; then
    for b in llama-bench llama-bench-avx2; do
        # as cpu-scale-build.sh leaves them, compressed (so the folder travels beside .gpu/), or not
        if [[ -e "$carried/bin/$b.xz" ]]; then needed+=("$carried/bin/$b.xz"); else needed+=("$carried/bin/$b"); fi
    done
fi
if [[ $regions == yes ]]; then
    needed+=("$carried/bin/ch07-simd-parallel")
    shape_list=(smollm2)
fi
for f in "${needed[@]}"; do
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
suffix="${tag:+-$tag}"
targets=("${shape_list[@]}")
[[ $regions == yes ]] && targets=(regions)
for s in "${targets[@]}"; do
    [[ ! -e "$out/scale-16/$s$suffix.md" ]] || { echo "error: $out/scale-16/$s$suffix.md exists; this script never overwrites a file" >&2; exit 1; }
done
for f in "cpu-scale$suffix.log" "rounds$suffix.tsv"; do
    [[ ! -e "$out/$f" ]] || { echo "error: $out/$f exists; this script never overwrites a file" >&2; exit 1; }
done
log="$out/cpu-scale$suffix.log"
tsv="$out/rounds$suffix.tsv"
work="$(mktemp -d "${TMPDIR:-/tmp}/cpu-scale-XXXXXX")"
trap 'rm -rf "$work"' EXIT # this run's own files
if [[ $with_llama == yes && -z "$llama_choice" && ! -e "$llama" ]]; then
    xz -dc "$llama.xz" >"$work/$(basename "$llama")"
    llama="$work/$(basename "$llama")"
    chmod +x "$llama"
fi
# say, run (the watchdog) and make_files: scripts/race-lib.sh
source "$root/scripts/race-lib.sh"

{
    echo "== cpu-scale.sh, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), budget ${budget}s, dry run: $dry"
    echo "== threads $threads$(for k in "${!shape_threads[@]}"; do printf ' %s=%s' "$k" "${shape_threads[$k]}"; done); shapes ${shape_list[*]}; rounds $rounds; llama-bench: $with_llama"
    echo "== uname -a"; uname -a
    echo "== nproc"; nproc
    echo "== lscpu"; lscpu 2>&1 || grep -m1 'model name' /proc/cpuinfo
    echo "== memory"; free -g 2>&1 || head -3 /proc/meminfo
    echo "== load"; cat /proc/loadavg
    echo "== disk (temporary folder)"; df -h "$work" 2>&1 || true
    echo "== llama-bench: $llama"
    for i in "${!ours_names[@]}"; do
        echo "== ours, ${ours_names[$i]}: ${ours_bins[$i]} ${ours_envs[$i]} (built from $(cat "$carried/built-from" 2>/dev/null || echo 'an unknown commit'))"
    done
    echo "== python: $("$python" --version 2>&1)"
} >>"$log" 2>&1
load="$(cut -d' ' -f1 /proc/loadavg)"

# JSON from both programs, and the tables at the end, read by Python.
cat >"$work/scale.py" <<'EOF'
import json, statistics, sys
def llama(path, short):
    v = json.load(open(path))
    pick = lambda p, g: next(t["avg_ts"] for t in v if t["n_prompt"] == p and t["n_gen"] == g)
    print(pick(512, 0), pick(0, 128), pick(int(short), 0) if int(short) else "-")
def ours(path):
    v = json.load(open(path))
    print(v["pp512_tok_s"], v["tg128_tok_s"], v["isa"], (v.get("short_pp") or {}).get("tok_s", "-"))
def tables(tsv, outdir, suffix, head, shapes, engines, short):
    rows = [l.rstrip("\n").split("\t") for l in open(tsv)][1:]
    engines = engines.split(",")
    main, others = engines[0], engines[1:]
    def note(shape, t, engine):
        mine = [r for r in rows if r[0] == shape and r[1] == t and r[3] == engine]
        return [r for r in mine if r[6] == "ok"], sorted({r[6] for r in mine if r[6] != "ok"})
    def med(ok, i):
        return statistics.median(float(r[i]) for r in ok)
    for shape in shapes.split(","):
        threads = sorted({int(r[1]) for r in rows if r[0] == shape})
        lines = [head, "",
                 f"Synthetic Llama file of {NAMES[shape]}'s shape, random Q4_0 weights (Q8_0 embedding): "
                 f"llama-bench (`-p 512{',' + short if int(short) else ''} -n 128 -r 1`) and ours "
                 f"(`ch08-gguf bench --runs 1{' --short ' + short if int(short) else ''}`) alternating, "
                 "medians of the rounds each thread count got.", "",
                 "| threads | rounds | ours pp512 | llama.cpp pp512 | ratio | ours tg128 | llama.cpp tg128 | ratio |",
                 "|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for t in map(str, threads):
            ok, bad = note(shape, t, main)
            lok, lbad = note(shape, t, "llama.cpp")
            if ok and not lok and not lbad:  # --no-llama: ours alone
                lines.append(f"| {t} | {len(ok)} | {med(ok, 4):.1f} tok/s | – | | {med(ok, 5):.1f} tok/s | – | |")
                continue
            if not ok or not lok:
                lines.append(f"| {t} | 0 | {', '.join(bad + lbad) or 'not run'} | | | | | |")
                continue
            op, ot, lp, lt = med(ok, 4), med(ok, 5), med(lok, 4), med(lok, 5)
            n = str(min(len(ok), len(lok))) + (f" ({', '.join(bad + lbad)} in others)" if bad + lbad else "")
            lines.append(f"| {t} | {n} | {op:.1f} tok/s | {lp:.1f} tok/s | {op / lp:.2f}× "
                         f"| {ot:.1f} tok/s | {lt:.1f} tok/s | {ot / lt:.2f}× |")
        if others:
            lines += ["", f"The other builds of ours, in the same rounds, against `{main}`:", "",
                      "| threads | build | rounds | pp512 | ratio | tg128 | ratio |",
                      "|---:|---|---:|---:|---:|---:|---:|"]
            for t in map(str, threads):
                ok, _ = note(shape, t, main)
                for e in others:
                    eok, ebad = note(shape, t, e)
                    if not ok or not eok:
                        lines.append(f"| {t} | {e} | 0 | {', '.join(ebad) or 'not run'} | | | |")
                        continue
                    ep, et = med(eok, 4), med(eok, 5)
                    lines.append(f"| {t} | {e} | {len(eok)} | {ep:.1f} tok/s | {ep / med(ok, 4):.2f}× "
                                 f"| {et:.1f} tok/s | {et / med(ok, 5):.2f}× |")
        if int(short):
            lines += ["", f"A prompt of {short} tokens (pp{short}), each build against llama.cpp:", "",
                      f"| threads | build | rounds | pp{short} | against llama.cpp |",
                      "|---:|---|---:|---:|---:|"]
            for t in map(str, threads):
                lok, _ = note(shape, t, "llama.cpp")
                lok = [r for r in lok if r[7] != "-"]
                racers = (["llama.cpp"] if any(r[3] == "llama.cpp" for r in rows) else []) + engines
                for e in racers:
                    eok = [r for r in note(shape, t, e)[0] if r[7] != "-"]
                    if not eok:
                        lines.append(f"| {t} | {e} | 0 | not run | |")
                        continue
                    v = med(eok, 7)
                    against = f"{v / med(lok, 7):.2f}×" if lok and e != "llama.cpp" else ""
                    lines.append(f"| {t} | {e} | {len(eok)} | {v:.1f} tok/s | {against} |")
        open(f"{outdir}/{shape}{suffix}.md", "x").write("\n".join(lines) + "\n")
NAMES = {"smollm2": "SmolLM2-135M", "1b": "Llama-3.2-1B", "7b": "Llama-2-7B"}
cmd = sys.argv[1]
if cmd == "llama": llama(sys.argv[2], sys.argv[3])
elif cmd == "ours": ours(sys.argv[2])
else: tables(*sys.argv[2:])
EOF

make_files "${shape_list[@]}"

# the machine, for the tables' headers
cpu="$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
family="$(grep -m1 '^cpu family' /proc/cpuinfo | cut -d: -f2 | xargs)"
model="$(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | cut -d: -f2 | xargs)"

# --regions: what a region costs, and how the SmolLM2-shaped file's decode step is cut
if [[ $regions == yes ]]; then
    [[ " ${made[*]} " == *" smollm2 "* ]] || { say "error: the SmolLM2-shaped file was not made"; exit 1; }
    most="$(threads_of smollm2 | head -1)"
    md="$work/regions.md"
    rc=0
    run 120 "$carried/bin/ch07-simd-parallel" regions --threads "$most" --runs 3 >"$work/r7.md" 2>>"$log" || rc=$?
    ((rc == 0)) || { say "ch07-simd-parallel regions failed (status $rc)"; exit 1; }
    for i in "${!ours_names[@]}"; do
        rc=0
        # shellcheck disable=SC2086 # the assignments are words
        run 120 env ${ours_envs[$i]} "${ours_bins[$i]}" regions -m "$work/smollm2.gguf" \
            --threads "$most" >"$work/r8-$i.md" 2>>"$log" || rc=$?
        if ((rc != 0)); then
            ((i > 0)) || { say "ch08-gguf regions failed (status $rc)"; exit 1; }
            say "ch08-gguf regions, ${ours_names[$i]}, failed (status $rc)"
            echo "failed (status $rc; 124: out of time)" >"$work/r8-$i.md"
        fi
    done
    {
        echo "*Measured on $cpu (family $family, model $model), $(nproc) cores, 1 to $most threads, load $load at the start, $(date -u +%Y-%m-%d), commit $(cat "$carried/built-from" 2>/dev/null || echo unknown): \`bash scripts/cpu-scale.sh --regions\`*"
        [[ $dry == yes ]] && printf '\n**Dry run on a shared machine: these numbers mean nothing.**\n'
        echo
        cat "$work/r7.md"
        echo
        # the file name printed is the temporary one: say what it is instead
        for i in "${!ours_names[@]}"; do
            if ((i > 0)); then
                printf '\n**The build `%s`** (%s):\n\n' "${ours_names[$i]}" "${ours_envs[$i]:-no variable set}"
            fi
            # the topology once, with the first build
            sed "s|$work/smollm2.gguf|A SmolLM2-shaped file (random Q4_0 weights)|" "$work/r8-$i.md" |
                if ((i > 0)); then sed '/^The CPUs/,$d'; else cat; fi
        done
    } >"$md"
    cp "$md" "$out/scale-16/regions$suffix.md"
    tee -a "$log" <"$md"
    say "wrote $out/scale-16/regions$suffix.md"
    exit 0
fi

printf 'shape\tthreads\tround\tengine\tpp512\ttg128\tstatus\tshort\n' >"$tsv"
level=""
record() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$tsv"; }
# failed SHAPE THREADS ROUND ENGINE STATUS
failed() {
    local what="failed"
    case "$5" in 124) what="timed out" ;; 125) what="not run" ;; esac
    record "$1" "$2" "$3" "$4" "" "" "$what" "-"
    say "round $3, $1, threads $2: $4 $what (status $5)"
}
# one cell of a round: llama-bench, then each build of ours, on one file and thread count
race() {
    local s=$1 t=$2 r=$3 f="$work/$1.gguf" rc p g isa i q pp=512 more=()
    ((short == 0)) || { pp="512,$short"; more=(--short "$short"); }
    if [[ $with_llama == yes ]]; then
        rc=0
        run 240 "$llama" -m "$f" -p "$pp" -n 128 -r 1 -o json -t "$t" >"$work/l.json" 2>>"$log" || rc=$?
        if ((rc == 0)) && read -r p g q < <("$python" "$work/scale.py" llama "$work/l.json" "$short" 2>>"$log"); then
            record "$s" "$t" "$r" llama.cpp "$p" "$g" ok "$q"
            say "$(printf 'round %s, %s, threads %s: llama.cpp pp512 %.1f tg128 %.1f tok/s' "$r" "$s" "$t" "$p" "$g")"
        else
            failed "$s" "$t" "$r" llama.cpp "$rc"
        fi
    fi
    for i in "${!ours_names[@]}"; do
        rc=0
        # shellcheck disable=SC2086 # the assignment is one word or none
        run 240 env ${ours_envs[$i]} "${ours_bins[$i]}" bench -m "$f" --threads "$t" --runs 1 "${more[@]}" \
            --json >"$work/o.json" 2>>"$log" || rc=$?
        if ((rc == 0)) && read -r p g isa q < <("$python" "$work/scale.py" ours "$work/o.json" 2>>"$log"); then
            [[ -n "$level" ]] || say "our binary picked $isa kernels"
            level="$isa"
            record "$s" "$t" "$r" "${ours_names[$i]}" "$p" "$g" ok "$q"
            say "$(printf 'round %s, %s, threads %s: %s pp512 %.1f tg128 %.1f tok/s (%s kernels)' \
                "$r" "$s" "$t" "${ours_names[$i]}" "$p" "$g" "$isa")"
        else
            failed "$s" "$t" "$r" "${ours_names[$i]}" "$rc"
        fi
    done
}
for ((r = 1; r <= rounds; r++)); do
    for s in "${made[@]}"; do
        for t in $(threads_of "$s"); do
            race "$s" "$t" "$r"
        done
    done
done

if ((${#made[@]} == 0)); then
    say "error: no file was made; nothing was raced"
    exit 1
fi
list="$(for s in "${made[@]}"; do threads_of "$s"; done | sort -n | uniq | paste -sd, -)"
shown="${list//,/, }"
[[ "$shown" == *", "* ]] && shown="${shown%, *} and ${shown##*, }"
commit="$(cat "$carried/built-from" 2>/dev/null || echo unknown)"
llama_kind="AVX-512"
[[ "$llama" == *-avx2 ]] && llama_kind="AVX2"
[[ -n "$llama_choice" ]] && llama_kind="its own flags (--llama-bench $(basename "$llama"))"
[[ $with_llama == yes ]] || llama_kind="nothing (--no-llama: ours alone)"
head="*Measured on $cpu (family $family, model $model), ${level:-unknown} kernels, $(nproc) cores, $shown threads, load $load at the start, $(date -u +%Y-%m-%d), commit $commit, llama-bench built for $llama_kind: \`bash scripts/cpu-scale.sh\`*"
if [[ $dry == yes ]]; then
    head="$head"$'\n\n'"**Dry run on a shared machine: these numbers mean nothing.**"
fi
engines="$(IFS=,; echo "${ours_names[*]}")"
"$python" "$work/scale.py" tables "$tsv" "$out/scale-16" "$suffix" "$head" "$(IFS=,; echo "${made[*]}")" "$engines" "$short"
say "wrote $out/scale-16/{$(IFS=,; echo "${made[*]}")}$suffix.md; $((budget - SECONDS))s of the budget left"
for s in "${made[@]}"; do cat "$out/scale-16/$s$suffix.md"; done | tee -a "$log"

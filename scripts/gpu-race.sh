#!/usr/bin/env bash
# Chapter 13 on a real GPU: our shaders and llama.cpp's Vulkan backend on the same adapter, in
# one run, on a machine that has the GPU but no Rust, no network and no pip.
#
#   bash scripts/gpu-race.sh --out DIR [--carried .gpu] [--shapes smollm2,gemma3,7b] [--rounds 3]
#        [--budget 420] [--dry-run]
#
# It builds nothing: it runs what `scripts/gpu-race-build.sh` put in the carried folder
# (default .gpu/, git-ignored): bin/ch13-gpu, bin/llama-bench-vulkan.xz (llama.cpp's
# llama-bench with GGML_VULKAN at the fixtures' pinned version, compressed to travel), the
# gguf wheel (and PyYAML's), smollm2-vocab.gguf and gemma3-vocab.gguf. It needs python3 with numpy, xz, and a
# Vulkan loader (libvulkan.so.1) with the GPU's driver: without a loader it says so and stops.
# (On a lent machine with the driver but no loader, unpack Debian's libvulkan1 first, as the
# device notes say: the carried folder's debs/, made by the build script, hold it.)
#
# 1. The log ($OUT/gpu-race.log) begins with the machine: the GPU and its driver
#    (nvidia-smi, if there), the CPU, memory, and every adapter `ch13-gpu info` sees.
# 2. `ch13-gpu kernels --secs 0.15 --json`: our matrix-vector shaders in every layout at a
#    7B's and SmolLM2's shapes, and a shader that only reads, the bandwidth ceiling:
#    $OUT/gpu/kernels.md.
# 3. The synthetic files (scripts/make_synthetic_gguf.py: random Q4_0 weights and a Q8_0
#    embedding, or for gemma3 Gemma-3-270M's own mix; in a temporary folder removed at the end), one unmeasured run on each (the
#    driver compiles llama.cpp's pipelines on first use), then rounds: each round runs
#    llama-bench (`-ngl 99 -p 512 -n 128 -r 1`) on every file, and ours where ours can
#    generate (`ch13-gpu bench --pp 512 --tg 128`: its prompt a prefill through the tiled product), alternating, so a
#    slow minute falls on both. $OUT/gpu/decode.md: medians, and llama.cpp's decode as a
#    share of that read rate (the file's tensor bytes a token, read once), and llama.cpp's
#    line about the adapter (whether its build uses integer dot products and tensor cores).
#    Before the rounds, correct before fast: 16 token ids teacher-forced through ours
#    (`ch13-gpu logits`, in the CPU's order and in the adapter's) and through chapter 8's CPU
#    engine (`ch08-gguf logits`, carried) on each file but the 7B's; decode.md ends with how
#    many positions have the CPU's bits and argmax.
# 4. A watchdog: every command runs under `timeout`, within what is left of --budget seconds
#    (default 420, counted from the start); what runs past it is killed and recorded, and
#    what is not started in time is recorded as not run.
# 5. After the first round, `ch13-gpu bench --profile` once on each file (32 prompt tokens, 64 generated, each
#    step timed dispatch by dispatch by the GPU's clock): $OUT/gpu/profile.md, where a decode
#    step's time goes, summed by what each dispatch is.
# 6. Last, with what is left of the budget: `ch13-gpu tiles --json`, the tiled product
#    (prefill, many tokens a dispatch) against as many matrix-vector dispatches, on a 7B's
#    4096x4096 in Q4_0 and Q8_0 and SmolLM2's 576x1536 in Q4_1, 512 tokens each; its JSON
#    goes into the log only (a measurement hook; the page quotes none of it yet).
#
# With --dry-run the headers say the numbers mean nothing (a rehearsal, e.g. on lavapipe).
# The tables are headed like every measured file ("Measured on <GPU> (driver ...), ...,
# date, commit"); `cargo xtask book` accepts files in book/src/measured/gpu/ that begin so.
set -euo pipefail
export LC_ALL=C

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out=""
carried="$root/.gpu"
shapes="smollm2,gemma3,7b"
rounds=3
budget=420
dry=no
python="${SCALE_PYTHON:-python3}"

usage() {
    sed -n '2,41p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
while [[ $# -gt 0 ]]; do
    case "$1" in
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    --carried) carried="${2:?--carried needs a folder}"; shift 2 ;;
    --shapes) shapes="${2:?--shapes needs a list}"; shift 2 ;;
    --rounds) rounds="${2:?--rounds needs a number}"; shift 2 ;;
    --budget) budget="${2:?--budget needs seconds}"; shift 2 ;;
    --dry-run) dry=yes; shift ;;
    -h | --help) usage ;;
    *) echo "error: unknown argument $1" >&2; usage ;;
    esac
done
[[ -n "$out" ]] || { echo "error: --out DIR is required" >&2; usage; }
[[ "$rounds" =~ ^[0-9]+$ ]] && ((rounds >= 1 && rounds <= 20)) || { echo "error: --rounds must be 1 to 20" >&2; exit 2; }
[[ "$budget" =~ ^[0-9]+$ ]] && ((budget >= 30 && budget <= 3600)) || { echo "error: --budget must be 30 to 3600 seconds" >&2; exit 2; }
IFS=, read -r -a shape_list <<<"$shapes"
for s in "${shape_list[@]}"; do
    case "$s" in smollm2 | gemma3 | 1b | 7b) ;; *) echo "error: --shapes: $s is not smollm2, gemma3, 1b or 7b" >&2; exit 2 ;; esac
done

ours="$carried/bin/ch13-gpu"
wheels=("$carried"/wheels/*.whl)
vocab="$carried/smollm2-vocab.gguf"
gemma_vocab="$carried/gemma3-vocab.gguf"
for f in "$ours" "$carried/bin/llama-bench-vulkan.xz" "$vocab" "$gemma_vocab" "${wheels[0]}"; do
    [[ -e "$f" ]] || { echo "error: $f is missing; make the folder with: bash scripts/gpu-race-build.sh" >&2; exit 1; }
done
# (read whole first: `grep -q` would close the pipe early, and pipefail would see SIGPIPE)
loaders="$(ldconfig -p 2>/dev/null || true)"
if [[ "$loaders" != *libvulkan.so.1* ]]; then
    echo "error: no Vulkan loader (libvulkan.so.1) on this machine: install Debian's libvulkan1, or unpack $carried/debs/libvulkan1_*.deb (see this script's header)" >&2
    exit 1
fi

mkdir -p "$out/gpu"
for f in gpu/kernels.md gpu/decode.md gpu/profile.md gpu-race.log rounds.tsv; do
    [[ ! -e "$out/$f" ]] || { echo "error: $out/$f exists; this script never overwrites a file" >&2; exit 1; }
done
log="$out/gpu-race.log"
tsv="$out/rounds.tsv"
work="$(mktemp -d "${TMPDIR:-/tmp}/gpu-race-XXXXXX")"
trap 'rm -rf "$work"' EXIT # this run's own files
# say, run (the watchdog) and make_files: scripts/race-lib.sh
source "$root/scripts/race-lib.sh"

xz -dc "$carried/bin/llama-bench-vulkan.xz" >"$work/llama-bench"
chmod +x "$work/llama-bench"
llama="$work/llama-bench"

{
    echo "== gpu-race.sh, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), budget ${budget}s, dry run: $dry"
    echo "== shapes ${shape_list[*]}; rounds $rounds"
    echo "== uname -a"; uname -a
    echo "== nvidia-smi"; nvidia-smi 2>&1 || echo "(none)"
    echo "== nproc"; nproc
    echo "== lscpu"; lscpu 2>&1 || grep -m1 'model name' /proc/cpuinfo
    echo "== memory"; free -g 2>&1 || head -3 /proc/meminfo
    echo "== load"; cat /proc/loadavg
    echo "== Vulkan loader"; ldconfig -p | grep 'libvulkan\.so' || true
    echo "== VK_DRIVER_FILES=${VK_DRIVER_FILES:-} VK_ICD_FILENAMES=${VK_ICD_FILENAMES:-}"
    echo "== ours: $ours (built from $(cat "$carried/built-from" 2>/dev/null || echo 'an unknown commit'))"
    echo "== python: $("$python" --version 2>&1)"
} >>"$log" 2>&1

say "ch13-gpu info"
rc=0
run 60 "$ours" info >>"$log" 2>&1 || rc=$?
((rc == 0)) || say "ch13-gpu info failed (status $rc): no adapter? see the log"
run 60 "$ours" info --json >"$work/info.json" 2>>"$log" || true

cat >"$work/race.py" <<'EOF'
import json, statistics, sys
def llama(path):
    v = json.load(open(path))
    pick = lambda p, g: next(t["avg_ts"] for t in v if t["n_prompt"] == p and t["n_gen"] == g)
    print(pick(512, 0), pick(0, 128))
def adapter(kernels_path, info_path):
    # the adapter ch13-gpu used (the kernels' JSON names it), else the first GPU `info` lists
    pick = None
    try:
        pick = json.load(open(kernels_path))["adapter"]
    except Exception:
        pass
    if pick is None:
        try:
            items = json.load(open(info_path))
            pick = next((a for a in items if "Gpu" in str(a.get("device_type", ""))), items[0])
        except Exception:
            print("an unknown adapter"); return
    print(f'{pick.get("name", "?")} ({pick.get("backend", "?")}, driver {pick.get("driver", "?")} {pick.get("driver_info", "")})'.strip())
def kernels(path, head, outfile):
    v = json.load(open(path))
    lines = [head, "", KERNELS_INTRO, ""]
    lines += render_kernels(v)
    open(outfile, "x").write("\n".join(lines) + "\n")
KERNELS_INTRO = ("Our matrix-vector shaders (`ch13-gpu kernels`): random blocks, many products "
                 "recorded in one submission; GB/s counts the weight bytes each product reads.")
def render_kernels(v):
    read, copy = v["read"]["gbps"], v["copy"]["gbps_read_plus_write"]
    lines = [f"A shader that only reads {v['read']['bytes'] / 2**20:.0f} MiB reaches {read:.0f} GB/s: the "
             "ceiling for a shader that reads its weights once. (A device-to-device copy of "
             f"{v['copy']['bytes'] / 2**20:.0f} MiB moves {copy:.0f} GB/s, bytes read plus bytes written.) "
             + (f"A dispatch that does almost nothing costs {v['dispatch_us']:.2f} µs among thousands in one "
                "submission: the floor under each of a step's dispatches. " if "dispatch_us" in v else "")
             + "The reduction adds a row's lane sums: in subgroups (registers) or in workgroup memory. "
             "The layout: how the lanes read their blocks, `direct` (each its own, from memory) or `staged` "
             "(a workgroup's rows a step at a time through workgroup memory, neighbouring invocations loading "
             "neighbouring words), and the rows each lane takes, which share the activations it reads"
             + (f"; the adapter's default here: {v['layout']} (a model picks its own when it opens, by timing "
                "its step: decode.md), timed a submission each too." if "layout" in v else
                " (this run's shaders: direct, one row a lane)."), "",
             "| format | rows × cols | weights | reduction | layout | all in one submission: µs a product | GB/s "
             "| of the read rate | one submission each: µs a product |",
             "|---|---|---:|---|---|---:|---:|---:|---:|"]
    engine = v.get("layout", "direct-1")
    for k in v["kernels"]:
        if k.get("layout", "direct-1") != engine:
            continue
        b, e = k["batched"], k.get("one_submission_each")
        each = f"{e['us_per_product']:.1f}" if e else ""
        lines.append(f"| {k['format']} | {k['rows']} × {k['cols']} | {k['weight_bytes'] / 2**20:.1f} MiB "
                     f"| {k.get('reduction', v.get('reduction', '?'))} | {engine} "
                     f"| {b['us_per_product']:.1f} | {b['gbps']:.0f} | {100 * b['gbps'] / read:.0f}% "
                     f"| {each} |")
    # every layout with the adapter's reduction: µs a product, in one submission
    own = v.get("reduction")
    layouts = sorted({k["layout"] for k in v["kernels"] if "layout" in k and k.get("reduction") == own})
    if len(layouts) > 1:
        lines += ["", f"Every layout with the {own} reduction, µs a product in one submission "
                  "(the fastest of each row in bold):", "",
                  "| format | rows × cols | " + " | ".join(layouts) + " |",
                  "|---|---|" + "---:|" * len(layouts)]
        shapes = []
        for k in v["kernels"]:
            if (k["format"], k["rows"], k["cols"]) not in shapes:
                shapes.append((k["format"], k["rows"], k["cols"]))
        for f, r, c in shapes:
            us = {k["layout"]: k["batched"]["us_per_product"] for k in v["kernels"]
                  if (k["format"], k["rows"], k["cols"]) == (f, r, c) and k.get("reduction") == own and "layout" in k}
            best = min(us.values()) if us else None
            cell = lambda l: "" if l not in us else (f"**{us[l]:.1f}**" if us[l] == best else f"{us[l]:.1f}")
            lines.append(f"| {f} | {r} × {c} | " + " | ".join(cell(l) for l in layouts) + " |")
    return lines
def tables(tsv, outfile, head, shapes, bytes_json, copy_gbs, device=""):
    rows = [l.rstrip("\n").split("\t") for l in open(tsv)][1:]
    sizes = json.loads(bytes_json)
    copy = float(copy_gbs) if copy_gbs else None
    def ok(shape, engine):
        return [r for r in rows if r[0] == shape and r[2] == engine and r[5] == "ok"]
    lines = [head, "",
             "Synthetic files, every layer on the GPU: Llama shapes with random Q4_0 weights and a Q8_0 "
             "embedding, Gemma-3-270M's shape in its own file's mix of formats; "
             "llama-bench `-ngl 99 -p 512 -n 128 -r 1`, medians of the rounds. Decode reads every "
             "weight once a token: its GB/s is the file's tensor bytes times tok/s"
             + (", its share that over the rate of a shader that only reads." if copy else ".")
             + " Ours decodes with two steps in flight, as its generator does; \"a step at a time\" is the "
             "same run's tokens again with the host waiting for each token before it records the next step, "
             "as llama-bench does.", "",
             "| shape | engine | rounds | pp512 | tg128 | decode GB/s |" + (" of the read rate |" if copy else ""),
             "|---|---|---:|---:|---:|---:|" + ("---:|" if copy else "")]
    # a row's prefill may be empty: "ours, a step at a time" is ours' decode run again
    def median(mine, col):
        got = [float(r[col]) for r in mine if r[col]]
        return statistics.median(got) if got else None
    engines = ("llama.cpp", "ours", "ours, a step at a time", "ours, in order")
    for shape in shapes.split(","):
        for engine in engines:
            mine = ok(shape, engine)
            if not mine:
                continue
            pp, tg = median(mine, 3), median(mine, 4)
            gbs = sizes[shape] * tg / 1e9
            share = f" {100 * gbs / copy:.0f}% |" if copy else ""
            pp_cell = "" if pp is None else f"{pp:.0f} tok/s"
            lines.append(f"| {NAMES[shape]} | {engine} | {len(mine)} | {pp_cell} | {tg:.1f} tok/s | {gbs:.0f} GB/s |{share}")
    # ours against llama.cpp, shape by shape: the ratios of the medians above
    ratios = []
    for shape in shapes.split(","):
        base = ok(shape, "llama.cpp")
        if not base:
            continue
        bp, bt = median(base, 3), median(base, 4)
        for engine in engines[1:]:
            mine = ok(shape, engine)
            if mine and bp and bt:
                pp, tg = median(mine, 3), median(mine, 4)
                pp_cell = "" if pp is None else f"{pp / bp:.2f}×"
                ratios.append(f"| {NAMES[shape]} | {engine} | {pp_cell} | {tg / bt:.2f}× |")
    if ratios:
        lines += ["", "Ours against llama.cpp (the medians above):", "",
                  "| shape | engine | pp512 | tg128 |", "|---|---|---:|---:|"] + ratios
    if device:
        # what llama.cpp's build found on the adapter: integer dot products, cooperative
        # matrices (tensor cores), which its prefill uses where it has them
        lines += ["", f"llama.cpp's Vulkan backend on this adapter said: `{device.strip()}`"]
    open(outfile, "x").write("\n".join(lines) + "\n")
def tensor_bytes(*paths):
    import gguf
    out = {}
    for p in paths:
        r = gguf.GGUFReader(p)
        out[p.rsplit("/", 1)[1].removesuffix(".gguf")] = sum(int(t.n_bytes) for t in r.tensors)
    print(json.dumps(out))
def profile(outfile, head, *shape_files):
    lines = [head, "", "Where a decode step's time goes (`ch13-gpu bench --profile`): 64 tokens from an "
             "empty cache, each step's dispatches timed by the GPU's clock (a timestamp before each and "
             "after the last), summed by what each dispatch is, the costliest first; a dispatch's time "
             "runs to the next one's start, its wait included."]
    for arg in shape_files:
        shape, path = arg.split("=", 1)
        try:
            v = json.load(open(path))
            p = v["profile"]
        except Exception as e:
            lines += ["", f"{NAMES.get(shape, shape)}: no profile ({e})."]
            continue
        lines += ["", f"{NAMES.get(shape, shape)}: {v['dispatches_per_token']} dispatches, "
                  f"{p['us_per_token']:.0f} µs a token by the GPU's clock ({v['tg_tok_s']:.0f} tok/s by the host's, "
                  "without timestamps).", "",
                  "| dispatch | a token | µs a token | µs each | share |", "|---|---:|---:|---:|---:|"]
        for o in p["ops"][:14]:
            lines.append(f"| {o['what']} | {o['dispatches']} | {o['us_per_token']:.1f} | "
                         f"{o['us_per_dispatch']:.2f} | {100 * o['share']:.1f}% |")
        if len(p["ops"]) > 14:
            rest = p["ops"][14:]
            lines.append(f"| {len(rest)} more kinds | {sum(o['dispatches'] for o in rest)} | "
                         f"{sum(o['us_per_token'] for o in rest):.1f} | | {100 * sum(o['share'] for o in rest):.1f}% |")
    open(outfile, "x").write("\n".join(lines) + "\n")
def layouts(outfile, *shape_files):
    # what ours chose when it opened each file (its products' layout, its tiled products'
    # tiling) and each candidate's rate then
    runs = []
    for arg in shape_files:
        shape, path = arg.split("=", 1)
        try:
            runs.append((NAMES.get(shape, shape), json.load(open(path))))
        except Exception:
            continue
    def table(key, text):
        rows, names = [], []
        for shape, v in runs:
            tried = {t[key]: t["tok_s"] for t in v.get(key + "s_tried", [])}
            if tried:
                names += [n for n in tried if n not in names]
                rows.append((shape, v[key], tried))
        if not rows:
            return []
        return ["", text, "", "| shape | chosen | " + " | ".join(names) + " |",
                "|---|---|" + "---:|" * len(names)] + [
            f"| {shape} | {chosen} | " + " | ".join(f"{tried[n]:.0f}" if n in tried else "" for n in names) + " |"
            for shape, chosen, tried in rows]
    lines = table("layout", "The products' layout ours chose when it opened each file, by timing its own decode "
                  "step under each (greedy steps, two in flight, for about 60 ms each: tok/s; first round):")
    lines += table("tiling", "The tiled products' tiling (an invocation's one token and eight rows, or four "
                   "tokens and two rows), chosen the same way by timing a prefill of 256 tokens (tok/s):")
    if lines:
        open(outfile, "a").write("\n".join(lines) + "\n")
def check(outfile, *items):
    # each item shape=cpu.json=in-order.json=own.json, `logits --json` of ch08-gguf and ch13-gpu
    import struct
    bits = lambda top: [(i, struct.unpack("<I", struct.pack("<f", v))[0]) for i, v in top]
    def against(cpu, path):
        try:
            g = json.load(open(path))
            pos = g["positions"]
        except Exception:
            return "did not run"
        same = sum(a["argmax"] == c["argmax"] and bits(a["top"]) == bits(c["top"]) for a, c in zip(pos, cpu))
        top1 = sum(a["argmax"] == c["argmax"] for a, c in zip(pos, cpu))
        return f"{same}/{len(cpu)} the same bits, {top1}/{len(cpu)} the same argmax ({g.get('reduction', '?')})"
    rows = []
    for item in items:
        shape, cpu_path, ordered, own = item.split("=")
        name = NAMES.get(shape, shape)
        try:
            cpu = json.load(open(cpu_path))["positions"]
        except Exception:
            rows.append(f"| {name} | the CPU engine did not run | |")
            continue
        rows.append(f"| {name} | {against(cpu, ordered)} | {against(cpu, own)} |")
    lines = ["", "Correct on this GPU: 16 token ids teacher-forced through ours and through chapter 8's CPU "
             "engine (`ch08-gguf logits`) on the same file, position by position, the argmax and the five "
             "highest logits: with the products in the CPU's order they must be the CPU's bits; in the "
             "adapter's own order, the argmax agrees but at near-ties (these files' random weights make many).",
             "", "| shape | ours in the CPU's order | ours in the adapter's order |", "|---|---|---|"] + rows
    open(outfile, "a").write("\n".join(lines) + "\n")
NAMES = {"smollm2": "SmolLM2-135M", "gemma3": "Gemma-3-270M", "1b": "Llama-3.2-1B", "7b": "Llama-2-7B"}
cmd = sys.argv[1]
if cmd == "llama": llama(sys.argv[2])
elif cmd == "adapter": adapter(sys.argv[2], sys.argv[3])
elif cmd == "kernels": kernels(*sys.argv[2:])
elif cmd == "bytes": tensor_bytes(*sys.argv[2:])
elif cmd == "profile": profile(*sys.argv[2:])
elif cmd == "layouts": layouts(*sys.argv[2:])
elif cmd == "check": check(*sys.argv[2:])
else: tables(*sys.argv[2:])
EOF

say "our kernels (ch13-gpu kernels)"
rc=0
run 150 "$ours" kernels --secs 0.15 --json >"$work/kernels.json" 2>>"$log" || rc=$?
((rc == 0)) || say "ch13-gpu kernels failed (status $rc; 124: out of time)"
cat "$work/kernels.json" >>"$log" 2>/dev/null || true

gpu="$("$python" "$work/race.py" adapter "$work/kernels.json" "$work/info.json" 2>>"$log")"
cpu="$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
commit="$(cat "$carried/built-from" 2>/dev/null || echo unknown)"
head="*Measured on $gpu, host $cpu, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg) at the start, $(date -u +%Y-%m-%d), commit $commit: \`bash scripts/gpu-race.sh\`*"
if [[ $dry == yes ]]; then
    head="$head"$'\n\n'"**Dry run: these numbers mean nothing.**"
fi
copy=""
if ((rc == 0)); then
    "$python" "$work/race.py" kernels "$work/kernels.json" "$head" "$out/gpu/kernels.md" 2>>"$log" ||
        say "the kernels' JSON could not be read (see the log)"
    copy="$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["read"]["gbps"])' "$work/kernels.json" 2>>"$log" || true)"
fi

make_files "${shape_list[@]}"
((${#made[@]} > 0)) || { say "error: no file was made; nothing was raced"; exit 1; }
sizes="$("$python" "$work/race.py" bytes $(for s in "${made[@]}"; do echo "$work/$s.gguf"; done) 2>>"$log")"

# does our binary generate yet? (chapter 13's forward pass)
# (the help read whole first: `grep -q` could close the pipe early, and pipefail would see SIGPIPE)
help="$("$ours" --help 2>/dev/null || true)"
ours_bench=no
[[ $help == *"ch13-gpu bench"* ]] && ours_bench=yes
say "ours generates: $ours_bench"

# correct on this GPU before fast: a few ids teacher-forced through ours (in the CPU's order,
# then the adapter's own) and through chapter 8's CPU engine, each file but the 7B's (the
# same code as SmolLM2's, and the largest to load twice); compared when decode.md is written
check_ids="1,450,3575,282,4649,314,4277,30,2000,100,7,9000,12,5000,42,3"
checked=() # shape=cpu.json=in-order.json=own.json
if [[ $help == *"ch13-gpu logits"* && -x "$carried/bin/ch08-gguf" ]]; then
    for s in "${made[@]}"; do
        [[ $s == 7b ]] && continue
        f="$work/$s.gguf"
        run 60 "$carried/bin/ch08-gguf" logits -m "$f" --ids "$check_ids" --top 5 --json \
            >"$work/check-cpu-$s.json" 2>>"$log" || say "the CPU engine's logits of $s failed (see the log)"
        LLM_BOOK_GPU_REDUCTION=in-order run 60 "$ours" logits -m "$f" --ids "$check_ids" --top 5 --json \
            >"$work/check-ordered-$s.json" 2>>"$log" || say "ours in order, logits of $s, failed (see the log)"
        run 60 "$ours" logits -m "$f" --ids "$check_ids" --top 5 --json \
            >"$work/check-own-$s.json" 2>>"$log" || say "ours, logits of $s, failed (see the log)"
        checked+=("$s=$work/check-cpu-$s.json=$work/check-ordered-$s.json=$work/check-own-$s.json")
    done
    say "checked ours against the CPU engine (the result ends decode.md)"
fi

# one unmeasured run a file: the driver compiles llama.cpp's pipelines on first use (a first
# pp512 can take several times as long as the next), and the file enters the page cache
for s in "${made[@]}"; do
    run 120 "$llama" -m "$work/$s.gguf" -ngl 99 -p 64 -n 16 -r 1 -o json >/dev/null 2>>"$log" ||
        say "the warm-up run on $s.gguf failed (see the log)"
done
say "warmed up"

# where a step's time goes, by the GPU's clock: one profile a file (after the first round,
# so that the rounds after it, not the profiles, are what a short budget loses)
profiles() {
    [[ $ours_bench == yes && $help == *"--profile"* ]] || return 0
    local s rc layout profiled=()
    for s in "${made[@]}"; do
        rc=0
        # the layout the first round's run chose, named, so the profile times that step and
        # does not time every candidate again ("": the run failed, and the profile chooses)
        layout="$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1])).get("layout", ""))' "$work/tuned-$s.json" 2>/dev/null || true)"
        LLM_BOOK_GPU_LAYOUT=$layout run 120 "$ours" bench -m "$work/$s.gguf" --pp 32 --tg 64 --profile --json >"$work/p-$s.json" 2>>"$log" || rc=$?
        cat "$work/p-$s.json" >>"$log" 2>/dev/null || true
        if ((rc == 0)); then
            profiled+=("$s=$work/p-$s.json")
        else
            say "the profile of $s failed (status $rc; 124: out of time, 125: not run)"
        fi
    done
    if ((${#profiled[@]} > 0)); then
        "$python" "$work/race.py" profile "$out/gpu/profile.md" "$head" "${profiled[@]}" 2>>"$log" ||
            say "the profiles' JSON could not be read (see the log)"
        say "wrote $out/gpu/profile.md; $((budget - SECONDS))s of the budget left"
    fi
}

printf 'shape\tround\tengine\tpp512\ttg128\tstatus\n' >"$tsv"
tuned=() # shape=file: ours' first-round JSON, with the layouts it tried
record() { printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$tsv"; }
for ((r = 1; r <= rounds; r++)); do
    for s in "${made[@]}"; do
        f="$work/$s.gguf"
        rc=0
        run 240 "$llama" -m "$f" -ngl 99 -p 512 -n 128 -r 1 -o json >"$work/l.json" 2>>"$log" || rc=$?
        if ((rc == 0)) && read -r p g < <("$python" "$work/race.py" llama "$work/l.json" 2>>"$log"); then
            record "$s" "$r" llama.cpp "$p" "$g" ok
            say "$(printf 'round %s, %s: llama.cpp pp512 %.1f tg128 %.1f tok/s' "$r" "$s" "$p" "$g")"
        else
            record "$s" "$r" llama.cpp "" "" "failed $rc"
            say "round $r, $s: llama.cpp failed (status $rc; 124: out of time, 125: not run)"
        fi
        if [[ $ours_bench == yes ]]; then
            # ours twice: the adapter's own reduction, then the CPU's order (bit for bit the
            # CPU engine's logits), to see what exactness costs on a real GPU
            for reduction in "" in-order; do # "": the adapter's own
                engine=ours
                [[ $reduction == in-order ]] && engine="ours, in order"
                rc=0
                LLM_BOOK_GPU_REDUCTION=$reduction run 240 "$ours" bench -m "$f" --pp 512 --tg 128 --json >"$work/o.json" 2>>"$log" || rc=$?
                if ((rc == 0)) && read -r p g g1 < <("$python" -c 'import json,sys; v=json.load(open(sys.argv[1])); print(v["pp_tok_s"], v["tg_tok_s"], v.get("tg_tok_s_one_in_flight", "-"))' "$work/o.json" 2>>"$log"); then
                    record "$s" "$r" "$engine" "$p" "$g" ok
                    say "$(printf 'round %s, %s: %s pp512 %.1f tg128 %.1f tok/s' "$r" "$s" "$engine" "$p" "$g")"
                    if [[ -z $reduction && $r == 1 ]]; then
                        cp "$work/o.json" "$work/tuned-$s.json" && tuned+=("$s=$work/tuned-$s.json")
                    fi
                    # the same run's tokens again, the host waiting for each before it
                    # records the next step: what two steps in flight save
                    if [[ -z $reduction && $g1 != - ]]; then
                        record "$s" "$r" "ours, a step at a time" "" "$g1" ok
                        say "$(printf 'round %s, %s: ours a step at a time tg128 %.1f tok/s' "$r" "$s" "$g1")"
                    fi
                else
                    record "$s" "$r" "$engine" "" "" "failed $rc"
                    say "round $r, $s: $engine failed (status $rc)"
                fi
            done
        fi
    done
    if ((r == 1)); then profiles; fi
done
device="$(grep -m1 '^ggml_vulkan: 0 = ' "$log" || true)" # llama-bench's own line about the adapter
"$python" "$work/race.py" tables "$tsv" "$out/gpu/decode.md" "$head" "$(IFS=,; echo "${made[*]}")" "$sizes" "$copy" "$device"
if ((${#tuned[@]} > 0)); then
    "$python" "$work/race.py" layouts "$out/gpu/decode.md" "${tuned[@]}" 2>>"$log" ||
        say "the layouts ours tried could not be read (see the log)"
fi
if ((${#checked[@]} > 0)); then
    "$python" "$work/race.py" check "$out/gpu/decode.md" "${checked[@]}" 2>>"$log" ||
        say "the logits' JSON could not be read (see the log)"
fi
say "wrote $out/gpu/; $((budget - SECONDS))s of the budget left"
cat "$out/gpu/decode.md" | tee -a "$log"

# the tiled product against as many matrix-vector dispatches, into the log
ours_tiles=no
[[ $help == *"ch13-gpu tiles"* ]] && ours_tiles=yes
tile_shapes=("q4_0 4096 4096 512" "q8_0 4096 4096 512" "q4_1 576 1536 512")
[[ $dry == yes ]] && tile_shapes=("q4_1 576 1536 32") # lavapipe: a small one
if [[ $ours_tiles == yes ]]; then
    for t in "${tile_shapes[@]}"; do
        read -r f rows cols tokens <<<"$t"
        echo "== ch13-gpu tiles --format $f --rows $rows --cols $cols --tokens $tokens --json" >>"$log"
        rc=0
        run 60 "$ours" tiles --format "$f" --rows "$rows" --cols "$cols" --tokens "$tokens" --json >>"$log" 2>&1 || rc=$?
        ((rc == 0)) || say "ch13-gpu tiles on $f ${rows}x$cols failed (status $rc; 124: out of time, 125: not run)"
    done
    say "the tiled product's timings are in the log; $((budget - SECONDS))s of the budget left"
fi

#!/usr/bin/env bash
# Both races of a lent GPU machine (an H100 or H200 with 16 CPU cores, no Rust, no network)
# in one call, inside the device's 10 minutes a command: chapter 13's race on the GPU
# (`scripts/gpu-race.sh`) and the race past two cores (`scripts/cpu-scale.sh`).
#
#   bash scripts/lease.sh --out "$OUT" [--budget 540] [--gpu-budget 240] [--dry-run]
#        [-- CPU-SCALE OPTIONS...]
#
# Build here first, then carry both folders (with the working tree, about 45 MiB of the 64):
#   bash scripts/gpu-race-build.sh     # .gpu/   (half an hour the first time: llama.cpp's Vulkan build)
#   bash scripts/cpu-scale-build.sh    # .scale/ (twenty minutes the first time: two static llama-benches)
# and run, as one device call with carry [".gpu", ".scale"] and a timeout of 600 s:
#   bash scripts/lease.sh --out "$OUT"
#
# 1. The Vulkan loader: where `ldconfig -p` knows no libvulkan.so.1, the Debian packages in
#    .gpu/debs/ (the loader and the GL dispatch libraries) are unpacked into / and ldconfig
#    runs, as the device notes say; where NVIDIA's driver file is at the path they name and
#    VK_DRIVER_FILES is unset, it is set.
# 2. gpu-race.sh with --gpu-budget seconds (its three shapes, up to 3 rounds).
# 3. cpu-scale.sh with what is left of --budget: SmolLM2's and the 1B's shapes at 2, 4, 8 and 16
#    threads, the 7B's at 8 and 16 (at 2 it takes minutes a round), up to 3 rounds, ours
#    and llama-bench, pp512, tg128 and a 128-token prompt (--short 128). Both races take
#    their synthetic files from one folder (RACE_FILES), so the 7B-shaped file is made once. What follows `--` is passed on to cpu-scale.sh after
#    these (a later --threads or --rounds wins), e.g. to race the old prefill cut beside
#    ours: -- --ours ours=bin/ch08-gguf --ours band-8=bin/ch08-gguf@LLM_BOOK_PREFILL_BAND=8
# 4. What comes back (the device returns at most 8 files): $OUT/gpu/kernels.md and
#    decode.md, $OUT/scale-16/smollm2.md, 1b.md and 7b.md, each ready for
#    book/src/measured/ as it is, and $OUT/lease.tar.xz with both races' whole folders
#    (their logs and every round's numbers).
#
# --dry-run passes on: the tables say their numbers mean nothing (a rehearsal here, on
# lavapipe and 2 cores, with a small --budget).
set -euo pipefail
export LC_ALL=C

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out=""
budget=540
gpu_budget=240
dry=()
cpu_extra=()
usage() {
    sed -n '2,32p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
while [[ $# -gt 0 ]]; do
    case "$1" in
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    --budget) budget="${2:?--budget needs seconds}"; shift 2 ;;
    --gpu-budget) gpu_budget="${2:?--gpu-budget needs seconds}"; shift 2 ;;
    --dry-run) dry=(--dry-run); shift ;;
    --) shift; cpu_extra=("$@"); break ;;
    -h | --help) usage ;;
    *) echo "error: unknown argument $1" >&2; usage ;;
    esac
done
[[ -n "$out" ]] || { echo "error: --out DIR is required" >&2; usage; }
[[ "$budget" =~ ^[0-9]+$ ]] && ((budget >= 90 && budget <= 3600)) || { echo "error: --budget must be 90 to 3600 seconds" >&2; exit 2; }
[[ "$gpu_budget" =~ ^[0-9]+$ ]] && ((gpu_budget >= 30 && gpu_budget <= budget - 60)) ||
    { echo "error: --gpu-budget must be 30 seconds to --budget less 60" >&2; exit 2; }
for d in "$root/.gpu" "$root/.scale"; do
    [[ -d "$d" ]] || { echo "error: $d is missing: build it here (this script's header) and carry it" >&2; exit 1; }
done
# the tables that come back, each from its race's folder
tables=(gpu/kernels.md gpu/decode.md gpu/profile.md scale-16/smollm2.md scale-16/1b.md scale-16/7b.md)
for f in "${tables[@]}" lease.tar.xz; do
    [[ ! -e "$out/$f" ]] || { echo "error: $out/$f exists; this script never overwrites a file" >&2; exit 1; }
done
mkdir -p "$out"
work="$(mktemp -d "${TMPDIR:-/tmp}/lease-XXXXXX")"
trap 'rm -rf "$work"' EXIT # this run's own files: the synthetic models and both races' folders
mkdir -p "$work/files"
export RACE_FILES="$work/files"

# (read whole first: `grep -q` would close the pipe early, and pipefail would see SIGPIPE)
loaders="$(ldconfig -p 2>/dev/null || true)"
if [[ "$loaders" != *libvulkan.so.1* ]]; then
    debs=("$root"/.gpu/debs/*.deb)
    if [[ -e "${debs[0]}" && $(id -u) -eq 0 ]]; then
        echo "[lease] no Vulkan loader: unpacking ${#debs[@]} packages from .gpu/debs into /" >&2
        for f in "${debs[@]}"; do dpkg -x "$f" /; done
        ldconfig
    else
        echo "[lease] no Vulkan loader, and no .gpu/debs to unpack as root: gpu-race.sh will say so" >&2
    fi
fi
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [[ -z "${VK_DRIVER_FILES:-}" && -f "$icd" ]]; then
    export VK_DRIVER_FILES="$icd"
fi

rc_gpu=0 rc_cpu=0
echo "[lease] gpu-race.sh, ${gpu_budget}s" >&2
bash "$root/scripts/gpu-race.sh" --carried "$root/.gpu" --out "$work/gpu-race" \
    --budget "$gpu_budget" "${dry[@]}" || rc_gpu=$?
left=$((budget - SECONDS))
if ((left >= 60)); then
    echo "[lease] cpu-scale.sh, ${left}s" >&2
    bash "$root/scripts/cpu-scale.sh" --carried "$root/.scale" --out "$work/cpu-scale" \
        --threads 2,4,8,16 --threads 7b=8,16 --short 128 --budget "$left" "${dry[@]}" "${cpu_extra[@]}" || rc_cpu=$?
else
    echo "[lease] cpu-scale.sh not run: ${left}s left of the budget" >&2
    rc_cpu=125
fi

rm -rf "$work/files" # the synthetic models, before the folders are packed
for f in "${tables[@]}"; do
    race=cpu-scale
    [[ $f == gpu/* ]] && race=gpu-race
    if [[ -f "$work/$race/$f" ]]; then mkdir -p "$out/$(dirname "$f")"; cp "$work/$race/$f" "$out/$f"; fi
done
dirs=()
for d in gpu-race cpu-scale; do [[ -d "$work/$d" ]] && dirs+=("$d"); done
((${#dirs[@]} == 0)) || tar -C "$work" -cJf "$out/lease.tar.xz" "${dirs[@]}"
echo "[lease] gpu-race.sh status $rc_gpu, cpu-scale.sh status $rc_cpu, ${SECONDS}s; in $out:" >&2
(cd "$out" && find . -type f | sort) >&2
((rc_gpu == 0 && rc_cpu == 0))

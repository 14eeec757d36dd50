#!/usr/bin/env bash
# Make the folder that `scripts/gpu-race.sh` needs on a GPU machine that has no Rust, no
# network and no pip. Run here, once; then carry the folder (git-ignored) to the GPU
# (`scripts/lease.sh` runs this race and the 16 cores' in one device call).
#
#   bash scripts/gpu-race-build.sh [DIR]    # default DIR: .gpu/ at the repository root
#
# DIR gets:
#   bin/ch13-gpu               cargo build --release -p ch13-gpu
#   bin/ch07-simd-parallel, bin/ch08-gguf
#                              the same build's, so that the GPU machine's many cores can
#                              also run `bash scripts/cpu-scale.sh --regions --carried .gpu`
#   bin/llama-bench-vulkan.xz  llama.cpp's llama-bench with its Vulkan backend, at the fixtures'
#                              pinned version (`bash scripts/llamacpp.sh --vulkan`, after
#                              `scripts/vulkan-deps.sh`: this script runs both when it is not
#                              built, half an hour on 2 cores), compressed: its shaders make
#                              it large
#   wheels/                    the gguf package and PyYAML, what make_synthetic_gguf.py imports
#   smollm2-vocab.gguf         SmolLM2-135M-Instruct's tokenizer metadata, no tensors
#   gemma3-vocab.gguf          Gemma-3-270M's, for the Gemma-3-shaped file
#   debs/                      Debian's Vulkan loader (libvulkan1) and the GL dispatch libraries
#                              (libglvnd0 and friends), for a machine whose GPU driver brings its
#                              Vulkan driver but no loader: unpack them there by hand
#   built-from                 the commit bin/ch13-gpu was built from (the tables say it)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root/.gpu}"
target="${CARGO_TARGET_DIR:-$root/target}"
venv="${LLM_BOOK_VENV:-$root/.venv}"
models="${LLM_BOOK_MODELS:-$root/models}"
smollm2="$models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
gemma="$models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf"

if ! llama="$(bash "$root/scripts/llamacpp.sh" --vulkan --path 2>/dev/null)"; then
    echo "==> llama.cpp's Vulkan llama-bench is not built: scripts/vulkan-deps.sh, then llamacpp.sh --vulkan"
    bash "$root/scripts/vulkan-deps.sh"
    bash "$root/scripts/llamacpp.sh" --vulkan
    llama="$(bash "$root/scripts/llamacpp.sh" --vulkan --path)" || exit 1
fi
for f in "$smollm2" "$gemma"; do
    if [[ ! -f "$f" ]]; then
        echo "error: $f is missing; run: bash scripts/models.sh" >&2
        exit 1
    fi
done
if [[ -e "$out" && ! -e "$out/.gpu-race" ]] && [[ -n "$(ls -A "$out" 2>/dev/null)" ]]; then
    echo "error: $out is not empty and was not made by this script" >&2
    exit 1
fi
mkdir -p "$out/bin" "$out/wheels" "$out/debs"
touch "$out/.gpu-race"

echo "==> ch13-gpu, ch07-simd-parallel and ch08-gguf (release)"
cargo build --release --quiet -p ch13-gpu -p ch07-simd-parallel -p ch08-gguf --manifest-path "$root/Cargo.toml"
for b in ch13-gpu ch07-simd-parallel ch08-gguf; do
    cp "$target/release/$b" "$out/bin/$b"
    strip "$out/bin/$b"
done

echo "==> llama-bench (Vulkan), compressed"
rm -f "$out/bin/llama-bench-vulkan.xz" # made by this script (the folder is marked .gpu-race)
strip -o "$out/bin/llama-bench-vulkan" "$llama"
xz -9 "$out/bin/llama-bench-vulkan"

echo "==> the gguf wheel"
rm -f "$out"/wheels/*.whl
"$venv/bin/python" -m pip download --quiet --no-deps "gguf==0.19.0" -d "$out/wheels"
"$venv/bin/python" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux2014_x86_64 "pyyaml==6.0.2" -d "$out/wheels"

echo "==> SmolLM2's vocabulary"
rm -f "$out/smollm2-vocab.gguf"
"$venv/bin/python" "$root/scripts/make_synthetic_gguf.py" --vocab-only --tokenizer-from "$smollm2" \
    --out "$out/smollm2-vocab.gguf"
rm -f "$out/gemma3-vocab.gguf"
"$venv/bin/python" "$root/scripts/make_synthetic_gguf.py" --vocab-only --tokenizer-from "$gemma" \
    --out "$out/gemma3-vocab.gguf"

echo "==> Debian's Vulkan loader and GL dispatch libraries (apt-get download, amd64)"
rm -f "$out"/debs/*.deb
lists="$(mktemp -d)"
trap 'rm -rf "$lists"' EXIT
mkdir -p "$lists/partial"
o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 "-oDir::State::Lists=$lists")
apt-get "${o[@]}" update >/dev/null
(cd "$out/debs" && apt-get "${o[@]}" download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 2>/dev/null)

commit="$(git -C "$root" rev-parse --short HEAD)"
if [[ -n "$(git -C "$root" status --porcelain --untracked-files=no chapters)" ]]; then
    commit="$commit with uncommitted changes to chapters/"
fi
echo "$commit" >"$out/built-from"
du -ah "$out"

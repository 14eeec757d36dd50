#!/usr/bin/env bash
# Make the folder that `scripts/cpu-scale.sh` needs on a machine that has no Rust, no network
# and no pip: our release `ch08-gguf`, two static builds of llama.cpp's `llama-bench`, the
# `gguf` Python package as a wheel, and SmolLM2's vocabulary alone (a GGUF file with no
# tensors). Run here, once; then carry the folder (git-ignored) to the machine with the cores.
#
#   bash scripts/cpu-scale-build.sh [--no-llama] [DIR]    # default DIR: .scale/ at the repository root
#
# DIR gets:
#   bin/ch08-gguf            cargo build --release (the workspace's flags: no target-cpu, the
#                            kernels pick AVX-512, AVX2 or scalar when the program starts)
#   bin/ch07-simd-parallel   the same, for `cpu-scale.sh --regions` (what one region costs)
#   bin/llama-bench.xz       llama.cpp at the fixtures' pinned version, statically linked,
#                            for an x86-64 with AVX-512 (F, BW, VL, VNNI, BF16, VBMI); AMX off;
#                            compressed with xz (cpu-scale.sh unpacks it into its temporary
#                            folder), so that this folder and .gpu/ fit one device call
#   bin/llama-bench-avx2.xz  the same for an AVX2-only x86-64 (cpu-scale.sh picks by /proc/cpuinfo)
#   wheels/gguf-*.whl        what make_synthetic_gguf.py imports (numpy is on the machine)
#   smollm2-vocab.gguf       SmolLM2-135M-Instruct's tokenizer metadata, no tensors
#   built-from               the commit bin/ch08-gguf was built from (the tables' headers say it)
#
# --no-llama builds no llama-bench (for `cpu-scale.sh --no-llama` or `--regions`, which race
# ours alone; a rehearsal here without the twenty minutes of llama.cpp's build).
#
# Features are named one by one rather than with GGML_NATIVE, and AMX stays off, for the
# reason `scripts/llamacpp.sh` gives. The llama.cpp source is the one `scripts/llamacpp.sh`
# fetched (run it first); the build goes to $CARGO_TARGET_DIR (default target/), in
# llama-static/ ($SCALE_LLAMA_BUILD to name another; about 20 minutes on 2 idle cores, then a
# few more for the second level).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
with_llama=yes
if [[ "${1:-}" == --no-llama ]]; then
    with_llama=no
    shift
fi
out="${1:-$root/.scale}"
target="${CARGO_TARGET_DIR:-$root/target}"
venv="${LLM_BOOK_VENV:-$root/.venv}"
models="${LLM_BOOK_MODELS:-$root/models}"
llamacpp="${LLM_BOOK_LLAMACPP:-$root/.llamacpp}"
src="$llamacpp/src/llama_cpp_python-0.3.36/vendor/llama.cpp"
smollm2="$models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"

if [[ $with_llama == yes && ! -f "$src/CMakeLists.txt" ]]; then
    echo "error: no llama.cpp source at $src; run: bash scripts/llamacpp.sh" >&2
    exit 1
fi
if [[ ! -f "$smollm2" ]]; then
    echo "error: $smollm2 is missing; run: bash scripts/models.sh smollm2" >&2
    exit 1
fi
if [[ -e "$out" && ! -e "$out/.cpu-scale" ]] && [[ -n "$(ls -A "$out" 2>/dev/null)" ]]; then
    echo "error: $out is not empty and was not made by this script" >&2
    exit 1
fi
mkdir -p "$out/bin" "$out/wheels"
touch "$out/.cpu-scale"
export PATH="$venv/bin:$PATH"

common="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF"
v4="$common -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON"
v3="$common -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF"

# build OPTIONS: llama-bench, statically linked (without OpenSSL: it never fetches anything),
# into $dir/bin/llama-bench. Both builds use one
# folder: the second configuration recompiles ggml's CPU backend alone (the only part whose
# flags differ), not llama.cpp's library and tools again.
dir="${SCALE_LLAMA_BUILD:-$target/llama-static}"
build() {
    # shellcheck disable=SC2086 # the options are words
    cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release $1 \
        -DBUILD_SHARED_LIBS=OFF -DGGML_STATIC=ON -DCMAKE_EXE_LINKER_FLAGS=-static \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=OFF >/dev/null
    cmake --build "$dir" --target llama-bench -j "$(nproc)"
    if ldd "$dir/bin/llama-bench" >/dev/null 2>&1; then
        echo "error: $dir/bin/llama-bench is dynamically linked" >&2
        exit 1
    fi
}
if [[ $with_llama == yes ]]; then
    echo "==> llama-bench for AVX2 (x86-64-v3)"
    build "$v3"
    cp "$dir/bin/llama-bench" "$out/bin/llama-bench-avx2"
    echo "==> llama-bench for AVX-512 (x86-64-v4 with VNNI, BF16 and VBMI)"
    build "$v4"
    cp "$dir/bin/llama-bench" "$out/bin/llama-bench"
    "$out/bin/llama-bench-avx2" --help >/dev/null
fi

echo "==> ch08-gguf and ch07-simd-parallel (release)"
cargo build --release --quiet -p ch08-gguf -p ch07-simd-parallel --manifest-path "$root/Cargo.toml"
cp "$target/release/ch08-gguf" "$out/bin/ch08-gguf"
cp "$target/release/ch07-simd-parallel" "$out/bin/ch07-simd-parallel"

echo "==> the gguf wheel"
rm -f "$out"/wheels/*.whl # made by this script (the folder is marked .cpu-scale)
# gguf imports yaml when it loads; PyYAML's wheel works from the zip (its pure-Python half)
"$venv/bin/python" -m pip download --quiet --no-deps "gguf==0.19.0" -d "$out/wheels"
"$venv/bin/python" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux2014_x86_64 "pyyaml==6.0.2" -d "$out/wheels"

echo "==> SmolLM2's vocabulary"
rm -f "$out/smollm2-vocab.gguf" # made by this script (the folder is marked .cpu-scale)
"$venv/bin/python" "$root/scripts/make_synthetic_gguf.py" --vocab-only --tokenizer-from "$smollm2" \
    --out "$out/smollm2-vocab.gguf"

# the commit the binary was built from, for the tables' headers
commit="$(git -C "$root" rev-parse --short HEAD)"
if [[ -n "$(git -C "$root" status --porcelain --untracked-files=no chapters)" ]]; then
    commit="$commit with uncommitted changes to chapters/"
fi
echo "$commit" >"$out/built-from"

strip "$out/bin/ch08-gguf" "$out/bin/ch07-simd-parallel"
if [[ $with_llama == yes ]]; then
    # compressed, a third of their size, so that this folder and .gpu/ travel together
    rm -f "$out/bin/llama-bench.xz" "$out/bin/llama-bench-avx2.xz" # made by this script
    strip "$out/bin/llama-bench" "$out/bin/llama-bench-avx2"
    xz -9 "$out/bin/llama-bench" "$out/bin/llama-bench-avx2"
fi
du -ah "$out"

#!/usr/bin/env bash
# Build llama.cpp's `llama-bench` (and `llama-completion`, for load-time and memory
# comparisons; `llama-batched-bench`, for chapter 10's many sequences; `llama-server`, for
# chapter 11's load test) at the version the fixtures were made with, for the side-by-side
# benchmarks of chapters 7 to 11. Run once; CI never runs it.
#
#   bash scripts/llamacpp.sh          # build (or say where the existing build is)
#   bash scripts/llamacpp.sh --path   # print the binary's path if it is built, else fail
#   bash scripts/llamacpp.sh --vulkan [--path]
#                                     # llama-bench with the Vulkan backend (GGML_VULKAN), for
#                                     # chapter 13's race on a GPU: Debian's glslc,
#                                     # libvulkan-dev and spirv-headers, and Vulkan headers
#                                     # 1.3.261 or newer (Debian 12's are 1.3.239):
#                                     # `bash scripts/vulkan-deps.sh` installs the first,
#                                     # unpacks newer headers into .llamacpp/vulkan-headers/
#                                     # and, where Debian's glslc lacks the extensions of the
#                                     # backend's fast shaders (cooperative matrices, integer
#                                     # dot products), a newer one into .llamacpp/vulkan-glslc/;
#                                     # used unless LLM_BOOK_VULKAN_INCLUDE and
#                                     # LLM_BOOK_VULKAN_GLSLC name others.
#                                     # Built into .llamacpp/build-vulkan/ with libstdc++
#                                     # linked in and no OpenMP, so that the binary runs on a
#                                     # machine with only libc and a Vulkan loader.
#
# The source is the copy of llama.cpp vendored inside the `llama-cpp-python` source
# package (the fixtures' pinned version), fetched with `pip download`; cmake and ninja come
# from pip too, into the project's virtual environment. Everything lands in
# $LLM_BOOK_LLAMACPP (default: .llamacpp/ at the repository root, git-ignored):
#   .llamacpp/src/      the unpacked source package
#   .llamacpp/build/    the cmake build; the binaries are build/bin/llama-bench,
#                       llama-completion, llama-batched-bench and llama-server
#
# Built for this CPU's instruction sets, named one by one from /proc/cpuinfo, rather than
# with GGML_NATIVE: at this version `-march=native` turns AMX on wherever the CPU has it,
# whatever GGML_AMX_* say, and on the AMX Xeons this book is measured on llama-bench then
# dies in its AMX matrix product (SIGSEGV). AMX stays off. The build records the flags it
# was made with; on a machine with other flags the script builds again.
set -euo pipefail

LLAMA_CPP_PYTHON="0.3.36" # must match scripts/make_fixtures.py and fixtures/reference/*.json

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${LLM_BOOK_LLAMACPP:-$root/.llamacpp}"
venv="${LLM_BOOK_VENV:-$root/.venv}"
vulkan=no
if [[ "${1:-}" == "--vulkan" ]]; then
    vulkan=yes
    shift
fi
build="$dest/build"
tools=(llama-bench llama-completion llama-batched-bench llama-server)
if [[ $vulkan == yes ]]; then
    build="$dest/build-vulkan"
    tools=(llama-bench)
fi
bin="$build/bin/llama-bench"
stamp="$build/.built-from"

# ggml's options for this CPU's x86 features (AMX off), or the native build elsewhere.
cpu_options() {
    if [[ "$(uname -m)" != "x86_64" ]]; then
        echo "-DGGML_NATIVE=ON"
        return
    fi
    local flags opts="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
    flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
    local pair
    for pair in avx:GGML_AVX avx2:GGML_AVX2 fma:GGML_FMA f16c:GGML_F16C bmi2:GGML_BMI2 \
        avx_vnni:GGML_AVX_VNNI avx512f:GGML_AVX512 avx512vbmi:GGML_AVX512_VBMI \
        avx512_vnni:GGML_AVX512_VNNI avx512_bf16:GGML_AVX512_BF16; do
        if [[ "$flags" == *" ${pair%%:*} "* ]]; then
            opts+=" -D${pair##*:}=ON"
        else
            opts+=" -D${pair##*:}=OFF"
        fi
    done
    echo "$opts"
}
options="$(cpu_options)"
want="llama-cpp-python==$LLAMA_CPP_PYTHON $options"
extra=(-DLLAMA_BUILD_SERVER=ON)
if [[ $vulkan == yes ]]; then
    extra=(-DGGML_VULKAN=ON -DGGML_OPENMP=OFF -DLLAMA_BUILD_SERVER=OFF
        -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc")
    include="${LLM_BOOK_VULKAN_INCLUDE:-/usr/include}"
    if [[ -z "${LLM_BOOK_VULKAN_INCLUDE:-}" && -f "$dest/vulkan-headers/usr/include/vulkan/vulkan.hpp" ]]; then
        include="$dest/vulkan-headers/usr/include" # unpacked by scripts/vulkan-deps.sh
    fi
    if [[ ! -f "$include/vulkan/vulkan_core.h" || ! -f "$include/vulkan/vulkan.hpp" ]]; then
        echo "error: no Vulkan headers in $include (vulkan/vulkan_core.h, vulkan/vulkan.hpp): run: bash scripts/vulkan-deps.sh" >&2
        exit 1
    fi
    source "$root/scripts/vulkan-lib.sh" # header_version, new_enough
    version="$(header_version "$include")"
    if ! new_enough "$version"; then
        echo "error: the Vulkan headers in $include are ${version:-of no version we can read}; llama.cpp's Vulkan backend needs 1.3.261 or newer: run bash scripts/vulkan-deps.sh, or set LLM_BOOK_VULKAN_INCLUDE to newer ones" >&2
        exit 1
    fi
    glslc="${LLM_BOOK_VULKAN_GLSLC:-}"
    if [[ -z "$glslc" && -x "$dest/vulkan-glslc/glslc" ]]; then
        glslc="$dest/vulkan-glslc/glslc" # unpacked by scripts/vulkan-deps.sh
    fi
    glslc="${glslc:-$(command -v glslc || true)}"
    if [[ "${1:-}" != "--path" && ! -x "$glslc" ]]; then
        echo "error: no glslc (the Vulkan shader compiler); run: bash scripts/vulkan-deps.sh" >&2
        exit 1
    fi
    extra+=(-DVulkan_INCLUDE_DIR="$include" -DVulkan_GLSLC_EXECUTABLE="$glslc")
    want+=" ${extra[*]}"
fi
again="bash scripts/llamacpp.sh"
[[ $vulkan == yes ]] && again+=" --vulkan"

if [[ "${1:-}" == "--path" ]]; then
    if [[ -x "$bin" && "$(cat "$stamp" 2>/dev/null)" == "$want" ]]; then
        echo "$bin"
        exit 0
    fi
    if [[ -x "$bin" ]]; then
        echo "error: llama-bench was built for another CPU or version; run: $again" >&2
    else
        echo "error: llama-bench is not built; run: $again" >&2
    fi
    exit 1
elif [[ $# -gt 0 ]]; then
    echo "usage: bash scripts/llamacpp.sh [--vulkan] [--path]" >&2
    exit 2
fi

built=yes
for t in "${tools[@]}"; do [[ -x "$build/bin/$t" ]] || built=no; done
if [[ $built == yes && "$(cat "$stamp" 2>/dev/null)" == "$want" ]]; then
    echo "${tools[*]} are already built in $build/bin"
    exit 0
fi
if [[ -e "$dest" && ! -d "$dest" ]]; then
    echo "error: $dest exists and is not a directory" >&2
    exit 1
fi
if [[ -d "$dest" && ! -e "$dest/.llm-book" ]] && [[ -n "$(ls -A "$dest")" ]]; then
    echo "error: $dest is not empty and was not made by this script; set LLM_BOOK_LLAMACPP elsewhere" >&2
    exit 1
fi
mkdir -p "$dest"
touch "$dest/.llm-book"

if [[ ! -x "$venv/bin/python" ]]; then
    echo "==> creating the virtual environment $venv"
    python3 -m venv "$venv"
fi
echo "==> cmake and ninja (pip, into $venv)"
"$venv/bin/python" -m pip install --quiet cmake ninja scikit-build-core

src="$dest/src/llama_cpp_python-$LLAMA_CPP_PYTHON"
if [[ ! -f "$src/vendor/llama.cpp/CMakeLists.txt" ]]; then
    echo "==> fetching the llama-cpp-python==$LLAMA_CPP_PYTHON source package"
    tmp="$(mktemp -d "$dest/.download-XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    # --no-build-isolation: pip reads the package's metadata with the scikit-build-core
    # installed above, instead of building its build tools from source first.
    "$venv/bin/python" -m pip download --quiet --no-deps --no-binary llama-cpp-python \
        --no-build-isolation "llama-cpp-python==$LLAMA_CPP_PYTHON" -d "$tmp"
    archive="$(ls "$tmp"/llama_cpp_python-*.tar.gz)"
    mkdir -p "$dest/src"
    tar -xzf "$archive" -C "$tmp"
    rm -rf "$src"
    mv "$tmp/llama_cpp_python-$LLAMA_CPP_PYTHON" "$src"
fi

echo "==> configuring llama.cpp (vendored in llama-cpp-python $LLAMA_CPP_PYTHON)"
export PATH="$venv/bin:$PATH"
echo "    $options"
# shellcheck disable=SC2086 # the options are words
cmake -S "$src/vendor/llama.cpp" -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release $options "${extra[@]}" -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF >/dev/null
echo "==> building ${tools[*]} (about 15-20 minutes on 2 cores)"
cmake --build "$build" --target "${tools[@]}" -j "$(nproc)"
echo "$want" >"$stamp"
echo "built: $bin"

#!/usr/bin/env bash
# Build llama.cpp's `llama-bench` (and `llama-completion`, for load-time and memory
# comparisons; `llama-batched-bench`, for chapter 10's many sequences; `llama-server`, for
# chapter 11's load test) at the version the fixtures were made with, for the side-by-side
# benchmarks of chapters 7 to 11. Run once; CI never runs it.
#
#   bash scripts/llamacpp.sh          # build (or say where the existing build is)
#   bash scripts/llamacpp.sh --path   # print the binary's path if it is built, else fail
#
# The source is the copy of llama.cpp vendored inside the `llama-cpp-python` source
# package (the fixtures' pinned version), fetched with `pip download`; cmake and ninja come
# from pip too, into the project's virtual environment. Everything lands in
# $LLM_BOOK_LLAMACPP (default: .llamacpp/ at the repository root, git-ignored):
#   .llamacpp/src/      the unpacked source package
#   .llamacpp/build/    the cmake build; the binaries are build/bin/llama-bench,
#                       llama-completion, llama-batched-bench and llama-server
#
# Built for this CPU (GGML_NATIVE) like a user's own build, without AMX: the KVM guests
# this book is measured on hide AMX, and a binary that uses it dies with SIGILL.
set -euo pipefail

LLAMA_CPP_PYTHON="0.3.36" # must match scripts/make_fixtures.py and fixtures/reference/*.json

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${LLM_BOOK_LLAMACPP:-$root/.llamacpp}"
venv="${LLM_BOOK_VENV:-$root/.venv}"
bin="$dest/build/bin/llama-bench"
tools=(llama-bench llama-completion llama-batched-bench llama-server)
stamp="$dest/build/.built-from"

if [[ "${1:-}" == "--path" ]]; then
    if [[ -x "$bin" && "$(cat "$stamp" 2>/dev/null)" == "llama-cpp-python==$LLAMA_CPP_PYTHON" ]]; then
        echo "$bin"
        exit 0
    fi
    echo "error: llama-bench is not built; run: bash scripts/llamacpp.sh" >&2
    exit 1
elif [[ $# -gt 0 ]]; then
    echo "usage: bash scripts/llamacpp.sh [--path]" >&2
    exit 2
fi

built=yes
for t in "${tools[@]}"; do [[ -x "$dest/build/bin/$t" ]] || built=no; done
if [[ $built == yes && "$(cat "$stamp" 2>/dev/null)" == "llama-cpp-python==$LLAMA_CPP_PYTHON" ]]; then
    echo "${tools[*]} are already built in $dest/build/bin"
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
cmake -S "$src/vendor/llama.cpp" -B "$dest/build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \
    -DGGML_AMX_BF16=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=ON -DBUILD_SHARED_LIBS=OFF >/dev/null
echo "==> building ${tools[*]} (about 15-20 minutes on 2 cores)"
cmake --build "$dest/build" --target "${tools[@]}" -j "$(nproc)"
echo "llama-cpp-python==$LLAMA_CPP_PYTHON" >"$stamp"
echo "built: $bin"

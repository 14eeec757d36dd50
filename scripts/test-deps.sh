#!/usr/bin/env bash
# What chapter 11's tests need besides the models and cargo: real clients for the server.
#
#   bash scripts/test-deps.sh
#
# - the official `openai` Python package, pinned, in the project's virtual environment
#   ($LLM_BOOK_VENV, default .venv at the repository root; created here if missing);
# - Debian's `chromium`, to load the chat page headless (apt-get, as root or with sudo).
#
# Quick when both are there already; CI runs it before `cargo xtask test`.
set -euo pipefail

OPENAI_VERSION="3.54.0"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${LLM_BOOK_VENV:-$root/.venv}"
py="$venv/bin/python"

if [[ ! -x "$py" ]]; then
    if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
        echo "error: Python 3.11 or newer (python3, with the venv module) is needed" >&2
        exit 1
    fi
    echo "==> creating the Python environment $venv"
    python3 -m venv "$venv"
fi

if ! "$py" - "$OPENAI_VERSION" <<'PYEOF' 2>/dev/null; then
import sys
from importlib.metadata import version
sys.exit(0 if version("openai") == sys.argv[1] else 1)
PYEOF
    echo "==> installing openai==$OPENAI_VERSION into $venv"
    if ! "$py" -m pip install --quiet "openai==$OPENAI_VERSION"; then
        echo "error: pip could not install openai==$OPENAI_VERSION; check the network and retry" >&2
        exit 1
    fi
fi
echo "openai $("$py" -c 'import openai; print(openai.__version__)') in $venv"

if ! command -v chromium >/dev/null 2>&1; then
    sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        if ! command -v sudo >/dev/null 2>&1; then
            echo "error: chromium is missing; install Debian's package as root: apt-get install chromium" >&2
            exit 1
        fi
        sudo=(sudo)
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "error: chromium is missing and this is not a Debian system: install Chromium so that" \
            "'chromium' is on the PATH" >&2
        exit 1
    fi
    echo "==> installing chromium (apt-get)"
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
echo "$(chromium --version 2>/dev/null || echo chromium) at $(command -v chromium)"

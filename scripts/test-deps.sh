#!/usr/bin/env bash
# What the tests need besides the models and cargo: real clients for chapter 11's server,
# and a Vulkan driver for chapter 13's shaders.
#
#   bash scripts/test-deps.sh
#
# - the official `openai` Python package, pinned, in the project's virtual environment
#   ($LLM_BOOK_VENV, default .venv at the repository root; created here if missing);
# - Debian's `chromium`, to load the chat page headless (apt-get, as root or with sudo);
# - Debian's `mesa-vulkan-drivers` (lavapipe: a Vulkan driver that runs on the CPU) and
#   `libvulkan1` (the Vulkan loader), so chapter 13's shaders run on a machine with no GPU.
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

# apt_install WHAT PACKAGE...: Debian's packages, as root or with sudo.
apt_install() {
    local what="$1"
    shift
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        if ! command -v sudo >/dev/null 2>&1; then
            echo "error: $what is missing; install Debian's packages as root: apt-get install $*" >&2
            exit 1
        fi
        sudo=(sudo)
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "error: $what is missing and this is not a Debian system: install $* (or your" \
            "system's equivalent)" >&2
        exit 1
    fi
    echo "==> installing $* (apt-get)"
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

if ! command -v chromium >/dev/null 2>&1; then
    apt_install chromium chromium
fi
echo "$(chromium --version 2>/dev/null || echo chromium) at $(command -v chromium)"

# lavapipe's ICD file names the driver to the loader; the loader is libvulkan.so.1.
lvp_icd=$(ls /usr/share/vulkan/icd.d/lvp_icd.*.json 2>/dev/null | head -n 1 || true)
if [[ -z "$lvp_icd" ]] || ! ldconfig -p 2>/dev/null | grep 'libvulkan\.so\.1 ' >/dev/null; then
    apt_install "a Vulkan driver (lavapipe)" mesa-vulkan-drivers libvulkan1
    lvp_icd=$(ls /usr/share/vulkan/icd.d/lvp_icd.*.json 2>/dev/null | head -n 1 || true)
fi
if [[ -z "$lvp_icd" ]]; then
    echo "error: mesa-vulkan-drivers installed no lavapipe ICD file under /usr/share/vulkan/icd.d" >&2
    exit 1
fi
echo "lavapipe (Vulkan on the CPU): $lvp_icd"

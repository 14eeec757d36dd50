#!/usr/bin/env bash
# What `bash scripts/llamacpp.sh --vulkan` needs to build llama.cpp's Vulkan backend on a
# Debian machine, for chapter 13's race (`scripts/gpu-race-build.sh` runs this itself):
#
#   bash scripts/vulkan-deps.sh
#
# 1. Debian's glslc (the shader compiler), libvulkan-dev and spirv-headers, with apt-get
#    (as root; skipped when all three are installed).
# 2. Vulkan headers 1.3.261 or newer, which the backend needs. When the installed ones are
#    older (Debian 12 has 1.3.239), Debian 13's libvulkan-dev is unpacked (dpkg -x) into
#    .llamacpp/vulkan-headers/.
# 3. A glslc that knows the extensions the backend's fast shaders are written in: cooperative
#    matrices (KHR, and NVIDIA's second version: tensor cores, for prefill) and integer dot
#    products. Without them the backend builds but leaves those paths out, a slower
#    llama.cpp than a user with a current system meets. Debian 12's glslc (shaderc 2023.2)
#    has none of them; then Debian 13's glslc is unpacked into .llamacpp/vulkan-glslc/ with
#    the C and C++ runtime it was built against, and a wrapper, .llamacpp/vulkan-glslc/glslc,
#    runs it through that runtime's own loader (nothing of it is installed, nothing else on
#    the machine uses it).
#
# `llamacpp.sh --vulkan` uses both folders when they exist (LLM_BOOK_VULKAN_INCLUDE and
# LLM_BOOK_VULKAN_GLSLC name others). The downloads use the machine's own Debian mirror, with
# apt's lists kept in a temporary folder, so the system's apt state is not touched.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${LLM_BOOK_LLAMACPP:-$root/.llamacpp}"
headers="$dest/vulkan-headers"
glslc_dir="$dest/vulkan-glslc"
next_release="trixie" # Debian 13: libvulkan-dev 1.4.309, glslc 2025.2

source "$root/scripts/vulkan-lib.sh" # header_version, new_enough, debian_apt

# Whether the glslc given compiles a shader that asks for each extension llama.cpp's fast
# paths are written in.
glslc_knows_all() {
    local glslc="$1" ext t
    [[ -x "$glslc" ]] || return 1
    t="$(mktemp -d)"
    for ext in GL_KHR_cooperative_matrix GL_NV_cooperative_matrix2 GL_EXT_integer_dot_product; do
        printf '#version 450\n#extension %s : require\nvoid main() {}\n' "$ext" >"$t/t.comp"
        if ! "$glslc" -o /dev/null -fshader-stage=compute --target-env=vulkan1.3 "$t/t.comp" 2>/dev/null; then
            rm -rf "$t"
            return 1
        fi
    done
    rm -rf "$t"
}

missing=()
command -v glslc >/dev/null || missing+=(glslc)
for p in libvulkan-dev spirv-headers; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "error: ${missing[*]} missing; as root: apt-get install glslc libvulkan-dev spirv-headers" >&2
        exit 1
    fi
    echo "==> apt-get install ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq glslc libvulkan-dev spirv-headers >/dev/null
fi

need_headers=yes
if new_enough "$(header_version /usr/include)" || new_enough "$(header_version "$headers/usr/include")"; then
    need_headers=no
fi
need_glslc=yes
if glslc_knows_all "$(command -v glslc)" || glslc_knows_all "$glslc_dir/glslc"; then
    need_glslc=no
fi
if [[ $need_headers == no && $need_glslc == no ]]; then
    echo "the Vulkan build's headers and glslc are ready"
    exit 0
fi

if [[ -e "$dest" && ! -e "$dest/.llm-book" ]] && [[ -n "$(ls -A "$dest" 2>/dev/null)" ]]; then
    echo "error: $dest is not empty and was not made by this project's scripts; set LLM_BOOK_LLAMACPP elsewhere" >&2
    exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if ! debian_apt "$tmp" "$next_release"; then
    echo "error: no amd64 Debian mirror in /etc/apt (or no Debian keyring) to fetch Debian 13's packages from: set LLM_BOOK_VULKAN_INCLUDE to Vulkan headers 1.3.261 or newer, and LLM_BOOK_VULKAN_GLSLC to a glslc from shaderc 2024 or newer" >&2
    exit 1
fi
o=("${APT_OPTS[@]}")
mkdir -p "$dest" "$tmp/debs"
touch "$dest/.llm-book"
echo "==> Debian $next_release's package lists (into a temporary folder)"
apt-get "${o[@]}" -qq update >/dev/null

if [[ $need_headers == yes ]]; then
    echo "==> Vulkan headers from Debian $next_release's libvulkan-dev"
    (cd "$tmp/debs" && apt-get "${o[@]}" -qq download libvulkan-dev >/dev/null)
    rm -rf "$headers" # made by this script (inside the folder marked .llm-book)
    mkdir -p "$headers"
    dpkg -x "$tmp"/debs/libvulkan-dev_*.deb "$headers"
    v="$(header_version "$headers/usr/include")"
    if ! new_enough "$v"; then
        echo "error: Debian $next_release's libvulkan-dev has headers ${v:-of no version}; need 1.3.261 or newer" >&2
        exit 1
    fi
    echo "    headers $v in $headers/usr/include"
fi

if [[ $need_glslc == yes ]]; then
    echo "==> glslc from Debian $next_release, with its C and C++ runtime"
    rm -f "$tmp"/debs/*.deb
    (cd "$tmp/debs" && apt-get "${o[@]}" -qq download glslc libshaderc1 libc6 libstdc++6 libgcc-s1 >/dev/null)
    rm -rf "$glslc_dir" # made by this script (inside the folder marked .llm-book)
    mkdir -p "$glslc_dir/root"
    for f in "$tmp"/debs/*.deb; do dpkg -x "$f" "$glslc_dir/root"; done
    cat >"$glslc_dir/glslc" <<'EOF'
#!/bin/sh
# Debian 13's glslc through Debian 13's loader and libraries (made by scripts/vulkan-deps.sh).
here="$(dirname "$(readlink -f "$0")")"
lib="$here/root/usr/lib/x86_64-linux-gnu"
exec "$lib/ld-linux-x86-64.so.2" --library-path "$lib" "$here/root/usr/bin/glslc" "$@"
EOF
    chmod +x "$glslc_dir/glslc"
    if ! glslc_knows_all "$glslc_dir/glslc"; then
        echo "error: Debian $next_release's glslc ($glslc_dir/glslc) does not run here or lacks cooperative matrices or integer dot products" >&2
        exit 1
    fi
    echo "    $("$glslc_dir/glslc" --version | head -1) in $glslc_dir/glslc"
fi

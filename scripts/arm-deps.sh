#!/usr/bin/env bash
# What `cargo xtask arm` needs to build the kernels for 64-bit ARM and run them here, on an
# x86-64 Debian machine without ARM hardware:
#
#   bash scripts/arm-deps.sh
#
# - Debian's Rust (`rustc-web`, `cargo-web`: /usr/bin/rustc and /usr/bin/cargo) with its
#   standard library built for arm64 (`libstd-rust-web-dev:arm64`, through dpkg's multiarch):
#   the pinned toolchain of rust-toolchain.toml has no aarch64 standard library here, and
#   none can be downloaded;
# - the cross linker and C library (`gcc-aarch64-linux-gnu`, `libc6-dev-arm64-cross`);
# - QEMU's user-mode emulator (`qemu-user`: qemu-aarch64), which runs an aarch64 test binary
#   as an ordinary process, on an emulated CPU of our choosing (QEMU_CPU).
#
# apt-get, as root or with sudo. Idempotent: quick when everything is there already.
set -euo pipefail

packages=(rustc-web cargo-web libstd-rust-web-dev:arm64 gcc-aarch64-linux-gnu
    libc6-dev-arm64-cross qemu-user)

have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

missing=()
for p in "${packages[@]}"; do
    have "$p" || missing+=("$p")
done

if ((${#missing[@]})); then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "error: the ARM cross toolchain is missing (${missing[*]}) and this is not a" \
            "Debian system: install a Rust with an aarch64-unknown-linux-gnu standard library," \
            "an aarch64 linker and qemu-aarch64 by hand" >&2
        exit 1
    fi
    sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        if ! command -v sudo >/dev/null 2>&1; then
            echo "error: missing ${missing[*]}; install them as root:" \
                "dpkg --add-architecture arm64 && apt-get update && apt-get install ${missing[*]}" >&2
            exit 1
        fi
        sudo=(sudo)
    fi
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        echo "==> adding arm64 as a foreign architecture (dpkg --add-architecture arm64)"
        "${sudo[@]}" dpkg --add-architecture arm64
    fi
    echo "==> installing ${missing[*]} (apt-get)"
    "${sudo[@]}" apt-get update -qq
    if ! DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq \
        --no-install-recommends "${missing[@]}" >/dev/null; then
        echo "error: apt-get could not install ${missing[*]}; rustc-web 1.9x comes from" \
            "Debian 12's security updates (bookworm-security): check that they are in the" \
            "apt sources, and the network" >&2
        exit 1
    fi
fi

# Debian's rustc, not rustup's proxy of the same name, which may come first on the PATH.
for tool in /usr/bin/rustc /usr/bin/cargo aarch64-linux-gnu-gcc qemu-aarch64; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "error: $tool is missing after the install; reinstall: apt-get install --reinstall" \
            "${packages[*]}" >&2
        exit 1
    fi
done
if [[ ! -d /usr/lib/rustlib/aarch64-unknown-linux-gnu/lib ]]; then
    echo "error: Debian's Rust has no aarch64 standard library" \
        "(/usr/lib/rustlib/aarch64-unknown-linux-gnu); reinstall libstd-rust-web-dev:arm64" >&2
    exit 1
fi
echo "$(/usr/bin/rustc --version) with the aarch64-unknown-linux-gnu standard library"
echo "$(aarch64-linux-gnu-gcc --version | head -n1)"
echo "$(qemu-aarch64 --version | head -n1)"

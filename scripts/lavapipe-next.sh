#!/usr/bin/env bash
# A second Vulkan driver to run chapter 13's tests on: Debian unstable's lavapipe (Mesa 26.2,
# LLVM 22, when this was written), where CI and scripts/test-deps.sh use Debian 12's (Mesa
# 22.3, LLVM 15). Another shader compiler orders and rounds what WGSL leaves open in other
# ways, and the newer driver has what the old one lacks (cooperative matrices: `ch13-gpu
# info` lists their shapes). For the developer; CI does not run it, since unstable changes
# from one day to the next.
#
#   bash scripts/lavapipe-next.sh                  # fetch it once, then run the tests on it
#   bash scripts/lavapipe-next.sh --fetch          # fetch it (again) and stop
#   bash scripts/lavapipe-next.sh -- CMD [ARG]...  # run CMD on it, e.g.
#                                                  #   target/release/ch13-gpu info
#   bash scripts/lavapipe-next.sh --validate [-- CMD [ARG]...]
#
# --validate runs the tests (or CMD) under Khronos' validation layer from the same release,
# synchronization checks on, its messages on standard output; the tests then fail on any
# message but one: VUID-StandaloneSpirv-None-10684, the explicit layout (ArrayStride) that
# naga 30 puts on every array type, Workgroup, Private and Function ones included, which
# SPIR-V 1.5 and later forbid outside buffers (wgpu issue 7696, not fixed in wgpu 30.0.2).
#
# Nothing is installed. mesa-vulkan-drivers, libvulkan1 and all they depend on, the C and
# C++ runtime included, are unpacked (dpkg -x) into .lavapipe-next/ (git-ignored;
# LLM_BOOK_LAVAPIPE_NEXT names another folder), downloaded from the Debian mirror this
# machine uses with apt's lists in a temporary folder. A program runs through that
# runtime's own loader (ld-linux-x86-64.so.2 --library-path), with VK_DRIVER_FILES naming
# that lavapipe: the system's driver, Vulkan loader and libc are not touched. The tests are
# chapter 13's test programs, built here and run one by one on it, all but `exercises` (its
# stubs fail as shipped); `cli`'s runs of the ch13-gpu binary go through the same loader
# (LLM_BOOK_TEST_RUNNER), with --validate too but without the layer.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${LLM_BOOK_LAVAPIPE_NEXT:-$root/.lavapipe-next}"
suite="sid" # Debian unstable
source "$root/scripts/vulkan-lib.sh" # debian_apt

mode=test
cmd=()
validate=no
if [[ "${1:-}" == --validate ]]; then
    validate=yes
    shift
fi
case "${1:-}" in
"") ;;
--fetch) mode=fetch ;;
--)
    shift
    mode=run
    cmd=("$@")
    ((${#cmd[@]})) || { echo "error: nothing to run after --" >&2; exit 2; }
    ;;
-h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
*)
    echo "error: unknown argument $1 (none, --fetch, --validate, or -- CMD [ARG]...)" >&2
    exit 2
    ;;
esac

lib="$dest/root/usr/lib/x86_64-linux-gnu"

fetch() {
    if [[ -e "$dest" && ! -e "$dest/.llm-book" ]] && [[ -n "$(ls -A "$dest" 2>/dev/null)" ]]; then
        echo "error: $dest is not empty and was not made by this script; set LLM_BOOK_LAVAPIPE_NEXT elsewhere" >&2
        exit 1
    fi
    local tmp pkgs
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    if ! debian_apt "$tmp" "$suite"; then
        echo "error: no amd64 Debian mirror in /etc/apt (or no Debian keyring) to fetch Debian's lavapipe from" >&2
        exit 1
    fi
    echo "==> Debian $suite's package lists (into a temporary folder)"
    apt-get "${APT_OPTS[@]}" -qq update >/dev/null
    # every package the driver and the loader need, to the C runtime, by name (virtual
    # ones, in <>, are provided by one of the others)
    pkgs="$(apt-cache "${APT_OPTS[@]}" depends --recurse --no-recommends --no-suggests \
        --no-conflicts --no-breaks --no-replaces --no-enhances mesa-vulkan-drivers libvulkan1 \
        vulkan-validationlayers |
        grep -v '^[ <]' | sort -u)"
    echo "==> downloading $(echo "$pkgs" | wc -l) packages"
    mkdir -p "$tmp/debs"
    # shellcheck disable=SC2086 # one package name a word
    (cd "$tmp/debs" && apt-get "${APT_OPTS[@]}" -qq download $pkgs >/dev/null)
    mkdir -p "$dest"
    touch "$dest/.llm-book"
    rm -rf "$dest/root" # made by this script (inside the folder marked .llm-book)
    mkdir -p "$dest/root"
    for f in "$tmp"/debs/*.deb; do dpkg -x "$f" "$dest/root"; done
    if [[ ! -f "$lib/libvulkan_lvp.so" || ! -x "$lib/ld-linux-x86-64.so.2" ]]; then
        echo "error: Debian $suite's packages hold no libvulkan_lvp.so or no loader in $lib" >&2
        exit 1
    fi
    printf '{"file_format_version": "1.0.0", "ICD": {"library_path": "%s", "api_version": "1.4.0"}}\n' \
        "$lib/libvulkan_lvp.so" >"$dest/lvp_icd.json"
    # the validation layer's manifest, its library named by its whole path
    mkdir -p "$dest/layers"
    sed "s#\"library_path\": *\"[^\"]*\"#\"library_path\": \"$lib/libVkLayer_khronos_validation.so\"#" \
        "$dest/root/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json" \
        >"$dest/layers/VkLayer_khronos_validation.json"
    echo "    $(ls "$tmp"/debs | grep '^mesa-vulkan-drivers_') in $dest"
    rm -rf "$tmp"
    trap - EXIT
}

# CMD run on that lavapipe, through its own loader and libraries (and with --validate,
# under the validation layer, every message written out).
on_next() {
    local layer=()
    if [[ $validate == yes ]]; then
        layer=(VK_LAYER_PATH="$dest/layers" VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation
            VK_KHRONOS_VALIDATION_VALIDATE_SYNC=true VK_KHRONOS_VALIDATION_REPORT_FLAGS=error,warn
            VK_KHRONOS_VALIDATION_DEBUG_ACTION=VK_DBG_LAYER_ACTION_LOG_MSG
            VK_KHRONOS_VALIDATION_LOG_FILENAME=stdout VK_KHRONOS_VALIDATION_ENABLE_MESSAGE_LIMIT=false)
    fi
    env "${layer[@]}" VK_DRIVER_FILES="$dest/lvp_icd.json" \
        "$lib/ld-linux-x86-64.so.2" --library-path "$lib" "$@"
}

if [[ $mode == fetch || ! -f "$dest/lvp_icd.json" || ! -f "$dest/layers/VkLayer_khronos_validation.json" ]]; then
    fetch
fi
[[ $mode == fetch ]] && exit 0
if [[ $mode == run ]]; then
    on_next "${cmd[@]}"
    exit
fi

cd "$root"
echo "==> building chapter 13's tests"
cargo build --release -q -p ch13-gpu
on_next target/release/ch13-gpu info | head -2
mapfile -t tests < <(cargo test --release -q -p ch13-gpu --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        name = m["target"]["name"]
        if name != "exercises":
            print(name, m["executable"])
')
failed=()
unexpected=()
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
for t in "${tests[@]}"; do
    name="${t%% *}"
    echo "==> $name"
    # as cargo runs them: from the crate's folder
    rc=0
    # (`cli` starts the ch13-gpu binary: through the same loader, LLM_BOOK_TEST_RUNNER,
    # without the validation layer, whose messages would land in the output it checks)
    (cd chapters/ch13-gpu &&
        LLM_BOOK_TEST_RUNNER="env -u VK_INSTANCE_LAYERS $lib/ld-linux-x86-64.so.2 --library-path $lib" \
            on_next "${t#* }" -q >"$logs/$name.log" 2>&1) || rc=$?
    ((rc == 0)) || failed+=("$name")
    if [[ $validate == no ]]; then
        grep -v XDG_RUNTIME_DIR "$logs/$name.log" || true
        continue
    fi
    grep -E '^test result|panicked' "$logs/$name.log" || true
    # each message's VUID (or SYNC- name), counted
    grep -o '^Validation [A-Za-z ]*: \[ [A-Za-z0-9_-]*' "$logs/$name.log" | sed 's/.*\[ //' |
        sort | uniq -c | sed 's/^/    validation: /' >"$logs/$name.ids" || true
    cat "$logs/$name.ids"
    if grep -v 'VUID-StandaloneSpirv-None-10684' "$logs/$name.ids" | grep -q .; then
        unexpected+=("$name")
        cp "$logs/$name.log" "$dest/validation-$name.log"
        echo "    (the messages: $dest/validation-$name.log)"
    fi
done
if ((${#failed[@]})); then
    echo "error: on Debian $suite's lavapipe these failed: ${failed[*]}" >&2
    exit 1
fi
if ((${#unexpected[@]})); then
    echo "error: the validation layer reported more than naga's known layout message in: ${unexpected[*]}" >&2
    exit 1
fi
echo "chapter 13's tests pass on Debian $suite's lavapipe (${#tests[@]} programs; exercises not run)"
if [[ $validate == yes ]]; then
    echo "under Khronos' validation layer, synchronization checks on: no message but naga's known one"
fi

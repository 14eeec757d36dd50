# What scripts/llamacpp.sh and scripts/vulkan-deps.sh share (sourced by both, not run): the
# version of a folder of Vulkan headers, and whether llama.cpp's Vulkan backend takes it.

# header_version DIR: the headers' version in DIR (DIR/vulkan/vulkan_core.h beside
# vulkan.hpp) as 1.MINOR.PATCH, or nothing.
header_version() {
    local core="$1/vulkan/vulkan_core.h" minor patch
    [[ -f "$core" && -f "$1/vulkan/vulkan.hpp" ]] || return 0
    minor="$(sed -n 's/^#define VK_HEADER_VERSION_COMPLETE VK_MAKE_API_VERSION(0, *1, *\([0-9]*\),.*/\1/p' "$core")"
    patch="$(sed -n 's/^#define VK_HEADER_VERSION \([0-9]*\).*/\1/p' "$core")"
    [[ -n "$minor" && -n "$patch" ]] && echo "1.$minor.$patch"
}

# new_enough VERSION: whether VERSION (header_version's) is 1.3.261 or newer, what the
# backend needs.
new_enough() {
    local v="$1" minor patch
    [[ -n "$v" ]] || return 1
    minor="$(echo "$v" | cut -d. -f2)"
    patch="$(echo "$v" | cut -d. -f3)"
    ((minor > 3 || (minor == 3 && patch >= 261)))
}

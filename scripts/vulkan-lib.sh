# What scripts/llamacpp.sh, scripts/vulkan-deps.sh and scripts/lavapipe-next.sh share
# (sourced, not run): the version of a folder of Vulkan headers, whether llama.cpp's Vulkan
# backend takes it, and apt-get's options for another Debian release's packages.

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

# debian_apt TMP SUITE: sets APT_OPTS, apt-get's options for Debian SUITE's amd64 packages
# with its lists and downloads kept in TMP (made here), from the Debian mirror this machine
# already uses (deb822 or one-line sources), so the system's apt state is not touched.
# Returns 1, with nothing printed, where the machine has no Debian mirror, no Debian
# keyring, or is not amd64: the caller says what to do instead.
debian_apt() {
    local tmp="$1" suite="$2" mirror="" keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
        mirror="$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources)"
    fi
    if [[ -z "$mirror" && -f /etc/apt/sources.list ]]; then
        mirror="$(awk '$1 == "deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) { print $i; exit } }' /etc/apt/sources.list)"
    fi
    [[ -n "$mirror" && -f "$keyring" && "$(dpkg --print-architecture 2>/dev/null)" == amd64 ]] || return 1
    mkdir -p "$tmp/parts" "$tmp/lists/partial" "$tmp/cache/archives/partial"
    printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\n' \
        "$mirror" "$suite" "$keyring" >"$tmp/parts/$suite.sources"
    APT_OPTS=(-oDir::Etc::SourceList=/dev/null "-oDir::Etc::SourceParts=$tmp/parts"
        "-oDir::State::Lists=$tmp/lists" "-oDir::Cache=$tmp/cache" -oDir::State::status=/dev/null
        -oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oAPT::Sandbox::User=root)
}

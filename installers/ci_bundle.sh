#!/usr/bin/env bash
# CI: build the Linux bundle from a portable native build and smoke-test it (called by .ci/run).
#
# Usage: installers/ci_bundle.sh
# Environment: CAPTIONEER_CI_CACHE: where the native CMake build is kept between runs, so a rerun only
# relinks (default ~/.cache/captioneer-ci). The native build is the AVX2-floor one (one CPU backend,
# ~12 min on 2 cores the first time); the release build with every CPU variant is
# installers/build_llama_portable.sh without --avx2-floor (~35 min).
set -euo pipefail

repo_root=$(cd "$(dirname "$0")/.." && pwd)
cache=${CAPTIONEER_CI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/captioneer-ci}
work=$(mktemp -d)
trap 'rm -rf -- "$work"' EXIT
mkdir -p "$cache"

python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --upgrade pip
LLAMA_BUILD_DIR=$cache/llama-avx2 PYTHON=$work/venv/bin/python \
    "$repo_root/installers/build_llama_portable.sh" "$work/wheels" --avx2-floor
"$work/venv/bin/pip" install -q "$work"/wheels/llama_cpp_python-*.whl
"$work/venv/bin/pip" install -q "$repo_root[dev]"  # keeps the portable llama-cpp-python (same version)
PYTHON=$work/venv/bin/python "$repo_root/installers/build_linux.sh" "$work/out"

# Installed as a user would, then run from outside the checkout.
tarball=$(ls "$work"/out/captioneer-*-linux-*.tar.gz)
tar -xzf "$tarball" -C "$work"
install_home=$work/home
mkdir -p "$install_home"
HOME=$install_home XDG_DATA_HOME=$install_home/.local/share bash "$work/$(basename "$tarball" .tar.gz)/install.sh"
app_dir=$install_home/.local/lib/captioneer
"$repo_root/installers/smoke_test_bundle.sh" "$app_dir"

# Nothing of the checkout is opened (root ignores file modes, so this is checked by tracing, not chmod).
if command -v strace >/dev/null; then
    (cd "$work" && CAPTIONEER_HOME=$work/trace-home strace -f -e trace=open,openat,stat,execve -o "$work/trace.log" \
        "$app_dir/captioneer" transcribe "$app_dir/_internal/resources/samples/demo_sample_1.wav" >/dev/null)
    if grep -F "\"$repo_root/" "$work/trace.log" | head -n 5 | grep .; then
        echo "FAIL: the installed app opened files in the checkout ($repo_root)" >&2
        exit 1
    fi
    echo "ok: the installed app opened nothing in the checkout"
fi

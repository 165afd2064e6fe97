#!/usr/bin/env bash
# Prepares the GPU check (tests/bench/gpu_check.sh) for the lent device machine, which reaches no network:
# everything it needs beyond its image (Python 3.12 with torch, transformers, numpy, tokenizers, safetensors,
# onnxruntime, scikit-build-core, CMake, ninja, nvcc) is put into .gpu/ here, which the device tool carries.
#
#   bash tests/bench/gpu_prepare.sh        # then: device run, carry [".gpu"], command "bash tests/bench/gpu_check.sh"
#
# * llama-cpp-python's source at the pinned version, without its git history, docs, test models and web UI
#   (73 MB -> ~10 MB: the device tool carries at most 64 MiB with the working tree), built there with CUDA;
# * cp312 manylinux wheels of the runtime dependencies the image lacks.
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=.gpu
PY="${PYTHON:-.venv/bin/python}"
VERSION="$(sed -n 's/.*"llama-cpp-python==\([0-9.]*\)".*/\1/p' pyproject.toml)"
rm -rf "$DEST" && mkdir -p "$DEST"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$PY" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$work"
tar xzf "$work/llama_cpp_python-$VERSION.tar.gz" -C "$work"
src="$work/llama_cpp_python-$VERSION"
rm -rf "$src/.git" "$src/vendor/llama.cpp/"{docs,models,benches,media,tools/ui}
tar czf "$DEST/llama_cpp_python-$VERSION-slim.tar.gz" -C "$work" "llama_cpp_python-$VERSION"

# Runtime dependencies of Captioneer and llama-cpp-python that the device image does not hold.
for requirement in soxr gguf platformdirs soundfile cffi pycparser diskcache; do
    spec="$(grep -o "\"$requirement[^\"]*\"" pyproject.toml | head -1 | tr -d '"' || true)"
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform any -d "$DEST" "${spec:-$requirement}"
done
du -sh "$DEST" && ls "$DEST"

#!/usr/bin/env bash
# Build the pinned llama-cpp-python as a portable wheel for distribution.
#
# The PyPI sdist compiles ggml with -march=native, so a wheel built on one machine can crash with
# SIGILL on an older CPU. This builds every x86/ARM CPU variant of the ggml CPU backend as a
# loadable module next to libggml (GGML_BACKEND_DL + GGML_CPU_ALL_VARIANTS); ggml scores them at
# run time and loads the best one the CPU supports (inference/native/lib.py asks it to).
#
# Usage: installers/build_llama_portable.sh OUT_DIR [--avx2-floor]
#   OUT_DIR       where the wheel is written
#   --avx2-floor  one CPU backend built for AVX2/FMA/F16C instead of all variants (faster build)
# Environment: PYTHON (default python3), CMAKE_BUILD_PARALLEL_LEVEL, LLAMA_BUILD_DIR (a
# persistent CMake build folder, so an interrupted build resumes; default: a temporary one),
# EXTRA_CMAKE_ARGS (e.g. -DGGML_CUDA=ON or -DGGML_VULKAN=ON for a GPU backend module).
set -euo pipefail

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -ge 1 && $1 != -* ]] || usage
out_dir=$1
variants=all
[[ ${2:-} == --avx2-floor ]] && variants=avx2
[[ ${2:-} == "" || ${2:-} == --avx2-floor ]] || usage

repo_root=$(cd "$(dirname "$0")/.." && pwd)
pin=$(sed -n 's/^ *"llama-cpp-python==\([0-9.]*\)".*/\1/p' "$repo_root/pyproject.toml")
[[ -n $pin ]] || { echo "error: no llama-cpp-python==X pin found in $repo_root/pyproject.toml" >&2; exit 1; }
python=${PYTHON:-python3}

# Backend modules are installed with the runtime binaries; put them next to libggml in the package.
cmake_args=(-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DCMAKE_INSTALL_BINDIR=llama_cpp/lib)
if [[ $variants == all ]]; then
    cmake_args+=(-DGGML_CPU_ALL_VARIANTS=ON)
else
    cmake_args+=(-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON)
fi
export CMAKE_ARGS="${cmake_args[*]} ${EXTRA_CMAKE_ARGS:-}"

mkdir -p "$out_dir"
# --no-cache-dir: pip would otherwise reuse a wheel it built earlier with other flags.
pip_args=(wheel --no-deps --no-cache-dir --no-binary llama-cpp-python --wheel-dir "$out_dir")
target="llama-cpp-python==$pin"
if [[ -n ${LLAMA_BUILD_DIR:-} ]]; then
    # A fixed source folder: CMake refuses a build folder configured from another source path.
    source_dir=$LLAMA_BUILD_DIR/source/llama_cpp_python-$pin
    if [[ ! -f $source_dir/pyproject.toml ]]; then
        mkdir -p "$LLAMA_BUILD_DIR/source"
        "$python" -m pip download --no-deps --no-binary :all: --dest "$LLAMA_BUILD_DIR/source" "$target"
        tar -xzf "$LLAMA_BUILD_DIR/source/llama_cpp_python-$pin.tar.gz" -C "$LLAMA_BUILD_DIR/source"
    fi
    target=$source_dir
    pip_args+=(--config-settings "build-dir=$LLAMA_BUILD_DIR/cmake")
fi
echo "building llama-cpp-python==$pin with CMAKE_ARGS=$CMAKE_ARGS" >&2
"$python" -m pip "${pip_args[@]}" "$target"

wheel=$(ls -t "$out_dir"/llama_cpp_python-"$pin"-*.whl | head -n 1)
modules=$("$python" -m zipfile -l "$wheel" | grep -Eo 'llama_cpp/lib/[^ ]*ggml-cpu[^ ]*' | sort -u)
expected='ggml-cpu'
[[ $variants == all ]] && expected='ggml-cpu-'
grep -q -- "$expected" <<<"$modules" || { echo "error: no $expected* CPU backend in $wheel" >&2; exit 1; }
echo "built $wheel with CPU backends:" >&2
echo "$modules" >&2

#!/usr/bin/env bash
# The GPU check of issue 20 (item 5), prepared to run in one go on the lent CUDA machine (the `device` tool),
# which reaches no network. First, here: `bash tests/bench/gpu_prepare.sh` (fills .gpu/). Then one device run
# with carry [".gpu"] and the command `bash tests/bench/gpu_check.sh` (timeout 600 s). It
#
# 1. installs the carried wheels and builds llama-cpp-python (the pinned version) with CUDA for this GPU only,
#    into /tmp/site, using the image's Python (torch, transformers, numpy, tokenizers, nvcc are there);
# 2. checks both engines on the GPU against the CPU and the reference fixtures (tests/bench/gpu_parity.py);
# 3. runs the full-size benchmarks with Captioneer on the GPU (Parakeet 10 s / 60 s; the R2T2 1.7B tower,
#    prefill and decode), torch beside it for scale, if time is left (GPU_CHECK_BENCH=0 skips them).
#
# Logs go to $OUT (the device tool brings them back) or ./gpu-check; summary.txt says what happened.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/gpu-check}"
mkdir -p "$OUT"
SITE=/tmp/site
PY="${PYTHON:-python3}"
JOBS="${GPU_CHECK_JOBS:-$(nproc)}"
log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$OUT/summary.txt"; }

nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || log "nvidia-smi failed: is this a CUDA machine?"
[ -d .gpu ] || { log "no .gpu/ folder: run tests/bench/gpu_prepare.sh first and carry .gpu"; exit 1; }
log "installing the carried wheels"
$PY -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .gpu/*.whl >"$OUT/install.log" 2>&1 \
    || { log "installing the wheels failed"; tail -20 "$OUT/install.log" | tee -a "$OUT/summary.txt"; exit 1; }
export PYTHONPATH="$SITE:$PWD"
log "building llama-cpp-python with CUDA ($JOBS jobs)"
CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=native -DLLAMA_BUILD_TESTS=OFF" \
    CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" \
    $PY -m pip install --no-index --no-deps --no-build-isolation --target "$SITE" .gpu/llama_cpp_python-*-slim.tar.gz \
    >"$OUT/build.log" 2>&1 \
    || { log "the CUDA build failed (tail of build.log):"; tail -40 "$OUT/build.log" | tee -a "$OUT/summary.txt"; exit 1; }
$PY -c "from inference.native import describe; print(describe())" >"$OUT/describe.txt" 2>&1
grep -q "CUDA" "$OUT/describe.txt" && log "ggml sees a CUDA device" || log "ggml sees no CUDA device (describe.txt)"

log "parity: both engines on cuda against the CPU and the reference fixtures"
PYTHONUNBUFFERED=1 timeout 300 $PY tests/bench/gpu_parity.py --backend cuda >"$OUT/parity.txt" 2>&1
log "parity exit status $? ($(tail -1 "$OUT/parity.txt"))"

if [ "${GPU_CHECK_BENCH:-1}" = 1 ]; then
    log "bench_parakeet with Captioneer on cuda (f32, f16, q8_0; torch on the CPU)"
    PYTHONUNBUFFERED=1 timeout 420 $PY tests/bench/bench_parakeet.py --backend cuda --threads 8 --rounds 3 \
        --clips 10,60 --types f32,f16,q8_0 --reference-python "$PY" >"$OUT/bench_parakeet.txt" 2>&1
    log "bench_parakeet exit status $?"
    log "bench_r2t2 with Captioneer on cuda (1.7B shape)"
    PYTHONUNBUFFERED=1 timeout 420 $PY tests/bench/bench_r2t2.py --backend cuda --threads 8 --reps 3 \
        --types q8_0,q4_k --reference-python "$PY" >"$OUT/bench_r2t2.txt" 2>&1
    log "bench_r2t2 exit status $?"
fi
log "done"

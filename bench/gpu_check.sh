#!/usr/bin/env bash
# GPU checks of issue 6 (jit on "cuda"), for a machine lent a GPU: the tests marked `gpu`,
# the CUDA code-generation tests, and the GPU benchmarks against CuPy written by hand.
# Budget: under 8 minutes in all (each step has its own timeout). Logs and the benchmark
# JSON go to $OUT when it is set (the device tool brings that folder back), else /tmp.
#   usage: bash bench/gpu_check.sh            (from anywhere; PYTHON=... to pick python)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DEST=${OUT:-/tmp}
export PYTHONUNBUFFERED=1 HYPOTHESIS_PROFILE=ci PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
start=$(date +%s)
status=0

echo "== environment"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
$PY - <<'PY' || { echo "CuPy or the GPU is not usable: stopping"; exit 2; }
import numpy, cupy
print("numpy", numpy.__version__, "cupy", cupy.__version__,
      "devices", cupy.cuda.runtime.getDeviceCount(),
      "cuda runtime", cupy.cuda.runtime.runtimeGetVersion())
import functrans as ft
print("functrans devices:", [str(d) for d in ft.devices()])
PY

echo "== tests marked gpu (tests/test_gpu.py)"
per_test=""
$PY -c "import pytest_timeout" 2>/dev/null && per_test="--timeout=120"
timeout 270 $PY -m pytest -q -m gpu -p no:cacheprovider $per_test tests/test_gpu.py \
    2>&1 | tee "$DEST/gpu_tests.log" || status=1

echo "== CUDA code generation (nvcc) and the emulated driver"
timeout 60 $PY -m pytest -q -p no:cacheprovider tests/test_cuda_codegen.py \
    2>&1 | tail -5 | tee "$DEST/cuda_codegen.log" || status=1

echo "== GPU benchmarks against CuPy by hand"
left=$(( 460 - ($(date +%s) - start) ))
if [ "$left" -gt 30 ]; then
    timeout "$left" $PY -m bench --only jit_chain30_gpu,jit_chain30_fwd_bwd_gpu,jit_mlp_step_gpu \
        --rounds 15 --json "$DEST/gpu_bench.json" 2>&1 | tee "$DEST/gpu_bench.log" || status=1
else
    echo "skipped: only ${left}s left of the 8-minute budget"; status=1
fi
echo "== done in $(( $(date +%s) - start ))s, status $status"
exit $status

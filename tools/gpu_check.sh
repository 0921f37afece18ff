#!/usr/bin/env bash
# The GPU session's one prepared call (a lent machine: CUDA tests, then the GPU benchmarks).
#
#   bash tools/gpu_check.sh            # results under $OUT (the device tool's) or ./gpu_out
#
# Each step has its own time limit and writes its log as it goes, so a step that runs long
# still leaves the earlier steps' results. Set TESTS_S / BENCH_S / COMPILE_S to change them.
set -uo pipefail
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 SYMGRAD_CACHE_DIR=/tmp/sgcache XLA_PYTHON_CLIENT_PREALLOCATE=false
{
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.memory --format=csv
    python3 -c "import torch, cupy, jax, sympy, numpy, jinja2; print('torch', torch.__version__, 'cupy', cupy.__version__, 'jax', jax.__version__, jax.devices(), 'sympy', sympy.__version__, 'numpy', numpy.__version__)"
} 2>&1 | tee "$OUT/env.txt"

# 1. tests on the device: tests/cuda (kernels, runtime tensors, scan, linalg, NVTX, to_torch /
#    to_jax on the GPU) and the host-checked CUDA target suite
timeout "${TESTS_S:-240}" python3 -m pytest -q -p no:cacheprovider -n 8 -rs \
    tests/cuda tests/test_target_cuda.py 2>&1 | tee "$OUT/tests.txt"

# 2. bandwidth of the fused kernels (SG_UNROLL=4 against 1, same run) and the runtime on CUDA
#    tensors against torch eager
timeout "${BENCH_S:-200}" python3 -m benchmarks.gpu --sizes 1e6,1e7,1e8 --reps 15 --no-compile \
    --unroll-baseline --out "$OUT/gpu.txt" 2>&1 | tee "$OUT/bench.log"

# 3. torch.compile beside them (its compiles take the time: a subset)
timeout "${COMPILE_S:-150}" python3 -m benchmarks.gpu --sizes 1e6,1e8 --reps 15 \
    --only gelu_tanh,softplus_b2,rational6 --out "$OUT/gpu_compile.txt" 2>&1 | tee "$OUT/bench_compile.log"
echo "done $(date -u)"

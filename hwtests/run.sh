#!/usr/bin/env bash
# The GPU checks, in one script of a few minutes: the WGSL corpus (verdicts, sites,
# bit-identical outputs, device analysis == NumPy reference) on the real GPU's Vulkan
# adapter, then the overhead benchmark; on an NVIDIA GPU (nvidia-smi answers) the same
# for the CUDA corpus through cupy, and bench/bench_cuda.py (compute-sanitizer's
# racecheck timed beside it when present). Logs go to $OUT (default hwtests/out).
#   GPURACE_ONLY=cuda bash hwtests/run.sh   # only the CUDA part
#
#   bash hwtests/run.sh            # picks the GPU adapter; GPURACE_DEVICE=name to choose
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-hwtests/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q -e '.[test]' 2>&1 | grep -v WARNING
python3 -m gpurace devices 2>&1 | tee "$OUT/devices.txt"
status=0
if [ "${GPURACE_ONLY:-}" != cuda ]; then
  python3 -m pytest -q hwtests --ignore=hwtests/nvidia --ignore=hwtests/test_opencl_gpu.py \
    tests/test_corpus_wgsl.py tests/test_analysis_equivalence.py tests/test_determinism.py \
    2>&1 | tee "$OUT/pytest.log" || status=1
  # OpenCL on the GPU's OpenCL driver, when the machine has one (said either way)
  if python3 -c "from gpurace.backends import opencl_backend as o; import sys; sys.exit(not any(d.is_gpu for d in o.list_devices()))"; then
    python3 -m pytest -q hwtests/test_opencl_gpu.py 2>&1 | tee "$OUT/pytest_opencl.log" || status=1
  else
    echo "no OpenCL GPU device: the OpenCL GPU checks did not run" | tee "$OUT/pytest_opencl.log"
  fi
  python3 bench/bench_wgsl.py --repeat 3 2>&1 | tee "$OUT/bench_wgsl.md" || status=1
  python3 bench/bench_repeat.py 2>&1 | tee "$OUT/bench_repeat.md" || status=1
fi
if nvidia-smi >/dev/null 2>&1; then
  python3 -c "import cupy" 2>/dev/null || python3 -m pip install -q -e '.[cuda]' 2>&1 | grep -v WARNING
  python3 -m pytest -q hwtests/nvidia tests/test_ptx_rewriter.py 2>&1 | tee "$OUT/pytest_cuda.log" || status=1
  python3 bench/bench_cuda.py --repeat 3 2>&1 | tee "$OUT/bench_cuda.md" || status=1
fi
exit $status

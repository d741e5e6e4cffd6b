#!/usr/bin/env bash
# The GPU checks, in one script of a few minutes, each section time-boxed:
#  - CUDA (when nvidia-smi answers): the CUDA corpus and the labelled CUDA memcheck
#    cases (out-of-bounds, uninitialised reads) through cupy (verdicts, sites,
#    bit-identical outputs, device analysis == NumPy reference, the sim device's
#    outputs == the GPU's: test_sim_matches_gpu.py), hwtests/nvidia;
#  - WGSL: the corpus, memcheck's labelled cases (docs/memcheck.md) and the
#    determinism checks on the GPU's Vulkan adapter;
#  - OpenCL: the OpenCL corpus on the GPU's OpenCL driver, when the machine has one;
#  - then the benchmarks: bench_cuda.py (compute-sanitizer's racecheck beside it when
#    present; each kernel's log-traffic floor, measured on sim first by
#    bench/log_traffic.py, beside its kernel-time ratio), bench_wgsl.py, bench_repeat.py.
# The test sections run side by side; the benchmarks after them, alone.
# Logs go to $OUT (default hwtests/out), one file per section.
#
#   bash hwtests/run.sh                      # picks the GPU adapter; GPURACE_DEVICE=name
#   GPURACE_ONLY=cuda,wgsl bash hwtests/run.sh   # some parts of: cuda, wgsl, opencl,
#                                                # bench-cuda, bench-wgsl
#   GPURACE_NO_INSTALL=1 ...                 # gpurace and its dependencies are installed
#   GPURACE_SECTION_TIMEOUT=240 GPURACE_BENCH_SCALE=0.0625 ...   # the defaults
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-hwtests/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
LIMIT=${GPURACE_SECTION_TIMEOUT:-240}
SCALE=${GPURACE_BENCH_SCALE:-0.0625}
ONLY=${GPURACE_ONLY:-}
if [ -z "${GPURACE_NO_INSTALL:-}" ]; then
  python3 -m pip install -q -e '.[test]' 2>&1 | grep -v WARNING
  if nvidia-smi >/dev/null 2>&1 && ! python3 -c "import cupy" 2>/dev/null; then
    python3 -m pip install -q -e '.[cuda]' 2>&1 | grep -v WARNING
  fi
fi
PYTEST=(python3 -m pytest -v -rfE --tb=short -p no:cacheprovider -W ignore::Warning)
if python3 -c "import xdist" 2>/dev/null; then PYTEST+=(-n "${GPURACE_WORKERS:-6}"); fi
if python3 -c "import pytest_timeout" 2>/dev/null; then PYTEST+=(--timeout 90); fi

# section NAME COMMAND...: run with the time limit, log to $OUT/NAME.log, say how it ended
section() {
  local name=$1
  shift
  timeout -k 10 "$LIMIT" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  [ $rc = 124 ] && echo "TIMED OUT after ${LIMIT}s" >>"$OUT/$name.log"
  echo "== $name: exit $rc ($(tail -n 1 "$OUT/$name.log"))"
  return $rc
}
wanted() { [ -z "$ONLY" ] || [[ ",$ONLY," == *",$1,"* ]]; }

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  python3 -m gpurace devices 2>&1
} | tee "$OUT/devices.txt"

status=0
pids=()
if wanted cuda && nvidia-smi >/dev/null 2>&1; then
  section cuda "${PYTEST[@]}" hwtests/nvidia &
  pids+=($!)
fi
if wanted wgsl; then
  section wgsl "${PYTEST[@]}" hwtests/test_gpu_device.py hwtests/test_determinism_gpu.py \
    hwtests/test_hangs_gpu.py \
    tests/test_corpus_wgsl.py tests/test_analysis_equivalence.py tests/test_determinism.py \
    tests/test_memcheck.py tests/test_initcheck.py &
  pids+=($!)
fi
if wanted opencl; then
  if python3 -c "from gpurace.backends import opencl_backend as o; import sys; sys.exit(not any(d.is_gpu for d in o.list_devices()))"; then
    section opencl "${PYTEST[@]}" hwtests/test_opencl_gpu.py &
    pids+=($!)
  else
    echo "no OpenCL GPU device: the OpenCL GPU checks did not run" | tee "$OUT/opencl.log"
  fi
fi
for p in "${pids[@]}"; do wait "$p" || status=1; done

if wanted bench-cuda; then
  if nvidia-smi >/dev/null 2>&1; then
    section bench_cuda python3 bench/bench_cuda.py --scale "$SCALE" --repeat 3 \
      --sanitizer-timeout 20 || status=1
  fi
fi
if wanted bench-wgsl; then
  section bench_wgsl python3 bench/bench_wgsl.py --scale "$SCALE" --repeat 3 || status=1
  section bench_repeat python3 bench/bench_repeat.py --scale "$SCALE" || status=1
fi
exit $status

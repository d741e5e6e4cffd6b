"""Seeded fuzzing in CI: mutated corpus kernels, launch files and .sim files give a
result or one located error, never a traceback, a crash or a hang (tests/fuzzing.py;
the long run is tools/fuzz.py).

Two parts, so that the run stays under a minute on two cores: the front end (reading
the launch, instrumenting the kernel, matching them) in-process through hypothesis,
many examples; and a few whole `gpurace check` runs in subprocesses, where the device
work (and a kernel that faults or hangs) happens.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpurace import api
from gpurace.launch import resolve_entry, validate_against, validate_opencl
from gpurace.model import GpuraceError
from tests.fuzzing import corpus, make_case, run_case

PAIRS = corpus()


def front_end(folder: Path, args: list[str]) -> None:
    """What `gpurace check` does before the device: read, instrument, match."""
    if args[1] == "--sim":
        kernel, launch = None, str(folder / args[2])
    else:
        kernel, launch = str(folder / args[1]), str(folder / args[3])
    kernel, spec = api.read_launch(launch, kernel)
    source = api.read_kernel(kernel)
    language = api.language_of(kernel)
    if language == "cuda":
        return  # instrumenting needs NVRTC's PTX: the subprocess runs cover CUDA files
    if (
        language == "wgsl"
        and spec.language != "wgsl"
        or language == "opencl"
        and spec.language != "opencl"
    ):
        return  # the backend refuses the mix (a located error); nothing more to match
    inst = api.instrument(source, kernel, language, spec.options)
    if language == "wgsl":
        resolve_entry(spec, list(inst.entry_points or {inst.entry: None}))
        validate_against(spec, inst.bindings)
    else:
        name = resolve_entry(spec, list(inst.entry_points))
        params = inst.params[name]
        if spec.path.endswith(".sim"):
            from gpurace.launch.sim import bind_sim_args

            spec = bind_sim_args(spec, params)
        validate_opencl(spec, params, inst.entry_points[name])
        api.opencl_args(spec, params)


def test_the_corpus_is_found():
    languages = {p.kernel.suffix for p in PAIRS}
    assert languages == {".wgsl", ".cl", ".cu", ".ptx"}  # .ptx: tests/corpus/ptx/numba
    assert any(p.launch.suffix == ".sim" for p in PAIRS)
    assert len(PAIRS) > 150


@settings(
    max_examples=200,
    deadline=None,
    derandomize=True,  # the same examples on every run: CI is reproducible
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.randoms(use_true_random=False))
def test_mutated_inputs_give_a_result_or_one_located_error(rnd: random.Random) -> None:
    case = make_case(rnd.choice(PAIRS), rnd)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        case.write(folder)
        try:
            front_end(folder, case.args)
        except GpuraceError as err:
            text = str(err)
            assert "\n" not in text.strip(), (case.what, text)
            assert text.startswith((str(folder), "error: ")), (case.what, text)


# A few whole runs, one per kind of input. Most mutations stop at the front end (the
# test above covers those in milliseconds), so these seeds were picked to reach the
# device: WGSL 7 and OpenCL 5 and 4 (.sim) run their launches, CUDA 1 compiles with
# NVRTC and stops at "cupy is not installed" on a machine without a GPU.
RUNS = [(".wgsl", ".toml", 7), (".cl", ".toml", 5), (".cl", ".sim", 4), (".cu", ".toml", 1)]


@pytest.mark.parametrize(("kernel_ext", "launch_ext", "seed"), RUNS)
def test_whole_runs_of_mutated_inputs(tmp_path, kernel_ext, launch_ext, seed):
    rnd = random.Random(seed)
    pairs = [p for p in PAIRS if p.kernel.suffix == kernel_ext and p.launch.suffix == launch_ext]
    case = make_case(rnd.choice(pairs), rnd)
    outcome, code, out, err = run_case(case, tmp_path, timeout=180)
    assert outcome in ("ok", "error"), (case.what, outcome, code, out[-2000:], err[-2000:])

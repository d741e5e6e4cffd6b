"""The layout of gpurace.determinism: which replayer runs which language, and what
importing the package costs (docs/determinism.md, "Code layout")."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpurace import determinism
from gpurace.determinism import replay_cuda, replay_opencl, replay_wgpu
from gpurace.model import GpuraceError
from gpurace.options import Options


def test_each_language_replays_on_its_device_api():
    assert determinism.repeater("wgsl") is replay_wgpu.repeat_kernel
    assert determinism.repeater("opencl") is replay_opencl.repeat_opencl
    assert determinism.repeater("cuda") is replay_cuda.repeat_cuda


def test_a_substituted_repeater_is_the_one_that_runs(monkeypatch):
    def fake(*args, **kwargs):
        raise AssertionError("unreachable")

    monkeypatch.setattr(determinism, "repeat_opencl", fake)
    assert determinism.repeater("opencl") is fake


def test_the_repeater_is_the_backend_s_replayer(monkeypatch):
    """One path: the backend the options name (else the language's) says which
    replayer runs, as Backend.replayer."""
    from gpurace.backends import opencl_backend

    assert determinism.repeater("opencl", Options(backend="cuda")) is replay_cuda.repeat_cuda

    def fake(*args, **kwargs):
        raise AssertionError("unreachable")

    monkeypatch.setattr(opencl_backend, "replayer", lambda: fake)
    assert determinism.repeater("opencl") is fake
    assert determinism.repeater("opencl", Options(backend="wgpu")) is replay_wgpu.repeat_kernel


def test_another_language_is_a_clear_error():
    with pytest.raises(GpuraceError) as err:
        determinism.repeater("glsl")
    assert str(err.value) == "error: determinism replay runs WGSL, OpenCL and CUDA kernels only"


@pytest.mark.parametrize(
    "module",
    ["results", "statistics", "formatting", "function", "replay", "replay_wgpu",
     "replay_opencl", "replay_cuda", "dispatch"],
)  # fmt: skip
def test_every_module_imports_first_without_a_cycle(module):
    """Each module imports on its own in a fresh interpreter (a cycle fails here for
    the module that enters it first); none loads the PTX rewriter (1.4 s) on import:
    the CUDA replayer reads its launch schema from gpurace.launch.cuda."""
    code = (
        f"import sys, gpurace.determinism.{module}\n"
        "print('gpurace.instrument.ptx.rewriter' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("variable", "kernel", "launch"),
    [
        ("GPURACE_DEVICE", "examples/reduce_racy.wgsl", "examples/reduce_racy.toml"),
        ("GPURACE_OPENCL_DEVICE", "tests/corpus/opencl/async_copy_clean.cl",
         "tests/corpus/opencl/async_copy_clean.toml"),
    ],
)  # fmt: skip
def test_a_replay_opens_the_device_check_would(monkeypatch, variable, kernel, launch):
    """No --device: the backend's $GPURACE_*DEVICE names the device, as for `check`."""
    from gpurace.api import read_kernel
    from gpurace.launch import load_launch

    monkeypatch.setenv(variable, "no-such-device")
    language = "wgsl" if kernel.endswith(".wgsl") else "opencl"
    repeat = determinism.repeater(language)
    spec = load_launch(launch)
    with pytest.raises(GpuraceError) as err:
        repeat(read_kernel(kernel), spec, runs=2, path=kernel)
    assert "device matches 'no-such-device'; available:" in str(err.value)

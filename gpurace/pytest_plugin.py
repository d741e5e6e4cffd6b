"""pytest plugin: race-freedom and determinism as one-line assertions in a test suite.

Loaded automatically once gpurace is installed (``pytest11`` entry point), or with
``-p gpurace.pytest_plugin``. It adds three fixtures::

    def test_reduce_has_no_race(assert_race_free):
        assert_race_free("kernels/reduce.cl")  # launch: kernels/reduce.toml beside it
        assert_race_free("kernels/scan.wgsl", launch="scan_1k.toml", device="llvmpipe")

    def test_solve_is_deterministic(assert_deterministic):
        assert_deterministic(lambda: solve(fixed_inputs), runs=3)

    def test_coarsest_solve(gpurace_repeat):
        result = gpurace_repeat(coarsest_solve, runs=200)
        assert result.identical, result

``assert_race_free`` checks in the test's process (``gpurace.api.assert_race_free``)
and fails with the whole text report: the race sites, the work-items, the scope. The
device is opened on first use and kept for the process, so every check of a suite
shares one device context; under pytest-xdist (``-n auto``) each worker process
opens its own on its first check.

``assert_deterministic`` fails with the whole report (which output differs, how
many elements, the first ones with their values, max abs and ULP difference), so a
failing CI log says what went wrong without rerunning anything. The fixtures only
hand out functions, and ``gpurace.determinism`` is imported only when one is
used (``gpurace.api`` likewise for ``assert_race_free``), so the auto-loaded plugin
adds no import time (not even NumPy) to suites that never use it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

__all__ = ["assert_deterministic", "assert_race_free", "gpurace_repeat"]


@pytest.fixture
def assert_race_free() -> Callable[..., Any]:
    """``assert_race_free(kernel_path, launch=None, device=None, **options)``: fail
    with the text report unless the kernel's check is race-free and complete.

    Returns the Report when it passes; the options are ``gpurace.api.check_file``'s.
    """
    from gpurace.api import assert_race_free as helper

    return helper


@pytest.fixture
def assert_deterministic() -> Callable[..., Any]:
    """``assert_deterministic(fn, runs=20, outputs=None)``: fail unless every run is bit-identical.

    Returns the RepeatResult when it passes.
    """
    from gpurace.determinism import assert_deterministic as helper

    return helper


@pytest.fixture
def gpurace_repeat() -> Callable[..., Any]:
    """``gpurace.repeat``: run ``fn`` N times and return the RepeatResult to inspect."""
    from gpurace.determinism import repeat

    return repeat

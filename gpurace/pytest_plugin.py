"""pytest plugin: determinism as a one-line assertion in a test suite.

Loaded automatically once gpurace is installed (``pytest11`` entry point), or with
``-p gpurace.pytest_plugin``. It adds two fixtures::

    def test_solve_is_deterministic(assert_deterministic):
        assert_deterministic(lambda: solve(fixed_inputs), runs=3)

    def test_coarsest_solve(gpurace_repeat):
        result = gpurace_repeat(coarsest_solve, runs=200)
        assert result.identical, result

``assert_deterministic`` fails with the whole report (which output differs, how
many elements, the first ones with their values, max abs and ULP difference), so a
failing CI log says what went wrong without rerunning anything. The fixtures only
hand out functions, and ``gpurace.determinism`` is imported only when one is
used, so the auto-loaded plugin adds no import time (not even NumPy) to suites
that never use it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

__all__ = ["assert_deterministic", "gpurace_repeat"]


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

"""backends/cl_pool.py: the instrumented OpenCL launches' reused buffers."""

from __future__ import annotations

import gc

import pytest

from gpurace import api
from gpurace.backends import cl_pool, opencl_backend
from gpurace.launch import LaunchSpec
from gpurace.report.json_report import to_json

SAXPY = """
__kernel void saxpy(__global const float *x, __global float *y, float a) {
    size_t i = get_global_id(0);
    y[i] = a * x[i] + y[i];
}
"""
RACY = """
__kernel void racy(__global float *y) {
    y[get_global_id(0) / 2] = (float)get_global_id(0);
}
"""


def _spec(kernel: str, args: list[dict]) -> LaunchSpec:
    launch = {"kernel": kernel, "global_size": [256], "local_size": [64], "arg": args}
    return LaunchSpec.from_dict(launch, path="t.toml")


class _Fake:
    def __init__(self, ptr: int) -> None:
        self.int_ptr = ptr


class _FakeCl:
    class mem_flags:  # noqa: N801 - pyopencl's name
        READ_WRITE = 1

    made: list[tuple[object, int]] = []

    @classmethod
    def Buffer(cls, ctx: object, flags: int, nbytes: int) -> object:  # noqa: N802
        buf = object()
        cls.made.append((buf, nbytes))
        return buf


def test_a_handed_back_buffer_is_taken_again_and_the_pool_keeps_its_cap(monkeypatch):
    cl_pool.clear()
    monkeypatch.setattr(cl_pool, "KEEP_BYTES", 100)
    ctx, other = _Fake(1), _Fake(2)
    a = cl_pool.take(_FakeCl, ctx, 40)
    cl_pool.give(ctx, a, 40)
    assert cl_pool.take(_FakeCl, other, 40) is not a  # another context's
    assert cl_pool.take(_FakeCl, ctx, 48) is not a  # another size
    assert cl_pool.take(_FakeCl, ctx, 40) is a
    assert cl_pool.take(_FakeCl, ctx, 40) is not a  # taken: not idle any more
    b, c, d = (cl_pool.take(_FakeCl, ctx, 40) for _ in range(3))
    for buf in (a, b, c):
        cl_pool.give(ctx, buf, 40)  # 120 bytes idle: the oldest (a) is dropped
    assert {cl_pool.take(_FakeCl, ctx, 40) for _ in range(2)} == {b, c}
    cl_pool.give(ctx, d, 400)  # above the cap: never kept
    assert cl_pool.take(_FakeCl, ctx, 400) is not d
    cl_pool.clear()


@pytest.mark.parametrize("source", [SAXPY, RACY])
def test_checks_on_reused_buffers_report_as_on_fresh_ones(source):
    """The same check three times: the first on fresh buffers (the pool cleared), the
    on the first's buffers (its shadow comes back to the pool with its Prefilter):
    the reports are identical."""
    if source is SAXPY:
        spec = _spec("saxpy", [
            {"type": "float", "count": 256, "fill": "random", "seed": 1},
            {"type": "float", "count": 256, "fill": "random", "seed": 2},
            {"value": 2.0},
        ])  # fmt: skip
    else:
        spec = _spec("racy", [{"type": "float", "count": 256}])
    opencl_backend.get_device()
    cl_pool.clear()
    first = api.check(source, spec, path="t.cl")
    gc.collect()
    idle = sum(len(v) for v in cl_pool._idle.values())
    assert idle >= 3  # two argument or control buffers and the shadow at least
    again = [api.check(source, spec, path="t.cl") for _ in range(2)]
    assert all(to_json(r) == to_json(first) for r in again)
    assert bool(first.races) == (source is RACY)

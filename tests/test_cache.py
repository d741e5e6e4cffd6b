"""gpurace's disk cache (gpurace/cache.py): where it lives, that it can be turned off,
and that a check served from it reports exactly what a check without it does; and
that `gpurace --help` starts no device API."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpurace import api, cache
from gpurace.launch import LaunchSpec
from gpurace.model import GpuraceError
from gpurace.report import format_text, json_report

ROOT = Path(__file__).resolve().parent.parent

# a local tile read one slot to the right without a barrier: one local race
SHIFT = """__kernel void shift_tile(__global const int *in, __global int *out)
{
    __local int tile[32];
    int lid = get_local_id(0);
    tile[lid] = in[get_global_id(0)];
    out[get_global_id(0)] = tile[(lid + 1) % 32];
}
"""
LAUNCH = {
    "kernel": "shift_tile",
    "global_size": [64],
    "local_size": [32],
    "arg": [{"type": "int", "count": 64, "fill": "arange"}, {"type": "int", "count": 64}],
}


def test_the_directory_follows_the_environment(monkeypatch, tmp_path):
    for var in ("GPURACE_CACHE_DIR", "XDG_CACHE_HOME", "GPURACE_NO_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.directory() == tmp_path / "home" / ".cache" / "gpurace"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.directory() == tmp_path / "xdg" / "gpurace"
    monkeypatch.setenv("GPURACE_CACHE_DIR", str(tmp_path / "mine"))
    assert cache.directory() == tmp_path / "mine"
    monkeypatch.setenv("GPURACE_NO_CACHE", "1")
    assert cache.directory() is None
    cache.store(cache.key("t", "x"), b"data")
    assert cache.load(cache.key("t", "x")) is None and not (tmp_path / "mine").exists()
    monkeypatch.setenv("GPURACE_NO_CACHE", "0")
    cache.store(cache.key("t", "x"), b"data")
    assert cache.load(cache.key("t", "x")) == b"data"
    assert cache.load(cache.key("t", "y")) is None
    assert cache.key("t", "ab", "c") != cache.key("t", "a", "bc")


def _reports(path: str) -> tuple[str, str]:
    report = api.check(SHIFT, LaunchSpec.from_dict(LAUNCH), path=path)
    return format_text(report), json_report.dumps(report)


@pytest.fixture
def fresh_programs(monkeypatch):
    """This process's programs forgotten, so that the next check builds them again
    (from the disk cache when it has them)."""
    from gpurace.backends import opencl_backend

    def forget() -> None:
        monkeypatch.setattr(opencl_backend, "_programs", {})
        monkeypatch.setattr(opencl_backend, "_kernels", {})
        monkeypatch.setattr(opencl_backend, "_shadow_programs", {})
        monkeypatch.setattr(opencl_backend, "_built", {})

    return forget


def test_a_check_from_the_cache_reports_byte_for_byte_the_same(
    monkeypatch, tmp_path, fresh_programs
):
    import gpurace.instrument.opencl as rewriter

    monkeypatch.delenv("GPURACE_NO_CACHE", raising=False)
    monkeypatch.setenv("GPURACE_CACHE_DIR", str(tmp_path / "c"))
    kernel = str(tmp_path / "shift.cl")
    fresh_programs()
    first = _reports(kernel)
    assert "race on local memory 'tile[" in first[0]
    written = sorted(
        p.relative_to(tmp_path / "c").parts[0] for p in (tmp_path / "c").rglob("*-*/*")
    )
    # the analysis program; no shadow-search program: the build run says in the
    # shadow's header that a word may conflict (docs/internals.md §5)
    assert written == ["opencl-instrumented", "opencl-program"]

    def no_parse(*_args, **_kw):
        raise AssertionError("the rewriter ran although its result was cached")

    def no_store(*_args, **_kw):
        raise AssertionError("a cached entry was written again")

    monkeypatch.setattr(rewriter, "instrument", no_parse)
    monkeypatch.setattr(cache, "store", no_store)
    fresh_programs()
    assert _reports(kernel) == first

    # a damaged entry is a miss: parsed and built again, the same report
    monkeypatch.undo()
    monkeypatch.setenv("GPURACE_CACHE_DIR", str(tmp_path / "c"))
    for entry in (tmp_path / "c").rglob("*-*/*"):
        entry.write_bytes(b"not a pickle nor a binary")
    fresh_programs()
    assert _reports(kernel) == first


def test_a_kernel_with_includes_is_cached_by_the_included_text(monkeypatch, tmp_path):
    """pyopencl's ReductionKernel #includes pyopencl-complex.h: such a kernel is served
    from the cache while the files it includes are unchanged, parsed again when one
    changes, and never cached when an include cannot be found (or is a macro)."""
    import gpurace.instrument.opencl as rewriter
    from gpurace.languages import opencl

    monkeypatch.delenv("GPURACE_NO_CACHE", raising=False)
    monkeypatch.setenv("GPURACE_CACHE_DIR", str(tmp_path / "c"))
    parses: list[str] = []
    real = rewriter.instrument

    def counted(source, path, options=()):
        parses.append(path)
        return real(source, path, options)

    monkeypatch.setattr(rewriter, "instrument", counted)
    headers = tmp_path / "inc"
    (headers / "sub").mkdir(parents=True)
    (headers / "tile.h").write_text('#include "sub/shift.h"\n')
    (headers / "sub" / "shift.h").write_text("#define SHIFT 1\n")
    source = "#include <tile.h>\n" + SHIFT.replace("(lid + 1)", "(lid + SHIFT)")
    path = str(tmp_path / "k.cl")
    options = ["-I", str(headers)]
    first = opencl.instrument(source, path, options)
    assert opencl.instrument(source, path, options).source == first.source
    assert len(parses) == 1  # the second from the cache
    (headers / "sub" / "shift.h").write_text("#define SHIFT 0\n")  # a nested include
    opencl.instrument(source, path, options)
    opencl.instrument(source, path, options)
    assert len(parses) == 2  # parsed again once, then cached
    (headers / "sub" / "shift.h").write_text("#define SHIFT 1\n")
    opencl.instrument(source, path, ["-I" + str(headers)])  # the joined -I form
    assert len(parses) == 3  # other options: another entry
    opencl.instrument(source, path, ["-I" + str(headers)])
    assert len(parses) == 3
    with pytest.raises(GpuraceError, match="'nowhere.h' file not found"):
        opencl.instrument("#include <nowhere.h>\n" + source, path, options)
    macro = "#define H <tile.h>\n#include H\n" + source
    opencl.instrument(macro, path, options)
    opencl.instrument(macro, path, options)
    assert len(parses) == 6  # not cached: each parsed every time


def test_no_cache_writes_nothing_and_reports_the_same(monkeypatch, tmp_path, fresh_programs):
    monkeypatch.setenv("GPURACE_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("GPURACE_NO_CACHE", "1")
    kernel = str(tmp_path / "shift.cl")
    fresh_programs()
    off = _reports(kernel)
    assert not (tmp_path / "c").exists()
    monkeypatch.delenv("GPURACE_NO_CACHE")
    fresh_programs()
    assert _reports(kernel) == off


def test_help_starts_no_device_api():
    probe = (
        "import sys, runpy\n"
        "sys.argv = ['gpurace', '--help']\n"
        "try:\n"
        "    runpy.run_module('gpurace', run_name='__main__')\n"
        "except SystemExit as e:\n"
        "    assert e.code in (0, None), e.code\n"
        "heavy = ('numpy', 'pyopencl', 'wgpu', 'cupy', 'clang', 'gpurace.api', 'gpurace.report')\n"
        "print('LOADED', sorted(m for m in heavy if m in sys.modules))\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert "Usage: gpurace" in p.stdout
    assert p.stdout.strip().splitlines()[-1] == "LOADED []"


# each invocation writes its right neighbour's word: one race on storage
SHIFT_WGSL = """@group(0) @binding(0) var<storage, read_write> data: array<u32>;

@compute @workgroup_size(32)
fn shift(@builtin(local_invocation_id) lid: vec3<u32>) {
    data[(lid.x + 1u) % 32u] = data[lid.x] + 1u;
}
"""
LAUNCH_WGSL = {
    "entry": "shift",
    "workgroups": [1, 1, 1],
    "binding": [{"binding": 0, "type": "u32", "count": 32}],
}


def test_a_wgsl_check_from_the_cache_reports_byte_for_byte_the_same(monkeypatch, tmp_path):
    """The WGSL rewrite is kept as OpenCL C's is: a second check does not rewrite and
    reports the same bytes; a damaged entry is rewritten, the same report."""
    import gpurace.instrument.wgsl as rewriter

    monkeypatch.delenv("GPURACE_NO_CACHE", raising=False)
    monkeypatch.setenv("GPURACE_CACHE_DIR", str(tmp_path / "c"))
    path = str(tmp_path / "shift.wgsl")

    def reports() -> tuple[str, str]:
        report = api.check(SHIFT_WGSL, LaunchSpec.from_dict(LAUNCH_WGSL, path=path), path=path)
        return format_text(report), json_report.dumps(report)

    first = reports()
    assert "read-write race on storage buffer 'data[0]'" in first[0]
    (entry,) = (tmp_path / "c" / "wgsl-instrumented").iterdir()

    def no_rewrite(*_args, **_kw):
        raise AssertionError("the rewriter ran although its result was cached")

    monkeypatch.setattr(rewriter, "instrument", no_rewrite)
    assert reports() == first
    monkeypatch.undo()
    monkeypatch.setenv("GPURACE_CACHE_DIR", str(tmp_path / "c"))
    entry.write_bytes(b"not a pickle")
    assert reports() == first

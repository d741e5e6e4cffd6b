"""`gpurace run`'s programs from binaries (backends/cl_binaries.py): a mark the first
time a program is built, a binary made by a child after the second, loaded from the
third build on, with the kernel computing what the source-built one does."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

import numpy as np
import pyopencl as cl

from gpurace import cache
from gpurace.backends import cl_binaries, opencl_backend

SOURCE = "__kernel void twice(__global int *a) { a[get_global_id(0)] = a[get_global_id(0)] * K; }"
OPTIONS = ["-DK=3"]


def _run(queue, program) -> np.ndarray:
    data = np.arange(64, dtype=np.int32)
    buf = cl.Buffer(
        queue.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=data
    )
    cl.Kernel(program, "twice")(queue, (64,), None, buf)
    cl.enqueue_copy(queue, data, buf)
    return data


def test_a_program_seen_twice_gets_a_binary_that_later_builds_load(monkeypatch, tmp_path):
    monkeypatch.delenv("GPURACE_NO_CACHE", raising=False)
    monkeypatch.setenv("GPURACE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cl_binaries, "_enabled", [True])
    monkeypatch.setattr(cl_binaries, "_pending", [])
    handed: list[object] = []
    monkeypatch.setattr(cl_binaries.atexit, "register", handed.append)
    children: list[list[str]] = []
    spawner = SimpleNamespace(
        Popen=lambda argv, **kw: children.append(argv), DEVNULL=subprocess.DEVNULL
    )
    monkeypatch.setattr(cl_binaries, "subprocess", spawner)
    queue, _ = opencl_backend.get_device()
    entries = lambda: sorted((tmp_path / "opencl-binary").iterdir())  # noqa: E731

    first = cl_binaries.build(cl, queue.context, SOURCE, "k.cl", OPTIONS)
    (mark,) = entries()
    assert mark.read_bytes() == b"" and handed == []  # a mark only, nothing queued

    cl_binaries.build(cl, queue.context, SOURCE, "k.cl", OPTIONS)
    assert handed == [cl_binaries._hand_over] and len(cl_binaries._pending) == 1
    cl_binaries._hand_over()  # what the process's exit runs: one detached child
    (argv,) = children
    assert argv[1:3] == ["-m", "gpurace.backends.cl_binaries"]
    subprocess.run(argv, check=True, timeout=120)  # the child, waited for here
    (entry,) = entries()
    assert entry == mark and len(entry.read_bytes()) > 0

    third = cl_binaries.build(cl, queue.context, SOURCE, "k.cl", OPTIONS)
    assert first.get_info(cl.program_info.SOURCE) == SOURCE
    assert third.get_info(cl.program_info.SOURCE) == ""  # made from the binary
    assert np.array_equal(_run(queue, third), _run(queue, first))
    assert np.array_equal(_run(queue, third), np.arange(64, dtype=np.int32) * 3)

    # other options are another program: a mark of its own
    cl_binaries.build(cl, queue.context, SOURCE, "k.cl", ["-DK=5"])
    assert len(entries()) == 2


def test_nothing_is_kept_unless_a_run_turned_binaries_on(monkeypatch, tmp_path):
    monkeypatch.delenv("GPURACE_NO_CACHE", raising=False)
    monkeypatch.setenv("GPURACE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cl_binaries, "_enabled", [False])
    queue, _ = opencl_backend.get_device()
    for _ in range(2):
        cl_binaries.build(cl, queue.context, SOURCE, "k.cl", OPTIONS)
    assert not (tmp_path / "opencl-binary").exists()
    assert cache.directory() == tmp_path

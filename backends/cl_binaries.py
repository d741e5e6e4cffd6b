"""Checks' programs loaded from their binaries, for programs that every process
of a `gpurace run` pipeline builds again.

PoCL's own kernel cache does not make a build from source cheap: each
`clBuildProgram` still starts its compiler to preprocess and hash the source, about
25 ms even for a tiny kernel, while a program made from its binary builds in about 4
ms (2026-12-03, docs/performance.md). A program's binary is not free to get: asking
for it makes PoCL compile a generic work-group function, 0.4-2.5 s a program. So:

* the first process that builds a program from source leaves a mark in gpurace's
  disk cache (an empty entry);
* a later process that builds it from source and finds the mark queues it, and at
  its exit starts one detached child (``python -m gpurace.backends.cl_binaries``)
  that builds the queued programs again, asks for their binaries and stores them;
  the run itself does not wait for it;
* every process after that loads the binary.

A single check of new kernel text (an edit-check loop) never pays for a binary, and
a CI machine whose cache starts empty never makes one.

Only `gpurace run` turns this on (`enable`): its programs run unchanged process after
process, and its target is the warm cost of such a run (issue 12). The entry is keyed
by the device, the driver, the build options and the source with the text of every
file it #includes; a source whose includes cannot be found here gets none.
"""

from __future__ import annotations

import atexit
import os
import pickle
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Sequence

_enabled = [False]
#: (platform name, device name, source, options, entry name) of the programs whose
#: binaries this process's exit hands to a child (the module doc)
_pending: list[tuple[str, str, str, list[str], str]] = []


def enable(on: bool = True) -> None:
    """Keep and load binaries of the programs checks build from now on (or not)."""
    _enabled[0] = on


def build(cl, ctx, source: str, path: str, options: Sequence[str]) -> object:
    """`source` built for `ctx` with `options`: from its cached binary when there is
    one, else from source (storing the binary the second time, see the module doc).
    A build error is pyopencl's, as from a source build."""
    name = _entry(ctx, source, path, options)
    if name is None:
        return cl.Program(ctx, source).build(options=list(options))
    from gpurace import cache

    binary = cache.load(name)
    program = from_binary(cl, ctx, binary, source, options) if binary else None
    if program is not None:
        return program
    program = cl.Program(ctx, source).build(options=list(options))
    if binary is None:  # the first process: a mark, no binary
        cache.store(name, b"")
    else:  # seen before: a child makes the binary once this process exits
        (dev,) = ctx.devices
        if not _pending:
            atexit.register(_hand_over)
        _pending.append((dev.platform.name, dev.name, source, list(options), name))
    return program


def from_binary(cl, ctx, binary: bytes, source: str, options: Sequence[str]) -> object | None:
    """The program of `binary` (made from `source`) built for `ctx`'s one device;
    None when the driver refuses it (a miss: the caller builds from source)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = cl.Program(ctx, list(ctx.devices), [binary]).build(options=list(options))
    except cl.Error:
        return None
    # as a source program has it: pyopencl's Kernel() looks it up, and on a binary
    # program the lookup would try to make a kernel named "_source"
    program._source = source
    return program


def binary_of(cl, program) -> bytes | None:
    """A built program's binary for its (one) device; PoCL compiles a generic
    work-group function of every kernel to make it."""
    binaries = program.get_info(cl.program_info.BINARIES)
    return bytes(binaries[0]) if binaries and binaries[0] else None


def _hand_over() -> None:
    """Start the detached child that makes the queued programs' binaries (a
    temporary file or a process that cannot be made: no binaries, no error)."""
    if not _pending:
        return
    work = list(_pending)
    _pending.clear()
    try:
        fd, path = tempfile.mkstemp(prefix="gpurace-binaries-", suffix=".pickle")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(work, f)
        subprocess.Popen(
            [sys.executable, "-m", "gpurace.backends.cl_binaries", path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # outlives the run, which does not wait for it
        )
    except OSError:
        pass


def make_binaries(pending: Sequence[tuple[str, str, str, list[str], str]]) -> int:
    """Build each queued program on its device, store its binary; how many were
    stored. A device or build that fails is skipped: the entry stays a mark."""
    import pyopencl as cl

    from gpurace import cache

    devices = {(p.name, d.name): d for p in cl.get_platforms() for d in p.get_devices()}
    stored = 0
    for platform, device, source, options, name in pending:
        dev = devices.get((platform, device))
        if dev is None:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                binary = binary_of(cl, cl.Program(cl.Context([dev]), source).build(options=options))
        except cl.Error:
            continue
        if binary:
            cache.store(name, binary)
            stored += 1
    return stored


def _entry(ctx, source: str, path: str, options: Sequence[str]) -> str | None:
    """The program's cache entry name; None when binaries are off, the cache is off,
    the context has several devices or an #include cannot be found."""
    from gpurace import cache
    from gpurace.languages.opencl import included_text

    if not _enabled[0] or cache.directory() is None or len(ctx.devices) != 1:
        return None
    included = included_text(source, path, options)
    if included is None:
        return None
    (dev,) = ctx.devices
    p = dev.platform
    return cache.key(
        "opencl-binary",
        p.name,
        p.version,
        dev.name,
        dev.version,
        dev.driver_version,
        "\0".join(options),
        source + included,
    )


if __name__ == "__main__":  # the child `_hand_over` starts
    with open(sys.argv[1], "rb") as queued:
        work = pickle.load(queued)
    os.unlink(sys.argv[1])
    os.nice(10)
    make_binaries(work)

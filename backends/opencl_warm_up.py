"""The start of a cold OpenCL check, overlapped: PoCL's kernel library is loaded on a
thread while the check rewrites the kernel (docs/performance.md, "Latency of small
checks").

PoCL's first build from source in a context parses its ~7 MB kernel library (the
builtins, for the device's instruction set) and links the program with it: 0.4-0.5 s
of an idle machine's CPU, the largest part of a cold check's build. A build that
PoCL's cache serves never loads it, so a warm check does not pay it. Linking a
compiled empty kernel loads it without PoCL's front end, and the build of the
instrumented program then finds it loaded (PoCL serialises builds in a context). The
link is called through ctypes, which lets go of the GIL: pyopencl's `link_program`
holds it for the whole link, which would stop the rewrite beside it.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import os
import threading
import warnings
from typing import Any

# PoCL compiles it in a few milliseconds once its cache has it
WARM_UP_KERNEL = "__kernel void gpurace_warm_up(__global int *p) { p[0] = 1; }"
POCL = "Portable Computing Language"  # the platform whose kernel library this loads


@functools.cache
def warm_up(name: str | None) -> threading.Thread:
    """Open the OpenCL device `name` and, on PoCL, load its kernel library, on a thread
    (returned) while the caller goes on; once per process and name. The caller is a
    check of a kernel text gpurace's cache has not seen (`gpurace.languages.opencl`),
    which PoCL builds from source too. A failure is left for the check's own
    `get_device` and build to report."""

    def work() -> None:
        from gpurace.backends import opencl_backend

        try:
            cl = opencl_backend._cl()
            queue, _ = opencl_backend.get_device(name)
            ctx: Any = getattr(queue, "context")  # noqa: B009 - a pyopencl queue
            if ctx.devices[0].platform.name.strip() != POCL:
                return
            link(ctx, compiled(cl, ctx))
        except Exception:  # the check opens and builds again, and says why
            return

    thread = threading.Thread(target=work, name="gpurace-opencl-warm-up", daemon=True)
    thread.start()
    atexit.register(thread.join)  # never exit with PoCL mid-link
    return thread


def compiled(cl: Any, ctx: Any) -> Any:
    """WARM_UP_KERNEL compiled (not linked) for `ctx`'s one device: from its binary in
    gpurace's disk cache, else compiled and its binary kept there (a damaged one is
    replaced). PoCL preprocesses a
    source on every compile, its cache hit or not (0.1-0.4 s of `opencl-c.h`); a
    binary loads in milliseconds."""
    from gpurace import cache

    (dev,) = ctx.devices
    p = dev.platform
    name = cache.key(
        "opencl-object", p.name, p.version, dev.name, dev.version, dev.driver_version,
        WARM_UP_KERNEL,
    )  # fmt: skip
    binary = cache.load(name)
    if binary is not None:
        try:
            return cl.Program(ctx, [dev], [binary])
        except cl.Error:  # a binary the driver refuses is a miss
            pass
    with warnings.catch_warnings():  # pyopencl: a compiled program is not in its cache
        warnings.simplefilter("ignore")
        program = cl.Program(ctx, WARM_UP_KERNEL).compile()
        binaries = program.get_info(cl.program_info.BINARIES)
    if binaries and binaries[0]:
        cache.store(name, bytes(binaries[0]))
    return program


def link(ctx, program) -> bool:
    """`clLinkProgram` of one compiled program (pyopencl objects) for `ctx`'s devices,
    through ctypes, without the GIL; whether it linked. The linked program is
    released: what stays is what PoCL loaded into the context."""
    lib = opencl_library()
    if lib is None:
        return False
    fn = lib.clLinkProgram
    fn.restype = ctypes.c_void_p
    fn.argtypes = [
        ctypes.c_void_p,  # context
        ctypes.c_uint,  # num_devices (0: all of the context's)
        ctypes.c_void_p,  # device_list
        ctypes.c_char_p,  # options
        ctypes.c_uint,  # num_input_programs
        ctypes.POINTER(ctypes.c_void_p),  # input_programs
        ctypes.c_void_p,  # pfn_notify
        ctypes.c_void_p,  # user_data
        ctypes.POINTER(ctypes.c_int),  # errcode_ret
    ]
    programs = (ctypes.c_void_p * 1)(program.int_ptr)
    err = ctypes.c_int(0)
    linked = fn(ctx.int_ptr, 0, None, None, 1, programs, None, None, ctypes.byref(err))
    if not linked:
        return False
    lib.clReleaseProgram.argtypes = [ctypes.c_void_p]
    lib.clReleaseProgram(linked)
    return err.value == 0


def opencl_library() -> ctypes.CDLL | None:
    """The OpenCL ICD loader this process has loaded (pyopencl's: the objects'
    dispatch tables are its), found among the process's mappings (Linux, where PoCL
    runs); None where there is none to find."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {ln.split()[-1] for ln in maps if "libOpenCL" in ln}
    except OSError:
        return None
    found = sorted(p for p in paths if os.path.isfile(p))
    return ctypes.CDLL(found[0]) if found else None

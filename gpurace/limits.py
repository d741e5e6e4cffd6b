"""Size limits a launch must respect, checked before anything is allocated.

A launch file can ask for anything (``count = 5000000000``, ``workgroups = [1e6]``);
left to NumPy or the device API, that ends as a MemoryError, a uint32 overflow deep in
a backend or a driver's validation text with no line. So sizes are checked here, in
one place, against three kinds of limit, each error naming the launch file's line:

- the host's: filling one buffer must take at most a quarter of the machine's memory
  (the fill is made on the host, uploaded, and a CPU device holds another copy);
- gpurace's own: the log records hold work-item and group ids and addresses of the
  linear address order as u32 words, so those must stay below 2**32;
- the device's: work-group counts and sizes, bindings and buffer sizes (wgpu's
  ``device.limits``, OpenCL's device info), checked by the backends with ``at_most``.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from gpurace.model import Binding, GpuraceError

#: the largest value a u32 word of the log (an id, an address) holds
U32_MAX = 0xFFFFFFFF


@functools.cache
def host_memory() -> int:
    """Bytes of physical memory of this machine (0 when the OS does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return 0


def host_buffer_limit() -> int:
    """The most bytes one launch-file buffer may take to fill: a quarter of the host's
    memory, since the fill, its upload and a CPU device's buffer each hold a copy."""
    memory = host_memory()
    return memory // 4 if memory else 1 << 40


def gib(nbytes: int) -> str:
    """A byte count for a message: ``20000000000 bytes (18.6 GiB)``."""
    if nbytes < 1 << 30:
        return f"{nbytes} bytes"
    return f"{nbytes} bytes ({nbytes / (1 << 30):.1f} GiB)"


def check_host_bytes(nbytes: int, err: Callable[[str], GpuraceError]) -> None:
    """A buffer of ``nbytes`` must fit the host before its fill is made."""
    limit = host_buffer_limit()
    if nbytes > limit:
        raise err(
            f"filling it takes {gib(nbytes)}, more than this host can spare (at most "
            f"{gib(limit)}, a quarter of its memory); lower count"
        )


def check_u32(what: str, value: int, err: Callable[[str], GpuraceError]) -> None:
    """``value`` (a grid size, a work-item count) must fit gpurace's u32 log words."""
    if value > U32_MAX:
        raise err(
            f"{what} makes {value}, but gpurace's logs hold it in 32 bits (at most {U32_MAX}); "
            "make the launch smaller"
        )


def check_address_space(total: int, path: str, line: int = 0) -> None:
    """The launch's linear address order (every buffer, __local/workgroup variable and
    one address per work-group, docs/internals.md §2) must fit one u32 address."""
    limit = (U32_MAX // 16) * 16
    if total > limit:
        raise GpuraceError(
            f"the launch's buffers, local variables and work-groups take {gib(total)} of "
            f"addresses; gpurace addresses at most {gib(limit)} per launch: make the "
            "buffers or the grid smaller",
            path,
            line,
        )


def at_most(
    what: str, value: int, limit: int, device: str, path: str, line: int, hint: str
) -> None:
    """One device limit: ``what`` is ``value``, the device allows ``limit``."""
    if value > limit:
        raise GpuraceError(
            f"{what} is {value}, but '{device}' allows at most {limit}; {hint}", path, line
        )


def check_regular_file(
    path: str, err: Callable[[str], GpuraceError], shown: str | None = None
) -> None:
    """An input file (``.npy`` fill, ``.sim`` ``file=``) must be a plain file, refused
    before it is opened: opening a FIFO waits for a writer forever, a device file
    never ends, a directory is no data. ``shown`` is the name as the user wrote it."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # missing, unreadable, or a name with a NUL byte
        return  # the open that follows says which
    if not stat.S_ISREG(mode):
        kind = (
            "a directory"
            if stat.S_ISDIR(mode)
            else "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a device file"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "not a regular file"
        )
        raise err(f"'{shown}' is {kind}; give a regular file" if shown else f"is {kind}")


# ---------------------------------------------------------------------------
# Nesting: the rewriters recurse once or more per level of the syntax tree
# ---------------------------------------------------------------------------

#: levels of nesting (an expression in an expression, a block in a block; each
#: operator of a chain such as ``a + b + c`` counts) a kernel may have; clang's own
#: bracket limit is the same
MAX_NESTING = 256
#: Python frames the WGSL and OpenCL rewriters use per level, at most (measured: WGSL 4,
#: OpenCL 8 with its libclang callbacks)
_FRAMES_PER_LEVEL = 16


@contextlib.contextmanager
def deep_recursion() -> Iterator[None]:
    """Room on Python's stack for MAX_NESTING levels of the rewriters' recursion,
    whatever the caller's depth (pytest, click). Python 3.11 calls between Python
    functions do not use the C stack, so a higher limit costs nothing."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(old + MAX_NESTING * _FRAMES_PER_LEVEL)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


@contextlib.contextmanager
def lost_recursion() -> Iterator[list[BaseException]]:
    """Collect the RecursionErrors that C callbacks swallow (libclang's cursor visitor,
    called through ctypes, prints "Exception ignored" and returns a short list of
    children): a walk that hit one saw a truncated tree, so its result must not be used."""
    seen: list[BaseException] = []
    old = sys.unraisablehook

    def hook(info: Any) -> None:
        if "RecursionError" in f"{type(info.exc_value).__name__} {info.exc_value}":
            seen.append(info.exc_value)
        else:
            old(info)

    sys.unraisablehook = hook
    try:
        yield seen
    finally:
        sys.unraisablehook = old


def too_deep(path: str, line: int = 0, col: int = 0) -> GpuraceError:
    """The error for a kernel nested deeper than MAX_NESTING, at the place it gets too deep."""
    return GpuraceError(
        f"nested more than {MAX_NESTING} levels deep (each operator of a chain such as "
        "a + b + c counts); split the expression or block, e.g. with let/local variables",
        path,
        line,
        col,
    )


# ---------------------------------------------------------------------------
# Device limits, checked before the device is asked for anything
# ---------------------------------------------------------------------------

#: storage buffers the WGSL instrumentation binds besides the user's
#: (``_gr_log``, ``_gr_ctl``, ``_gr_shd``, ``_gr_par``: instrument/wgsl/runtime.py)
WGSL_LOG_BUFFERS = 4


def check_wgsl_launch(
    limits: Mapping[str, int],
    device: str,
    launch: Any,
    bindings: Sequence[Binding],
    workgroup_size: tuple[int, int, int],
    kernel_path: str,
) -> None:
    """A WGSL launch against wgpu's ``device.limits`` (WebGPU's names); without this
    a too-large grid or buffer is a wgpu validation message with no line."""
    path, lines = launch.path, launch.key_lines
    for d, n in enumerate(launch.workgroups):
        at_most(
            f"workgroups[{d}]", n, limits["max-compute-workgroups-per-dimension"], device,
            path, lines.get("workgroups", 0), "launch fewer work-groups",
        )  # fmt: skip
    for d, n in enumerate(workgroup_size):
        at_most(
            f"@workgroup_size {'xyz'[d]}", n, limits[f"max-compute-workgroup-size-{'xyz'[d]}"],
            device, kernel_path, 0, "make the work-group smaller",
        )  # fmt: skip
    at_most(
        f"@workgroup_size {list(workgroup_size)} in all", math.prod(workgroup_size),
        limits["max-compute-invocations-per-workgroup"], device, kernel_path, 0,
        "make the work-group smaller",
    )  # fmt: skip
    check_u32(
        "the work-items (work-groups x @workgroup_size)",
        math.prod(launch.workgroups) * math.prod(workgroup_size),
        lambda m: GpuraceError(m, path, lines.get("workgroups", 0)),
    )
    storage = [b for b in bindings if b.kind == "storage"]
    uniform = [b for b in bindings if b.kind == "uniform"]
    at_most(
        f"the number of storage buffers (the kernel's + {WGSL_LOG_BUFFERS} of gpurace's log)",
        len(storage) + WGSL_LOG_BUFFERS, limits["max-storage-buffers-per-shader-stage"],
        device, kernel_path, 0, "bind fewer storage buffers",
    )  # fmt: skip
    at_most(
        "the number of uniform buffers", len(uniform),
        limits["max-uniform-buffers-per-shader-stage"], device, kernel_path, 0,
        "bind fewer uniform buffers",
    )  # fmt: skip
    for b in bindings:
        at_most(
            f"the @binding of '{b.name}'", b.binding, limits["max-bindings-per-bind-group"] - 1,
            device, kernel_path, 0, "number the bindings from 0",
        )  # fmt: skip
    for buf in launch.buffers:
        kind = next(b.kind for b in bindings if (b.group, b.binding) == (buf.group, buf.binding))
        key = f"max-{kind}-buffer-binding-size"
        limit = min(limits[key], limits["max-buffer-size"])
        at_most(
            f"the {kind} buffer of group {buf.group}, binding {buf.binding} in bytes", buf.nbytes,
            limit, device, path, buf.line, "lower count",
        )  # fmt: skip
        align = limits[f"min-{kind}-buffer-offset-alignment"]
        if buf.offset % align:
            raise GpuraceError(
                f"the offset {buf.offset} of the alias at group {buf.group}, binding "
                f"{buf.binding} is not a multiple of {align}, '{device}''s "
                f"min-{kind}-buffer-offset-alignment (WebGPU: 256 at most); use a multiple",
                path,
                buf.line,
            )


def check_opencl_launch(
    dev: Any, name: str, launch: Any, local: tuple[int, int, int], params: Sequence[Binding]
) -> None:
    """An OpenCL launch against the device's info (``pyopencl.Device``): a work-group
    or buffer too large ends in an OpenCL error with no line, or worse on PoCL."""
    path, lines = launch.path, launch.key_lines
    line = lines.get("local_size", lines.get("global_size", 0))
    for d, n in enumerate(local):
        at_most(
            f"the work-group size in {'xyz'[d]}", n, int(dev.max_work_item_sizes[d]), name,
            path, line, "make local_size smaller",
        )  # fmt: skip
    at_most(
        f"the work-group size {list(local)} in all", math.prod(local),
        int(dev.max_work_group_size), name, path, line, "make local_size smaller",
    )  # fmt: skip
    local_bytes = 0
    for arg in launch.args:
        if arg.kind == "buffer" and arg.buffer is not None:
            at_most(
                f"the buffer of argument {arg.index} in bytes", arg.buffer.nbytes,
                int(dev.max_mem_alloc_size), name, path, arg.line, "lower count",
            )  # fmt: skip
            align = int(dev.mem_base_addr_align) // 8  # bits
            if arg.buffer.alias is not None and arg.buffer.offset % align:
                raise GpuraceError(
                    f"the offset {arg.buffer.offset} of the alias at argument {arg.index} is "
                    f"not a multiple of {align} bytes, '{name}''s CL_DEVICE_MEM_BASE_ADDR_ALIGN "
                    "(a sub-buffer's origin must be); use a multiple",
                    path,
                    arg.line,
                )
        elif arg.kind == "local":
            local_bytes += arg.local_bytes or 0
    at_most(
        "the __local bytes of the arguments", local_bytes, int(dev.local_mem_size), name, path,
        lines.get("arg", 0), "give the __local arguments fewer bytes",
    )  # fmt: skip

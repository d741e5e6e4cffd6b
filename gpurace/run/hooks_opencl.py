"""pyopencl hooks for ``gpurace run``: record programs, kernel arguments and launches.

What is wrapped (undone by the returned callable):

* ``Program.build`` remembers the program's OpenCL C source and its whole build
  options (the program's own plus what pyopencl adds: its include directory, which
  its library kernels' ``#include <pyopencl-complex.h>`` needs, platform options and
  ``PYOPENCL_BUILD_OPTIONS``), keyed by the built program, so a kernel (``prg.name``
  or ``cl.Kernel(prg, name)``, however obtained) finds them through
  ``kernel.program``; a source found in no file near the program (pyopencl's
  generated kernels) is named by the program's line that built it. The original
  build runs first: a kernel that does not compile raises pyopencl's own error.
* ``Kernel.set_arg`` and ``Kernel.set_args`` remember each argument (on the kernel
  object), as ``kernel(queue, global, local, *args)`` does; ``set_arg_types`` and
  ``set_scalar_arg_dtypes`` remember a typed kernel's argument types, so Arrays
  (pyopencl.array, ElementwiseKernel) map onto parameters as pyopencl maps them.
* ``Kernel.__call__`` and ``pyopencl.enqueue_nd_range_kernel`` are the launches:
  counted per kernel, and at a selected one the queue is finished, every buffer
  argument is read back to the host (``enqueue_copy`` on the program's queue, while
  the hooks are off), with its root ``cl_mem``, offset and size (`_range`), so that
  arguments sharing memory (one buffer twice, overlapping sub-buffers) are checked
  as one buffer (`gpurace.run.opencl_spec`). Then the program's launch runs
  unchanged, so its results are unchanged, and once the driver accepted it the
  snapshot goes to the session, which
  checks it on its own device (a launch the driver rejects is listed as not checked,
  with its error, which reaches the program as usual).

A launch without a local size (``None``) is checked with the size the program's
driver chooses: a probe kernel is launched on the program's queue with the same
global size and no local size, and reports ``get_local_size`` (``driver_local_size``).

A launch is listed as not checked, with the reason, when gpurace cannot reproduce
it: a global offset, an argument that is not a buffer, a number or ``LocalMemory``
(images, samplers, SVM, NULL), or call arguments that cannot be mapped onto the
parameters (``_expand``). A struct given by value (a NumPy structured scalar) is
passed as its bytes.
"""

from __future__ import annotations

import math
import shlex
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpurace.run.session import Kernel, OpenCLLaunch, Session, program_line

#: Reports get_local_size of the work-group holding work-item 0: what the driver
#: chose for a launch of this global size without a local size.
PROBE = """__kernel void gpurace_local_size(__global uint *out) {
    if (get_global_id(0) == 0 && get_global_id(1) == 0 && get_global_id(2) == 0) {
        out[0] = get_local_size(0); out[1] = get_local_size(1); out[2] = get_local_size(2);
    }
}
"""


@dataclass
class Pending:
    """A selected launch, snapshotted, waiting for the program's launch to be accepted:
    ``what`` is the launch to check, or why it cannot be checked."""

    kernel: Kernel
    index: int
    what: OpenCLLaunch | str


def _options(program: Any, options: str | Sequence[str] | None) -> list[str]:
    """The build options the driver gets, as a list: the program's (a string or a
    list) and pyopencl's own (``Program._process_build_options``: its include
    directory, platform options, ``PYOPENCL_BUILD_OPTIONS``)."""
    try:
        whole, _ = program._process_build_options(program._context, options)
        return shlex.split(whole.decode("utf-8"))
    except (AttributeError, TypeError, ValueError):  # another pyopencl: the program's own
        if options is None:
            return []
        if isinstance(options, str):
            return shlex.split(options)
        return [o.decode() if isinstance(o, bytes) else str(o) for o in options]


def _sizes(value: Any, times: Any = None) -> tuple[int, ...] | None:
    """An NDRange size as a tuple (``g_times_l``: global is in work-groups)."""
    if value is None:
        return None
    sizes = tuple(int(v) for v in (value if isinstance(value, (tuple, list)) else [value]))
    if times is not None:
        sizes = tuple(g * n for g, n in zip(sizes, times, strict=False))
    return sizes


def _scalar(value: Any) -> int | float | list | bytes | None:
    """A by-value argument as a launch file's value (a list for a vector type, the
    bytes of a struct: a NumPy structured scalar)."""
    import numpy as np

    if isinstance(value, np.void) and "s0" not in (value.dtype.fields or {}):
        return value.tobytes()  # a struct (a cltypes vector has fields s0, s1, ...)
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        item = np.asarray(value).item()
        if isinstance(item, tuple):  # a pyopencl.cltypes vector: one field per component
            return [x for x in item]
        return item
    if isinstance(value, (bool, int, float)):
        return value
    return None


def install(session: Session) -> Callable[[], None]:
    """Wrap pyopencl to report to ``session``; returns the function that unwraps."""
    import pyopencl as cl

    from gpurace.backends import cl_binaries

    undo: list[Callable[[], None]] = []
    cl_binaries.enable()  # programs a pipeline's every run builds again (its module doc)
    undo.append(lambda: cl_binaries.enable(False))
    programs: dict[int, tuple[Any, str | None, str, list[str]]] = {}  # int_ptr -> info
    local = threading.local()  # .calling > 0 inside Kernel.__call__ (this thread's)
    built = [0]  # programs built so far: the N of "<OpenCL program N>"
    probes: dict[int, Any] = {}  # context int_ptr -> the PROBE kernel

    def calling() -> int:
        return getattr(local, "calling", 0)

    def wrap(owner: Any, name: str, make: Callable[[Callable], Callable]) -> None:
        orig = getattr(owner, name)
        setattr(owner, name, make(orig))
        undo.append(lambda: setattr(owner, name, orig))

    def build(orig: Callable) -> Callable:
        def hooked(self: Any, options: Any = None, devices: Any = None, cache_dir: Any = None):
            whole = None if session.hooks_off else _options(self, options)  # before: the
            result = orig(self, options, devices, cache_dir)  # build drops _context
            if whole is not None:
                source = getattr(self, "_source", None)
                if isinstance(source, bytes):
                    source = source.decode("utf-8", "replace")
                with session.lock:
                    built[0] += 1
                    number = built[0]
                where = program_line()
                label = f"OpenCL program from {where}" if where else f"OpenCL program {number}"
                with session.suspended():
                    file, source = session.locate(source, label, number, ext=".cl")
                prg = self._prg
                programs[prg.int_ptr] = (prg, source, file, whole)
            return result

        return hooked

    def args_of(kernel: Any) -> dict[int, Any]:
        found = getattr(kernel, "_gpurace_args", None)
        if found is None:
            found = {}
            kernel._gpurace_args = found
        return found

    def set_arg(orig: Callable) -> Callable:
        def hooked(self: Any, index: int, value: Any) -> Any:
            result = orig(self, index, value)
            args_of(self)[int(index)] = value
            return result

        return hooked

    def set_args(orig: Callable) -> Callable:
        def hooked(self: Any, *values: Any) -> Any:
            result = orig(self, *values)
            args_of(self).update(enumerate(values))
            return result

        return hooked

    def source_of(kernel: Any) -> tuple[str | None, str, list[str]]:
        """(source, file reports name, build options) of a kernel's program."""
        info = programs.get(kernel.program.int_ptr)
        if info is None:  # built before gpurace ran, or not through Program.build
            return None, "<OpenCL program>", []
        return info[1], info[2], info[3]

    def record(kernel: Any) -> tuple[Kernel, list[str], int]:
        """The session's record of a kernel object, its build options and its number
        of arguments, worked out at its first launch: each is a driver query or a
        SHA-256 of the program's source (``Session.kernel``), ~30 us a launch that a
        program launching one kernel object thousands of times would pay each time."""
        known = getattr(kernel, "_gpurace_record", None)
        if known is None or known[0] is not session:  # or an earlier session's
            source, file, options = source_of(kernel)
            k = session.kernel(file, kernel.function_name, source, "opencl", options=options)
            known = kernel._gpurace_record = (session, k, options, kernel.num_args)
        return known[1], known[2], known[3]

    def launched(
        queue: Any, kernel: Any, gsize: Any, lsize: Any, offset: Any, g_times_l: bool
    ) -> Pending | None:
        """Count one launch; when selected, snapshot it (before the program's launch
        runs) and return what to check once that launch was accepted."""
        if session.hooks_off or calling():
            return None
        k, options, _ = record(kernel)
        index = session.next_launch(k, (_sizes(gsize), _sizes(lsize), bool(g_times_l)))
        if index is None:
            return None
        snapshot: list[tuple[str, Any]] | str | None = None
        ranges: dict[int, tuple[object, int, int]] = {}
        glob = lsz = None
        try:
            with session.suspended():
                lsz = _sizes(lsize)
                glob = _sizes(gsize, lsz if g_times_l else None)
                why = _unsupported(kernel, offset)
                if not why and lsz is None and not _reqd(kernel):
                    assert glob is not None  # pyopencl takes no launch without a global size
                    lsz = driver_local_size(queue, kernel, glob)
                    if isinstance(lsz, str):
                        why, lsz = lsz, None
                    else:
                        note = f"local size None: the driver chose {list(lsz)} (a probe kernel"
                        session.note(k, index, note + " of the same global size on its queue)")
                snapshot = None if why else _snapshot(queue, kernel, args_of(kernel), ranges)
        except Exception as err:  # the program's launch reports its own errors
            why = f"its arguments could not be read back: {type(err).__name__}: {err}"
        if isinstance(snapshot, str) or why:
            return Pending(k, index, why or str(snapshot))
        assert glob is not None and snapshot is not None
        return Pending(k, index, OpenCLLaunch(glob, lsz, options, snapshot, ranges))

    def driver_local_size(queue: Any, kernel: Any, glob: tuple[int, ...]) -> Any:
        """The local size the program's driver picks for ``glob`` without one: PROBE's
        get_local_size, launched the same way on the program's queue (hooks off). A
        str says why it is not that kernel's (its work-group limit is lower)."""
        import numpy as np
        import pyopencl as cl

        ctx = queue.context
        if ctx.int_ptr not in probes:
            probes[ctx.int_ptr] = cl.Program(ctx, PROBE).build().gpurace_local_size
        out = np.zeros(3, np.uint32)
        buf = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, out.nbytes)
        probes[ctx.int_ptr](queue, glob, None, buf)
        cl.enqueue_copy(queue, out, buf)
        chosen = tuple(int(x) for x in out[: len(glob)])
        limit = kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, queue.device)
        if math.prod(chosen) > limit:
            return (
                f"no local size (None): the driver chose {list(chosen)} for a probe kernel, "
                f"more than this kernel's limit of {limit} work-items; pass the local size"
            )
        return chosen

    def finish(pending: Pending | None, launch: Callable[[], Any]) -> Any:
        """Run the program's launch; then check the snapshot, unless the driver
        rejected the launch (its error goes on to the program)."""
        try:
            result = launch()
        except Exception as err:
            if pending is not None:
                why = f"the driver rejected it: {type(err).__name__}: {err}"
                session.skip(pending.kernel, pending.index, why.splitlines()[0])
            raise
        if pending is not None:
            if isinstance(pending.what, str):
                session.skip(pending.kernel, pending.index, pending.what)
            else:
                session.launch_opencl(pending.kernel, pending.index, pending.what)
        return result

    def array_launch(kernel: Any) -> None:
        """A kernel call whose arguments cannot be mapped onto its parameters (Arrays
        to an untyped kernel, complex numbers, structs): counted, not checked."""
        k, _, _ = record(kernel)
        index = session.next_launch(k, "unmapped")
        if index is not None:
            why = "arguments that cannot be mapped onto the kernel's parameters (Array "
            session.skip(k, index, why + "without set_arg_types, or complex values)")

    def arg_types(orig: Callable) -> Callable:
        """Remember a typed kernel's argument types: how its call arguments map onto
        the kernel's parameters (pyopencl.invoker's rules, see ``_expand``)."""

        def hooked(self: Any, types: Any) -> Any:
            result = orig(self, types)
            self._gpurace_types = tuple(types)
            return result

        return hooked

    def call(orig: Callable) -> Callable:
        def hooked(self: Any, queue: Any, global_size: Any, local_size: Any, *args: Any, **kw):
            pending = None
            if session.hooks_off or calling():
                pass
            elif (expanded := _expand(self, args)) is None:
                array_launch(self)
            elif len(expanded) == record(self)[2]:
                args_of(self).update(enumerate(expanded))
                pending = launched(
                    queue,
                    self,
                    global_size,
                    local_size,
                    kw.get("global_offset"),
                    bool(kw.get("g_times_l")),
                )
            local.calling = calling() + 1
            try:
                return finish(
                    pending, lambda: orig(self, queue, global_size, local_size, *args, **kw)
                )
            finally:
                local.calling -= 1

        return hooked

    def nd_range(orig: Callable) -> Callable:
        def hooked(
            queue: Any,
            kernel: Any,
            global_work_size: Any,
            local_work_size: Any,
            global_work_offset: Any = None,
            wait_for: Any = None,
            g_times_l: bool = False,
            allow_empty_ndrange: bool = False,
        ) -> Any:
            pending = launched(
                queue, kernel, global_work_size, local_work_size, global_work_offset, g_times_l
            )
            return finish(
                pending,
                lambda: orig(
                    queue,
                    kernel,
                    global_work_size,
                    local_work_size,
                    global_work_offset,
                    wait_for,
                    g_times_l,
                    allow_empty_ndrange,
                ),
            )

        return hooked

    wrap(cl.Program, "build", build)
    wrap(cl.Kernel, "set_arg", set_arg)
    wrap(cl.Kernel, "set_args", set_args)
    wrap(cl.Kernel, "__call__", call)
    wrap(cl.Kernel, "set_arg_types", arg_types)
    wrap(cl.Kernel, "set_scalar_arg_dtypes", arg_types)
    wrap(cl, "enqueue_nd_range_kernel", nd_range)

    def uninstall() -> None:
        for step in reversed(undo):
            step()

    return uninstall


def _expand(kernel: Any, args: Sequence[Any]) -> list[Any] | None:
    """The kernel's arguments for a call's ``args``, as pyopencl's invoker sets them.

    A typed kernel (``set_arg_types``/``set_scalar_arg_dtypes``; pyopencl.array's and
    elementwise kernels) takes an Array as its buffer plus, ``with_offset``, a long
    byte offset, and converts numbers to the declared dtype. None: not reproducible
    (an Array given to an untyped kernel, complex numbers).
    """
    import numpy as np

    types = getattr(kernel, "_gpurace_types", None)
    if types is None or len(types) != len(args):
        return None if any(hasattr(a, "base_data") for a in args) else list(args)
    out: list[Any] = []
    for arg, typ in zip(args, types, strict=True):
        if typ is None:
            out.append(arg)
        elif hasattr(typ, "with_offset"):  # pyopencl.tools.VectorArg
            out.append(getattr(arg, "base_data", arg))
            if typ.with_offset:
                out.append(np.int64(getattr(arg, "offset", 0)))
        elif np.dtype(typ).kind == "c":
            return None
        elif np.dtype(typ).char == "V":  # a struct (pyopencl.tools.get_or_register_dtype)
            out.append(np.asarray(arg, np.dtype(typ))[()])
        else:
            out.append(np.dtype(typ).type(arg))
    return out


def _snapshot(
    queue: Any, kernel: Any, saved: dict[int, Any], ranges: dict[int, tuple[object, int, int]]
) -> list[tuple[str, Any]] | str:
    """Each argument as the launch sees it (buffers read back now, a buffer passed twice
    once: an in-place scan's input and output); a str says why not.
    ``ranges`` gets each buffer argument's (root, offset, size) (`_range`)."""
    import numpy as np
    import pyopencl as cl

    from gpurace.launch.fills import Kept

    queue.finish()
    args: list[tuple[str, Any]] = []
    roots: dict[int, object] = {}
    read: dict[int, np.ndarray] = {}  # cl_mem -> its bytes: one buffer passed twice is read once
    for i in range(kernel.num_args):
        value = saved.get(i)
        if isinstance(value, cl.Buffer):
            host = read.get(int(value.int_ptr))
            if host is None:
                host = np.empty(value.size, np.uint8)
                cl.enqueue_copy(queue, host, value)
                host = read[int(value.int_ptr)] = host.view(Kept)
            args.append(("buffer", host))  # the check's own: typed, not copied
            ranges[i] = _range(cl, value, roots)
        elif isinstance(value, cl.LocalMemory):
            args.append(("local", int(value.size)))
        elif _scalar(value) is not None:
            args.append(("scalar", _scalar(value)))
        else:
            what = "not set" if i not in saved else f"a {type(value).__name__}"
            return (
                f"argument {i} is {what}: gpurace checks buffer, number and "
                "LocalMemory arguments only"
            )
    return args


def _range(cl: Any, buf: Any, roots: dict[int, object]) -> tuple[object, int, int]:
    """(root, byte offset, byte size) of a buffer argument: a sub-buffer's root is its
    parent, at its CL_MEM_OFFSET; the root is one object per ``cl_mem`` (``roots``), as
    two Python objects may wrap one (`gpurace.launch.alias.aliases_of` compares ids)."""
    parent = buf.get_info(cl.mem_info.ASSOCIATED_MEMOBJECT)
    offset = int(buf.get_info(cl.mem_info.OFFSET)) if parent is not None else 0
    ptr = int((parent if parent is not None else buf).int_ptr)
    return roots.setdefault(ptr, ptr), offset, int(buf.size)


def _unsupported(kernel: Any, offset: Any) -> str:
    """Why a launch cannot be reproduced on gpurace's device ("" when it can)."""
    if offset is not None and any(int(o) for o in _sizes(offset) or ()):
        return f"global offset {list(_sizes(offset) or ())}: gpurace launches from offset 0"
    return ""


def _reqd(kernel: Any) -> bool:
    """Whether the kernel has a reqd_work_group_size (which then is its local size)."""
    import pyopencl as cl

    reqd = kernel.get_work_group_info(
        cl.kernel_work_group_info.COMPILE_WORK_GROUP_SIZE, kernel.context.devices[0]
    )
    return any(reqd)

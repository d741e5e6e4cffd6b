"""wgpu hooks for ``gpurace run``: record kernels and launches, snapshot each checked one.

What is wrapped (on wgpu-native's concrete classes, undone by the returned callable):

* ``GPUDevice.create_buffer`` adds ``COPY_SRC`` to every buffer's usage (except
  ``MAP_READ`` ones, which WebGPU forbids it for) so that any buffer can be copied
  into a shadow. The program cannot tell: ``buffer.usage`` reports what it asked
  for, and a copy from a buffer it did not give ``COPY_SRC`` fails at ``finish``
  with wgpu's error, as it would without gpurace.
* ``create_shader_module``, ``create_compute_pipeline`` (explicit or ``"auto"``
  layout) and ``create_bind_group`` remember the WGSL source, the entry point (and
  override constants, written into the source: gpurace's own pipelines take none)
  and which buffer range each binding names. The original call runs first, so a
  shader that does not compile raises wgpu's own exception into the program.
* ``GPUCommandEncoder`` (compute passes, ``copy_buffer_to_buffer``,
  ``clear_buffer``) and ``GPUComputePassEncoder`` (``set_pipeline``,
  ``set_bind_group``, ``dispatch_workgroups[_indirect]``) record the commands.
* ``GPUQueue.submit``: before the program's command buffers run, the recorded
  commands are replayed **on shadow copies** of the buffers they touch (one copy
  per buffer, made on the device at submit time, so every earlier submission and
  ``write_buffer`` is in it). Just before each selected dispatch the replay stops,
  reads the bound ranges of the shadows (and an indirect dispatch's arguments)
  back to the host, and hands them to the session, which checks the launch on its
  own buffers. Then the program's own command buffers are submitted, untouched:
  the program computes exactly what it would have without gpurace.

A render pass, a texture-to-buffer copy or a query resolve cannot be replayed
here; a selected dispatch after one in the same submission is reported as not
checked (with that reason), never silently checked on the wrong contents.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpurace.instrument.wgsl.overrides import with_constants
from gpurace.run.session import Kernel, Session

#: Encoder commands that may write buffers but are not replayed on the shadows.
OPAQUE = ("begin_render_pass", "copy_texture_to_buffer", "resolve_query_set")


@dataclass
class ModuleInfo:
    """A shader module as the program created it."""

    source: str | None  # WGSL text; None for SPIR-V or other code gpurace cannot rewrite
    file: str  # the name reports use for its sites


@dataclass
class PipelineInfo:
    module: ModuleInfo
    entry: str | None
    constants: dict = field(default_factory=dict)
    source: str | None = None  # the module's source with the constants written in

    @property
    def variant(self) -> str:
        """How the report tells pipelines of one entry point apart: their constants."""
        return ", ".join(f"{k}={v}" for k, v in sorted(self.constants.items()))


@dataclass
class Entry:
    """One bind group entry: a buffer range, or another resource kept as is."""

    binding: int
    resource: Any
    buffer: Any = None
    offset: int = 0
    size: int | None = None


@dataclass
class BindGroupInfo:
    layout: Any
    entries: list[Entry]
    dynamic: list[int] = field(default_factory=list)  # bindings with dynamic offsets, in order


@dataclass
class Dispatch:
    """A recorded dispatch with the pass state at that point."""

    pipeline: Any
    groups: dict[int, tuple[Any, tuple[int, ...]]]  # index -> (bind group, dynamic offsets)
    workgroups: tuple[int, int, int] | None
    indirect: tuple[Any, int] | None = None


def _usage_error(buf: Any, needed: int) -> str:
    """wgpu-native's message for a buffer used without a usage flag it needs."""
    import wgpu

    flags = sorted((v, k) for k, v in vars(wgpu.BufferUsage).items() if k.isupper())

    def names(value: int) -> str:
        return " | ".join(k for v, k in flags if value & v) or "0x0"

    return (
        "Validation Error\n\nCaused by:\n  In wgpuCommandEncoderFinish\n"
        f"    Usage flags BufferUsages({names(buf.usage)}) of Buffer with '{buf.label}' "
        f"label do not contain required usage flags BufferUsages({names(needed)})"
    )


def _flags(value: Any) -> int:
    if isinstance(value, str):
        from wgpu._coreutils import str_flag_to_int

        return str_flag_to_int(__import__("wgpu").BufferUsage, value)
    return int(value)


def _commands(obj: Any) -> list:
    cmds = getattr(obj, "_gpurace_cmds", None)
    if cmds is None:
        cmds = obj._gpurace_cmds = []
    return cmds


def install(session: Session) -> Callable[[], None]:
    """Wrap wgpu's methods to report to ``session``; returns the function that unwraps."""
    # wgpu-native loaded first as gpurace's checks load it (wgpu_devices): its header
    # from the disk cache and cffi's type strings on the fast path (backends/wgpu_ffi.py),
    # which the program's own wgpu calls then take too: ~60 ms a type string it would
    # otherwise parse with pycparser until a check imported wgpu_devices
    from gpurace.backends import wgpu_devices, wgpu_pipelines  # noqa: F401

    # isort: split
    import wgpu
    from wgpu.backends.wgpu_native import _api as native

    usage = wgpu.BufferUsage
    undo: list[Callable[[], None]] = []
    # the hooks let gpurace's calls through on the checking thread only: no thread
    # of gpurace's own may call wgpu (`wgpu_pipelines.background`)
    wgpu_pipelines.background = False
    undo.append(lambda: setattr(wgpu_pipelines, "background", True))
    module_count = [0]

    def wrap(cls: type, name: str, make: Callable[[Callable], Callable]) -> None:
        orig = getattr(cls, name)
        own = name in cls.__dict__
        new = functools.wraps(orig)(make(orig))
        setattr(cls, name, new)
        undo.append(lambda: setattr(cls, name, orig) if own else delattr(cls, name))

    def passthrough(make: Callable[[Callable], Callable]) -> Callable[[Callable], Callable]:
        """Call the original directly while the session itself is using wgpu."""

        def outer(orig: Callable) -> Callable:
            inner = make(orig)

            def call(*args: Any, **kwargs: Any) -> Any:
                if session.hooks_off:
                    return orig(*args, **kwargs)
                return inner(*args, **kwargs)

            return call

        return outer

    @passthrough
    def create_buffer(orig: Callable) -> Callable:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            if "usage" not in kwargs:
                return orig(self, *args, **kwargs)
            declared = _flags(kwargs["usage"])
            if not declared & usage.MAP_READ:
                kwargs["usage"] = declared | usage.COPY_SRC
            buf = orig(self, *args, **kwargs)
            buf._usage = declared  # what ``buffer.usage`` shows the program
            buf._gpurace_copyable = not declared & usage.MAP_READ
            return buf

        return call

    def after(note: Callable[[Any, Any, tuple, dict], None]) -> Callable[[Callable], Callable]:
        """A hook that calls the original first (its errors are the program's own), then
        `note(self, result, args, kwargs)` to remember what it made or recorded, and
        returns the original's result: what most hooks do."""

        @passthrough
        def make(orig: Callable) -> Callable:
            def call(self: Any, *args: Any, **kwargs: Any) -> Any:
                out = orig(self, *args, **kwargs)
                note(self, out, args, kwargs)
                return out

            return call

        return make

    def recording(kind: str, fields: tuple[str, ...]) -> Callable[[Callable], Callable]:
        """A hook that records the command `kind` with its arguments, named by `fields`."""

        def note(self: Any, _out: Any, args: tuple, kwargs: dict) -> None:
            _commands(self).append((kind, dict(zip(fields, args, strict=False)) | kwargs))

        return after(note)

    @after
    def copy_buffer_to_buffer(self: Any, _out: Any, args: tuple, kwargs: dict) -> None:
        """Record the copy; a source the program did not give COPY_SRC fails at
        ``finish`` as it would without gpurace (wgpu validates it there)."""
        values = dict(zip(("src", "src_off", "dst", "dst_off", "size"), args, strict=False))
        values |= kwargs
        _commands(self).append(("copy", values))
        src = values.get("src", values.get("source"))
        if src is not None and not src.usage & usage.COPY_SRC:
            self._gpurace_invalid = _usage_error(src, usage.COPY_SRC)

    @after
    def create_shader_module(self: Any, module: Any, _args: tuple, kwargs: dict) -> None:
        code = kwargs.get("code")
        with session.lock:  # modules may be made in several threads
            module_count[0] += 1
            number = module_count[0]
        text = code if isinstance(code, str) else None
        name, source = session.locate(text, kwargs.get("label") or "", number)
        module._gpurace = ModuleInfo(source, name)

    @after
    def create_compute_pipeline(self: Any, pipe: Any, _args: tuple, kwargs: dict) -> None:
        stage = kwargs.get("compute") or {}
        info = getattr(stage.get("module"), "_gpurace", None)
        if info is not None:
            pipe._gpurace = PipelineInfo(
                info, stage.get("entry_point"), dict(stage.get("constants") or {})
            )
            if info.source is not None and pipe._gpurace.constants:
                pipe._gpurace.source = with_constants(info.source, pipe._gpurace.constants)

    @after
    def create_bind_group(self: Any, bg: Any, _args: tuple, kwargs: dict) -> None:
        entries = []
        for e in kwargs.get("entries") or ():
            res = e["resource"]
            if isinstance(res, native.GPUBuffer):
                entries.append(Entry(e["binding"], res, res, 0, None))
            elif isinstance(res, dict) and "buffer" in res:
                offset = int(res.get("offset", 0) or 0)
                entries.append(Entry(e["binding"], res, res["buffer"], offset, res.get("size")))
            else:
                entries.append(Entry(e["binding"], res))
        layout = kwargs.get("layout")
        bg._gpurace = BindGroupInfo(layout, entries, getattr(layout, "_gpurace_dynamic", []))

    @after
    def create_bind_group_layout(self: Any, layout: Any, _args: tuple, kwargs: dict) -> None:
        """Remember which bindings take dynamic offsets (set_bind_group applies them
        in binding order)."""
        layout._gpurace_dynamic = sorted(
            e["binding"]
            for e in kwargs.get("entries") or ()
            if (e.get("buffer") or {}).get("has_dynamic_offset")
        )

    @after
    def begin_compute_pass(self: Any, cp: Any, _args: tuple, _kwargs: dict) -> None:
        cp._gpurace_cmds = _commands(self)
        cp._gpurace_state = (None, {})

    @passthrough
    def finish(orig: Callable) -> Callable:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            invalid = getattr(self, "_gpurace_invalid", None)
            if invalid is not None:
                raise wgpu.GPUValidationError(invalid)
            cb = orig(self, *args, **kwargs)
            cb._gpurace_cmds = list(_commands(self))
            return cb

        return call

    @after
    def set_pipeline(self: Any, _out: Any, args: tuple, kwargs: dict) -> None:
        pipeline = args[0] if args else kwargs["pipeline"]
        _, groups = getattr(self, "_gpurace_state", (None, {}))
        self._gpurace_state = (pipeline, groups)

    @passthrough
    def set_bind_group(orig: Callable) -> Callable:
        def call(self: Any, index: int, bind_group: Any, *args: Any, **kwargs: Any) -> Any:
            out = orig(self, index, bind_group, *args, **kwargs)
            data = list(args[0] if args else kwargs.get("dynamic_offsets_data", ()))
            start = args[1] if len(args) > 1 else kwargs.get("dynamic_offsets_data_start")
            length = args[2] if len(args) > 2 else kwargs.get("dynamic_offsets_data_length")
            if start is not None:
                data = data[start : start + (length if length is not None else len(data))]
            pipeline, groups = getattr(self, "_gpurace_state", (None, {}))
            self._gpurace_state = (pipeline, {**groups, index: (bind_group, tuple(data))})
            return out

        return call

    def note_dispatch(
        self: Any, workgroups: tuple[int, int, int] | None, indirect: tuple[Any, int] | None
    ) -> None:
        """Record a dispatch with the pass's pipeline and bind groups at this point."""
        pipeline, groups = getattr(self, "_gpurace_state", (None, {}))
        cmds = getattr(self, "_gpurace_cmds", None)
        if cmds is not None:
            cmds.append(("dispatch", Dispatch(pipeline, dict(groups), workgroups, indirect)))

    @after
    def dispatch(self: Any, _out: Any, args: tuple, kwargs: dict) -> None:
        names = ("workgroup_count_x", "workgroup_count_y", "workgroup_count_z")
        grid = [*args, *(kwargs[n] for n in names if n in kwargs), 1, 1][:3]
        x, y, z = (int(v) for v in grid)
        note_dispatch(self, (x, y, z), None)

    @after
    def dispatch_indirect(self: Any, _out: Any, args: tuple, kwargs: dict) -> None:
        named = [kwargs[n] for n in ("indirect_buffer", "indirect_offset") if n in kwargs]
        buffer, offset = [*args, *named, 0][:2]
        note_dispatch(self, None, (buffer, int(offset)))

    @passthrough
    def submit(orig: Callable) -> Callable:
        def call(self: Any, command_buffers: Any) -> Any:
            buffers = list(command_buffers)
            cmds = [c for cb in buffers for c in getattr(cb, "_gpurace_cmds", ())]
            if cmds:
                _before_submit(session, self, cmds)
            return orig(self, buffers)

        return call

    dev, enc, cpe = native.GPUDevice, native.GPUCommandEncoder, native.GPUComputePassEncoder
    wrap(dev, "create_buffer", create_buffer)
    wrap(dev, "create_shader_module", create_shader_module)
    wrap(dev, "create_compute_pipeline", create_compute_pipeline)
    wrap(dev, "create_bind_group", create_bind_group)
    wrap(dev, "create_bind_group_layout", create_bind_group_layout)
    wrap(enc, "begin_compute_pass", begin_compute_pass)
    wrap(enc, "copy_buffer_to_buffer", copy_buffer_to_buffer)
    wrap(enc, "clear_buffer", recording("clear", ("buffer", "offset", "size")))
    for name in OPAQUE:
        wrap(enc, name, recording(name, ()))
    wrap(enc, "finish", finish)
    wrap(cpe, "set_pipeline", set_pipeline)
    wrap(cpe, "set_bind_group", set_bind_group)
    wrap(cpe, "dispatch_workgroups", dispatch)
    wrap(cpe, "dispatch_workgroups_indirect", dispatch_indirect)
    wrap(native.GPUQueue, "submit", submit)

    def uninstall() -> None:
        while undo:
            undo.pop()()

    return uninstall


# ---------------------------------------------------------------------------
# Submit time: select launches, replay on shadows, snapshot
# ---------------------------------------------------------------------------


def _kernel_of(session: Session, d: Dispatch) -> Kernel | None:
    info: PipelineInfo | None = getattr(d.pipeline, "_gpurace", None)
    if info is None:
        return None  # created before the hooks (or by gpurace itself)
    if not info.constants:
        return session.kernel(info.module.file, info.entry, info.module.source, "wgsl")
    return session.kernel(info.module.file, info.entry, info.source, "wgsl", info.variant)


def _buffers_of(cmd: tuple[str, Any]) -> list[Any]:
    kind, c = cmd
    if kind == "copy":
        return [c.get("src", c.get("source")), c.get("dst", c.get("destination"))]
    if kind == "clear":
        return [c["buffer"]]
    if kind == "dispatch":
        out = [e.buffer for bg, _ in c.groups.values() for e in _entries(bg) if e.buffer]
        return out + ([c.indirect[0]] if c.indirect else [])
    return []


def _entries(bg: Any) -> list[Entry]:
    info: BindGroupInfo | None = getattr(bg, "_gpurace", None)
    return info.entries if info else []


def _before_submit(session: Session, queue: Any, cmds: list[tuple[str, Any]]) -> None:
    """Count the submission's launches; snapshot and check the selected ones."""
    plan: dict[int, tuple[Kernel, int]] = {}
    for i, (kind, c) in enumerate(cmds):
        if kind != "dispatch":
            continue
        kernel = _kernel_of(session, c)
        if kernel is None:
            continue
        index = session.next_launch(kernel, c.workgroups)  # None: indirect
        if index is not None:
            plan[i] = (kernel, index)
    if not plan:
        return
    with session.suspended():
        try:
            _Shadows(queue._device, cmds, plan, session).run()
        except Exception as err:  # never into the program's submit: say what was missed
            if session.options.check.debug:
                raise
            why = " ".join(str(err).split())[:200]
            for kernel, index in plan.values():
                done = any(x.startswith(f"launch {index}:") for x in kernel.skipped)
                if index not in kernel.checked and not done:
                    session.skip(kernel, index, f"the replay failed: {type(err).__name__}: {why}")


class _Shadows:
    """Replays one submission's commands on copies of its buffers, up to the last
    selected dispatch, handing each selected dispatch's inputs to the session."""

    def __init__(
        self, device: Any, cmds: list, plan: dict[int, tuple[Kernel, int]], session: Session
    ):
        import wgpu

        self.wgpu = wgpu
        self.device = device
        self.cmds = cmds[: max(plan) + 1]
        self.plan = plan
        self.session = session
        self.copies: dict[int, Any] = {}
        self.readable: set[int] = set()

    def run(self) -> None:
        u = self.wgpu.BufferUsage
        shadow_usage = u.STORAGE | u.UNIFORM | u.INDIRECT | u.COPY_SRC | u.COPY_DST
        enc = self.device.create_command_encoder()
        for cmd in self.cmds:
            for buf in _buffers_of(cmd):
                if buf is None or id(buf) in self.copies:
                    continue
                size = (buf.size + 3) // 4 * 4
                self.copies[id(buf)] = copy = self.device.create_buffer(
                    size=max(size, 4), usage=shadow_usage
                )
                if getattr(buf, "_gpurace_copyable", buf.usage & u.COPY_SRC):
                    enc.copy_buffer_to_buffer(buf, 0, copy, 0, buf.size // 4 * 4)
                    self.readable.add(id(buf))
        opaque = ""
        try:
            for i, (kind, c) in enumerate(self.cmds):
                if i in self.plan:
                    kernel, index = self.plan[i]
                    reason = opaque and (
                        f"not replayable: a {opaque}() before it in the same submission"
                    )
                    reason = reason or self.unreadable(c)
                    if reason:
                        self.session.skip(kernel, index, reason)
                    else:
                        self.device.queue.submit([enc.finish()])
                        enc = self.device.create_command_encoder()
                        self.snapshot(kernel, index, c)
                if i == len(self.cmds) - 1:
                    break
                if kind in OPAQUE:
                    opaque = opaque or kind
                else:
                    self.encode(enc, kind, c)
        finally:
            for copy in self.copies.values():
                copy.destroy()

    def unreadable(self, d: Dispatch) -> str:
        """Why the dispatch's inputs cannot be read from the shadows ("" if they can)."""
        for group, (bg, dyn) in sorted(d.groups.items()):
            info: BindGroupInfo | None = getattr(bg, "_gpurace", None)
            if dyn and (info is None or len(dyn) != len(info.dynamic)):
                return f"not replayable: group {group}'s dynamic offsets do not match its layout"
            for e in _entries(bg):
                if e.buffer is not None and id(e.buffer) not in self.readable:
                    return (
                        f"not replayable: the buffer at group {group}, binding {e.binding} "
                        "cannot be copied (no COPY_SRC usage)"
                    )
        return ""

    def shadow(self, buf: Any) -> Any:
        return self.copies[id(buf)]

    def encode(self, enc: Any, kind: str, c: Any) -> None:
        if kind == "copy":
            src = c.get("src", c.get("source"))
            dst = c.get("dst", c.get("destination"))
            enc.copy_buffer_to_buffer(
                self.shadow(src),
                c.get("src_off", c.get("source_offset", 0)),
                self.shadow(dst),
                c.get("dst_off", c.get("destination_offset", 0)),
                c.get("size"),
            )
        elif kind == "clear":
            enc.clear_buffer(self.shadow(c["buffer"]), c.get("offset", 0), c.get("size"))
        elif kind == "dispatch":
            cp = enc.begin_compute_pass()
            cp.set_pipeline(c.pipeline)
            for index, (bg, dyn) in sorted(c.groups.items()):
                cp.set_bind_group(index, self.bind_group(bg), list(dyn))
            if c.indirect:
                cp.dispatch_workgroups_indirect(self.shadow(c.indirect[0]), c.indirect[1])
            else:
                cp.dispatch_workgroups(*c.workgroups)
            cp.end()

    def bind_group(self, bg: Any) -> Any:
        info: BindGroupInfo = bg._gpurace
        entries = []
        for e in info.entries:
            if e.buffer is None:
                entries.append({"binding": e.binding, "resource": e.resource})
                continue
            res = {"buffer": self.shadow(e.buffer), "offset": e.offset}
            res["size"] = e.size if e.size is not None else e.buffer.size - e.offset
            entries.append({"binding": e.binding, "resource": res})
        return self.device.create_bind_group(layout=info.layout, entries=entries)

    def read(self, buf: Any, offset: int, size: int) -> bytes:
        end = min((offset + size + 3) // 4 * 4, self.shadow(buf).size)
        data = self.device.queue.read_buffer(self.shadow(buf), offset, end - offset)
        return bytes(data)[:size]

    def snapshot(self, kernel: Kernel, index: int, d: Dispatch) -> None:
        buffers: dict[tuple[int, int], bytes] = {}
        ranges: dict[tuple[int, int], tuple[Any, int, int]] = {}  # one buffer, two bindings
        for group, (bg, dyn) in d.groups.items():
            moved = dict(zip(bg._gpurace.dynamic, dyn, strict=False))
            for e in _entries(bg):
                if e.buffer is not None:
                    size = e.size if e.size is not None else e.buffer.size - e.offset
                    offset = e.offset + moved.get(e.binding, 0)
                    buffers[(group, e.binding)] = self.read(e.buffer, offset, size)
                    ranges[(group, e.binding)] = (e.buffer, offset, size)
        if d.indirect:
            import numpy as np

            raw = self.read(d.indirect[0], d.indirect[1], 12)
            x, y, z = (int(v) for v in np.frombuffer(raw, "<u4"))
            workgroups: tuple[int, ...] = (x, y, z)
        else:
            workgroups = tuple(int(v) for v in d.workgroups)  # type: ignore[union-attr]
        self.session.launch(kernel, index, workgroups, buffers, ranges)

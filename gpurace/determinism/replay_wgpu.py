"""Determinism replay of one WGSL launch on wgpu (``gpurace repeat KERNEL.wgsl``,
``gpurace run --tool determinism`` on wgpu programs).

Only what is wgpu's lives here; the replay loop and every statistic are
``replay.replay_and_compare``. Every buffer the kernel can write
(``var<storage, read_write>``) is snapshotted once on the device; each replay is one
command buffer: ``copy_buffer_to_buffer`` from every snapshot into its working
buffer, dispatch the plain kernel, then hash the written buffers with the companion
kernel of ``shaders/hash.wgsl``. Read-only storage and uniform buffers are uploaded
once: the kernel cannot change them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Unpack

import numpy as np

from gpurace import shaders
from gpurace.launch import LaunchSpec, resolve_entry, validate_against
from gpurace.model import Binding

from . import replay
from .replay import ReplayOutput, hash_groups, hashes_of, padded
from .results import RepeatResult


@functools.cache
def _hash_pipeline(device: Any) -> tuple[Any, Any]:
    import wgpu

    source = shaders.source("hash.wgsl")
    module = device.create_shader_module(code=source)
    types = [
        wgpu.BufferBindingType.read_only_storage,
        wgpu.BufferBindingType.uniform,
        wgpu.BufferBindingType.storage,
    ]
    layout = device.create_bind_group_layout(
        entries=[
            {"binding": i, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": t}}
            for i, t in enumerate(types)
        ]
    )
    pipe = device.create_compute_pipeline(
        layout=device.create_pipeline_layout(bind_group_layouts=[layout]),
        compute={"module": module, "entry_point": "hash"},
    )
    return layout, pipe


def _where(b: Binding) -> str:
    return f"@group({b.group}) @binding({b.binding})"


class WgpuReplayer:
    """Device buffers and pipelines of one launch, set up once and replayed N times."""

    def __init__(
        self,
        device: Any,
        source: str,
        path: str,
        entry: str,
        bindings: Sequence[Binding],
        launch: LaunchSpec,
        compare: Sequence[Binding],
        keep_state: set[tuple[int, int]],
    ) -> None:
        import wgpu

        from gpurace.backends import wgpu_backend

        self.wgpu = wgpu
        self.device = device
        self.launch = launch
        self.where = (path, entry)  # what a replay that hangs names (wgpu_backend.waited)
        self.compare = list(compare)
        self.outputs = [self._output(b) for b in self.compare]
        storage = wgpu.BufferUsage.STORAGE
        copy = wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        module = wgpu_backend.compile_module(device, source, path)
        self.working: dict[tuple[int, int], Any] = {}
        self.restore: list[tuple[Any, Any, int]] = []  # (snapshot, working, bytes)
        groups: dict[int, list[tuple[int, Any, Any]]] = {}
        for b in bindings:
            spec = launch.buffer(b.group, b.binding)
            assert spec is not None  # validate_against checked every binding has one
            size = padded(spec.nbytes)
            data = spec.data.tobytes() + b"\0" * (size - spec.nbytes)
            where = (b.group, b.binding)
            if b.kind == "uniform":
                buf = device.create_buffer_with_data(
                    data=data, usage=wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST
                )
            elif b.access == "read":
                buf = device.create_buffer_with_data(data=data, usage=storage)
            else:
                buf = device.create_buffer_with_data(data=data, usage=storage | copy)
                if where not in keep_state:
                    snap = device.create_buffer_with_data(
                        data=data, usage=wgpu.BufferUsage.COPY_SRC
                    )
                    self.restore.append((snap, buf, size))
            self.working[where] = buf
            groups.setdefault(b.group, []).append((b.binding, wgpu_backend.binding_type(b), buf))
        self.pipeline, self.bind_groups = wgpu_backend.compute_pipeline(
            device, module, entry, path, groups
        )

        hash_layout, self.hash_pipeline = _hash_pipeline(device)
        acc_size = padded(8 * len(self.compare))
        self.acc = device.create_buffer(size=acc_size, usage=storage | copy)
        self.readback = device.create_buffer(
            size=acc_size, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST
        )
        self.hash_jobs: list[tuple[Any, int]] = []
        for slot, b in enumerate(self.compare):
            spec = launch.buffer(b.group, b.binding)
            assert spec is not None
            n_words = -(-spec.nbytes // 4)
            params = np.array([n_words, slot, 0, 0], np.uint32).tobytes()
            pbuf = device.create_buffer_with_data(data=params, usage=wgpu.BufferUsage.UNIFORM)
            bg = device.create_bind_group(
                layout=hash_layout,
                entries=[
                    {"binding": 0, "resource": {"buffer": self.working[(b.group, b.binding)]}},
                    {"binding": 1, "resource": {"buffer": pbuf}},
                    {"binding": 2, "resource": {"buffer": self.acc}},
                ],
            )
            self.hash_jobs.append((bg, hash_groups(n_words)))

    def _output(self, b: Binding) -> ReplayOutput:
        spec = self.launch.buffer(b.group, b.binding)
        assert spec is not None
        return ReplayOutput(b.name, _where(b), spec.type, (spec.count,))

    def replay(self) -> tuple[int, ...]:
        """Restore, dispatch, hash; wait and return the per-buffer 64-bit hashes."""
        enc = self.device.create_command_encoder()
        for snap, buf, size in self.restore:
            enc.copy_buffer_to_buffer(snap, 0, buf, 0, size)
        enc.clear_buffer(self.acc)
        cp = enc.begin_compute_pass()
        cp.set_pipeline(self.pipeline)
        for g, bg in enumerate(self.bind_groups):
            cp.set_bind_group(g, bg)
        cp.dispatch_workgroups(*self.launch.workgroups)
        cp.end()
        if self.hash_jobs:
            hp = enc.begin_compute_pass()
            hp.set_pipeline(self.hash_pipeline)
            for bg, n in self.hash_jobs:
                hp.set_bind_group(0, bg)
                hp.dispatch_workgroups(n, 1, 1)
            hp.end()
        enc.copy_buffer_to_buffer(self.acc, 0, self.readback, 0, self.acc.size)
        self.device.queue.submit([enc.finish()])
        from gpurace.backends import wgpu_backend

        path, entry = self.where
        wgpu_backend.waited(
            self.device, lambda: self.readback.map_sync(self.wgpu.MapMode.READ), entry, "replay",
            path,
        )  # fmt: skip
        words = np.frombuffer(self.readback.read_mapped(copy=True), np.uint32)
        self.readback.unmap()
        return hashes_of(words, len(self.compare))

    def keep(self) -> list[Any]:
        """Device copies of the compared buffers as they are now (one distinct result)."""
        wgpu = self.wgpu
        enc = self.device.create_command_encoder()
        copies = []
        for b in self.compare:
            src = self.working[(b.group, b.binding)]
            dst = self.device.create_buffer(
                size=src.size, usage=wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
            )
            enc.copy_buffer_to_buffer(src, 0, dst, 0, src.size)
            copies.append(dst)
        self.device.queue.submit([enc.finish()])
        return copies

    def read(self, copies: list[Any]) -> dict[str, np.ndarray]:
        """Read one kept result back as typed arrays named after the kernel's buffers."""
        out = {}
        for b, buf in zip(self.compare, copies, strict=True):
            spec = self.launch.buffer(b.group, b.binding)
            assert spec is not None
            raw = self.device.queue.read_buffer(buf)
            out[b.name] = np.frombuffer(raw, spec.data.dtype)[: spec.count].copy()
        return out


def repeat_kernel(
    source: str,
    launch: LaunchSpec,
    bindings: Sequence[Binding] | None = None,
    **options: Unpack[replay.ReplayOptions],
) -> RepeatResult:
    """Replay the plain kernel ``options["runs"]`` times from the launch's initial
    buffers (``replay.ReplayOptions``; ``keep_state`` lists (group, binding) pairs).

    Every storage buffer the kernel can write (``read_write``) is restored from a
    device snapshot before each replay and compared afterwards by its device hash.
    ``bindings`` defaults to what the WGSL rewriter reports for ``source``.
    """
    prepare = functools.partial(_prepare, bindings=bindings)
    return replay.repeat_launch(prepare, "kernel.wgsl", source, launch, options)


def _prepare(
    source: str, launch: LaunchSpec, request: replay.Request, bindings: Sequence[Binding] | None
) -> replay.Setup:
    """The launch file's overrides written in, the bindings checked, the compared
    buffers picked: every ``read_write`` storage buffer not in ``keep_state``."""
    from gpurace import api
    from gpurace.backends import wgpu_backend

    if launch.overrides:  # the launch file's [overrides], written in as `check` does
        from gpurace.instrument.wgsl.overrides import set_overrides

        line = launch.key_lines.get("overrides", 0)
        source = set_overrides(source, launch.overrides, launch.path, line)
    if bindings is None:
        inst = api.instrument(source, request.path)
        bindings = inst.bindings
        entries = list(inst.entry_points or {inst.entry: inst.workgroup_size})
    else:
        entries = [request.entry or launch.entry or "main"]
    name = resolve_entry(launch, entries, request.entry)
    validate_against(launch, bindings)
    keep = {(int(g), int(b)) for g, b in request.keep_state}
    writable = [b for b in bindings if b.kind == "storage" and b.access != "read"]
    compare = [b for b in writable if (b.group, b.binding) not in keep]
    compare.sort(key=lambda b: (b.group, b.binding))
    dev, dev_name = replay.open_device(wgpu_backend, request.device)
    known = bindings

    def build() -> WgpuReplayer:
        return WgpuReplayer(dev, source, request.path, name, known, launch, compare, keep)

    return replay.Setup(name, dev_name, build)

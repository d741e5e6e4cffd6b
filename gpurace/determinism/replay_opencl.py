"""Determinism replay of one OpenCL C launch (``gpurace repeat KERNEL.cl``, ``gpurace
run --tool determinism`` on pyopencl programs).

The OpenCL twin of ``replay_wgpu.repeat_kernel``; only what is API-specific lives
here, the replay loop and every statistic are ``replay.replay_and_compare``:

* Every writable ``__global`` buffer argument (not ``const``, not ``__constant``) is
  uploaded once into a working buffer and once into a snapshot on the device. Each
  replay restores the working buffers from their snapshots with a device-side
  buffer-to-buffer ``enqueue_copy``, launches the **plain** kernel (the user's
  source, built with the launch's options) and hashes the written buffers **on the
  device** with ``shaders/hash.cl``. The hash is computed on the device, not the host,
  for the same reason as on wgpu: a replay must not cost a read-back of every output
  (on a discrete GPU that transfer, not the kernel, would dominate); only 8 bytes per
  buffer come back. ``hash.cl`` computes exactly what ``hash.wgsl`` and the host's
  ``hash_words`` compute, so the three agree bit for bit (the tests check it).
* The first replay with a new hash copies the compared buffers aside on the device;
  those copies are read back (one per distinct result) only when the replays differ.

Read-only buffers, scalars and ``__local`` sizes are set once: the kernel cannot
change them. The queue is in order, so restore, launch and hash need no events.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack, cast

import numpy as np

from gpurace import shaders
from gpurace.launch import LaunchSpec, element_type, resolve_entry, validate_opencl
from gpurace.launch.ndrange import NdRange, enqueue, program_for
from gpurace.model import Binding, GpuraceError
from gpurace.target import require_launch_of

from . import replay
from .replay import HASH_WORKGROUP, ReplayOutput, hash_groups, hashes_of, padded
from .results import RepeatResult

_hash_programs: dict[int, Any] = {}


def _hash_program(ctx: Any) -> Any:
    """``shaders/hash.cl`` built for ``ctx``, once per context."""
    key = ctx.int_ptr
    if key not in _hash_programs:
        import pyopencl as cl

        source = shaders.source("hash.cl")
        try:
            _hash_programs[key] = cl.Program(ctx, source).build()
        except cl.Error as exc:  # only a broken driver or an edited kernel file
            first = " ".join(str(exc).split())[:300]
            raise GpuraceError(f"the hash kernel does not build: {first}") from None
    return _hash_programs[key]


def _where(b: Binding) -> str:
    return f"arg {b.binding}"


def _shape(spec: Any) -> tuple[int, ...]:
    """(count,) for scalars, (count, lanes) for vector elements (float3: 4 lanes)."""
    found = element_type(spec.type)
    lanes = found[1] if found is not None else 1
    return (spec.count, lanes) if lanes > 1 else (spec.count,)


class OpenclReplayer:
    """Buffers, kernel and hash jobs of one OpenCL launch, set up once, replayed N times."""

    def __init__(
        self,
        queue: Any,
        source: str,
        path: str,
        name: str,
        params: Sequence[Binding],
        launch: LaunchSpec,
        local: tuple[int, ...],
        compare: Sequence[Binding],
        keep_state: set[int],
    ) -> None:
        import pyopencl as cl

        from gpurace import api
        from gpurace.backends import cl_args, opencl_backend

        self.cl = cl
        self.queue = queue
        self.path = path
        self.name = name
        self.launch = launch
        self.compare = list(compare)
        self.outputs = [
            ReplayOutput(b.name, _where(b), self._spec(b).type, _shape(self._spec(b)))
            for b in self.compare
        ]
        self.gsize = tuple(int(x) for x in launch.global_size or (1, 1, 1))
        self.lsize = tuple(int(x) for x in local)
        ctx = queue.context
        mf = cl.mem_flags
        self.shape = NdRange.of(self.gsize, self.lsize)  # non-uniform: as `check` runs it
        source, options = program_for(source, launch.options, self.shape)
        program = opencl_backend.build(queue, source, path, options)
        self.kernel = cl.Kernel(program, name)
        values = api.opencl_args(launch, params)
        self.working: dict[int, Any] = {}
        self.restore: list[tuple[Any, Any, int]] = []  # (snapshot, working, bytes)
        kargs: list[Any] = []
        for b in params:
            value = values[b.binding]
            if b.kind in ("global", "constant") and value is None:
                kargs.append(None)  # a NULL pointer (a .sim's `null`): nothing to compare
            elif b.kind in ("global", "constant"):
                arr = np.ascontiguousarray(value).reshape(-1).view(np.uint8)
                size = padded(arr.size)
                data = np.zeros(size, np.uint8)
                data[: arr.size] = arr
                buf = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=data)
                if b.kind == "global" and b.access != "read" and b.binding not in keep_state:
                    snap = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=data)
                    self.restore.append((snap, buf, size))
                self.working[b.binding] = buf
                kargs.append(buf)
            elif b.kind == "local":
                # a __local argument's value is its byte count
                kargs.append(cl.LocalMemory(max(1, int(cast(int, value)))))
            else:
                kargs.append(cl_args.scalar_argument(b, value))
        self.kernel.set_args(*kargs)

        hash_program = _hash_program(ctx)
        self.acc = cl.Buffer(ctx, mf.READ_WRITE, padded(8 * len(self.compare)))
        self.acc_host = np.empty(self.acc.size // 4, np.uint32)
        self.hash_jobs: list[tuple[Any, int]] = []
        for slot, b in enumerate(self.compare):
            spec = self._spec(b)
            n_words = -(-spec.nbytes // 4)
            k = cl.Kernel(hash_program, "hash")
            k.set_args(self.working[b.binding], np.uint32(n_words), np.uint32(slot), self.acc)
            self.hash_jobs.append((k, hash_groups(n_words)))

    def _spec(self, b: Binding) -> Any:
        spec = self.launch.args[b.binding].buffer
        assert spec is not None  # validate_opencl checked every buffer parameter has one
        return spec

    def replay(self) -> tuple[int, ...]:
        """Restore, launch, hash; wait and return the per-buffer 64-bit hashes."""
        cl = self.cl
        q = self.queue
        for snap, buf, size in self.restore:
            cl.enqueue_copy(q, buf, snap, byte_count=size)
        cl.enqueue_fill_buffer(q, self.acc, np.uint32(0), 0, self.acc.size)
        try:
            enqueue(cl, q, self.kernel, self.gsize, self.shape)
        except cl.Error as exc:
            raise GpuraceError(f"launch of '{self.name}' failed: {exc}", self.path) from None
        from gpurace.backends import opencl_backend

        # the watchdog's limit; before more is enqueued (PoCL blocks in enqueue_copy
        # behind a kernel that never ends)
        opencl_backend.wait(q, self.name, "replay", self.path)
        for k, groups in self.hash_jobs:
            cl.enqueue_nd_range_kernel(q, k, (groups * HASH_WORKGROUP,), (HASH_WORKGROUP,))
        cl.enqueue_copy(q, self.acc_host, self.acc, is_blocking=True)
        return hashes_of(self.acc_host, len(self.compare))

    def keep(self) -> list[Any]:
        """Device copies of the compared buffers as they are now (one distinct result)."""
        cl = self.cl
        copies = []
        for b in self.compare:
            src = self.working[b.binding]
            dst = cl.Buffer(self.queue.context, cl.mem_flags.READ_WRITE, src.size)
            cl.enqueue_copy(self.queue, dst, src, byte_count=src.size)
            copies.append(dst)
        return copies

    def read(self, copies: list[Any]) -> dict[str, np.ndarray]:
        """One kept result on the host: typed arrays named after the kernel's parameters."""
        out = {}
        for b, buf in zip(self.compare, copies, strict=True):
            spec = self._spec(b)
            host = np.empty(spec.data.size, spec.data.dtype)
            if host.size:
                self.cl.enqueue_copy(self.queue, host, buf, is_blocking=True)
            out[b.name] = host.reshape(_shape(spec))
        return out


def repeat_opencl(
    source: str, launch: LaunchSpec, **options: Unpack[replay.ReplayOptions]
) -> RepeatResult:
    """Replay the plain OpenCL kernel ``options["runs"]`` times from the launch's
    initial buffers (``replay.ReplayOptions``; ``keep_state`` lists argument indices).

    ``launch`` is an OpenCL launch (``global_size`` and ``[[arg]]`` tables, or a
    ``.sim`` file's). Kernel parameters come from the OpenCL rewriter, so the launch
    is validated exactly as ``gpurace check`` validates it.
    """
    return replay.repeat_launch(_prepare, "kernel.cl", source, launch, options)


def _prepare(source: str, launch: LaunchSpec, request: replay.Request) -> replay.Setup:
    """Instrument (for the parameters), validate, pick the compared buffers: every
    writable ``__global`` buffer not in ``keep_state``."""
    from gpurace import api
    from gpurace.backends import opencl_backend
    from gpurace.launch.sim import bind_sim_args

    require_launch_of(launch, "opencl")
    path = request.path
    inst = api.instrument(source, path, "opencl", launch.options)
    name = resolve_entry(launch, list(inst.entry_points), request.entry)
    params = inst.params[name]
    if launch.path.lower().endswith(".sim"):
        launch = bind_sim_args(launch, params)
    local = validate_opencl(launch, params, inst.entry_points[name])
    keep = {int(i) for i in request.keep_state}
    compare = [
        b
        for b in params
        if b.kind == "global"
        and b.access != "read"
        and b.binding not in keep
        and launch.args[b.binding].buffer is not None
    ]
    queue, dev_name = replay.open_device(opencl_backend, request.device)
    spec = launch

    def build() -> OpenclReplayer:
        return OpenclReplayer(queue, source, path, name, params, spec, local, compare, keep)

    return replay.Setup(name, dev_name, build)

"""Determinism replay of one CUDA launch (``gpurace repeat KERNEL.cu``, ``gpurace run
--tool determinism`` on cupy programs).

The CUDA twin of ``replay_opencl.repeat_opencl``; only what is API-specific lives
here, the replay loop and every statistic are ``replay.replay_and_compare``:

* The kernel is compiled as ``gpurace check`` compiles it (NVRTC for the device's
  architecture, the launch's options and name expressions) and the **plain** PTX
  (``Instrumented.original_ptx``; a ``.ptx`` input as given) is launched, never the
  instrumented one.
* Every buffer argument is uploaded once into a working array and once into a
  snapshot on the device, both padded to whole 16-byte blocks of 32-bit words. Each
  replay restores the working arrays from their snapshots with a device-to-device
  copy, launches the kernel and hashes the compared arrays **on the device** with
  ``shaders/hash.cl`` built by NVRTC (the file is C that OpenCL and CUDA both build),
  so only 8 bytes per buffer come back per replay; ``hash.cl`` computes exactly what
  ``hash.wgsl`` and the host's ``hash_words`` compute (the tests check it).
* The first replay with a new hash copies the compared arrays aside on the device;
  those copies are read back (one per distinct result) only when the replays differ.

Which arguments are compared: **every pointer (buffer) argument** except those in
``keep_state``. The PTX rewriter marks every pointer parameter ``read_write`` (PTX
has no ``const``, and which parameter an address came from is known only at run time,
from the address ranges), so "the kernel may write it" cannot be told statically. A
buffer the kernel only reads costs one restore copy and one hash per replay and is
reported as bit-identical; in exchange no written buffer is ever left out, whatever
the kernel does with its pointers (``const_cast``, pointer arithmetic across
arguments, PTX from another compiler). Scalars are set once: the kernel cannot
change them.

All work goes to cupy's current stream of the chosen device, in order, so restore,
launch and hash need no events; one event after the hashes bounds the wait
(``cuda_backend.wait_for``: a replay that hangs is a ``DeviceHang``, not a wait for
ever).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any, Unpack

import numpy as np

from gpurace import shaders
from gpurace.launch import ArgSpec
from gpurace.launch.cuda import CudaLaunch, element_type
from gpurace.model import Binding, GpuraceError

from . import replay
from .replay import HASH_WORKGROUP, ReplayOutput, hash_groups, hashes_of, padded
from .results import RepeatResult


def hash_source() -> str:
    """``shaders/hash.cl`` as NVRTC compiles it (the same text OpenCL builds)."""
    return shaders.source("hash.cl")


@functools.cache
def hash_ptx(arch: str) -> str:
    """The hash kernel (entry ``hash``) as PTX for ``arch`` (``compute_90``), once per arch."""
    from gpurace.instrument.ptx.compile import compile_cuda

    return compile_cuda(hash_source(), "hash.cl", ("-std=c++17",), (), arch).ptx


def _name(a: ArgSpec) -> str:
    """An argument's name in reports (repeat_cuda gives each the parameter's name)."""
    return a.name or f"arg{a.index}"


def _where(a: ArgSpec) -> str:
    return f"arg {a.index}"


def _shape(a: ArgSpec) -> tuple[int, ...]:
    """(count,) for scalar elements, (count, lanes) for vector ones (float4: 4 lanes)."""
    assert a.buffer is not None
    found = element_type(a.buffer.type)
    lanes = found[1] if found is not None else 1
    return (a.buffer.count, lanes) if lanes > 1 else (a.buffer.count,)


def _output(a: ArgSpec) -> ReplayOutput:
    """A compared buffer argument as the report names and shapes it."""
    assert a.buffer is not None
    return ReplayOutput(_name(a), _where(a), a.buffer.type, _shape(a))


def _words(a: ArgSpec) -> np.ndarray:
    """A buffer argument's bytes as u32 words, zero-padded as the device buffers are."""
    assert a.buffer is not None
    raw = np.ascontiguousarray(a.buffer.data).reshape(-1).view(np.uint8)
    words = np.zeros(padded(raw.size) // 4, np.uint32)
    words.view(np.uint8)[: raw.size] = raw
    return words


class CudaReplayer:
    """Arrays, kernel and hash jobs of one CUDA launch, set up once, replayed N times."""

    def __init__(
        self,
        device: Any,
        ptx: str,
        path: str,
        name: str,
        params: Sequence[Binding],
        launch: CudaLaunch,
        compare: Sequence[ArgSpec],
        keep_state: set[int],
    ) -> None:
        from gpurace.backends import cuda_backend

        cp = cuda_backend.array_api(device)  # cupy, or the sim device's NumPy stand-in
        self.cp = cp
        self.backend = cuda_backend
        self.device = device
        self.path = path
        self.name = name
        self.launch = launch
        self.compare = list(compare)
        self.outputs = [_output(a) for a in self.compare]
        self.fn = cuda_backend.load_module(device, ptx).get_function(name)
        hash_module = cuda_backend.load_module(device, hash_ptx(cuda_backend.arch_of(device)))
        self.working: dict[int, Any] = {}
        self.restore: list[tuple[Any, Any]] = []  # (snapshot, working)
        kargs: list[Any] = []
        with device:
            for a, b in zip(launch.args, params, strict=True):
                if a.buffer is not None:
                    words = _words(a)
                    buf = cp.asarray(words)
                    if a.index not in keep_state:
                        self.restore.append((cp.asarray(words), buf))
                    self.working[a.index] = buf
                    kargs.append(buf)
                elif a.kind == "tensormap":  # sim's kernel encodes it (sim/tensormap.py)
                    if not hasattr(self.fn, "seed"):  # (the sim device's kernel)
                        raise GpuraceError(
                            "a tensormap [[arg]] (a TMA tensor map in sim's layout) runs on "
                            "the sim device",
                            launch.path,
                            a.line,
                        )
                    kargs.append(a.value)
                else:
                    # validate_cuda: one number for each scalar (CUDA's [[arg]] has no vectors)
                    assert isinstance(a.value, int | float)
                    kargs.append(cuda_backend.scalar_arg(b, a.value))
            self.kargs = tuple(kargs)
            self.acc = cp.zeros(padded(8 * len(self.compare)) // 4, cp.uint32)
        self.hash = hash_module.get_function("hash")
        self.hash_jobs: list[tuple[int, tuple[Any, ...]]] = []
        for slot, a in enumerate(self.compare):
            assert a.buffer is not None
            n_words = -(-a.buffer.nbytes // 4)
            args = (self.working[a.index], np.uint32(n_words), np.uint32(slot), self.acc)
            self.hash_jobs.append((hash_groups(n_words), args))

    def replay(self) -> tuple[int, ...]:
        """Restore, launch, hash; wait and return the per-buffer 64-bit hashes."""
        cp = self.cp
        launch = self.launch
        with self.device:
            for snap, buf in self.restore:
                buf[...] = snap  # a device-to-device copy
            self.acc.fill(0)
            try:
                self.fn(
                    tuple(launch.grid), tuple(launch.block), self.kargs,
                    shared_mem=int(launch.shared_bytes),
                )  # fmt: skip
            except cp.cuda.driver.CUDADriverError as exc:
                raise GpuraceError(f"launch of '{self.name}' failed: {exc}", self.path) from None
            for groups, args in self.hash_jobs:
                self.hash((groups,), (HASH_WORKGROUP,), args)
            done = cp.cuda.Event()
            done.record()
            self.backend.wait_for(done, self.name, self.path)
            w = cp.asnumpy(self.acc)
        return hashes_of(w, len(self.compare))

    def keep(self) -> list[Any]:
        """Device copies of the compared arrays as they are now (one distinct result)."""
        with self.device:
            return [self.working[a.index].copy() for a in self.compare]

    def read(self, copies: list[Any]) -> dict[str, np.ndarray]:
        """One kept result on the host: typed arrays named as the report names them."""
        out = {}
        with self.device:
            for a, buf in zip(self.compare, copies, strict=True):
                spec = a.buffer
                assert spec is not None
                raw = self.cp.asnumpy(buf).view(np.uint8)[: spec.nbytes]
                out[_name(a)] = raw.view(spec.data.dtype).reshape(_shape(a))
        return out


def repeat_cuda(
    source: str, launch: CudaLaunch, **options: Unpack[replay.ReplayOptions]
) -> RepeatResult:
    """Replay the plain CUDA kernel ``options["runs"]`` times from the launch's initial
    buffers (``replay.ReplayOptions``; ``keep_state`` lists argument indices).

    ``launch`` is a CUDA launch (``grid``, ``block`` and ``[[arg]]`` tables;
    ``gpurace.launch.cuda.load_cuda_launch``). ``source`` is CUDA C++ or PTX (a
    ``.ptx`` path, or text that starts like PTX). Kernel parameters come from the PTX
    rewriter, so the launch is validated exactly as ``gpurace check`` validates it.
    """
    return replay.repeat_launch(_prepare, "kernel.cu", source, launch, options)


def _prepare(source: str, launch: CudaLaunch, request: replay.Request) -> replay.Setup:
    """Compile for the device's architecture, validate, pick the compared buffers:
    every pointer argument not in ``keep_state``."""
    from gpurace.backends import cuda_backend
    from gpurace.instrument.ptx import instrument, resolve_kernel
    from gpurace.launch.cuda import validate_cuda

    if not isinstance(launch, CudaLaunch):
        raise GpuraceError(
            "this launch file does not describe a CUDA launch; a CUDA kernel needs grid, "
            "block and [[arg]] tables (docs/launch-files.md)",
            getattr(launch, "path", "") or None,
        )
    dev, dev_name = replay.open_device(cuda_backend, request.device)
    if request.entry is not None:
        launch = dataclasses.replace(launch, entry=request.entry)
    arch = cuda_backend.arch_of(dev)
    path = request.path
    inst = instrument(source, path, launch.options, launch.name_expressions, arch)
    name = resolve_kernel(inst, launch)
    params = inst.params[name]
    validate_cuda(launch, params, name)
    plain = getattr(inst, "original_ptx", None) or source  # PTX input: the text itself
    keep = {int(i) for i in request.keep_state}
    # the launch file's names first: a PTX input's parameters are named "_Z4k_param_0"
    args = [
        dataclasses.replace(a, name=a.name or b.name)
        for a, b in zip(launch.args, params, strict=True)
    ]
    spec = dataclasses.replace(launch, args=args)
    compare = [a for a in args if a.buffer is not None and a.index not in keep]

    def build() -> CudaReplayer:
        return CudaReplayer(dev, plain, path, name, params, spec, compare, keep)

    # "scale<float>" rather than its mangled name
    return replay.Setup(name, dev_name, build, shown=spec.entry or name)

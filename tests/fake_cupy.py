"""A stand-in for the ``cupy`` module whose kernels run on the PTX interpreter
of the sim device (gpurace/sim), for ``gpurace run`` tests of cupy programs on a machine
without an NVIDIA GPU.

It is the subset of cupy that the test programs and gpurace's CUDA backend use,
shaped as cupy is: ``RawKernel(code, name, options)`` and ``RawModule(code=...,
path=..., options=..., name_expressions=...)`` compile CUDA C++ with NVRTC (the pip
wheels; no GPU needed) and ``get_function`` returns an instance of the module's own
kernel class, not of ``cupy.RawKernel`` as the module attribute names it at that
time (as cupy's Cython classes do, so the hook must not rely on that attribute);
``ndarray`` is a NumPy subclass whose memory stands for device memory; the device
and runtime calls report one device. Install it with
``sys.modules["cupy"] = tests.fake_cupy`` (tests/run_programs/cupy_boot.py).
"""

from __future__ import annotations

import functools
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from gpurace.sim import Simulator

float16, float32, float64 = np.float16, np.float32, np.float64
int8, int16, int32, int64 = np.int8, np.int16, np.int32, np.int64
uint8, uint16, uint32, uint64 = np.uint8, np.uint16, np.uint32, np.uint64
ARCH = "compute_90"


class ndarray(np.ndarray):  # noqa: N801  (cupy's name)
    """Device memory: a NumPy array the interpreter reads and writes in place."""

    def get(self, stream: Any = None) -> np.ndarray:
        return np.array(self, copy=True).view(np.ndarray)


def asarray(a: Any, dtype: Any = None) -> ndarray:
    return np.array(a, dtype=dtype, copy=True).view(ndarray)


array = asarray


def zeros(shape: Any, dtype: Any = float) -> ndarray:
    return np.zeros(shape, dtype).view(ndarray)


def empty(shape: Any, dtype: Any = float) -> ndarray:
    return np.zeros(shape, dtype).view(ndarray)


def arange(*args: Any, dtype: Any = None) -> ndarray:
    return np.arange(*args, dtype=dtype).view(ndarray)


def asnumpy(a: Any) -> np.ndarray:
    return np.array(a, copy=True).view(np.ndarray)


@functools.cache
def _compile(code: str, options: tuple[str, ...], exprs: tuple[str, ...]) -> tuple[str, dict]:
    from gpurace.instrument.ptx.compile import compile_cuda

    out = compile_cuda(code, "<cupy>", options, exprs, ARCH)
    return out.ptx, out.lowered


def _dims(value: Any) -> tuple[int, int, int]:
    v = list(value) if isinstance(value, (tuple, list)) else [value]
    return tuple(int(x) for x in v + [1] * (3 - len(v)))  # type: ignore[return-value]


def _bits(arg: Any, emu: Simulator) -> int:
    """A kernel argument as cupy passes it: a device pointer, or the value's bytes."""
    if isinstance(arg, np.ndarray) and arg.ndim > 0:  # a pointer to its first element
        root = arg
        while isinstance(root.base, np.ndarray):
            root = root.base
        return emu.mem.register(root) + (arg.ctypes.data - root.ctypes.data)
    if isinstance(arg, bool):
        arg = np.bool_(arg)
    elif isinstance(arg, int):
        arg = np.int64(arg)
    elif isinstance(arg, float):
        arg = np.float64(arg)
    if not isinstance(arg, np.generic):
        raise TypeError(f"Unsupported type {type(arg)}")
    return int.from_bytes(arg.tobytes(), "little")


class RawKernel:
    """One kernel; compiled at its first launch, as cupy does."""

    def __init__(
        self,
        code: str | None,
        name: str,
        options: tuple = (),
        backend: str = "nvrtc",
        *,
        translate_cucomplex: bool = False,
        enable_cooperative_groups: bool = False,
        jitify: bool = False,
    ) -> None:
        self.code, self.name, self.options = code, name, tuple(options)
        self._ptx: str | None = None
        self._entry = name
        self._path: str | None = None  # a module file, loaded at the first launch
        self._module: RawModule | None = None  # the RawModule it came from, if any
        self._emu: Simulator | None = None

    def _load(self) -> tuple[str, str]:
        if self._ptx is None and self._path is not None:
            self._ptx = Path(self._path).read_text()  # the interpreter runs PTX only
        elif self._ptx is None:
            assert self.code is not None
            self._ptx, _ = _compile(self.code, self.options, ())
        return self._ptx, self._entry

    def _emulator(self, ptx: str) -> Simulator:
        """The module's one interpreter: its ``__device__`` variables keep their values
        from launch to launch, as a loaded CUDA module's do."""
        owner = self._module if self._module is not None else self
        if owner._emu is None:
            owner._emu = Simulator(ptx)
        return owner._emu

    def __call__(self, grid: Any, block: Any, args: tuple, *, shared_mem: int = 0) -> None:
        ptx, entry = self._load()
        emu = self._emulator(ptx)
        bits = [_bits(a, emu) for a in args]
        run = emu.launch(entry, _dims(grid), _dims(block), bits, int(shared_mem))
        if run.stopped:
            raise RuntimeError(run.stopped)


class RawModule:
    def __init__(
        self,
        *,
        code: str | None = None,
        path: str | None = None,
        options: tuple = (),
        backend: str = "nvrtc",
        translate_cucomplex: bool = False,
        enable_cooperative_groups: bool = False,
        name_expressions: Any = None,
        jitify: bool = False,
    ) -> None:
        self.code, self.path, self.options = code, path, tuple(options)
        self.name_expressions = tuple(name_expressions or ())
        self._ptx: str | None = None
        self._lowered: dict[str, str] = {}
        self._emu: Simulator | None = None  # shared by its kernels (RawKernel._emulator)
        if code is not None:
            self._ptx, self._lowered = _compile(code, self.options, self.name_expressions)

    def get_function(self, name: str) -> RawKernel:
        kernel = _RawKernel(None, name, self.options)  # the class itself, as cupy's Cython does
        kernel._ptx, kernel._entry = self._ptx, self._lowered.get(name, name)
        kernel._path, kernel._module = self.path, self
        return kernel


_RawKernel = RawKernel


class _Device:
    def __init__(self, device: int = 0) -> None:
        self.id = device
        self.compute_capability = ARCH.split("_")[1]

    def use(self) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def __enter__(self) -> _Device:
        return self

    def __exit__(self, *exc: Any) -> bool:
        return False


class _Event:
    done = True  # the interpreter runs a launch to its end before returning

    def record(self, stream: Any = None) -> None:
        pass

    def synchronize(self) -> None:
        pass


cuda = SimpleNamespace(
    Device=_Device,
    Event=_Event,
    get_elapsed_time=lambda a, b: 0.0,
    get_current_stream=lambda: _Event(),
    driver=SimpleNamespace(CUDADriverError=RuntimeError),
    runtime=SimpleNamespace(
        CUDARuntimeError=RuntimeError,
        getDeviceCount=lambda: 1,
        getDeviceProperties=lambda i: {"name": b"PTX interpreter", "major": 9, "minor": 0},
        memGetInfo=lambda: (1 << 26, 1 << 26),
        deviceSynchronize=lambda: None,
    ),
)

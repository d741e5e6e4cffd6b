"""wgpu's devices: loading wgpu-native, listing adapters, opening one device per name.

Loading wgpu-native parses wgpu-py's C header, served from the disk cache
(`wgpu_ffi.cached_cdef`), with the fast path for the type strings wgpu-py asks for
(`wgpu_ffi.install`). `warm_up` opens the device and starts compiling the analysis
pipelines on a thread while a check does its other work (docs/internals.md §2).
"""

from __future__ import annotations

import atexit
import functools
import os
import tempfile
import threading
from dataclasses import dataclass
from typing import Any

# Mesa's Vulkan drivers complain on stderr when XDG_RUNTIME_DIR is unset (as in CI
# and containers); give them a private directory so users see only gpurace's output.
if not os.environ.get("XDG_RUNTIME_DIR"):
    _runtime = os.path.join(tempfile.gettempdir(), f"gpurace-runtime-{os.getuid()}")
    os.makedirs(_runtime, mode=0o700, exist_ok=True)
    os.environ["XDG_RUNTIME_DIR"] = _runtime

import wgpu  # noqa: E402

from gpurace.backends import wgpu_ffi  # noqa: E402
from gpurace.backends.common import choose_device  # noqa: E402
from gpurace.backends.wgpu_pipelines import start_analysis_pipelines  # noqa: E402
from gpurace.model import GpuraceError  # noqa: E402

with wgpu_ffi.cached_cdef():  # wgpu-py's header parse, from the disk cache (wgpu_ffi.py)
    from wgpu.backends.wgpu_native import _ffi, _helpers, extras

wgpu_ffi.install(_ffi.ffi)  # ~3 s of cffi type parsing a check saved (see the module)


@dataclass(frozen=True)
class Adapter:
    """A device the user can choose with --device."""

    name: str
    description: str
    adapter: Any  # wgpu.GPUAdapter
    is_gpu: bool


# every backend but OpenGL (whose adapters `list_devices` skips): enumerating the GL
# adapter initialises EGL and a second llvmpipe context, ~0.4-0.6 s on lavapipe
_BACKENDS = ("Vulkan", "Metal", "DX12")


def list_devices() -> list[Adapter]:
    """Every compute-capable adapter wgpu offers, best first (GPUs, then the CPU)."""
    if _helpers._the_instance is None:  # a program under `gpurace run` may have made it
        extras.set_instance_extras(backends=_BACKENDS)
    found = []
    for a in wgpu.gpu.enumerate_adapters_sync():
        info = a.info
        if info.get("backend_type") == "OpenGL":
            continue  # no storage atomics guarantees worth trusting; Vulkan covers it
        kind = info.get("adapter_type", "")
        desc = f"{info.get('device', '?')} ({info.get('backend_type', '?')}, {kind})"
        found.append(
            Adapter(info.get("device", "?"), desc, a, kind in ("DiscreteGPU", "IntegratedGPU"))
        )
    rank = {True: 0, False: 1}
    return sorted(found, key=lambda x: rank[x.is_gpu])


_OPENING = threading.Lock()  # one device per name, also while `warm_up`'s thread opens it


def get_device(name: str | None = None) -> tuple[object, str]:
    """The wgpu device for `name` (substring of the adapter's name), or the default:
    the first GPU, else the CPU driver (`gpurace.registry.open_device` resolves
    $GPURACE_DEVICE); one per name and process."""
    with _OPENING:
        return _open_device(name)


def warm_up(name: str | None) -> None:
    """Open the device `name` and start compiling its analysis pipelines on a thread,
    while the caller goes on (the CLI's check of a WGSL kernel: its imports, the
    launch file and the rewrite). The driver's compile releases the GIL, so on a free
    core the pipelines (~0.5 s of LLVM on lavapipe) are ready by the analysis. A
    failure is left for the check's own `get_device` to report."""

    def work() -> None:
        try:
            device, _ = get_device(name)
        except Exception:  # the check opens it again and reports why
            return
        start_analysis_pipelines(device)

    thread = threading.Thread(target=work, name="gpurace-warm-up", daemon=True)
    thread.start()
    atexit.register(thread.join)  # never exit with the driver mid-start


@functools.cache
def _open_device(name: str | None) -> tuple[object, str]:
    adapters = list_devices()
    if not adapters:
        raise GpuraceError(
            "no Vulkan adapter found; install a GPU driver or mesa-vulkan-drivers (lavapipe)"
        )
    adapter = choose_device(adapters, name, "device")
    lim = adapter.adapter.limits
    wanted = {
        "max-storage-buffers-per-shader-stage": min(
            lim["max-storage-buffers-per-shader-stage"], 16
        ),
        "max-storage-buffer-binding-size": lim["max-storage-buffer-binding-size"],
        "max-buffer-size": lim["max-buffer-size"],
        "max-compute-workgroup-storage-size": lim["max-compute-workgroup-storage-size"],
        "max-compute-invocations-per-workgroup": lim["max-compute-invocations-per-workgroup"],
        "max-bind-groups": min(lim["max-bind-groups"], 8),
    }
    # optional types the module may use: f16, and naga's i64/u64 (shader-int64)
    features = [f for f in ("shader-f16", "shader-int64") if f in adapter.adapter.features]
    device = adapter.adapter.request_device_sync(required_limits=wanted, required_features=features)
    return device, adapter.description

"""Which Language reads a kernel file and which Backend runs it (docs/internals.md §0).

The one place that maps file extensions to languages, names to backends, and the
user's device choice to a device: adding a language or a device API is adding its
module and its name here.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any, cast

from gpurace.interfaces import Backend, Language
from gpurace.model import GpuraceError
from gpurace.options import Options

#: Modules of `gpurace.languages`, in the order errors and docs list them.
LANGUAGE_MODULES = ("wgsl", "opencl", "cuda")
#: Modules ``gpurace.backends.<name>_backend``, in the order ``gpurace devices`` lists them.
BACKEND_MODULES = ("wgpu", "opencl", "cuda")

if TYPE_CHECKING:  # mypy checks each module against its protocol
    from gpurace.backends import cuda_backend, opencl_backend, wgpu_backend
    from gpurace.languages import cuda, opencl, wgsl
    from gpurace.launch import LaunchSpec
    from gpurace.launch.cuda import CudaLaunch

    _WGSL: Language[LaunchSpec] = wgsl
    _OPENCL: Language[LaunchSpec] = opencl
    _CUDA: Language[CudaLaunch] = cuda
    _BACKENDS: tuple[Backend, ...] = (wgpu_backend, opencl_backend, cuda_backend)


def language(name: str) -> Language[Any]:
    """The Language called `name` ("wgsl", "opencl", "cuda")."""
    if name not in LANGUAGE_MODULES:
        raise GpuraceError(f"language '{name}' is not supported yet")
    return cast(Language[Any], importlib.import_module(f"gpurace.languages.{name}"))


def extensions() -> dict[str, str]:
    """Kernel file extension -> language name, for every language."""
    return {ext: name for name in LANGUAGE_MODULES for ext in language(name).extensions}


def language_of(path: str) -> str:
    """The kernel language of a file, from its extension."""
    ext = os.path.splitext(path)[1].lower()
    known = extensions()
    if ext in known:
        return known[ext]
    raise GpuraceError(
        f"unsupported kernel file type '{ext or path}': gpurace checks "
        + " and ".join(known)
        + " kernels",
        path,
    )


def backend(name: str) -> Backend:
    """The Backend module called `name` ("wgpu", "opencl", "cuda")."""
    if name not in BACKEND_MODULES:
        raise GpuraceError(f"no backend '{name}': gpurace has {', '.join(BACKEND_MODULES)}")
    return cast(Backend, importlib.import_module(f"gpurace.backends.{name}_backend"))


def backend_for(lang: Language[Any], options: Options) -> Backend:
    """The backend a check of `lang` runs on: the one `options` names, else the
    language's own."""
    return backend(options.backend or lang.default_backend)


def backend_name(b: Backend) -> str:
    """The registry name of a backend module (or of a stand-in that wraps one)."""
    module = getattr(b, "__name__", "") or type(b).__module__
    return module.rsplit(".", 1)[-1].removesuffix("_backend")


def open_device(b: Backend, options: Options) -> tuple[Any, str]:
    """(device handle, description) of the device a check uses on `b`: the one place
    that picks the default device (--device, else the backend's $GPURACE_*DEVICE,
    else the backend's own default)."""
    return b.get_device(options.device_for(backend_name(b)))


def device_name(language_name: str, options: Options) -> str | None:
    """The device name a check of `language_name` opens (`open_device`'s choice), for
    callers that pass a name on rather than a Backend (the determinism replayers)."""
    return options.device_for(options.backend or language(language_name).default_backend)


def list_devices() -> list[tuple[str, str, bool]]:
    """(name, description, is_default) for every device of every backend; each API
    has its default (its first)."""
    found: list[tuple[str, str, bool]] = []
    for name in BACKEND_MODULES:
        devices = backend(name).list_devices()
        found += [(d.name, d.description, i == 0) for i, d in enumerate(devices)]
    return found

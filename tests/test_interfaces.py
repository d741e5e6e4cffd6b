"""The Language and Backend interfaces, the registry that picks them and the Options
read from the environment (docs/internals.md §0). No device is opened here."""

from __future__ import annotations

import pytest

from gpurace import registry
from gpurace.interfaces import Backend, Language
from gpurace.model import GpuraceError
from gpurace.options import Options
from tests.patched import Patched


def _members(protocol: type) -> set[str]:
    names = {n for n in vars(protocol) if not n.startswith("_")}
    return names | set(getattr(protocol, "__annotations__", {}))


def test_every_language_and_backend_module_has_every_operation():
    for name in registry.LANGUAGE_MODULES:
        lang = registry.language(name)
        assert {m for m in _members(Language) if not hasattr(lang, m)} == set(), name
        assert lang.name == name
    for name in registry.BACKEND_MODULES:
        backend = registry.backend(name)
        assert {m for m in _members(Backend) if not hasattr(backend, m)} == set(), name
        assert registry.backend_name(backend) == name


def test_languages_are_picked_by_extension():
    assert registry.extensions() == {
        ".wgsl": "wgsl",
        ".cl": "opencl",
        ".cu": "cuda",
        ".ptx": "cuda",
    }
    assert registry.language_of("dir/K.CL") == "opencl"
    with pytest.raises(GpuraceError) as err:
        registry.language_of("k.metal")
    assert str(err.value) == (
        "k.metal: error: unsupported kernel file type '.metal': gpurace checks "
        ".wgsl and .cl and .cu and .ptx kernels"
    )
    assert [registry.language(n).default_backend for n in ("wgsl", "opencl", "cuda")] == [
        "wgpu",
        "opencl",
        "cuda",
    ]


def test_unknown_names_are_one_line_errors():
    with pytest.raises(GpuraceError, match="^error: language 'glsl' is not supported yet$"):
        registry.language("glsl")
    with pytest.raises(GpuraceError, match="^error: no backend 'metal': gpurace has wgpu, "):
        registry.backend("metal")


def test_options_from_the_environment():
    env = {
        "GPURACE_DEVICE": "llvmpipe",
        "GPURACE_CUDA_DEVICE": "H200",
        "GPURACE_KERNEL_TIMEOUT": "0.5",
        "GPURACE_PROFILE": "1",
    }
    opts = Options.from_env(env)
    assert opts.kernel_timeout_s == 0.5 and opts.profile and not opts.debug
    assert dict(opts.default_devices) == {"wgpu": "llvmpipe", "cuda": "H200"}
    assert opts.prefilter and opts.records_per_item == 16 and opts.uniform_writes is None
    # --device wins over every backend's default; None given is "not given"
    assert opts.device_for("wgpu") == "llvmpipe" and opts.device_for("opencl") is None
    chosen = Options.from_env(env, device="pthread", uniform_writes=None)
    assert [chosen.device_for(b) for b in registry.BACKEND_MODULES] == ["pthread"] * 3
    assert Options.from_env({}) == Options()
    with pytest.raises(GpuraceError, match="GPURACE_KERNEL_TIMEOUT must be a number"):
        Options.from_env({"GPURACE_KERNEL_TIMEOUT": "soon"})


def test_the_device_is_resolved_in_one_place():
    """`open_device` hands the backend --device, else its environment default."""
    asked: list[str | None] = []
    wgpu = Patched(registry.backend("wgpu"), get_device=lambda n=None: asked.append(n) or (0, ""))
    cuda = Patched(registry.backend("cuda"), get_device=lambda n=None: asked.append(n) or (0, ""))
    opts = Options.from_env({"GPURACE_CUDA_DEVICE": "H200"})
    registry.open_device(wgpu, opts)
    registry.open_device(cuda, opts)
    registry.open_device(cuda, opts.with_(device="A100"))
    assert asked == [None, "H200", "A100"]
    assert registry.device_name("cuda", opts) == "H200"
    assert registry.device_name("wgsl", opts) is None


def test_a_launch_file_of_another_language_is_one_located_error():
    from gpurace.launch import LaunchSpec
    from gpurace.target import require_launch_of

    wgsl = LaunchSpec("main", (1, 1, 1), [], path="w.toml")
    opencl = LaunchSpec("k", (1, 1, 1), [], path="c.toml", language="opencl")
    require_launch_of(wgsl, "wgsl")
    require_launch_of(opencl, "opencl")
    with pytest.raises(GpuraceError) as err:
        require_launch_of(wgsl, "opencl")
    assert str(err.value) == (
        "w.toml: error: this launch file describes a WGSL launch; an OpenCL kernel needs "
        "global_size, local_size and [[arg]] tables (docs/launch-files.md)"
    )
    with pytest.raises(GpuraceError) as err:
        require_launch_of(opencl, "wgsl")
    assert str(err.value) == (
        "c.toml: error: this launch file describes an OpenCL launch; a WGSL kernel needs "
        "workgroups and [[binding]] tables (docs/launch-files.md)"
    )

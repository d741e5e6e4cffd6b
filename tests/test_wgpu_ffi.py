"""backends/wgpu_ffi.py: its fast path resolves wgpu-py's type strings into exactly the
types cffi's own parser makes, and leaves every other form to that parser."""

from __future__ import annotations

import functools

import pytest
from wgpu.backends.wgpu_native import _ffi

from gpurace.backends import wgpu_backend, wgpu_ffi  # noqa: F401 - installs the fast path

PARSER = _ffi.ffi._parser

# one of each form wgpu-py asks for in a check (as it spells them), typedefs of
# structs, enums, handles and primitives
SIMPLE = [
    "WGPUBufferDescriptor *",
    "WGPUChainedStruct * ",
    "WGPUAdapter[]",
    "WGPUBindGroupLayoutEntry[]",
    "WGPUFeatureName[]",
    "uint8_t []",
    "char []",
    "uint32_t []",
    "uint8_t *",
    "uintptr_t",
    "intptr_t",
    "WGPUStringView *",
    # callbacks
    "void(WGPULogLevel, WGPUStringView, void *)",
    "void(WGPUDevice const *, WGPUDeviceLostReason, WGPUStringView, void *, void *)",
    "void(WGPURequestDeviceStatus, WGPUDevice, WGPUStringView, void *, void *)",
    "void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)",
    "void(const WGPUStringView *, uint32_t)",
]


@functools.cache
def slow(cdecl: str):
    return type(PARSER).parse_type(PARSER, cdecl)  # cffi's own parser, not the fast path


def btype(tp):
    """The backend type cffi makes of model type `tp` (what ffi.new allocates; of a
    function type, its pointer, as `ffi.callback` takes it)."""
    with _ffi.ffi._lock:
        return _ffi.ffi._get_cached_btype(tp.as_function_pointer() if tp.is_raw_function else tp)


@pytest.mark.parametrize("cdecl", SIMPLE)
def test_simple_forms_resolve_to_cffis_own_types(cdecl: str) -> None:
    fast = wgpu_ffi.simple_type(PARSER, cdecl)
    assert fast is not None
    assert fast == slow(cdecl)
    assert btype(fast) is btype(slow(cdecl))


@pytest.mark.parametrize(
    "cdecl",
    [
        "void(WGPUMapAsyncStatus, WGPUStringView, ...)",  # varargs
        "void(void)",
        "void(uint8_t[4])",
        "WGPUDevice const *",  # a qualifier
        "uint8_t[4]",  # a sized array
        "unsigned",  # cffi rewrites it
        "void *",
        "NotAType *",  # an unknown name: cffi's error, not ours
    ],
)
def test_other_forms_are_left_to_cffi(cdecl: str) -> None:
    assert wgpu_ffi.simple_type(PARSER, cdecl) is None


def test_installed_parser_allocates_as_before() -> None:
    desc = _ffi.ffi.new("WGPUBufferDescriptor *")
    assert _ffi.ffi.typeof(desc) is btype(slow("WGPUBufferDescriptor *"))
    assert PARSER.parse_type("uint8_t []") == slow("uint8_t []")

"""backends/wgpu_ffi.py: its fast path resolves wgpu-py's type strings into exactly the
types cffi's own parser makes, and leaves every other form to that parser; the header
parse served from the disk cache declares exactly what cffi's parse does."""

from __future__ import annotations

import functools

import pytest
from cffi import FFI, cparser, model
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


def _declared(ffi) -> dict:
    """What a cdef left in `ffi`: each declaration's model type (its class, C name and
    qualifiers), the integer constants, and every struct's size and field offsets as
    the backend lays them out."""
    p = ffi._parser
    out: dict = {"constants": dict(p._int_constants)}
    for name, (tp, quals) in p._declarations.items():
        if isinstance(tp, int):  # an enum's or #define's value
            out[name] = (tp, quals)
            continue
        out[name] = (type(tp).__name__, tp._get_c_name(), quals)
        if name.startswith("typedef ") and isinstance(tp, model.StructType) and tp.fldnames:
            short = name.removeprefix("typedef ")
            out[f"layout {short}"] = (
                ffi.sizeof(short),
                [ffi.offsetof(short, f) for f in tp.fldnames if f],
            )
    return out


def _cdef(header: str):
    ffi = FFI()
    with wgpu_ffi.cached_cdef():
        ffi.cdef(header)
    return ffi


def test_the_header_from_the_cache_declares_what_its_parse_does(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("GPURACE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("GPURACE_NO_CACHE", raising=False)
    header = _ffi.get_wgpu_header()
    plain = FFI()
    plain.cdef(header)  # cffi alone
    parsed = _cdef(header)  # a miss: parsed, then stored
    (entry,) = (tmp_path / "cffi-cdef").iterdir()

    def no_parse(*args, **kwargs):
        raise AssertionError("parsed again: not served from the cache")

    with monkeypatch.context() as m:
        m.setattr(cparser.Parser, "_internal_parse", no_parse)
        cached = _cdef(header)
    assert _declared(cached) == _declared(plain) == _declared(parsed)
    assert len(_declared(plain)) > 900
    # the fast path is on at once, and allocates what cffi's own parser says
    assert cached._parser._gpurace_fast
    parser = cached._parser
    fast = parser.parse_type("WGPUBufferDescriptor *")
    assert fast == type(parser).parse_type(parser, "WGPUBufferDescriptor *")
    desc = cached.new("WGPUBufferDescriptor *")
    assert cached.sizeof(desc[0]) == plain.sizeof("WGPUBufferDescriptor") > 0
    # a damaged entry is a miss: parsed again, and rewritten whole
    entry.write_bytes(b"not a pickle")
    assert _declared(_cdef(header)) == _declared(plain)
    assert entry.read_bytes() != b"not a pickle"
    # a parser that already holds declarations is cffi's alone
    with monkeypatch.context() as m:
        m.setattr(cparser.Parser, "_internal_parse", no_parse)
        with wgpu_ffi.cached_cdef(), pytest.raises(AssertionError, match="parsed again"):
            cached.cdef("typedef int gpurace_extra;")

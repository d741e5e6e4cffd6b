"""OpenCL launch files: NDRange, options, [[arg]] tables, and errors at the right line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from gpurace.launch import LaunchSpec, load_launch, resolve_entry, scalar_bytes, validate_opencl
from gpurace.model import Binding, GpuraceError


def write(tmp_path: Path, text: str, name: str = "k.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def param(index: int, name: str, kind: str, elem: str, stride: int) -> Binding:
    return Binding(0, index, name, kind, "read_write", None, stride, elem, None)


PARAMS = [
    param(0, "data", "global", "float", 4),
    param(1, "n", "scalar", "uint", 4),
    param(2, "scratch", "local", "float", 4),
    param(3, "lut", "constant", "int2", 8),
]

FULL = """
kernel = "reduce"
global_size = [128, 2]
local_size = [64]
options = ["-DN=64", "-cl-fast-relaxed-math"]

[[arg]]
name = "data"
type = "float"
count = 256
fill = "arange"

[[arg]]
name = "n"
value = 256

[[arg]]
name = "scratch"
local = 1024

[[arg]]
type = "int2"
count = 3
fill = 7
"""


def test_full_opencl_file(tmp_path: Path) -> None:
    spec = load_launch(write(tmp_path, FULL))
    assert spec.language == "opencl"
    assert spec.entry == "reduce"
    assert spec.global_size == (128, 2, 1)
    assert spec.local_size == (64, 1, 1)
    assert spec.workgroups == (2, 2, 1)
    assert spec.options == ["-DN=64", "-cl-fast-relaxed-math"]
    assert [(a.index, a.name, a.kind, a.line) for a in spec.args] == [
        (0, "data", "buffer", 6),
        (1, "n", "scalar", 12),
        (2, "scratch", "local", 16),
        (3, None, "buffer", 20),
    ]
    data, n, scratch, lut = spec.args
    assert data.buffer is not None and data.buffer.data.tolist() == list(range(256))
    assert (data.buffer.group, data.buffer.binding, data.buffer.nbytes) == (0, 0, 1024)
    assert n.value == 256 and scratch.local_bytes == 1024
    assert lut.buffer is not None and lut.buffer.count == 3 and lut.buffer.itemsize == 8
    assert lut.buffer.data.dtype == np.int32 and lut.buffer.data.tolist() == [7] * 6
    # buffers are the same BufferSpecs, at binding = parameter index
    assert spec.buffers == [data.buffer, lut.buffer]
    assert spec.buffer(0, 3) is lut.buffer
    assert validate_opencl(spec, PARAMS) == (64, 1, 1)
    assert resolve_entry(spec, ["reduce", "other"]) == "reduce"


@pytest.mark.parametrize(
    "typ,dtype,lanes",
    [
        ("char", np.int8, 1),
        ("uchar", np.uint8, 1),
        ("short", np.int16, 1),
        ("ushort", np.uint16, 1),
        ("int", np.int32, 1),
        ("uint", np.uint32, 1),
        ("long", np.int64, 1),
        ("ulong", np.uint64, 1),
        ("half", np.float16, 1),
        ("float", np.float32, 1),
        ("double", np.float64, 1),
        ("f32", np.float32, 1),
        ("u32", np.uint32, 1),
        ("float4", np.float32, 4),
        ("uchar16", np.uint8, 16),
        ("float3", np.float32, 4),  # a 3-vector occupies 4 lanes in OpenCL C
    ],
)
def test_element_types(tmp_path: Path, typ: str, dtype: type, lanes: int) -> None:
    text = f'global_size = 4\nlocal_size = 4\n[[arg]]\ntype = "{typ}"\ncount = 5\nfill = "arange"\n'
    buf = load_launch(write(tmp_path, text)).args[0].buffer
    assert buf is not None
    assert buf.data.dtype == np.dtype(dtype) and buf.data.size == 5 * lanes
    assert buf.count == 5 and buf.itemsize == np.dtype(dtype).itemsize * lanes
    assert buf.data.tolist() == list(range(5 * lanes))


def test_random_chars_stay_in_range(tmp_path: Path) -> None:
    text = 'global_size = 4\n[[arg]]\ntype = "char"\ncount = 4096\nfill = "random"\n'
    data = load_launch(write(tmp_path, text)).args[0].buffer.data
    assert data.min() >= 0 and data.max() == 127


def test_options_string_and_defaults(tmp_path: Path) -> None:
    spec = load_launch(write(tmp_path, "global_size = [8, 8]\noptions = '-DA=1 -DB=\"x y\"'\n"))
    assert spec.options == ["-DA=1", "-DB=x y"]
    assert spec.local_size is None and spec.workgroups == (0, 0, 0)
    assert spec.entry is None and spec.args == [] and spec.buffers == []


def test_npy_vector_fill(tmp_path: Path) -> None:
    np.save(tmp_path / "v.npy", np.arange(8, dtype=np.float32).reshape(4, 2))
    text = 'global_size = 4\n[[arg]]\ntype = "float2"\nfill = "v.npy"\n'
    buf = load_launch(write(tmp_path, text)).args[0].buffer
    assert buf.count == 4 and buf.nbytes == 32


def test_from_dict_opencl() -> None:
    spec = LaunchSpec.from_dict(
        {"global_size": 64, "local_size": 32, "arg": [{"type": "uint", "fill": np.ones(4)}]}
    )
    assert spec.workgroups == (2, 1, 1) and spec.args[0].buffer.data.tolist() == [1] * 4


def test_scalar_bytes() -> None:
    def arg(value):
        return load_arg_value(value)

    assert scalar_bytes(arg(5), PARAMS[1]) == np.uint32(5).tobytes()
    f4 = param(0, "v", "scalar", "float4", 16)
    assert scalar_bytes(arg([1, 2, 3, 4]), f4) == np.array([1, 2, 3, 4], np.float32).tobytes()
    assert scalar_bytes(arg(2.5), f4) == np.full(4, 2.5, np.float32).tobytes()
    f3 = param(0, "v", "scalar", "float3", 16)
    assert scalar_bytes(arg([1, 2, 3]), f3) == np.array([1, 2, 3, 0], np.float32).tobytes()
    uc = param(0, "c", "scalar", "unsigned char", 1)
    assert scalar_bytes(arg(255), uc) == b"\xff"
    for bad, words in [(256, "does not fit in uchar"), (1.5, "not an integer")]:
        with pytest.raises(GpuraceError, match=words):
            scalar_bytes(arg(bad), uc)
    with pytest.raises(GpuraceError, match="needs 4 numbers"):
        scalar_bytes(arg([1, 2]), f4)
    with pytest.raises(GpuraceError, match="cannot give a value of type 'struct P'"):
        scalar_bytes(arg(1), param(0, "p", "scalar", "struct P", 8))


def load_arg_value(value):
    return LaunchSpec.from_dict({"global_size": 1, "arg": [{"value": value}]}).args[0]


# ---------------------------------------------------------------------------
# Errors while loading: file, line, and what to do
# ---------------------------------------------------------------------------

ERRORS = [
    ("kernel = 3\nglobal_size = 4\n", 1, ["kernel must be"]),
    ("kernel = 'k'\n", 0, ["missing key 'global_size'"]),
    ("# x\nglobal_size = [1, 2, 3, 4]\n", 2, ["1 to 3 integers"]),
    ("global_size = 64\nlocal_size = [0]\n", 2, ["at least 1"]),
    ("global_size = 100\nlocal_size = 64\n", 2, ["not a multiple", "dimension x"]),
    ("global_size = 4\nworkgroups = 1\n", 2, ["'workgroups' belongs to a WGSL launch file"]),
    ("global_size = 4\nglobal_sise = 1\n", 2, ["unknown key 'global_sise'", "did you mean"]),
    ("global_size = 4\noptions = [1]\n", 2, ["options must be a list"]),
    ("global_size = 4\nuniform_writes = 'x'\n", 2, ["uniform_writes must be"]),
    ("global_size = 4\n[[arg]]\nname = 'a'\ncout = 3\n", 4, ["unknown key 'cout'", "'count'"]),
    ("global_size = 4\n[[arg]]\nname = 'a'\n", 2, ["argument 0 'a'", "exactly one"]),
    ("global_size = 4\n[[arg]]\nvalue = 1\nlocal = 4\n", 2, ["not value and local"]),
    ("global_size = 4\n[[arg]]\nvalue = 'x'\n", 3, ["value must be a number"]),
    ("global_size = 4\n[[arg]]\nlocal = 0\n", 3, ["local must be a positive"]),
    ("global_size = 4\n[[arg]]\nlocal=4\n[[arg]]\ntype = 'float5'\ncount=1\n", 5, ["'float5'"]),
    ("global_size = 4\n[[arg]]\ncount = 2\n", 2, ["missing key 'type'"]),
    ("global_size = 4\n[[arg]]\ntype = 'int'\n", 2, ["missing key 'count'"]),
    ("global_size = 4\n[[arg]]\ntype = 'char'\ncount = 2\nfill = 300\n", 5, ["does not fit"]),
    ("global_size = 4\n[[arg]]\nname = '1x'\nvalue = 1\n", 3, ["name must be"]),
]


@pytest.mark.parametrize("text,line,words", ERRORS, ids=[str(i) for i in range(len(ERRORS))])
def test_load_errors(tmp_path: Path, text: str, line: int, words: list[str]) -> None:
    path = write(tmp_path, text)
    with pytest.raises(GpuraceError) as info:
        load_launch(path)
    err = info.value
    assert (err.file, err.line) == (str(path), line), str(err)
    for w in words:
        assert w in err.message, err.message
    assert "\n" not in str(err)


# ---------------------------------------------------------------------------
# Checking a launch against the kernel's parameters
# ---------------------------------------------------------------------------

ARGS = """
global_size = 128
local_size = 64
[[arg]]
name = "data"
type = "float"
count = 256
[[arg]]
value = 7
[[arg]]
local = 256
[[arg]]
type = "int"
count = 4
"""


def validate_error(tmp_path: Path, text: str, params=PARAMS, reqd=None) -> GpuraceError:
    spec = load_launch(write(tmp_path, text))
    with pytest.raises(GpuraceError) as info:
        validate_opencl(spec, params, reqd)
    assert info.value.file == spec.path and "\n" not in str(info.value)
    return info.value


def test_valid_args(tmp_path: Path) -> None:
    spec = load_launch(write(tmp_path, ARGS))
    assert validate_opencl(spec, PARAMS) == (64, 1, 1)
    assert validate_opencl(spec, PARAMS, (64, 1, 1)) == (64, 1, 1)
    assert validate_opencl(spec, PARAMS, (0, 0, 0)) == (64, 1, 1)


def test_too_few_and_too_many_args(tmp_path: Path) -> None:
    err = validate_error(tmp_path, ARGS, PARAMS + [param(4, "m", "scalar", "int", 4)])
    assert err.line == 3
    assert "has 5 parameters" in err.message and "gives 4 [[arg]] tables" in err.message
    assert "'m' (int)" in err.message
    err = validate_error(tmp_path, ARGS, PARAMS[:3])
    assert err.line == 11 and "has 3 parameters" in err.message


def test_name_mismatch(tmp_path: Path) -> None:
    err = validate_error(tmp_path, ARGS.replace('"data"', '"dat"'))
    assert err.line == 3
    assert "named 'dat'" in err.message and "parameter 0 'data' (__global float *)" in err.message


@pytest.mark.parametrize(
    "old,new,line,words",
    [
        ("value = 7", 'type = "uint"\ncount = 1', 7, ["parameter 1 'n' (uint) needs value"]),
        ("local = 256", "value = 3", 9, ["'scratch' (__local float *) needs local = BYTES"]),
        ('name = "data"\ntype = "float"\ncount = 256', "value = 1", 3, ["needs a buffer"]),
        ("value = 7", "value = -1", 7, ["does not fit in uint"]),
        ("local = 256", "local = 6", 9, ["6 bytes are not a whole number of float"]),
        ('type = "int"\ncount = 4', 'type = "int"\ncount = 3', 11, ["12 bytes", "int2"]),
    ],
)
def test_kind_mismatch(tmp_path: Path, old: str, new: str, line: int, words: list[str]) -> None:
    assert old in ARGS
    err = validate_error(tmp_path, ARGS.replace(old, new))
    assert err.line == line, str(err)
    for w in words:
        assert w in err.message, err.message


def test_local_size_from_reqd(tmp_path: Path) -> None:
    text = ARGS.replace("local_size = 64\n", "")
    err = validate_error(tmp_path, text)
    assert err.line == 1 and "needs a work-group size" in err.message
    spec = load_launch(write(tmp_path, text))
    assert validate_opencl(spec, PARAMS, (32, 1, 1)) == (32, 1, 1)
    err = validate_error(tmp_path, text, reqd=(48, 1, 1))
    assert err.line == 1 and "not a multiple" in err.message
    err = validate_error(tmp_path, ARGS, reqd=(32, 1, 1))
    assert err.line == 2 and "reqd_work_group_size(32, 1, 1)" in err.message


def test_wrong_kernel_name_names_kernel_key(tmp_path: Path) -> None:
    spec = load_launch(write(tmp_path, 'global_size = 1\nkernel = "k"\n'))
    with pytest.raises(GpuraceError) as info:
        resolve_entry(spec, ["a", "b"])
    assert info.value.line == 2 and "fix kernel = ..." in info.value.message


def test_both_corpora_load() -> None:
    from tests.corpus import all_cases

    found = {}
    for case in all_cases():
        source, spec = case.load()
        assert source and spec.expect["verdict"] in ("race", "clean", "warning")
        assert spec.language == case.language
        found[case.language] = found.get(case.language, 0) + 1
    assert found["wgsl"] >= 40 and found["opencl"] >= 40

"""Oclgrind .sim files load as OpenCL launches; every error names the .sim line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from gpurace.launch import load_launch, validate_opencl
from gpurace.launch_sim import bind_sim_args, load_sim
from gpurace.model import Binding, GpuraceError

CORPUS = Path(__file__).parent / "corpus" / "opencl"


def write(tmp_path: Path, text: str, name: str = "k.sim") -> Path:
    (tmp_path / "k.cl").write_text("__kernel void k(__global float *a) {}\n")
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def param(index: int, name: str, kind: str, elem: str, stride: int) -> Binding:
    return Binding(0, index, name, kind, "read_write", None, stride, elem, None)


FULL = """
# a full simulator file
k.cl            # the kernel source
k
128 2 1
64 1
<size=16 float range=0:0.5:1.5>
<size=8 int fill=-3 dump>
<local size=256>
<int> 42
<type=uint size=8 hex>
  ff 10
<size=4 noinit>
<short> 1 -2 3   # inline values
<file=data.bin ushort>
<uchar size=2> 7 8 <int> 9
"""


def test_full_sim_file(tmp_path: Path) -> None:
    (tmp_path / "data.bin").write_bytes(np.array([5, 6], np.uint16).tobytes())
    path = write(tmp_path, FULL)
    kernel, spec = load_sim(path)
    assert kernel == str(tmp_path / "k.cl")
    assert spec.language == "opencl" and spec.entry == "k" and spec.path == str(path)
    assert spec.global_size == (128, 2, 1) and spec.local_size == (64, 1, 1)
    assert spec.workgroups == (2, 2, 1) and spec.options == []
    assert [(a.index, a.kind, a.line) for a in spec.args] == [
        (0, "buffer", 6),
        (1, "buffer", 7),
        (2, "local", 8),
        (3, "buffer", 9),
        (4, "buffer", 10),
        (5, "buffer", 12),
        (6, "buffer", 13),
        (7, "buffer", 14),
        (8, "buffer", 15),
        (9, "buffer", 15),
    ]
    data = [a.buffer.data if a.buffer is not None else None for a in spec.args]
    assert data[0].dtype == np.float32 and data[0].tolist() == [0, 0.5, 1, 1.5]
    assert data[1].dtype == np.int32 and data[1].tolist() == [-3, -3]
    assert spec.args[2].local_bytes == 256
    assert data[3].dtype == np.int32 and data[3].tolist() == [42]
    assert data[4].dtype == np.uint32 and data[4].tolist() == [255, 16]
    assert data[5].dtype == np.uint8 and data[5].tolist() == [0, 0, 0, 0]
    assert data[6].dtype == np.int16 and data[6].tolist() == [1, -2, 3]
    assert data[7].dtype == np.uint16 and data[7].tolist() == [5, 6]
    assert data[8].tolist() == [7, 8] and data[9].tolist() == [9]
    assert spec.buffers[0] is spec.args[0].buffer and spec.buffers[0].binding == 0
    assert spec.key_lines["global_size"] == 4 and spec.key_lines["arg"] == 6


def test_inline_values_across_headers(tmp_path: Path) -> None:
    _, spec = load_sim(write(tmp_path, "k.cl\nk\n4\n4\n<uchar size=2> 7 8 <int> 9\n"))
    assert [a.buffer.data.tolist() for a in spec.args] == [[7, 8], [9]]
    assert [a.buffer.type for a in spec.args] == ["uchar", "int"]


def test_bind_scalars_and_validate(tmp_path: Path) -> None:
    text = "k.cl\nk\n128\n64\n<size=512 float fill=1>\n<int> 7\n<size=4 fill=0>\n<local size=64>\n"
    _, spec = load_sim(write(tmp_path, text))
    params = [
        param(0, "a", "global", "float", 4),
        param(1, "n", "scalar", "int", 4),
        param(2, "x", "scalar", "float", 4),
        param(3, "t", "local", "float", 4),
    ]
    bound = bind_sim_args(spec, params)
    assert [a.kind for a in bound.args] == ["buffer", "scalar", "scalar", "local"]
    assert bound.args[1].value == 7 and bound.args[2].value == 0.0
    assert bound.buffers == [spec.args[0].buffer]
    assert validate_opencl(bound, params) == (64, 1, 1)
    with pytest.raises(GpuraceError) as info:  # one argument short
        validate_opencl(bound, params + [param(4, "m", "scalar", "int", 4)])
    assert info.value.file == spec.path and "has 5 parameters" in info.value.message
    with pytest.raises(GpuraceError) as info:  # 4 bytes for an 8-byte parameter
        bind_sim_args(spec, [params[0], param(1, "n", "scalar", "long", 8)])
    assert (info.value.line, info.value.file) == (6, spec.path)
    assert "8 bytes" in info.value.message


def test_same_launch_as_the_corpus_toml(tmp_path: Path) -> None:
    """A .sim for a corpus kernel gives the same launch as its TOML launch file."""
    (tmp_path / "k.cl").write_text((CORPUS / "transpose_2d_clean.cl").read_text())
    sim = write(
        tmp_path,
        """
        k.cl
        transpose
        16 16 1
        8 8 1
        <size=1024 float range=0:1:255>
        <size=1024 float fill=0 dump>
        <int> 16
        """,
    )
    _, spec = load_sim(sim)
    toml = load_launch(CORPUS / "transpose_2d_clean.toml")
    params = [
        param(0, "in", "global", "float", 4),
        param(1, "out", "global", "float", 4),
        param(2, "width", "scalar", "int", 4),
    ]
    spec = bind_sim_args(spec, params)
    assert (spec.entry, spec.global_size, spec.local_size, spec.workgroups) == (
        toml.entry,
        toml.global_size,
        toml.local_size,
        toml.workgroups,
    )
    for a, b in zip(spec.args, toml.args, strict=True):
        assert a.kind == b.kind and a.value == b.value
        if a.buffer is not None:
            assert a.buffer.data.tobytes() == b.buffer.data.tobytes()
    assert validate_opencl(spec, params) == validate_opencl(toml, params)


ERRORS = [
    ("k.cl\nk\n", 2, ["ends before the global size"]),
    ("", 0, ["ends before the kernel source file"]),
    ("nope.cl\nk\n4\n4\n", 1, ["kernel file 'nope.cl' not found"]),
    ("k.bc\nk\n4\n4\n", 1, ["SPIR"]),
    ("k.cl\n1k\n4\n4\n", 2, ["not a kernel name"]),
    ("k.cl\nk\n4 4 4 4\n4\n", 3, ["global size must be 1 to 3"]),
    ("k.cl\nk\n# c\n100\n64\n", 5, ["not a multiple"]),
    ("k.cl\nk\n4\n4\n7\n", 5, ["'7' is not an argument header"]),
    ("k.cl\nk\n4\n4\n<size=4\n", 5, ["enclosed in <...> on one line"]),
    ("k.cl\nk\n4\n4\n<int>\n<sise=4>\n", 5, ["argument 0: no data"]),
    ("k.cl\nk\n4\n4\n<int> 1\n<sise=4>\n", 6, ["unknown header token 'sise=4'"]),
    ("k.cl\nk\n4\n4\n<type=float4 size=16 fill=0>\n", 5, ["unknown type 'float4'"]),
    ("k.cl\nk\n4\n4\n<size=0 fill=1>\n", 5, ["size must be a positive"]),
    ("k.cl\nk\n4\n4\n<int fill=1>\n", 5, ["fill needs size=N"]),
    ("k.cl\nk\n4\n4\n<int size=6 fill=1>\n", 5, ["not a whole number of int"]),
    ("k.cl\nk\n4\n4\n<int size=8 fill=1> 3\n", 5, ["one source of data"]),
    ("k.cl\nk\n4\n4\n<int size=8 range=0:1:5>\n", 5, ["gives 6 values", "holds 2"]),
    ("k.cl\nk\n4\n4\n<int size=8 range=0:-1:5>\n", 5, ["never reaches"]),
    ("k.cl\nk\n4\n4\n<int size=8 range=1:2>\n", 5, ["START:STEP:END"]),
    ("k.cl\nk\n4\n4\n<uchar> 300\n", 5, ["does not fit in uint8"]),
    ("k.cl\nk\n4\n4\n<int> x\n", 5, ["'x' is not a int32 value"]),
    ("k.cl\nk\n4\n4\n<int size=8> 1\n", 5, ["1 int values are 4 bytes but size=8"]),
    ("k.cl\nk\n4\n4\n<local>\n", 5, ["needs size=N"]),
    ("k.cl\nk\n4\n4\n<local size=8 fill=0>\n", 5, ["takes no data"]),
    ("k.cl\nk\n4\n4\n<file=none.bin>\n", 5, ["cannot read 'none.bin'"]),
    ("k.cl\nk\n4\n4\n<int size=4 size=8>\n", 5, ["'size' is given twice"]),
]


@pytest.mark.parametrize("text,line,words", ERRORS, ids=[str(i) for i in range(len(ERRORS))])
def test_errors(tmp_path: Path, text: str, line: int, words: list[str]) -> None:
    path = write(tmp_path, text)
    with pytest.raises(GpuraceError) as info:
        load_sim(path)
    err = info.value
    assert (err.file, err.line) == (str(path), line), str(err)
    for w in words:
        assert w in err.message, err.message
    assert "\n" not in str(err)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(GpuraceError, match="simulator file not found"):
        load_sim(tmp_path / "none.sim")

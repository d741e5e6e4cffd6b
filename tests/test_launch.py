"""Launch files: every fill kind, and every error names the launch file and its line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from gpurace.launch import (
    BufferSpec,
    LaunchSpec,
    load_launch,
    resolve_entry,
    validate_against,
)
from gpurace.model import Binding, GpuraceError


def write(tmp_path: Path, text: str, name: str = "k.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def one_buffer(tmp_path: Path, table: str, top: str = "workgroups = [2]\n") -> BufferSpec:
    spec = load_launch(write(tmp_path, top + "[[binding]]\n" + textwrap.dedent(table)))
    assert len(spec.buffers) == 1
    return spec.buffers[0]


def error_of(tmp_path: Path, text: str) -> GpuraceError:
    path = write(tmp_path, text)
    with pytest.raises(GpuraceError) as info:
        load_launch(path)
    assert info.value.file == str(path)
    return info.value


# ---------------------------------------------------------------------------
# A full file
# ---------------------------------------------------------------------------


def test_full_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        entry = "main"            # comment
        workgroups = [4, 2]
        uniform_writes = "race"

        [[binding]]
        group = 0
        binding = 0
        type = "f32"
        count = 256
        fill = "arange"

        [[binding]]
        group = 1
        binding = 3
        type = "u32"
        count = 4

        [expect]
        verdict = "race"
        [[expect.race]]
        class = "local"
        a = "12:5"
        b = "14:9"
        kinds = ["store", "load"]
        """,
    )
    spec = load_launch(path)
    assert spec.entry == "main"
    assert spec.workgroups == (4, 2, 1)
    assert spec.uniform_writes == "race"
    assert spec.path == str(path)
    assert [(b.group, b.binding, b.type, b.count) for b in spec.buffers] == [
        (0, 0, "f32", 256),
        (1, 3, "u32", 4),
    ]
    assert [b.line for b in spec.buffers] == [7, 14]
    assert spec.buffers[0].nbytes == 1024
    assert spec.buffer(1, 3) is spec.buffers[1]
    assert spec.buffer(0, 9) is None
    assert spec.expect == {
        "verdict": "race",
        "race": [{"class": "local", "a": "12:5", "b": "14:9", "kinds": ["store", "load"]}],
    }


def test_defaults(tmp_path: Path) -> None:
    spec = load_launch(write(tmp_path, "workgroups = 3\n"))
    assert spec.entry is None
    assert spec.workgroups == (3, 1, 1)
    assert spec.buffers == []
    assert spec.uniform_writes is None
    assert spec.expect is None


# ---------------------------------------------------------------------------
# Fill kinds
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "typ,dtype", [("f32", np.float32), ("i32", np.int32), ("u32", np.uint32), ("f16", np.float16)]
)
def test_zeros_is_default(tmp_path: Path, typ: str, dtype: type) -> None:
    buf = one_buffer(tmp_path, f'binding = 0\ntype = "{typ}"\ncount = 5\n')
    assert buf.data.dtype == np.dtype(dtype)
    assert buf.data.dtype.byteorder in "<=|"
    assert buf.data.tolist() == [0] * 5
    assert buf.count == 5 and buf.type == typ and buf.group == 0


@pytest.mark.parametrize("typ", ["f32", "i32", "u32", "f16"])
def test_arange(tmp_path: Path, typ: str) -> None:
    buf = one_buffer(tmp_path, f'binding = 1\ntype = "{typ}"\ncount = 6\nfill = "arange"\n')
    assert buf.data.tolist() == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("typ", ["f32", "f16"])
def test_random_floats(tmp_path: Path, typ: str) -> None:
    table = f'binding = 0\ntype = "{typ}"\ncount = 4096\nfill = "random"\nseed = 7\n'
    a = one_buffer(tmp_path, table).data
    b = one_buffer(tmp_path, table).data
    c = one_buffer(tmp_path, table.replace("seed = 7", "seed = 8")).data
    assert a.dtype == np.dtype(typ.replace("f", "float"))
    assert np.array_equal(a, b)  # deterministic for a seed
    assert not np.array_equal(a, c)
    assert a.min() >= 0 and a.max() < 1
    assert len(np.unique(a)) > 100


@pytest.mark.parametrize("typ", ["i32", "u32"])
def test_random_ints(tmp_path: Path, typ: str) -> None:
    table = f'binding = 0\ntype = "{typ}"\ncount = 4096\nfill = "random"\n'
    a = one_buffer(tmp_path, table).data
    assert a.min() >= 0 and a.max() < 1000 and a.max() > 900
    assert np.array_equal(a, one_buffer(tmp_path, table + "seed = 0\n").data)  # default seed 0


@pytest.mark.parametrize(
    "typ,fill,value",
    [
        ("f32", "1.5", 1.5),
        ("f16", "-2", -2.0),
        ("i32", "-3", -3),
        ("u32", "7", 7),
        ("i32", "4.0", 4),
    ],
)
def test_constant(tmp_path: Path, typ: str, fill: str, value: float) -> None:
    buf = one_buffer(tmp_path, f'binding = 0\ntype = "{typ}"\ncount = 3\nfill = {fill}\n')
    assert buf.data.tolist() == [value] * 3


def test_npy_relative_to_launch_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "data").mkdir()
    np.save(tmp_path / "data" / "x.npy", np.arange(8, dtype=np.float32) * 0.5)
    path = write(
        tmp_path,
        """
        workgroups = [1]
        [[binding]]
        binding = 0
        type = "f32"
        count = 8
        fill = "data/x.npy"
        """,
    )
    monkeypatch.chdir("/")
    buf = load_launch(path).buffers[0]
    assert buf.data.dtype == np.float32
    assert buf.data.tolist() == [i * 0.5 for i in range(8)]


def test_npy_count_optional_and_lossless_conversion(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.arange(12).reshape(3, 4))  # int64, 2-D
    buf = one_buffer(tmp_path, 'binding = 0\ntype = "u32"\nfill = "x.npy"\n')
    assert buf.count == 12
    assert buf.data.dtype == np.uint32
    assert buf.data.tolist() == list(range(12))


def test_from_dict(tmp_path: Path) -> None:
    np.save(tmp_path / "y.npy", np.ones(4, np.int32))
    spec = LaunchSpec.from_dict(
        {
            "workgroups": (2, 2),
            "binding": [
                {"binding": 0, "type": "i32", "fill": "y.npy"},
                {"binding": 1, "type": "f32", "fill": np.linspace(0, 1, 5)},
                {"group": 1, "binding": 0, "type": "u32", "count": 2, "fill": 9},
            ],
        },
        base_dir=str(tmp_path),
    )
    assert spec.workgroups == (2, 2, 1)
    assert spec.buffers[0].data.tolist() == [1, 1, 1, 1]
    assert spec.buffers[1].data.dtype == np.float32 and spec.buffers[1].count == 5
    assert spec.buffers[2].data.tolist() == [9, 9]
    with pytest.raises(GpuraceError, match="workgroups"):
        LaunchSpec.from_dict({"binding": []}, path="api")


# ---------------------------------------------------------------------------
# Errors: file, line, and what to do
# ---------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(GpuraceError) as info:
        load_launch(tmp_path / "nope.toml")
    assert info.value.line == 0
    assert str(info.value).startswith(f"{tmp_path / 'nope.toml'}: error: launch file not found")


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "k.toml"
    path.write_bytes(b'workgroups = [1]\nentry = "\xff"\n')
    with pytest.raises(GpuraceError, match="UTF-8"):
        load_launch(path)


def test_invalid_toml_has_line_and_column(tmp_path: Path) -> None:
    err = error_of(tmp_path, 'workgroups = [1]\n\n[[binding]]\nbinding = \ntype = "f32"\n')
    assert (err.line, err.col) == (4, 11)
    assert "invalid TOML" in err.message
    assert "(at line" not in err.message
    assert str(err).startswith(f"{tmp_path / 'k.toml'}:4:11: error: invalid TOML")


ERRORS = [
    # (file text, line, words in the message)
    ("workgroups = [1]\nworkgroup = 3\n", 2, ["unknown key 'workgroup'", "did you mean"]),
    ("entry = 3\nworkgroups = [1]\n", 1, ["entry must be"]),
    ("entry = 'main'\n", 0, ["missing key 'workgroups'", "workgroups = [4, 1, 1]"]),
    ("# grid\nworkgroups = [1, 2, 3, 4]\n", 2, ["1 to 3 integers"]),
    ("workgroups = [0, 1]\n", 1, ["at least 1"]),
    ('workgroups = ["4"]\n', 1, ["1 to 3 integers"]),
    ('workgroups = 1\nuniform_writes = "ignore"\n', 2, ['"race" or "tolerate"']),
    ("workgroups = 1\nexpect = 3\n", 2, ["expect must be a table"]),
    ("workgroups = 1\nbinding = 3\n", 2, ["list of tables"]),
    (
        'workgroups = 1\n[[binding]]\ntype = "f32"\ncount = 1\n',
        2,
        ["no 'binding = N' key"],
    ),
    ('workgroups = 1\n[[binding]]\nbinding = -1\ntype = "f32"\ncount = 1\n', 3, ["non-negative"]),
    (
        'workgroups = 1\n[[binding]]\ngroup = 4\nbinding = 0\ntype = "f32"\ncount = 1\n',
        3,
        ["bind group number from 0 to 3"],
    ),
    ("workgroups = 1\n[[binding]]\nbinding = 0\ncount = 1\n", 2, ["missing key 'type'"]),
    (
        'workgroups = 1\n[[binding]]\nbinding = 0\ntype = "f64"\ncount = 1\n',
        4,
        ["unknown type 'f64'", "f32, i32, u32, f16"],
    ),
    ('workgroups = 1\n[[binding]]\nbinding = 0\ntype = "f32"\n', 2, ["missing key 'count'"]),
    ('workgroups = 1\n[[binding]]\nbinding = 0\ntype = "f32"\ncount = 0\n', 5, ["positive"]),
    (
        'workgroups = 1\n[[binding]]\nbinding = 0\ntype = "f32"\ncout = 3\n',
        5,
        ["unknown key 'cout'", "did you mean 'count'"],
    ),
    (
        'workgroups = 1\n[[binding]]\nbinding = 0\ntype = "f32"\ncount = 2\nfill = "ones"\n',
        6,
        ["unknown fill 'ones'", '"zeros", "arange", "random", "uninit", a number'],
    ),
    (
        'workgroups = 1\n[[binding]]\nbinding = 0\ntype = "i32"\ncount = 2\nfill = 1.5\n',
        6,
        ["not an integer"],
    ),
    (
        'workgroups = 1\n[[binding]]\nbinding = 0\ntype = "u32"\ncount = 2\nfill = -1\n',
        6,
        ["does not fit in u32"],
    ),
    (
        'workgroups = 1\n[[binding]]\nbinding = 0\ntype = "f16"\ncount = 2\nfill = 1e6\n',
        6,
        ["does not fit in f16"],
    ),
    (
        'workgroups = 1\n[[binding]]\nbinding = 0\ntype = "f32"\ncount = 2\nfill = true\n',
        6,
        ["fill must be"],
    ),
    (
        'workgroups = 1\n[[binding]]\nbinding = 0\ntype = "f32"\ncount = 2\n'
        'fill = "random"\nseed = -4\n',
        7,
        ["seed must be"],
    ),
    (
        'workgroups = 1\n[[binding]]\nbinding = 0\ntype = "f32"\ncount = 2\nfill = "no.npy"\n',
        6,
        ["'no.npy' not found", "relative to the launch file"],
    ),
    (
        'workgroups = 1\n[[binding]]\nbinding = 0\ntype = "f32"\ncount = 2\n\n'
        '[[binding]]\n# the same again\n  binding = 0\ntype = "f32"\ncount = 2\n',
        9,
        ["second table for group 0, binding 0", "one table per binding"],
    ),
]


@pytest.mark.parametrize("text,line,words", ERRORS)
def test_errors_name_the_line(tmp_path: Path, text: str, line: int, words: list[str]) -> None:
    err = error_of(tmp_path, text)
    assert err.line == line, str(err)
    for word in words:
        assert word in err.message, str(err)
    prefix = f"{tmp_path / 'k.toml'}:{line}: error: " if line else f"{tmp_path / 'k.toml'}: error: "
    assert str(err).startswith(prefix)
    assert "\n" not in str(err)


def test_line_lookup_ignores_other_tables(tmp_path: Path) -> None:
    # `binding = 0` appears in the first table too; the error is the second table's line
    text = (
        'workgroups = 1\n[[binding]]\nbinding = 0\ntype = "f32"\ncount = 2\n'
        '[expect]\nverdict = "race"\n'
        '[[binding]]\nbinding = 1\ntype = "f32"\ncount = 2\nfill = "zero"\n'
    )
    err = error_of(tmp_path, text)
    assert err.line == 12
    assert "did you mean 'zeros'" in err.message


def test_npy_wrong_count(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros(3, np.float32))
    err = error_of(
        tmp_path,
        'workgroups = 1\n[[binding]]\nbinding = 0\ntype = "f32"\ncount = 4\nfill = "x.npy"\n',
    )
    assert err.line == 6
    assert "holds 3 elements but count = 4" in err.message


def test_npy_lossy_dtype(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.array([0.1, 0.2]))  # float64 that f32 cannot hold exactly
    err = error_of(
        tmp_path, 'workgroups = 1\n[[binding]]\nbinding = 0\ntype = "f32"\nfill = "x.npy"\n'
    )
    assert err.line == 5
    assert "float64" in err.message and ".astype(np.float32)" in err.message


def test_npy_not_an_npy(tmp_path: Path) -> None:
    (tmp_path / "x.npy").write_text("hello")
    err = error_of(
        tmp_path, 'workgroups = 1\n[[binding]]\nbinding = 0\ntype = "f32"\nfill = "x.npy"\n'
    )
    assert err.line == 5 and "cannot read 'x.npy'" in err.message


# ---------------------------------------------------------------------------
# Against the kernel
# ---------------------------------------------------------------------------


def binding(group: int, num: int, name: str, size: int | None, stride: int = 4) -> Binding:
    return Binding(group, num, name, "storage", "read_write", size, stride, "f32", None)


KERNEL_LAUNCH = """
workgroups = [1]
entry = "main"

[[binding]]
binding = 0
type = "f32"
count = 64

[[binding]]
binding = 1
type = "u32"
count = 6
"""


def test_validate_ok(tmp_path: Path) -> None:
    spec = load_launch(write(tmp_path, KERNEL_LAUNCH))
    validate_against(spec, [binding(0, 0, "a", None), binding(0, 1, "b", 24)], ["main"])
    validate_against(spec, [binding(0, 0, "a", 256), binding(0, 1, "b", 16)], ["main", "x"])


def test_validate_missing_binding(tmp_path: Path) -> None:
    spec = load_launch(write(tmp_path, KERNEL_LAUNCH))
    b = [binding(0, 0, "a", None), binding(0, 1, "b", 24), binding(2, 0, "out", None)]
    with pytest.raises(GpuraceError) as info:
        validate_against(spec, b, ["main"])
    msg = info.value.message
    assert "@group(2) @binding(0) 'out'" in msg
    assert "add [[binding]] with group = 2, binding = 0" in msg
    assert info.value.file == spec.path


def test_validate_extra_table(tmp_path: Path) -> None:
    spec = load_launch(write(tmp_path, KERNEL_LAUNCH))
    with pytest.raises(GpuraceError) as info:
        validate_against(spec, [binding(0, 0, "a", None)], ["main"])
    assert info.value.line == 10
    assert "declares no buffer at group 0, binding 1" in info.value.message
    assert "group 0 binding 0 'a'" in info.value.message


def test_validate_too_small(tmp_path: Path) -> None:
    spec = load_launch(write(tmp_path, KERNEL_LAUNCH))
    with pytest.raises(GpuraceError) as info:
        validate_against(spec, [binding(0, 0, "a", None), binding(0, 1, "b", 32)], ["main"])
    assert info.value.line == 10
    assert "24 bytes (6 x u32)" in info.value.message
    assert "needs 32 bytes; set count = 8" in info.value.message


def test_validate_whole_elements(tmp_path: Path) -> None:
    spec = load_launch(write(tmp_path, KERNEL_LAUNCH))
    b = [binding(0, 0, "a", None), binding(0, 1, "b", None, stride=16)]
    with pytest.raises(GpuraceError) as info:
        validate_against(spec, b, ["main"])
    assert info.value.line == 10
    assert "not a whole number" in info.value.message
    assert "multiple of 4" in info.value.message


def test_validate_entry(tmp_path: Path) -> None:
    spec = load_launch(write(tmp_path, KERNEL_LAUNCH))
    b = [binding(0, 0, "a", None), binding(0, 1, "b", None)]
    with pytest.raises(GpuraceError) as info:
        validate_against(spec, b, ["other"])
    assert info.value.line == 2
    assert "entry 'main' is not an entry point" in info.value.message


def test_resolve_entry(tmp_path: Path) -> None:
    spec = load_launch(write(tmp_path, "workgroups = 1\n"))
    assert resolve_entry(spec, ["only"]) == "only"
    assert resolve_entry(spec, ["a", "b"], override="b") == "b"
    with pytest.raises(GpuraceError, match="several entry points"):
        resolve_entry(spec, ["a", "b"])
    with pytest.raises(GpuraceError, match="--entry 'c'"):
        resolve_entry(spec, ["a", "b"], override="c")
    with pytest.raises(GpuraceError, match="no compute entry point"):
        resolve_entry(spec, [])

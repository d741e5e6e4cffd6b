"""Aliased bindings (``alias = N``): one buffer at two bindings, in the launch file,
the backend and the check; every bad alias is an error at its table's line."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from gpurace import api
from gpurace.backends import wgpu_backend
from gpurace.launch import LaunchSpec, load_launch, validate_against
from gpurace.launch.alias import aliases_of
from gpurace.model import Binding, Event, GpuraceError, Kind, pack_flags
from gpurace.target import realias
from tests.corpus import reported

OWNER = 'workgroups = [1]\n[[binding]]\nbinding = 0\ntype = "u32"\ncount = 64\nfill = "arange"\n'


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "k.toml"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def test_an_alias_views_the_bytes_of_the_buffer_it_names(tmp_path: Path) -> None:
    spec = load_launch(
        write(
            tmp_path,
            OWNER + "[[binding]]\nbinding = 1\nalias = 0\n"
            '[[binding]]\nbinding = 2\nalias = [0, 0]\noffset = 128\nsize = 64\ntype = "f32"\n',
        )
    )
    owner, whole, part = spec.buffers
    assert (owner.alias, whole.alias, part.alias) == (None, (0, 0), (0, 0))
    assert (whole.type, whole.count, whole.offset, whole.nbytes) == ("u32", 64, 0, 256)
    assert (part.type, part.count, part.offset, part.nbytes) == ("f32", 16, 128, 64)
    assert whole.data.tobytes() == owner.data.tobytes()
    assert part.data.tobytes() == np.arange(32, 48, dtype="<u4").tobytes()
    assert (whole.line, part.line) == (8, 11)  # their `binding = N` lines


ERRORS = [
    ("binding = 1\nalias = 3\n", 9, ["alias names group 0, binding 3, which has no table"]),
    ("binding = 1\nalias = 1\n", 9, ["cannot alias itself"]),
    (
        "binding = 1\nalias = 0\n[[binding]]\nbinding = 2\nalias = 1\n",
        12,
        ["binding 2: alias names group 0, binding 1, itself an alias", "group 0, binding 0"],
    ),
    (
        "binding = 1\nalias = 0\noffset = 192\nsize = 128\n",
        9,
        ["range [192, 320) is outside the 256 bytes of group 0, binding 0"],
    ),
    ("binding = 1\nalias = 0\noffset = 256\n", 9, ["range [256, 256) is outside"]),
    ("binding = 1\nalias = 0\nfill = 1\n", 10, ["'fill' cannot be given on an alias"]),
    ("binding = 1\nalias = 0\ncount = 4\n", 10, ["'count' cannot be given on an alias"]),
    ('binding = 1\nalias = "0"\n', 9, ["alias must be the binding number", "[group, binding]"]),
    ("binding = 1\nalias = [0]\n", 9, ["alias must be the binding number"]),
    ("binding = 1\nalias = 0\noffset = 6\n", 10, ["offset must be", "multiple of 4, not 6"]),
    ("binding = 1\nalias = 0\nsize = 0\n", 10, ["size must be a byte count > 0"]),
    (
        'binding = 1\nalias = 0\nsize = 12\ntype = "u64"\n',
        9,
        ["size 12 is not a whole number of u64 elements (8 bytes each)"],
    ),
    ('binding = 1\nalias = 0\ntype = "f64"\n', 10, ["unknown type 'f64'"]),
    (
        'binding = 1\ntype = "u32"\ncount = 4\noffset = 256\n',
        11,
        ["'offset' is a key of an alias table: add alias = N"],
    ),
    ("binding = 1\nalias = 0\nstride = 4\n", 10, ["unknown key 'stride'", "alias)"]),
]


@pytest.mark.parametrize("table,line,words", ERRORS)
def test_bad_aliases_name_the_line(tmp_path: Path, table: str, line: int, words: list) -> None:
    path = write(tmp_path, OWNER + "[[binding]]\n" + table)
    with pytest.raises(GpuraceError) as info:
        load_launch(path)
    err = info.value
    assert (err.file, err.line) == (str(path), line), str(err)
    for word in words:
        assert word in err.message, str(err)
    assert "\n" not in str(err)


def _binding(num: int, name: str, kind: str = "storage", access: str = "read_write") -> Binding:
    return Binding(0, num, name, kind, access, None, 4, "u32", num if kind == "storage" else None)


@pytest.mark.parametrize(
    "access,kind,shown", [("read", "storage", "storage, read"), ("read", "uniform", "uniform")]
)
def test_a_writable_and_a_read_only_view_are_refused(
    tmp_path: Path, access: str, kind: str, shown: str
) -> None:
    spec = load_launch(write(tmp_path, OWNER + "[[binding]]\nbinding = 1\nalias = 0\n"))
    with pytest.raises(GpuraceError) as info:
        validate_against(spec, [_binding(0, "a"), _binding(1, "b", kind, access)])
    assert info.value.line == 8
    assert info.value.message.startswith(
        f"group 0, binding 1 'b' ({shown}) aliases group 0, binding 0 'a' (storage, read_write): "
        "WebGPU refuses one buffer bound both writable and read-only in a dispatch"
    )
    # two read-only views, or two writable ones, are what WebGPU allows
    validate_against(spec, [_binding(0, "a"), _binding(1, "b")])
    validate_against(spec, [_binding(0, "a", access="read"), _binding(1, "b", access="read")])


COPY = """
@group(0) @binding(0) var<storage, read_write> whole: array<u32>;
@group(0) @binding(1) var<storage, read_write> part: array<u32>;

@compute @workgroup_size(16)
fn main(@builtin(local_invocation_index) i: u32) {
    part[i] = whole[i] + 100u;
}
"""


def _copy_launch(offset: int) -> LaunchSpec:
    return LaunchSpec.from_dict(
        {
            "workgroups": [1],
            "binding": [
                {"binding": 0, "type": "u32", "count": 64, "fill": "arange"},
                {"binding": 1, "alias": 0, "offset": offset, "size": 64},
            ],
        },
        path="copy.toml",
    )


def test_the_backend_binds_one_buffer_at_both_bindings() -> None:
    """Words 0-15 are read through `whole` and written, +100, through `part` at byte
    128: the owner's buffer shows the writes at words 32-47, its other words untouched."""
    spec = _copy_launch(128)
    inst = api.instrument(COPY, "copy.wgsl")
    dev = wgpu_backend.get_device()[0]
    data = {(b.group, b.binding): b.data for b in spec.buffers}
    views = {(0, 1): ((0, 0), 128)}
    out = wgpu_backend.launch(dev, COPY, "copy.wgsl", "main", inst.bindings, data, (1, 1, 1),
                              aliases=views).outputs  # fmt: skip
    want = np.arange(64, dtype=np.uint32)
    want[32:48] = np.arange(16) + 100
    assert np.array_equal(out[(0, 0)], want)
    assert np.array_equal(out[(0, 1)], want[32:48])


def test_the_copy_races_only_where_the_ranges_overlap() -> None:
    """At byte 32 `part[i]` is word i + 8, which work-item i + 8 reads through `whole`:
    8 words (8-15) written by one work-item and read by another; at byte 64 none."""
    report = api.check(COPY, _copy_launch(32), path="copy.wgsl")
    assert reported(report) == [("global-intra", ("7:15", "load"), ("7:5", "store"))]
    race = report.races[0]
    assert (race.instances, race.pairs, race.var, race.address) == (8, 8, 0, 32)
    assert api.check(COPY, _copy_launch(64), path="copy.wgsl").races == []


def test_an_offset_off_the_device_alignment_is_an_error_at_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        OWNER + "[[binding]]\nbinding = 1\nalias = 0\noffset = 16\nsize = 64\n",
    )
    with pytest.raises(GpuraceError) as info:
        api.check(COPY, load_launch(path), path="copy.wgsl")
    assert (info.value.file, info.value.line) == (str(path), 8)
    assert "min-storage-buffer-offset-alignment" in info.value.message
    assert "offset 16" in info.value.message


def test_aliases_of_a_programs_bindings() -> None:
    """`gpurace run`'s bound ranges: overlapping ranges of one buffer become aliases of
    the widest; disjoint ranges and other buffers stay buffers of their own."""
    one, two = object(), object()
    ranges = {
        (0, 0): (one, 256, 256),
        (0, 1): (one, 0, 1024),  # holds (0, 0) and (0, 2)
        (0, 2): (one, 512, 512),
        (0, 3): (one, 1024, 64),  # just after (0, 1): disjoint
        (1, 0): (two, 0, 64),
        (1, 1): (two, 0, 64),  # the same range: the lower binding owns it
    }
    assert aliases_of(ranges) == {
        (0, 0): ((0, 1), 256),
        (0, 2): ((0, 1), 512),
        (1, 1): ((1, 0), 0),
    }
    with pytest.raises(GpuraceError, match="overlapping ranges of one buffer, neither holding"):
        aliases_of({(0, 0): (one, 0, 512), (0, 1): (one, 256, 512)})


def test_gpurace_repeat_refuses_an_aliased_launch_at_its_line() -> None:
    root = Path(__file__).resolve().parent.parent
    case = "tests/corpus/wgsl/alias_disjoint_halves"
    p = subprocess.run(
        [sys.executable, "-m", "gpurace", "repeat", f"{case}.wgsl", "--runs", "2"],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp")},
    )
    assert p.returncode == 2
    assert p.stderr.strip() == (
        f"{case}.toml:15: error: group 0, binding 1 aliases group 0, binding 0: determinism "
        "replays do not bind one buffer at two bindings yet; check its races with gpurace "
        "check / --tool race"
    )


def test_realias_moves_accesses_through_an_alias_and_nothing_else() -> None:
    """Var 0 aliases var 2 at byte 512: its load and store become var 2's, 512 bytes on;
    var 1's access and the barrier event (whose var field is 0 too) stay as they were."""
    load = pack_flags(int(Kind.LOAD), 0, 4, 0)
    store = pack_flags(int(Kind.STORE), 0, 4, 0)
    other = pack_flags(int(Kind.STORE), 0, 4, 1)
    barrier = pack_flags(int(Kind.EVENT), 0, 0, 0, False, int(Event.BARRIER))
    records = np.array(
        [[0, load, 8, 1, 0, 0, 0, 0], [1, store, 12, 2, 0, 0, 5, 0],
         [2, other, 8, 3, 0, 0, 6, 0], [3, barrier, 0, 4, 0, 1, 0, 1]],
        dtype=np.uint32,
    )  # fmt: skip
    got = realias(records, {0: (2, 512)})
    want = records.copy()
    want[0, 1:3] = [pack_flags(int(Kind.LOAD), 0, 4, 2), 520]
    want[1, 1:3] = [pack_flags(int(Kind.STORE), 0, 4, 2), 524]
    assert np.array_equal(got, want)
    assert records[0, 2] == 8  # the log read back is not modified

"""WGSL front-end edges: naga's reason at the user's position, 64-bit integers and the
device features they need, and override constants set by launch files."""

from __future__ import annotations

import pytest

from gpurace import api
from gpurace.backends import wgpu_backend
from gpurace.backends.naga_errors import naga_error
from gpurace.instrument.wgsl.overrides import set_overrides, substitute
from gpurace.launch import load_launch
from gpurace.model import GpuraceError
from tests.test_cli_end_to_end import _one_line_error, gpurace

LAUNCH = 'workgroups = [1, 1, 1]\n[[binding]]\nbinding = 0\ntype = "u32"\ncount = 64\n'
HEAD = (
    "@group(0) @binding(0) var<storage, read_write> data: array<u32>;\n"
    "@compute @workgroup_size(64)\n"
    "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
)


def check_error(tmp_path, body: str, launch: str = LAUNCH) -> str:
    (tmp_path / "k.wgsl").write_text(HEAD + body + "}\n", encoding="utf-8")
    (tmp_path / "k.toml").write_text(launch)
    return _one_line_error(gpurace("check", "k.wgsl", "--launch", "k.toml", cwd=tmp_path))


def test_type_error_is_naga_reason_at_the_user_position(tmp_path):
    line = check_error(tmp_path, "    let x: f32 = data[gid.x];\n")
    assert line == (
        "k.wgsl:4:9: error: the type of `x` is expected to be `f32`, but got `u32` "
        "(definition of `x`)"
    )


def test_column_counts_characters_after_non_ascii(tmp_path):
    line = check_error(tmp_path, "    /* é ü */ data[gid.x] = foo(1u);\n")
    assert line == (
        "k.wgsl:4:29: error: no definition in scope for identifier: `foo` (unknown identifier)"
    )


def test_validation_error_names_the_store(tmp_path):
    (tmp_path / "k.wgsl").write_text(
        HEAD.replace("read_write", "read") + "    data[gid.x] = 1u;\n}\n"
    )
    (tmp_path / "k.toml").write_text(LAUNCH)
    line = _one_line_error(gpurace("check", "k.wgsl", "--launch", "k.toml", cwd=tmp_path))
    assert line.startswith("k.wgsl:4:5: error: Entry point main at Compute is invalid")
    assert "(writing to this location is not permitted)" in line


# naga's message when the device was opened without shader-int64 (as wgpu prints it)
NO_INT64 = (
    "Validation Error\n\nCaused by:\n  In wgpuDeviceCreateShaderModule\n\n"
    "Shader validation error: Type [0] '' is invalid\n = Using `i64` values requires the "
    "`naga::valid::Capabilities::SHADER_INT64` flag\n\n\n      Using `i64` values requires "
    "the `naga::valid::Capabilities::SHADER_INT64` flag"
)
NO_F16 = (
    "Validation Error\n\nCaused by:\n  In wgpuDeviceCreateShaderModule\n\nShader '' parsing "
    "error: the `f16` extension is not supported in the current environment\n  ┌─ wgsl:1:8\n"
    "  │\n1 │ enable f16;\n  │        ^^^ unsupported enable-extension\n\n"
)


def test_a_type_the_device_lacks_says_which_feature():
    err = naga_error(Exception(NO_INT64), "k.wgsl")
    assert str(err) == (
        "k.wgsl: error: this device does not offer 64-bit integers (feature "
        "'shader-int64'); use u32 pairs, or pick a device that has it (gpurace devices)"
    )
    err = naga_error(Exception(NO_F16), "k.wgsl")
    assert str(err).startswith("k.wgsl:1:8: error: this device does not offer f16")


def test_lavapipe_offers_both_optional_types():
    device = wgpu_backend.get_device()[0]
    assert {"shader-f16", "shader-int64"} <= set(device.features)


def load_launch_text(text: str):
    import tempfile
    from pathlib import Path

    d = Path(tempfile.mkdtemp())
    (d / "l.toml").write_text(text)
    return load_launch(str(d / "l.toml"))


I64_LAUNCH = LAUNCH.replace('"u32"', '"i64"').replace("count = 64", "count = 1")


@pytest.mark.parametrize(("value", "races"), [("i64(gid.x & 1u) << 32u", 1), ("-5li", 0)])
def test_i64_store_value_covers_the_high_word(value, races):
    """Every work-item stores to data[0]: values that differ only in the high word are
    a write-write race, identical 64-bit values are tolerated (same-value writes)."""
    source = HEAD.replace("array<u32>", "array<i64>") + f"    data[0] = {value};\n}}\n"
    report = api.check(source, load_launch_text(I64_LAUNCH), path="k.wgsl")
    assert report.scope.complete
    assert [(r.address, r.instances) for r in report.races] == [(0, 2)] * races


def test_i64_race_covers_both_words_of_each_element():
    """Pairs of work-items store different i64 values: both words of all 32 elements."""
    source = HEAD.replace("array<u32>", "array<i64>") + (
        "    data[gid.x / 2u] = i64(gid.x) << 33u;\n}\n"
    )
    launch = load_launch_text(I64_LAUNCH.replace("count = 1", "count = 32"))
    report = api.check(source, launch, path="k.wgsl")
    assert [(r.address, r.instances, r.pairs) for r in report.races] == [(0, 64, 64)]


SRC = "override a: u32 = 1u;\n@id(7) override b: i64;\noverride c = 2lu;\nfn f() {}\n"


def test_overrides_take_64_bit_values_exactly():
    out, problems = substitute(SRC, {"7": -(1 << 62) - 1, "c": (1 << 64) - 1})
    assert problems == {}
    assert out.splitlines()[1:3] == [
        f"@id(7) override b: i64 = {-(1 << 62) - 1}li;",
        f"override c: u64 = {(1 << 64) - 1}lu;",
    ]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"zz": 1}, "l.toml:3: error: [overrides] zz: the module declares no such override"),
        ({"a": -1}, "l.toml:3: error: [overrides] a: -1 is not a u32 value"),
        ({"c": 1 << 64}, f"l.toml:3: error: [overrides] c: {1 << 64} is not a u64 value"),
        ({"a": 2.5}, "l.toml:3: error: [overrides] a: 2.5 is not a u32 value"),
    ],
)
def test_override_that_cannot_be_set_is_located(values, message):
    with pytest.raises(GpuraceError) as err:
        set_overrides(SRC, values, "l.toml", 3)
    assert str(err.value) == message


def test_overrides_table_errors_point_at_the_launch_file(tmp_path):
    (tmp_path / "k.wgsl").write_text(
        "override n: u32;\n" + HEAD.replace("64)", "n)") + "    data[gid.x] = n;\n}\n"
    )
    bad = LAUNCH.replace("[[binding]]", '[overrides]\nn = "wide"\n\n[[binding]]')
    (tmp_path / "k.toml").write_text(bad)
    line = _one_line_error(gpurace("check", "k.wgsl", "--launch", "k.toml", cwd=tmp_path))
    assert line == "k.toml:3: error: [overrides] n must be a number or true/false, not 'wide'"
    (tmp_path / "k.toml").write_text(LAUNCH)
    line = _one_line_error(gpurace("check", "k.wgsl", "--launch", "k.toml", cwd=tmp_path))
    assert line == (
        "k.wgsl:3:26: error: workgroup size must be a positive constant (an override "
        "without a default needs a value: the launch file's [overrides] table)"
    )
    (tmp_path / "k.toml").write_text(
        LAUNCH.replace("[[binding]]", "[overrides]\nn = 64\n\n[[binding]]")
    )
    p = gpurace("check", "k.wgsl", "--launch", "k.toml", cwd=tmp_path)
    assert p.returncode == 0, p.stderr


def test_64_bit_atomics_are_refused_by_name(tmp_path):
    body = "    atomicMax(&data[0], u64(gid.x));\n"
    (tmp_path / "k.wgsl").write_text(
        HEAD.replace("array<u32>", "array<atomic<u64>>") + body + "}\n"
    )
    (tmp_path / "k.toml").write_text(LAUNCH.replace('"u32"', '"u64"'))
    line = _one_line_error(gpurace("check", "k.wgsl", "--launch", "k.toml", cwd=tmp_path))
    assert line == (
        "k.wgsl: error: 64-bit atomics (atomic<u64>, atomic<i64>) are not supported by "
        "gpurace yet; use atomic<u32>"
    )

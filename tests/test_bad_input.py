"""Bad input is one located error line and exit 2, never a traceback, a crash or a
hang (docs/compatibility.md, "Limits and bad input"): each test is one input the fuzzer
or a user found, with the exact message it must give."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from gpurace import isolate, limits
from gpurace.api import check_file, instrument, read_launch
from gpurace.cli import main
from gpurace.model import DeviceHang, GpuraceError

ROOT = Path(__file__).resolve().parent.parent
WGSL = ROOT / "examples" / "reduce_racy.wgsl"
CL = ROOT / "examples" / "opencl" / "reduce_racy.cl"

WGSL_LAUNCH = """entry = "reduce"
workgroups = [4, 1, 1]

[[binding]]
binding = 0
type = "f32"
count = 256

[[binding]]
binding = 1
type = "f32"
count = 4
"""

CL_LAUNCH = """kernel = "reduce"
global_size = [256]
local_size = [64]

[[arg]]
type = "float"
count = 256

[[arg]]
type = "float"
count = 4
"""


def launch_error(tmp_path: Path, text: str, name: str = "l.toml") -> str:
    """The one error a launch file gives when read, with the path made relative."""
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(GpuraceError) as info:
        read_launch(str(path), str(WGSL if "workgroups" in text else CL))
    return str(info.value).replace(f"{tmp_path}/", "")


def cli(*args: str) -> tuple[int, str]:
    """`gpurace ARGS` in-process: (exit code, stdout + stderr)."""
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


# --------------------------------------------------------------------------- launch files


def test_huge_count_is_refused_before_allocating(tmp_path):
    got = launch_error(tmp_path, WGSL_LAUNCH.replace("count = 256", "count = 5000000000"))
    limit = limits.host_buffer_limit()
    assert limit == limits.host_memory() // 4
    assert got == (
        "l.toml:7: error: group 0, binding 0: filling it takes 20000000000 bytes (18.6 GiB), "
        f"more than this host can spare (at most {limits.gib(limit)}, a quarter of its "
        "memory); lower count"
    )


def test_arange_counts_its_64_bit_intermediate(tmp_path):
    """np.arange(count) is int64 before it becomes f32: 8 bytes an element to fill."""
    count = limits.host_buffer_limit() // 8 + 1
    text = WGSL_LAUNCH.replace("count = 256", f'count = {count}\nfill = "arange"')
    assert f"filling it takes {limits.gib(count * 8)}," in launch_error(tmp_path, text)
    # zeros are made in the element type: the same count fits
    assert count * 4 <= limits.host_buffer_limit()


def test_bad_build_options_are_an_error_not_a_clang_exception(tmp_path):
    text = CL_LAUNCH.replace("[[arg]]", 'options = ["-cl-std=CL.0"]\n[[arg]]', 1)
    path = write(tmp_path, "o.toml", text)
    code, out = cli("check", str(CL), "--launch", path)
    assert (code, out) == (
        2,
        f"{CL.relative_to(ROOT)}: error: clang cannot parse the program with the build "
        "options ['-cl-std=CL.0']; check them (-D, -I, -cl-std=CL1.2/CL2.0/CL3.0)\n",
    )


def test_grid_of_two_to_the_32_is_refused(tmp_path):
    got = launch_error(tmp_path, WGSL_LAUNCH.replace("[4, 1, 1]", "[65536, 65536]"))
    assert got == (
        "l.toml:2: error: workgroups = [65536, 65536] makes 4294967296, but gpurace's logs "
        "hold it in 32 bits (at most 4294967295); make the launch smaller"
    )
    got = launch_error(tmp_path, CL_LAUNCH.replace("[256]", "[4294967296]"))
    assert got.startswith("l.toml:2: error: global_size = [4294967296] makes 4294967296,")


def test_a_list_as_type_is_an_unknown_type(tmp_path):
    got = launch_error(tmp_path, WGSL_LAUNCH.replace('type = "f32"', "type = [[1]]", 1))
    assert got == (
        "l.toml:6: error: group 0, binding 0: unknown type '[[1]]' "
        "(element types: f32, i32, u32, f16, i64, u64)"
    )


def test_unterminated_quote_in_options(tmp_path):
    got = launch_error(tmp_path, CL_LAUNCH.replace("[[arg]]", "options = '-DX=\"a'\n[[arg]]", 1))
    assert got == (
        "l.toml:5: error: options: no closing quotation in '-DX=\"a'; close the quote, or "
        'give a list such as options = ["-DN=64"]'
    )


def npy_launch(tmp_path: Path, fill: str) -> str:
    return launch_error(tmp_path, WGSL_LAUNCH.replace("count = 256", f'fill = "{fill}"'))


def test_npy_fifo_is_refused_without_opening(tmp_path):
    os.mkfifo(tmp_path / "f.npy")
    start = time.monotonic()
    got = npy_launch(tmp_path, "f.npy")
    assert time.monotonic() - start < 5
    assert got == "l.toml:7: error: group 0, binding 0: 'f.npy' is a FIFO; give a regular file"


def test_npy_directory_and_device_are_refused(tmp_path):
    (tmp_path / "d.npy").mkdir()
    assert npy_launch(tmp_path, "d.npy").endswith("'d.npy' is a directory; give a regular file")
    (tmp_path / "z.npy").symlink_to("/dev/zero")
    assert npy_launch(tmp_path, "z.npy") == (
        "l.toml:7: error: group 0, binding 0: 'z.npy' is a device file; give a regular file"
    )


def test_truncated_and_object_npy(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(256, dtype=np.float32))
    raw = (tmp_path / "a.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(raw[:-100])
    assert npy_launch(tmp_path, "t.npy") == (
        "l.toml:7: error: group 0, binding 0: 't.npy' is truncated: its header says "
        "256 x float32 (1024 bytes) but 924 bytes follow it; save it again"
    )
    np.save(tmp_path / "o.npy", np.array([1, "a"], dtype=object), allow_pickle=True)
    assert npy_launch(tmp_path, "o.npy") == (
        "l.toml:7: error: group 0, binding 0: 'o.npy' holds Python objects (object); "
        "save an array of numbers"
    )
    (tmp_path / "h.npy").write_bytes(raw[:6])
    assert npy_launch(tmp_path, "h.npy").startswith(
        "l.toml:7: error: group 0, binding 0: cannot read 'h.npy' as a NumPy .npy file:"
    )


# --------------------------------------------------------------------------- .sim files

SIM = """{kernel}
reduce
{gsize}
64 1 1
<size=1024 float {data}>
<size=16 float fill=0 dump>
"""


def sim_error(tmp_path: Path, gsize: str = "256 1 1", data: str = "range=0:1:255") -> str:
    """The error of checking the `.sim` (arguments are read against the kernel's
    parameters, so a bad argument shows at check time, not when the header is read)."""
    path = tmp_path / "s.sim"
    path.write_text(SIM.format(kernel=CL, gsize=gsize, data=data), encoding="utf-8")
    return sim_text_error(path)


def sim_text_error(path: Path) -> str:
    with pytest.raises(GpuraceError) as info:
        check_file(None, str(path))
    return str(info.value).replace(f"{path.parent}/", "")


def test_sim_non_ascii_digits(tmp_path):
    """C++ streams read ASCII digits only; Python's int() would take '²' and '١'."""
    assert sim_error(tmp_path, gsize="2\u00b256 1 1") == (
        "s.sim:3:2: error: '\u00b256' is not a number of the NDRange (global size) "
        "(three numbers, e.g. 64 1 1)"
    )
    path = tmp_path / "s.sim"
    text = SIM.format(kernel=CL, gsize="256 1 1", data="range=0:1:255")
    path.write_text(text.replace("size=16", "size=\u0661\u0666"), encoding="utf-8")
    assert sim_text_error(path) == (
        "s.sim:6:2: error: argument 1 'partial': 'size=\u0661\u0666': the size is a number "
        "of bytes, e.g. size=1024"
    )


def test_sim_huge_sizes_and_range(tmp_path):
    assert sim_error(tmp_path, data="range=0:1e-30:1e30") == (
        "s.sim:5:1: error: argument 0 'input': range=0:1e-30:1e30 gives 1e+60 values but "
        "the size holds 256 float; END must be START + INC * (count - 1)"
    )
    assert sim_error(tmp_path, data="range=0:1e-300:1e300") == (
        "s.sim:5:1: error: argument 0 'input': 1e300 does not fit in float32"
    )
    assert sim_error(tmp_path, gsize="4294967296 1 1") == (
        "s.sim:3:1: error: the NDRange (global size) makes 4294967296, but gpurace's logs "
        "hold it in 32 bits (at most 4294967295); make the launch smaller"
    )
    path = tmp_path / "s.sim"
    text = SIM.format(kernel=CL, gsize="256 1 1", data="range=0:1:255")
    path.write_text(text.replace("size=16", "size=99999999999996"))
    assert sim_text_error(path).startswith(
        "s.sim:6:2: error: argument 1 'partial': filling it takes 99999999999996 bytes "
        "(93132.3 GiB), more than this host can spare"
    )


def test_sim_hex_wider_than_its_type(tmp_path):
    path = tmp_path / "s.sim"
    text = SIM.format(kernel=CL, gsize="256 1 1", data="range=0:1:255")
    path.write_text(text.replace("fill=0 dump", "hex fill=123456789abcdef"))
    assert sim_text_error(path) == (
        "s.sim:6:1: error: argument 1 'partial': '123456789abcdef' is not a float fill value"
    )


# --------------------------------------------------------------------------- nesting


def wgsl_nested(expr: str) -> str:
    return f"@compute @workgroup_size(1)\nfn main() {{\n  var x = {expr};\n}}\n"


@pytest.mark.parametrize(
    ("expr", "col"),
    [
        ("(" * 3000 + "1u" + ")" * 3000, 266),  # the 256th '(' after the function body's
        ("!" * 3000 + "true", 266),
        ("1u" + " + 1u" * 3000, 13736),  # built in a loop: found in the tree
    ],
)
def test_wgsl_nesting_too_deep_is_located(expr, col):
    with pytest.raises(GpuraceError) as info:
        instrument(wgsl_nested(expr), "d.wgsl")
    assert str(info.value) == (
        f"d.wgsl:3:{col}: error: nested more than 256 levels deep (each operator of a chain "
        "such as a + b + c counts); split the expression or block, e.g. with let/local variables"
    )


def test_wgsl_nesting_within_the_limit_is_instrumented():
    """Just under the limit, the rewriter's own recursion still fits (pytest's stack)."""
    inst = instrument(wgsl_nested("(" * 200 + "1u" + ")" * 200), "d.wgsl")
    assert "(" * 200 + "1u" + ")" * 200 in inst.source
    blocks = "@compute @workgroup_size(1)\nfn main() {\n" + "{" * 250 + "}" * 250 + "\n}\n"
    assert instrument(blocks, "b.wgsl").source.count("{") > 250
    chain = "1u" + " + 1u" * 250
    assert chain in instrument(wgsl_nested(chain), "c.wgsl").source


def test_opencl_chain_too_deep_is_located():
    src = "__kernel void k(__global float *a) {\n a[get_global_id(0)] = 1.0f" + "+1.0f" * 600
    with pytest.raises(GpuraceError) as info:
        instrument(src + ";\n}\n", "c.cl", "opencl")
    assert str(info.value).startswith("c.cl:2:24: error: nested more than 256 levels deep")


def test_opencl_chain_deeper_than_python_is_an_error_not_a_truncated_tree(capfd):
    src = "__kernel void k(__global float *a) {\n a[get_global_id(0)] = 1.0f" + "+1.0f" * 3000
    with pytest.raises(GpuraceError) as info:
        instrument(src + ";\n}\n", "c.cl", "opencl")
    assert str(info.value).startswith("c.cl: error: nested more than 256 levels deep")
    assert "Exception ignored" not in capfd.readouterr().err


def test_opencl_long_chain_within_the_limit_is_instrumented():
    src = "__kernel void k(__global float *a) {\n a[get_global_id(0)] = 1.0f" + "+1.0f" * 250
    inst = instrument(src + ";\n}\n", "c.cl", "opencl")
    assert [s.kind.name for s in inst.sites if s.kind.name != "EVENT"] == ["STORE"]


# --------------------------------------------------------------------------- device limits


def write(tmp_path: Path, name: str, text: str) -> str:
    (tmp_path / name).write_text(text)
    return str(tmp_path / name)


def test_wgsl_workgroups_above_the_device_limit(tmp_path):
    launch = write(tmp_path, "l.toml", WGSL_LAUNCH.replace("[4, 1, 1]", "[70000]"))
    code, out = cli("check", str(WGSL), "--launch", launch)
    assert code == 2
    assert out.startswith(f"{launch}:2: error: workgroups[0] is 70000, but '")
    assert out.endswith("' allows at most 65535; launch fewer work-groups\n")


def test_wgsl_buffer_above_the_binding_limit(tmp_path):
    launch = write(tmp_path, "l.toml", WGSL_LAUNCH.replace("count = 256", "count = 1000000000"))
    code, out = cli("check", str(WGSL), "--launch", launch)
    assert code == 2
    assert out.startswith(
        f"{launch}:5: error: the storage buffer of group 0, binding 0 in bytes is 4000000000, but '"
    )
    assert out.endswith("' allows at most 134217728; lower count\n")


def test_wgsl_too_many_bindings_and_too_high_a_binding(tmp_path):
    n = 14
    src = "".join(
        f"@group(0) @binding({i}) var<storage, read_write> a{i}: array<u32>;\n" for i in range(n)
    )
    src += "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) g: vec3<u32>) {\n"
    src += "".join(f"  a{i}[g.x] = 1u;\n" for i in range(n)) + "}\n"
    tables = "".join(f'[[binding]]\nbinding = {i}\ntype = "u32"\ncount = 64\n' for i in range(n))
    kernel = write(tmp_path, "m.wgsl", src)
    code, out = cli(
        "check", kernel, "--launch", write(tmp_path, "m.toml", "workgroups = [1]\n" + tables)
    )
    assert code == 2
    assert out.startswith(
        f"{kernel}: error: the number of storage buffers (the kernel's + 4 of gpurace's log) is 18"
    )
    one = (
        "@group(0) @binding(5000) var<storage, read_write> a13: array<u32>;\n"
        "@compute @workgroup_size(64)\n"
        "fn main(@builtin(global_invocation_id) g: vec3<u32>) { a13[g.x] = 1u; }\n"
    )
    kernel = write(tmp_path, "h.wgsl", one)
    launch = write(
        tmp_path,
        "h.toml",
        'workgroups = [1]\n[[binding]]\nbinding = 5000\ntype = "u32"\ncount = 64\n',
    )
    code, out = cli("check", kernel, "--launch", launch)
    assert code == 2
    assert out.startswith(f"{kernel}: error: the @binding of 'a13' is 5000, but '")
    assert out.endswith("' allows at most 1023; number the bindings from 0\n")


def test_wgsl_workgroup_size_above_the_device_limit(tmp_path):
    kernel = write(
        tmp_path,
        "w.wgsl",
        "@group(0) @binding(0) var<storage, read_write> a: array<u32>;\n"
        "@compute @workgroup_size(2048)\n"
        "fn main(@builtin(global_invocation_id) g: vec3<u32>) { a[g.x] = 1u; }\n",
    )
    launch = write(
        tmp_path,
        "w.toml",
        'workgroups = [1]\n[[binding]]\nbinding = 0\ntype = "u32"\ncount = 4096\n',
    )
    code, out = cli("check", kernel, "--launch", launch)
    assert code == 2
    assert out.startswith(f"{kernel}: error: @workgroup_size x is 2048, but '")
    assert out.endswith("' allows at most 1024; make the work-group smaller\n")


def test_opencl_work_group_above_the_device_limit(tmp_path):
    launch = write(
        tmp_path, "l.toml", CL_LAUNCH.replace("[256]", "[65536]").replace("[64]", "[65536]")
    )
    code, out = cli("check", str(CL), "--launch", launch)
    assert code == 2
    assert out.startswith(f"{launch}:3: error: the work-group size in x is 65536, but '")
    assert out.endswith("; make local_size smaller\n")


def test_address_space_beyond_u32():
    with pytest.raises(GpuraceError) as info:
        limits.check_address_space(1 << 32, "l.toml", 5)
    assert str(info.value) == (
        "l.toml:5: error: the launch's buffers, local variables and work-groups take "
        "4294967296 bytes (4.0 GiB) of addresses; gpurace addresses at most 4294967280 bytes "
        "(4.0 GiB) per launch: make the buffers or the grid smaller"
    )


# --------------------------------------------------------------------------- the process


def gpurace(*args: str, **kw) -> subprocess.Popen:
    kw.setdefault("cwd", ROOT)
    return subprocess.Popen([sys.executable, "-m", "gpurace", *args], text=True, **kw)


def test_closed_stdout_exits_quietly():
    args = ("check", "examples/reduce_racy.wgsl", "--launch", "examples/reduce_racy.toml")
    p = gpurace(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # the reader is gone before the report is written: a broken pipe
    err = p.stderr.read()
    assert p.wait(timeout=120) == 2
    assert err == ""
    closed = subprocess.run(
        [sys.executable, "-m", "gpurace", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, preexec_fn=lambda: os.close(1),
    )  # fmt: skip
    assert (closed.returncode, closed.stderr) == (1, "")  # the verdict, with nowhere to print


def test_sigterm_ends_like_ctrl_c(tmp_path):
    launch = write(
        tmp_path, "big.toml", WGSL_LAUNCH.replace("[4, 1, 1]", "[16000]").replace("256", "4096000")
    )  # a check that takes ~10 s on lavapipe (2 cores): still running at the signal
    p = gpurace("check", "examples/reduce_racy.wgsl", "--launch", launch,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    time.sleep(3)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert (p.returncode, err) == (2, "error: interrupted (SIGTERM)\n")


# --------------------------------------------------------------------------- a faulting launch

# (a kernel with a buffer would not fault under check: its accesses outside it are
# found and left out, docs/memcheck.md; with none tracked, they are made)
OOB = """// writes 1 GiB apart from an address the host gives: PoCL faults in the host process
__kernel void smash(ulong where, int n)
{
    __global float *a = (__global float *)where;
    size_t i = get_global_id(0);
    for (int k = 0; k < n; k++)
        a[i * 268435456 + k] = 1.0f;
}
"""
OOB_LAUNCH = """kernel = "smash"
global_size = [64]
local_size = [64]

[[arg]]
value = 4096

[[arg]]
value = 1000
"""
CRASHED = (
    "oob.toml:1: error: the OpenCL runtime crashed (SIGSEGV) running kernel 'smash': it most "
    "likely accesses memory out of bounds; check the launch's sizes against the kernel's indexing\n"
)


@pytest.mark.parametrize("command", ["check", "repeat"])
def test_a_faulting_opencl_launch_is_a_located_error(tmp_path, command):
    write(tmp_path, "oob.cl", OOB)
    write(tmp_path, "oob.toml", OOB_LAUNCH)
    p = gpurace(command, str(tmp_path / "oob.cl"), "--launch", str(tmp_path / "oob.toml"),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)  # fmt: skip
    out, err = p.communicate(timeout=300)
    assert (p.returncode, out, err) == (2, "", CRASHED)


def test_the_child_process_reports_what_the_process_would():
    args = ["check", "examples/opencl/reduce_racy.cl", "--json", "-"]
    env = dict(os.environ, GPURACE_ISOLATE="0")
    alone = subprocess.run([sys.executable, "-m", "gpurace", *args], cwd=ROOT,
                           capture_output=True, text=True, env=env)  # fmt: skip
    child = subprocess.run([sys.executable, "-m", "gpurace", *args], cwd=ROOT,
                           capture_output=True, text=True)  # fmt: skip
    assert alone.returncode == child.returncode == 1
    assert child.stdout == alone.stdout
    assert child.stderr == alone.stderr
    assert '"class": "local"' in child.stdout


def _crashed(how: str) -> GpuraceError:
    return GpuraceError(f"crashed ({how})", "x.toml", 3)


def test_a_child_that_dies_is_one_error_with_its_last_words(capfd):
    def die() -> None:
        os.write(2, b"corrupted size vs. prev_size\n")
        os.abort()

    with pytest.raises(GpuraceError) as info:
        isolate.in_child(die, _crashed)
    assert str(info.value) == "x.toml:3: error: crashed (SIGABRT: corrupted size vs. prev_size)"
    assert capfd.readouterr().err == ""


def test_a_child_answers_raises_and_speaks_as_the_process_would(capfd):
    def answer() -> dict:
        os.write(2, b"a warning\n")
        return {"races": [1, 2]}

    assert isolate.in_child(answer, _crashed) == {"races": [1, 2]}
    assert capfd.readouterr().err == "a warning\n"

    def hang() -> None:
        os.write(2, b"1 error generated.\n")
        raise DeviceHang("the kernel did not finish", "k.cl", 4, 2)

    with pytest.raises(DeviceHang) as info:
        isolate.in_child(hang, _crashed)
    assert str(info.value) == "k.cl:4:2: error: the kernel did not finish"
    assert capfd.readouterr().err == ""  # the error is the one line
    with pytest.raises(ZeroDivisionError):
        isolate.in_child(lambda: 1 // 0, _crashed)


def test_cuda_grid_and_shared_bytes_beyond_u32(tmp_path):
    kernel = ROOT / "tests" / "corpus" / "cuda" / "saxpy_clean.cu"
    text = (kernel.with_suffix(".toml")).read_text()
    path = tmp_path / "c.toml"
    path.write_text(text.replace("[[arg]]", "shared_bytes = 4294967296\n[[arg]]", 1))
    with pytest.raises(GpuraceError) as info:
        read_launch(str(path), str(kernel))
    line = text.split("[[arg]]")[0].count("\n") + 1
    assert str(info.value) == (
        f"{path}:{line}: error: shared_bytes makes 4294967296, but gpurace's logs hold it in "
        "32 bits (at most 4294967295); make the launch smaller"
    )

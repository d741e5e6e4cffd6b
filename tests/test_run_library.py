"""``gpurace run`` on programs that use pyopencl's library (ReductionKernel, scans,
cumsum, copy_if, RadixSort, clrandom, pyopencl.array), kernels told apart by source
(two WGSL ``fn main``, two OpenCL kernels ``k``, 48 rebuilds of one text), launches
from two threads; and the parts they rest on, in-process: parameter typedefs,
functions of an included header, a macro call as a stored value, kernel identity.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import numpy as np
import pyopencl as cl

from gpurace import api
from gpurace.run.hooks_opencl import PROBE
from gpurace.run.session import Options, Session
from tests.test_run import PROGRAMS, block, plain, run

LIBRARY = PROGRAMS / "cl_library.py"
SCAN_SUPPRESS = PROGRAMS / "pyopencl_scan.toml"


def test_pyopencl_library_kernels_are_all_checked_and_complete(tmp_path: Path) -> None:
    """Every kernel pyopencl's library launched is checked, complete, and race-free
    but for the known scan race and the scans' reads of unloaded __local entries
    (suppressed, still counted); the program's own
    NumPy assertions passed and its output is the same as without gpurace."""
    out = tmp_path / "run.json"
    p = run("--suppress", SCAN_SUPPRESS, "--json", out, "--", "python", LIBRARY)
    assert p.returncode == 0, p.stderr
    assert p.stdout == plain(LIBRARY).stdout
    assert p.stdout.splitlines()[0].startswith("dot: ")
    assert len(p.stdout.splitlines()) == 6  # every result asserted against NumPy
    doc = json.loads(out.read_text())
    made = {(k["kernel"], k["file"]) for k in doc["kernels"]}
    py = LIBRARY.as_posix()
    line = {n: f"<OpenCL program from {py}:{n}>" for n in (23, 37, 41, 46, 52, 58, 62)}
    expected = {("reduce_kernel_stage1", line[23]), ("rng_gen_philox4x32_uniform", line[58])}
    expected |= {("axpb", line[62]), ("axpbyz", line[62]), ("get_size_and_offsets", line[52])}
    for n in (37, 41, 46, 52):  # InclusiveScanKernel, cumsum, copy_if, RadixSort
        expected |= {(name, line[n]) for name in ("scan_lev1", "scan_lev2", "scan_final_update")}
    assert made == expected
    for k in doc["kernels"]:
        assert k["not_checked"] == [], k
        assert k["checked"] == [0], k
        scope = k["races"]["scope"]
        assert scope["complete"] and scope["not_instrumented"] == [], k
        suppressed = k["races"]["summary"].get("suppressed", 0)
        assert suppressed == (1 if k["kernel"] == "scan_lev1" else 0), k
        assert k["races"]["summary"]["errors"] == 0
        assert k["races"]["summary"]["uninitialised"] == 0  # suppressed: the scans'
        scan = k["kernel"] in ("scan_lev1", "scan_lev2")
        assert len(k["races"]["uninitialised"]) == (1 if scan else 0), k
    sorts = [k for k in doc["kernels"] if k["file"] == line[52] and k["kernel"] == "scan_lev1"]
    assert sorts[0]["launches"] == 4  # 8 key bits, 2 per pass: launched again, same shape
    assert "suppressed (1):" in p.stderr
    assert p.stderr.rstrip().endswith(
        "gpurace run: 17 kernels, 17 launches checked; 4 races (0 errors, 0 warnings, 4 suppressed)"
        "; uninitialised reads at 8 sites (0 errors, 8 suppressed)"
    )


def test_the_scan_race_and_unloaded_reads_are_reported_at_pyopencls_sites() -> None:
    """Without the suppressions the scan's global write, local-only barrier, global read
    is an error, named in the program's generated source (run on a small scan); so is
    the tail unit's read of `ldata` entries past the interval's end, which no
    work-item loaded (pyopencl's scan.py: `sum = ldata[0][LID_0].value` after loads
    guarded by `read_i < interval_end`)."""
    p = run("--kernel", "scan_lev1", "--", "python", LIBRARY)
    assert p.returncode == 1, p.stderr
    where = f"<OpenCL program from {LIBRARY.as_posix()}:37>"
    [first, unloaded] = [ln for ln in p.stderr.splitlines() if ln.startswith(f"{where}:")]
    assert re.fullmatch(
        re.escape(where) + r":\d+:47: error: read-write race on global memory "
        r"'psc_partial_scan_buffer\[2999\]' \(byte 11996\)",
        first,
    )
    got = block(p.stderr, first)
    assert got[1] == (
        "  kernel 'scan_lev1', launch 0: same work-group, no barrier(CLK_GLOBAL_MEM_FENCE) between"
    )
    assert got[3] == "      psc_partial_scan_buffer[psc_unit_base + psc_offset] ="
    assert got[5] == (
        "      psc_interval_results[psc_GID_0] = psc_partial_scan_buffer[psc_interval_end - 1];"
    )
    assert re.fullmatch(
        re.escape(where) + r":\d+:37: error: uninitialised read of local memory "
        r"'psc_ldata\[0\]' \(byte 48: no work-item wrote it earlier in the launch\)",
        unloaded,
    )
    got = block(p.stderr, unloaded)
    assert got[2].startswith("  read   by global (12,0,0) local (12,0,0) group (0,0,0)  at ")
    assert got[3] == "      psc_scan_type psc_sum = psc_ldata[0][psc_LID_0].psc_value;"
    assert got[4] == "  (4 reads of unwritten bytes at this site)"


def test_two_wgsl_modules_with_main_are_two_kernels_and_the_racy_one_is_reported() -> None:
    fixed = plain(PROGRAMS / "two_mains.py", "--fixed")  # its NumPy assertions hold
    assert fixed.returncode == 0 and fixed.stdout == "scale: 130560.0, smooth: 131070.0\n"
    p = run("--", "python", PROGRAMS / "two_mains.py")
    assert p.returncode == 1, p.stderr
    py = "tests/run_programs/two_mains.py"
    assert f"== kernel 'main' ({py}) [source 1]: 2 launches, 1 checked (launch 0)" in p.stderr
    assert f"== kernel 'main' ({py}) [source 2]: 2 launches, 1 checked (launch 0)" in p.stderr
    first = f"{py}:33:5: error: read-write race on storage buffer 'v[1]' (byte 4)"
    assert block(p.stderr, first)[1:] == [
        "  kernel 'main', launch 0: same work-group, no storageBarrier() between",
        f"  read   by global (0,0,0) local (0,0,0) group (0,0,0)  at {py}:32:17",
        "      let right = v[min(i + 1u, arrayLength(&v) - 1u)];",
        f"  write  by global (1,0,0) local (1,0,0) group (0,0,0)  at {py}:33:5",
        "      v[i] = (v[i] + right) * 0.5;",
        "  (+251 more addresses, 253 work-item pairs)",
    ]
    assert "no races in kernel 'main'" in p.stderr  # scale, [source 1]
    assert p.stderr.rstrip().endswith(
        "gpurace run: 2 kernels, 2 launches checked; 2 races (2 errors, 0 warnings)"
    )


def test_kernels_are_told_apart_by_source_and_threads_lose_no_launch() -> None:
    program = PROGRAMS / "cl_identity.py"
    assert plain(program, "--fixed").returncode == 0  # its NumPy assertions hold
    p = run("--", "python", program)
    assert p.returncode == 1, p.stderr
    py = program.as_posix()
    assert p.stdout == "scale: 7048.8828\nk: done\ncount: 2 x 25 launches\n"
    # one text built 48 times is one kernel, checked once
    assert f"== kernel 'scale' (<OpenCL program from {py}:41>): 48 launches, 1 checked" in p.stderr
    # two programs with kernel 'k': each checked with its own source
    assert f"== kernel 'k' (<OpenCL program from {py}:51>): 1 launch, 1 checked" in p.stderr
    assert f"== kernel 'k' ({py}): 1 launch, 1 checked (launch 0)" in p.stderr
    first = f"{py}:22:12: error: read-write race on global memory 'x[1]' (byte 4)"
    assert block(p.stderr, first)[1] == (
        "  kernel 'k', launch 0: same work-group, no barrier(CLK_GLOBAL_MEM_FENCE) between"
    )
    # 2 threads x 25 launches, every one counted
    assert f"== kernel 'count' (<OpenCL program from {py}:62>): 50 launches, 1 checked" in p.stderr
    assert p.stderr.rstrip().endswith(
        "gpurace run: 4 kernels, 4 launches checked; 2 races (2 errors, 0 warnings)"
    )


# -- in-process: what the runs rest on ------------------------------------------------


def test_kernel_identity_is_source_and_options_not_name() -> None:
    s = Session(Options())
    a = s.kernel("app.py", "k", "kernel A", "opencl")
    assert s.kernel("app.py", "k", "kernel A", "opencl") is a
    b = s.kernel("app.py", "k", "kernel B", "opencl")
    c = s.kernel("app.py", "k", "kernel A", "opencl", options=["-DFIXED"])
    assert len({id(a), id(b), id(c)}) == 3
    assert (a.tags, b.tags, c.tags) == (" [source 1]", " [source 2]", " [source 3]")
    other = s.kernel("other.py", "k", "kernel C", "opencl")
    assert other.tags == ""
    assert len({a.digest, b.digest, c.digest, other.digest}) == 4


def test_launches_are_selected_per_shape_from_any_thread() -> None:
    s = Session(Options(launches=1))
    k = s.kernel("app.py", "k", "src", "opencl")

    def launch(shape: tuple[int, ...]) -> None:
        for _ in range(200):
            s.next_launch(k, shape)

    threads = [threading.Thread(target=launch, args=((n,),)) for n in (64, 64, 128, 128)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert k.launches == 800
    assert k.selected_launches == 2  # the first of each shape
    assert k.shapes == {(64,): 1, (128,): 1}


def test_hooks_off_is_per_thread() -> None:
    s = Session(Options())
    seen: list[bool] = []
    with s.suspended():
        worker = threading.Thread(target=lambda: seen.append(s.hooks_off))
        worker.start()
        worker.join()
        assert s.hooks_off
    assert seen == [False] and not s.hooks_off


def test_typedefd_parameters_take_their_number_type() -> None:
    src = (
        "typedef ulong index_t; typedef float value_t; typedef float4 quad_t;\n"
        "typedef struct { int a; float b; } pair_t;\n"
        "__kernel void f(__global value_t *x, index_t n, quad_t q, pair_t p) {\n"
        "    if (get_global_id(0) < n) x[get_global_id(0)] = q.x + p.b;\n"
        "}\n"
    )
    inst = api.instrument(src, "t.cl", "opencl", [])
    assert [b.elem_type for b in inst.params["f"]] == ["float", "ulong", "float4", "pair_t"]


def test_header_functions_on_values_need_no_instrumenting(tmp_path: Path) -> None:
    """A function from an included header that works on values and private words only
    (as pyopencl's philox) leaves the check complete; one that writes __global memory
    is listed as not instrumented."""
    (tmp_path / "mix.h").write_text(
        "uint mulhi_lo(uint a, uint b, uint *hi) { *hi = mul_hi(a, b); return a * b; }\n"
        "uint mix(uint x) { uint h; uint l = mulhi_lo(x, 0x9E3779B9u, &h); return h ^ l; }\n"
        "void put(__global uint *p, uint v) { *p = v; }\n"
    )
    pure = '#include "mix.h"\n__kernel void f(__global uint *x) { x[0] = mix(x[0]); }\n'
    impure = '#include "mix.h"\n__kernel void f(__global uint *x) { put(x, 1u); }\n'
    options = ["-I", str(tmp_path)]
    assert api.instrument(pure, "p.cl", "opencl", options).not_instrumented == []
    [note] = api.instrument(impure, "q.cl", "opencl", options).not_instrumented
    assert "'put' is defined in " in note and "not instrumented" in note


def test_a_macro_call_across_lines_is_kept_whole_as_a_stored_value() -> None:
    """``d.v = SCAN(\\n a, b,\\n false)`` (pyopencl's scan): libclang ends the value
    at the macro's name; the store must still pass the whole call."""
    src = (
        "#define SCAN(a, b, across) a + b\n"
        "__kernel void f(__global int *x) {\n"
        "    __local int d[64];\n"
        "    int u = d[0];\n"
        "    d[1] = SCAN(\n"
        "        u, 2,\n"
        "        false\n"
        "        );\n"
        "    x[get_global_id(0)] = d[1];\n"
        "}\n"
    )
    inst = api.instrument(src, "m.cl", "opencl", [])
    assert re.search(r"\(int\)\(SCAN\(\n        u, 2,\n        false\n        \)\)", inst.source)
    [pocl] = [p for p in cl.get_platforms() if "Portable" in p.name]
    cl.Program(cl.Context(pocl.get_devices()), inst.source).build()  # it compiles


def test_a_struct_given_by_value_is_passed_as_its_bytes(tmp_path: Path) -> None:
    """The race depends on a field of the struct argument: launch 0 (shift 0) is clean,
    launch 1 (shift 1) races, so gpurace ran each launch with its struct's bytes."""
    program = tmp_path / "structs.py"
    program.write_text(
        "import numpy as np\n"
        "import pyopencl as cl\n"
        "[pocl] = [p for p in cl.get_platforms() if 'Portable' in p.name]\n"
        "q = cl.CommandQueue(cl.Context(pocl.get_devices()))\n"
        'SRC = """typedef struct { float scale; uint shift; } params_t;\n'
        "__kernel void move(__global float *x, params_t p) {\n"
        "    size_t i = get_global_id(0);\n"
        "    x[(i + p.shift) % get_global_size(0)] = x[i] * p.scale;\n"
        '}\n"""\n'
        "move = cl.Program(q.context, SRC).build().move\n"
        "params = np.dtype([('scale', np.float32), ('shift', np.uint32)])\n"
        "x = cl.Buffer(q.context, cl.mem_flags.READ_WRITE, 256 * 4)\n"
        "for shift in (0, 1):\n"
        "    move(q, (256,), (64,), x, np.array((2.0, shift), params)[()])\n"
        "q.finish()\n"
    )
    p = run("--launches", "0", "--", "python", program)
    assert p.returncode == 1, p.stderr
    assert "== kernel 'move' (" in p.stderr and "2 launches, 2 checked (launch 0, 1)" in p.stderr
    races = [ln for ln in p.stderr.splitlines() if ": error: " in ln]
    # x[i] (8:45) read by one work-item, written through x[(i + 1) % n] by another
    assert races and all(":8:45: error: read-write race on global memory 'x[" in ln for ln in races)
    assert "  kernel 'move', launch 1: same work-group" in p.stderr
    assert "launch 0:" not in p.stderr


def test_pocl_chooses_the_probes_local_size_for_other_kernels_too() -> None:
    """What the local-size probe rests on: PoCL picks a launch's work-group size from
    the device and the global size, so a kernel with __local memory, a private array
    and a barrier gets the size the probe got."""
    [pocl] = [p for p in cl.get_platforms() if "Portable" in p.name]
    ctx = cl.Context(pocl.get_devices())
    q = cl.CommandQueue(ctx)
    probe = cl.Program(ctx, PROBE).build().gpurace_local_size
    heavy = (
        cl.Program(
            ctx,
            "__kernel void h(__global uint *out, __global float *x) {\n"
            "    __local float t[1024]; float acc[32];\n"
            "    for (int k = 0; k < 32; k++)\n"
            "        acc[k] = x[(get_global_id(0) + k) % get_global_size(0)];\n"
            "    t[get_local_id(0) % 1024] = acc[get_local_id(0) % 32];\n"
            "    barrier(CLK_LOCAL_MEM_FENCE);\n"
            "    if (get_global_id(0) == 0 && get_global_id(1) == 0) {\n"
            "        out[0] = get_local_size(0); out[1] = get_local_size(1);\n"
            "    }\n"
            "    x[get_global_id(0)] = t[0];\n"
            "}\n",
        )
        .build()
        .h
    )
    chosen = []
    for size in ((256,), (1000,), (4096,), (64, 64)):
        x = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, int(np.prod(size)) * 4)
        got = [np.zeros(3, np.uint32), np.zeros(3, np.uint32)]
        bufs = [cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 12) for _ in got]
        probe(q, size, None, bufs[0])
        heavy(q, size, None, bufs[1], x)
        for host, buf in zip(got, bufs, strict=True):
            cl.enqueue_copy(q, host, buf)
        assert got[0][: len(size)].tolist() == got[1][: len(size)].tolist(), size
        chosen.append(got[0][: len(size)].tolist())
    assert all(c != [1] * len(c) for c in chosen)  # the driver chose real work-groups

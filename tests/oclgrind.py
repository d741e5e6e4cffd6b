"""Run labelled OpenCL corpus cases under Oclgrind and read back its race reports.

Oclgrind (an OpenCL ICD that simulates a device) is an independent race detector:
agreeing with it keeps the corpus labels honest without trusting gpurace. Its
race detector is switched on by ``OCLGRIND_DATA_RACES=1`` (and same-value writes
by ``OCLGRIND_UNIFORM_WRITES=1``), which the ICD reads when it is loaded, so the
cases run in a child process (``python -m tests.oclgrind --worker``) that has them
in its environment; one child runs many cases, separated by markers on stderr.

Oclgrind prints one block per racing pair of work-items, e.g.::

    Read-write data race at local memory address 0x1000000000004
        Kernel: k
        First entity:  Global(1,0,0) Local(1,0,0) Group(0,0,0)
        ...
        At line 3 (column 8) of input.cl:

Blocks are reduced to (class, first line, second line) in the corpus's class names:
``local``, ``global-intra`` / ``global-inter`` (the two entities' groups equal or
not) and ``divergence`` (the two barrier lines of "Work-group divergence detected").
Columns are not compared: Oclgrind's column is the LLVM instruction's (the ``=`` of
a store), not the start of the access expression.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.corpus import Case

_MARK = "@@gpurace-oclgrind"
_RACE = re.compile(r"^(Read-write|Write-write|Uniform write-write) data race at (\w+) memory")
_AT = re.compile(r"^\s*At line (\d+) \(column (\d+)\)", re.M)
_GROUP = re.compile(r"Group\((\d+),(\d+),(\d+)\)")
_ROOT = Path(__file__).resolve().parent.parent


@dataclass
class OclgrindResult:
    """What Oclgrind said about one case: race triples, other diagnostics, errors."""

    races: set[tuple[str, int, int]] = field(default_factory=set)
    sites: set[tuple[str, tuple, tuple]] = field(default_factory=set)  # (line, col, kind)
    other: list[str] = field(default_factory=list)  # headers of non-race diagnostics
    error: str | None = None  # build or launch failure in the worker


def parse(text: str) -> OclgrindResult:
    """Reduce Oclgrind's stderr for one case to (class, line, line) triples and
    (class, site, site) triples, a site being (line, column, kind)."""
    result = OclgrindResult()
    for block in re.split(r"\n(?=\S)", "\n" + text):
        head = block.strip("\n").split("\n", 1)[0]
        if not head.strip():
            continue
        m = _RACE.match(head)
        if m:
            # an async copy's entity is the work-group: "(location unknown)", site (0, 0, "")
            first, second = _entities(block)
            if m.group(2) == "local":
                cls = "local"
            else:
                cls = "global-intra" if first[1] == second[1] else "global-inter"
            sites = sorted([first[0], second[0]])
        elif head.startswith("Work-group divergence detected"):
            at = [(int(a.group(1)), int(a.group(2)), "barrier") for a in _AT.finditer(block)]
            cls, sites = "divergence", sorted((at or [(0, 0, "")]) * 2)[:2]
            if len(at) >= 2:
                sites = sorted(at[:2])
        else:
            result.other.append(head.strip())
            continue
        result.races.add((cls, sites[0][0], sites[1][0]))
        result.sites.add((cls, sites[0], sites[1]))
    return result


def _entities(block: str) -> list[tuple[tuple[int, int, str], tuple]]:
    """((line, column, kind), group) of the first and second entity of a race block."""
    found = []
    for part in re.split(r"\n\s*(?:First|Second) entity:", block)[1:3]:
        at = _AT.search(part)
        group = _GROUP.search(part)
        site = (0, 0, "")
        if at:
            ins = part[: at.start()]
            kind = "store"
            call = re.search(r" call .*?@_Z\d+(\w+?)[A-Z]", ins)
            if call:  # builtins run as calls: atomics, vload/vstore, sincos, ...
                name = call.group(1)
                prefixes = {"atom": "atomic", "vload": "load", "vstore": "store"}
                # the math builtins that write through their pointer argument
                prefixes |= dict.fromkeys(("sincos", "modf", "frexp", "fract", "remquo"), "store")
                prefixes["lgamma_r"] = "store"
                hit = [k for p, k in prefixes.items() if name.startswith(p)]
                kind = hit[0] if hit else "call " + name
            elif re.search(r"\bload ", ins):
                kind = "load"
            site = (int(at.group(1)), int(at.group(2)), kind)
        found.append((site, group.groups() if group else ()))
    while len(found) < 2:
        found.append(((0, 0, ""), ()))
    return found


def run_cases(
    cases: list[Case],
    uniform_writes_race: bool = False,
    timeout: float = 300,
    platform: str = "oclgrind",
) -> dict[str, OclgrindResult]:
    """Run every case in one child process on the OpenCL platform whose name contains
    ``platform`` (Oclgrind by default); results by case id.

    A child process also keeps PoCL's LLVM apart from lavapipe's: loading both into
    one process aborts ("Option ... registered more than once")."""
    env = dict(os.environ, OCLGRIND_DATA_RACES="1", OCLGRIND_MAX_ERRORS="100000000")
    env["PYOPENCL_NO_CACHE"] = "1"
    env.pop("OCLGRIND_UNIFORM_WRITES", None)
    if uniform_writes_race:
        env["OCLGRIND_UNIFORM_WRITES"] = "1"
    out: dict[str, OclgrindResult] = {}
    todo = list(cases)
    while todo:  # an Oclgrind FATAL ERROR ends the child: go on with a new one after it
        jobs = [[c.id, str(c.kernel), str(c.launch_path)] for c in todo]
        proc = subprocess.run(
            [sys.executable, "-m", "tests.oclgrind", "--worker", platform],
            input=json.dumps(jobs),
            capture_output=True,
            text=True,
            env=env,
            cwd=_ROOT,
            timeout=timeout,
        )
        for part in proc.stderr.split(f"\n{_MARK} ")[1:]:
            case_id, _, body = part.partition(" begin\n")
            body, ended, status = body.rpartition(f"\n{_MARK}-end ")
            if not ended:  # the child died inside this case
                body, status = status, "the Oclgrind process died: " + _last_line(status)
            result = parse(body)
            if status.strip() != "ok":
                result.error = status.strip()
            out[case_id] = result
        done = [c for c in todo if c.id in out]
        if not done:
            raise RuntimeError(f"the Oclgrind worker ran no case: {proc.stderr[-2000:]}")
        todo = [c for c in todo if c.id not in out]
    return out


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " / ".join(lines[-3:])


# ---------------------------------------------------------------------------
# The worker (runs inside the child process that loaded Oclgrind's ICD)
# ---------------------------------------------------------------------------


def _say(text: str) -> None:
    # straight to fd 2, so the markers interleave correctly with Oclgrind's C++ output
    os.write(2, text.encode())


def _params(cl, kernel) -> list:
    """The kernel's parameters as docs/internals.md §5 Bindings, from the compiler's
    argument info, so that validate_opencl checks every corpus launch file."""
    from gpurace.launch import cl_type_name, element_type
    from gpurace.model import Binding

    info, aq = cl.kernel_arg_info, cl.kernel_arg_address_qualifier
    kinds = {aq.GLOBAL: "global", aq.LOCAL: "local", aq.CONSTANT: "constant"}
    params = []
    for i in range(kernel.num_args):
        typ = kernel.get_arg_info(i, info.TYPE_NAME)
        kind = kinds.get(kernel.get_arg_info(i, info.ADDRESS_QUALIFIER), "scalar")
        elem = typ.rstrip("*").strip() if kind != "scalar" else typ
        found = element_type(cl_type_name(elem).replace("atomic_", ""))
        stride = found[0].itemsize * found[1] if found else 0
        name = kernel.get_arg_info(i, info.NAME)
        params.append(Binding(0, i, name, kind, "read_write", None, stride, elem, None))
    return params


def run_launch(cl, ctx, queue, kernel_path: str, launch_path: str) -> None:
    from gpurace.launch import load_launch, scalar_bytes, validate_opencl
    from gpurace.launch.sim import bind_sim_args, load_sim

    sim = launch_path.lower().endswith(".sim")  # an Oclgrind simulator file
    spec = load_sim(launch_path)[1] if sim else load_launch(launch_path)
    source = Path(kernel_path).read_text()
    program = cl.Program(ctx, source).build(options=[*spec.options, "-cl-kernel-arg-info"])
    kernels = {k.function_name: k for k in program.all_kernels()}
    kernel = kernels[spec.entry] if spec.entry else next(iter(kernels.values()))
    params = _params(cl, kernel)
    if sim:  # read against the parameters as the compiler gives them, as Oclgrind does
        spec = bind_sim_args(spec, params)
    reqd = kernel.get_work_group_info(
        cl.kernel_work_group_info.COMPILE_WORK_GROUP_SIZE, ctx.devices[0]
    )
    local = validate_opencl(spec, params, tuple(reqd))
    buffers = []
    for arg in spec.args:
        if arg.kind == "buffer" and arg.buffer is None:  # a .sim's null
            kernel.set_arg(arg.index, None)
        elif arg.kind == "buffer":
            flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
            data = arg.buffer.data
            # a .sim's size=0 buffer: OpenCL has no empty buffers (oclgrind-kernel does)
            buf = cl.Buffer(ctx, flags, hostbuf=data) if data.nbytes else cl.Buffer(ctx, 1, 1)
            buffers.append(buf)
            kernel.set_arg(arg.index, buf)
        elif arg.kind == "local":
            kernel.set_arg(arg.index, cl.LocalMemory(arg.local_bytes))
        else:
            kernel.set_arg(arg.index, scalar_bytes(arg, params[arg.index], launch_path))
    cl.enqueue_nd_range_kernel(queue, kernel, spec.global_size, local)
    queue.finish()
    for buf in buffers:
        buf.release()


def _worker(name: str) -> None:
    import pyopencl as cl

    platform = next(p for p in cl.get_platforms() if name.lower() in p.name.lower())
    ctx = cl.Context(platform.get_devices())
    queue = cl.CommandQueue(ctx)
    for case_id, kernel_path, launch_path in json.loads(sys.stdin.read()):
        _say(f"\n{_MARK} {case_id} begin\n")
        try:
            run_launch(cl, ctx, queue, kernel_path, launch_path)
            status = "ok"
        except Exception as err:  # reported to the parent as this case's error
            status = f"error: {type(err).__name__}: {err}".replace("\n", " ")
        _say(f"\n{_MARK}-end {status}\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        _worker(sys.argv[2])
    else:  # a manual look: python -m tests.oclgrind tests/corpus/opencl/NAME.toml ...
        from tests.corpus import cases as all_cases

        wanted = {Path(a).stem for a in sys.argv[1:]}
        chosen = [c for c in all_cases("opencl", ".cl") if not wanted or c.id in wanted]
        for race_mode in (False, True):
            group = [c for c in chosen if (c.load()[1].uniform_writes == "race") == race_mode]
            for cid, res in run_cases(group, race_mode).items():
                print(cid, sorted(res.sites), res.other, res.error or "")

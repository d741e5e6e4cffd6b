"""The ``gpurace run`` session: run a Python program in-process with GPU APIs hooked.

Why in-process (``runpy``) rather than a subprocess with a ``sitecustomize``
bootstrap: the hooks, the kernels seen and the per-kernel launch counters live in
one Python object that the report is printed from at the end, with no IPC and no
second interpreter start; the program still sees ``__name__ == "__main__"``, its
own ``sys.argv`` and its directory first on ``sys.path``, and its exceptions and
``sys.exit`` codes are caught here exactly as the interpreter would show them. The
cost: the program runs in gpurace's interpreter (``python`` in the command line
names it, it does not choose another one).

The session is independent of the GPU API: a hook module (``hooks_wgpu``) calls
``kernel`` when a launch is submitted, ``next_launch`` to learn whether that launch
is selected, and ``launch`` with a host snapshot of the bound buffers; the session
builds a ``LaunchSpec`` from it and reuses ``gpurace.api.check`` (races) and the
kernel's backend's determinism replayer (``determinism.repeater``: ``Backend.replayer``) on
gpurace's own device, so the program's buffers are never touched.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import runpy
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from gpurace import registry
from gpurace.model import GpuraceError, Report
from gpurace.options import TOOLS as CHECK_TOOLS
from gpurace.options import Options as CheckOptions
from gpurace.options import parse_tools
from gpurace.report.common import relpath
from gpurace.run.opencl_spec import OpenCLLaunch, opencl_spec

#: the default: the check's classes, no replays (determinism is opt-in)
DEFAULT_TOOL = "race,memcheck,initcheck"
#: Where module sources are looked for: at most this many .wgsl/.py files of at most
#: this size (a program started from a large directory must not be slowed down).
MAX_SOURCE_FILES = 200
MAX_SOURCE_BYTES = 1 << 20
#: At most this many distinct launch shapes of one kernel are selected (``--launches N``
#: selects N launches per shape): a program whose every launch has a new size is not
#: checked launch by launch.
MAX_SHAPES = 8


def identity(source: str | None, file: str, options: Sequence[str] = ()) -> str:
    """What tells two kernels apart: a hash of their source and build options, not
    their name (two WGSL modules' ``fn main``; 48 rebuilds of one text are one)."""
    text = source if source is not None else f"<no source: {file}>"
    data = "\0".join([text, *options]).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:16]


@dataclass
class Options:
    """What ``gpurace run`` checks; the CLI options one to one."""

    tool: str = DEFAULT_TOOL  # --tool as given; `tools` is what it selects
    kernel: str | None = None  # regular expression over entry point names
    launches: int = 1  # first N launches per kernel; 0: all
    repeat: int = 20
    uniform_writes: str | None = None
    device: str | None = None
    # how each launch is checked: the environment's (read at the run's start) unless given
    check: CheckOptions = field(default_factory=CheckOptions.from_env)

    tools: tuple[str, ...] = field(init=False, default=())

    @property
    def checks(self) -> tuple[str, ...]:
        """The check classes selected (gpurace.options.TOOLS): () runs no check."""
        return tuple(t for t in self.tools if t in CHECK_TOOLS)

    @property
    def replays(self) -> bool:
        """Whether launches are replayed for determinism."""
        return "determinism" in self.tools

    def __post_init__(self) -> None:
        # `all` is every class and the replays, as before initcheck; a check class alone
        # (`race`) checks without replays, as on `gpurace check` (docs/memcheck.md)
        picked = parse_tools(self.tool, ("determinism",))
        self.tools = (*picked, "determinism") if "all" in self.tool.split(",") else picked
        if self.launches < 0:
            raise GpuraceError(f"--launches must be 0 (all) or more, not {self.launches}")
        if self.repeat < 1:
            raise GpuraceError(f"--repeat must be a positive integer, not {self.repeat}")
        try:
            self.pattern = re.compile(self.kernel) if self.kernel is not None else None
        except re.error as err:
            raise GpuraceError(
                f"--kernel '{self.kernel}' is not a regular expression: {err}"
            ) from None


@dataclass
class Kernel:
    """One kernel (its source and build options, and the entry point) and what happened
    to its launches."""

    file: str
    entry: str
    source: str | None
    language: str
    variant: str = ""  # e.g. the override constants its pipeline set
    options: tuple[str, ...] = ()  # the build options (OpenCL), part of its identity
    digest: str = ""  # identity(source, file, options)
    twin: int = 0  # N > 0: the Nth source of this name in this file ("[source N]")
    launches: int = 0  # launches the program submitted
    checked: list[int] = field(default_factory=list)
    reports: list[tuple[int, Report]] = field(default_factory=list)
    repeats: list[tuple[int, Any]] = field(default_factory=list)  # determinism.RepeatResult
    skipped: list[str] = field(default_factory=list)  # "launch N: why"
    notes: list[str] = field(default_factory=list)  # "launch N: what was assumed"
    selected_launches: int = 0  # launches next_launch selected (checked, skipped or both)
    shapes: dict[Any, int] = field(default_factory=dict)  # launch shape -> launches selected

    @property
    def selected(self) -> bool:
        return bool(self.checked or self.skipped)

    @property
    def tags(self) -> str:
        """What the report adds to the name: ``[stride=2]``, ``[source 2]``."""
        return "".join(f" [{t}]" for t in (self.variant, self.twin and f"source {self.twin}") if t)


class Session:
    """Kernels seen, launches selected, and the checks' results for one run."""

    def __init__(self, options: Options, script_dir: str | None = None) -> None:
        self.options = options
        self.kernels: dict[tuple[str, str, str, str], Kernel] = {}
        self.script_dir = script_dir
        # Launches may come from any of the program's threads: the records (kernels,
        # counters, results) change under one lock, and checks run one at a time; the
        # "gpurace is using the API itself" flag is per thread, so the program's other
        # threads stay hooked while one thread's launch is snapshotted or checked.
        self.lock = threading.RLock()
        self._thread = threading.local()
        self._instrumented: dict[tuple[str, str, str, tuple[str, ...]], Any] = {}
        self._files: dict[str, str | None] | None = None

    # -- for hook modules ------------------------------------------------------

    @property
    def hooks_off(self) -> bool:
        """True while gpurace itself uses the GPU API in this thread (hooks pass the
        calls straight on)."""
        return getattr(self._thread, "off", 0) > 0

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        self._thread.off = getattr(self._thread, "off", 0) + 1
        try:
            yield
        finally:
            self._thread.off -= 1

    def locate(
        self, source: str | None, label: str, number: int, ext: str = ".wgsl"
    ) -> tuple[str, str | None]:
        """The file reports name a module's sites in, and the source to check for it.

        The program usually reads its kernel from a file: the label when it is that
        file, else an ``ext`` (``.wgsl``, ``.cl``) file next to the program (or in the
        current directory) with exactly this text. A kernel written as a string in a
        ``.py`` file there is found in it verbatim; the source checked then starts with
        as many empty lines as precede the string, so reported lines (and columns) are
        the ``.py`` file's. Otherwise the name is made from the label (``<label>``).
        """
        if source is not None:
            if label and os.path.isfile(label) and self._read(label) == source:
                return label, source
            files = self._candidates()
            for path, text in files.items():
                if path.endswith(ext) and text == source:
                    return path, source
            if source.strip():
                for path, text in files.items():
                    at = text.find(source) if path.endswith(".py") and text else -1
                    if at >= 0:
                        assert text is not None  # found in it
                        return path, "\n" * text.count("\n", 0, at) + source
        return f"<{label or f'shader module {number}'}>", source

    def kernel(
        self,
        file: str,
        entry: str | None,
        source: str | None,
        language: str,
        variant: str = "",
        options: Sequence[str] = (),
    ) -> Kernel:
        """The kernel record for (source and options, entry, variant); ``entry`` None:
        the module's only one.

        A kernel is its source text and build options (``identity``), whatever its name
        and however often the program rebuilt it; a second source with the same entry
        point in the same file is reported as ``[source 2]``. ``variant`` tells apart
        pipelines of one entry point that differ in how they were created (WGSL: the
        override constants); ``source`` is then that variant's.
        """
        digest = identity(source, file, options)
        with self.lock:
            name = entry or self._only_entry(file, source) or "?"
            key = (language, digest, name, variant)
            if key not in self.kernels:
                same = [
                    k
                    for k in self.kernels.values()
                    if (k.file, k.entry, k.variant) == (file, name, variant)
                ]
                if len(same) == 1 and not same[0].twin:
                    same[0].twin = 1
                twin = len(same) + 1 if same else 0
                self.kernels[key] = Kernel(
                    file, name, source, language, variant, tuple(options), digest, twin
                )
            return self.kernels[key]

    def next_launch(self, kernel: Kernel, shape: Any = None) -> int | None:
        """Count one launch of ``kernel``; its index if it is to be checked, else None.

        ``--launches N`` selects the first N launches of each launch ``shape`` (the
        NDRange, grid or workgroup counts; None: not known before the snapshot), so a
        kernel is checked again when it is launched with a new shape, and not when it
        is launched again as before.
        """
        with self.lock:
            return self._next_launch(kernel, shape)

    def _next_launch(self, kernel: Kernel, shape: Any) -> int | None:
        index = kernel.launches
        kernel.launches += 1
        opts = self.options
        if opts.pattern is not None and not opts.pattern.search(kernel.entry):
            return None
        done = kernel.shapes.get(shape, 0)
        if opts.launches and done >= opts.launches:
            return None
        if not done and len(kernel.shapes) >= MAX_SHAPES:
            return None
        kernel.shapes[shape] = done + 1
        kernel.selected_launches += 1
        if kernel.source is None:
            why = registry.language(kernel.language).no_source_reason(kernel.variant)
            self.skip(kernel, index, why)
            return None
        return index

    def skip(self, kernel: Kernel, index: int, reason: str) -> None:
        with self.lock:
            kernel.skipped.append(f"launch {index}: {reason}")

    def note(self, kernel: Kernel, index: int, what: str) -> None:
        """Say how a checked launch was reproduced where the program left it open
        (the local size a driver chose); printed as ``note: launch N: ...``."""
        with self.lock:
            kernel.notes.append(f"launch {index}: {what}")

    def launch(
        self,
        kernel: Kernel,
        index: int,
        workgroups: tuple[int, ...],
        buffers: dict[tuple[int, int], bytes],
        ranges: Mapping[tuple[int, int], tuple[object, int, int]] | None = None,
    ) -> None:
        """Check one launch from its snapshot: every bound buffer's bytes at that point;
        ``ranges``: the (buffer, offset, size) each binding names, so that bindings of
        one buffer are checked as one (`gpurace.launch.alias.aliases_of`)."""
        if 0 in workgroups:
            self.skip(kernel, index, f"empty grid {list(workgroups)}: nothing runs")
            return
        self._guarded(
            kernel, index, lambda: self.launch_spec(kernel, tuple(workgroups), buffers, ranges)
        )

    def launch_opencl(self, kernel: Kernel, index: int, launch: OpenCLLaunch) -> None:
        """Check one OpenCL launch from its snapshot (``OpenCLLaunch``: NDRange and args)."""
        if 0 in launch.global_size:
            self.skip(kernel, index, f"empty NDRange {list(launch.global_size)}: nothing runs")
            return
        self._guarded(kernel, index, lambda: self.opencl_spec(kernel, launch))

    def launch_cuda(self, kernel: Kernel, index: int, launch: dict[str, Any]) -> None:
        """Check one CUDA launch from its snapshot: a CUDA launch file's table (kernel,
        grid, block, shared_bytes, options, name_expressions, one ``arg`` table per
        parameter with NumPy arrays as fills, or ``alias`` tables; docs/launch-files.md)."""
        from gpurace.launch.cuda import cuda_launch_from_dict

        base = self.script_dir or os.getcwd()
        self._guarded(kernel, index, lambda: cuda_launch_from_dict(launch, kernel.file, base))

    def _guarded(self, kernel: Kernel, index: int, spec: Callable[[], Any]) -> None:
        """Build the launch's spec and check it; any failure is a skip with its reason."""
        with self.lock, self.suspended():
            try:
                self._check(kernel, index, spec())
            except GpuraceError as err:
                self.skip(kernel, index, str(err))
            except Exception as err:  # a gpurace bug must not take the program down
                if self.options.check.debug:
                    raise
                self.skip(kernel, index, f"internal error: {type(err).__name__}: {err}")

    # -- checking ---------------------------------------------------------------

    def _check(self, kernel: Kernel, index: int, spec: Any) -> None:
        from gpurace import api

        assert kernel.source is not None
        opts = self.options
        if opts.replays:
            from gpurace.launch.alias import refuse_replay

            refuse_replay(spec)  # before the race check: a launch is checked whole or not
        check = opts.check.with_(device=opts.device, uniform_writes=opts.uniform_writes)
        if opts.checks:
            check = check.with_(tools=opts.checks)
            report = api.check(
                kernel.source,
                spec,
                path=kernel.file,
                entry=kernel.entry,
                language=kernel.language,
                options=check,
            )
            for race in report.races:
                race.launch = index  # the text report's "launch N"
            for oob in report.out_of_bounds + report.uninitialised:
                oob.launch = index
            kernel.reports.append((index, report))
        if opts.replays:
            from gpurace.determinism import repeater

            result = repeater(kernel.language, check)(
                kernel.source,
                spec,
                runs=opts.repeat,
                path=kernel.file,
                device=registry.device_name(kernel.language, check),
                entry=kernel.entry,
            )
            kernel.repeats.append((index, result))
        kernel.checked.append(index)

    def launch_spec(
        self,
        kernel: Kernel,
        workgroups: tuple[int, ...],
        buffers: dict[tuple[int, int], bytes],
        ranges: Mapping[tuple[int, int], tuple[object, int, int]] | None = None,
    ) -> Any:
        """A LaunchSpec whose buffers hold the snapshot, typed as the kernel declares.

        Each binding gets the launch-file type of the scalar inside its element type
        (a struct of mixed fields is carried as u32 words: the bytes are exact, only
        the determinism statistics count in u32 steps). A binding the entry point
        does not use and the program did not bind gets zeros of its declared size.
        Bindings the program bound to overlapping ranges of one buffer (``ranges``)
        become aliases of the widest (docs/launch-files.md, "Aliased bindings").
        """
        import numpy as np

        from gpurace.launch import DTYPES, LaunchSpec, _type_hint
        from gpurace.launch.alias import aliases_of

        inst = self.instrumented(kernel)
        declared = {(b.group, b.binding) for b in inst.bindings}
        views = aliases_of({k: v for k, v in (ranges or {}).items() if k in declared})
        tables: list[dict[str, Any]] = []
        for b in inst.bindings:
            typ = _type_hint(b)
            if b.elem_type not in DTYPES and "<" not in b.elem_type:
                typ = "u32"  # a struct: its bytes as words
            dtype = DTYPES[typ]
            raw = buffers.get((b.group, b.binding))
            if raw is None:
                raw = bytes(max(b.size or b.elem_stride or 4, 16))
            n = len(raw)
            if b.size is None and b.elem_stride:
                n -= n % b.elem_stride
            n -= n % dtype.itemsize
            table: dict[str, Any] = {"group": b.group, "binding": b.binding, "type": typ}
            if (b.group, b.binding) in views:
                owner, offset = views[(b.group, b.binding)]
                table |= {"alias": list(owner), "offset": offset, "size": n}
            else:
                table["fill"] = np.frombuffer(raw[:n], dtype).copy()
            tables.append(table)
        return LaunchSpec.from_dict(
            {"entry": kernel.entry, "workgroups": list(workgroups), "binding": tables},
            path=kernel.file,
        )

    def opencl_spec(self, kernel: Kernel, launch: OpenCLLaunch) -> Any:
        """An OpenCL LaunchSpec of the snapshot (`gpurace.run.opencl_spec`)."""
        inst = self.instrumented(kernel, launch.options)
        params = inst.params.get(kernel.entry, [])
        return opencl_spec(kernel.file, kernel.entry, params, launch)

    def instrumented(self, kernel: Kernel, options: Sequence[str] = ()) -> Any:
        from gpurace import api

        key = (kernel.file, kernel.source or "", kernel.language, tuple(options))
        if key not in self._instrumented:
            self._instrumented[key] = api.instrument(
                kernel.source or "", kernel.file, kernel.language, options
            )
        return self._instrumented[key]

    def _only_entry(self, file: str, source: str | None) -> str | None:
        if source is None:
            return None
        try:
            with self.suspended():
                inst = self.instrumented(Kernel(file, "", source, "wgsl"))
        except GpuraceError:
            return None
        entries = list(inst.entry_points or {inst.entry: None})
        return entries[0] if len(entries) == 1 else None

    def _read(self, path: str) -> str | None:
        try:
            with open(path, encoding="utf-8") as f:
                return f.read()
        except (OSError, UnicodeDecodeError):
            return None

    def _candidates(self) -> dict[str, str | None]:
        """``.wgsl`` and ``.py`` files near the program, read once: where module sources
        come from."""
        with self.lock:  # read once, whichever thread asks first
            return self._read_candidates()

    def _read_candidates(self) -> dict[str, str | None]:
        if self._files is None:
            self._files = {}
            roots = [(self.script_dir, 2), (os.getcwd(), 0)] if self.script_dir else []
            for root, depth in roots:
                for dirpath, dirnames, filenames in os.walk(root):
                    rel = os.path.relpath(dirpath, root)
                    if rel != "." and rel.count(os.sep) + 1 > depth:
                        dirnames[:] = []
                        continue
                    for name in sorted(filenames):
                        path = os.path.join(dirpath, name)
                        if name.endswith((".wgsl", ".cl", ".cu", ".ptx", ".py")) and (
                            os.path.getsize(path) <= MAX_SOURCE_BYTES
                        ):
                            self._files.setdefault(relpath(path), self._read(path))
                    if len(self._files) >= MAX_SOURCE_FILES:
                        break
                    if depth == 0:
                        break
        return self._files

    # -- the exit code ----------------------------------------------------------

    @property
    def exit_code(self) -> int:
        """0 clean and complete, 1 races (out-of-bounds accesses, uninitialised reads) or
        nondeterminism, 2 incomplete (design.md §3)."""
        kernels = [k for k in self.kernels.values() if k.selected]
        if any(r.exit_code == 1 for k in kernels for _, r in k.reports):  # a class's errors
            return 1
        if any(not res.identical for k in kernels for _, res in k.repeats):
            return 1
        if not kernels or any(k.skipped for k in kernels):
            return 2
        if any(not r.scope.complete for k in kernels for _, r in k.reports):
            return 2
        return 0


# ---------------------------------------------------------------------------
# Running the program
# ---------------------------------------------------------------------------

#: Packages whose frames are not the program's: the host libraries and what they use
#: to generate kernels (a kernel pyopencl generates is named by the program's line).
LIBRARIES = ("gpurace", "pyopencl", "pytools", "mako", "wgpu", "cupy", "numpy", "runpy")


def program_line() -> str | None:
    """``file:line`` of the program's innermost frame on this thread's stack: the line
    that called into a host library (``ReductionKernel(...)``, ``a * 2`` on an Array,
    ``cl.Program(...).build()``). None when no frame is the program's."""
    import sysconfig

    paths = sysconfig.get_paths()
    stdlib = [os.path.realpath(paths[k]) + os.sep for k in ("stdlib", "platstdlib")]
    sites = [os.path.realpath(paths[k]) + os.sep for k in ("purelib", "platlib")]
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        module = str(frame.f_globals.get("__name__") or "")
        real = os.path.realpath(name)
        library = module.split(".")[0] in LIBRARIES or (
            any(real.startswith(d) for d in stdlib) and not any(real.startswith(d) for d in sites)
        )
        if not name.startswith("<") and not library:
            return f"{relpath(name)}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def parse_command(argv: Sequence[str]) -> tuple[str, str, list[str]]:
    """``python app.py ARGS`` or ``python -m pkg ARGS`` -> (kind, target, args)."""
    argv = list(argv)
    usage = "give the program after '--': gpurace run [OPTIONS] -- python app.py [ARGS]"
    if not argv:
        raise GpuraceError(f"no program to run; {usage}")
    if os.path.basename(argv[0]).startswith("python"):
        argv = argv[1:]
    elif not argv[0].endswith(".py"):
        raise GpuraceError(
            f"'{argv[0]}' is not a Python program: gpurace run runs Python programs "
            f"in-process; {usage}"
        )
    if not argv:
        raise GpuraceError(f"no script after 'python'; {usage}")
    if argv[0] == "-m":
        if len(argv) < 2:
            raise GpuraceError("'python -m' needs a module name")
        return "module", argv[1], argv[2:]
    if argv[0].startswith("-"):
        raise GpuraceError(
            f"python option '{argv[0]}' is not supported by gpurace run "
            "(give a script or -m MODULE)"
        )
    if not os.path.isfile(argv[0]):
        raise GpuraceError("program not found", argv[0])
    return "script", argv[0], argv[1:]


@dataclass
class ProgramResult:
    """How the program ended: its exit status, and whether it raised."""

    code: int
    crashed: bool = False


def _print_program_exception(exc: BaseException) -> None:
    """The traceback Python would print, without runpy's and gpurace's own frames."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    runpy_file = os.path.abspath(runpy.__file__)

    def keep(frame: traceback.FrameSummary) -> bool:
        if frame.filename.startswith("<frozen runpy"):
            return False
        f = os.path.abspath(frame.filename)
        return not (f.startswith(here + os.sep) or f == runpy_file)

    te = traceback.TracebackException.from_exception(exc)
    seen = set()
    todo = [te]
    while todo:
        t = todo.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        t.stack = traceback.StackSummary.from_list([f for f in t.stack if keep(f)])
        todo += [x for x in (t.__cause__, t.__context__) if x is not None]
    sys.stderr.write("".join(te.format()))


def run_program(kind: str, target: str, args: list[str]) -> ProgramResult:
    """Run the program in this interpreter as ``python`` would; never raises."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    try:
        if kind == "script":
            sys.argv = [target, *args]
            sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
            runpy.run_path(os.path.abspath(target), run_name="__main__")  # as python does
        else:
            sys.argv = [target, *args]
            sys.path.insert(0, os.getcwd())
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        return ProgramResult(0)
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return ProgramResult(0)
        if isinstance(code, int):
            return ProgramResult(code)
        sys.stderr.write(f"{code}\n")
        return ProgramResult(1)
    except KeyboardInterrupt:
        sys.stderr.write("KeyboardInterrupt\n")
        return ProgramResult(130, crashed=True)
    except BaseException as exc:
        _print_program_exception(exc)
        return ProgramResult(1, crashed=True)
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
        with contextlib.suppress(Exception):
            sys.stdout.flush()


def run(command: Sequence[str], options: Options) -> tuple[Session, ProgramResult]:
    """Install every available hook module, run the program, uninstall; the results."""
    kind, target, args = parse_command(command)
    script_dir = os.path.dirname(os.path.abspath(target)) if kind == "script" else os.getcwd()
    session = Session(options, script_dir)
    import gpurace.backends  # noqa: F401  (loads the OpenCL drivers before the program's Vulkan)
    from gpurace.run.on_import import hook_apis

    unhook = hook_apis(session)
    try:
        result = run_program(kind, target, args)
    finally:
        unhook()
    return session, result

"""The ``gpurace`` command line.

``gpurace check KERNEL --launch LAUNCH.toml`` prints the compiler-style report and
exits 0 (no race, complete), 1 (races) or 2 (incomplete, bad input, error), as
design.md §3 fixes, so CI can gate on it. Bad input is never a Python traceback:
every user-facing error is one ``file:line: error: ...`` line on stderr and exit 2.

The device work is behind ``gpurace.api`` (imported lazily so ``--help`` and input
errors do not pay for starting a GPU API).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import click

from gpurace import apis, isolate
from gpurace.cli_exit import error_line, guarded
from gpurace.model import GpuraceError
from gpurace.options import Options, parse_tools


def _api() -> Any:
    # import_module (not ``from gpurace import api``) so tests can substitute the module
    return importlib.import_module("gpurace.api")


class _Progress:
    """Progress messages on one self-erasing stderr line, only on a terminal.

    Off when stderr is not a terminal so that logs and the one-line error contract
    stay clean.
    """

    def __init__(self) -> None:
        self.active = False

    def __call__(self, message: str) -> None:
        width = 100
        sys.stderr.write("\r\x1b[K" + f"gpurace: {message}"[:width])
        sys.stderr.flush()
        self.active = True

    def clear(self) -> None:
        if self.active:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self.active = False


@contextlib.contextmanager
def _progress() -> Iterator[_Progress | None]:
    """A progress line while the device works (None when stderr is not a terminal),
    erased when the work ends or fails, before the report or the error line."""
    progress = _Progress() if sys.stderr.isatty() else None
    try:
        yield progress
    finally:
        if progress is not None:
            progress.clear()


def _check_kernel_file(kernel: str) -> None:
    """KERNEL must name a file; said before any launch-file or device work."""
    if not os.path.isfile(kernel):
        raise GpuraceError(
            "kernel file not found" + (" (it is a directory)" if os.path.isdir(kernel) else ""),
            file=kernel,
        )


def _read_suppressions(
    json_path: str | None, sarif_path: str | None, suppress_path: str | None
) -> Any:
    """The --suppress file (None without one), read with the output options checked
    before the device work or the program runs, so a bad file or option costs nothing."""
    from gpurace.report.suppress import load as load_suppressions

    if json_path == "-" and sarif_path == "-":
        raise GpuraceError("--json and --sarif cannot both write to standard output")
    return load_suppressions(suppress_path) if suppress_path else None


def _find_launch(kernel: str | None, launch: str | None) -> str:
    """The launch file: --launch, else KERNEL's name with ``.toml`` (else ``.sim``)
    next to it."""
    if launch is not None:
        if not os.path.isfile(launch):
            raise GpuraceError(
                "launch file not found"
                + (" (it is a directory)" if os.path.isdir(launch) else "")
                + "; pass a TOML file with --launch (format: docs/launch-files.md)",
                file=launch,
            )
        return launch
    assert kernel is not None  # callers pass KERNEL whenever there is no --launch
    from gpurace.batch import launch_beside

    return launch_beside(kernel)


#: Options more than one command takes, declared once (click applies a decorator per
#: command). Integer options are read as text ("N") and parsed by ``_positive``, so
#: that a bad value is one error line like every other.
_LAUNCH = click.option(
    "--launch",
    "launch_path",
    metavar="LAUNCH.toml",
    help="Launch file: grid, entry point and buffers (default: KERNEL's name + .toml, else .sim).",
)
_UNIFORM_WRITES = click.option(
    "--uniform-writes",
    type=click.Choice(["tolerate", "race"]),
    default=None,
    help="Same-value plain writes by different work-items: tolerate (default) or report.",
)
_DEVICE = click.option("--device", metavar="NAME", help="Device to run on (see `gpurace devices`).")
_ENTRY = click.option("--entry", metavar="NAME", help="Entry point (overrides the launch file).")


def _set_timeout(ctx: click.Context, param: click.Parameter, value: float | None) -> None:
    """--timeout: the watchdog's limit (gpurace/watchdog.py) as $GPURACE_KERNEL_TIMEOUT,
    which every place that makes Options reads (the check's child, the replayers)."""
    if value is not None:
        os.environ["GPURACE_KERNEL_TIMEOUT"] = repr(value)


_TIMEOUT = click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    expose_value=False,
    callback=_set_timeout,
    help="Give up on a launch still running after SECONDS: exit 2 "
    "(default: $GPURACE_KERNEL_TIMEOUT, else 60).",
)


def _count(flag: str, dest: str, default: str, help: str) -> Callable[[Any], Any]:
    """An integer option, read as text and parsed by ``_positive``."""
    return click.option(flag, dest, metavar="N", default=default, show_default=True, help=help)


def _file(flag: str, dest: str, help: str) -> Callable[[Any], Any]:
    """An option naming a file (``--json``, ``--sarif``, ``--suppress``)."""
    return click.option(flag, dest, metavar="FILE", help=help)


def _suppress(what: str) -> Callable[[Any], Any]:
    return _file(
        "--suppress",
        "suppress_path",
        f"Suppressions (TOML, docs/suppressions.md): known races that do not fail the {what}.",
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gpurace", prog_name="gpurace")
def main() -> None:
    """gpurace: find data races in GPU compute kernels by running them on the GPU."""


@main.command()
@click.argument("inputs", metavar="[INPUT]...", nargs=-1)
@_LAUNCH
@click.option(
    "--sim",
    "sim_path",
    metavar="FILE.sim",
    help="Oclgrind's .sim launch format instead (it names the kernel file; KERNEL overrides).",
)
@_file("--json", "json_path", "Also write the report as JSON ('-': stdout).")
@_file(
    "--sarif",
    "sarif_path",
    "Also write the report as SARIF 2.1.0 for code scanning ('-': stdout).",
)
@_suppress("check")
@_UNIFORM_WRITES
@click.option("--all", "all_instances", is_flag=True, help="List every instance of each race.")
@_DEVICE
@_ENTRY
@_TIMEOUT
@click.option(
    "--build-options",
    metavar="OPTIONS",
    help="More OpenCL/CUDA compiler options, after the launch file's (oclgrind-kernel's flag).",
)
@_count(
    "--schedules",
    "schedules_text",
    "1",
    "sim: run the launch under N warp orders (seeds S..S+N-1), report the union.",
)
@_count(
    "--schedule-seed",
    "seed_text",
    "0",
    "sim: the first order's seed S (0: the fixed min-PC order).",
)
@click.option(
    "--color/--no-color", default=None, help="Colour the report (default: only on a terminal)."
)
@click.option(
    "--tool",
    "tool",
    metavar="TOOLS",
    help="Check classes: race, memcheck, initcheck, all (the default), or a comma list "
    "(race,memcheck).",
)
def check(
    inputs: tuple[str, ...],
    launch_path: str | None,
    sim_path: str | None,
    json_path: str | None,
    sarif_path: str | None,
    suppress_path: str | None,
    uniform_writes: str | None,
    all_instances: bool,
    device: str | None,
    entry: str | None,
    build_options: str | None,
    schedules_text: str,
    seed_text: str,
    color: bool | None,
    tool: str | None,
) -> None:
    """Run each INPUT once as its launch file describes and report its data races,
    out-of-bounds accesses and uninitialised reads (--tool picks which).

    INPUT is a kernel (.wgsl, .cl, .cu, .ptx) whose launch file is beside it (its name
    with .toml, else .sim) or given with --launch/--sim; a .toml or .sim launch file;
    or a directory, walked for kernels in sorted order. Several inputs are checked in
    one process, each reported as a single check reports it, then one summary line.

    Exit status: 0 nothing found and complete, 1 races (or out-of-bounds accesses,
    uninitialised reads) found, 2 incomplete, bad input or error; for several inputs,
    the worst of theirs (2 over 1 over 0).
    """

    def run() -> int:
        suppressions = _read_suppressions(json_path, sarif_path, suppress_path)
        kwargs: dict[str, Any] = {"device": device, "entry": entry}
        if tool is not None:  # else check's default: all (docs/memcheck.md)
            kwargs["options"] = Options.from_env(tools=parse_tools(tool))
        # Only passed when given, so check_file's defaults (the launch file's
        # uniform_writes, one instance per race) apply otherwise.
        if uniform_writes is not None:
            kwargs["uniform_writes"] = uniform_writes
        if all_instances:
            kwargs["all_instances"] = True
        if build_options:
            kwargs["build_options"] = build_options
        n = _positive(schedules_text, "--schedules", 1)
        seed = _positive(seed_text, "--schedule-seed", 0)
        if n > 1 or seed:
            kwargs["options"] = Options.from_env(schedules=n, schedule_seed=seed)
        out = Output(json_path, sarif_path, suppressions, color)
        if len(inputs) > 1 or (inputs and os.path.isdir(inputs[0])):
            if launch_path is not None or sim_path is not None:
                raise GpuraceError(
                    "--launch and --sim give the launch of one kernel; with several inputs, "
                    "each kernel's launch file is the .toml (or .sim) beside it"
                )
            return _check_batch(inputs, kwargs, out)
        kernel, launch = _one_input(inputs[0] if inputs else None, launch_path, sim_path)
        if kernel is not None and kernel.lower().endswith(".wgsl"):
            apis.warm_up_wgsl(device)
        with _progress() as progress, isolate.enabled():
            report = _api().check_file(kernel, launch, progress=progress, **kwargs)
        out.report(report, single=True)
        out.documents([report], None)
        return int(report.exit_code)

    guarded(run)


def _one_input(
    kernel: str | None, launch_path: str | None, sim_path: str | None
) -> tuple[str | None, str]:
    """(kernel, launch file) of a check of one input, checked before any device work:
    a lone ``.sim`` or ``.toml`` input is the launch file (``batch.pair``)."""
    from gpurace import batch

    if sim_path is not None:
        if launch_path is not None:
            raise GpuraceError("give either --launch or --sim, not both")
        launch = _find_launch(kernel, sim_path)
    elif kernel is None:
        raise GpuraceError("missing KERNEL: gpurace check KERNEL [--launch L.toml | --sim S]")
    elif launch_path is None and kernel.lower().endswith(batch.LAUNCH_EXTENSIONS):
        item = batch.pair(kernel)
        if item.error is not None:
            raise item.error
        return item.kernel, item.launch or kernel
    else:
        launch = _find_launch(kernel, launch_path)
    if kernel is not None:
        _check_kernel_file(kernel)
    return kernel, launch


class Output:
    """Where a check's reports go: the text report to stdout (to stderr when JSON or
    SARIF goes to stdout), and the --json / --sarif documents, for one input or a
    batch (docs/json-schema.md: a batch's JSON form)."""

    def __init__(
        self, json_path: str | None, sarif_path: str | None, suppressions: Any, color: bool | None
    ) -> None:
        self.json_path, self.sarif_path = json_path, sarif_path
        self.suppressions, self.color = suppressions, color
        self.stream = sys.stderr if "-" in (json_path, sarif_path) else sys.stdout
        self.printed = 0

    def report(self, report: Any, single: bool = False) -> None:
        """Print one input's text report, as a check of that input alone prints it
        (in a batch the unused suppressions are listed once, at the end)."""
        from gpurace.report.text import print_text

        notes: list[str] = []
        if self.suppressions is not None:
            self.suppressions.apply(report)
            notes = self.suppressions.notes() if single else []
        if self.printed:
            self.stream.write("\n")
        print_text(report, self.stream, color=self.color, notes=notes)
        self.stream.flush()
        self.printed += 1

    def error(self, line: str) -> None:
        """An input's error line, on stderr as a check of that input alone prints it."""
        sys.stdout.flush()
        click.echo(line, err=True)

    def summary(self, entries: list[Any]) -> None:
        """The batch's last lines: the unused suppressions, then the counts."""
        from gpurace.report.text import batch_summary_line

        notes = self.suppressions.notes() if self.suppressions is not None else []
        lines = [*notes, batch_summary_line(entries)]
        self.stream.write(("\n" if self.printed else "") + "".join(n + "\n" for n in lines))

    def documents(self, reports: list[Any], entries: list[Any] | None) -> None:
        """Write --json and --sarif: a single check's report, or (``entries`` given)
        the batch's documents."""
        from gpurace.report.json_report import batch_json, write_document, write_json
        from gpurace.report.sarif import write_sarif

        sup = self.suppressions
        if self.json_path:
            if entries is None:
                write_json(reports[0], self.json_path, suppressions=sup)
            else:
                write_document(batch_json(entries, suppressions=sup), self.json_path)
        if self.sarif_path:
            errors = [e.error for e in entries or [] if e.error is not None]
            write_sarif(reports, self.sarif_path, suppressions=sup, errors=errors)


def _check_batch(paths: tuple[str, ...], kwargs: dict[str, Any], out: Output) -> int:
    """``gpurace check`` over several inputs in one process (gpurace/batch.py)."""
    from gpurace import batch
    from gpurace.report.json_report import BatchEntry, batch_exit_code

    inputs = batch.collect(paths)
    if inputs and all(item.language == "wgsl" for item in inputs):
        apis.warm_up_wgsl(kwargs.get("device"))
    entries: list[BatchEntry] = []
    with _progress() as progress, isolate.enabled():

        def one(item: batch.Input) -> Any:
            say = None
            if progress is not None and not isolate.in_child_process():  # one writer

                def say(message: str) -> None:
                    progress(f"{batch.describe(item)}: {message}")

            return _api().check_file(item.kernel, item.launch, progress=say, **kwargs)

        for outcome in batch.run(inputs, one, isolate.wanted(), kwargs["entry"]):
            if progress is not None:
                progress.clear()
            line = None
            if outcome.report is not None:
                out.report(outcome.report)
            else:
                assert isinstance(outcome.error, Exception)
                line = error_line(outcome.error)
                out.error(line)
            entries.append(
                BatchEntry(outcome.input.kernel, outcome.input.launch, outcome.report, line)
            )
    out.summary(entries)
    out.documents([e.report for e in entries if e.report is not None], entries)
    return batch_exit_code(entries)


@main.command()
@click.argument("kernel", metavar="KERNEL")
@_LAUNCH
@_count("--runs", "runs_text", "20", "Number of replays, each from the same initial buffers.")
@_file("--json", "json_path", "Also write the result as JSON ('-': stdout).")
@_DEVICE
@_ENTRY
@_TIMEOUT
def repeat(
    kernel: str,
    launch_path: str | None,
    runs_text: str,
    json_path: str | None,
    device: str | None,
    entry: str | None,
) -> None:
    """Replay the plain KERNEL N times from the same inputs and compare the outputs' bits.

    KERNEL is a .wgsl (wgpu), .cl (OpenCL) or .cu/.ptx (CUDA, cupy) file. Every
    buffer the kernel can write (CUDA: every pointer argument) is restored from an
    on-device snapshot before each replay and hashed on the device after it; where
    replays differ, one output per distinct result is read back and compared element
    by element.

    Exit status: 0 all replays bit-identical, 1 they differ, 2 bad input or error.
    """

    def run() -> int:
        from gpurace.determinism import repeat_file, write_json
        from gpurace.launch.alias import refuse_replay

        runs = _positive(runs_text, "--runs", 1)
        _check_kernel_file(kernel)
        launch = _find_launch(kernel, launch_path)
        refuse_replay(_api().read_launch(launch, kernel)[1])  # an alias needs one buffer
        with _progress() as progress, isolate.enabled():
            result = repeat_file(
                kernel, launch, runs=runs, device=device, entry=entry, progress=progress
            )
        out = sys.stderr if json_path == "-" else sys.stdout
        out.write(str(result) + "\n")
        if json_path:
            write_json(result, json_path)
        return result.exit_code

    guarded(run)


@main.command()
def devices() -> None:
    """List the devices gpurace can run on; the default is marked with '*'."""

    def run() -> int:
        found = list(_api().list_devices())
        if not found:
            raise GpuraceError(
                "no usable device found (install a Vulkan driver such as lavapipe/llvmpipe, "
                "an OpenCL platform such as PoCL, or CUDA with cupy)"
            )
        width = max(len(name) for name, _, _ in found)
        for name, description, is_default in found:
            mark = "*" if is_default else " "
            suffix = "  (default)" if is_default else ""
            # a backend's description starts with the name (reports quote it whole);
            # the name column already says it
            detail = description.removeprefix(name).strip()
            click.echo(f"{mark} {name:<{width}}  {detail}{suffix}".rstrip())
        return 0

    guarded(run)


@main.command(
    "run",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option(
    "--tool",
    metavar="TOOLS",
    default="race,memcheck,initcheck",
    show_default=True,
    help="race, memcheck, initcheck (the check's classes), determinism (replays), all "
    "(every one), or a comma list.",
)
@click.option("--kernel", "kernel_re", metavar="REGEX", help="Only entry points matching REGEX.")
@_count(
    "--launches",
    "launches_text",
    "1",
    "Check the first N launches of each kernel and launch shape (0: all).",
)
@_count("--repeat", "repeat_text", "20", "Replays per launch with --tool determinism/all.")
@_file("--json", "json_path", "Also write the report as JSON.")
@_file(
    "--sarif",
    "sarif_path",
    "Also write the races as SARIF 2.1.0 for code scanning (one run for the program).",
)
@_suppress("run")
@_UNIFORM_WRITES
@click.option("--device", metavar="NAME", help="Device gpurace checks on (see `gpurace devices`).")
@_TIMEOUT
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="-- python APP.py [ARGS]")
def run_command(
    tool: str,
    kernel_re: str | None,
    launches_text: str,
    repeat_text: str,
    json_path: str | None,
    sarif_path: str | None,
    suppress_path: str | None,
    uniform_writes: str | None,
    device: str | None,
    command: tuple[str, ...],
) -> None:
    """Run a Python program with its GPU launches checked; one report at exit (on stderr).

    Every compute launch the program submits through wgpu or pyopencl is recorded; the selected
    ones are snapshotted and checked on copies, so the program's results are unchanged.

    Exit status: the program's own status if it failed, else 0 clean and complete,
    1 races or nondeterminism found, 2 incomplete, bad input or error.
    """
    _run_program(tool, kernel_re, launches_text, repeat_text, json_path, uniform_writes, device,
                 command, sarif_path=sarif_path, suppress_path=suppress_path)  # fmt: skip


def _positive(text: str, option: str, least: int) -> int:
    """An integer option's value, parsed here rather than by click so that a bad value
    is one error line like every other."""
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if value < least:
        what = "a positive integer" if least else "0 or a positive integer"
        raise GpuraceError(f"{option} must be {what}, not '{text}'")
    return value


def _run_program(
    tool: str,
    kernel_re: str | None,
    launches_text: str,
    repeat_text: str,
    json_path: str | None,
    uniform_writes: str | None,
    device: str | None,
    command: tuple[str, ...],
    sarif_path: str | None = None,
    suppress_path: str | None = None,
) -> NoReturn:
    """``gpurace run``: parse, run the program in-process, print the report, exit."""

    def run() -> int:
        from gpurace.run import report
        from gpurace.run import session as run_session

        suppressions = _read_suppressions(json_path, sarif_path, suppress_path)

        options = run_session.Options(
            tool=tool,
            kernel=kernel_re,
            launches=_positive(launches_text, "--launches", 0),
            repeat=_positive(repeat_text, "--repeat", 1),
            uniform_writes=uniform_writes,
            device=device,
            check=Options.from_env(device=device, uniform_writes=uniform_writes),
        )
        session, result = run_session.run(command, options)
        notes: list[str] = []
        if suppressions is not None:
            suppressions.apply_all(report.reports(session))
            notes = suppressions.notes()
        sys.stdout.flush()
        sys.stderr.write(report.format_run(session, result, notes=notes))
        if json_path:
            report.write_json(report.to_json(session, result), json_path)
        if sarif_path:
            target = run_session.parse_command(command)[1]
            doc = report.to_sarif(session, result, target, suppressions=suppressions)
            report.write_sarif(doc, sarif_path)
        return report.exit_code(session, result)

    guarded(run)


if __name__ == "__main__":  # pragma: no cover
    main(prog_name="gpurace")

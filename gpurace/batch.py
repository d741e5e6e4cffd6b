"""Many inputs in one process: ``gpurace check A.cl B.wgsl tests/corpus/opencl``.

A suite of N kernels checked one process each pays start-up N times (Python and its
imports, the device context, the companion programs' builds). A batch pays it once:
the device of each language is opened once (the backends keep one context per device
and process) and reused by every input of that language.

What an input is (docs/run.md's batch section says the same for users):

- a kernel file (``.wgsl``, ``.cl``, ``.cu``, ``.ptx``) with its launch file beside it:
  the same name with ``.toml``, else with ``.sim``;
- a ``.sim`` file (Oclgrind's format), which names its kernel file;
- a ``.toml`` launch file, whose kernel is the file beside it with the same name and
  a kernel extension;
- a directory, walked recursively (hidden entries skipped) for kernel files, in
  sorted path order; launch files are not inputs there, only the kernels' launches.

An input that cannot be paired, read or checked is that input's error; the batch goes
on. OpenCL inputs run in one child process (`isolate.Worker`) so that a kernel that
corrupts the runtime's memory takes only itself with it, as for a single check.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpurace import isolate, registry
from gpurace.model import DeviceHang, GpuraceError, Report

LAUNCH_EXTENSIONS = (".toml", ".sim")


@dataclass(frozen=True)
class Input:
    """One check of a batch: a kernel and its launch file, or why there is none.

    ``kernel`` is None for a ``.sim`` file (it names its kernel)."""

    kernel: str | None
    launch: str | None
    error: GpuraceError | None = None

    @property
    def language(self) -> str | None:
        """The kernel's language, from its extension (a ``.sim`` file is OpenCL)."""
        if self.kernel is None:
            return "opencl" if self.launch else None
        return registry.extensions().get(os.path.splitext(self.kernel)[1].lower())


@dataclass
class Outcome:
    """An input and what checking it gave: a report, or the exception that stopped it."""

    input: Input
    report: Report | None = None
    error: BaseException | None = None


def launch_beside(kernel: str) -> str:
    """The launch file of a kernel that is given none: its name with ``.toml``, else
    with ``.sim``; the error says what to create."""
    stem = os.path.splitext(kernel)[0]
    for ext in LAUNCH_EXTENSIONS:
        if os.path.isfile(stem + ext):
            return stem + ext
    raise GpuraceError(
        f"no launch file: pass --launch LAUNCH.toml (or create {stem}.toml); "
        "the format is in docs/launch-files.md",
        file=kernel,
    )


def kernel_beside(launch: str) -> str:
    """The kernel of a ``.toml`` launch file given as an input: the one file beside it
    with the same name and a kernel extension."""
    stem = os.path.splitext(launch)[0]
    found = [stem + ext for ext in registry.extensions() if os.path.isfile(stem + ext)]
    if len(found) == 1:
        return found[0]
    what = "no kernel file" if not found else "several kernel files (" + ", ".join(found) + ")"
    raise GpuraceError(
        f"{what} beside this launch file: name the kernel instead (gpurace check KERNEL)",
        file=launch,
    )


def pair(path: str) -> Input:
    """The input that one named file makes (see the module docstring)."""
    try:
        if not os.path.isfile(path):
            raise GpuraceError("file not found", file=path)
        ext = os.path.splitext(path)[1].lower()
        if ext == ".sim":
            return Input(None, path)
        if ext == ".toml":
            return Input(kernel_beside(path), path)
        registry.language_of(path)  # an unsupported type is this input's error
        return Input(path, launch_beside(path))
    except GpuraceError as err:
        return Input(path, None, err)


def walk(directory: str) -> list[str]:
    """Every kernel file under ``directory``, hidden entries skipped, sorted by path
    (component by component, so ``a/z.cl`` comes before ``a-b/y.cl``)."""
    kernels = registry.extensions()
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found += [
            os.path.join(root, f)
            for f in files
            if not f.startswith(".") and os.path.splitext(f)[1].lower() in kernels
        ]
    return sorted(found, key=lambda f: Path(f).parts)


def collect(paths: Sequence[str]) -> list[Input]:
    """The inputs of a batch, in the order given (a directory's in sorted order); a
    pair named twice (a file and a directory holding it) is checked once."""
    inputs: list[Input] = []
    seen: set[tuple[str | None, str | None]] = set()
    for path in paths:
        named = walk(path) if os.path.isdir(path) else [path]
        if os.path.isdir(path) and not named:
            inputs.append(Input(path, None, GpuraceError("no kernel files in directory", path)))
        for item in map(pair, named):
            key = (_abs(item.kernel), _abs(item.launch))
            if item.error is None and key in seen:
                continue
            seen.add(key)
            inputs.append(item)
    return inputs


def _abs(path: str | None) -> str | None:
    return os.path.abspath(path) if path else None


def run(
    inputs: Sequence[Input],
    check: Callable[[Input], Report],
    isolated: bool,
    entry: str | None = None,
) -> Iterator[Outcome]:
    """Check every input in order, yielding each outcome as soon as it is known.

    ``check`` does one input (``api.check_file`` with the command's options). With
    ``isolated``, OpenCL inputs run in one `isolate.Worker`, forked before this
    process opens any device, working ahead of the in-process ones. A DeviceHang of
    an in-process check ends the batch (its context is stuck): it is raised.
    """
    opencl = [i for i in inputs if i.error is None and i.language == "opencl"]
    worker = isolate.Worker(opencl, check) if isolated and opencl else None
    taken = 0
    try:
        for item in inputs:
            if item.error is not None:
                yield Outcome(item, error=item.error)
            elif worker is not None and item.language == "opencl":
                got = worker.take(taken, functools.partial(_crashed, item, entry))
                taken += 1
                if isinstance(got, Report):
                    yield Outcome(item, report=got)
                elif isinstance(got, Exception):
                    yield Outcome(item, error=got)
                else:  # KeyboardInterrupt and the like in the child: end here too
                    raise got
            else:
                yield _in_process(item, check)
    finally:
        if worker is not None:
            worker.close()


def _in_process(item: Input, check: Callable[[Input], Report]) -> Outcome:
    try:
        return Outcome(item, report=check(item))
    except DeviceHang:
        raise
    except Exception as err:  # the input's error (the CLI words each kind as one line)
        return Outcome(item, error=err)


def _crashed(item: Input, entry: str | None, how: str) -> GpuraceError:
    """A worker that died on ``item``: the error a single check of it gives."""
    from gpurace import api  # the launch file says where; read again, cheaply

    try:
        _, spec = api.read_launch(item.launch or "", item.kernel)
    except GpuraceError as err:
        return err
    return api.crashed(spec, entry, how)


def describe(item: Input) -> str:
    """The input as the user would name it, for progress lines."""
    return item.kernel or item.launch or "?"

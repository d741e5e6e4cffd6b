"""Save, or compare against, the text, JSON and SARIF reports of every corpus case.

A behaviour-preserving restructuring must leave every report byte-identical (issue
10). Run from a checkout's root (its ``gpurace`` and ``tests`` packages are the ones
imported)::

    python bench/report_snapshot.py --out DIR      # write DIR/<language>/<case>.txt|.json|.sarif
    python bench/report_snapshot.py --compare DIR  # re-run; a diff per differing file, exit 1
    python bench/report_snapshot.py --compare DIR --only opencl/relacq  # those cases only

Cases: every labelled launch of tests/corpus/{wgsl,opencl,cuda} and the Triton PTX of
tests/corpus/ptx with the launches of tests/test_ptx_rewriter.py. WGSL runs on wgpu
(lavapipe), OpenCL on PoCL; CUDA and PTX run on the CPU as tests/test_cuda_backend_host.py
runs them: a stand-in cupy whose kernels run on the PTX interpreter, the analysis
kernels on PoCL; launches with a TMA tensor map (sim's layout) run on sim. Kernel
paths are given relative to the checkout root, and reports are written relative to it.

Normalised, because it legitimately differs between runs or checkouts, and nothing
else:

* the checkout's absolute path (SARIF's ``%SRCROOT%`` URI is the working directory;
  a path outside it would also be absolute) becomes ``<ROOT>``;
* the number of access records logged: event records of work-items after the first
  at a barrier depend on arrival order (docs/internals.md §2), so
  ``accesses_logged`` (JSON and SARIF) becomes ``"<N>"`` and the text's "N accesses
  logged" ``<N> accesses logged``. Races, their counts, sites and examples are not
  normalised.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

ROOT = Path.cwd()
sys.path.insert(0, str(ROOT))  # this checkout's gpurace and tests, not the script's

from gpurace import api  # noqa: E402
from gpurace.model import Report  # noqa: E402
from gpurace.options import Options  # noqa: E402
from gpurace.report import format_text, json_report, sarif  # noqa: E402
from tests.corpus import CORPUS, cases  # noqa: E402

#: a tensormap [[arg]] is a TMA tensor map in sim's layout: only sim runs such a launch
SIM = Options.from_env().with_(device="sim")
#: what each language's reports look like in its corpus directory
LANGUAGES = {"wgsl": ".wgsl", "opencl": ".cl", "cuda": ".cu"}


def _relative(path: Path) -> str:
    return str(path.resolve().relative_to(ROOT))


def _fake_cuda() -> None:
    """CUDA on the CPU, as tests/test_cuda_backend_host.py's fake_cupy and
    pocl_analysis fixtures set it up (for the rest of this process)."""
    import numpy as np

    from gpurace.backends import cuda_backend, opencl_backend
    from gpurace.model import RECORD_WORDS
    from tests.test_cuda_backend_host import FAKE_CUPY, _Device

    queue = opencl_backend.get_device("Portable Computing Language")[0]

    def analyse(device, log, n, bases, uniform, **kw):  # type: ignore[no-untyped-def]
        buf = None
        if log is not None:
            records = np.asarray(log[: max(1, n) * RECORD_WORDS]).reshape(-1, RECORD_WORDS)
            buf = opencl_backend.upload_log(queue, records)
        return opencl_backend.analyse_on_device(queue, buf, n, bases, uniform, **kw)

    cuda_backend._cupy = lambda: FAKE_CUPY
    cuda_backend._modules = {}
    real = cuda_backend.get_device  # sim by name: the TMA tensor maps' cases (SIM below)
    cuda_backend.get_device = lambda name=None: (
        real(name) if name == "sim" else (_Device(), "fake GPU")
    )
    cuda_backend.max_records_per_pass = lambda dev: 1 << 16
    cuda_backend.analysis_limit = lambda dev: 1 << 24
    cuda_backend.analyse_on_device = analyse


def corpus_checks() -> Iterator[tuple[str, Callable[[], Report]]]:
    """(language/case, a function that checks it) for every case, in a stable order."""
    for language, ext in LANGUAGES.items():
        for case in cases(language, ext):
            yield f"{language}/{case.id}", _checker(language, case.kernel, case.launch_path)
    from tests.test_ptx_rewriter import TRITON

    for name in sorted(TRITON):
        yield f"ptx/{name}", _ptx_checker(name, TRITON[name])


def _checker(language: str, kernel: Path, launch_path: Path) -> Callable[[], Report]:
    def check() -> Report:
        if language == "cuda":
            from gpurace.launch.cuda import load_cuda_launch

            spec = load_cuda_launch(launch_path)
            if any(a.kind == "tensormap" for a in spec.args):  # maps in sim's layout
                return api.check(kernel.read_text(), spec, path=_relative(kernel), options=SIM)
        else:
            from gpurace.launch import load_launch

            spec = load_launch(str(launch_path))
        return api.check(kernel.read_text(), spec, path=_relative(kernel))

    return check


def _ptx_checker(name: str, launch: dict) -> Callable[[], Report]:
    def check() -> Report:
        from gpurace.launch.cuda import cuda_launch_from_dict

        path = CORPUS / "ptx" / f"{name}.ptx"
        spec = cuda_launch_from_dict(launch, f"{name}.toml")
        return api.check(path.read_text(), spec, path=_relative(path))

    return check


_LOGGED_TEXT = re.compile(r"\b\d[\d,]* (access(?:es)? logged)")
_LOGGED_JSON = re.compile(r'("accesses_logged": )\d+')
_ORDER_COUNTS = re.compile(r"extracted \d+ ORDER events?, the host computed the clocks of \d+")
_ORDER_COUNTS_NORMAL = "extracted <N> ORDER events, the host computed the clocks of <N>"
_DEVICE_BYTES = re.compile(r'("device_bytes": )\d+')
#: how many more times --compare checks a case whose reports differ (see the module doc)
RETRIES = 4


def normalise(text: str) -> str:
    """The report text with what legitimately varies replaced (see the module doc)."""
    root = str(ROOT)
    text = text.replace(ROOT.as_uri(), "file://<ROOT>").replace(root, "<ROOT>")
    text = _LOGGED_TEXT.sub(r"<N> \1", text)
    text = _LOGGED_JSON.sub(r'\1"<N>"', text)
    if _ORDER_COUNTS.search(text):
        text = _ORDER_COUNTS.sub(_ORDER_COUNTS_NORMAL, text)
        text = _DEVICE_BYTES.sub(r'\1"<N>"', text)
    return text


def reports(report: Report) -> dict[str, str]:
    """The three reports of one check, by file suffix, normalised."""
    cwd = str(ROOT)
    return {
        ".txt": normalise(format_text(report, cwd)),
        ".json": normalise(json_report.dumps(report, cwd)),
        ".sarif": normalise(sarif.dumps([report], cwd)),
    }


def snapshot() -> Iterator[tuple[str, Callable[[], dict[str, str]]]]:
    """(case name, a function giving its reports by file suffix) for every case."""
    _fake_cuda()
    for name, check in corpus_checks():
        yield name, functools.partial(_reports_of, check)


def _reports_of(check: Callable[[], Report]) -> dict[str, str]:
    return reports(check())


def _saved(directory: Path, name: str, suffixes: Iterable[str]) -> dict[str, str]:
    files = {suffix: directory / (name + suffix) for suffix in suffixes}
    return {s: p.read_text(encoding="utf-8") if p.exists() else "" for s, p in files.items()}


def _diff(name: str, old: dict[str, str], new: dict[str, str]) -> Iterator[str]:
    for suffix, text in new.items():
        yield from difflib.unified_diff(
            old[suffix].splitlines(keepends=True),
            text.splitlines(keepends=True),
            f"saved/{name}{suffix}",
            f"now/{name}{suffix}",
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", type=Path, help="write the reports under DIR")
    group.add_argument("--compare", type=Path, help="compare the reports with DIR's")
    parser.add_argument(
        "--only", metavar="TEXT", default="", help="only the cases whose name contains TEXT"
    )
    args = parser.parse_args()
    differ, seen = 0, set[str]()
    for name, run in snapshot():
        if args.only not in name:
            continue
        start = time.perf_counter()
        now = run()
        seen.update(name + suffix for suffix in now)
        if args.out is not None:
            for suffix, text in now.items():
                path = args.out / (name + suffix)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
        else:
            saved = _saved(args.compare, name, now)
            tries = 0
            while now != saved and tries < RETRIES:  # schedule-dependent? (module doc)
                tries, now = tries + 1, run()
            differ += sum(now[s] != saved[s] for s in now)
            sys.stdout.writelines(_diff(name, saved, now))
            if tries and now == saved:
                print(f"{name}: matched on check {tries + 1}", file=sys.stderr)
        print(f"{name}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    if args.compare is not None:
        saved_names = {
            os.path.relpath(p, args.compare)
            for p in args.compare.rglob("*")
            if p.suffix in (".txt", ".json", ".sarif") and args.only in str(p)
        }
        for name in sorted(saved_names - seen):
            differ += 1
            print(f"saved/{name}: no such case any more")
        print(f"{len(seen)} reports, {differ} differ", file=sys.stderr)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

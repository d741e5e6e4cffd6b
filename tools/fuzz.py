"""Fuzz `gpurace check` for a while: mutated corpus kernels, launch files and `.sim`
files (tests/fuzzing.py), each run in a subprocess with a time limit.

    python tools/fuzz.py [--minutes 60] [--seed 0] [--timeout 120] [--out fuzz-failures]

Prints one line per case that broke the rule (a traceback, an internal error, a crash,
a hang, an exit-2 error that is not one located line) and a summary of outcomes at the
end; each failing case is saved under ``--out`` (its files, the command, its output),
so ``cd fuzz-failures/N && sh cmd`` replays it. Exit status 1 if any case failed.
Case ``i`` uses ``random.Random(seed * 1_000_003 + i)``: a run can be replayed.
"""

from __future__ import annotations

import argparse
import collections
import random
import shlex
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fuzzing import Case, corpus, make_case, run_case  # noqa: E402

GOOD = ("ok", "error")


def save(out: Path, index: int, case: Case, outcome: str, stdout: str, stderr: str) -> Path:
    """A failing case's files, command and output in ``out/index``."""
    folder = out / str(index)
    folder.mkdir(parents=True, exist_ok=True)
    case.write(folder)
    (folder / "cmd").write_text(shlex.join([sys.executable, "-m", "gpurace", *case.args]) + "\n")
    (folder / "outcome.txt").write_text(
        f"{outcome}\n{case.what}\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n"
    )
    return folder


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=60.0, help="how long to fuzz (default 60)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the run (default 0)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds a case may run")
    ap.add_argument("--out", type=Path, default=Path("fuzz-failures"), help="failing cases")
    args = ap.parse_args()

    pairs = corpus()
    counts: collections.Counter[str] = collections.Counter()
    end = time.monotonic() + args.minutes * 60
    index = 0
    while time.monotonic() < end:
        rnd = random.Random(args.seed * 1_000_003 + index)
        case = make_case(rnd.choice(pairs), rnd)
        with tempfile.TemporaryDirectory() as tmp:
            outcome, code, stdout, stderr = run_case(case, Path(tmp), args.timeout)
        counts[outcome] += 1
        if outcome not in GOOD:
            folder = save(args.out, index, case, outcome, stdout, stderr)
            last = (stderr.strip().splitlines() or [""])[-1][:160]
            print(f"case {index}: {outcome} (exit {code}) {case.what}")
            print(f"  {last}\n  saved in {folder}")
            sys.stdout.flush()
        index += 1
    bad = sum(n for k, n in counts.items() if k not in GOOD)
    summary = ", ".join(f"{k} {n}" for k, n in sorted(counts.items()))
    print(f"{index} cases in {args.minutes:g} min (seed {args.seed}): {summary}; {bad} failing")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

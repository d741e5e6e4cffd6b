"""Run a benchmark in two checkouts, alternating, and print their timings side by side.

A restructuring is "unchanged within noise" only if old and new trees are measured in
one sitting, under the same load: this script runs ``bench_wgsl.py`` or
``bench_opencl.py`` (given with its own arguments after ``--``) from tree A, then tree
B, then A again, for ``--rounds`` rounds, each run in a fresh process of that
tree's interpreter (``--python-a``/``--python-b``: a virtual environment with the tree
installed, ``pip install --no-deps -e TREE``; an editable install maps
``gpurace.backends`` to its own checkout, so PYTHONPATH alone would mix the trees).
It reads the last markdown table each run prints and reports, per row (kernel and
size), the median of the ``gpurace ms`` column over the rounds for A and B, and B/A
(``--column``, repeatable, names other columns, a table each: ``--column "gpurace ms"
--column "cpu ms"`` for bench_opencl.py). The spread column is (max - min) / median of
A's rounds: a B/A within it is noise. It also prints the load average around the runs
and whether every run of both trees gave the same result cells (records, races,
scope)::

    python bench/ab.py OLD_TREE NEW_TREE --python-a OLD_VENV/bin/python \
        --python-b NEW_VENV/bin/python --rounds 3 -- bench/bench_wgsl.py --scale 0.0625
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path


def last_table(output: str) -> dict[str, dict[str, str]]:
    """The rows of the last markdown table in ``output``, keyed by their first two
    cells (kernel and work-items)."""
    tables: list[list[str]] = []
    current: list[str] = []
    for line in output.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    if not tables:
        raise SystemExit(f"no table in the benchmark's output:\n{output}")
    header, _rule, *rows = tables[-1]
    names = [cell.strip() for cell in header.strip("|").split("|")]
    table = {}
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        table[" ".join(cells[:2])] = dict(zip(names, cells, strict=True))
    return table


# the columns of the benchmarks' tables that are the check's result, not its time
VERDICT_COLUMNS = ("records", "races", "scope")


def verdict(row: dict[str, str]) -> tuple[str, ...]:
    """The row's result cells (VERDICT_COLUMNS that it has): equal in every run of an
    unchanged verdict."""
    return tuple(row[c] for c in VERDICT_COLUMNS if c in row)


def run_once(tree: Path, python: str, script_and_args: list[str]) -> dict[str, dict[str, str]]:
    """One benchmark run in ``tree`` by ``python``, which must import that tree's gpurace."""
    where = subprocess.run(
        [python, "-c", "import gpurace.backends as b; print(b.__path__[0])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    if not Path(where).resolve().is_relative_to(tree):
        raise SystemExit(f"{python} imports gpurace.backends from {where}, not from {tree}")
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run(
        [python, *script_and_args],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{tree}: exit {done.returncode}\n{done.stdout}\n{done.stderr}")
    return last_table(done.stdout)


def print_table(column: str, samples: dict[str, dict[str, list[float]]]) -> None:
    """The per-row medians of ``column`` for A and B, B/A and A's spread."""
    print(f"| kernel | A {column} | B {column} | B/A | A spread |")
    print("|---|---|---|---|---|")
    for kernel, a_values in samples["A"].items():
        b_values = samples["B"].get(kernel, [])
        a_median = statistics.median(a_values)
        b_median = statistics.median(b_values) if b_values else float("nan")
        spread = (max(a_values) - min(a_values)) / a_median if a_median else 0.0
        print(
            f"| {kernel} | {a_median:.1f} | {b_median:.1f} | "
            f"{b_median / a_median:.2f} | {spread:.2f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree_a", type=Path)
    parser.add_argument("tree_b", type=Path)
    parser.add_argument("--python-a", default=sys.executable, help="tree A's interpreter")
    parser.add_argument("--python-b", default=sys.executable, help="tree B's interpreter")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--column",
        action="append",
        help='a timing column to compare (repeatable: one table each); "gpurace ms" if none',
    )
    argv = sys.argv[1:]
    if "--" not in argv:
        parser.error("give the benchmark after --, e.g. -- bench/bench_wgsl.py --scale 0.0625")
    split = argv.index("--")
    args = parser.parse_args(argv[:split])
    bench = argv[split + 1 :]
    columns = args.column or ["gpurace ms"]
    # samples[column][side][kernel]: one value per round
    samples: dict[str, dict[str, dict[str, list[float]]]] = {c: {"A": {}, "B": {}} for c in columns}
    verdicts: dict[str, set[tuple[str, ...]]] = {}
    loads: list[float] = []
    for round_index in range(args.rounds):
        sides = (("A", args.tree_a, args.python_a), ("B", args.tree_b, args.python_b))
        for label, tree, python in sides:
            loads.append(os.getloadavg()[0])
            table = run_once(tree.resolve(), python, bench)
            loads.append(os.getloadavg()[0])
            for kernel, row in table.items():
                for column in columns:
                    value = float(row[column].replace(",", ""))
                    samples[column][label].setdefault(kernel, []).append(value)
                verdicts.setdefault(kernel, set()).add(verdict(row))
            print(f"round {round_index + 1} {label} done", file=sys.stderr)
    print(f"A = {args.tree_a}, B = {args.tree_b}; {' '.join(bench)}; {args.rounds} rounds")
    print(f"load average (1 min) before and after each run: {min(loads):.1f}-{max(loads):.1f}")
    differ = {k: sorted(v) for k, v in verdicts.items() if len(v) > 1}
    print(f"verdicts differ: {differ}" if differ else "verdicts: the same in every run")
    for column in columns:
        print_table(column, samples[column])


if __name__ == "__main__":
    main()

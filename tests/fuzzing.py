"""Mutated inputs for fuzzing gpurace: corpus kernels, launch files and `.sim` files with
a few seeded edits each, and the rule every outcome must keep.

Shared by tests/test_fuzz.py (a bounded, seeded run in CI) and tools/fuzz.py (the long
run). A mutation is drawn from a ``random.Random``, so a seed replays a case exactly.
The rule (``judge``): exit 0, 1 or 2; never a traceback, an internal error, a signal or
a hang; an exit-2 error is one line.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
KERNEL_EXTS = (".wgsl", ".cl", ".cu", ".ptx")

#: values that have broken parsers and size checks before (docs/compatibility.md)
INTERESTING = [
    "0", "-1", "1", "3", "255", "65535", "65536", "2147483648", "4294967295", "4294967296",
    "5000000000", "9223372036854775807", "-9223372036854775808", "1e308", "-0.5", "nan",
    "inf", '"zeros"', '"random"', '"missing.npy"', '"/dev/zero"', '"."', "[[1]]", "[]", "{}",
    '""', '"\u0662"', "true", "'\"'", '"-DX=\\"a"', "[1, 2, 3, 4]", "[0]", "[65536, 65536]",
    "[4294967296]", '"\u00e9"', "[1.5]", '{a = 1}',
]  # fmt: skip
#: numbers put into kernels and .sim files (the .sim ones also in other scripts' digits)
NUMBERS = ["0", "1", "7", "64", "1024", "65535", "4294967295", "4294967296", "99999999999",
           "2\u00b2", "\u0661\u0662", "-1", "1e40", "0x7fffffff"]  # fmt: skip
PUNCT = list("{}()[];,=<>+-*/&|!~\"'#\\") + ["\x00", "\u00e9", "\n"]


@dataclass
class Pair:
    """A corpus kernel and its launch (a TOML file, or a .sim that names the kernel)."""

    kernel: Path
    launch: Path


def corpus() -> list[Pair]:
    """Every kernel with a launch file in tests/corpus and examples (sorted: seeds replay)."""
    pairs = []
    launches = [*CORPUS.rglob("*.toml"), *CORPUS.rglob("*.sim")]
    launches += [
        *ROOT.joinpath("examples").rglob("*.toml"),
        *ROOT.joinpath("examples").rglob("*.sim"),
    ]
    for launch in sorted(launches):
        for ext in KERNEL_EXTS:
            kernel = launch.with_suffix(ext)
            if kernel.exists():
                pairs.append(Pair(kernel, launch))
                break
    return pairs


@dataclass
class Case:
    """One fuzzed input: files to write (name -> text) and the `gpurace` arguments."""

    files: dict[str, str]
    args: list[str]
    what: str  # the mutations made, for the summary

    def write(self, folder: Path) -> None:
        for name, text in self.files.items():
            (folder / name).write_text(text, encoding="utf-8", errors="surrogatepass")


def _lines_edit(text: str, rnd: random.Random) -> tuple[str, str]:
    lines = text.split("\n")
    i = rnd.randrange(len(lines))
    if rnd.random() < 0.5:
        return "\n".join(lines[:i] + lines[i + 1 :]), f"delete line {i + 1}"
    return "\n".join(lines[: i + 1] + lines[i:]), f"duplicate line {i + 1}"


def _char_edit(text: str, rnd: random.Random) -> tuple[str, str]:
    i = rnd.randrange(len(text) + 1)
    choice = rnd.randrange(3)
    if choice == 0 and text:
        return text[:i] + text[i + 1 :], f"delete char {i}"
    if choice == 1:
        return text[:i], f"truncate at {i}"
    c = rnd.choice(PUNCT)
    return text[:i] + c + text[i:], f"insert {c!r} at {i}"


def mutate_toml(text: str, rnd: random.Random) -> tuple[str, str]:
    """One edit of a launch file: a value, a line or a character."""
    lines = text.split("\n")
    keyed = [i for i, ln in enumerate(lines) if re.match(r"\s*[\w\"']+\s*=", ln)]
    roll = rnd.random()
    if keyed and roll < 0.6:
        i = rnd.choice(keyed)
        key = lines[i].split("=", 1)[0].strip()
        value = rnd.choice(INTERESTING)
        lines[i] = f"{key} = {value}"
        return "\n".join(lines), f"{key} = {value}"
    if roll < 0.7:
        keys = ["count", "workgroups", "global_size", "local_size", "options", "local", "value",
                "fill", "type", "binding", "group", "grid"]  # fmt: skip
        key = rnd.choice(keys)
        value = rnd.choice(INTERESTING)
        at = rnd.randrange(len(lines) + 1)
        return "\n".join(lines[:at] + [f"{key} = {value}"] + lines[at:]), f"add {key} = {value}"
    if roll < 0.85:
        return _lines_edit(text, rnd)
    return _char_edit(text, rnd)


def mutate_kernel(text: str, rnd: random.Random) -> tuple[str, str]:
    """One edit of a kernel: a number, deep nesting, a line or a character."""
    numbers = [m for m in re.finditer(r"(?<![\w.])\d+(?![\w.])", text)]
    roll = rnd.random()
    if numbers and roll < 0.45:
        m = rnd.choice(numbers)
        value = rnd.choice(NUMBERS[:9])
        return text[: m.start()] + value + text[m.end() :], f"number {m.group()} -> {value}"
    if numbers and roll < 0.55:
        m = rnd.choice(numbers)
        depth = rnd.choice([20, 255, 300, 3000])
        if rnd.random() < 0.5:
            deep = "(" * depth + m.group() + ")" * depth
        else:
            deep = m.group() + " + 1" * depth
        return text[: m.start()] + deep + text[m.end() :], f"nest {depth} at {m.start()}"
    if roll < 0.8:
        return _lines_edit(text, rnd)
    return _char_edit(text, rnd)


def mutate_sim(text: str, rnd: random.Random) -> tuple[str, str]:
    """One edit of a .sim file: a number (in any script), a header token, a line."""
    numbers = [m for m in re.finditer(r"\d+", text)]
    roll = rnd.random()
    if numbers and roll < 0.5:
        m = rnd.choice(numbers)
        value = rnd.choice(NUMBERS)
        return text[: m.start()] + value + text[m.end() :], f"number {m.group()} -> {value}"
    if roll < 0.65:
        token = rnd.choice(["<size=4 float>", "<size=99999999999 char fill=0>", "<local>",
                            "<size=4 int file=/dev/zero>", "<size=8 float range=0:0:1>",
                            "<size=4 uint hex fill=123456789abcdef>", "<", "1 2 3 x"])  # fmt: skip
        lines = text.split("\n")
        at = rnd.randrange(len(lines) + 1)
        return "\n".join(lines[:at] + [token] + lines[at:]), f"add {token}"
    if roll < 0.85:
        return _lines_edit(text, rnd)
    return _char_edit(text, rnd)


def make_case(pair: Pair, rnd: random.Random, edits: int | None = None) -> Case:
    """``edits`` (1 to 3 by default) seeded mutations of one corpus pair."""
    kernel = pair.kernel.read_text(encoding="utf-8")
    launch = pair.launch.read_text(encoding="utf-8")
    is_sim = pair.launch.suffix == ".sim"
    done = []
    for _ in range(edits or rnd.randint(1, 3)):
        if rnd.random() < 0.35:
            kernel, what = mutate_kernel(kernel, rnd)
            done.append(f"kernel: {what}")
        else:
            launch, what = (mutate_sim if is_sim else mutate_toml)(launch, rnd)
            done.append(f"launch: {what}")
    kname, lname = pair.kernel.name, pair.launch.name
    if is_sim:  # the .sim names its kernel file; keep that name
        args = ["check", "--sim", lname]
    else:
        args = ["check", kname, "--launch", lname]
    return Case({kname: kernel, lname: launch}, args, f"{pair.launch.name}: " + "; ".join(done))


# --------------------------------------------------------------------------- outcomes

_LOCATED = re.compile(r"^(?:\S[^\n]*?: )?error: ")


def judge(returncode: int | None, out: str, err: str) -> str:
    """The outcome of one run: "ok" (exit 0 or 1), "error" (a one-line exit-2 error or
    an incomplete report), else what went wrong: "hang", "crash", "traceback",
    "internal error" or "bad exit"."""
    if returncode is None:
        return "hang"
    if returncode < 0 or returncode > 2:
        return "crash" if returncode < 0 or returncode >= 128 else "bad exit"
    if "Traceback (most recent call last)" in out + err:
        return "traceback"
    if "internal error" in out + err:
        return "internal error"
    if returncode == 2:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        if "result: INCOMPLETE" in out or (len(lines) == 1 and _LOCATED.match(lines[0])):
            return "error"
        return "bad error"
    return "ok"


def run_case(case: Case, folder: Path, timeout: float) -> tuple[str, int | None, str, str]:
    """Write the case into ``folder`` and run `gpurace` on it in a subprocess (a crash
    or hang is an outcome, not the end of the fuzzer): (outcome, exit, stdout, stderr)."""
    case.write(folder)
    try:
        p = subprocess.run(
            [sys.executable, "-m", "gpurace", *case.args],
            cwd=folder, capture_output=True, text=True, timeout=timeout, errors="replace",
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else ""
        return "hang", None, out, ""
    return judge(p.returncode, p.stdout, p.stderr), p.returncode, p.stdout, p.stderr

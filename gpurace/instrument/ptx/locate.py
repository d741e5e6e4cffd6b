"""Where each PTX statement is in the user's source: ``.loc`` and ``.file`` (inlined
code placed at its call site), else the PTX line itself."""

from __future__ import annotations

import re

from .parse import Module, Stmt
from .source import CudaSource


class Locator:
    """The user's file:line:col of each statement, from ``.loc`` (inlined code is
    placed at its call site in a user file: ``inlined_at`` chains are followed)."""

    def __init__(self, mod: Module, user_file: str | None, src: CudaSource | None, path: str):
        self.mod, self.src, self.path = mod, src, path
        self.user: set[int] = set()
        for num, f in mod.files.items():
            if user_file is None or _same_file(f, user_file):
                self.user.add(num)
        if user_file is None:  # PTX input: a library's own lines (Triton's standard.py,
            # CUDA headers) are placed at the user's line that used them
            lib = {n for n in self.user if _LIBRARY.search(mod.files[n])}
            if lib != self.user:
                self.user -= lib
        self.resolved: dict[tuple[int, int, int], tuple[int, int, int]] = {}
        self.current: tuple[int, int, int] | None = None

    def see(self, text: str) -> None:
        m = re.match(r"\.loc\s+(\d+)\s+(\d+)\s+(\d+)(.*)", text)
        if not m:
            return
        here = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        at = re.search(r"inlined_at\s+(\d+)\s+(\d+)\s+(\d+)", m.group(4))
        if at:
            outer = (int(at.group(1)), int(at.group(2)), int(at.group(3)))
            res = outer if outer[0] in self.user else self.resolved.get(outer, outer)
        else:
            res = here
        self.resolved[here] = res
        if res[0] in self.user and res[1] > 0:
            self.current = res

    def where(self, stmt: Stmt) -> tuple[str, int, int, str]:
        """(file, line, col, line text) of the statement's user location."""
        if self.current is None:  # no line info: the PTX itself
            lines = self.mod.ptx.splitlines()
            text = lines[stmt.line - 1].strip() if stmt.line <= len(lines) else ""
            return self.path, stmt.line, 1, text
        f, line, col = self.current
        name = self.mod.files.get(f, self.path)
        if self.src is not None and _same_file(name, self.src.path):
            return self.src.path, line, max(col, 1), self.src.line(line)
        return name, line, max(col, 1), _read_line(name, line)


_LIBRARY = re.compile(r"[/\\](site-packages|dist-packages|include)[/\\]")


def _same_file(a: str, b: str) -> bool:
    import os

    return (
        a == b
        or os.path.basename(a) == os.path.basename(b)
        and (
            os.path.abspath(a) == os.path.abspath(b) or not os.path.isabs(b) or not os.path.isabs(a)
        )
    )


def _read_line(name: str, line: int) -> str:
    try:
        with open(name, encoding="utf-8", errors="replace") as f:
            for i, text in enumerate(f, 1):
                if i == line:
                    return text.rstrip("\n")
    except OSError:
        pass
    return ""


def statement_at(line_text: str, col: int) -> str:
    """The source statement that starts at `col` (``tile[t] = in[g]``,
    ``__syncthreads()``): line info gives statements, not sub-expressions."""
    seg = line_text[col - 1 :] if 0 < col <= len(line_text) else ""
    return seg.split(";")[0].strip()

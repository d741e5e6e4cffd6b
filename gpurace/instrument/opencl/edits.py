"""Nested text edits by source range.

An edit replaces `[start, end)` of the text with what its function builds from the
(already edited) sub-ranges it keeps, so an access inside another access's index is
rewritten inside the outer rewrite. Zero-width edits insert text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

Sub = Callable[[int, int], str]


@dataclass
class Edit:
    start: int
    end: int
    build: Callable[[Sub], str]
    seq: int = 0
    children: list[Edit] = field(default_factory=list)

    def contains(self, e: Edit) -> bool:
        if e.start == e.end:
            return self.start < e.start < self.end
        return self.start <= e.start and e.end <= self.end


def apply(text: str, edits: list[Edit]) -> str:
    """The text with every edit applied (edits must nest, never straddle)."""
    root = Edit(-1, len(text) + 1, lambda sub: sub(0, len(text)))
    for i, e in enumerate(edits):
        e.seq = i
        e.children = []
    stack = [root]
    # at one position: insertions first, then the outermost edit
    for e in sorted(edits, key=lambda e: (e.start, e.end > e.start, e.start - e.end, e.seq)):
        while not stack[-1].contains(e):
            stack.pop()
        stack[-1].children.append(e)
        if e.end > e.start:
            stack.append(e)

    def render(node: Edit) -> str:
        def sub(a: int, b: int) -> str:
            out, pos = [], a
            for ch in node.children:
                if ch.start < a or ch.end > b:
                    continue
                out.append(text[pos : ch.start])
                out.append(render(ch))
                pos = ch.end
            out.append(text[pos:b])
            return "".join(out)

        return node.build(sub)

    return render(root)

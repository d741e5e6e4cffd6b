"""Text helpers shared by the front ends that read source without a full parser.

The PTX reader splits instruction operands, the CUDA source scan splits parameter
lists, and the OpenCL macro expander splits macro arguments: each finds the
parenthesis that closes a list and cuts it at the commas outside brackets. Which
characters count as brackets is the caller's (a CUDA template's ``<...>`` does, a
PTX vector's ``{...}`` does), so it is a parameter.
"""

from __future__ import annotations


def split_top_level(text: str, opens: str = "([{", closes: str = ")]}") -> list[str]:
    """``text`` cut at each comma outside brackets; the pieces are not stripped and
    there is always one more piece than such commas (``""`` gives ``[""]``)."""
    out: list[str] = []
    depth = 0
    start = 0
    for k, c in enumerate(text):
        if c in opens:
            depth += 1
        elif c in closes:
            depth -= 1
        elif c == "," and depth == 0:
            out.append(text[start:k])
            start = k + 1
    out.append(text[start:])
    return out


def matching_paren(text: str, at: int) -> int:
    """The index of the ``)`` that closes the ``(`` at ``at``, or -1 (as ``str.find``)
    when the text ends first."""
    depth = 0
    for k in range(at, len(text)):
        if text[k] == "(":
            depth += 1
        elif text[k] == ")":
            depth -= 1
            if depth == 0:
                return k
    return -1

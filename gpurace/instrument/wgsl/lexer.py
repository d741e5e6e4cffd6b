"""Tokenizer for WGSL, including the spec's template-list discovery.

WGSL's grammar is ambiguous at ``<``: ``a < b`` is a comparison while
``array<f32, 4>`` opens a template list.  The spec resolves this with a
token-level scan (WGSL §3.9 "Template Lists") before parsing; we run the same
scan here so the parser can treat ``TEMPLATE_START``/``TEMPLATE_END`` as
ordinary brackets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpurace.model import GpuraceError

IDENT = "ident"
INT = "int"
FLOAT = "float"
PUNCT = "punct"
EOF = "eof"
TEMPLATE_START = "<t"  # punct value of a '<' that opens a template list
TEMPLATE_END = ">t"  # punct value of a '>' that closes one


@dataclass
class Token:
    """One token; ``offset``/``end`` index the source, line/col are 1-based."""

    kind: str
    value: str
    offset: int
    end: int
    line: int
    col: int


# Longest first: the scanner tries them in this order.
_PUNCTS = [
    ">>=",
    "<<=",
    "->",
    "++",
    "--",
    "+=",
    "-=",
    "*=",
    "/=",
    "%=",
    "&=",
    "|=",
    "^=",
    "&&",
    "||",
    "==",
    "!=",
    "<=",
    ">=",
    "<<",
    ">>",
    "@",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ".",
    ":",
    ";",
    "=",
    "<",
    ">",
    "+",
    "-",
    "*",
    "/",
    "%",
    "&",
    "|",
    "^",
    "!",
    "~",
]

_FLOAT_RE = re.compile(
    r"0[xX](?:[0-9a-fA-F]*\.[0-9a-fA-F]+|[0-9a-fA-F]+\.?)(?:[pP][+-]?[0-9]+)[fh]?"
    r"|0[xX][0-9a-fA-F]*\.[0-9a-fA-F]*(?![0-9a-fA-F])"
    r"|(?:[0-9]*\.[0-9]+|[0-9]+\.[0-9]*)(?:[eE][+-]?[0-9]+)?[fh]?"
    r"|[0-9]+[eE][+-]?[0-9]+[fh]?"
    r"|(?:0|[1-9][0-9]*)[fh]"
)
# 'li'/'lu': naga's 64-bit literals (with the shader-int64 feature)
_INT_RE = re.compile(r"0[xX][0-9a-fA-F]+(?:l?[iu])?|(?:0|[1-9][0-9]*)(?:l?[iu])?")
_IDENT_RE = re.compile(r"[_\w][\w]*", re.UNICODE)
_BLANK = " \t\n\r\v\f\u0085\u200e\u200f\u2028\u2029"


class _Scanner:
    def __init__(self, source: str, path: str):
        self.src = source
        self.path = path
        self.line_starts = [0]
        for i, ch in enumerate(source):
            if ch == "\n":
                self.line_starts.append(i + 1)

    def pos(self, offset: int) -> tuple[int, int]:
        lo, hi = 0, len(self.line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, offset - self.line_starts[lo] + 1

    def error(self, message: str, offset: int) -> GpuraceError:
        line, col = self.pos(offset)
        return GpuraceError(message, self.path, line, col)

    def _skip_block_comment(self, i: int) -> int:
        depth = 0
        n = len(self.src)
        start = i
        while i < n:
            if self.src.startswith("/*", i):
                depth += 1
                i += 2
            elif self.src.startswith("*/", i):
                depth -= 1
                i += 2
                if depth == 0:
                    return i
            else:
                i += 1
        raise self.error("unterminated block comment: expected '*/'", start)

    def tokens(self) -> list[Token]:
        src, n, i = self.src, len(self.src), 0
        out: list[Token] = []
        while i < n:
            ch = src[i]
            if ch in _BLANK:
                i += 1
                continue
            if src.startswith("//", i):
                j = src.find("\n", i)
                i = n if j < 0 else j
                continue
            if src.startswith("/*", i):
                i = self._skip_block_comment(i)
                continue
            m = None
            kind = ""
            if ch.isdigit() or (ch == "." and i + 1 < n and src[i + 1].isdigit()):
                m = _FLOAT_RE.match(src, i)
                kind = FLOAT
                mi = _INT_RE.match(src, i)
                if mi and (not m or mi.end() >= m.end()):
                    m, kind = mi, INT
            elif ch == "_" or ch.isalpha():
                m = _IDENT_RE.match(src, i)
                kind = IDENT
            if m:
                out.append(self._tok(kind, m.group(0), i, m.end()))
                i = m.end()
                continue
            for p in _PUNCTS:
                if src.startswith(p, i):
                    out.append(self._tok(PUNCT, p, i, i + len(p)))
                    i += len(p)
                    break
            else:
                raise self.error(f"unexpected character {ch!r}", i)
        out.append(self._tok(EOF, "", n, n))
        return out

    def _tok(self, kind: str, value: str, start: int, end: int) -> Token:
        line, col = self.pos(start)
        return Token(kind, value, start, end, line, col)


def _split(tok: Token, first: int) -> tuple[Token, Token]:
    """Split a composite '>'-token (``>>``, ``>=``, ``>>=``) after ``first`` chars."""
    a = Token(PUNCT, tok.value[:first], tok.offset, tok.offset + first, tok.line, tok.col)
    b = Token(PUNCT, tok.value[first:], tok.offset + first, tok.end, tok.line, tok.col + first)
    return a, b


def discover_templates(toks: list[Token]) -> list[Token]:
    """Mark template-list brackets (WGSL §3.9), splitting ``>>``/``>=`` when needed."""
    toks = list(toks)
    pending: list[tuple[int, int]] = []  # (index of '<', nesting depth)
    depth = 0
    i = 0
    while i < len(toks):
        t = toks[i]
        v = t.value if t.kind == PUNCT else None
        if t.kind == IDENT and i + 1 < len(toks) and toks[i + 1].value == "<":
            if toks[i + 1].kind == PUNCT:
                pending.append((i + 1, depth))
                i += 2
                continue
        if v is not None and v.startswith(">") and pending and pending[-1][1] == depth:
            if v != ">":
                a, b = _split(t, 1)
                toks[i : i + 1] = [a, b]
            start, _ = pending.pop()
            toks[start].value = TEMPLATE_START
            toks[i].value = TEMPLATE_END
            i += 1
            continue
        if v in ("(", "["):
            depth += 1
        elif v in (")", "]"):
            while pending and pending[-1][1] >= depth:
                pending.pop()
            depth = max(0, depth - 1)
        elif v in (";", "{", ":", "="):
            depth = 0
            pending.clear()
        elif v in ("&&", "||"):
            while pending and pending[-1][1] >= depth:
                pending.pop()
        i += 1
    return toks


def tokenize(source: str, path: str) -> tuple[list[Token], _Scanner]:
    """Tokens of ``source`` (templates discovered) and the scanner (for positions)."""
    sc = _Scanner(source, path)
    return discover_templates(sc.tokens()), sc

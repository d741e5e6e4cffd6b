"""A PTX reader sufficient for what NVRTC, Triton and Numba emit.

PTX is a sequence of statements: directives (``.reg .b32 %r<8>;``, ``.loc 1 7 3``,
``.entry k(...)``), instructions (``@%p1 ld.global.v2.f32 {%f1, %f2}, [%rd3+8];``),
labels (``$L__BB0_2:``) and braces. The rewriter never reprints what it read: it
inserts text at statement boundaries (character offsets into the original), so
anything this reader does not understand passes through unchanged.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

from gpurace.model import GpuraceError

from ..source_text import matching_paren, split_top_level

# directives that end at the end of their line rather than at a ';'
_LINE_DIRECTIVES = (".loc", ".file", ".version", ".target", ".address_size", ".section")
_LABEL = re.compile(r"([$%\w.]+)\s*:(?!:)")
_REG_DECL = re.compile(r"\.reg\s+(?:\.v\d\s+)?\.(\w+)\s+(.+)")
_PARAM = re.compile(
    r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)\s+"
    r"(?:\.ptr(?:\s+\.(?:global|shared|const|local))?(?:\s+\.align\s+\d+)?\s+)?"
    r"([\w$]+)(\[\d*\])?"
)
_VAR_DECL = re.compile(
    r"(?:\.(?:visible|extern|weak|common)\s+)*\.(shared|global)\s+"
    r"(?:\.align\s+(\d+)\s+)?(?:\.v(\d)\s+)?\.(\w+)\s+([\w$]+)((?:\[\d*\])*)"
)


@dataclass
class Stmt:
    """One statement; `start`/`end` are offsets of its text in the original PTX."""

    kind: str  # "stmt" (directive or instruction), "label", "open", "close"
    text: str  # without comments and the trailing ';'
    start: int
    end: int
    line: int  # 1-based line in the PTX
    depth: int  # brace depth before the statement


def split(ptx: str, path: str = "kernel.ptx") -> list[Stmt]:
    """The statements of `ptx`, in order (comments dropped)."""
    out: list[Stmt] = []
    i, n, depth, line = 0, len(ptx), 0, 1
    buf: list[str] = []
    start = -1
    start_line = 1
    inner = 0  # braces inside the current statement: vector operands, initialisers

    def flush(end: int) -> None:
        nonlocal buf, start
        text = "".join(buf).strip()
        if text:
            out.append(Stmt("stmt", " ".join(text.split()), start, end, start_line, depth))
        buf, start = [], -1

    while i < n:
        c = ptx[i]
        if c == "/" and ptx.startswith("//", i):
            j = ptx.find("\n", i)
            i = n if j < 0 else j
            continue
        if c == "/" and ptx.startswith("/*", i):
            j = ptx.find("*/", i + 2)
            if j < 0:
                raise GpuraceError("unterminated /* comment", path, line)
            line += ptx.count("\n", i, j)
            i = j + 2
            continue
        if c == '"':
            j = ptx.find('"', i + 1)
            if j < 0:
                raise GpuraceError("unterminated string", path, line)
            if start < 0:
                start, start_line = i, line
            buf.append(ptx[i : j + 1])
            i = j + 1
            continue
        if c == "\n":
            text = "".join(buf).strip()
            if text.startswith(_LINE_DIRECTIVES) and not text.startswith(".section"):
                flush(i)
            else:
                buf.append(" ")
            line += 1
            i += 1
            continue
        if c in " \t\r" and start < 0:
            i += 1
            continue
        if start < 0:
            start, start_line = i, line
        if c == ";":
            flush(i + 1)
            i += 1
            continue
        if c == "{" and "".join(buf).strip() and not _is_header("".join(buf)):
            inner += 1
            buf.append(c)
            i += 1
            continue
        if c == "}" and inner:
            inner -= 1
            buf.append(c)
            i += 1
            continue
        if c == "{":
            text = "".join(buf).strip()
            if text.startswith(".section"):  # debug sections: skip to the matching brace
                j = ptx.find("}", i)
                j = n - 1 if j < 0 else j
                line += ptx.count("\n", i, j)
                buf, start = [], -1
                i = j + 1
                continue
            flush(i)
            out.append(Stmt("open", "{", i, i + 1, line, depth))
            depth += 1
            i += 1
            continue
        if c == "}":
            flush(i)
            depth -= 1
            out.append(Stmt("close", "}", i, i + 1, line, depth))
            i += 1
            continue
        if c == ":" and not ptx.startswith("::", i) and (i == 0 or ptx[i - 1] != ":"):
            text = "".join(buf).strip()
            if _LABEL.fullmatch(text + ":"):
                out.append(Stmt("label", text, start, i + 1, start_line, depth))
                buf, start = [], -1
                i += 1
                continue
        buf.append(c)
        i += 1
    flush(n)
    return out


def _is_header(text: str) -> bool:
    """Text before a '{' that opens a block rather than a vector operand."""
    t = text.strip()
    return t.startswith(".section") or (
        re.search(r"(^|\s)\.(entry|func)\s", t + " ") is not None and "=" not in t
    )


@dataclass
class Instr:
    """An instruction: guard, opcode parts and operands (split at top-level commas)."""

    guard: str  # "" or "%p1" or "!%p1"
    opcode: str  # "ld.global.v2.f32"
    parts: list[str]  # ["ld", "global", "v2", "f32"]
    operands: list[str]
    text: str

    @property
    def op(self) -> str:
        return self.parts[0]

    def has(self, *mods: str) -> bool:
        return any(m in self.parts for m in mods)


def parse_instr(text: str) -> Instr:
    guard = ""
    t = text
    if t.startswith("@"):
        g, _, t = t.partition(" ")
        guard = g[1:]
        t = t.strip()
    opcode, _, rest = t.partition(" ")
    operands = _split_operands(rest.strip())
    parts = [p for p in opcode.split(".") if p]
    # "shared::cta" -> "shared", keep "::" qualifiers as separate marks
    norm: list[str] = []
    for p in parts:
        base, sep, qual = p.partition("::")
        norm.append(base)
        if sep:
            norm.append(f"::{qual}")
    return Instr(guard, opcode, norm, operands, text)


def _split_operands(s: str) -> list[str]:
    parts = [p.strip() for p in split_top_level(s)]
    return parts[:-1] if not parts[-1] else parts


@dataclass
class Param:
    name: str
    type: str  # "u64", "u32", "f32", "b8" (byte arrays: structs by value)
    array: str  # "" or "[16]"
    index: int
    ptr: bool = False  # declared ".ptr" (Triton: ".param .u64 .ptr .global .align 1 p")


@dataclass
class Function:
    """A ``.entry`` or ``.func`` with its body's statements (between its braces)."""

    name: str
    is_entry: bool
    header: Stmt
    params: list[Param]
    params_end: int  # offset of the ')' that closes the parameter list
    open: Stmt
    close: Stmt
    body: list[Stmt]
    reg_types: dict[str, str] = field(default_factory=dict)  # register -> type


@dataclass
class Module:
    """A parsed PTX module: its statements, functions and module-scope variables."""

    ptx: str
    stmts: list[Stmt]
    functions: list[Function]
    files: dict[int, str]  # .file number -> path
    shared: dict[str, tuple[int | None, int]]  # module .shared name -> (size, align)
    globals: dict[str, tuple[int | None, int]]  # module .global name -> (size, align)
    version: str = ""
    target: str = ""


TYPE_BYTES = {
    "b8": 1, "u8": 1, "s8": 1, "e4m3": 1, "e5m2": 1,
    "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2,
    "b32": 4, "u32": 4, "s32": 4, "f32": 4, "f16x2": 4, "bf16x2": 4, "tf32": 4,
    "b64": 8, "u64": 8, "s64": 8, "f64": 8,
    "b128": 16,
}  # fmt: skip


def var_size(type_: str, vec: str | None, dims: str) -> int | None:
    """Bytes of a declared variable (None for an unsized extern array)."""
    size = TYPE_BYTES.get(type_, 4) * (int(vec) if vec else 1)
    for d in re.findall(r"\[(\d*)\]", dims):
        if not d:
            return None
        size *= int(d)
    return size


def parse_module(ptx: str, path: str = "kernel.ptx") -> Module:
    stmts = split(ptx, path)
    files: dict[int, str] = {}
    shared: dict[str, tuple[int | None, int]] = {}
    globs: dict[str, tuple[int | None, int]] = {}
    functions: list[Function] = []
    version = target = ""
    i = 0
    while i < len(stmts):
        s = stmts[i]
        if s.kind == "stmt" and s.depth == 0:
            if s.text.startswith(".file"):
                m = re.match(r'\.file\s+(\d+)\s+"([^"]*)"', s.text)
                if m:
                    files[int(m.group(1))] = m.group(2)
            elif s.text.startswith(".version"):
                version = s.text.split()[1]
            elif s.text.startswith(".target"):
                target = s.text.split(None, 1)[1]
            elif re.search(r"(^|\s)\.(entry|func)\s", s.text + " ") and i + 1 < len(stmts):
                if stmts[i + 1].kind == "open":
                    fn, i = _function(ptx, stmts, i, path)
                    functions.append(fn)
                    continue
            else:
                m = _VAR_DECL.match(s.text)
                if m:
                    table = shared if m.group(1) == "shared" else globs
                    align = int(m.group(2) or TYPE_BYTES.get(m.group(4), 4))
                    table[m.group(5)] = (var_size(m.group(4), m.group(3), m.group(6)), align)
        i += 1
    return Module(ptx, stmts, functions, files, shared, globs, version, target)


def _function(ptx: str, stmts: list[Stmt], i: int, path: str) -> tuple[Function, int]:
    header = stmts[i]
    m = re.search(r"\.(entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)", header.text)
    if not m:
        raise GpuraceError(
            f"cannot read the function header '{header.text[:60]}'", path, header.line
        )
    is_entry = m.group(1) == "entry"
    name = m.group(2)
    # parameters: the parenthesised list after the name
    after = header.text[m.end() :]
    params: list[Param] = []
    pm = re.match(r"\s*\(([^)]*)\)", after)
    if pm:
        for k, p in enumerate(x for x in pm.group(1).split(",") if x.strip()):
            q = _PARAM.search(p.strip())
            if q:
                ptr = ".ptr" in p and ".ptr .shared" not in p
                params.append(Param(q.group(2), q.group(1), q.group(3) or "", k, ptr))
    # offset of the ')' closing the parameter list in the original text
    seg = ptx[header.start : header.end]
    name_at = seg.find(name)
    open_paren = seg.find("(", name_at)
    params_end = header.start + matching_paren(seg, open_paren) if open_paren >= 0 else -1
    open_ = stmts[i + 1]
    depth = open_.depth
    j = i + 2
    body: list[Stmt] = []
    while j < len(stmts) and not (stmts[j].kind == "close" and stmts[j].depth == depth):
        body.append(stmts[j])
        j += 1
    if j >= len(stmts):
        raise GpuraceError(f"function '{name}' has no closing brace", path, header.line)
    fn = Function(name, is_entry, header, params, params_end, open_, stmts[j], body)
    for s in body:
        if s.kind == "stmt" and s.text.startswith(".reg"):
            r = _REG_DECL.match(s.text)
            if r:
                for reg in r.group(2).split(","):
                    fn.reg_types[re.sub(r"<\d+>", "", reg.strip())] = r.group(1)
    return fn, j + 1


def reg_type(fn: Function, reg: str) -> str | None:
    """The declared type of register `reg` (``%r12`` -> ``b32`` via ``%r<N>``)."""
    if reg in fn.reg_types:
        return fn.reg_types[reg]
    base = re.sub(r"\d+$", "", reg)
    return fn.reg_types.get(base)


def access_size(ins: Instr) -> int | None:
    """Bytes an ld/st/atom accesses: its (last) type times its vector width."""
    vec = 1
    for p in ins.parts:
        if re.fullmatch(r"v\d", p):
            vec = int(p[1:])
    types = [p for p in ins.parts if p in TYPE_BYTES]
    if not types:
        return None
    return TYPE_BYTES[types[-1]] * vec


def immediate_bits(text: str, nbytes: int) -> int | None:
    """The bits of a PTX immediate (``3``, ``0f3F800000``, ``1.5``) in `nbytes`."""
    t = text.strip()
    try:
        if re.fullmatch(r"0[fF][0-9a-fA-F]{8}", t):
            return int(t[2:], 16)
        if re.fullmatch(r"0[dD][0-9a-fA-F]{16}", t):
            return int(t[2:], 16)
        if re.fullmatch(r"-?\d+\.\d*(e-?\d+)?", t):
            fmt = "<f" if nbytes == 4 else "<d"
            return int.from_bytes(struct.pack(fmt, float(t)), "little")
        v = int(t.rstrip("U"), 0)
    except ValueError:
        return None
    return v & ((1 << (8 * nbytes)) - 1)


def prologue_at(fn: Function) -> int:
    """Where an entry's prologue goes: before its first instruction, inner block or
    branch target, but after the declarations before them. NVRTC's ``-G`` puts a
    label (``$L__func_begin0:``, referenced only by debug sections) before the
    ``.shared`` declarations, which ptxas wants declared before the prologue uses
    them; a label that code branches to must still run after the prologue."""
    targets = {
        o.strip()
        for s in fn.body
        if s.kind == "stmt" and not s.text.startswith(".")
        for o in re.findall(r"[$\w.]+", s.text.partition(" ")[2])
    }
    for s in fn.body:
        if (
            s.kind == "open"
            or (s.kind == "label" and s.text in targets)
            or (s.kind == "stmt" and not s.text.startswith("."))
        ):
            return s.start
    return fn.close.start


def reqntid(fn: Function) -> tuple[int, int, int]:
    """An entry's ``.reqntid`` (x, y, z), (0, 0, 0) where it has none."""
    m = re.search(r"\.reqntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", fn.header.text)
    if not m:
        return (0, 0, 0)
    return (int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1))

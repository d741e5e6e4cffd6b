"""Inlining of ``.func`` calls, so that their memory accesses and barriers are
instrumented with the calling entry's state (docs/internals.md §7).

NVRTC inlines device functions unless told not to (``__noinline__``) or compiling for
the debugger (``-G``: ``atomicAdd(__half *)``, ``__syncthreads_count``, cooperative
groups' constructors stay calls). The rewriter only ever inserts text, so a call of
an entry is inlined by inserting, before it, a copy of the callee's body (renamed so
that its registers, labels and variables are its own) and a branch over the call;
after the call each ``ld.param`` of a return value is followed by a load of the
copy's result. Arguments and results pass through ``.local`` variables: PTX allows
``.param`` accesses only around a real call. Calls inside a copied body are copied
in turn; a recursive or indirect call is left as it is (and listed by the rewriter).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from .parse import TYPE_BYTES, Function, Module, Stmt, parse_instr

# a second pair of markers: the rewriter inserts (OPEN/CLOSE) into inlined copies
INLINE_OPEN, INLINE_CLOSE = "/*<gri*/", "/*gri>*/"
MAX_DEPTH = 8
_LINE_DIRECTIVE = re.compile(r"\.(loc|file)\s")  # end at the end of the line, not ';'
_TOKEN = re.compile(r"(?<![\w$%])%?[A-Za-z_$][\w$]*")


@dataclass
class Inlined:
    """The PTX with every inlinable call of an entry inlined, and the callees."""

    ptx: str
    callees: set[str] = field(default_factory=set)


def call_target(text: str) -> tuple[str | None, list[str], list[str]]:
    """(callee, argument names, return names) of a ``call`` statement; callee None
    for an indirect call (through a register)."""
    ins = parse_instr(text)
    ops = list(ins.operands)
    rets: list[str] = []
    if ops and ops[0].startswith("("):
        rets = _names(ops.pop(0))
    if not ops or ops[0].startswith("%"):
        return None, [], rets
    args = _names(ops[1]) if len(ops) > 1 and ops[1].startswith("(") else []
    return ops[0], args, rets


def _names(group: str) -> list[str]:
    return [a.strip() for a in group.strip("()").split(",") if a.strip()]


def ret_params(fn: Function) -> list[tuple[str, int]]:
    """(name, bytes) of the return parameters of a ``.func`` header."""
    m = re.search(r"\.func\s*\(([^)]*)\)", fn.header.text)
    if not m:
        return []
    out = []
    for p in m.group(1).split(","):
        q = re.search(r"\.(\w+)\s+([\w$]+)(?:\[(\d+)\])?\s*$", p.strip())
        if q:
            out.append((q.group(2), TYPE_BYTES.get(q.group(1), 8) * int(q.group(3) or 1)))
    return out


class _Inliner:
    def __init__(self, mod: Module) -> None:
        self.mod = mod
        self.funcs = {f.name: f for f in mod.functions if not f.is_entry}
        self.count = 0
        self.callees: set[str] = set()

    def inlinable(self, name: str | None, stack: tuple[str, ...] = ()) -> bool:
        """A defined callee whose calls are inlinable too, or calls of functions only
        declared here (``__assertfail``: they stay calls, and the rewriter lists them)."""
        if name is None or name not in self.funcs or name in stack or len(stack) >= MAX_DEPTH:
            return False
        for s in self.funcs[name].body:
            if s.kind == "stmt" and parse_instr(s.text).op == "call":
                inner = call_target(s.text)[0]
                if inner is None or (
                    inner in self.funcs and not self.inlinable(inner, (*stack, name))
                ):
                    return False
        return True

    def locals_for(self, n: int, callee: Function, args: list[str], rets: list[str]):
        """Declarations of the copy's argument and result variables, and the maps
        from the caller's .param names to them."""
        decls, argmap, retmap = [], {}, {}
        for k, (p, a) in enumerate(zip(callee.params, args, strict=False)):
            size = TYPE_BYTES.get(p.type, 8) * (int(p.array[1:-1]) if p.array[1:-1] else 1)
            argmap[a] = (f"_gi{n}_a{k}", p.name)
            decls.append(f".local .align 16 .b8 _gi{n}_a{k}[{size}];")
        for k, ((name, size), r) in enumerate(zip(ret_params(callee), rets, strict=False)):
            retmap[r] = (f"_gi{n}_r{k}", name)
            decls.append(f".local .align 16 .b8 _gi{n}_r{k}[{size}];")
        return decls, argmap, retmap

    def body(self, callee: Function, n: int, argmap, retmap, stack: tuple[str, ...]) -> str:
        """The callee's body as a block of its own: parameters and results in the
        caller's .local copies, its names renamed, `ret` a branch to the end."""
        self.callees.add(callee.name)
        stack = (*stack, callee.name)
        params = {theirs: mine for mine, theirs in argmap.values()}
        results = {theirs: mine for mine, theirs in retmap.values()}
        exact, ranges = _declared(callee.body)
        # calls inside: their callseq .param variables become .local copies too
        nested: dict[int, tuple[int, dict, dict]] = {}
        inner_names: list[dict[str, str]] = [{} for _ in callee.body]  # per statement
        for k, s in enumerate(callee.body):
            if s.kind == "stmt" and parse_instr(s.text).op == "call":
                name, args, rets = call_target(s.text)
                if name not in self.funcs:
                    continue  # declared only: stays a call (its .param names renamed)
                self.count += 1
                m = self.count
                _, am, rm = self.locals_for(m, self.funcs[name], args, rets)
                nested[k] = (m, am, rm)
                lo, hi = block_range(callee.body, k)
                for j in range(lo, hi):
                    inner_names[j].update({a: mine for a, (mine, _) in {**am, **rm}.items()})
        here: dict[str, str] = {}

        def rename(tok: str) -> str:
            if tok in params:
                return params[tok]
            if tok in results:
                return results[tok]
            if tok in here:
                return here[tok]
            if tok in exact or tok in ranges or re.sub(r"\d+$", "", tok) in ranges:
                return f"%_gi{n}_{tok[1:]}" if tok.startswith("%") else f"{tok}_gi{n}"
            return tok

        out = ["{"]
        for k, s in enumerate(callee.body):
            here = inner_names[k]
            if s.kind == "label":
                out.append(rename(s.text) + ":")
                continue
            if s.kind != "stmt":
                out.append(s.text)
                continue
            if _LINE_DIRECTIVE.match(s.text):
                out.append(f"\n{s.text}\n")
                continue
            ins = parse_instr(s.text)
            if k in nested:
                m, am, rm = nested[k]
                name = call_target(s.text)[0]
                out.append(self.body(self.funcs[name], m, am, rm, stack))  # type: ignore[index]
                continue
            text = _TOKEN.sub(lambda t: rename(t.group(0)), s.text)
            if ins.op == "ret":
                text = (f"@{ins.guard} " if ins.guard else "") + f"bra $_gi{n}_ret"
            elif s.text.startswith(".param") and re.search(r"\s(_gi\d+_[ar]\d+)", text):
                text = re.sub(r"^\.param\s+(?:\.align\s+\d+\s+)?", ".local .align 16 ", text)
            elif ins.op in ("ld", "st") and ins.has("param") and re.search(r"\[\s*_gi\d+_", text):
                text = re.sub(r"^(@\S+\s+)?(ld|st)\.param", r"\1\2.local", text)
            out.append(text + ";")
        out += [f"$_gi{n}_ret:", "}"]
        return " ".join(out)


def _declared(body: list[Stmt]) -> tuple[set[str], set[str]]:
    """Names a body declares (registers, .local/.param variables, labels): exact
    names, and the bases of register ranges (``%r`` of ``%r<8>``)."""
    exact: set[str] = set()
    ranges: set[str] = set()
    for s in body:
        if s.kind == "label":
            exact.add(s.text)
        elif s.kind == "stmt" and s.text.startswith(".reg"):
            names = re.sub(r"^\.reg\s+(?:\.v\d\s+)?\.\w+\s+", "", s.text)
            for name in names.split(","):
                name = name.strip()
                if name.endswith(">"):
                    ranges.add(name.split("<")[0])
                elif name:
                    exact.add(name)
        elif s.kind == "stmt" and re.match(r"\.(local|param)\s", s.text):
            m = re.search(r"([\w$]+)\s*(?:\[\d*\])*\s*$", s.text)
            if m:
                exact.add(m.group(1))
    return exact, ranges


def inline_calls(mod: Module) -> Inlined:
    """Inline every call of every entry whose callee (and everything it calls) is
    defined in the module and not recursive; the insertions are marked with
    INLINE_OPEN/INLINE_CLOSE, so stripping them gives the original back."""
    inl = _Inliner(mod)
    inserts: list[tuple[int, str]] = []
    for fn in mod.functions:
        if not fn.is_entry:
            continue
        last_loc = ""
        for k, s in enumerate(fn.body):
            if s.kind == "stmt" and s.text.startswith(".loc"):
                last_loc = s.text
            if s.kind != "stmt" or parse_instr(s.text).op != "call":
                continue
            name, args, rets = call_target(s.text)
            if not inl.inlinable(name):
                continue
            inl.count += 1
            n = inl.count
            callee = inl.funcs[name]  # type: ignore[index]
            decls, argmap, retmap = inl.locals_for(n, callee, args, rets)
            copies = _argument_copies(fn.body, k, argmap)
            block = inl.body(callee, n, argmap, retmap, (fn.name,))
            after = f"\n{last_loc}\n" if last_loc else " "
            code = " ".join([*decls, *copies, block]) + f"{after}bra.uni $_gi{n}_after; "
            inserts.append((s.start, code))
            inserts.append((s.end, f" $_gi{n}_after:"))
            for t in _result_loads(fn.body, k, retmap):
                inserts.append(t)
    if not inserts:
        return Inlined(mod.ptx)
    out, pos = [], 0
    for off, text in sorted(inserts, key=lambda x: x[0]):
        out += [mod.ptx[pos:off], INLINE_OPEN, text, INLINE_CLOSE]
        pos = off
    out.append(mod.ptx[pos:])
    return Inlined("".join(out), inl.callees)


def block_range(body: list[Stmt], at: int) -> tuple[int, int]:
    """The statements of the brace block around statement `at` (NVRTC puts each call
    and its .param variables in one: ``{ // callseq``); the whole body if none."""
    depth = body[at].depth
    lo = next(
        (j for j in range(at, -1, -1) if body[j].kind == "open" and body[j].depth < depth), -1
    )
    if lo < 0:
        return 0, len(body)
    hi = next(
        (j for j in range(at, len(body)) if body[j].kind == "close" and body[j].depth < depth),
        len(body),
    )
    return lo, hi + 1


def _argument_copies(body: list[Stmt], at: int, argmap: dict) -> list[str]:
    """The caller's ``st.param`` of each argument (in the call's block, before the
    call), repeated into the copy's .local variable."""
    out = []
    lo, _ = block_range(body, at)
    for s in body[lo:at]:
        if s.kind != "stmt":
            continue
        m = re.match(r"^(@\S+\s+)?st\.param(\S*)\s+\[\s*([\w$]+)", s.text)
        if m and m.group(3) in argmap:
            mine = argmap[m.group(3)][0]
            rest = s.text[m.end() :]
            out.append(f"{m.group(1) or ''}st.local{m.group(2)} [{mine}{rest};")
    return out


def _result_loads(body: list[Stmt], at: int, retmap: dict) -> list[tuple[int, str]]:
    """After each ``ld.param`` of a result (up to the end of the call's block), the
    same load from the copy's result variable."""
    out = []
    depth = body[at].depth
    for s in body[at + 1 :]:
        if s.kind == "close" and s.depth < depth:
            break
        m = re.match(r"^(@\S+\s+)?ld\.param(\S*)\s+(.*)\[\s*([\w$]+)", s.text)
        if s.kind == "stmt" and m and m.group(4) in retmap:
            mine = retmap[m.group(4)][0]
            rest = s.text[m.end() :]
            load = f"{m.group(1) or ''}ld.local{m.group(2)} {m.group(3)}[{mine}{rest};"
            out.append((s.end, " " + load))
    return out


def not_inlined(mod: Module, entries: list[Function], path: str, inlined: set[str]) -> list[str]:
    """A ``.func`` that gpurace could not inline (recursive, or called through a
    pointer) and that accesses tracked memory or waits at a barrier is not
    instrumented (its callers' state is not passed down): say so."""
    out = []
    for f in mod.functions:
        if f.is_entry or f.name in inlined:
            continue
        touches = [
            parse_instr(s.text) for s in f.body if s.kind == "stmt" and not s.text.startswith(".")
        ]
        bad = [
            i for i in touches
            if (i.op in ("ld", "st", "atom", "red", "cp", "ldu", "bar", "barrier")
                and not i.has("param", "local", "const"))
        ]  # fmt: skip
        if not bad:
            continue
        callers = [
            e.name
            for e in entries
            if any(re.search(rf"\b{re.escape(f.name)}\b", s.text) for s in e.body)
        ]
        if callers:
            out.append(
                f"{_where(mod, f, path)}: function '{f.name}' (called by "
                f"{', '.join(callers)}) is not inlined: its {len(bad)} memory/barrier "
                "instructions are not instrumented"
            )
    return out


def _where(mod: Module, f: Function, path: str) -> str:
    """file:line:col of a function: its first ``.loc`` (the user's source), else its
    header's line in the PTX."""
    for s in f.body:
        m = re.match(r"\.loc\s+(\d+)\s+(\d+)\s+(\d+)", s.text) if s.kind == "stmt" else None
        if m and int(m.group(2)) > 0 and int(m.group(1)) in mod.files:
            name = mod.files[int(m.group(1))]
            name = path if os.path.basename(name) == os.path.basename(path) else name
            return f"{name}:{m.group(2)}:{max(int(m.group(3)), 1)}"
    return f"{path}:{f.header.line}:1"

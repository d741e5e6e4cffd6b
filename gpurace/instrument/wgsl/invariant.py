"""Whether an entry point's workgroup-memory accesses are the same in every group.

The prefilter's local area (docs/internals.md §2) runs a state machine per group
and word of workgroup memory, so that a filter run logs only the accesses of the
(group, word, local epoch) buckets that may hold a conflict. When every group makes
the same workgroup-memory accesses (the same work-items, words, kinds and local
epochs) every group's buckets are group 0's, and group 0's area can stand for all
("Group-invariant local accesses" there). This module decides that statically, on
the parsed module: an entry point is *group-invariant* when every access of a
`var<workgroup>` (load, store, atomic, through any expression or pointer) and every
barrier is reached under control flow, and at indices, that depend only on values
that are the same in every group:

- literals, constants, overrides, `local_invocation_id`/`_index`, `num_workgroups`;
- loads of `var<uniform>` and `var<storage, read>` at such indices (nothing writes
  them during a launch: WebGPU refuses a buffer bound both read-only and writable in
  one dispatch, and gpurace refuses it first, `launch.alias.check_alias_usage`),
  `arrayLength`;
- `let`/`var`/`var<private>` values assigned only from those, under such control.

Everything else is *variant*: `workgroup_id`, `global_invocation_id`, subgroup
builtins, loads of read_write storage or of workgroup memory, atomics' and textures'
results, names it does not know. Control dependence is structural: an if/switch/loop
condition that is variant makes its body variant; a `return`/`break`/`continue`
reached under variant control makes what follows it variant (in the function, the
loop, and the loop's later iterations: the whole loop). A call of the module's own
functions is analysed in place with its arguments' invariance (WGSL has no
recursion), pointers included (a store through a pointer marks what it points to).
Facts are flow-insensitive (a variable is variant if any assignment to it is),
repeated until nothing changes. When unsure the answer is variant: the check is
then only slower, never different.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NoReturn

from . import ast as A
from .semantics import Sym

# a builtin value that is the same in every group (anything else is variant)
INVARIANT_BUILTINS = frozenset({"local_invocation_id", "local_invocation_index", "num_workgroups"})
BARRIERS = frozenset({"workgroupBarrier", "storageBarrier", "textureBarrier"})
# builtin functions whose result may differ between groups (or that touch memory)
_VARIANT_PREFIXES = ("atomic", "subgroup", "quad", "texture", "workgroupUniformLoad")
# statement visits before the analysis gives up (variant): a module of many nested
# calls in loops could otherwise cost more than the check it would speed up
BUDGET = 200_000

Key = tuple[tuple[int, ...], str]  # (call path, name); module scope: ((), name)
_ENTRY = (-1,)  # the entry point's call path; a call's adds its offset


class _Variant(Exception):
    """Raised at the first reason found: the answer is variant, no need to go on."""


@dataclass
class _Frame:
    """One analysed call of a function (the entry point's path is _ENTRY)."""

    path: tuple[int, ...]
    names: frozenset[str]  # the function's parameters and local declarations
    ret: bool = True  # every value it returns is invariant


@dataclass
class _Walk:
    syms: dict[str, Sym]
    functions: dict[str, A.Function]
    struct_builtins: dict[str, dict[str, str]]  # struct -> builtin -> member
    variant: set[Key] = field(default_factory=set)
    ptrs: dict[Key, tuple[bool, frozenset[Key]]] = field(default_factory=dict)
    members: dict[Key, dict[str, bool]] = field(default_factory=dict)
    why: str | None = None  # the reason found: variant
    steps: int = 0
    _decls: dict[str, frozenset[str]] = field(default_factory=dict)

    # ----------------------------------------------------------------- facts
    def state(self) -> tuple[int, int]:
        """A measure that only grows while facts are added (for the fixed points)."""
        n = sum(len(t) + (0 if a else 1) for a, t in self.ptrs.values())
        return len(self.variant), n + len(self.ptrs)

    def fail(self, node: A.Node, what: str) -> NoReturn:
        self.why = f"{node.line}:{node.col}: {what}"
        raise _Variant

    def space(self, key: Key) -> str:
        sym = self.syms.get(key[1]) if not key[0] else None
        return sym.space if sym is not None and sym.kind == "gvar" else ""

    def inv(self, key: Key) -> bool:
        """Whether the value of variable `key` is the same in every group."""
        if key in self.variant:
            return False
        if key[0] or key[1] not in self.syms:
            return True
        sym = self.syms[key[1]]
        if sym.kind != "gvar":
            return True  # const, override, a type or function name
        if sym.space == "storage":
            return sym.access == "read"
        return sym.space in ("uniform", "private")

    def resolve(self, name: str, f: _Frame) -> list[Key]:
        """The variables `name` may denote (a local may shadow a module name: both)."""
        keys: list[Key] = []
        if name in f.names:
            keys.append((f.path, name))
        if name in self.syms and (not keys or self.syms[name].kind == "gvar"):
            keys.append(((), name))
        return keys

    def touch(self, node: A.Node, a: bool, targets: Iterable[Key], ctl: bool) -> None:
        """An access of `targets` at an address whose invariance is `a`."""
        if any(self.space(k) == "workgroup" for k in targets):
            if not ctl:
                self.fail(node, "workgroup memory accessed under control flow that may differ")
            elif not a:
                self.fail(node, "workgroup memory accessed at an index that may differ")

    # ----------------------------------------------------------------- expressions
    def ref(self, e: A.Expr, f: _Frame, ctl: bool) -> tuple[bool, frozenset[Key]]:
        """A reference expression: whether its address (indices, pointer) is
        invariant, and the variables it may denote; a value: (its invariance, {})."""
        if isinstance(e, A.Paren):
            return self.ref(e.inner, f, ctl)
        if isinstance(e, A.Ident):
            a, out = True, set[Key]()
            for k in self.resolve(e.name, f):
                if k in self.ptrs:
                    pa, pt = self.ptrs[k]
                    a = a and pa and k not in self.variant
                    out |= pt
                else:
                    out.add(k)
            return a, frozenset(out)
        if isinstance(e, A.Index):
            a, t = self.ref(e.base, f, ctl)
            i = self.value(e.index, f, ctl)
            return a and i, t
        if isinstance(e, A.Member):
            return self.ref(e.base, f, ctl)
        if isinstance(e, A.Unary) and e.op in "*&":
            return self.ref(e.operand, f, ctl)
        return self.value(e, f, ctl), frozenset()

    def value(self, e: A.Expr, f: _Frame, ctl: bool) -> bool:
        """Whether the value of `e` is the same in every group (and its accesses)."""
        if isinstance(e, A.Literal):
            return True
        if isinstance(e, A.Paren):
            return self.value(e.inner, f, ctl)
        if isinstance(e, A.Binary):
            left = self.value(e.left, f, ctl)
            # `&&`/`||` evaluate their right side only as the left side says
            right = ctl and left if e.op in ("&&", "||") else ctl
            return self.value(e.right, f, right) and left
        if isinstance(e, A.Call):
            return self.call(e, f, ctl)
        if isinstance(e, A.Unary) and e.op not in "*&":
            return self.value(e.operand, f, ctl)
        if isinstance(e, A.Member) and isinstance(e.base, A.Ident):
            keys = self.resolve(e.base.name, f)
            if len(keys) == 1 and keys[0] in self.members:
                return self.members[keys[0]].get(e.name, False)
        if isinstance(e, A.Ident | A.Index | A.Member | A.Unary):
            a, t = self.ref(e, f, ctl)
            self.touch(e, a, t, ctl)
            if isinstance(e, A.Unary) and e.op == "&":
                return a  # a pointer: its address
            return a and all(self.inv(k) for k in t)
        self.fail(e, f"an expression the analysis does not know ({type(e).__name__})")

    def pointer(self, e: A.Expr, f: _Frame) -> bool:
        """Whether `e` is a pointer (`&x`, or a name bound to one)."""
        while isinstance(e, A.Paren):
            e = e.inner
        if isinstance(e, A.Unary):
            return e.op == "&"
        return isinstance(e, A.Ident) and any(k in self.ptrs for k in self.resolve(e.name, f))

    def call(self, e: A.Call, f: _Frame, ctl: bool) -> bool:
        name = e.callee.name
        if name in self.functions and name in self.syms and self.syms[name].kind == "fn":
            return self.inline(self.functions[name], e, f, ctl)
        args = [self.value(a, f, ctl) for a in e.args]
        if name in BARRIERS or name == "workgroupUniformLoad":
            if not ctl:
                self.fail(e, f"{name} under control flow that may differ")
        if name == "arrayLength":
            return True  # a buffer's size is the launch's
        if name.startswith(_VARIANT_PREFIXES):
            return False
        return all(args)  # a pure builtin function or a type's constructor

    def inline(self, fn: A.Function, e: A.Call, f: _Frame, ctl: bool) -> bool:
        """A call of the module's own function `fn`, analysed with its arguments."""
        g = _Frame((*f.path, e.start), self.decls(fn))
        for p, arg in zip(fn.params, e.args, strict=False):
            key = (g.path, p.name)
            if self.pointer(arg, f):
                a, t = self.ref(arg, f, ctl)
                self.touch(arg, a, t, ctl)
                self.bind(key, a, t)
            elif not self.value(arg, f, ctl):
                self.variant.add(key)
        while True:
            before = (self.state(), g.ret)
            self.block(fn.body.stmts, g, ctl)
            if (self.state(), g.ret) == before:
                return g.ret

    def bind(self, key: Key, a: bool, targets: frozenset[Key]) -> None:
        pa, pt = self.ptrs.get(key, (True, frozenset()))
        self.ptrs[key] = (pa and a, pt | targets)

    def decls(self, fn: A.Function) -> frozenset[str]:
        if fn.name not in self._decls:
            names = {p.name for p in fn.params}
            stack: list[object] = [fn.body]
            while stack:
                n = stack.pop()
                if isinstance(n, A.VarDecl):
                    names.add(n.name)
                if isinstance(n, list):
                    stack += n
                elif isinstance(n, A.Stmt | A.Case):
                    stack += [v for v in vars(n).values() if isinstance(v, list | A.Node)]
            self._decls[fn.name] = frozenset(names)
        return self._decls[fn.name]

    # ----------------------------------------------------------------- statements
    def block(self, stmts: list[A.Stmt], f: _Frame, ctl: bool) -> set[str]:
        """The statements in order; returns the exits ("return", "break", "continue")
        reached under variant control: what follows one is variant."""
        out: set[str] = set()
        for s in stmts:
            ex = self.stmt(s, f, ctl)
            out |= ex
            ctl = ctl and not ex
        return out

    def assign(self, node: A.Node, lhs: A.Expr, v: bool, old: bool, f: _Frame, ctl: bool) -> None:
        a, t = self.ref(lhs, f, ctl)
        self.touch(node, a, t, ctl)
        if old:  # a compound assignment reads the old value too
            v = v and all(self.inv(k) for k in t)
        for k in t:
            if self.space(k) not in ("workgroup", "storage") and not (a and v and ctl):
                self.variant.add(k)

    def stmt(self, s: A.Stmt, f: _Frame, ctl: bool) -> set[str]:
        self.steps += 1
        if self.steps > BUDGET:
            self.fail(s, "too large to analyse")
        if isinstance(s, A.Block):
            return self.block(s.stmts, f, ctl)
        if isinstance(s, A.VarDecl):
            key = (f.path, s.name)
            if s.init is not None and self.pointer(s.init, f):
                a, t = self.ref(s.init, f, ctl)
                self.touch(s, a, t, ctl)
                self.bind(key, a and ctl, t)
            elif not ((s.init is None or self.value(s.init, f, ctl)) and ctl):
                self.variant.add(key)
            return set()
        if isinstance(s, A.Assign):
            v = self.value(s.rhs, f, ctl)
            if s.lhs is not None:
                self.assign(s, s.lhs, v, s.op != "=", f, ctl)
            return set()
        if isinstance(s, A.IncDec):
            self.assign(s, s.target, True, True, f, ctl)
            return set()
        if isinstance(s, A.CallStmt):
            self.call(s.call, f, ctl)
            return set()
        if isinstance(s, A.If):
            c = self.value(s.cond, f, ctl) and ctl
            ex = self.block(s.then.stmts, f, c)
            if s.orelse is not None:
                ex |= self.stmt(s.orelse, f, c)
            return ex
        if isinstance(s, A.Switch):
            c = self.value(s.expr, f, ctl) and ctl
            ex = set()
            for case in s.cases:
                for sel in case.selectors:
                    if sel is not None:
                        c = self.value(sel, f, ctl) and c
                ex |= self.block(case.body.stmts, f, c) - {"break"}
            return ex
        if isinstance(s, A.Loop | A.For | A.While):
            return self.loop(s, f, ctl)
        if isinstance(s, A.Simple):
            if s.word in ("break", "continue") and not ctl:
                return {s.word}
            if s.word == "discard" and not ctl:
                return {"return"}
            return set()
        if isinstance(s, A.Return):
            v = self.value(s.value, f, ctl) if s.value is not None else True
            f.ret = f.ret and v and ctl
            return set() if ctl else {"return"}
        if isinstance(s, A.ConstAssert):
            return set()
        self.fail(s, f"a statement the analysis does not know ({type(s).__name__})")

    def loop(self, s: A.Loop | A.For | A.While, f: _Frame, ctl: bool) -> set[str]:
        """A loop: its body runs under its condition; a variant condition, `break if`
        or exit from its body makes the whole loop (every iteration) variant."""
        if isinstance(s, A.For) and s.init is not None:
            self.stmt(s.init, f, ctl)
        inner = ctl
        while True:
            c = inner
            if isinstance(s, A.For | A.While) and s.cond is not None:
                c = self.value(s.cond, f, inner) and c
            ex = self.block(s.body.stmts, f, c)
            if isinstance(s, A.Loop):
                if s.continuing is not None:
                    ex |= self.block(s.continuing.stmts, f, c and not ex)
                if s.break_if is not None:
                    c = self.value(s.break_if, f, c) and c
            elif isinstance(s, A.For) and s.update is not None:
                self.stmt(s.update, f, c and not ex)
            if not inner or (c and not ex):
                return {"return"} & ex
            inner = False  # walk it all again as variant


def _entry_frame(w: _Walk, fn: A.Function) -> _Frame:
    f = _Frame(_ENTRY, w.decls(fn))
    for p in fn.params:
        key = (_ENTRY, p.name)
        builtin = next((a.args[0] for a in p.attrs if a.name == "builtin" and a.args), None)
        members = w.struct_builtins.get(p.type.name, {})
        if isinstance(builtin, A.Ident):
            if builtin.name not in INVARIANT_BUILTINS:
                w.variant.add(key)
        elif members:
            w.members[key] = {m: b in INVARIANT_BUILTINS for b, m in members.items()}
            if not all(w.members[key].values()):
                w.variant.add(key)
        else:
            w.variant.add(key)
    return f


def variant_reason(
    syms: dict[str, Sym],
    functions: dict[str, A.Function],
    struct_builtins: dict[str, dict[str, str]],
    entry: A.Function,
) -> str | None:
    """None when `entry`'s workgroup-memory accesses and barriers are group-invariant
    (see the module doc), else why not ("line:col: what", the first reason found)."""
    w = _Walk(syms, functions, struct_builtins)
    f = _entry_frame(w, entry)
    try:
        while True:
            before = w.state()
            w.block(entry.body.stmts, f, True)
            if w.state() == before:
                return None
    except _Variant:
        return w.why
